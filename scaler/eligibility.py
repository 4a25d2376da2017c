"""Which nodes are scale-down candidates, in cluster-autoscaler's order of checks.

Source: CA ``core/scaledown/eligibility/eligibility.go FilterOutUnremovable`` and
``processors/nodes/pre_filtering_processor.go``. Order: UnreadableObject (ours: an API object
concerning the node could not be read, :mod:`scaler.model.unreadable`), RecentlyUnremovable, CurrentlyBeingDeleted,
ScaleDownDisabledAnnotation, NotAutoscaled, NodeGroupMinSizeReached (pre-filter: the node's MIG, or
its pool in its zone when the node's name does not tell its MIG, has no more nodes than its minimum,
:class:`scaler.limits.GroupLimits`, re-exported here),
UnexpectedError (zero allocatable), ScaleDownUnreadyDisabled, MetricsUnavailable (ours: a non-empty
node without fresh usage), NotUnderutilized (``value > --scale-down-utilization-threshold``; a node
*at* the threshold is underutilized, as in CA since fix #8975). A GPU node skips MetricsUnavailable
and is NotUnderutilized when its GPU requests, or its real GPU usage where known, are above
``--scale-down-gpu-utilization-threshold`` (:func:`_gpu_eligibility`); so is a node whose
devices come from DRA drivers, by their utilization (:func:`_dra_eligibility`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from scaler.config import ScalerConfig
from scaler.limits import GroupLimits, instance_group_base, node_group_limits
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, Node
from scaler.model.times import format_duration
from scaler.reasons import UnremovableReason
from scaler.utilization import NodeUtilization

__all__ = [
    "CURRENTLY_BEING_DELETED_SECONDS",
    "GroupLimits",
    "Ineligible",
    "check_eligibility",
    "instance_group_base",
    "node_group_limits",
]

# CA actuation/delete_in_batch.go MaxCloudProviderNodeDeletionTime: a younger ToBeDeleted taint
# means the node is being deleted.
CURRENTLY_BEING_DELETED_SECONDS = 300.0


@dataclass(frozen=True, slots=True)
class Ineligible:
    """A node that is not a candidate: the reason and a one-line human explanation."""

    reason: UnremovableReason
    detail: str


def _gpu_eligibility(util: NodeUtilization, threshold: float) -> Ineligible | None:
    """A GPU node, as CA judges it with a ``GpuConfig`` (``eligibility.go
    isNodeBelowUtilizationThreshold``: GPU utilization against ``--scale-down-gpu-utilization-threshold``,
    cpu and memory ignored), plus its real GPU usage when known: underutilized only when both its
    GPU requests and its GPU usage are at or below ``threshold`` (requests alone while its usage
    is unknown). The detail names the figures that keep it."""
    assert util.gpu is not None
    over = []
    if util.gpu > threshold:
        over.append(f"gpu requests {util.gpu:.1%}")
    if util.gpu_usage is not None and util.gpu_usage > threshold:
        over.append(f"gpu usage {util.gpu_usage:.1%} (measured)")
    if over:
        return Ineligible(
            UnremovableReason.NotUnderutilized, f"{' and '.join(over)} > gpu threshold {threshold:.0%}"
        )
    return None


def _dra_eligibility(util: NodeUtilization, threshold: float) -> Ineligible | None:
    """A node with devices of its own from DRA drivers, judged as :func:`_gpu_eligibility`
    judges a GPU node but by its DRA utilization (cluster-autoscaler's
    ``HighestDynamicResourceUtilization``: the highest pool's allocated devices): underutilized
    when it and the real GPU usage, where known, are at or below ``threshold``. A utilization
    that cannot be computed (an incomplete pool, a claim not allocated) is ``UnexpectedError``,
    as cluster-autoscaler's error is."""
    dra = util.dra
    assert dra is not None
    if dra.error:
        return Ineligible(UnremovableReason.UnexpectedError, f"DRA device utilization: {dra.error}")
    over = []
    if dra.value > threshold:
        over.append(f"dra {dra.resource} {dra.value:.1%}")
    if util.gpu_usage is not None and util.gpu_usage > threshold:
        over.append(f"gpu usage {util.gpu_usage:.1%} (DCGM)")
    if over:
        return Ineligible(
            UnremovableReason.NotUnderutilized, f"{' and '.join(over)} > gpu threshold {threshold:.0%}"
        )
    return None


def check_eligibility(
    node: Node,
    util: NodeUtilization,
    now: float,
    config: ScalerConfig,
    group_sizes: Mapping[tuple[str, str, str], int],
    recently_unremovable: Collection[str] = (),
    limits: GroupLimits | None = None,
    unreadable: Mapping[str, str] | None = None,
) -> Ineligible | None:
    """Return why ``node`` is not a scale-down candidate, or ``None`` when it is one.

    Args:
        node: the node.
        util: its utilization (see :mod:`scaler.utilization`).
        now: evaluation time, Unix seconds.
        config: thresholds and ``--nodes`` limits.
        group_sizes: current number of nodes of each ``(node pool, zone, MIG)``
            (:meth:`GroupLimits.group_key`), for the min-size pre-filter.
        recently_unremovable: node names found unremovable within
            ``--unremovable-node-recheck-timeout`` (live mode only).
        limits: ``--nodes`` limits per pool and zone (:func:`node_group_limits`); ``None``
            resolves them from ``config`` and this node alone.
        unreadable: node name → why an API object concerning it could not be read
            (:attr:`scaler.model.snapshot.ClusterSnapshot.unreadable`).
    """
    why_unreadable = (unreadable or {}).get(node.name)
    if why_unreadable:
        return Ineligible(UnremovableReason.UnreadableObject, why_unreadable)
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
    if limits is None:
        limits = node_group_limits(config, [node])
    key = limits.group_key(node)
    min_size = limits.min_size(*key)
    size = group_sizes.get(key, 0)
    if size <= min_size:
        where = f"MIG {key[2]}" if key[2] else f"zone {node.zone or '(none)'}"
        return Ineligible(
            UnremovableReason.NodeGroupMinSizeReached,
            f"node group {group} has {size} nodes in {where}, min {min_size} per {'MIG' if key[2] else 'zone'}",
        )
    if node.allocatable.cpu_millicores <= 0 or node.allocatable.memory_bytes <= 0:
        return Ineligible(UnremovableReason.UnexpectedError, "allocatable cpu or memory is zero")
    if not node.ready and not config.scale_down_unready_enabled:
        return Ineligible(UnremovableReason.ScaleDownUnreadyDisabled, "node is NotReady")
    return _usage_eligibility(util, config, group)


def _usage_eligibility(util: NodeUtilization, config: ScalerConfig, group: str) -> Ineligible | None:
    """The last checks of :func:`check_eligibility`, on the node's utilization: DRA devices,
    then GPUs (CA's GPU threshold), else the larger of CPU and memory against the node pool's
    ``--scale-down-utilization-threshold``; no usage known is ``MetricsUnavailable``."""
    if util.dra is not None:
        return _dra_eligibility(util, config.scale_down_gpu_utilization_threshold)
    if util.gpu is not None:
        return _gpu_eligibility(util, config.scale_down_gpu_utilization_threshold)
    if util.value is None:
        if util.usage_unknown:
            return Ineligible(UnremovableReason.MetricsUnavailable, util.usage_unknown)
        age = (
            "no NodeMetrics"
            if util.metrics_age_seconds is None
            else f"metrics {format_duration(round(util.metrics_age_seconds))} old, over --max-metrics-age "
            f"{format_duration(config.max_metrics_age)}"
        )
        return Ineligible(
            UnremovableReason.MetricsUnavailable, f"{age}; a non-empty node is never treated as idle"
        )
    threshold = config.for_pool(group).scale_down_utilization_threshold
    if util.value > threshold:
        return Ineligible(
            UnremovableReason.NotUnderutilized,
            f"{util.resource} {util.source} {util.value:.1%} > threshold {threshold:.0%}",
        )
    return None
