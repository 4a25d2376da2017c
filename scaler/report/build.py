"""Turn an :class:`~scaler.engine.Evaluation` into the report models, JSON, or a terminal table."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from scaler.config import ScalerConfig
from scaler.eligibility import node_group_limits
from scaler.engine import Evaluation, NodeResult
from scaler.model.records import Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import NodeStatus
from scaler.replay.prices import PriceTable, load_price_table
from scaler.report.models import (
    BlockingPodModel,
    CostModel,
    DryRunReport,
    MoveModel,
    NodeReport,
    PodCounts,
    RequestUtilizationModel,
    ResourceFigures,
    SavingsModel,
    SummaryModel,
    TaintModel,
    TolerationModel,
    UtilizationModel,
)
from scaler.utilization import MetricsStatus

__all__ = [
    "build_report",
    "effective_flags",
    "print_table",
    "report_json",
    "savings",
    "savings_line",
    "usd_month",
]


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
        request_utilization=RequestUtilizationModel(
            cpu=u.request_cpu, memory=u.request_memory, value=u.request_value
        ),
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
    )


def savings(nodes: list[NodeReport], prices: PriceTable) -> SavingsModel:
    """The monthly cost of the removable ``nodes``: the sum of the known prices, ``None`` when
    some are removable and none has a price (unknown, never 0)."""
    removable = [n for n in nodes if n.removable]
    known = [n.cost.monthly_usd for n in removable if n.cost.monthly_usd is not None]
    return SavingsModel(
        monthly_usd=sum(known) if known or not removable else None,
        priced_nodes=len(known),
        unpriced_nodes=len(removable) - len(known),
        price_source=prices.source,
        price_date=prices.date,
    )


def effective_flags(config: ScalerConfig, snapshot: ClusterSnapshot) -> dict[str, Any]:
    """The configuration with flag names as keys; ``node-pools`` holds, for every node pool of
    the snapshot or of the configuration, its effective per-pool values
    (:meth:`~scaler.config.ScalerConfig.for_pool`) and its ``--nodes`` / ``node-pools`` limits."""
    flags = {k.replace("_", "-"): v for k, v in config.model_dump(mode="json", by_alias=True).items()}
    limits = node_group_limits(config, snapshot.nodes)
    pools: dict[str, Any] = {}
    for pool in sorted({n.node_group for n in snapshot.nodes if n.node_group} | set(config.node_pools)):
        values = {k.replace("_", "-"): v for k, v in asdict(config.for_pool(pool)).items()}
        spec = limits.get(pool)
        if spec is not None:
            values |= {"min-size": spec.min_size, "max-size": spec.max_size}
        pools[pool] = values
    flags["node-pools"] = pools
    return flags


def build_report(
    evaluation: Evaluation, snapshot: ClusterSnapshot, source: str, prices: PriceTable | None = None
) -> DryRunReport:
    """Build the :class:`DryRunReport` for ``evaluation`` of ``snapshot`` read from ``source``,
    with node costs from ``prices`` (default: the bundled table)."""
    from scaler.engine import counted_pods

    prices = prices if prices is not None else load_price_table()
    counted = counted_pods(snapshot, evaluation.config)
    nodes = [_node_report(r, snapshot, counted, prices) for r in evaluation.nodes]
    removable = [r for r in evaluation.nodes if r.removable]
    summary = SummaryModel(
        nodes=len(nodes),
        removable=len(removable),
        removable_empty=sum(1 for r in removable if r.status is NodeStatus.REMOVABLE_EMPTY),
        removable_drain=sum(1 for r in removable if r.status is NodeStatus.REMOVABLE_DRAIN),
        unremovable=len(nodes) - len(removable),
        pods_to_move=sum(len(r.moves) for r in removable),
        freed_cpu_millicores=sum(r.node.allocatable.cpu_millicores for r in removable),
        freed_memory_bytes=sum(r.node.allocatable.memory_bytes for r in removable),
        unremovable_by_reason=dict(sorted(evaluation.reason_counts().items())),
        savings=savings(nodes, prices),
    )
    flags = effective_flags(evaluation.config, snapshot)
    return DryRunReport(
        generated_at=dt.datetime.fromtimestamp(evaluation.now, dt.UTC).isoformat().replace("+00:00", "Z"),
        source=source,
        nodes=nodes,
        summary=summary,
        flags=flags,
    )


def report_json(report: DryRunReport) -> str:
    """The report as JSON text (camelCase keys, as in the schema)."""
    return report.model_dump_json(by_alias=True, indent=2)


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


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.0%}"


_STATUS_STYLE = {
    NodeStatus.REMOVABLE_EMPTY.value: "bold green",
    NodeStatus.REMOVABLE_DRAIN.value: "green",
    NodeStatus.UNREMOVABLE.value: "dim",
}


def print_table(report: DryRunReport, console: Console) -> None:
    """Print the node table (removable nodes first, in removal order) and the summary."""
    rows = sorted(
        report.nodes,
        key=lambda n: (
            not n.removable,
            n.rank if n.rank is not None else 0,
            n.utilization.value or 9.0,
            n.name,
        ),
    )
    src = rows[0].utilization.source if rows else "usage"
    sv = report.summary.savings
    title = f"scaler dry-run — {report.source} at {report.generated_at}; prices: {sv.price_source}, {sv.price_date}"
    table = Table(title=title, show_lines=False)
    table.add_column("node", no_wrap=True)
    table.add_column("group", no_wrap=True)
    table.add_column("zone", no_wrap=True)
    table.add_column(f"cpu% {src}", justify="right")
    table.add_column(f"mem% {src}", justify="right")
    table.add_column("cpu% req", justify="right")
    table.add_column("mem% req", justify="right")
    table.add_column("status", no_wrap=True)
    table.add_column("reason")
    table.add_column("pods to move", justify="right")
    table.add_column("$/month", justify="right")
    for n in rows:
        reason = n.reason if n.removable is False else ""
        if n.blocking_pod is not None:
            reason = f"{n.reason}: {n.blocking_pod.namespace}/{n.blocking_pod.name} ({n.blocking_pod.reason})"
        elif not n.removable:
            reason = f"{n.reason}: {n.detail}"
        table.add_row(
            n.name,
            n.node_group or "—",
            n.zone or "—",
            _pct(n.utilization.cpu),
            _pct(n.utilization.memory),
            _pct(n.request_utilization.cpu),
            _pct(n.request_utilization.memory),
            f"[{_STATUS_STYLE[n.status]}]{n.status}[/]",
            reason,
            str(len(n.moves)) if n.moves else ("0" if n.removable else ""),
            usd_month(n.cost.monthly_usd),
        )
    console.print(table)
    s = report.summary
    console.print(
        f"[bold]{s.removable} of {s.nodes} nodes removable[/] "
        f"({s.removable_empty} empty, {s.removable_drain} by drain, {s.pods_to_move} pods to move); "
        f"frees {s.freed_cpu_millicores / 1000:.1f} vCPU and {s.freed_memory_bytes / 2**30:.1f} GiB allocatable."
    )
    console.print(savings_line(report))
    if s.unremovable_by_reason:
        parts = ", ".join(
            f"{k} {v}" for k, v in sorted(s.unremovable_by_reason.items(), key=lambda kv: -kv[1])
        )
        console.print(f"Unremovable: {parts}.")
    if any(n.metrics == MetricsStatus.MISSING.value for n in report.nodes):
        console.print(
            "[yellow]Some nodes have no metrics.k8s.io NodeMetrics; they are never treated as idle.[/]"
        )
