"""Turn an :class:`~scaler.engine.Evaluation` into the report models, JSON or YAML, or the
terminal table (:mod:`scaler.report.table`)."""

from __future__ import annotations

from typing import Any

import yaml

from scaler.config import POOL_KEYS, ScalerConfig
from scaler.engine import Evaluation, NodeResult
from scaler.limits import node_group_limits
from scaler.model.records import Node, Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_time
from scaler.prices import PriceTable, load_price_table
from scaler.relief import ReliefPlan
from scaler.report.compare import Variants, compare_with_requests_rule, removal_outcome, requests_bound
from scaler.report.models import (
    BlockingPodModel,
    CostModel,
    DraModel,
    DraPoolModel,
    DryRunReport,
    GpuModel,
    HotNodeModel,
    MoveModel,
    NodeReport,
    PodCounts,
    ReliefEvictionModel,
    ReliefKeptModel,
    ReliefModel,
    RequestUtilizationModel,
    ResourceFigures,
    SavingsModel,
    SummaryModel,
    TaintModel,
    TolerationModel,
    UtilizationModel,
)
from scaler.utilization import RESOURCE_GPU, NodeUtilization

__all__ = [
    "build_report",
    "effective_flags",
    "relief_model",
    "report_json",
    "report_yaml",
    "savings",
    "savings_line",
    "usd_month",
]


def _request_utilization(node: Node, u: NodeUtilization) -> RequestUtilizationModel:
    """CA's requests-based fractions of ``node``; ``None`` for a resource without allocatable."""
    cpu = u.request_cpu if node.allocatable.cpu_millicores > 0 else None
    memory = u.request_memory if node.allocatable.memory_bytes > 0 else None
    value = None if cpu is None or memory is None else u.request_value
    return RequestUtilizationModel(cpu=cpu, memory=memory, value=value)


def _figures(r: Resources) -> ResourceFigures:
    return ResourceFigures(cpu_millicores=r.cpu_millicores, memory_bytes=r.memory_bytes, pods=r.pods)


def _node_report(
    res: NodeResult, snapshot: ClusterSnapshot, counted: dict[str, list[Any]], prices: PriceTable
) -> NodeReport:
    node, u = res.node, res.utilization
    price = prices.node_price(node)
    pods = counted.get(node.name, [])
    requested = ResourceFigures(
        cpu_millicores=sum(p.requests.cpu_millicores for p in pods),
        memory_bytes=sum(p.requests.memory_bytes for p in pods),
        pods=sum(p.requests.pods for p in pods),
    )
    bp = res.blocking_pod
    return NodeReport(
        name=node.name,
        node_group=node.node_group,
        zone=node.zone,
        status=res.status.value,
        removable=res.removable,
        empty=u.empty,
        reason=res.reason.value,
        detail=res.detail,
        rank=res.rank,
        utilization=UtilizationModel(
            cpu=u.cpu, memory=u.memory, value=u.value, resource=u.resource, source=u.source
        ),
        request_utilization=_request_utilization(node, u),
        metrics=u.metrics.value,
        allocatable=_figures(node.allocatable),
        requested=requested,
        usage=ResourceFigures(cpu_millicores=u.usage_cpu_millicores, memory_bytes=u.usage_memory_bytes),
        labels=dict(node.labels),
        taints=[TaintModel(key=t.key, value=t.value, effect=t.effect) for t in node.taints],
        unschedulable=node.unschedulable,
        pods=PodCounts(
            total=len(pods),
            daemon_set=sum(1 for p in pods if p.is_daemonset),
            mirror=sum(1 for p in pods if p.is_mirror),
            to_move=len(res.moves),
        ),
        blocking_pod=(
            BlockingPodModel(
                namespace=bp.pod.namespace, name=bp.pod.name, reason=bp.reason.value, detail=bp.detail
            )
            if bp is not None
            else None
        ),
        moves=[
            MoveModel(
                pod=p.key,
                destination=dest,
                priority=p.priority,
                requests=_figures(p.requests),
                tolerations=[
                    TolerationModel(key=t.key, operator=t.operator, value=t.value, effect=t.effect)
                    for t in p.tolerations
                ],
                node_selector=dict(p.node_selector),
            )
            for p, dest in res.moves
        ],
        cost=CostModel(
            machine_type=price.machine_type,
            region=price.region,
            pricing=price.kind,
            hourly_usd=price.hourly_usd,
            monthly_usd=price.monthly_usd,
        ),
        gpu=None
        if u.gpu is None
        else GpuModel(
            allocatable=u.gpus,
            requested=sum(p.requests.extended.get(RESOURCE_GPU, 0) for p in pods),
            request_utilization=u.gpu,
            usage=u.gpu_usage,
            judged_by="requests" if u.gpu_usage is None else "requests and usage",
        ),
        dra=_dra_model(u),
    )


