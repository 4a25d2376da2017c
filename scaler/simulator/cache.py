"""The evaluation cache: what one evaluation keeps for the next, keyed by revision numbers.

Between two loops most inputs of an evaluation do not move: the nodes, the pods and where they
run stay; usage and the clock advance. :class:`EvaluationCache` keeps what depends only on the
unmoved inputs and answers with it again. **It changes no answer, only its cost**: an
evaluation with a cache equals one without, at every step (``tests/test_evaluation_cache.py``
checks it over random sequences of snapshots, from a source numbering its changes and from the
live watch cache).

Every kept thing is keyed by the snapshot's revision numbers (:mod:`scaler.model.revisions`),
which every snapshot source gives its snapshots (the watch cache of ``scaler run``, snapshot
files, the replay's world). A snapshot without numbers, or with numbers of another source, or
numbers made for other nodes or pods (:meth:`Revisions.describes`), reuses nothing. Objects are
never compared by identity. **The rules**, each the whole condition for a reuse:

1. *Node facts* (:class:`NodeFacts`: the counted pods, the sum of their requests, their
   :class:`~scaler.utilization.PodFacts`, those with required anti-affinity terms) are a function
   of the node, its pods and the configuration: kept per node while its revision
   (``nodes[name]``) and the configuration are the same. The counted pods of every node are
   indexed (:class:`~scaler.simulator.pod_index.PodIndex`) and the index is updated node by node
   as the facts are.
2. *The PDB tracker* (its indexes of the PDBs' selectors) is kept while ``pdbs`` is the same;
   each evaluation gets a fresh copy of its allowances.
3. *A blocked drain* (``BlockedByPod``) is a function of the node's pods, the PDBs (their
   selectors and the allowances left when the node is checked), the workload controllers, the
   configuration and the clock, and, when a pod of the node has resource claims, the Dynamic
   Resource Allocation objects (a claim the simulation cannot decide blocks the drain). It is
   answered again while the node's revision, ``pdbs``, ``workloads``, ``dra`` (when it read
   them) and the configuration are the same, **every PDB covering one of the node's pods the
   rules read (those up to the blocking one) is at the allowance level it had**
   (:func:`pdb_level`: the drain rules read an allowance only as "at least 1", and, for the PDB
   that blocks, as its number: a removal committed earlier in the same pass that charged a PDB
   down to, say, 2 changes nothing, one that exhausted it makes the check run), and the clock is before the first instant a drain rule's answer may change
   with it alone (a terminating pod becoming long-terminating, a kube-system pod passing
   ``--blocking-system-pod-disruption-timeout``: :func:`clock_stable_until`) and not before
   the time it was learnt.
4. *A failed placement* (``NoPlaceToMovePods``) where the first pod to place is refused by every
   other live node by one of :data:`~scaler.simulator.removal.STRUCTURAL_FILTERS`, which read
   the structure alone (nodes, their allocatable, labels and taints, the pods bound to them
   and their requests, ports, volumes), is answered again while ``structure``, the
   configuration and the filters' types are the same, no removal was committed earlier in the
   pass (committed moves change what destinations hold), the clock is in the window of rule 3
   (the drain rules ran first), and the pods to move all still have a known load (checked
   again: :func:`~scaler.simulator.cluster._unknown_load`, which needs no lookup for a pod
   requesting CPU and memory without a reading that lacks a container). The counts per reason
   are the same; their order, which follows the round-robin scan, is recomputed for
   the current destination tiers
   (:meth:`~scaler.simulator.removal.RemovalSimulator.refusals_from`).

5. *The drain rules' answer* on a node (:func:`~scaler.drain.rules.get_pods_to_move`: the pods
   to move, the DaemonSet, on-completion and skipped pods, or the blocking pod) reads what rule
   3's blocked drain reads but the DRA objects: it is answered again under the same conditions
   (node revision, ``pdbs``, ``workloads``, configuration, allowance levels, clock window),
   whatever the check that asks for it (an evaluation, a trial of a held node, the re-check of a
   plan), only while the simulation state holds the node's pods as the snapshot gave them
   (:attr:`~scaler.simulator.state.NodeState.edits` is 0: no pod moved onto it or off it), and
   as the current pods at the same places in the node's list. A passing answer charges the
   tracker as the rules would. Several answers are kept per node
   (:data:`DRAIN_ANSWERS_PER_NODE`), each answered again when its own conditions hold.

6. *The simulation state's rows* (:class:`~scaler.simulator.state.ClusterState`: each node's
   pods, their requests and anti-affinity terms) are taken over from the state of the previous
   context made through the cache, once every change simulated in it is undone, for the nodes
   whose counted pods are the same node facts of rule 1 (a row is a function of those pods,
   kept while the node's revision is the same); the others are built anew. Usage, the clock
   and everything derived from several nodes (the node table, topology domains, pod trackers,
   Dynamic Resource Allocation) are built for each context. A context made through the cache
   is usable until the next one is made: one context at a time per cache (the actuator's
   re-checks take turns).

A reused answer leaves the simulation state as the full check would have: a failed check
reverts every change, and a first pod that fits nowhere moves no round-robin position.

**Joining the cache.** A new input of the evaluation must be covered by a revision number its
sources give (a new kind of object: number its changes in the sources' counters and say here
which number covers it), or be read only by answers that are never kept. A stateful filter
(its state per node, following moves and reverts through :meth:`ClusterState.tracker`) keeps
nothing across evaluations; a verdict that reads it is kept only under rule 4, and only when
the filter is one of the structural ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from scaler.config import ScalerConfig
from scaler.drain.pdb import PdbKey, RemainingPdbTracker
from scaler.drain.rules import (
    KUBE_SYSTEM,
    LONG_TERMINATING_EXTRA_SECONDS,
    BlockingPod,
    DrainContext,
    PodsToMove,
    get_pods_to_move,
)
from scaler.model.pod_usage import PodMetricsColumns
from scaler.model.records import Pod
from scaler.model.revisions import Revisions
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import UnremovableReason
from scaler.simulator.cluster import (
    NodeFacts,
    NodeRemoval,
    RemovalContext,
    _unknown_load,
    node_facts,
    nowhere_detail,
    simulate_node_removal,
)
from scaler.simulator.pod_index import PodIndex
from scaler.simulator.removal import PlacementFailure, StructuralRefusal, placement_order
from scaler.simulator.state import ClusterState

__all__ = ["EvaluationCache", "clock_stable_until", "pdb_level"]


def clock_stable_until(pods: Sequence[Pod], now: float, system_pod_timeout: float) -> float:
    """The first instant after ``now`` (Unix seconds) at which a drain rule's answer on ``pods``
    may change with the clock alone (``inf`` when none): a terminating pod becoming
    long-terminating, a kube-system pod passing ``system_pod_timeout`` seconds of age."""
    until = math.inf
    for p in pods:
        if p.deletion_ts is not None:
            at = p.deletion_ts + p.termination_grace_seconds + LONG_TERMINATING_EXTRA_SECONDS
            if at >= now:
                until = min(until, at)
        if p.namespace == KUBE_SYSTEM and p.creation_ts is not None:
            at = p.creation_ts + system_pod_timeout
            if at >= now:
                until = min(until, at)
    return until


def pdb_level(remaining: int | None) -> int | None:
    """What the drain rules can tell of a PDB's remaining allowance (pods): 1 for any allowance
    of at least 1 (the PDB rule only asks whether one more disruption is allowed), the number
    itself below 1 (a blocking PDB's detail names it), ``None`` for a PDB not tracked."""
    return None if remaining is None else min(remaining, 1)


class EvaluationCache:
    """What evaluations keep for the next ones, by the rules of the module doc. One per
    controller (and one per actuator, for its re-checks); pass it to
    :func:`scaler.engine.evaluate` as ``cache``.

    Attributes:
        hits, misses: node checks answered from the cache, and checks run in full through it.
        index: the counted pods of the last snapshot, indexed (:class:`PodIndex`).
    """

    def __init__(self) -> None:
        self._source = -1
        self._config: ScalerConfig | None = None
        self._facts: dict[str, tuple[int, NodeFacts]] = {}
        self._pdbs: tuple[int, RemainingPdbTracker] | None = None
        self._rows: dict[str, tuple[int, npt.NDArray[np.intp]]] = {}  # node -> its pods' PodMetrics rows
        self._rows_layout: object = None
        self.index = PodIndex()
        self.verdicts = _Verdicts()
        self._drains: dict[str, list[_Drained]] = {}  # newest first
        self._pdb_keys: dict[str, _PdbKeys] = {}
        self._state: ClusterState | None = None
        self.hits = 0
        self.misses = 0
        self.drain_hits = 0

    def revisions(self, snapshot: ClusterSnapshot, config: ScalerConfig) -> Revisions | None:
        """``snapshot``'s numbers when this cache may reuse what it keeps for it (same source,
        numbers made for this snapshot, same configuration), else ``None``; anything kept for
        another source or configuration is forgotten."""
        rev = snapshot.revisions
        if rev is None or not rev.describes(snapshot):
            self._forget(-1, config)
            return None
        if rev.source != self._source or (config is not self._config and config != self._config):
            self._forget(rev.source, config)
        return rev

    def _forget(self, source: int, config: ScalerConfig) -> None:
        self._source, self._config = source, config
        self._facts.clear()
        self._pdbs = None
        self.verdicts = _Verdicts()
        self._drains.clear()
        self._pdb_keys.clear()
        self._state = None

    def facts(self, snapshot: ClusterSnapshot, config: ScalerConfig) -> dict[str, NodeFacts]:
        """Every node's :class:`NodeFacts` for ``snapshot`` and ``config`` (rule 1); nodes gone
        are forgotten, and :attr:`index` follows."""
        rev = self.revisions(snapshot, config)
        old = self._facts if rev is not None else {}
        kept: dict[str, tuple[int, NodeFacts]] = {}
        out: dict[str, NodeFacts] = {}
        empty: tuple[Pod, ...] = ()
        by_node = snapshot.pods_by_node
        for node in snapshot.nodes:
            name = node.name
            number = rev.nodes.get(name, -1) if rev is not None else -1
            entry = old.get(name)
            if entry is None or entry[0] != number or number < 0:
                entry = (number, node_facts(node, by_node.get(name, empty), config, snapshot.now))
            kept[name] = entry
            out[name] = entry[1]
        self._facts = kept
        for gone in [n for n in self._drains if n not in kept]:
            del self._drains[gone]
        for gone in [n for n in self._pdb_keys if n not in kept]:
            del self._pdb_keys[gone]
        self.index.follow({name: f.counted for name, f in out.items()})
        return out

    def removal(
        self, ctx: RemovalContext, node_name: str, tiers: Sequence[Sequence[str]], committed: bool = False
    ) -> NodeRemoval:
        """:func:`~scaler.simulator.cluster.simulate_node_removal` of ``node_name`` in ``ctx``
        (committing a success), answered from the cache when rule 3 or 4 allows, and learnt
        for the next evaluations when it is a blocked drain or a failed placement.
        ``committed``: a removal was committed in ``ctx`` earlier in the pass."""
        return self.verdicts.removal(
            self, ctx, self.revisions(ctx.snapshot, ctx.config), node_name, tiers, committed
        )

    def pdb_levels(
        self, rev: Revisions, tracker: RemainingPdbTracker, node_name: str, pods: Sequence[Pod], read: int
    ) -> tuple[tuple[PdbKey, int | None], ...]:
        """The :func:`pdb_level` of every PDB covering one of the first ``read`` of ``pods``
        (the node's pods as the snapshot gives them: the drain rules stop at the blocking
        pod), by PDB key; which PDBs cover each pod is kept per node while its revision and
        ``pdbs`` are the same."""
        node = rev.nodes.get(node_name, -1)
        kept = self._pdb_keys.get(node_name)
        if (
            kept is None
            or (kept.node, kept.pdbs, len(kept.per_pod)) != (node, rev.pdbs, len(pods))
            or node < 0
        ):
            per_pod = tuple(tuple((pdb.namespace, pdb.name) for pdb in tracker.matching(p)) for p in pods)
            kept = self._pdb_keys[node_name] = _PdbKeys(node, rev.pdbs, per_pod, {})
        keys = kept.by_read.get(read)
        if keys is None:
            keys = kept.by_read[read] = tuple(sorted({k for of_pod in kept.per_pod[:read] for k in of_pod}))
        return tuple((k, pdb_level(tracker.remaining_of(k))) for k in keys)

    def pods_to_move(self, ctx: RemovalContext, node_name: str) -> PodsToMove:
        """:func:`~scaler.drain.rules.get_pods_to_move` on the node's pods in ``ctx`` (which
        must be the snapshot's: ``NodeState.edits`` is 0) with ``ctx.tracker``, answered again
        when rule 5 allows and learnt otherwise. Charges the tracker as the rules would."""
        pods = ctx.state.nodes[node_name].pods
        tracker = ctx.tracker
        now = ctx.snapshot.now
        rev = self.revisions(ctx.snapshot, ctx.config)
        if rev is None:
            return get_pods_to_move(pods, DrainContext(ctx.snapshot, ctx.options, now, tracker))
        number = rev.nodes.get(node_name, -1)
        kept = self._drains.get(node_name, [])
        for d in kept if number >= 0 else ():
            if (
                d.node == number
                and d.pdbs == rev.pdbs
                and d.workloads == rev.workloads
                and d.learnt_at <= now <= d.until
                and len(pods) == d.count
                and d.levels == self.pdb_levels(rev, tracker, node_name, pods, d.read)
            ):
                self.drain_hits += 1
                answer = d.answer(pods)
                if answer.blocking is None:
                    tracker.remove_pods(answer.pods)
                return answer
        levels = self.pdb_levels(rev, tracker, node_name, pods, len(pods))  # before any charge
        answer = get_pods_to_move(pods, DrainContext(ctx.snapshot, ctx.options, now, tracker))
        if number >= 0:
            until = clock_stable_until(pods, now, ctx.options.blocking_system_pod_disruption_timeout)
            drained = _Drained.of(answer, pods, number, rev, levels, now, until)
            if drained.read < len(pods):  # blocked: the rules read the pods up to the blocking one
                levels = self.pdb_levels(rev, tracker, node_name, pods, drained.read)
                drained = replace(drained, levels=levels)
            same = [d for d in kept if (d.node, d.pdbs, d.workloads) == (number, rev.pdbs, rev.workloads)]
            self._drains[node_name] = [drained, *same[: DRAIN_ANSWERS_PER_NODE - 1]]
        return answer

    def pod_sums(
        self,
        snapshot: ClusterSnapshot,
        config: ScalerConfig,
        facts: Mapping[str, NodeFacts],
        only: Collection[str] | None = None,
    ) -> dict[str, tuple[int, int]] | None:
        """Per node of ``facts`` (of those in ``only`` too, when given), the summed CPU
        millicores and memory bytes of the newest fresh PodMetrics of its counted pods (the sum
        :func:`scaler.utilization.node_utilization` compares its NodeMetrics with), when the
        snapshot gives them as columns (:class:`~scaler.model.pod_usage.PodMetricsColumns`, no
        partial reading): segment sums over the pods' rows, which are kept per node while its
        revision and the columns' layout are the same (rule 1; a call with ``only`` keeps the
        other nodes' rows as they were). ``None`` otherwise (each node sums its own)."""
        readings = snapshot.newest_pod_metrics or snapshot.pod_metrics
        rev = self.revisions(snapshot, config)
        if rev is None or not isinstance(readings, PodMetricsColumns) or snapshot.partial_pod_metrics:
            return None
        if readings.timestamp < snapshot.now - config.max_metrics_age:
            return None  # stale: no reading counts (each node finds so)
        if readings.layout is not self._rows_layout:
            self._rows, self._rows_layout = {}, readings.layout
        names = list(facts) if only is None else sorted(n for n in only if n in facts)
        old = self._rows
        kept: dict[str, tuple[int, npt.NDArray[np.intp]]] = {} if only is None else old
        rows_of = readings.rows
        parts = []
        for name in names:
            f = facts[name]
            number = rev.nodes.get(name, -1)
            entry = old.get(name)
            if entry is None or entry[0] != number or number < 0:
                keys = f.pods.keys
                entry = (
                    number,
                    np.fromiter((rows_of.get(k, -1) for k in keys), dtype=np.intp, count=len(keys)),
                )
            kept[name] = entry
            parts.append(entry[1])
        self._rows = kept
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=np.intp)
        offsets = np.zeros(len(parts) + 1, dtype=np.intp)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        missing = rows < 0
        if missing.any():  # a pod without a reading adds nothing: read row 0 and zero it
            cpu, mem = readings.cpu[np.where(missing, 0, rows)], readings.memory[np.where(missing, 0, rows)]
            cpu, mem = np.where(missing, 0, cpu), np.where(missing, 0, mem)
            cpu_cs = np.concatenate(([0], np.cumsum(cpu, dtype=np.int64)))
            mem_cs = np.concatenate(([0], np.cumsum(mem, dtype=np.int64)))
            cpu_sum, mem_sum = (
                cpu_cs[offsets[1:]] - cpu_cs[offsets[:-1]],
                mem_cs[offsets[1:]] - mem_cs[offsets[:-1]],
            )
        else:
            cpu_sum, mem_sum = readings.sums(rows, offsets)
        return dict(zip(names, zip(cpu_sum.tolist(), mem_sum.tolist(), strict=True), strict=True))

    def state(
        self,
        snapshot: ClusterSnapshot,
        config: ScalerConfig,
        build: Callable[[ClusterState | None], ClusterState],
    ) -> ClusterState:
        """The simulation state of a new context on ``snapshot`` (rule 6): ``build(prior)``
        makes it, taking over the rows of ``prior``, the state this cache made last, whose
        node facts (rule 1) are kept; ``build(None)`` for a snapshot without numbers of this
        cache's source. The state made last is no longer usable after."""
        prior, self._state = self._state, None
        state = build(prior if self.revisions(snapshot, config) is not None else None)
        self._state = state
        return state

    def tracker(self, snapshot: ClusterSnapshot, config: ScalerConfig) -> RemainingPdbTracker:
        """A fresh :class:`~scaler.drain.pdb.RemainingPdbTracker` of ``snapshot.pdbs`` (rule
        2): a copy of the one kept while ``pdbs`` is the same."""
        rev = self.revisions(snapshot, config)
        if rev is None:
            return RemainingPdbTracker(snapshot.pdbs)
        if self._pdbs is None or self._pdbs[0] != rev.pdbs:
            self._pdbs = (rev.pdbs, RemainingPdbTracker(snapshot.pdbs))
        return self._pdbs[1].copy()


