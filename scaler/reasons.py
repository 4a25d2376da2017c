"""Why a node stays or goes: the fixed vocabulary every log, metric, event and report reads.

Names are cluster-autoscaler's ``simulator.UnremovableReason`` values (``simulator/cluster.go``)
where CA has one; ``MetricsUnavailable``, ``DestinationForMovedPods``,
``ScaleDownBudgetExhausted`` (a disruption budget, :mod:`scaler.budgets`) and
``UnreadableObject`` (:mod:`scaler.model.unreadable`) are scaler's own.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["REASON_HELP", "NodeStatus", "UnremovableReason"]


class NodeStatus(StrEnum):
    """Outcome of one node in one evaluation."""

    REMOVABLE_EMPTY = "removable-empty"
    REMOVABLE_DRAIN = "removable-drain"
    UNREMOVABLE = "unremovable"


class UnremovableReason(StrEnum):
    """Why a node is not removable (``NoReason`` for removable nodes)."""

    NoReason = "NoReason"
    ScaleDownDisabledAnnotation = "ScaleDownDisabledAnnotation"
    ScaleDownUnreadyDisabled = "ScaleDownUnreadyDisabled"
    NotAutoscaled = "NotAutoscaled"
    NotUnneededLongEnough = "NotUnneededLongEnough"
    NotUnreadyLongEnough = "NotUnreadyLongEnough"
    NodeGroupMinSizeReached = "NodeGroupMinSizeReached"
    NodeGroupMaxDeletionCountReached = "NodeGroupMaxDeletionCountReached"
    AtomicScaleDownFailed = "AtomicScaleDownFailed"
    MinimalResourceLimitExceeded = "MinimalResourceLimitExceeded"
    CurrentlyBeingDeleted = "CurrentlyBeingDeleted"
    NotUnderutilized = "NotUnderutilized"
    NotUnneededOtherReason = "NotUnneededOtherReason"
    RecentlyUnremovable = "RecentlyUnremovable"
    NoPlaceToMovePods = "NoPlaceToMovePods"
    BlockedByPod = "BlockedByPod"
    UnexpectedError = "UnexpectedError"
    NoNodeInfo = "NoNodeInfo"
    BlockedByOnCompletionPod = "BlockedByOnCompletionPod"
    # scaler's own
    MetricsUnavailable = "MetricsUnavailable"
    DestinationForMovedPods = "DestinationForMovedPods"
    ScaleDownBudgetExhausted = "ScaleDownBudgetExhausted"
    UnreadableObject = "UnreadableObject"


REASON_HELP: dict[UnremovableReason, str] = {
    UnremovableReason.NoReason: "removable",
    UnremovableReason.ScaleDownDisabledAnnotation: "node has cluster-autoscaler.kubernetes.io/scale-down-disabled=true",
    UnremovableReason.ScaleDownUnreadyDisabled: "node is NotReady and --scale-down-unready-enabled=false",
    UnremovableReason.NotAutoscaled: "node belongs to no node group (no cloud.google.com/gke-nodepool label)",
    UnremovableReason.NotUnneededLongEnough: "unneeded for less than --scale-down-unneeded-time",
    UnremovableReason.NotUnreadyLongEnough: "unready for less than --scale-down-unready-time",
    UnremovableReason.NodeGroupMinSizeReached: "removing it would take the node group below its minimum size",
    UnremovableReason.CurrentlyBeingDeleted: "node carries a ToBeDeletedByClusterAutoscaler taint younger than 5m",
    UnremovableReason.NotUnderutilized: "utilization above --scale-down-utilization-threshold",
    UnremovableReason.RecentlyUnremovable: "found unremovable within --unremovable-node-recheck-timeout",
    UnremovableReason.NoPlaceToMovePods: "some pod fits on no other node",
    UnremovableReason.BlockedByPod: "a pod may not be moved (see blockingPod)",
    UnremovableReason.UnexpectedError: "unexpected state (for example zero allocatable)",
    UnremovableReason.BlockedByOnCompletionPod: "a safe-to-evict=on-completion pod is still running",
    UnremovableReason.MetricsUnavailable: "no fresh metrics.k8s.io usage for a non-empty node: never treated as idle",
    UnremovableReason.DestinationForMovedPods: "pods of a node removed earlier in this evaluation would move here",
    UnremovableReason.ScaleDownBudgetExhausted: "an active disruption budget (named in the detail) allows no more "
    "disrupted nodes in this node pool now",
    UnremovableReason.UnreadableObject: "an API object that concerns the node (the node itself, one of its pods, "
    "their controller, PDB or claim) could not be read: neither a candidate nor a destination",
}
