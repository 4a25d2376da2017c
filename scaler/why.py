"""``scaler why NODE``: one node's answer from a dry-run report.

The verdict (removable or kept), the reason (cluster-autoscaler's ``UnremovableReason`` or
scaler's own), the pod that blocks it or the scheduler filter that left a pod without a
destination, and what would change the verdict. Pure: it reads a
:class:`~scaler.report.models.DryRunReport` built from a dry-run of the current cluster (or of
snapshot files) and returns text or a mapping; the CLI does the reading.

The remedies follow cluster-autoscaler's FAQ ("What types of pods can prevent CA from removing a
node?", "How can I prevent Cluster Autoscaler from scaling down a particular node?") with
scaler's flag names, which are CA's.
"""

from __future__ import annotations

import re
from typing import Any

from scaler.reasons import REASON_HELP, UnremovableReason
from scaler.report.models import DryRunReport, NodeReport

__all__ = ["BLOCKING_POD_CHANGE", "REASON_CHANGE", "answer", "answer_lines", "find_node"]

REASON_CHANGE: dict[UnremovableReason, str] = {
    UnremovableReason.NoReason: "nothing keeps it: `scaler run` removes it once it has been unneeded for "
    "--scale-down-unneeded-time; annotate it cluster-autoscaler.kubernetes.io/scale-down-disabled=true to keep it",
    UnremovableReason.ScaleDownDisabledAnnotation: "remove the annotation: kubectl annotate node NODE "
    "cluster-autoscaler.kubernetes.io/scale-down-disabled-",
    UnremovableReason.ScaleDownUnreadyDisabled: "make the node Ready, or allow removing unready nodes with "
    "--scale-down-unready-enabled=true",
    UnremovableReason.NotAutoscaled: "put the node in a node pool scaler manages (GKE node pool with autoscaling "
    "limits, or --nodes MIN:MAX:NAME)",
    UnremovableReason.NotUnneededLongEnough: "nothing: it becomes removable once unneeded for "
    "--scale-down-unneeded-time (lower it to act sooner)",
    UnremovableReason.NotUnreadyLongEnough: "nothing: it becomes removable once unready for "
    "--scale-down-unready-time (lower it to act sooner)",
    UnremovableReason.NodeGroupMinSizeReached: "lower the node pool's minimum size (its autoscaling minimum, or "
    "MIN of --nodes MIN:MAX:NAME)",
    UnremovableReason.NodeGroupMaxDeletionCountReached: "wait for the deletions in progress, or raise "
    "--max-scale-down-parallelism / --max-drain-parallelism",
    UnremovableReason.AtomicScaleDownFailed: "the node pool scales down atomically: every node of it must be "
    "removable at once",
    UnremovableReason.MinimalResourceLimitExceeded: "lower the cluster's minimum resource limits",
    UnremovableReason.CurrentlyBeingDeleted: "nothing: its deletion is in progress",
    UnremovableReason.NotUnderutilized: "its usage is above --scale-down-utilization-threshold: it goes when its "
    "pods use less, or with a higher threshold",
    UnremovableReason.NotUnneededOtherReason: "see the detail",
    UnremovableReason.RecentlyUnremovable: "nothing: it is checked again after --unremovable-node-recheck-timeout",
    UnremovableReason.NoPlaceToMovePods: "give the pod a destination: the filter named is what refused every "
    "other node (NodeResourcesFit: free requests; TargetUsage: real usage headroom; NodeAffinity, "
    "TaintToleration, PodTopologySpread, InterPodAffinity: the pod's constraints); add capacity, relax the "
    "constraint or lower the pod's requests",
    UnremovableReason.BlockedByPod: "see the blocking pod's reason",
    UnremovableReason.UnexpectedError: "see the detail (for example a node with zero allocatable)",
    UnremovableReason.NoNodeInfo: "see the detail",
    UnremovableReason.BlockedByOnCompletionPod: "nothing: the safe-to-evict=on-completion pod must finish first",
    UnremovableReason.MetricsUnavailable: "make metrics.k8s.io serve fresh usage for the node and its pods "
    "(metrics-server: kubectl top node NODE), or judge by requests with --utilization-source=requests",
    UnremovableReason.DestinationForMovedPods: "nothing: pods of a node removed earlier would move here; it may "
    "go in a later loop",
    UnremovableReason.ScaleDownBudgetExhausted: "wait until the disruption budget named in the detail allows "
    "more nodes, or change that budget",
    UnremovableReason.UnreadableObject: "fix or delete the object named in the detail (kubectl get it -o yaml): "
    "scaler skips what it cannot decode and never moves pods to or from its node",
}
"""What would change a verdict, per reason (``NODE`` stands for the node's name)."""

