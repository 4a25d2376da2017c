"""The dry-run report as ``kubectl get`` would print it, then its summary in a few sentences.

Default view (fits 80 columns with GKE node names): ``NAME STATUS CPU% MEM% REASON``: the
status is ``empty`` (removable, only DaemonSet/mirror pods), ``drain`` (removable, its pods fit
elsewhere) or ``keep`` (unremovable), the usage columns are real usage / allocatable (requests /
allocatable with ``--utilization-source=requests``), and the reason is a short phrase
(:data:`SHORT_REASON`, :data:`SHORT_BLOCKING_REASON`). ``-o wide`` adds the requests-based
columns, the node group, the zone, the pods to move and the node's monthly cost, and gives the
full reason: CA's ``UnremovableReason`` with its detail. When the cluster has GPU nodes a
``GPU%`` column follows ``MEM%``: requested GPUs / allocatable, and ``/`` the real GPU usage
(DCGM) when known; ``-`` on the other nodes. When nodes have devices of DRA drivers a ``DRA%``
column follows: their highest pool's allocated devices (cluster-autoscaler's DRA utilization),
``/`` the real GPU usage when known, ``?`` when it cannot be computed. Node names are never cut (:mod:`scaler.report.columns`).

After the table: the summary with the removable nodes' monthly cost, cluster-autoscaler's rule
side by side, the unremovable nodes per
reason, and, when requests keep nodes that real usage would let go, what blocks
(:mod:`scaler.report.compare`); with ``--hot-node-relief``, the hot nodes and their relief
(:func:`relief_section`). Prose wraps at the terminal width (``$COLUMNS`` first); piped
output without ``$COLUMNS`` is not wrapped.
"""

from __future__ import annotations

from typing import TextIO

from scaler.reasons import NodeStatus, UnremovableReason
from scaler.report.build import savings_line, usd_month
from scaler.report.columns import output_width, render_columns, wrap_text
from scaler.report.models import (
    ComparisonModel,
    DryRunReport,
    HotNodeModel,
    NodeReport,
    ReliefModel,
    RemovalOutcomeModel,
    RequestsBoundModel,
    ResourceFigures,
    WorkloadRequestsModel,
)
from scaler.utilization import MetricsStatus

__all__ = [
    "SHORT_BLOCKING_REASON",
    "SHORT_REASON",
    "SHORT_STATUS",
    "blocks_section",
    "comparison_sentence",
    "cpu_quantity",
    "full_reason",
    "memory_quantity",
    "node_table",
    "print_table",
    "relief_section",
    "short_reason",
    "summary_lines",
    "workload_table",
]

SHORT_STATUS: dict[str, str] = {
    NodeStatus.REMOVABLE_EMPTY.value: "empty",
    NodeStatus.REMOVABLE_DRAIN.value: "drain",
    NodeStatus.UNREMOVABLE.value: "keep",
}
"""The STATUS column: the report's ``status`` in one word."""

SHORT_REASON: dict[str, str] = {
    UnremovableReason.ScaleDownDisabledAnnotation: "scale-down off",
    UnremovableReason.ScaleDownUnreadyDisabled: "not ready",
    UnremovableReason.NotAutoscaled: "not autoscaled",
    UnremovableReason.NotUnneededLongEnough: "not unneeded yet",
    UnremovableReason.NotUnreadyLongEnough: "not unready yet",
    UnremovableReason.NodeGroupMinSizeReached: "pool at min size",
    UnremovableReason.NodeGroupMaxDeletionCountReached: "max deletions",
    UnremovableReason.AtomicScaleDownFailed: "atomic failed",
    UnremovableReason.MinimalResourceLimitExceeded: "resource limit",
    UnremovableReason.CurrentlyBeingDeleted: "being deleted",
    UnremovableReason.NotUnderutilized: "above threshold",
    UnremovableReason.NotUnneededOtherReason: "other",
    UnremovableReason.RecentlyUnremovable: "recently checked",
    UnremovableReason.NoPlaceToMovePods: "pods fit nowhere",
    UnremovableReason.BlockedByPod: "blocked by pod",
    UnremovableReason.UnexpectedError: "unexpected error",
    UnremovableReason.NoNodeInfo: "no node info",
    UnremovableReason.BlockedByOnCompletionPod: "pod to complete",
    UnremovableReason.MetricsUnavailable: "no metrics",
    UnremovableReason.DestinationForMovedPods: "receives pods",
    UnremovableReason.ScaleDownBudgetExhausted: "budget exhausted",
    UnremovableReason.UnreadableObject: "unreadable",
}
"""The default view's REASON for a kept node (at most 16 columns); ``-o wide`` and the JSON give
CA's name (``UnremovableReason``) and the detail."""

