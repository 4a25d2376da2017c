"""``--nodes`` limits resolved to the node groups they hold for: per MIG, per pool and zone.

A policy-free type below the cloud providers and the eligibility checks: the providers
(:mod:`scaler.cloud.gke`, :mod:`scaler.cloud.kubernetes`) enforce the limits on deletion,
:mod:`scaler.eligibility` pre-filters on them (CA ``processors/nodes/pre_filtering_processor.go``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scaler.config import NodeGroupSpec, ScalerConfig
from scaler.model.records import Node

__all__ = ["GroupLimits", "instance_group_base", "node_group_limits"]

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
        for name in self.migs:  # usually none
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


@functools.lru_cache(maxsize=1 << 16)
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
