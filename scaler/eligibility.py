"""Which nodes are scale-down candidates, in cluster-autoscaler's order of checks.

Source: CA ``core/scaledown/eligibility/eligibility.go FilterOutUnremovable`` and
``processors/nodes/pre_filtering_processor.go``. Order: RecentlyUnremovable, CurrentlyBeingDeleted,
ScaleDownDisabledAnnotation, NotAutoscaled, NodeGroupMinSizeReached (pre-filter: group size ≤ min),
UnexpectedError (zero allocatable), ScaleDownUnreadyDisabled, MetricsUnavailable (ours: a non-empty
node without fresh usage), NotUnderutilized (``value > --scale-down-utilization-threshold``; a node
*at* the threshold is underutilized, as in CA since fix #8975).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from scaler.config import NodeGroupSpec, ScalerConfig
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, Node
from scaler.reasons import UnremovableReason
from scaler.utilization import NodeUtilization

__all__ = ["CURRENTLY_BEING_DELETED_SECONDS", "Ineligible", "check_eligibility", "node_group_limits"]

# CA actuation/delete_in_batch.go MaxCloudProviderNodeDeletionTime: a younger ToBeDeleted taint
# means the node is being deleted.
CURRENTLY_BEING_DELETED_SECONDS = 300.0
# A node-pools entry with min-size but no max-size: GKE's largest node pool (1000 nodes per zone
# is its per-pool limit); the max never matters to a scale-down.
_MAX_POOL_SIZE = 1000


def node_group_limits(config: ScalerConfig, nodes: Iterable[Node]) -> dict[str, NodeGroupSpec]:
    """Resolve every ``--nodes`` entry to the node pool it limits.

    An entry names a pool directly, or a managed instance group (the last segment of a MIG
    URL, ``gke-<cluster>-<pool>-<hash>-grp``). A MIG is resolved as CA's GCE provider does: its
    instances are named after its base name (the name without ``-grp``), so the pool of the
    nodes whose names start with ``<base>-`` is the one it limits. An entry that matches no node
    limits nothing. Returns pool name → limits; an exact pool name wins over a MIG. A pool
    with ``min-size`` or ``max-size`` in ``node-pools`` and no ``--nodes`` entry gets those.
    """
    node_list = list(nodes)
    out: dict[str, NodeGroupSpec] = {}
    for spec in config.nodes:
        if spec.name.endswith("-grp"):
            base = spec.name[: -len("grp")]
            for node in node_list:
                if node.name.startswith(base) and node.node_group:
                    out.setdefault(node.node_group, spec)
                    break
    pools = {n.node_group for n in node_list}
    for spec in config.nodes:
        if spec.name in pools:
            out[spec.name] = spec
    for pool, settings in config.node_pools.items():  # node-pools min-size/max-size; --nodes wins
        if pool not in out and (settings.min_size is not None or settings.max_size is not None):
            lo = settings.min_size or 0
            hi = settings.max_size if settings.max_size is not None else max(lo, _MAX_POOL_SIZE)
            out[pool] = NodeGroupSpec(min_size=lo, max_size=hi, name=pool)
    return out


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
    limits: Mapping[str, NodeGroupSpec] | None = None,
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
        limits: node pool → ``--nodes`` limits (:func:`node_group_limits`); ``None`` looks the
            pool name up in ``config``.
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
    spec = limits.get(group) if limits is not None else config.node_group_limits(group)
    min_size = spec.min_size if spec is not None else 0
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
    threshold = config.for_pool(group).scale_down_utilization_threshold
    if util.value > threshold:
        return Ineligible(
            UnremovableReason.NotUnderutilized,
            f"{util.resource} {util.source} {util.value:.1%} > threshold {threshold:.0%}",
        )
    return None