DRAIN_ANSWERS_PER_NODE = 4
"""How many drain-rule answers rule 5 keeps per node, one per allowance levels met (the newest
first): the PDBs a node's pods share with nodes drained earlier in a pass are exhausted in one
pass and not in the next, and each answer is answered again when its levels come back."""


@dataclass(frozen=True, slots=True)
class _PdbKeys:
    """Which PDBs cover each of a node's pods (in its list's order), as learnt at the node's
    revision and ``pdbs``, and their sorted union over the first pods, by how many."""

    node: int
    pdbs: int
    per_pod: tuple[tuple[PdbKey, ...], ...]
    by_read: dict[int, tuple[PdbKey, ...]]


@dataclass(frozen=True, slots=True)
class _Drained:
    """A kept drain-rule answer on a node (rule 5): the numbers and allowance levels it read,
    and the answer as places in the node's pod list."""

    node: int
    pdbs: int
    workloads: int
    levels: tuple[tuple[PdbKey, int | None], ...]
    learnt_at: float
    until: float
    count: int  # the node's pods
    read: int  # the pods the rules read: up to the blocking one, else all
    lists: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    blocking: tuple[int, BlockingPod] | None

    @classmethod
    def of(
        cls,
        answer: PodsToMove,
        pods: Sequence[Pod],
        node: int,
        rev: Revisions,
        levels: tuple[tuple[PdbKey, int | None], ...],
        now: float,
        until: float,
    ) -> _Drained:
        """``answer`` on ``pods``, learnt at ``now`` and valid until ``until`` (Unix seconds)."""
        place = {id(p): i for i, p in enumerate(pods)}  # the answer's pods are items of ``pods``
        groups = (answer.pods, answer.daemonset_pods, answer.on_completion_pods, answer.skipped_pods)
        moved, ds, waiting, skipped = (tuple(place[id(p)] for p in g) for g in groups)
        b = answer.blocking
        blocking = (place[id(b.pod)], b) if b is not None else None
        read = blocking[0] + 1 if blocking is not None else len(pods)
        lists = (moved, ds, waiting, skipped)
        return cls(node, rev.pdbs, rev.workloads, levels, now, until, len(pods), read, lists, blocking)

    def answer(self, pods: Sequence[Pod]) -> PodsToMove:
        """The kept answer over ``pods``, the node's current pods (the same places)."""
        if self.blocking is not None:
            i, b = self.blocking
            return PodsToMove(blocking=BlockingPod(pods[i], b.reason, b.detail))
        moved, ds, waiting, skipped = (tuple(pods[i] for i in group) for group in self.lists)
        return PodsToMove(moved, ds, waiting, skipped)