SHORT_BLOCKING_REASON: dict[str, str] = {
    "ControllerNotFound": "no controller",
    "MinReplicasReached": "min replicas",
    "NotReplicated": "unreplicated pod",
    "LocalStorageRequested": "local storage",
    "NotSafeToEvictAnnotation": "evict disallowed",
    "UnmovableKubeSystemPod": "kube-system pod",
    "NotEnoughPdb": "PDB exhausted",
    "UnexpectedError": "unexpected error",
}
"""REASON for a node blocked by a pod: the pod's ``BlockingPodReason`` (CA) as a phrase."""


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def _pct_of(part: int | None, whole: int | None) -> str:
    return "-" if part is None or not whole else f"{part / whole:.0%}"


def _gpu_cell(n: NodeReport) -> str:
    """GPU%: requested GPUs / allocatable, then ``/`` and the real GPU usage (DCGM) when known;
    ``-`` on a node without GPUs."""
    if n.gpu is None:
        return "-"
    cell = _pct(n.gpu.request_utilization)
    return cell if n.gpu.usage is None else f"{cell}/{_pct(n.gpu.usage)}"


def _dra_cell(n: NodeReport) -> str:
    """DRA%: the highest pool's allocated devices, then ``/`` and the real GPU usage (DCGM) when
    known; ``?`` when it cannot be computed, ``-`` on a node without DRA devices."""
    if n.dra is None:
        return "-"
    if n.dra.error:
        return "?"
    cell = _pct(n.dra.utilization)
    return cell if n.dra.usage is None else f"{cell}/{_pct(n.dra.usage)}"


def short_reason(n: NodeReport) -> str:
    """The default view's REASON of one node (at most 16 columns)."""
    if n.removable:
        if not n.moves:
            return "no workload pods" if n.empty else ""
        return f"move {len(n.moves)} pod{'s' if len(n.moves) != 1 else ''}"
    if n.blocking_pod is not None:
        return SHORT_BLOCKING_REASON.get(n.blocking_pod.reason, SHORT_REASON[UnremovableReason.BlockedByPod])
    return SHORT_REASON.get(n.reason, n.reason)


def full_reason(n: NodeReport) -> str:
    """``-o wide``'s REASON: CA's ``UnremovableReason`` and the detail (the detail alone for a
    removable node)."""
    return n.detail if n.removable else f"{n.reason}: {n.detail}"


def _rows(report: DryRunReport) -> list[NodeReport]:
    """Removable nodes first in removal order, then the others by utilization and name."""
    return sorted(
        report.nodes,
        key=lambda n: (
            not n.removable,
            n.rank if n.rank is not None else 0,
            n.utilization.value if n.utilization.value is not None else 9.0,
            n.name,
        ),
    )


def node_table(report: DryRunReport, wide: bool = False) -> list[str]:
    """The node table's lines (header first)."""
    rows = _rows(report)
    by_requests = bool(rows) and rows[0].utilization.source == "requests"
    headers = ["NAME", "STATUS"]
    headers += ["REQ-CPU%", "REQ-MEM%"] if by_requests else ["CPU%", "MEM%"]
    gpu = any(n.gpu is not None for n in rows)
    if gpu:
        headers.append("GPU%")
    dra = any(n.dra is not None for n in rows)
    if dra:
        headers.append("DRA%")
    if wide:
        headers += ["CPU%", "MEM%"] if by_requests else ["REQ-CPU%", "REQ-MEM%"]
        headers += ["GROUP", "ZONE", "PODS-TO-MOVE", "$/MONTH"]
    headers.append("REASON")
    cells = []
    for n in rows:
        row = [
            n.name,
            SHORT_STATUS.get(n.status, n.status),
            _pct(n.utilization.cpu),
            _pct(n.utilization.memory),
        ]
        if gpu:
            row.append(_gpu_cell(n))
        if dra:
            row.append(_dra_cell(n))
        if wide:
            if by_requests:
                row += [
                    _pct_of(n.usage.cpu_millicores, n.allocatable.cpu_millicores),
                    _pct_of(n.usage.memory_bytes, n.allocatable.memory_bytes),
                ]
            else:
                row += [_pct(n.request_utilization.cpu), _pct(n.request_utilization.memory)]
            row += [n.node_group or "<none>", n.zone or "<none>", str(len(n.moves)) if n.removable else "-"]
            row.append(usd_month(n.cost.monthly_usd))
        row.append(full_reason(n) if wide else short_reason(n))
        cells.append(row)
    return render_columns(headers, cells)