def _dra_model(u: NodeUtilization) -> DraModel | None:
    """The node's DRA utilization in the report; ``None`` (absent in JSON) for a node without it."""
    if u.dra is None:
        return None
    return DraModel(
        utilization=u.dra.value,
        resource=u.dra.resource,
        pools=[DraPoolModel(driver=d, pool=p, utilization=v) for d, p, v in u.dra.pools],
        usage=u.gpu_usage,
        judged_by="allocations" if u.gpu_usage is None else "allocations and usage",
        error=u.dra.error,
    )


def relief_model(plan: ReliefPlan, config: ScalerConfig, snapshot: ClusterSnapshot) -> ReliefModel:
    """The report's hot-node relief section for ``plan``."""
    metrics = snapshot.pod_metrics

    def used(pod_ns: str, pod_name: str) -> tuple[int | None, int | None]:
        m = metrics.get((pod_ns, pod_name))
        return (m.cpu_millicores, m.memory_bytes) if m is not None else (None, None)

    hot = []
    for r in plan.reliefs:
        h = r.hot
        hot.append(
            HotNodeModel(
                name=h.name,
                utilization=UtilizationModel(
                    cpu=h.cpu,
                    memory=h.memory,
                    value=max(h.cpu, h.memory),
                    resource="cpu" if h.cpu > h.memory else "memory",
                    source="usage",
                ),
                usage=ResourceFigures(cpu_millicores=h.cpu_millicores, memory_bytes=h.memory_bytes),
                waterline=ResourceFigures(
                    cpu_millicores=int(h.cpu_waterline_millicores), memory_bytes=int(h.memory_waterline_bytes)
                ),
                evictions=[
                    ReliefEvictionModel(
                        pod=p.key,
                        destination=dest,
                        cpu_millicores=used(p.namespace, p.name)[0],
                        memory_bytes=used(p.namespace, p.name)[1],
                    )
                    for p, dest in r.evictions
                ],
                kept=[ReliefKeptModel(pod=p.key, reason=why) for p, why in r.kept],
                remaining_gap=ResourceFigures(
                    cpu_millicores=int(r.remaining_cpu_gap_millicores),
                    memory_bytes=int(r.remaining_memory_gap_bytes),
                ),
                gap_closed=r.gap_closed,
                capped=r.capped,
                held=r.held,
                detail=r.detail,
            )
        )
    return ReliefModel(
        cpu_threshold=config.hot_node_cpu_threshold,
        memory_threshold=config.hot_node_memory_threshold,
        max_evictions_per_loop=config.max_relief_evictions_per_loop,
        evictions=plan.evictions,
        hot_nodes=hot,
    )


def savings(
    nodes: list[NodeReport], prices: PriceTable, snapshot: ClusterSnapshot | None = None
) -> SavingsModel:
    """The monthly cost of the removable ``nodes``: the sum of the known prices, ``None`` when
    some are removable and none has a price (unknown, never 0); the source names every table a
    removable node was priced from (:meth:`PriceTable.attribution`)."""
    removable = [n for n in nodes if n.removable]
    known = [n.cost.monthly_usd for n in removable if n.cost.monthly_usd is not None]
    by_name = snapshot.node_by_name if snapshot is not None else {}
    source, date = prices.attribution(
        prices.node_price(by_name[n.name]).origin for n in removable if n.name in by_name
    )
    return SavingsModel(
        monthly_usd=sum(known) if known or not removable else None,
        priced_nodes=len(known),
        unpriced_nodes=len(removable) - len(known),
        price_source=source,
        price_date=date,
    )


