"""One node's removal check, shared by the evaluation and the actuator's re-check, and the move
of a single pod, which hot-node relief checks with the same rules.

:func:`simulate_node_removal` has the shape of cluster-autoscaler's ``SimulateNodeRemoval``
(``simulator/cluster.go``): the pods to move come from the drain rules (``GetPodsToMove``, with
the PDB budget left by the nodes already removed), then each one must find a place on another
node (``findPlaceFor``); the answer is either a removal (with its moves) or the reason the node
stays, worded once. :mod:`scaler.engine` calls it for every candidate of an evaluation, and
:mod:`scaler.actuation.recheck` calls it on fresh state before a drain; both build what it needs
with a :class:`RemovalContext`, so they count the same pods, the same usage (real usage,
pods not yet in the metrics, moved pods by ``max(request, real usage)``), the same filters and
the same PDB view.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from scaler.config import ScalerConfig
from scaler.drain.pdb import RemainingPdbTracker
from scaler.drain.rules import (
    BlockingPod,
    BlockingPodReason,
    DrainContext,
    DrainOptions,
    PodsToMove,
    get_pods_to_move,
)
from scaler.model.records import Node, Pod, Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import UnremovableReason
from scaler.simulator.pod_index import PodIndex
from scaler.simulator.removal import PlacementFailure, RemovalSimulator, placement_order
from scaler.simulator.state import ClusterState, FilterPlugin, ScorePlugin, sum_requests
from scaler.utilization import (
    NodeUtilization,
    PodFacts,
    node_utilization,
    pod_facts,
    pod_load,
    unknown_usage,
)

__all__ = [
    "ContextCache",
    "NodeFacts",
    "NodeRemoval",
    "PodMove",
    "RemovalContext",
    "counted_pods",
    "counted_pods_of",
    "node_facts",
    "simulate_node_removal",
    "simulate_pod_move",
    "undecidable_claim",
    "validate_node_removal",
]


def counted_pods(snapshot: ClusterSnapshot, config: ScalerConfig) -> dict[str, list[Pod]]:
    """Pods that occupy each node: terminal pods and expendable pods (``spec.priority`` set and
    below ``--expendable-pods-priority-cutoff``, :meth:`Pod.is_expendable`) are dropped, as CA
    drops them from its snapshot (``IsExpendablePod``)."""
    return {name: counted_pods_of(pods, config) for name, pods in snapshot.pods_by_node.items()}


def counted_pods_of(pods: Sequence[Pod], config: ScalerConfig) -> list[Pod]:
    """The pods of ``pods`` that occupy their node (:func:`counted_pods` for one node)."""
    cutoff = config.expendable_pods_priority_cutoff
    return [p for p in pods if not p.is_terminal and not p.is_expendable(cutoff)]


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What a node's pods give an evaluation besides usage: depends only on the node, its pods
    and the configuration (the evaluation cache keeps it per node revision,
    :mod:`scaler.simulator.cache`).

    Attributes:
        node: the node record.
        counted: :func:`counted_pods_of` its pods.
        requested: the sum of ``counted``'s requests.
        pods: their :class:`~scaler.utilization.PodFacts` (requests fractions, whether only
            DaemonSet and mirror pods are counted, the pods' keys and newest start).
        anti_affinity: the counted pods with required anti-affinity terms.
    """

    node: Node
    counted: tuple[Pod, ...]
    requested: Resources
    pods: PodFacts
    anti_affinity: tuple[Pod, ...]


def node_facts(node: Node, pods: Sequence[Pod], config: ScalerConfig, now: float) -> NodeFacts:
    """The :class:`NodeFacts` of ``node`` carrying ``pods`` (every pod bound to it) at ``now``."""
    counted = tuple(counted_pods_of(pods, config))
    anti = tuple([p for p in counted if p.required_anti_affinity])
    return NodeFacts(node, counted, sum_requests(counted), pod_facts(node, counted, config, now), anti)


