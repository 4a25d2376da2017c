"""Which nodes are scale-down candidates, in cluster-autoscaler's order of checks.

Source: CA ``core/scaledown/eligibility/eligibility.go FilterOutUnremovable`` and
``processors/nodes/pre_filtering_processor.go``. Order: RecentlyUnremovable, CurrentlyBeingDeleted,
ScaleDownDisabledAnnotation, NotAutoscaled, NodeGroupMinSizeReached (pre-filter: group size ≤ min),
UnexpectedError (zero allocatable), ScaleDownUnreadyDisabled, MetricsUnavailable (ours: a non-empty
node without fresh usage), NotUnderutilized (``value > --scale-down-utilization-threshold``; a node
*at* the threshold is underutilized, as in CA since fix #8975).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from scaler.config import ScalerConfig
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, Node
from scaler.reasons import UnremovableReason
from scaler.utilization import NodeUtilization

__all__ = ["CURRENTLY_BEING_DELETED_SECONDS", "Ineligible", "check_eligibility"]

# CA actuation/delete_in_batch.go MaxCloudProviderNodeDeletionTime: a younger ToBeDeleted taint
# means the node is being deleted.
CURRENTLY_BEING_DELETED_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Ineligible:
    """A node that is not a candidate: the reason and a one-line human explanation."""

    reason: UnremovableReason
    detail: str


def check_eligibility(
    node: Node,
    util: NodeUtilization,
    now: float,
    config: ScalerConfig,
    group_sizes: Mapping[str, int],
    recently_unremovable: Collection[str] = (),
) -> Ineligible | None:
    """Return why ``node`` is not a scale-down candidate, or ``None`` when it is one.

    Args:
        node: the node.
        util: its utilization (see :mod:`scaler.utilization`).
        now: evaluation time, Unix seconds.
        config: thresholds and ``--nodes`` limits.
        group_sizes: current size of each node group (nodes), for the min-size pre-filter.
        recently_unremovable: node names found unremovable within
            ``--unremovable-node-recheck-timeout`` (live mode only).
    """
    if node.name in recently_unremovable:
        return Ineligible(
            UnremovableReason.RecentlyUnremovable, "unremovable in a recent loop; not re-checked yet"
        )
    if node.to_be_deleted_ts is not None and now - node.to_be_deleted_ts < CURRENTLY_BEING_DELETED_SECONDS:
        return Ineligible(
            UnremovableReason.CurrentlyBeingDeleted, "ToBeDeletedByClusterAutoscaler taint is fresh"
        )
    if node.annotations.get(ANNOTATION_SCALE_DOWN_DISABLED) == "true":
        return Ineligible(
            UnremovableReason.ScaleDownDisabledAnnotation, f"{ANNOTATION_SCALE_DOWN_DISABLED}=true"
        )
    group = node.node_group
    if not group:
        return Ineligible(UnremovableReason.NotAutoscaled, "no cloud.google.com/gke-nodepool label")
    limits = config.node_group_limits(group)
    min_size = limits.min_size if limits is not None else 0
    if group_sizes.get(group, 0) <= min_size:
        return Ineligible(
            UnremovableReason.NodeGroupMinSizeReached,
            f"node group {group} has {group_sizes.get(group, 0)} nodes, min {min_size}",
        )
    if node.allocatable.cpu_millicores <= 0 or node.allocatable.memory_bytes <= 0:
        return Ineligible(UnremovableReason.UnexpectedError, "allocatable cpu or memory is zero")
    if not node.ready and not config.scale_down_unready_enabled:
        return Ineligible(UnremovableReason.ScaleDownUnreadyDisabled, "node is NotReady")
    if util.value is None:
        age = (
            "no NodeMetrics"
            if util.metrics_age_seconds is None
            else f"metrics {util.metrics_age_seconds:.0f}s old"
        )
        return Ineligible(
            UnremovableReason.MetricsUnavailable, f"{age}; a non-empty node is never treated as idle"
        )
    if util.value > config.scale_down_utilization_threshold:
        return Ineligible(
            UnremovableReason.NotUnderutilized,
            f"{util.resource} {util.source} {util.value:.1%} > threshold {config.scale_down_utilization_threshold:.0%}",
        )
    return None