def _vcpu(millicores: int | None) -> str:
    return "-" if millicores is None else f"{millicores / 1000:,.1f}"


def _gib(memory_bytes: int | None) -> str:
    return "-" if memory_bytes is None else f"{memory_bytes / 2**30:,.1f}"


def _outcome(o: RemovalOutcomeModel) -> str:
    return (
        f"{o.removable} node{'s' if o.removable != 1 else ''} ({o.removable_empty} empty, "
        f"{o.removable_drain} by drain; {_vcpu(o.freed_cpu_millicores)} vCPU)"
    )


def comparison_sentence(c: ComparisonModel) -> str:
    """cluster-autoscaler's rule and scaler side by side, in one sentence."""
    d = c.additional_nodes
    verdict = (
        f"{d} more by draining on real usage"
        if d > 0
        else "the same number"
        if d == 0
        else f"{-d} fewer: TargetUsage keeps destinations below its targets"
    )
    settings = " ".join(c.cluster_autoscaler.settings)
    return (
        f"Side by side: cluster-autoscaler's requests rule{f' ({settings})' if settings else ''} "
        f"removes {_outcome(c.cluster_autoscaler)}; scaler removes {_outcome(c.scaler)}: {verdict}."
    )


def _names(names: list[str], wide: bool, limit: int = 3) -> str:
    if wide or len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more (all with -o wide or -o json)"


def cpu_quantity(millicores: int | None) -> str:
    """CPU as kubectl prints it: ``250m`` below one core, else cores (``12``, ``5.2``)."""
    if millicores is None:
        return "-"
    if millicores < 1000:
        return f"{millicores}m"
    return f"{millicores / 1000:.1f}".removesuffix(".0")


def memory_quantity(memory_bytes: int | None) -> str:
    """Memory as kubectl prints it: ``512Mi`` below one GiB, else ``75.9Gi``."""
    if memory_bytes is None:
        return "-"
    if memory_bytes < 2**30:
        return f"{memory_bytes / 2**20:.0f}Mi"
    return f"{memory_bytes / 2**30:.1f}".removesuffix(".0") + "Gi"


def _pair(f: ResourceFigures) -> str:
    return f"{cpu_quantity(f.cpu_millicores)}/{memory_quantity(f.memory_bytes)}"


def workload_table(workloads: list[WorkloadRequestsModel], wide: bool = False) -> list[str]:
    """Workloads with requests against use (cpu/memory, sums over their pods); ``wide`` adds the
    per-pod p95 usage their requests are set to in the re-evaluation."""
    headers = ["NAMESPACE", "WORKLOAD", "PODS", "REQUESTED", "USED"] + (["P95/POD"] if wide else [])
    rows = [
        [w.namespace, f"{w.kind.lower()}/{w.name}", str(w.pods), _pair(w.requested), _pair(w.used)]
        + ([_pair(w.p95_per_pod)] if wide else [])
        for w in workloads
    ]
    return render_columns(headers, rows)


Paragraph = str | list[str]
"""Prose to wrap (a string) or lines printed as they are (a table)."""