class ContextCache(Protocol):
    """What a :class:`RemovalContext` reads from the evaluation cache
    (:class:`scaler.simulator.cache.EvaluationCache`)."""

    @property
    def index(self) -> PodIndex:
        """The counted pods of the last :meth:`facts`, indexed."""
        ...

    def facts(self, snapshot: ClusterSnapshot, config: ScalerConfig) -> Mapping[str, NodeFacts]:
        """Every node's :class:`NodeFacts`."""
        ...

    def tracker(self, snapshot: ClusterSnapshot, config: ScalerConfig) -> RemainingPdbTracker:
        """A fresh PDB tracker of ``snapshot.pdbs``."""
        ...

    def pod_sums(
        self,
        snapshot: ClusterSnapshot,
        config: ScalerConfig,
        facts: Mapping[str, NodeFacts],
        only: Collection[str] | None = None,
    ) -> Mapping[str, tuple[int, int]] | None:
        """Per node (of ``only``, when given), the summed newest fresh PodMetrics of its
        counted pods, when known."""
        ...

    def pods_to_move(self, ctx: RemovalContext, node_name: str) -> PodsToMove:
        """:func:`~scaler.drain.rules.get_pods_to_move` of the node's pods as ``ctx`` was built
        with them, with ``ctx.tracker`` (charged as that function charges it)."""
        ...

    def state(
        self,
        snapshot: ClusterSnapshot,
        config: ScalerConfig,
        build: Callable[[ClusterState | None], ClusterState],
    ) -> ClusterState:
        """The simulation state of a new context: ``build(prior)``, taking over rows of the
        state made last through the cache."""
        ...


