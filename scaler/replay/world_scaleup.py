"""The replay world's cloud: node pools, and the scale-up of pools for pods left pending.

**Scale-up model** (cluster-autoscaler's, simplified). When pods stay pending after scheduling,
each is matched to the first node pool (by name) whose template node — the pool's first node at
the start, empty but for its DaemonSet and mirror pods — passes the same filters; pods are
bin-packed by requests (first fit, in scheduling order) onto nodes of that pool already being
provisioned, then onto as many new nodes as needed, within the pool's ``--nodes`` maximum. A new
node is a copy of the template (same machine type, labels, taints, DaemonSet pods) that joins
``--provision-delay`` after the request, with ``creationTimestamp`` then; it is billed from the
request. Its DaemonSet pods are named ``<daemonset>-<suffix>`` with a suffix no pod of the world
holds (the API server refuses a name taken in the namespace). A pod that fits no pool's empty
template is *unschedulable* and never triggers a scale-up.

Each pool's template is its first node (by name) at the start, cleaned of scaler's taint and
annotations, with its DaemonSet and mirror pods, their usage, the node's overhead and the
pool's zones (new nodes go round its zones).
"""

from __future__ import annotations

from dataclasses import replace

from msgspec.structs import replace as replace_pod

from scaler.cloud.base import ZoneGroupInfo
from scaler.kube.writer import ANNOTATION_OWNER, ANNOTATION_STATE, ANNOTATION_WAS_UNSCHEDULABLE
from scaler.limits import GroupLimits, node_group_limits
from scaler.model.records import LABEL_HOSTNAME, LABEL_ZONE, TAINT_TO_BE_DELETED, Node
from scaler.model.snapshot import ClusterSnapshot
from scaler.replay import sim_dra
from scaler.replay.sim_records import PoolTemplate, _short_hash, _with_objects
from scaler.replay.world_scheduler import WorldScheduler
from scaler.replay.world_store import WorldSpec
from scaler.simulator.removal import placement_order
from scaler.simulator.state import ClusterState

__all__ = ["ScaleUp"]

_DEFAULT_MAX_POOL_SIZE = 1000


