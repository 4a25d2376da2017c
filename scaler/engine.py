"""One scale-down evaluation: a pure function of a snapshot, a configuration and a clock.

``evaluate`` runs utilization → eligibility → drain rules → removal simulation, and returns an
:class:`Evaluation` with one :class:`NodeResult` per node. It never touches the network; the same
snapshot and configuration always give the same result.

Candidate order (documented, deterministic): empty nodes first, then ascending utilization, then
node name. Each candidate is simulated in that order and a successful simulation is committed
(CA ``core/scaledown/planner/planner.go categorizeNodes``), so PDB budgets, destinations' room and
TargetUsage's Σ term are shared by all nodes of one evaluation. Unlike CA there is no time budget
and no limit on the number of candidates: every candidate is simulated. Each candidate's check
(drain rules, then the move of its pods) is :func:`scaler.simulator.cluster.simulate_node_removal`,
the function the actuator's re-check calls too; before it, the node's pool must keep its
minimum in the node's MIG, or its zone when the node's name does not tell its MIG
(:meth:`scaler.limits.GroupLimits.group_key`), counting the nodes already found removable.

Disruption budgets (:mod:`scaler.budgets`) are applied before the simulation, as Karpenter's
disruption controller filters its candidates by the budgets' allowed disruptions per node pool
before ``SimulateScheduling`` (``kubernetes-sigs/karpenter``, ``pkg/controllers/disruption``:
``controller.go`` builds ``BuildDisruptionBudgetMapping`` and passes it to the method;
``emptiness.go``, ``singlenodeconsolidation.go`` and ``multinodeconsolidation.go`` skip a
candidate whose pool has no disruption left). A candidate that the budgets active at
``snapshot.now`` cannot let go, counting the nodes already disrupted and the removals found
before it in removal order, is held: it is never simulated as removed, its pods stay where
they are and it is a destination like any node that stays. Only a trial of its removal runs, at
its place in the removal order, committing nothing (not even the destinations' round-robin
position): when it succeeds the node is ``ScaleDownBudgetExhausted`` (the budget alone keeps
it; :attr:`NodeResult.budget_only`), otherwise it gets the reason that would keep it anyway
(``NoPlaceToMovePods``, ``BlockedByPod``, ...). A removal takes its
pool's allowance only once its simulation succeeds, so a budget of ``n`` goes to the first
``n`` candidates of the pool that can really go. The result is exactly that of an evaluation
in which the held nodes carry ``scale-down-disabled``: when a budget spent during a pass holds
a candidate, the pass is run again with that candidate held from the start (in the destination
tiers with the nodes that stay), until no new candidate is held (each pass holds more, so it
ends; with budgets that allow 0, or none spent in the loop, one pass).

Destinations: every other live node, in two tiers: nodes that are not candidates (or that a
budget holds) first, then candidates in reverse removal order (the ones least likely to be removed). A node that receives
moved pods is no longer a candidate later in the evaluation (``DestinationForMovedPods``), so no
pod is ever proposed to move onto a node that is itself reported removable.

Speed (``docs/benchmarks.md``): destinations are :class:`~scaler.simulator.removal.Tier` values of
node-table rows, a candidate's PDB charges are journaled and reverted rather than copying the
tracker, and the cyclic garbage collector is paused for the evaluation
(:mod:`scaler.model.gcpause`). With a ``cache`` (:mod:`scaler.simulator.cache`), each node's pod
facts are kept while its revision is the same, and failed checks whose inputs did not move are
answered again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scaler.budgets import BudgetHold, BudgetLedger, disruption_reason
from scaler.config import DisruptionReasonName, ScalerConfig
from scaler.drain.rules import BlockingPod
from scaler.eligibility import check_eligibility
from scaler.limits import GroupLimits, node_group_limits
from scaler.model.gcpause import no_cycle_collector
from scaler.model.records import Node, Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import NodeStatus, UnremovableReason
from scaler.simulator.cache import EvaluationCache
from scaler.simulator.cluster import NodeRemoval, RemovalContext, counted_pods, simulate_node_removal
from scaler.simulator.registry import load_filters, load_scorers
from scaler.simulator.removal import Tier
from scaler.simulator.state import FilterPlugin, ScorePlugin
from scaler.utilization import NodeUtilization

__all__ = ["Evaluation", "NodeResult", "counted_pods", "evaluate"]


@dataclass(frozen=True, slots=True)
class NodeResult:
    """The verdict on one node.

    Attributes:
        node: the node record.
        utilization: its utilization (usage and requests).
        status: removable-empty, removable-drain or unremovable.
        reason: ``NoReason`` when removable.
        detail: one human-readable line explaining the reason.
        blocking_pod: the pod and its ``BlockingPodReason`` when ``reason`` is BlockedByPod.
        moves: (pod, destination node) for every pod that would be re-placed.
        daemonset_pods: DaemonSet pods on the node (not moved; evicted best effort).
        rank: position in the removal order (0-based) for removable nodes, else ``None``.
        budget_only: ``True`` when a disruption budget alone keeps the node
            (``ScaleDownBudgetExhausted``): a trial of its removal, at its place in the removal
            order and committing nothing, succeeded. Its unneeded timer keeps running
            (:func:`scaler.planner.plan`), as cluster-autoscaler's does for a node that waits
            for ``--max-scale-down-parallelism``.
    """

    node: Node
    utilization: NodeUtilization
    status: NodeStatus
    reason: UnremovableReason
    detail: str
    blocking_pod: BlockingPod | None = None
    moves: tuple[tuple[Pod, str], ...] = ()
    daemonset_pods: tuple[Pod, ...] = ()
    rank: int | None = None
    budget_only: bool = False

    @property
    def removable(self) -> bool:
        """True for removable-empty and removable-drain."""
        return self.status is not NodeStatus.UNREMOVABLE


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The result of :func:`evaluate`: node results in node-name order, the time, the config.

    ``context`` is the evaluation's simulation state after every removal it found (moved pods
    on their destinations, PDB budgets charged): hot-node relief
    (:func:`scaler.relief.plan_relief`) places its pods in it, so that its destinations count
    every move of the loop. ``held`` names the candidates that the disruption budgets held
    before the simulation (``ScaleDownBudgetExhausted``, or the reason a trial of their removal
    found). ``budgets`` is the disruption-budget ledger after those removals
    (:class:`scaler.budgets.BudgetLedger`: which budgets are active, what each pool has
    disrupted); relief charges its own disruptions on a copy
    (:func:`scaler.planner.relief_admission`). ``context`` and ``budgets`` are not part of the
    result's value (not compared, not shown).
    """

    now: float
    config: ScalerConfig
    nodes: tuple[NodeResult, ...]
    context: RemovalContext | None = field(default=None, compare=False, repr=False)
    budgets: BudgetLedger | None = field(default=None, compare=False, repr=False)
    held: frozenset[str] = frozenset()

    def removable(self) -> list[NodeResult]:
        """Removable nodes in removal order."""
        return sorted((r for r in self.nodes if r.removable), key=lambda r: r.rank or 0)

    def reason_counts(self) -> Counter[str]:
        """Number of unremovable nodes per reason."""
        return Counter(r.reason.value for r in self.nodes if not r.removable)


