"""Turn an :class:`~scaler.engine.Evaluation` into the report models, JSON or YAML, or the
terminal table (:mod:`scaler.report.table`)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import yaml

from scaler.engine import Evaluation, NodeResult
from scaler.model.records import Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.report.models import (
    BlockingPodModel,
    DryRunReport,
    MoveModel,
    NodeReport,
    PodCounts,
    RequestUtilizationModel,
    ResourceFigures,
    SummaryModel,
    TaintModel,
    TolerationModel,
    UtilizationModel,
)

__all__ = ["build_report", "report_json", "report_yaml"]


def _figures(r: Resources) -> ResourceFigures:
    return ResourceFigures(cpu_millicores=r.cpu_millicores, memory_bytes=r.memory_bytes, pods=r.pods)


def _node_report(res: NodeResult, snapshot: ClusterSnapshot, counted: dict[str, list[Any]]) -> NodeReport:
    node, u = res.node, res.utilization
    pods = counted.get(node.name, [])
    requested = Resources()
    for p in pods:
        requested = requested + p.requests
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
        requested=_figures(requested),
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
    )


def build_report(
    evaluation: Evaluation, snapshot: ClusterSnapshot, source: str, *, compare: bool = True
) -> DryRunReport:
    """Build the :class:`DryRunReport` for ``evaluation`` of ``snapshot`` read from ``source``.

    With ``compare`` (default) the report also carries cluster-autoscaler's rule side by side and
    what keeps underused nodes (:mod:`scaler.report.compare`: two more evaluations).

    Raises:
        scaler.simulator.registry.PluginError: as :func:`scaler.engine.evaluate`.
    """
    from scaler.engine import counted_pods
    from scaler.report.compare import compare_with_requests_rule, removal_outcome, requests_bound

    counted = counted_pods(snapshot, evaluation.config)
    nodes = [_node_report(r, snapshot, counted) for r in evaluation.nodes]
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
    )
    flags = {k.replace("_", "-"): v for k, v in evaluation.config.model_dump(mode="json").items()}
    return DryRunReport(
        generated_at=dt.datetime.fromtimestamp(evaluation.now, dt.UTC).isoformat().replace("+00:00", "Z"),
        source=source,
        nodes=nodes,
        summary=summary,
        comparison=compare_with_requests_rule(snapshot, evaluation.config, evaluation) if compare else None,
        requests_bound=requests_bound(snapshot, evaluation.config, evaluation) if compare else None,
        flags=flags,
    )


def _document(report: DryRunReport) -> dict[str, Any]:
    return report.model_dump(mode="json", by_alias=True)


def report_json(report: DryRunReport) -> str:
    """The report as JSON text (camelCase keys, as in the schema)."""
    return json.dumps(_document(report), indent=2)


def report_yaml(report: DryRunReport) -> str:
    """The report as YAML text (the same document as :func:`report_json`, keys in schema order)."""
    return yaml.safe_dump(_document(report), sort_keys=False, allow_unicode=True)