BLOCKING_POD_CHANGE: dict[str, str] = {
    "ControllerNotFound": "the pod's controller does not exist: recreate it, or delete the orphaned pod",
    "MinReplicasReached": "its workload has fewer replicas than --min-replica-count: scale the workload up, "
    "or lower --min-replica-count",
    "NotReplicated": "run the pod under a controller (Deployment, StatefulSet, Job…), or annotate it "
    "cluster-autoscaler.kubernetes.io/safe-to-evict=true",
    "LocalStorageRequested": "annotate the pod cluster-autoscaler.kubernetes.io/safe-to-evict=true (or "
    "safe-to-evict-local-volumes=VOLUMES), or set --skip-nodes-with-local-storage=false",
    "NotSafeToEvictAnnotation": "remove the pod's cluster-autoscaler.kubernetes.io/safe-to-evict=false annotation",
    "UnmovableKubeSystemPod": "give the kube-system pod a PodDisruptionBudget, or set "
    "--skip-nodes-with-system-pods=false",
    "NotEnoughPdb": "its PodDisruptionBudget allows no disruption now: wait until it does, or relax the budget",
    "UnexpectedError": "see the detail",
}
"""What would unblock a node kept by a pod, per ``BlockingPodReason`` (CA's drain rules)."""

_FITS_NOWHERE = re.compile(r"pod (?P<pod>\S+) fits nowhere: (?P<filter>\w+)(?::|\b)")


def find_node(report: DryRunReport, name: str) -> NodeReport | None:
    """The report's entry for node ``name``, ``None`` when the evaluation has no such node."""
    return next((n for n in report.nodes if n.name == name), None)


def answer(node: NodeReport) -> dict[str, Any]:
    """One node's answer as a mapping (``-o json|yaml``): ``node``, ``verdict``
    (``removable-empty``, ``removable-drain`` or ``unremovable``), ``reason``, ``detail``,
    ``meaning`` (the reason in words), ``blockingPod`` (``namespace/name``) and
    ``blockingPodReason`` when a pod blocks it, ``filter`` when a pod fits nowhere (the
    scheduler filter or plugin that refused the last destination), ``change`` (what would
    change the verdict), and the ``moves`` a removal would make (``pod -> destination``)."""
    reason = UnremovableReason(node.reason)
    out: dict[str, Any] = {
        "node": node.name,
        "nodeGroup": node.node_group,
        "verdict": node.status,
        "reason": node.reason,
        "detail": node.detail,
        "meaning": REASON_HELP.get(reason, ""),
        "utilization": node.utilization.value,
    }
    change = REASON_CHANGE[reason]
    if node.blocking_pod is not None:
        b = node.blocking_pod
        out["blockingPod"] = f"{b.namespace}/{b.name}"
        out["blockingPodReason"] = b.reason
        change = BLOCKING_POD_CHANGE.get(b.reason, change)
    m = _FITS_NOWHERE.search(node.detail) if reason is UnremovableReason.NoPlaceToMovePods else None
    if m:
        out["blockingPod"] = m["pod"]
        out["filter"] = m["filter"]
    out["change"] = change.replace("NODE", node.name)
    out["moves"] = [f"{mv.pod} -> {mv.destination}" for mv in node.moves]
    return out


def answer_lines(node: NodeReport) -> list[str]:
    """:func:`answer` as ``kubectl describe``-like lines: ``Field:  value``, aligned."""
    a = answer(node)
    util = a["utilization"]
    fields = [
        ("Node", a["node"]),
        ("Node group", a["nodeGroup"] or "-"),
        ("Verdict", a["verdict"]),
        ("Reason", a["reason"] if a["reason"] != "NoReason" else "-"),
        ("Detail", a["detail"] or "-"),
        ("Utilization", "-" if util is None else f"{util:.0%} ({node.utilization.resource})"),
    ]
    if "blockingPod" in a:
        fields.append(
            (
                "Blocking pod",
                a["blockingPod"] + (f" ({a['blockingPodReason']})" if "blockingPodReason" in a else ""),
            )
        )
    if "filter" in a:
        fields.append(("Filter", a["filter"]))
    fields.append(("To change it", a["change"]))
    width = max(len(k) for k, _ in fields) + 2
    lines = [f"{k + ':':<{width}}{v}" for k, v in fields]
    if a["moves"]:
        lines.append("Moves:")
        lines += [f"  {m}" for m in a["moves"]]
    return lines