class RemovalContext:
    """What every node-removal check of one evaluation (or one re-check) shares.

    Attributes:
        snapshot, config: the cluster state and the settings.
        pods_by_node: :func:`counted_pods` (lists, or the cache's tuples: read them, never change them).
        utils: every node's :class:`~scaler.utilization.NodeUtilization`.
        state: the simulation state: counted pods, each node's destination usage
            (``NodeUtilization.destination_cpu_millicores``), moved pods loaded with
            :func:`~scaler.utilization.pod_load`.
        simulator: the removal simulator over ``state`` with the filters and scorers.
        tracker: the PDB budgets left, shared by the removals committed in this context.
        options: the drain rules' settings.
        cache: the ``cache`` given, or ``None``.

    ``cache`` keeps per-node facts and drain-rule answers from one context to the next
    (:class:`ContextCache`); the context is the same with or without it. With ``only``, the
    utilization (and so the usage the state knows) is computed for those nodes alone: a node
    outside has unknown usage, so TargetUsage refuses it; :func:`validate_node_removal` reads
    no other.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        config: ScalerConfig,
        filters: Sequence[FilterPlugin],
        scorers: Sequence[ScorePlugin] = (),
        cache: ContextCache | None = None,
        only: Collection[str] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.cache = cache
        requested: dict[str, Resources] | None = None
        anti: dict[str, tuple[Pod, ...]] | None = None
        self.pods_by_node: dict[str, Sequence[Pod]] = {}
        if cache is None:  # one context: nothing to keep
            self.pods_by_node.update(counted_pods(snapshot, config))
            self.utils: dict[str, NodeUtilization] = {
                n.name: node_utilization(n, self.pods_by_node[n.name], snapshot, config)
                for n in snapshot.nodes
                if only is None or n.name in only
            }
        else:
            facts = cache.facts(snapshot, config)
            self.pods_by_node.update((name, f.counted) for name, f in facts.items())
            for name, pods in snapshot.pods_by_node.items():  # pods bound to nodes not listed
                if name not in facts:
                    self.pods_by_node[name] = counted_pods_of(pods, config)
            requested = {name: f.requested for name, f in facts.items()}
            anti = {name: f.anti_affinity for name, f in facts.items() if f.anti_affinity}
            sums = cache.pod_sums(snapshot, config, facts, only) or {}
            self.utils = {
                n.name: node_utilization(
                    n, facts[n.name].counted, snapshot, config, facts[n.name].pods, sums.get(n.name)
                )
                for n in snapshot.nodes
                if only is None or n.name in only
            }
        usage: dict[str, tuple[int, int]] = {}
        for name, u in self.utils.items():
            if u.destination_cpu_millicores is not None and u.destination_memory_bytes is not None:
                usage[name] = (u.destination_cpu_millicores, u.destination_memory_bytes)

        loads: dict[str, tuple[Pod, tuple[int, int]]] = {}  # uid → (the pod, its load), per context

        def load(pod: Pod) -> tuple[int, int]:
            kept = loads.get(pod.uid)
            if kept is not None and kept[0] is pod:  # the very object: the same load in this snapshot
                return kept[1]
            cpu, mem = pod_load(pod, snapshot, config)
            # Unknown loads never reach a placement (simulate_node_removal refuses them first).
            answer = loads[pod.uid] = pod, (cpu or 0, mem or 0)
            return answer[1]

        index = cache.index if cache is not None else None

        def build(prior: ClusterState | None) -> ClusterState:
            return ClusterState(
                snapshot,
                self.pods_by_node,
                usage,
                load,
                requested,
                anti,
                index,
                prior,
                reusable=cache is not None,
            )

        self.state = build(None) if cache is None else cache.state(snapshot, config, build)
        self.simulator = RemovalSimulator(self.state, filters, scorers)
        self.tracker = (
            cache.tracker(snapshot, config) if cache is not None else RemainingPdbTracker(snapshot.pdbs)
        )
        self.options = DrainOptions.from_config(config)


@dataclass(frozen=True, slots=True)
class NodeRemoval:
    """The answer of :func:`simulate_node_removal` for one node.

    Attributes:
        node: the node name.
        reason: ``NoReason`` when the node can go, else why it stays (``BlockedByPod``,
            ``MetricsUnavailable`` for a pod of unknown usage, ``NoPlaceToMovePods``,
            ``BlockedByOnCompletionPod``).
        detail: one line explaining ``reason``, the same wherever the check runs.
        blocking: the blocking pod and its ``BlockingPodReason`` for ``BlockedByPod``.
        pods: the pods to move (evict and re-place).
        daemonset_pods: the node's DaemonSet pods (not moved).
        moves: (pod, destination) for every pod to move when the node can go.
    """

    node: str
    reason: UnremovableReason
    detail: str
    blocking: BlockingPod | None = None
    pods: tuple[Pod, ...] = ()
    daemonset_pods: tuple[Pod, ...] = ()
    moves: tuple[tuple[Pod, str], ...] = ()

    @property
    def removable(self) -> bool:
        """True when the node can be removed."""
        return self.reason is UnremovableReason.NoReason


def _unknown_load(ctx: RemovalContext, pods: Sequence[Pod]) -> str:
    """The first pod of ``pods`` whose load is unknown, worded (:func:`~scaler.utilization.
    unknown_usage`: the pod, and the container nobody measures); ``""`` when every load is
    known. A pod that requests CPU and memory and has no reading lacking a container has a
    known load whatever its PodMetrics say (:func:`~scaler.utilization.pod_load` falls back on
    its requests): it is not looked up."""
    partial = ctx.snapshot.partial_pod_metrics
    for p in pods:
        r = p.placement_requests
        if r.cpu_millicores > 0 and r.memory_bytes > 0 and not (partial and (p.namespace, p.name) in partial):
            continue
        why = unknown_usage(p, ctx.snapshot, ctx.config)
        if why:
            return why
    return ""


def undecidable_claim(ctx: RemovalContext, pods: Sequence[Pod]) -> BlockingPod | None:
    """The first pod of ``pods`` with a resource claim the simulation cannot decide (not found,
    a feature not modelled, a CEL selector not evaluated or failing: :meth:`scaler.simulator.
    dra_state.DraState.undecidable`), as a blocking pod (``UnexpectedError``, the detail naming
    the claim); ``None`` when every claim can be decided. Such a pod is never moved."""
    for p in pods:
        if p.resource_claims:
            bad = ctx.state.dra.undecidable(p)
            if bad is not None:
                return BlockingPod(p, BlockingPodReason.UnexpectedError, f"ResourceClaim {bad[0]}: {bad[1]}")
    return None


def _blocked(b: BlockingPod) -> str:
    return f"pod {b.pod.key}: {b.reason.value}{' (' + b.detail + ')' if b.detail else ''}"


def simulate_node_removal(
    ctx: RemovalContext, node_name: str, tiers: Sequence[Sequence[str]], *, commit: bool = True
) -> NodeRemoval:
    """Can ``node_name`` be removed, its pods moving to ``tiers`` (CA ``SimulateNodeRemoval``)?

    Steps: the drain rules on the node's counted pods with the context's PDB budgets (a blocking
    pod: ``BlockedByPod``; so is a pod with a resource claim the simulation cannot decide,
    :func:`undecidable_claim`); every pod to move must have a known load (else
    ``MetricsUnavailable``: unknown usage is never taken as zero); the pods are re-placed by
    the simulator (one that fits nowhere: ``NoPlaceToMovePods``); a ``safe-to-evict:
    "on-completion"`` pod still running keeps the node (``BlockedByOnCompletionPod``).

    Args:
        ctx: the shared context (:class:`RemovalContext`).
        node_name: the node to check.
        tiers: destination node names, most preferred first.
        commit: on success keep the moves and the PDB charges in ``ctx`` (later checks see them);
            ``False`` leaves ``ctx`` as it was, the destinations' round-robin positions included
            (a trial: later checks place their pods as if it had not run).

    Returns:
        A :class:`NodeRemoval`; on failure nothing of the check remains in ``ctx``.
    """
    if commit:
        return _simulate_node_removal(ctx, node_name, tiers, True)
    rotation = ctx.simulator.rotation()
    try:
        return _simulate_node_removal(ctx, node_name, tiers, False)
    finally:
        ctx.simulator.restore_rotation(rotation)


def _drain_stage(ctx: RemovalContext, node_name: str) -> NodeRemoval | tuple[PodsToMove, int]:
    """The checks of a node-removal check before any placement: the drain rules with the
    context's PDB budgets (charged: revert to the returned mark to undo), and a known load for
    every pod to move. Returns the refusal (nothing charged), or the pods and the mark."""
    tracker = ctx.tracker
    mark = tracker.checkpoint()
    ns = ctx.state.nodes[node_name]
    if ctx.cache is not None and ns.edits == 0:  # its pods are the snapshot's: the cache may know
        to_move = ctx.cache.pods_to_move(ctx, node_name)
    else:
        to_move = get_pods_to_move(
            ns.pods, DrainContext(ctx.snapshot, ctx.options, ctx.snapshot.now, tracker)
        )
    pods, ds = tuple(to_move.pods), tuple(to_move.daemonset_pods)
    b = to_move.blocking or undecidable_claim(ctx, pods)
    if b is not None:
        tracker.revert(mark)
        return NodeRemoval(node_name, UnremovableReason.BlockedByPod, _blocked(b), b, pods, ds)
    unknown = _unknown_load(ctx, pods)
    if unknown:
        tracker.revert(mark)
        return NodeRemoval(node_name, UnremovableReason.MetricsUnavailable, unknown, None, pods, ds)
    return to_move, mark


def _placed_stage(
    ctx: RemovalContext,
    node_name: str,
    to_move: PodsToMove,
    mark: int,
    moves: tuple[tuple[Pod, str], ...],
    keep: bool,
) -> NodeRemoval:
    """The end of a node-removal check whose pods all found a place (``moves``): a running
    ``safe-to-evict: "on-completion"`` pod still keeps the node; else it can go, the PDB
    charges kept with ``keep``."""
    tracker = ctx.tracker
    pods, ds = tuple(to_move.pods), tuple(to_move.daemonset_pods)
    if to_move.on_completion_pods:
        tracker.revert(mark)
        first = to_move.on_completion_pods[0]
        detail = f"pod {first.key} runs until completion"
        return NodeRemoval(node_name, UnremovableReason.BlockedByOnCompletionPod, detail, None, pods, ds)
    if keep:
        tracker.commit()
    else:
        tracker.revert(mark)
    return NodeRemoval(node_name, UnremovableReason.NoReason, "", None, pods, ds, moves)


def _simulate_node_removal(
    ctx: RemovalContext, node_name: str, tiers: Sequence[Sequence[str]], commit: bool
) -> NodeRemoval:
    drained = _drain_stage(ctx, node_name)
    if isinstance(drained, NodeRemoval):
        return drained
    to_move, mark = drained
    pods, ds = tuple(to_move.pods), tuple(to_move.daemonset_pods)
    keep = commit and not to_move.on_completion_pods
    sim = ctx.simulator.simulate(node_name, pods, tiers, keep=keep)
    if sim.failure is not None:
        ctx.tracker.revert(mark)
        return NodeRemoval(
            node_name, UnremovableReason.NoPlaceToMovePods, nowhere_detail(sim.failure), None, pods, ds
        )
    return _placed_stage(ctx, node_name, to_move, mark, sim.moves, keep)


def validate_node_removal(
    ctx: RemovalContext, node_name: str, plan: Sequence[tuple[Pod, str]], excluded: Collection[str] = ()
) -> NodeRemoval | None:
    """Does the ``plan`` of ``node_name``'s removal (its pods and their destinations, as an
    evaluation found them) still hold in ``ctx``? Leaves ``ctx`` as it was.

    The checks of :func:`simulate_node_removal` before any placement run as they do there
    (drain rules with the context's PDB budgets, known loads): a refusal by them is the answer.
    Then the pods to move must be the plan's pods (by UID), and each, in placement order,
    must pass every filter on its planned destination (not the node, not in ``excluded``,
    still in the cluster), with the pods placed before it: the plan is then a placement that
    still holds, and the node can go (unless an ``on-completion`` pod still runs). This is
    Karpenter's validation of a disruption command on fresh state before it acts
    (``kubernetes-sigs/karpenter``, ``pkg/controllers/disruption/validation.go``:
    ``ValidateCommand`` simulates scheduling again and keeps the command only when the
    result is the one it planned), reduced to the destinations planned.

    Returns:
        The :class:`NodeRemoval` (removable, or refused before placement); ``None`` when the
        plan no longer holds (the caller then checks the node in full).
    """
    drained = _drain_stage(ctx, node_name)
    if isinstance(drained, NodeRemoval):
        return drained
    to_move, mark = drained
    planned = {p.uid: dest for p, dest in plan}
    if len(planned) != len(plan) or {p.uid for p in to_move.pods} != planned.keys():
        ctx.tracker.revert(mark)
        return None
    state = ctx.state
    filters = ctx.simulator.filters
    undo = state.checkpoint()
    state.set_flags(node_name, ghost=True)
    state.unschedule_all(to_move.pods, node_name)
    moves: list[tuple[Pod, str]] = []
    try:
        for pod in sorted(to_move.pods, key=placement_order):
            dest = planned[pod.uid]
            ns = state.nodes.get(dest)
            if ns is None or dest == node_name or dest in excluded or ns.ghost or ns.removed:
                return None
            if any(f.filter(pod, ns, state) is not None for f in filters):
                return None
            state.place(pod, dest)
            moves.append((pod, dest))
    finally:
        state.revert(undo)
        if len(moves) != len(to_move.pods):
            ctx.tracker.revert(mark)
    return _placed_stage(ctx, node_name, to_move, mark, tuple(moves), False)


def nowhere_detail(failure: PlacementFailure) -> str:
    """The detail of a ``NoPlaceToMovePods`` verdict: the pod and the reasons nodes refused it."""
    return f"pod {failure.pod.key} fits nowhere: {failure.summary(limit=2)}"


@dataclass(frozen=True, slots=True)
class PodMove:
    """The answer of :func:`simulate_pod_move` for one pod.

    Attributes:
        pod: the pod.
        destination: where it would go, ``""`` when it stays.
        reason: why it stays (``""`` when it moves), worded as a node-removal check words the
            same refusal: ``BlockedByPod: pod ns/x: NotEnoughPdb (...)``, ``MetricsUnavailable:
            ...``, ``NoPlaceToMovePods: pod ns/x fits nowhere: ...``, or what the drain rules
            leave in place (a DaemonSet, mirror or ``safe-to-evict: "on-completion"`` pod).
    """

    pod: Pod
    destination: str = ""
    reason: str = ""

    @property
    def moved(self) -> bool:
        """True when the pod found a destination."""
        return not self.reason


def simulate_pod_move(ctx: RemovalContext, pod: Pod, tiers: Sequence[Sequence[str]]) -> PodMove:
    """Can ``pod`` leave its node (which stays) for one of ``tiers``?

    The checks of :func:`simulate_node_removal`, for one pod: the drain rules with the PDB
    budgets left in ``ctx`` (a pod that blocks a drain, or that a drain would not move, stays);
    a known load (unknown usage is never taken as zero); a destination found by the same
    simulator, filters, scorers and TargetUsage accounting, after every move committed in
    ``ctx`` before. On success the move and its PDB charge are committed, so later moves see
    them; on failure nothing remains.

    Args:
        ctx: the shared context (the evaluation's, after its removals).
        pod: a pod counted on its node (``pod.node_name``).
        tiers: destination node names, most preferred first (the pod's node among them is
            skipped by the caller's choice, never implied).

    Returns:
        A :class:`PodMove`.
    """
    tracker = ctx.tracker
    mark = tracker.checkpoint()
    drain = DrainContext(ctx.snapshot, ctx.options, ctx.snapshot.now, tracker)
    to_move = get_pods_to_move([pod], drain)
    b = to_move.blocking or undecidable_claim(ctx, to_move.pods)
    if b is not None:
        if to_move.blocking is None:
            tracker.revert(mark)
        return PodMove(pod, reason=f"{UnremovableReason.BlockedByPod.value}: {_blocked(b)}")
    if not to_move.pods:
        what = (
            "a DaemonSet pod" if to_move.daemonset_pods
            else 'a safe-to-evict: "on-completion" pod' if to_move.on_completion_pods
            else "a mirror or terminating pod"
        )  # fmt: skip
        tracker.revert(mark)
        return PodMove(pod, reason=f"pod {pod.key} is {what}: a drain leaves it in place")
    unknown = _unknown_load(ctx, to_move.pods)
    if unknown:
        tracker.revert(mark)
        return PodMove(pod, reason=f"{UnremovableReason.MetricsUnavailable.value}: {unknown}")
    sim = ctx.simulator.move(pod, pod.node_name, tiers)
    if sim.failure is not None:
        tracker.revert(mark)
        detail = f"pod {pod.key} fits nowhere: {sim.failure.summary(limit=2)}"
        return PodMove(pod, reason=f"{UnremovableReason.NoPlaceToMovePods.value}: {detail}")
    tracker.commit()
    return PodMove(pod, sim.moves[0][1])