def blocks_section(b: RequestsBoundModel, removable: int, wide: bool = False) -> list[Paragraph]:
    """The "what blocks" paragraphs, or nothing when requests keep no node that real usage would
    let go."""
    if b.kept_by_requests == 0 and b.removable_if_rightsized <= removable:
        return []
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(b.underused_by_reason.items(), key=lambda kv: -kv[1]))
    out: list[Paragraph] = [
        f"What blocks: {b.underused_nodes} nodes use at most {b.threshold:.0%} of their cpu and memory "
        f"but stay ({reasons}); {b.kept_by_requests} of them are kept by requests: they go once every "
        "workload requests its p95 usage.",
    ]
    if b.workloads:
        out.append(
            "Workloads that request the most above their real usage (cpu/memory, sums over their pods):"
        )
        out.append(workload_table(b.workloads, wide))
    extra = b.removable_if_rightsized - removable
    out.append(
        f"If requests matched p95 usage, {b.removable_if_rightsized} nodes would be removable instead of "
        f"{removable} ({extra:+d}): {_names(b.nodes_if_rightsized, wide)}."
    )
    return out


def _relief_outcome(n: HotNodeModel) -> str:
    if n.held:
        return "held"
    if not n.evictions:
        return "nothing"
    return "closes gap" if n.gap_closed else "partial"


def relief_section(relief: ReliefModel, wide: bool = False) -> list[Paragraph]:
    """The hot-node relief paragraphs: one sentence, then one row per hot node, hottest first:
    its usage, the pods to evict, and whether they close its gap (``closes gap``, ``partial``,
    ``nothing`` to evict, or ``held``); ``wide`` adds each node's detail (the evictions and their
    destinations, or why nothing is evicted)."""
    out: list[Paragraph] = [
        f"Hot-node relief: {len(relief.hot_nodes)} node(s) above the waterlines (cpu "
        f"{relief.cpu_threshold:.0%}, memory {relief.memory_threshold:.0%} of allocatable), "
        f"{relief.evictions} pod(s) to evict (at most {relief.max_evictions_per_loop} per loop), as if "
        "each had been hot for --hot-node-time."
    ]
    if not relief.hot_nodes:
        return out
    headers = ["NODE", "CPU%", "MEM%", "EVICT", "RELIEF"] + (["DETAIL"] if wide else [])
    rows = [
        [
            n.name,
            _pct(n.utilization.cpu),
            _pct(n.utilization.memory),
            str(len(n.evictions)),
            _relief_outcome(n),
        ]
        + ([n.detail] if wide else [])
        for n in relief.hot_nodes
    ]
    out.append(render_columns(headers, rows))
    return out


def summary_lines(report: DryRunReport) -> list[str]:
    """The summary paragraphs after the table (unwrapped)."""
    s = report.summary
    out = [
        f"{s.removable} of {s.nodes} nodes removable ({s.removable_empty} empty, {s.removable_drain} by drain, "
        f"{s.pods_to_move} pods to move); frees {_vcpu(s.freed_cpu_millicores)} vCPU and "
        f"{_gib(s.freed_memory_bytes)} GiB allocatable. Source: {report.source} at {report.generated_at}.",
        savings_line(report),
    ]
    if report.comparison is not None:
        out.append(comparison_sentence(report.comparison))
    if s.unremovable_by_reason:
        parts = ", ".join(
            f"{k} {v}" for k, v in sorted(s.unremovable_by_reason.items(), key=lambda kv: -kv[1])
        )
        out.append(f"Kept: {parts}.")
    if any(n.metrics == MetricsStatus.MISSING.value for n in report.nodes):
        out.append("Some nodes have no metrics.k8s.io NodeMetrics; they are never treated as idle.")
    stale = sum(1 for n in report.nodes if n.metrics == MetricsStatus.STALE.value)
    if stale:
        out.append(
            f"{stale} node(s) have NodeMetrics older than --max-metrics-age (is metrics-server running and "
            "scraping them?); they are never treated as idle."
        )
    return out


def print_table(report: DryRunReport, stream: TextIO, wide: bool = False) -> None:
    """Print the node table, then the summary paragraphs wrapped at :func:`output_width` of
    ``stream``; table lines (nodes, workloads) are never wrapped or cut."""
    width = output_width(stream)
    paragraphs: list[Paragraph] = [node_table(report, wide), "", *summary_lines(report)]
    if report.requests_bound is not None:
        section = blocks_section(report.requests_bound, report.summary.removable, wide)
        paragraphs += ["", *section] if section else []
    if report.relief is not None:
        paragraphs += ["", *relief_section(report.relief, wide)]
    lines: list[str] = []
    for p in paragraphs:
        lines.extend(p if isinstance(p, list) else wrap_text(p, width, "  "))
    stream.write("\n".join(lines) + "\n")