@dataclass(frozen=True, slots=True)
class _Blocked:
    """A kept ``BlockedByPod`` answer (rule 3) and the numbers and allowance levels it read."""

    node: int
    pdbs: int
    workloads: int
    dra: int  # -1: no pod of the node has resource claims (the DRA objects were not read)
    allowances: tuple[tuple[PdbKey, int | None], ...]
    learnt_at: float
    until: float
    removal: NodeRemoval


@dataclass(frozen=True, slots=True)
class _Refused:
    """A kept ``NoPlaceToMovePods`` answer (rule 4)."""

    learnt_at: float
    until: float
    removal: NodeRemoval
    pod: Pod
    refusal: StructuralRefusal


class _Verdicts:
    """The kept node checks of one source and configuration (rules 3 and 4)."""

    def __init__(self) -> None:
        self.blocked: dict[str, _Blocked] = {}
        self.refused: dict[str, _Refused] = {}
        self.structure: tuple[int, tuple[type, ...]] | None = None

    def removal(
        self,
        cache: EvaluationCache,
        ctx: RemovalContext,
        rev: Revisions | None,
        node_name: str,
        tiers: Sequence[Sequence[str]],
        committed: bool,
    ) -> NodeRemoval:
        if rev is not None:
            structure = (rev.structure, tuple(type(f) for f in ctx.simulator.filters))
            if structure != self.structure:  # rule 4 reads the structure: forget those answers
                self.structure, self.refused = structure, {}
            answer = self._answer(ctx, rev, node_name, tiers, committed)
            if answer is not None:
                cache.hits += 1
                return answer
        cache.misses += 1
        removal = simulate_node_removal(ctx, node_name, tiers)
        if rev is not None:
            self._learn(cache, ctx, rev, node_name, removal, committed)
        return removal

    def _answer(
        self,
        ctx: RemovalContext,
        rev: Revisions,
        node_name: str,
        tiers: Sequence[Sequence[str]],
        committed: bool,
    ) -> NodeRemoval | None:
        now = ctx.snapshot.now
        b = self.blocked.get(node_name)
        if (
            b is not None
            and b.learnt_at <= now <= b.until
            and b.node == rev.nodes.get(node_name, -1)
            and b.pdbs == rev.pdbs
            and b.workloads == rev.workloads
            and (b.dra < 0 or b.dra == rev.dra)
            and all(pdb_level(ctx.tracker.remaining_of(k)) == level for k, level in b.allowances)
        ):
            return b.removal
        r = self.refused.get(node_name)
        if r is None or committed or not r.learnt_at <= now <= r.until:
            return None
        if _unknown_load(ctx, r.removal.pods):
            return None
        reasons = ctx.simulator.refusals_from(r.refusal, tiers)
        if reasons is None:
            return None
        detail = nowhere_detail(PlacementFailure(r.pod, reasons))
        kept = r.removal
        return NodeRemoval(kept.node, kept.reason, detail, None, kept.pods, kept.daemonset_pods)

    def _learn(
        self,
        cache: EvaluationCache,
        ctx: RemovalContext,
        rev: Revisions,
        node_name: str,
        removal: NodeRemoval,
        committed: bool,
    ) -> None:
        self.blocked.pop(node_name, None)
        self.refused.pop(node_name, None)
        pods = ctx.state.nodes[node_name].pods
        now = ctx.snapshot.now
        until = clock_stable_until(pods, now, ctx.options.blocking_system_pod_disruption_timeout)
        if removal.reason is UnremovableReason.BlockedByPod:
            # Blocked by a drain rule (no pods listed), the rules read the pods up to the
            # blocking one; by a resource claim (after the rules passed), all of them.
            b = removal.blocking
            read = len(pods)
            if b is not None and not removal.pods and not removal.daemonset_pods:
                read = next((i + 1 for i, p in enumerate(pods) if p is b.pod), len(pods))
            allowances = cache.pdb_levels(rev, ctx.tracker, node_name, pods, read)
            node = rev.nodes.get(node_name, -1)
            dra = rev.dra if any(p.resource_claims for p in pods) else -1
            self.blocked[node_name] = _Blocked(
                node, rev.pdbs, rev.workloads, dra, allowances, now, until, removal
            )
            return
        if removal.reason is not UnremovableReason.NoPlaceToMovePods or not removal.pods or committed:
            return  # after a committed removal, destinations hold its moves: not the structure's answer
        pod = min(removal.pods, key=placement_order)  # the first the simulation places
        if not removal.detail.startswith(f"pod {pod.key} fits nowhere: "):
            return
        refusal = ctx.simulator.structural_refusal(node_name, removal.pods, pod)
        if refusal is None:
            return
        self.refused[node_name] = _Refused(now, until, removal, pod, refusal)