class ScaleUp(WorldScheduler):
    """The scheduler's world (:class:`~scaler.replay.world_scheduler.WorldScheduler`) with node
    pools that grow for pods left pending.

    Args:
        spec: what the world is built from (the cloud reads ``start``, whose pools' first nodes
            are the templates, and ``provision_delay``).

    Attributes:
        templates: pool → its :class:`~scaler.replay.sim_records.PoolTemplate`.
        provisioning: (requested at, ready at, pool) of every node being provisioned.
    """

    def __init__(self, spec: WorldSpec) -> None:
        super().__init__(spec)
        self.provision_delay = spec.provision_delay
        self.provisioning: list[tuple[float, float, str]] = []  # (requested at, ready at, pool)
        self._node_counter = 0
        self._facts: tuple[int, GroupLimits, dict[str, dict[str, int]], dict[str, int]] | None = None
        self.templates = self._templates(spec.start)

    def _templates(self, start: ClusterSnapshot) -> dict[str, PoolTemplate]:
        out: dict[str, PoolTemplate] = {}
        zones: dict[str, list[str]] = {}
        for n in start.nodes:
            if n.node_group and n.zone and n.zone not in zones.setdefault(n.node_group, []):
                zones[n.node_group].append(n.zone)
        for n in start.nodes:  # sorted by name: the pool's first node is its template
            pool = n.node_group
            if not pool or pool in out:
                continue
            own = [
                p
                for p in start.pods_by_node.get(n.name, ())
                if (p.is_daemonset or p.is_mirror) and not p.is_terminal
            ]
            usage = []
            for p in own:
                pm = start.pod_metrics.get((p.namespace, p.name))
                usage.append((float(pm.cpu_millicores), float(pm.memory_bytes)) if pm else (0.0, 0.0))
            clean = replace(
                n,
                taints=tuple(t for t in n.taints if t.key != TAINT_TO_BE_DELETED),
                unschedulable=False,
                to_be_deleted_ts=None,
                annotations={
                    k: v
                    for k, v in n.annotations.items()
                    if k not in (ANNOTATION_OWNER, ANNOTATION_STATE, ANNOTATION_WAS_UNSCHEDULABLE)
                },
            )
            out[pool] = PoolTemplate(
                clean, tuple(own), tuple(usage), self._overhead[n.name], tuple(sorted(zones.get(pool, [])))
            )
        return out

    # ---- scale-up ----------------------------------------------------------------------------------
    def _pool_limits(self) -> dict[str, tuple[int, int]]:
        """Pool → (min, max) of the whole pool: ``--nodes`` limits hold per zone, so a pool
        has no minimum of its own and its maximum is the per-zone one times its zones."""
        limits = self._node_facts()[0]
        out = {}
        for pool, tpl in self.templates.items():
            spec = limits.pools.get(pool)
            zones = max(1, len(tpl.zones))
            out[pool] = (0, spec.max_size * zones) if spec is not None else (0, _DEFAULT_MAX_POOL_SIZE)
        return out

    def _node_facts(self) -> tuple[GroupLimits, dict[str, dict[str, int]], dict[str, int]]:
        """``--nodes`` limits resolved over the nodes, nodes per pool and zone, and nodes per
        pool (the template pools first), kept while no node changes."""
        rev = self._index.node_revision()
        if self._facts is None or self._facts[0] != rev:
            counts: dict[str, dict[str, int]] = {}
            sizes = dict.fromkeys(self.templates, 0)
            for n in self.nodes.values():
                by_zone = counts.setdefault(n.node_group, {})
                by_zone[n.zone] = by_zone.get(n.zone, 0) + 1
                if n.node_group:
                    sizes[n.node_group] = sizes.get(n.node_group, 0) + 1
            self._facts = (rev, node_group_limits(self.config, self.nodes.values()), counts, sizes)
        return self._facts[1:]

    def zone_groups(self, pool: str) -> tuple[ZoneGroupInfo, ...]:
        """The pool in each zone its nodes are in: nodes there, and ``--nodes`` limits (a MIG's
        entry, else the pool's; min 0 and max 1000 without)."""
        limits, counts, _ = self._node_facts()
        out = []
        for zone, count in sorted(counts.get(pool, {}).items()):
            spec = limits.for_zone(pool, zone)
            lo, hi = (spec.min_size, spec.max_size) if spec is not None else (0, _DEFAULT_MAX_POOL_SIZE)
            out.append(ZoneGroupInfo(zone, lo, hi, count))
        return tuple(out)

    def pool_sizes(self) -> dict[str, int]:
        """Nodes per pool, counting nodes being provisioned (the MIG's target size)."""
        sizes = dict(self._node_facts()[2])
        for _, _, pool in self.provisioning:
            sizes[pool] = sizes.get(pool, 0) + 1
        return sizes

    def _template_state(self, pool: str) -> tuple[ClusterState, Node]:
        tpl = self.templates[pool]
        node = replace(tpl.node, name=f"~template-{pool}")
        pods = [replace_pod(p, node_name=node.name) for p in tpl.pods]
        snap = _with_objects(self._base, [node], pods, self.now)
        if self.dra.present:  # the template node's devices, and the claims as they are now
            snap = replace(
                snap, dra=sim_dra.with_node_slices(self.dra, self._base.dra, tpl.node.name, node.name)
            )
        return ClusterState(snap), node

    def scale_up(self) -> int:
        """Request new nodes for the pods still pending (see the module doc). Returns the
        number of nodes requested."""
        if not self.pending:
            return 0
        pods = sorted((self.pods[u] for u in self.pending), key=placement_order)
        states = {pool: self._template_state(pool) for pool in sorted(self.templates)}
        limits = self._pool_limits()
        sizes = self.pool_sizes()
        # Free capacity (cpu, memory, pods) of nodes being provisioned and of new ones, per pool.
        bins: dict[str, list[list[int]]] = {}
        for pool in states:
            state, node = states[pool]
            ns = state.nodes[node.name]
            free = [
                node.allocatable.cpu_millicores - ns.requested.cpu_millicores,
                node.allocatable.memory_bytes - ns.requested.memory_bytes,
                node.allocatable.pods - len(ns.pods),
            ]
            bins[pool] = [list(free) for _ in [p for p in self.provisioning if p[2] == pool]]
        new: dict[str, int] = {}
        for pod in pods:
            target = None
            for pool, (state, node) in states.items():
                if all(f.filter(pod, state.nodes[node.name], state) is None for f in self._sched_filters):
                    target = pool
                    break
            if target is None:
                self.stats.unschedulable_pods.add(pod.key)
                continue
            r = pod.requests
            need = (r.cpu_millicores, r.memory_bytes, 1)
            for b in bins[target]:
                if all(b[i] >= need[i] for i in range(3)):
                    for i in range(3):
                        b[i] -= need[i]
                    break
            else:
                if sizes[target] + new.get(target, 0) >= limits[target][1]:
                    continue
                state, node = states[target]
                ns = state.nodes[node.name]
                free = [
                    node.allocatable.cpu_millicores - ns.requested.cpu_millicores - need[0],
                    node.allocatable.memory_bytes - ns.requested.memory_bytes - need[1],
                    node.allocatable.pods - len(ns.pods) - 1,
                ]
                bins[target].append(free)
                new[target] = new.get(target, 0) + 1
        for pool, count in sorted(new.items()):
            for _ in range(count):
                self.provisioning.append((self.now, self.now + self.provision_delay, pool))
        return sum(new.values())

    def _add_node(self, pool: str, at: float) -> None:
        tpl = self.templates[pool]
        self._node_counter += 1
        k = self._node_counter
        base = tpl.node.name.rsplit("-", 1)[0] if "-" in tpl.node.name else tpl.node.name
        name = f"{base}-r{k:03d}"
        labels = dict(tpl.node.labels)
        labels[LABEL_HOSTNAME] = name
        if tpl.zones and LABEL_ZONE in labels:
            labels[LABEL_ZONE] = tpl.zones[k % len(tpl.zones)]
        node = replace(
            tpl.node,
            name=name,
            uid=f"replay-{_short_hash(name, at, n=16)}",
            labels=labels,
            creation_ts=at,
            ready_transition_ts=at,
            provider_id=f"replay://{pool}/{name}",
        )
        self.nodes[name] = node
        self.dra = sim_dra.with_node_slices(self.dra, self._base.dra, tpl.node.name, name)
        self._overhead[name] = tpl.overhead
        for p, use in zip(tpl.pods, tpl.pod_usage, strict=True):
            if tpl.node.name in p.name:  # a static pod's mirror is named after its node
                pname = p.name.replace(tpl.node.name, name)
            else:  # a DaemonSet pod: <daemonset>-<random suffix>, a suffix no pod of it holds
                pname, attempt = f"{p.name.rsplit('-', 1)[0]}-{_short_hash(name, p.name)}", 0
                while self._index.holds((p.namespace, pname)):  # as the API server refuses a taken name
                    attempt += 1
                    pname = f"{p.name.rsplit('-', 1)[0]}-{_short_hash(name, p.name, attempt)}"
            uid = f"replay-{_short_hash(pname, at, n=16)}"
            self.pods[uid] = replace_pod(p, name=pname, uid=uid, node_name=name, creation_ts=at, start_ts=at)
            self._add_slot(uid, -1, use, p)
        self.stats.nodes_added += 1
        self.touch()