def evaluate(
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    *,
    filters: Sequence[FilterPlugin] | None = None,
    scorers: Sequence[ScorePlugin] | None = None,
    recently_unremovable: Collection[str] = (),
    disrupted: Collection[str] = (),
    cache: EvaluationCache | None = None,
) -> Evaluation:
    """Decide, for every node of ``snapshot`` at ``snapshot.now``, whether it can be removed.

    Args:
        snapshot: the cluster state.
        config: thresholds, plugin selection and disruption budgets.
        filters, scorers: plugin instances; ``None`` loads them from ``config`` (built-ins plus
            entry points).
        recently_unremovable: nodes to skip as ``RecentlyUnremovable`` (live mode).
        disrupted: nodes whose removal or relief is under way (live mode): the disruption
            budgets count them as disrupted, beside the NotReady nodes and those tainted
            ``ToBeDeletedByClusterAutoscaler``.
        cache: what the previous evaluations of the same controller kept, reused where the
            snapshot's revisions say its inputs are unchanged (:mod:`scaler.simulator.cache`);
            the result is the same with or without.

    Raises:
        scaler.simulator.registry.PluginError: a configured plugin name is unknown.
    """
    with no_cycle_collector():
        return _evaluate(snapshot, config, filters, scorers, recently_unremovable, disrupted, cache)


