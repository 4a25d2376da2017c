"""Hot-node relief: a second plan from the same evaluation, for nodes whose real usage is too high.

Scale-down moves load onto fewer nodes; relief moves it off the nodes that run too hot. Both
read the same evaluation: relief places its pods in the evaluation's own simulation state
(:attr:`scaler.engine.Evaluation.context`), after every removal the evaluation found, so its
destinations count every move of the loop.

**Hot.** A node is hot while its usage, aggregated as scale-down candidates are (the usage the
evaluation judges it by: :attr:`scaler.utilization.NodeUtilization.usage_cpu_millicores`, its
NodeMetrics aggregated over the unneeded window plus the pods not yet in them), is above a
waterline: ``--hot-node-cpu-threshold`` (0.80) or ``--hot-node-memory-threshold`` (0.90) of
allocatable. Strictly above, as koordinator's LowNodeLoad (``pkg/descheduler/framework/plugins/
loadaware/low_node_load.go``, ``highThresholdFilter``: a node is a source when *any* resource is
above its ``highThresholds``) and crane's NodeQOS rules (a rule fires when ``value >
metricRule.value``). A node of unknown usage is never hot. The controller relieves a node only
once it has stayed hot for ``--hot-node-time`` (the planner's timer, koordinator's
``anomalyCondition``: a node becomes a source after more than ``consecutiveAbnormalities``, 5,
consecutive over-threshold rounds, ``pkg/descheduler/apis/config/v1alpha2/defaults.go``).

**Which pods.** Crane's precise eviction (:func:`scaler.eviction.executor.execute`, seed 002 and
003) over the node's pods with the waterlines as thresholds: for each resource above its
waterline, the pods in the metric's order (lower priority, lower QoS class, then the highest
usage first, then the newest), each one's real usage (its PodMetrics, aggregated as the node's)
credited against both gaps, until the gaps close; so the fewest pods in that order. The
executor's "evictor" is here a simulation (:func:`scaler.simulator.cluster.simulate_pod_move`):
a pod is chosen only when the drain rules and the PDB budgets left let it go and the simulator
finds it a destination passing the scheduler filters and TargetUsage. Otherwise it stays, with
the reason, and the next pod in the order is tried. A pod without PodMetrics stays too: its
eviction would close the gap by an unknown amount. A pod whose PodMetrics lack a container it
runs counts the reading plus that container's own request, or stays, the container named, when
the container has none (:func:`scaler.utilization.partial_usage`). At most ``--max-relief-evictions-per-loop``
pods are chosen in a loop, over all nodes, hottest node first (koordinator sorts its sources by
usage, descending).

**Destinations** are the nodes that are not hot; nodes removed by this evaluation are not
destinations (their removal is in the state), and the hot node never is one.

**Held.** A node that the evaluation finds removable, or that is being removed, is never
relieved; neither is one the caller excludes (a relief in flight) or one that the disruption
budgets hold (``admit``, reason ``relief``). A candidate whose removal a budget holds is not
being removed: the evaluation never moved its pods (:mod:`scaler.engine`), so it is relieved
like any node.

Everything here is a pure function of the evaluation, the configuration and its arguments; it
only changes the evaluation's own simulation state.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import msgspec

from scaler.engine import Evaluation, NodeResult
from scaler.eviction.executor import EvictResult, execute
from scaler.eviction.metrics import CPU_TOTAL_USAGE, MEMORY_TOTAL_USAGE, MetricRegistry, default_registry
from scaler.eviction.podinfo import pod_usages
from scaler.eviction.waterline import Waterlines
from scaler.model.records import Node, Pod, PodMetrics
from scaler.simulator.cluster import RemovalContext, simulate_pod_move
from scaler.simulator.removal import Tier
from scaler.utilization import partial_usage, unknown_usage

__all__ = ["HotNode", "NodeRelief", "ReliefPlan", "hot_node", "hot_nodes", "plan_relief"]


@dataclass(frozen=True, slots=True)
class HotNode:
    """A node's usage against its waterlines. CPU in millicores, memory in bytes.

    Attributes:
        name: the node.
        cpu_millicores, memory_bytes: the usage it is judged by (aggregated, plus the pods not
            yet in its metrics).
        cpu_waterline_millicores, memory_waterline_bytes: the thresholds times allocatable.
        allocatable_cpu_millicores, allocatable_memory_bytes: the node's allocatable.
    """

    name: str
    cpu_millicores: int
    memory_bytes: int
    cpu_waterline_millicores: float
    memory_waterline_bytes: float
    allocatable_cpu_millicores: int
    allocatable_memory_bytes: int

    @property
    def cpu_gap_millicores(self) -> float:
        """CPU usage above the waterline (negative: room left)."""
        return self.cpu_millicores - self.cpu_waterline_millicores

    @property
    def memory_gap_bytes(self) -> float:
        """Memory usage above the waterline (negative: room left)."""
        return self.memory_bytes - self.memory_waterline_bytes

    @property
    def hot(self) -> bool:
        """True when some resource is above its waterline."""
        return self.cpu_gap_millicores > 0 or self.memory_gap_bytes > 0

    @property
    def cpu(self) -> float:
        """CPU usage as a fraction of allocatable."""
        return (
            self.cpu_millicores / self.allocatable_cpu_millicores if self.allocatable_cpu_millicores else 0.0
        )

    @property
    def memory(self) -> float:
        """Memory usage as a fraction of allocatable."""
        return self.memory_bytes / self.allocatable_memory_bytes if self.allocatable_memory_bytes else 0.0


def hot_node(result: NodeResult, cpu_threshold: float, memory_threshold: float) -> HotNode | None:
    """``result``'s node against waterlines at ``cpu_threshold`` and ``memory_threshold``
    (fractions 0-1 of allocatable); ``None`` when its usage is unknown."""
    u, alloc = result.utilization, result.node.allocatable
    if u.usage_cpu_millicores is None or u.usage_memory_bytes is None:
        return None
    return HotNode(
        result.node.name,
        u.usage_cpu_millicores,
        u.usage_memory_bytes,
        cpu_threshold * alloc.cpu_millicores,
        memory_threshold * alloc.memory_bytes,
        alloc.cpu_millicores,
        alloc.memory_bytes,
    )


def hot_nodes(evaluation: Evaluation) -> dict[str, HotNode]:
    """The nodes of ``evaluation`` whose usage is above a waterline now (``--hot-node-cpu-threshold``,
    ``--hot-node-memory-threshold``), by name."""
    cfg = evaluation.config
    out = {}
    for r in evaluation.nodes:
        h = hot_node(r, cfg.hot_node_cpu_threshold, cfg.hot_node_memory_threshold)
        if h is not None and h.hot:
            out[h.name] = h
    return out


@dataclass(frozen=True, slots=True)
class NodeRelief:
    """The relief of one hot node.

    Attributes:
        node: the node.
        hot: its usage against its waterlines.
        evictions: ``(pod, destination)`` for every pod to evict, in eviction order.
        kept: ``(pod, why)`` for every pod tried that stays (drain rules, PDB, no destination,
            unknown usage, the per-loop eviction budget), in the order they were tried.
        remaining_cpu_gap_millicores, remaining_memory_gap_bytes: the gaps once the chosen pods
            are gone (positive: still above the waterline).
        held: why nothing of this node is relieved (``""`` when it is planned).
        capped: ``--max-relief-evictions-per-loop`` stopped the choice before the gaps closed
            (the pods it did not reach are not in ``kept``).
    """

    node: Node
    hot: HotNode
    evictions: tuple[tuple[Pod, str], ...] = ()
    kept: tuple[tuple[Pod, str], ...] = ()
    remaining_cpu_gap_millicores: float = 0.0
    remaining_memory_gap_bytes: float = 0.0
    held: str = ""
    capped: bool = False

    @property
    def gap_closed(self) -> bool:
        """True when the chosen evictions bring the node back under both waterlines."""
        return self.remaining_cpu_gap_millicores <= 0 and self.remaining_memory_gap_bytes <= 0

    @property
    def detail(self) -> str:
        """One line: what is evicted and whether the gap closes, or why nothing is."""
        if self.held:
            return self.held
        if not self.evictions:
            why = self.kept[0][1] if self.kept else "no pod that a drain would move"
            return f"nothing to evict: {why}"
        pods = ", ".join(f"{p.key} -> {dest}" for p, dest in self.evictions)
        closed = "gap closed" if self.gap_closed else "gap not closed"
        if self.capped:
            closed += f"; {CAPPED}"
        return f"evict {len(self.evictions)} pod(s) ({closed}): {pods}"


@dataclass(frozen=True, slots=True)
class ReliefPlan:
    """Every hot node considered in one loop, hottest first."""

    reliefs: tuple[NodeRelief, ...] = ()

    @property
    def evictions(self) -> int:
        """Pods to evict, over all nodes."""
        return sum(len(r.evictions) for r in self.reliefs)

    def planned(self) -> tuple[NodeRelief, ...]:
        """The reliefs that evict something."""
        return tuple(r for r in self.reliefs if r.evictions)


CAPPED = "--max-relief-evictions-per-loop reached this loop"


def _held_by_evaluation(result: NodeResult) -> str:
    if result.removable:
        return "being removed: removable in this evaluation"
    if result.node.to_be_deleted_ts is not None:
        return "being removed: tainted ToBeDeletedByClusterAutoscaler"
    return ""


def _chosen_evictions(
    ctx: RemovalContext,
    node: Node,
    h: HotNode,
    destinations: Tier,
    registry: MetricRegistry,
    left: int,
) -> tuple[NodeRelief, int]:
    """Run the eviction framework on hot node ``node`` with a simulated evictor: a pod "is
    evicted" when it may leave and has a place among ``destinations`` (the move is made in
    ``ctx``), at most ``left`` of them. Returns the node's relief and how many evictions the
    loop has left."""
    metrics: Mapping[tuple[str, str], PodMetrics] = ctx.snapshot.pod_metrics
    pods = [p for p in ctx.pods_by_node.get(h.name, ()) if not (p.is_daemonset or p.is_mirror)]
    partial = ctx.snapshot.partial_pod_metrics
    if partial:  # readings that lack a container: the reading plus its request, when it has one
        completed: dict[tuple[str, str], PodMetrics] = {}
        for p in pods:
            key = (p.namespace, p.name)
            u = partial_usage(p, ctx.snapshot, ctx.config) if key in partial else None
            if u is not None and u[0] is not None and u[1] is not None:
                completed[key] = msgspec.structs.replace(
                    partial[key][0], cpu_millicores=u[0], memory_bytes=u[1]
                )
        if completed:
            metrics = ChainMap(completed, dict(metrics))
    moves: list[tuple[Pod, str]] = []
    kept: list[tuple[Pod, str]] = []

    def simulated_eviction(pod: Pod) -> EvictResult:
        """The executor's evictor: a pod "is evicted" when it may leave and has a place."""
        nonlocal left
        if left <= 0:
            return EvictResult(False, CAPPED)  # not tried: not listed in ``kept``
        if (pod.namespace, pod.name) not in metrics:
            unknown = unknown_usage(pod, ctx.snapshot, ctx.config) if partial else ""
            why = (
                f"{unknown}, so its eviction would close the gap by an unknown amount"
                if unknown
                else f"pod {pod.key} has no PodMetrics: its eviction would close the gap by an unknown amount"
            )
        else:
            move = simulate_pod_move(ctx, pod, [destinations])
            if move.moved:
                left -= 1
                moves.append((pod, move.destination))
                return EvictResult(True)
            why = move.reason
        kept.append((pod, why))
        return EvictResult(False, why)

    usage = {CPU_TOTAL_USAGE: float(h.cpu_millicores), MEMORY_TOTAL_USAGE: float(h.memory_bytes)}
    waterlines = Waterlines(
        {CPU_TOTAL_USAGE: h.cpu_waterline_millicores, MEMORY_TOTAL_USAGE: h.memory_waterline_bytes}
    )
    # A simulation that raises is a bug: let it surface, never as "nothing to evict".
    done = execute(
        pod_usages(pods, metrics), usage, waterlines, registry, simulated_eviction, record_errors=False
    )
    gaps = done.remaining_gaps
    relief = NodeRelief(
        node,
        h,
        tuple(moves),
        tuple(kept),
        gaps.get(CPU_TOTAL_USAGE, h.cpu_gap_millicores),
        gaps.get(MEMORY_TOTAL_USAGE, h.memory_gap_bytes),
        capped=any(why == CAPPED for _, why in done.failed),
    )
    return relief, left


