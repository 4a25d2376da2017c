"""Which nodes are scale-down candidates, in cluster-autoscaler's order of checks.

Source: CA ``core/scaledown/eligibility/eligibility.go FilterOutUnremovable`` and
``processors/nodes/pre_filtering_processor.go``. Order: RecentlyUnremovable, CurrentlyBeingDeleted,
ScaleDownDisabledAnnotation, NotAutoscaled, NodeGroupMinSizeReached (pre-filter: the node's MIG, or
its pool in its zone when the node's name does not tell its MIG, has no more nodes than its minimum,
:class:`GroupLimits`),
UnexpectedError (zero allocatable), ScaleDownUnreadyDisabled, MetricsUnavailable (ours: a non-empty
node without fresh usage), NotUnderutilized (``value > --scale-down-utilization-threshold``; a node
*at* the threshold is underutilized, as in CA since fix #8975). A GPU node skips MetricsUnavailable
and is NotUnderutilized when its GPU requests, or its real GPU usage where known, are above
``--scale-down-gpu-utilization-threshold`` (:func:`_gpu_eligibility`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from scaler.config import NodeGroupSpec, ScalerConfig
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, Node
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
# A node-pools entry with min-size but no max-size: GKE's largest node pool (1000 nodes per zone
# is its per-pool limit); the max never matters to a scale-down.
_MAX_POOL_SIZE = 1000


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """``--nodes`` limits, per MIG of a node pool.

    A GKE node pool is one managed instance group per zone (a large pool has several in one
    zone), and its autoscaling limits (``minNodeCount``/``maxNodeCount``, ``gcloud
    --min-nodes/--max-nodes``) hold for each zone; cluster-autoscaler's GCE provider makes each
    MIG a node group of its own. ``--nodes`` follows suit: an entry naming a node pool limits
    each of the pool's MIGs (each zone, where it has one MIG per zone; the pool in a zone when a
    node's MIG is unknown); an entry naming a MIG (``gke-<cluster>-<pool>-<hash>-grp``, or its
    URL) limits that MIG and wins there over an entry naming the pool. A node's MIG:
    :meth:`mig_of`.

    Attributes:
        pools: pool name → limits of each of its MIGs (entries naming a pool; every entry is
            listed here by its name).
        zones: ``(pool, zone)`` → limits (entries naming a MIG, resolved through node names),
            for a node whose MIG is unknown.
        migs: MIG name → limits (entries naming a MIG).
    """

    pools: Mapping[str, NodeGroupSpec] = field(default_factory=dict)
    zones: Mapping[tuple[str, str], NodeGroupSpec] = field(default_factory=dict)
    migs: Mapping[str, NodeGroupSpec] = field(default_factory=dict)

    def for_zone(self, pool: str, zone: str, mig: str = "") -> NodeGroupSpec | None:
        """The limits of ``pool`` in ``zone`` (its MIG named ``mig`` when known): an entry naming
        the MIG, else one naming the pool; ``None`` without either. With ``mig`` unknown (``""``)
        an entry naming a MIG of the pool in ``zone`` counts for the zone."""
        if mig:
            spec = self.migs.get(mig)
            return spec if spec is not None else self.pools.get(pool)
        spec = self.zones.get((pool, zone))
        return spec if spec is not None else self.pools.get(pool)

    def min_size(self, pool: str, zone: str, mig: str = "") -> int:
        """The minimum number of nodes of ``pool`` in ``zone`` (in its MIG ``mig`` when known;
        0 without a ``--nodes`` entry)."""
        spec = self.for_zone(pool, zone, mig)
        return spec.min_size if spec is not None else 0

    def mig_of(self, node: Node) -> str:
        """The MIG of ``node`` as a GKE node's name tells it: the ``--nodes`` entry naming a MIG
        whose base instance name (the name without ``-grp``) plus ``-`` prefixes the node name
        (the longest), else ``<base>-grp`` where ``<base>`` is the node name without its last
        ``-suffix`` (:func:`instance_group_base`); ``""`` for a node not named as GKE names its
        instances."""
        best = ""
        for name in self.migs:
            if node.name.startswith(name.removesuffix("grp")) and len(name) > len(best):
                best = name
        if best:
            return best
        base = instance_group_base(node.name)
        return f"{base}-grp" if base else ""

    def group_key(self, node: Node) -> tuple[str, str, str]:
        """``(pool, zone, MIG)`` of ``node``, the unit whose minimum holds (:meth:`mig_of`; the
        MIG is ``""`` when unknown, and then the pool in the zone is the unit)."""
        return node.node_group, node.zone, self.mig_of(node)


def instance_group_base(node_name: str) -> str:
    """The base instance name of the MIG a GKE node belongs to: GKE names a node pool's MIGs
    ``gke-<cluster>-<pool>-<hash>-grp`` and their instances ``gke-<cluster>-<pool>-<hash>-<suffix>``,
    so the base is the node name without its last ``-<suffix>``; ``""`` for a name not of that
    form (not starting with ``gke-``, or too few parts). The live GKE provider reads the MIG
    from the instance instead (:class:`scaler.cloud.gke.GKEProvider`)."""
    if not node_name.startswith("gke-"):
        return ""
    base, _, suffix = node_name.rpartition("-")
    return base if suffix and base.count("-") >= 3 else ""


def node_group_limits(config: ScalerConfig, nodes: Iterable[Node]) -> GroupLimits:
    """Resolve every ``--nodes`` entry to the node pools and zones it limits (:class:`GroupLimits`).

    An entry names a pool, or a managed instance group (the last segment of a MIG URL,
    ``gke-<cluster>-<pool>-<hash>-grp``). A MIG is resolved as CA's GCE provider does: its
    instances are named after its base name (the name without ``-grp``), so the pool and zone of
    the nodes whose names start with ``<base>-`` are the ones it limits. An entry that matches no
    node limits nothing here (a provider that sees the MIG still applies it). A pool with
    ``min-size`` or ``max-size`` in ``node-pools`` and no ``--nodes`` entry gets those, per zone
    as well.
    """
    node_list = list(nodes)
    zones: dict[tuple[str, str], NodeGroupSpec] = {}
    migs = {spec.name: spec for spec in config.nodes if spec.name.endswith("-grp")}
    for spec in migs.values():
        base = spec.name[: -len("grp")]
        for node in node_list:
            if node.name.startswith(base) and node.node_group:
                zones.setdefault((node.node_group, node.zone), spec)
    pools = {spec.name: spec for spec in config.nodes}
    for pool, settings in config.node_pools.items():  # node-pools min-size/max-size; --nodes wins
        if pool not in pools and (settings.min_size is not None or settings.max_size is not None):
            lo = settings.min_size or 0
            hi = settings.max_size if settings.max_size is not None else max(lo, _MAX_POOL_SIZE)
            pools[pool] = NodeGroupSpec(min_size=lo, max_size=hi, name=pool)
    return GroupLimits(pools, zones, migs)


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
    if util.gpu is not None:
        return _gpu_eligibility(util, config.scale_down_gpu_utilization_threshold)
    if util.value is None:
        if util.usage_unknown:
            return Ineligible(UnremovableReason.MetricsUnavailable, util.usage_unknown)
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