def _evaluate(
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    filters: Sequence[FilterPlugin] | None,
    scorers: Sequence[ScorePlugin] | None,
    recently_unremovable: Collection[str],
    disrupted: Collection[str],
    cache: EvaluationCache | None = None,
) -> Evaluation:
    if filters is None:
        filters = load_filters(config)
    if scorers is None:
        scorers = load_scorers(config)
    now = snapshot.now
    ctx = RemovalContext(snapshot, config, filters, scorers, cache)
    utils = ctx.utils
    limits = node_group_limits(config, snapshot.nodes)
    group_sizes = Counter(limits.group_key(n) for n in snapshot.nodes if n.node_group)

    ineligible: dict[str, NodeResult] = {}
    candidates: list[Node] = []
    unreadable = snapshot.unreadable
    for node in snapshot.nodes:
        why = check_eligibility(
            node, utils[node.name], now, config, group_sizes, recently_unremovable, limits, unreadable
        )
        if why is None:
            candidates.append(node)
        else:
            ineligible[node.name] = NodeResult(
                node, utils[node.name], NodeStatus.UNREMOVABLE, why.reason, why.detail
            )
    candidates.sort(key=lambda n: (not utils[n.name].empty, utils[n.name].value or 0.0, n.name))

    budgets = BudgetLedger.for_nodes(config.budgets, now, snapshot.nodes, disrupted)
    # Held before any removal: the pool's budget is spent by the nodes already disrupted.
    held = {
        n.name: h for n in candidates if (h := budgets.hold(n, _budget_reason(n, utils[n.name]))) is not None
    }
    while True:
        ledger = budgets.copy()
        results, newly_held = _simulate(ctx, candidates, held, ledger, group_sizes, limits, cache)
        if not newly_held:
            break
        # A budget spent by this pass's removals held more candidates: simulate again with them
        # held from the start, so that they are destinations as any node that stays is, and no
        # removal found before them counted on them being gone.
        held |= newly_held
        ctx = RemovalContext(snapshot, config, filters, scorers, cache)
    results |= ineligible
    if snapshot.gpu_usage_unknown:  # a GPU node judged by its requests alone says why
        note = snapshot.gpu_usage_unknown
        results = {
            n: replace(r, detail=f"{r.detail}; {note}")
            if r.utilization.gpu is not None and r.utilization.gpu_usage is None
            else r
            for n, r in results.items()
        }
    nodes = tuple(results[n.name] for n in snapshot.nodes)
    return Evaluation(now, config, nodes, ctx, ledger, frozenset(held))


def _budget_reason(node: Node, util: NodeUtilization) -> DisruptionReasonName:
    return disruption_reason(util.empty, node.ready)


_RECEIVES = "receives pods of a node removed earlier"


def _min_size_detail(key: tuple[str, str, str], size: int, planned: int, min_size: int) -> str:
    """Why a node of group ``key`` (pool, zone, MIG) stays: its ``size`` nodes, ``planned`` of
    them already removable, are at the group's ``min_size`` per zone (or per MIG)."""
    where = f"zone {key[1] or '(none)'}" + (f" MIG {key[2]}" if key[2] else "")
    return (
        f"node group {key[0]} {where}: {size} nodes, "
        f"{planned} already removable, min {min_size} per {'MIG' if key[2] else 'zone'}"
    )


def _held_result(
    ctx: RemovalContext, node: Node, util: NodeUtilization, tiers: tuple[Tier, Tier], why: BudgetHold
) -> NodeResult:
    """The verdict on a node held by the budgets from the start of a pass: a trial that commits
    nothing says whether the budget is what keeps it (``why``, with this pass's counts), else
    the reason that would keep it anyway."""
    trial = simulate_node_removal(ctx, node.name, tiers, commit=False)
    if not trial.removable:
        return NodeResult(node, util, NodeStatus.UNREMOVABLE, trial.reason, trial.detail, trial.blocking)
    return NodeResult(
        node,
        util,
        NodeStatus.UNREMOVABLE,
        UnremovableReason.ScaleDownBudgetExhausted,
        why.detail,
        budget_only=True,
    )


def _receiver_result(
    node: Node,
    util: NodeUtilization,
    hold: BudgetHold | None,
    ledger: BudgetLedger,
    budget_reason: DisruptionReasonName,
) -> NodeResult:
    """The verdict of a candidate that receives pods of a node removed earlier in the pass:
    ``DestinationForMovedPods``, or ``ScaleDownBudgetExhausted`` when a budget holds it
    (``hold``, the hold the pass started with) and that is why it stays."""
    if hold is None:
        return NodeResult(
            node, util, NodeStatus.UNREMOVABLE, UnremovableReason.DestinationForMovedPods, _RECEIVES
        )
    why = ledger.hold(node, budget_reason) or hold  # a destination because it stays: the budget is why
    return NodeResult(
        node,
        util,
        NodeStatus.UNREMOVABLE,
        UnremovableReason.ScaleDownBudgetExhausted,
        f"{why.detail}; {_RECEIVES}",
    )