def plan_relief(
    evaluation: Evaluation,
    candidates: Collection[str],
    *,
    admit: Callable[[Node], str | None] | None = None,
    excluded: Mapping[str, str] | None = None,
    registry: MetricRegistry | None = None,
) -> ReliefPlan:
    """Choose the pods that relieve the hot nodes among ``candidates`` (see the module doc).

    Args:
        evaluation: this loop's evaluation; its simulation state receives the moves.
        candidates: names of the nodes to relieve if hot (the controller passes those hot for
            ``--hot-node-time``; the dry-run every node).
        admit: the disruption budgets: called once per hot node before its pods are chosen,
            returns why the node is held (``""``/``None``: admitted and charged).
        excluded: node → why it is not relieved now (e.g. a relief in flight).
        registry: eviction metrics (default: ``cpu_total_usage`` and ``memory_total_usage``).

    Returns:
        A :class:`ReliefPlan` with one :class:`NodeRelief` per hot candidate, hottest first
        (largest fraction of allocatable above zero, then name).

    Raises:
        ValueError: ``evaluation`` has no simulation context (not made by
            :func:`scaler.engine.evaluate`).
    """
    ctx = evaluation.context
    if ctx is None:
        raise ValueError("plan_relief needs an evaluation made by scaler.engine.evaluate")
    cfg = evaluation.config
    registry = registry or default_registry()
    excluded = excluded or {}
    hot = hot_nodes(evaluation)
    results = {r.node.name: r for r in evaluation.nodes}
    wanted = sorted(
        (hot[n] for n in set(candidates) if n in hot), key=lambda h: (-max(h.cpu, h.memory), h.name)
    )
    if not wanted:
        return ReliefPlan()
    unreadable = ctx.snapshot.unreadable
    destinations = Tier.of(
        ctx.state, [n.name for n in ctx.snapshot.nodes if n.name not in hot and n.name not in unreadable]
    )
    left = cfg.max_relief_evictions_per_loop
    reliefs: list[NodeRelief] = []
    for h in wanted:
        result = results[h.name]
        held = excluded.get(h.name) or _held_by_evaluation(result)
        if not held and left <= 0:
            held = CAPPED
        if not held and admit is not None:
            held = admit(result.node) or ""
        if held:
            reliefs.append(NodeRelief(result.node, h, held=held))
            continue
        relief, left = _chosen_evictions(ctx, result.node, h, destinations, registry, left)
        reliefs.append(relief)
    return ReliefPlan(tuple(reliefs))
