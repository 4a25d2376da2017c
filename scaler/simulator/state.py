"""Mutable working state of one simulation, with cheap checkpoint and revert.

:class:`ClusterState` is built from a :class:`~scaler.model.snapshot.ClusterSnapshot` at the start
of an evaluation and lives only inside it: the evaluation as a whole stays a pure function of
the snapshot and the clock. It plays the role of CA's delta ClusterSnapshot
(``simulator/clustersnapshot``): pods move between :class:`NodeState`\\ s, every change is
journaled, and :meth:`ClusterState.revert` undoes a failed node-removal simulation while a
successful one is simply kept (CA's ``Commit``).

Plugins see nodes through :class:`NodeState` and never mutate it.

For speed the state also keeps, in step with the node states:

* :class:`~scaler.simulator.node_table.NodeTable`, the per-node numbers (allocatable,
  requested, moved, usage, flags) as NumPy columns, so that filters can answer for many nodes
  at once (:class:`VectorFilterPlugin`);
* an index of pods by ``(namespace, label key, label value)`` with the node each pod is on
  (:meth:`ClusterState.pods_with_label`), so that the pod-scanning filters look only at the pods
  a selector can match;
* a memo of values derived from the snapshot alone (:meth:`ClusterState.static`), e.g. which
  nodes carry a label, which tolerate a set of tolerations.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from scaler.model.records import Node, Pod, PodAffinityTerm, Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.dra_state import DraState
from scaler.simulator.node_table import NodeTable
from scaler.simulator.pod_index import LabelKey, LazyPodIndex, PodIndex

__all__ = [
    "BatchScorePlugin",
    "ClusterState",
    "FilterPlugin",
    "NodeState",
    "PodTracker",
    "ScorePlugin",
    "VectorFilterPlugin",
]

T = TypeVar("T")
Positions = npt.NDArray[np.intp]
"""Node positions in :attr:`ClusterState.names` (and rows of :class:`NodeTable`)."""
Codes = npt.NDArray[np.int16]
"""Per-node filter verdicts: 0 fits, ``k`` > 0 is reason ``k - 1`` of the returned reasons."""
Mask = npt.NDArray[np.bool_]
"""Per table row: whether a pod passes a filter there."""
Holder = tuple[Pod, PodAffinityTerm, str]
"""A required anti-affinity term of a pod counted on a node: (the pod, the term, the node's name)."""


class PodTracker(Protocol):
    """What a stateful filter keeps in a :class:`ClusterState` and updates as pods move
    (:meth:`ClusterState.tracker`): e.g. matching pods counted per node, devices in use per
    node. The state calls :meth:`moved` after every place and unschedule, and after every
    undo of one (with the opposite ``delta``), so a tracker follows moves and reverts without
    a journal of its own.

    Attributes:
        pairs: the ``(label key, value)`` pairs a pod must carry one of for the tracker to be
            told of its moves (``None``: every pod).
    """

    pairs: tuple[tuple[str, str], ...] | None

    def moved(self, pod: Pod, row: int, delta: int) -> None:
        """``pod`` arrived on (``delta`` 1) or left (-1) the node at table ``row``."""
        ...


@dataclass(slots=True)
class NodeState:
    """One node during simulation.

    Attributes:
        node: the node record (labels, taints, allocatable).
        pods: pods currently counted on the node (non-terminal, non-expendable), including pods
            moved here by earlier simulations of this evaluation.
        requested: sum of ``pods``' requests (millicores, bytes, pod count, extended).
        usage_cpu_millicores, usage_memory_bytes: real usage from NodeMetrics, ``None`` when the
            node has no fresh metrics.
        moved_cpu_millicores, moved_memory_bytes: Σ :meth:`ClusterState.load` of the pods moved
            onto this node in this evaluation (TargetUsage's cumulative term): per resource
            ``max(request, real usage)``.
        ghost: the node is the one being simulated for removal: no pods, not a destination,
            but still a topology domain (CA's "tainted ghost", ``simulator/cluster.go``).
        removed: removal committed earlier in this evaluation: neither destination nor domain.
        edits: pods put on or taken off the node by this state's changes still in effect (0: its
            ``pods`` are the ones the state was built with).
        position: the node's row in the owning state's :class:`NodeTable` (-1 when standalone).
    """

    node: Node
    pods: list[Pod] = field(default_factory=list)
    requested: Resources = field(default_factory=Resources)
    usage_cpu_millicores: int | None = None
    usage_memory_bytes: int | None = None
    moved_cpu_millicores: int = 0
    moved_memory_bytes: int = 0
    edits: int = 0
    ghost: bool = False
    removed: bool = False
    position: int = -1

    @property
    def name(self) -> str:
        """The node name."""
        return self.node.name

    @property
    def host_ports(self) -> Iterator[tuple[str, str, int]]:
        """(protocol, hostIP, port) of every host port in use on the node."""
        for p in self.pods:
            yield from p.host_ports


@runtime_checkable
class FilterPlugin(Protocol):
    """A scheduler-like Filter: may ``pod`` go to ``node``?

    Implementations are built with the :class:`~scaler.config.ScalerConfig` (``cls(config)``),
    are registered under the entry-point group ``scaler.plugins``, and must be pure: they read
    ``node`` and ``state`` and never change them.
    """

    name: str

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the pod fits, or a short reason why it does not.

        Reasons should hold no per-node figures (``"Insufficient cpu"``, not ``"cpu 3.2/4"``):
        the simulator counts refusing nodes per reason for the report."""
        ...


class VectorFilterPlugin(FilterPlugin, Protocol):
    """Optional extension of :class:`FilterPlugin`: the same verdicts for many nodes at once.

    The simulator uses ``filter_nodes`` when a plugin has it and ``filter`` otherwise; both must
    agree exactly, node by node (same fit, same reason string).

    A plugin may also have ``fit_mask(pod, state)``: per row of the whole :class:`NodeTable`,
    whether ``filter`` passes ``pod`` there (a boolean array), ``True`` when it passes on every
    row, or ``None`` when it cannot tell that way (the simulator then asks ``filter_nodes``).
    The simulator finds a pod's destination with it (one call per pod, not per node), and
    asks for reasons only when no node fits; it must agree with ``filter`` row by row.
    """

    def filter_nodes(
        self, pod: Pod, nodes: Positions, state: ClusterState
    ) -> tuple[Codes, tuple[str, ...]] | None:
        """Verdicts for the nodes at table positions ``nodes``: an array of codes (0 fits,
        ``k`` means ``reasons[k - 1]``) and the reasons; ``None`` when this pod has to be
        checked node by node with ``filter`` (the simulator then calls it only where needed)."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    """A scheduler-like Score: how good is ``node`` for ``pod`` among feasible nodes?

    Scores are floats, higher is better; the simulator sums the scores of all enabled score
    plugins and takes the best node (ties: the default destination order).
    """

    name: str

    def score(self, pod: Pod, node: NodeState, state: ClusterState) -> float:
        """Return the node's score for the pod."""
        ...


@runtime_checkable
class BatchScorePlugin(ScorePlugin, Protocol):
    """A Score plugin that scores every feasible node of a pod at once: needed when a score is
    normalised across the candidates (a min-max normalisation), and faster. The simulator calls
    :meth:`score_nodes` when a plugin has it, else :meth:`ScorePlugin.score`. Source: the
    resource-portrait design's score (seed 001)."""

    def score_nodes(self, pod: Pod, nodes: Sequence[NodeState], state: ClusterState) -> Sequence[float]:
        """Scores of ``nodes`` for ``pod``, in the same order (higher is better)."""
        ...


def sum_requests(pods: Sequence[Pod]) -> Resources:
    """The sum of ``pods``' requests (millicores, bytes, pod count, extended resources)."""
    cpu = mem = eph = count = 0
    ext: dict[str, int] = {}
    for p in pods:
        r = p.requests
        cpu += r.cpu_millicores
        mem += r.memory_bytes
        eph += r.ephemeral_storage_bytes
        count += r.pods
        for k, v in r.extended.items():
            ext[k] = ext.get(k, 0) + v
    return Resources(cpu, mem, eph, count, ext)


class ClusterState:
    """All nodes' :class:`NodeState` plus the snapshot they came from, with an undo journal.

    Args:
        snapshot: the evaluation's snapshot (PVs, PVCs, controllers are read from it).
        pods_by_node: the pods to count on each node (the caller drops terminal and expendable
            pods); defaults to ``snapshot.pods_by_node`` minus terminal pods.
        usage: real usage per node, ``(cpu millicores, memory bytes)``; nodes absent have
            unknown usage.
        pod_load: what a pod adds to the node it is moved to, ``(cpu millicores, memory
            bytes)`` (:meth:`load`); defaults to its requests.
        requested: the sum of each node's ``pods_by_node`` requests, when the caller knows it
            already (the evaluation cache's node facts); computed otherwise.
        anti_affinity: with ``requested``, the pods of each node that have required
            anti-affinity terms (nodes without any absent), known to the caller likewise;
            found by a scan of every pod otherwise.
        index: the :class:`PodIndex` of ``pods_by_node`` (the very sequences), when the
            caller keeps one; the state reads it (never changes it) while it is at the
            version it had here, and builds its own on first use otherwise.
        prior: an earlier state whose rows this one may take over instead of building them
            (the evaluation cache passes the state of the previous context). Every change made
            in ``prior``, committed or not, is undone first in its rows and anti-affinity
            holders (its node table, pod trackers and index of moved pods, dropped with it,
            are left as they are); ``prior`` is then emptied and must not be used again. A
            node's row is taken over when its counted pods are the very tuple ``prior`` was
            built with (the evaluation cache's node facts, kept while the node's revision is
            the same; the replay world's layout, kept while the node's pods are the same): a
            row is a function of those pods alone, the node object being set anew. Any other
            row is built anew. With or without ``prior``, the state is the same. Only a
            ``reusable`` state can be taken over.
        reusable: keep the undo of committed changes, so that a later state may take this
            one's rows over (the evaluation cache's states); otherwise :meth:`commit` forgets
            it, and nothing keeps the state alive once it is dropped.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        pods_by_node: Mapping[str, Sequence[Pod]] | None = None,
        usage: dict[str, tuple[int, int]] | None = None,
        pod_load: Callable[[Pod], tuple[int, int]] | None = None,
        requested: Mapping[str, Resources] | None = None,
        anti_affinity: Mapping[str, Sequence[Pod]] | None = None,
        index: PodIndex | None = None,
        prior: ClusterState | None = None,
        reusable: bool = False,
    ) -> None:
        self.snapshot = snapshot
        self._pod_load = pod_load
        self.nodes: dict[str, NodeState] = {}
        self.names: list[str] = []
        self._journal: list[Callable[[], None]] = []
        self._committed: list[Callable[[], None]] | None = [] if reusable else None  # commits' undo
        self._unsettled = 0  # changes begun and not journaled (an error half-way leaves it > 0)
        self._dropping = False  # undoing for a take-over: only rows and holders are restored
        self._domain_index: dict[str, dict[str, list[str]]] = {}
        self._static: dict[Hashable, Any] = {}
        self._per_flags: dict[Hashable, Any] = {}
        # The pods the state starts with, indexed (shared, never changed here), and the moves
        # since: base pods taken off their node (by id), pods placed (by id, with their node).
        self._index: PodIndex | LazyPodIndex | None = index
        self._initial: dict[str, Sequence[Pod]] = {}
        self._gone: dict[int, int] = {}
        self._extra: dict[int, tuple[Pod, str]] = {}
        self._extra_by_label: dict[LabelKey, dict[int, tuple[Pod, str]]] = {}
        self._extra_by_ns: dict[str, dict[int, tuple[Pod, str]]] = {}
        self._extra_by_uid: dict[str, dict[int, tuple[Pod, str]]] = {}
        self._trackers: dict[Hashable, PodTracker] = {}
        self._tracked_pairs: dict[tuple[str, str], list[PodTracker]] = {}
        self._tracked_all: list[PodTracker] = []
        self.moves = 0
        """Counts every pod placed or taken off a node, and every undo of one."""
        self.anti_affinity_keys: set[str] = set()
        """Topology keys of the required anti-affinity terms of every pod ever in the state."""
        self.anti_affinity_pods: dict[str, int] = {}
        """Node name → how many pods with required anti-affinity terms it holds now (absent: 0)."""
        self._row_keys: dict[str, frozenset[str]] = {}  # node → its initial pods' anti-affinity keys
        self._holders: dict[tuple[str, str], dict[tuple[int, int], Holder]] = {}
        self._loose_holders: dict[tuple[int, int], Holder] = {}
        self._dra: DraState | None = None
        usage = usage or {}
        use_index = index is not None
        rows = self._take_over(prior, snapshot, pods_by_node) if prior is not None else {}
        for i, node in enumerate(snapshot.nodes):
            name = node.name
            source = pods_by_node.get(name, ()) if pods_by_node is not None else None
            if source is not None:
                if use_index and index is not None and index.pods_of(name) is not source:
                    use_index = False  # not the index of these pods: build one if asked
                self._initial[name] = source
            u = usage.get(name)
            ns = rows.get(name)
            if ns is not None:  # taken over from ``prior``: its pods, requests, holders and keys stay
                keys = self._row_keys.get(name)
                if keys:
                    self.anti_affinity_keys |= keys
                ns.node, ns.position = node, i
                ns.usage_cpu_millicores = u[0] if u else None
                ns.usage_memory_bytes = u[1] if u else None
            else:
                req = requested.get(name) if requested is not None else None
                anti = anti_affinity.get(name, ()) if anti_affinity is not None else None
                ns = self._new_row(node, i, source, u, req, anti)
            self.nodes[name] = ns
            self.names.append(name)
        if not use_index or (index is not None and len(index) != len(self.nodes)):
            self._index = None
        self._index_version = self._index.version if self._index is not None else -1
        self.table = NodeTable(list(self.nodes.values()))

    def _new_row(
        self,
        node: Node,
        position: int,
        source: Sequence[Pod] | None,
        usage: tuple[int, int] | None,
        requested: Resources | None,
        anti_affinity: Sequence[Pod] | None,
    ) -> NodeState:
        """The row of ``node`` built from its counted pods ``source`` (``None``: its non-terminal
        pods in the snapshot), registering the anti-affinity terms they hold (``anti_affinity``,
        those pods when the caller knows them); ``requested`` is their sum when known."""
        if source is not None:
            pods = list(source)
        else:
            pods = [p for p in self.snapshot.pods_by_node.get(node.name, ()) if not p.is_terminal]
            self._initial[node.name] = list(pods)
        with_terms = [p for p in pods if p.required_anti_affinity] if anti_affinity is None else anti_affinity
        if with_terms:
            keys = frozenset(term.topology_key for p in with_terms for term in p.required_anti_affinity)
            self._row_keys[node.name] = keys
            self.anti_affinity_keys |= keys
        for p in with_terms:
            self._count_anti_affinity(node.name, 1)
            self._hold(p, node.name, True)
        return NodeState(
            node=node,
            pods=pods,
            requested=requested if requested is not None else sum_requests(pods),
            usage_cpu_millicores=usage[0] if usage else None,
            usage_memory_bytes=usage[1] if usage else None,
            position=position,
        )

    def _take_over(
        self,
        prior: ClusterState,
        snapshot: ClusterSnapshot,
        pods_by_node: Mapping[str, Sequence[Pod]] | None,
    ) -> dict[str, NodeState]:
        """Undo every change of ``prior``, take its anti-affinity holders and counts, and return
        the rows this state keeps (see ``prior`` in the class doc): those of nodes still in
        ``snapshot`` whose counted pods are the tuple ``prior`` was built with. The others'
        holders and counts are dropped. Nothing is taken from a ``prior`` in which a change
        was begun and never journaled (an error half-way): every row is built anew."""
        rows, initial = prior.nodes, prior._initial
        prior.nodes, prior.names, prior._initial = {}, [], {}
        if prior._unsettled or prior._committed is None:
            prior._journal.clear()  # each undo refers to its state: dropped, the cycle is gone
            prior._committed = None
            return {}
        prior._dropping = True  # its table, trackers and pod index go with it: not restored
        prior.revert(0)
        while prior._committed:
            prior._committed.pop()()
        self._holders, self._loose_holders = prior._holders, prior._loose_holders
        self.anti_affinity_pods = prior.anti_affinity_pods
        row_keys = prior._row_keys
        node_by_name = snapshot.node_by_name
        kept: dict[str, NodeState] = {}
        for name, ns in rows.items():
            source = pods_by_node.get(name) if pods_by_node is not None else None
            if source is initial[name] and isinstance(source, tuple) and name in node_by_name:
                kept[name] = ns
                if name in row_keys:
                    self._row_keys[name] = row_keys[name]
                continue
            for p in ns.pods:
                if p.required_anti_affinity:
                    self._count_anti_affinity(name, -1)
                    self._hold(p, name, False)
        return kept

    # ---- queries -------------------------------------------------------------------------
    @property
    def dra(self) -> DraState:
        """The claims and devices of Dynamic Resource Allocation, following this state's moves
        and reverts (built on first use: a cluster without pods with claims never builds it)."""
        if self._dra is None:
            self._dra = DraState(self.snapshot, self._journal)
        return self._dra

    def load(self, pod: Pod) -> tuple[int, int]:
        """What ``pod`` adds to a node it is moved to, ``(cpu millicores, memory bytes)``: the
        ``pod_load`` the state was built with (the engine passes ``max(request, real usage)``,
        :func:`scaler.utilization.pod_load`), else the requests it is placed with."""
        if self._pod_load is None:
            r = pod.placement_requests
            return r.cpu_millicores, r.memory_bytes
        return self._pod_load(pod)

    def live_nodes(self) -> Iterator[NodeState]:
        """Nodes that still exist in the simulation (not removed), ghosts included."""
        return (n for n in self.nodes.values() if not n.removed)

    def domains(self, topology_key: str) -> dict[str, list[str]]:
        """Topology domain value → names of nodes carrying label ``topology_key`` (cached)."""
        idx = self._domain_index.get(topology_key)
        if idx is None:
            idx = {}
            for n in self.nodes.values():
                v = n.node.labels.get(topology_key)
                if v is not None:
                    idx.setdefault(v, []).append(n.name)
            self._domain_index[topology_key] = idx
        return idx

    def pods_in_domain(self, topology_key: str, value: str) -> Iterator[Pod]:
        """Pods on live, non-ghost nodes whose label ``topology_key`` equals ``value``."""
        for name in self.domains(topology_key).get(value, ()):
            ns = self.nodes[name]
            if not ns.removed and not ns.ghost:
                yield from ns.pods

    def positions(self, names: Iterable[str]) -> Positions:
        """Table positions of the nodes ``names`` (``KeyError`` for an unknown name)."""
        nodes = self.nodes
        return np.fromiter((nodes[n].position for n in names), dtype=np.intp)

    def static(self, key: Hashable, compute: Callable[[], T]) -> T:
        """A value derived from the snapshot alone (never from simulated moves), computed once
        per state under ``key``."""
        try:
            value: T = self._static[key]
        except KeyError:
            value = self._static[key] = compute()
        return value

    def per_flags(self, key: Hashable, compute: Callable[[], T]) -> T:
        """A value derived from the snapshot and the nodes' ghost/removed flags only (never from
        pod moves), computed once until the next flag change."""
        try:
            value: T = self._per_flags[key]
        except KeyError:
            value = self._per_flags[key] = compute()
        return value

    def _base(self) -> PodIndex | LazyPodIndex:
        """The index of the pods the state started with (a :class:`LazyPodIndex` of them when
        not given)."""
        if self._index is None or self._index.version != self._index_version:  # not given, or updated since
            self._index = LazyPodIndex(self._initial)
            self._index_version = self._index.version
        return self._index

    def _base_pods(self, found: Mapping[str, list[Pod]]) -> Iterator[tuple[NodeState, Pod]]:
        nodes, gone = self.nodes, self._gone
        for name, pods in found.items():
            ns = nodes[name]
            if gone:
                for p in pods:
                    if id(p) not in gone:
                        yield ns, p
            else:
                for p in pods:
                    yield ns, p

    def pods_with_label(
        self, namespace: str, key: str = "", value: str = ""
    ) -> Iterator[tuple[NodeState, Pod]]:
        """``(node state, pod)`` for every pod now counted on any node (ghosts and removed
        nodes included) in ``namespace`` whose label ``key`` is ``value``; with ``key`` empty,
        every pod of the namespace. In no particular order.

        Backed by the index of the pods the state started with (:class:`PodIndex`, shared
        with the other states of the same pods) and the moves made since."""
        yield from self._base_pods(self._base().with_label(namespace, key, value))
        extra = self._extra_by_label.get((namespace, key, value)) if key else self._extra_by_ns.get(namespace)
        if extra:
            nodes = self.nodes
            for p, name in extra.values():
                yield nodes[name], p

    def pods_with_uid(self, uid: str) -> Iterator[tuple[NodeState, Pod]]:
        """``(node state, pod)`` for every pod with UID ``uid`` now counted on any node."""
        yield from self._base_pods(self._base().with_uid(uid))
        extra = self._extra_by_uid.get(uid)
        if extra:
            for p, name in extra.values():
                yield self.nodes[name], p

    def namespaces(self) -> set[str]:
        """Every namespace that has a pod counted on a node, or had one."""
        return set(self._base().namespaces()) | set(self._extra_by_ns)

    def _index_add(self, pod: Pod, node_name: str) -> None:
        """``pod`` was placed on ``node_name``: it is listed beside the base pods."""
        pid = id(pod)
        entry = (pod, node_name)
        self._extra[pid] = entry
        self._extra_by_ns.setdefault(pod.namespace, {})[pid] = entry
        self._extra_by_uid.setdefault(pod.uid, {})[pid] = entry
        ns = pod.namespace
        for k, v in pod.labels.items():
            self._extra_by_label.setdefault((ns, k, v), {})[pid] = entry

    def _index_remove(self, pod: Pod) -> bool:
        """``pod`` left its node: a placed pod is unlisted, a base pod hidden. Returns whether
        it was a placed pod (:meth:`_index_restore` undoes either)."""
        pid = id(pod)
        entry = self._extra.pop(pid, None)
        if entry is None:
            self._gone[pid] = self._gone.get(pid, 0) + 1
            return False
        del self._extra_by_ns[pod.namespace][pid]
        del self._extra_by_uid[pod.uid][pid]
        ns = pod.namespace
        for k, v in pod.labels.items():
            del self._extra_by_label[(ns, k, v)][pid]
        return True

    def _index_restore(self, pod: Pod, node_name: str, placed: bool) -> None:
        """Undo :meth:`_index_remove` of ``pod`` from ``node_name``."""
        if placed:
            self._index_add(pod, node_name)
            return
        pid = id(pod)
        n = self._gone[pid] - 1
        if n:
            self._gone[pid] = n
        else:
            del self._gone[pid]

    # ---- pods followed through moves ---------------------------------------------------
    def tracker(self, key: Hashable, build: Callable[[ClusterState], PodTracker]) -> PodTracker:
        """The :class:`PodTracker` kept under ``key``, built by ``build(state)`` on first use
        from the pods the state holds then; from then on it is told of every move (and of
        every undo of one) of a pod carrying one of its ``pairs`` (every pod when ``pairs``
        is ``None``), so it follows simulated moves and reverts."""
        t = self._trackers.get(key)
        if t is None:
            t = self._trackers[key] = build(self)
            if t.pairs is None:
                self._tracked_all.append(t)
            else:
                for pair in t.pairs:
                    self._tracked_pairs.setdefault(pair, []).append(t)
        return t

    def _moved(self, pod: Pod, row: int, delta: int) -> None:
        self.moves += 1
        if self._tracked_pairs:
            pairs = self._tracked_pairs
            for item in pod.labels.items():
                found = pairs.get(item)
                if found is not None:
                    for t in found:
                        t.moved(pod, row, delta)
        for t in self._tracked_all:
            t.moved(pod, row, delta)

    def holders(self, pod: Pod) -> Iterator[Holder]:
        """``(holder pod, its term, its node name)`` for every required anti-affinity term of a
        pod now counted on a node that may select ``pod`` (its selector's first
        ``matchLabels`` pair is one of ``pod``'s labels, or it has none)."""
        for item in pod.labels.items():
            found = self._holders.get(item)
            if found:
                yield from found.values()
        yield from self._loose_holders.values()

    def _hold(self, pod: Pod, node_name: str, add: bool) -> None:
        """Add (or drop) ``pod``'s required anti-affinity terms to the holders on ``node_name``."""
        for i, t in enumerate(pod.required_anti_affinity):
            selector = t.label_selector
            if selector is None:  # selects nothing
                continue
            if selector.match_labels:
                table = self._holders.setdefault(next(iter(selector.match_labels.items())), {})
            else:
                table = self._loose_holders
            if add:
                table[(id(pod), i)] = (pod, t, node_name)
            else:
                del table[(id(pod), i)]

    def _count_anti_affinity(self, node_name: str, delta: int) -> None:
        n = self.anti_affinity_pods.get(node_name, 0) + delta
        if n:
            self.anti_affinity_pods[node_name] = n
        else:
            self.anti_affinity_pods.pop(node_name, None)

    # ---- mutations (journaled) ----------------------------------------------------------
    def checkpoint(self) -> int:
        """A mark to :meth:`revert` to."""
        return len(self._journal)

    def revert(self, mark: int) -> None:
        """Undo every change made since ``mark`` (CA's ``Revert``)."""
        while len(self._journal) > mark:
            self._journal.pop()()

    def commit(self) -> None:
        """Keep every change so far (CA's ``Commit``): :meth:`revert` no longer undoes them.
        (A reusable state keeps their undo for a later state that takes its rows over.)"""
        if self._committed is not None:
            self._committed.extend(self._journal)
        self._journal.clear()

    def unschedule(self, pod: Pod, node_name: str) -> None:
        """Take ``pod`` off ``node_name``."""
        ns = self.nodes[node_name]
        idx = next(i for i, p in enumerate(ns.pods) if p.uid == pod.uid)
        self._unsettled += 1
        removed_pod = ns.pods.pop(idx)
        ns.edits += 1
        old = ns.requested
        ns.requested = old - pod.requests
        placed = self._index_remove(removed_pod)
        if removed_pod.required_anti_affinity:
            self._count_anti_affinity(node_name, -1)
            self._hold(removed_pod, node_name, False)
        self.table.sync(ns)
        self._moved(removed_pod, ns.position, -1)
        if pod.resource_claims:
            self.dra.unschedule(pod)  # journals its own undo

        def undo() -> None:
            ns.pods.insert(idx, removed_pod)
            ns.edits -= 1
            ns.requested = old
            if removed_pod.required_anti_affinity:
                self._count_anti_affinity(node_name, 1)
                self._hold(removed_pod, node_name, True)
            if not self._dropping:
                self._index_restore(removed_pod, node_name, placed)
                self.table.sync(ns)
                self._moved(removed_pod, ns.position, 1)

        self._journal.append(undo)
        self._unsettled -= 1

    def place(self, pod: Pod, node_name: str) -> None:
        """Put ``pod`` on ``node_name`` as a moved pod: its requests (those it is placed with,
        :attr:`~scaler.model.records.Pod.placement_requests`) join the node's requested
        resources and its :meth:`load` TargetUsage's Σ term."""
        ns = self.nodes[node_name]
        self._unsettled += 1
        if pod.resource_claims:
            self.dra.place(pod, ns.node)  # journals its own undo
        ns.pods.append(pod)
        ns.edits += 1
        if pod.required_anti_affinity:
            self.anti_affinity_keys.update(t.topology_key for t in pod.required_anti_affinity)
            self._count_anti_affinity(node_name, 1)
            self._hold(pod, node_name, True)
        old = (ns.requested, ns.moved_cpu_millicores, ns.moved_memory_bytes)
        cpu, mem = self.load(pod)
        ns.requested = old[0] + pod.placement_requests
        ns.moved_cpu_millicores += cpu
        ns.moved_memory_bytes += mem
        self._index_add(pod, node_name)
        self.table.sync(ns)
        self._moved(pod, ns.position, 1)

        def undo() -> None:
            ns.pods.pop()
            ns.edits -= 1
            ns.requested, ns.moved_cpu_millicores, ns.moved_memory_bytes = old
            if pod.required_anti_affinity:
                self._count_anti_affinity(node_name, -1)
                self._hold(pod, node_name, False)
            if not self._dropping:
                self._index_remove(pod)
                self.table.sync(ns)
                self._moved(pod, ns.position, -1)

        self._journal.append(undo)
        self._unsettled -= 1

    def set_flags(self, node_name: str, *, ghost: bool | None = None, removed: bool | None = None) -> None:
        """Mark a node as the ghost under simulation and/or as removed."""
        ns = self.nodes[node_name]
        self._unsettled += 1
        old = (ns.ghost, ns.removed)
        if ghost is not None:
            ns.ghost = ghost
        if removed is not None:
            ns.removed = removed
        self.table.sync(ns)
        self._per_flags.clear()

        def undo() -> None:
            ns.ghost, ns.removed = old
            if not self._dropping:
                self.table.sync(ns)
                self._per_flags.clear()

        self._journal.append(undo)
        self._unsettled -= 1

    def unschedule_all(self, pods: Iterable[Pod], node_name: str) -> None:
        """Take every pod in ``pods`` off ``node_name``."""
        for p in pods:
            self.unschedule(p, node_name)