def _removable_result(node: Node, util: NodeUtilization, removal: NodeRemoval, rank: int) -> NodeResult:
    """The verdict of a removable candidate: empty (only DaemonSet/mirror pods) or drain, with
    its moves and its ``rank`` (removals committed before it in the pass)."""
    status = NodeStatus.REMOVABLE_DRAIN if removal.moves else NodeStatus.REMOVABLE_EMPTY
    return NodeResult(
        node,
        util,
        status,
        UnremovableReason.NoReason,
        f"{len(removal.moves)} pod(s) to move" if removal.moves else "only DaemonSet/mirror pods",
        moves=removal.moves,
        daemonset_pods=removal.daemonset_pods,
        rank=rank,
    )


def _simulate(
    ctx: RemovalContext,
    candidates: Sequence[Node],
    held: Mapping[str, BudgetHold],
    ledger: BudgetLedger,
    group_sizes: Counter[tuple[str, str, str]],
    limits: GroupLimits,
    cache: EvaluationCache | None = None,
) -> tuple[dict[str, NodeResult], dict[str, BudgetHold]]:
    """One pass over ``candidates`` in removal order, the nodes of ``held`` held by the budgets
    (not simulated, destinations like the nodes that are not candidates). Returns the verdicts,
    and the candidates a budget held that were not in ``held`` (when there are any, the pass's
    removals are not final: the caller simulates again). ``cache`` answers the checks whose
    inputs did not change (:mod:`scaler.simulator.cache`)."""
    utils = ctx.utils
    state = ctx.state
    movable = [n for n in candidates if n.name not in held]
    movable_names = {n.name for n in movable}
    unreadable = ctx.snapshot.unreadable  # never a destination either
    non_candidates = Tier.of(
        state,
        [n.name for n in ctx.snapshot.nodes if n.name not in movable_names and n.name not in unreadable],
    )
    reverse_candidates = Tier.of(state, [n.name for n in reversed(movable)])
    planned: Counter[tuple[str, str, str]] = Counter()
    receivers: set[str] = set()
    results: dict[str, NodeResult] = {}
    newly_held: dict[str, BudgetHold] = {}
    rank = 0

    for node in candidates:
        util = utils[node.name]

        def unremovable(reason: UnremovableReason, detail: str, blocking: BlockingPod | None = None) -> None:
            results[node.name] = NodeResult(node, util, NodeStatus.UNREMOVABLE, reason, detail, blocking)  # noqa: B023

        budget_reason = _budget_reason(node, util)
        is_held = node.name in held
        if node.name in receivers:
            results[node.name] = _receiver_result(node, util, held.get(node.name), ledger, budget_reason)
            continue
        key = limits.group_key(node)
        min_size = limits.min_size(*key)
        if group_sizes[key] - planned[key] <= min_size:
            unremovable(
                UnremovableReason.NodeGroupMinSizeReached,
                _min_size_detail(key, group_sizes[key], planned[key], min_size),
            )
            continue
        if is_held:
            tiers = (non_candidates.without(node.name), reverse_candidates)
            results[node.name] = _held_result(
                ctx, node, util, tiers, ledger.hold(node, budget_reason) or held[node.name]
            )
            continue
        hold = ledger.hold(node, budget_reason)
        if hold is not None:
            newly_held[node.name] = hold
            unremovable(UnremovableReason.ScaleDownBudgetExhausted, hold.detail)
            continue
        tiers = (non_candidates, reverse_candidates.without(node.name))
        if cache is not None:  # rank: the removals committed earlier in this pass
            removal = cache.removal(ctx, node.name, tiers, committed=rank > 0)
        else:
            removal = simulate_node_removal(ctx, node.name, tiers)
        if not removal.removable:
            unremovable(removal.reason, removal.detail, removal.blocking)
            continue
        ledger.charge(node)
        planned[key] += 1
        receivers.update(dest for _, dest in removal.moves)
        results[node.name] = _removable_result(node, util, removal, rank)
        rank += 1
    return results, newly_held
