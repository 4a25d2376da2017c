"""Reuse a candidate's failed removal check from one evaluation to the next.

Between two loops of a replay (and of a steady cluster) most inputs of a node-removal check do
not move: the nodes, the pods and where they run stay, only usage and the clock advance. Most
failed checks do not read usage at all: a pod that blocks the drain (``BlockedByPod``), or a
first pod that every other node refuses by its requests, taints, affinity, ports or volume
zone (``NoPlaceToMovePods`` "Insufficient cpu"). :class:`VerdictCache` keeps such failures
and answers them again without re-running the drain rules and the placement search.

**When a verdict is reused** (all must hold; otherwise the check runs in full and its answer
is learnt):

1. *Same structure.* The evaluated snapshot holds the same node, pod, PDB, workload, volume
   and namespace objects (compared by identity: the replay's world keeps them while nothing
   moved; any change makes new ones) and the same configuration object and filter types. A
   change of any of them forgets every kept verdict but the ``BlockedByPod`` ones: the drain
   rules read only the node's own pods, the PDBs, the workload controllers, the configuration
   and the clock, so such a verdict is kept while those are the same (the node's pods as the
   very same tuple of the snapshot's ``pods_by_node``: the replay's world keeps a node's tuple
   while its pods stay).
2. *Nothing committed before it.* No removal was committed earlier in the same evaluation
   pass, so the simulation state (which nodes are live, what they hold, the PDB allowances
   left) is the snapshot's own, as it was when the verdict was learnt (it is learnt only
   then too). Failed checks before it leave nothing behind but the round-robin positions,
   which the reuse reads. One exception: a ``BlockedByPod`` verdict on a node none of whose
   pods a PDB covers is answered after committed removals too (they change the allowances
   left, which its drain never reads; a node that received moved pods is never checked).
3. *Same clock class.* The drain rules read the clock in two places: a pod terminating for
   longer than its grace period plus 30 s is skipped, and a kube-system pod without a PDB
   stops blocking ``--blocking-system-pod-disruption-timeout`` after its creation. The
   verdict is kept from the time it was learnt until the first of those instants still ahead
   for the node's pods (never for an earlier time).
4. *What it was.* ``BlockedByPod`` (the drain rules alone decide it, so 1–3 make it the same
   answer), or ``NoPlaceToMovePods`` where the pod that fit nowhere is the first the
   simulation places and every other live node refused it by one of
   :data:`~scaler.simulator.removal.STRUCTURAL_FILTERS`, which run before any filter that
   reads usage (:meth:`~scaler.simulator.removal.RemovalSimulator.structural_refusal`), and
   the pods to move all still have a known load. The detail's counts per reason are the
   same; their order, which follows the round-robin scan, is recomputed for the current
   destination tiers (:meth:`~scaler.simulator.removal.RemovalSimulator.refusals_from`).

A reused answer leaves the simulation state as the full check would have: a failed check
reverts every change, and a first pod that fits nowhere moves no round-robin position.
``tests/test_verdict_reuse.py`` checks, step by step over random clusters whose usage, pods
and clock change, that an evaluation with a :class:`VerdictCache` equals one without.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from scaler.drain.rules import KUBE_SYSTEM, LONG_TERMINATING_EXTRA_SECONDS
from scaler.model.records import Pod
from scaler.reasons import UnremovableReason
from scaler.simulator.cluster import (
    NodeMemo,
    NodeRemoval,
    RemovalContext,
    _unknown_load,
    nowhere_detail,
    simulate_node_removal,
)
from scaler.simulator.removal import PlacementFailure, StructuralRefusal, placement_order

__all__ = ["VerdictCache"]


@dataclass(frozen=True, slots=True)
class _Kept:
    learnt_at: float
    until: float
    removal: NodeRemoval
    pod: Pod | None = None
    refusal: StructuralRefusal | None = None
    requested: bool = False  # every pod to move requests CPU and memory: its load is always known
    source: tuple[Pod, ...] | None = None  # the node's pods in the snapshot it was learnt on
    pdb_free: bool = False  # no PDB matches a pod of the node: the budgets left do not matter


def _structure(ctx: RemovalContext) -> tuple[object, ...]:
    snap = ctx.snapshot
    return (
        snap.nodes, snap.pods, snap.pdbs, snap.controllers, snap.pvs, snap.pvcs, snap.namespaces,
        snap.workload_kinds, snap.has_pvs, snap.dra, ctx.config, tuple(type(f) for f in ctx.simulator.filters),
    )  # fmt: skip


def _drain_inputs(ctx: RemovalContext) -> tuple[object, ...]:
    """What the drain rules read besides a node's pods and the clock (and the claims whose
    undecidability blocks a drain too)."""
    snap = ctx.snapshot
    return (snap.pdbs, snap.controllers, snap.workload_kinds, snap.dra, ctx.config)


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Identity first (the replay keeps its objects while nothing changed), else equality."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


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


class VerdictCache:
    """Failed node-removal checks kept from one evaluation to the next (rules in the module
    doc). One per controller; pass it to :func:`scaler.engine.evaluate` as ``verdicts``.

    Attributes:
        hits, misses: checks answered from the cache, and checks run in full through it.
        memo: per-node facts kept for the evaluations' contexts
            (:class:`~scaler.simulator.cluster.NodeMemo`).
    """

    def __init__(self) -> None:
        self.memo = NodeMemo()
        self._structure: tuple[object, ...] = ()
        self._drain: tuple[object, ...] = ()
        self._context: weakref.ref[RemovalContext] | None = None
        self._kept: dict[str, _Kept] = {}
        self.hits = 0
        self.misses = 0

    def removal(
        self, ctx: RemovalContext, node_name: str, tiers: Sequence[Sequence[str]], committed: bool = False
    ) -> NodeRemoval:
        """:func:`~scaler.simulator.cluster.simulate_node_removal` of ``node_name`` in ``ctx``
        (committing a success), answered from the cache when the rules allow. ``committed``:
        a removal was committed in ``ctx`` before (rule 2): only a drain blocked without any
        PDB is answered or learnt."""
        if self._context is None or self._context() is not ctx:  # read once per context
            self._context = weakref.ref(ctx)
            structure = _structure(ctx)
            if not _same(structure, self._structure):
                drain = _drain_inputs(ctx)
                same_drain = _same(drain, self._drain)
                self._structure, self._drain = structure, drain
                self._kept = {k: v for k, v in self._kept.items() if same_drain and v.refusal is None}
        now = ctx.snapshot.now
        kept = self._kept.get(node_name)
        if (
            kept is not None
            and kept.learnt_at <= now <= kept.until
            and (not committed or (kept.refusal is None and kept.pdb_free))
        ):
            answer = self._answer(ctx, kept, tiers, node_name)
            if answer is not None:
                self.hits += 1
                return answer
        self.misses += 1
        removal = simulate_node_removal(ctx, node_name, tiers)
        self._learn(ctx, node_name, removal, committed)
        return removal

    @staticmethod
    def _answer(
        ctx: RemovalContext, kept: _Kept, tiers: Sequence[Sequence[str]], node_name: str
    ) -> NodeRemoval | None:
        if kept.refusal is None or kept.pod is None:  # BlockedByPod: the node's own pods decide
            return kept.removal if kept.source is ctx.snapshot.pods_by_node.get(node_name) else None
        r = kept.removal
        if not kept.requested and _unknown_load(ctx, r.pods):
            return None
        reasons = ctx.simulator.refusals_from(kept.refusal, tiers)
        if reasons is None:
            return None
        detail = nowhere_detail(PlacementFailure(kept.pod, reasons))
        return NodeRemoval(r.node, r.reason, detail, None, r.pods, r.daemonset_pods)

    def _learn(self, ctx: RemovalContext, node_name: str, removal: NodeRemoval, committed: bool) -> None:
        blocked = removal.reason is UnremovableReason.BlockedByPod
        if committed and not blocked:
            return  # found on a state that earlier removals changed: not the snapshot's own
        pods = ctx.state.nodes[node_name].pods
        pdb_free = blocked and not any(ctx.tracker.matching(p) for p in pods)
        if committed and not pdb_free:
            return
        self._kept.pop(node_name, None)
        pod: Pod | None = None
        refusal: StructuralRefusal | None = None
        if removal.reason is UnremovableReason.NoPlaceToMovePods and removal.pods:
            pod = min(removal.pods, key=placement_order)  # the first the simulation places
            if not removal.detail.startswith(f"pod {pod.key} fits nowhere: "):
                return
            refusal = ctx.simulator.structural_refusal(node_name, removal.pods, pod)
            if refusal is None:
                return
        elif not blocked:
            return
        now = ctx.snapshot.now
        timeout = ctx.options.blocking_system_pod_disruption_timeout
        until = clock_stable_until(pods, now, timeout)
        requested = all(p.requests.cpu_millicores > 0 and p.requests.memory_bytes > 0 for p in removal.pods)
        source = ctx.snapshot.pods_by_node.get(node_name)
        self._kept[node_name] = _Kept(now, until, removal, pod, refusal, requested, source, pdb_free)