def effective_flags(config: ScalerConfig, snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The configuration with flag names as keys; ``node-pools`` holds, for every node pool of
    the snapshot or of the configuration, its effective per-pool values
    (:meth:`~scaler.config.ScalerConfig.for_pool`) and its ``--nodes`` / ``node-pools`` limits
    (those of each of its zones)."""
    flags = {k.replace("_", "-"): v for k, v in config.model_dump(mode="json", by_alias=True).items()}
    limits = node_group_limits(config, snapshot.nodes)
    pools: dict[str, Any] = {}
    for pool in sorted({n.node_group for n in snapshot.nodes if n.node_group} | set(config.node_pools)):
        effective = config.for_pool(pool)
        values = {k.replace("_", "-"): getattr(effective, k) for k in POOL_KEYS}
        spec = limits.pools.get(pool)  # limits of each of the pool's zones
        if spec is not None:
            values |= {"min-size": spec.min_size, "max-size": spec.max_size}
        pools[pool] = values
    flags["node-pools"] = pools
    return flags


def build_report(
    evaluation: Evaluation,
    snapshot: ClusterSnapshot,
    source: str,
    prices: PriceTable | None = None,
    *,
    variants: Variants | None = None,
    relief: ReliefPlan | None = None,
) -> DryRunReport:
    """Build the :class:`DryRunReport` for ``evaluation`` of ``snapshot`` read from ``source``,
    with node costs from ``prices`` (default: the bundled table).

    With ``variants`` (:func:`scaler.report.compare.start_variants` of the same snapshot and
    configuration) the report also carries cluster-autoscaler's rule side by side and what keeps
    underused nodes; with ``relief`` (``--hot-node-relief``), the hot nodes and their relief.

    Raises:
        scaler.simulator.registry.PluginError: as :func:`scaler.engine.evaluate`, from a variant.
        scaler.forked.ForkedError: a variant's process died.
    """
    from scaler.engine import counted_pods

    prices = prices if prices is not None else load_price_table()
    counted = counted_pods(snapshot, evaluation.config)
    nodes = [_node_report(r, snapshot, counted, prices) for r in evaluation.nodes]
    outcome = removal_outcome(evaluation, "scaler")
    summary = SummaryModel(
        nodes=len(nodes),
        removable=outcome.removable,
        removable_empty=outcome.removable_empty,
        removable_drain=outcome.removable_drain,
        unremovable=len(nodes) - outcome.removable,
        pods_to_move=outcome.pods_to_move,
        freed_cpu_millicores=outcome.freed_cpu_millicores,
        freed_memory_bytes=outcome.freed_memory_bytes,
        unremovable_by_reason=dict(sorted(evaluation.reason_counts().items())),
        savings=savings(nodes, prices, snapshot),
    )
    flags = effective_flags(evaluation.config, snapshot)
    return DryRunReport(
        generated_at=format_time(evaluation.now),
        source=source,
        nodes=nodes,
        summary=summary,
        comparison=compare_with_requests_rule(variants.ca_rule.result(), evaluation) if variants else None,
        requests_bound=requests_bound(variants.rightsized.result(), evaluation) if variants else None,
        relief=relief_model(relief, evaluation.config, snapshot) if relief is not None else None,
        flags=flags,
    )


def _document(report: DryRunReport) -> dict[str, Any]:
    return report.model_dump(mode="json", by_alias=True)


def report_json(report: DryRunReport) -> str:
    """The report as JSON text (camelCase keys, as in the schema)."""
    return report.model_dump_json(by_alias=True, indent=2)  # the same text as json.dumps, in Rust


def report_yaml(report: DryRunReport) -> str:
    """The report as YAML text (the same document as :func:`report_json`, keys in schema order)."""
    return yaml.safe_dump(_document(report), sort_keys=False, allow_unicode=True)


def usd_month(v: float | None) -> str:
    """A monthly cost for the terminal: ``$97.09`` or ``unknown`` (never 0 for no price)."""
    return "unknown" if v is None else f"${v:,.2f}"


def savings_line(report: DryRunReport) -> str:
    """The table's savings sentence: the removable nodes' monthly cost and the price source."""
    sv = report.summary.savings
    unpriced = (
        f"; {sv.unpriced_nodes} removable node(s) of unknown price not counted" if sv.unpriced_nodes else ""
    )
    return (
        f"Removable nodes cost {usd_month(sv.monthly_usd)}/month{unpriced} "
        f"(prices: {sv.price_source}, {sv.price_date})."
    )
