"""Which unneeded nodes to delete now: timers, cooldowns, min sizes and budgets.

A pure function of an :class:`~scaler.engine.Evaluation`, the previous :class:`PlannerState`,
node-group sizes and the clock, in the manner of CA's ``core/scaledown/planner/planner.go``
(``NodesToDelete``), ``core/scaledown/unneeded/nodes.go`` (``Update``, ``RemovableAt``),
``core/scaledown/budgets/budgets.go`` (``CropNodes``) and ``static_autoscaler.go``
(``isScaleDownInCooldown``):

* A node is *unneeded* while the evaluation finds it removable, or removable but for a
  disruption budget (:attr:`~scaler.engine.NodeResult.budget_only`); ``since`` is kept while
  it stays unneeded and dropped the moment it is not (CA's timer reset). To stop one noisy metrics sample
  from resetting it, the controller feeds the evaluation usage *aggregated* over the unneeded
  window (:func:`aggregate_usage`, ``--usage-aggregation``), for nodes and for the pods of the
  nodes that may become candidates (:func:`record_pod_usage`); the newest readings are kept
  beside the aggregates, because a destination and a moved pod are judged by the larger of the
  two (:func:`with_aggregated_usage`).
* A node becomes deletable after ``--scale-down-unneeded-time`` (Ready) or
  ``--scale-down-unready-time`` (NotReady) of continuous unneededness.
* Cooldowns: no deletion while ``now`` is within ``--scale-down-delay-after-add`` of the newest
  node's creation (a scale-up), ``-after-delete`` of the last started deletion, or
  ``-after-failure`` of the last failed removal, whatever step failed (:func:`record_failures`;
  CA only counts a failed taint). Timers still run during a cooldown.
* A node whose removal failed is ``RecentlyUnremovable`` for ``--unremovable-node-recheck-timeout``
  (its verdict says which step failed and when it may be tried again).
* Min size: a group never goes below its minimum, nor below its minimum in any zone (a GKE node
  pool's limits are per zone: one MIG per zone, each a node group of CA's GCE provider), nor any
  of its MIGs below the MIG's own (a large pool has several MIGs in one zone), counting
  in-flight deletions and nodes already chosen in this plan (``targetSize -
  deletionsInProgress <= min`` → ``NodeGroupMinSizeReached``).
* Budgets: at most ``--max-scale-down-parallelism`` deletions in flight, of which at most
  ``--max-drain-parallelism`` drains; empty nodes take the budget first.
* Disruption budgets (``budgets``, :mod:`scaler.budgets`, Karpenter's semantics plus time zones
  and pool scope) are not the planner's: the evaluation applies them before its simulation
  (:func:`scaler.engine.evaluate`, counting the removals and reliefs under way), so a node
  they hold is ``ScaleDownBudgetExhausted`` already and none of its pods was moved in the
  simulation. The planner only reports which budgets are active.
* Per-pool settings: the unneeded and unready times are the node's pool's
  (:meth:`~scaler.config.ScalerConfig.for_pool`).
* Hot-node relief (:mod:`scaler.relief`) has two timers of its own (:func:`track_hot`): a node is
  relieved once it has stayed above a waterline for ``--hot-node-time`` (:func:`relief_due`),
  and its ``scaler.io/hot`` taint goes once it has stayed under both for as long
  (:func:`cooled`). A relief restarts the node's timer and its usage history
  (:func:`record_reliefs`): the next one waits for usage measured without the evicted pods.
  Reliefs are charged to the disruption budgets after the removals of the same evaluation
  (:func:`relief_admission`, reason ``relief``).

Checks in order (:data:`HOLD_CHECKS`, one function each): unneeded time, node group known, min
size, cooldown, parallelism; the first that holds a node gives its reason.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace

from scaler.engine import Evaluation, NodeResult
from scaler.model.records import Node
from scaler.model.times import format_time
from scaler.reasons import NodeStatus, UnremovableReason
from scaler.usage_history import (
    AggregatedPodMetrics,
    Aggregation,
    UsageSample,
    aggregate_usage,
    record_pod_usage,
    record_usage,
    with_aggregated_usage,
)

__all__ = [  # usage history re-exported from scaler.usage_history, where it lives
    "HOLD_CHECKS",
    "SIMULATED_UNREMOVABLE",
    "AggregatedPodMetrics",
    "Aggregation",
    "GroupSize",
    "Hold",
    "PlannerState",
    "ScaleDownPlan",
    "UsageSample",
    "aggregate_usage",
    "cooled",
    "plan",
    "record_failures",
    "record_pod_usage",
    "record_reliefs",
    "record_usage",
    "relief_admission",
    "relief_due",
    "track_hot",
    "with_aggregated_usage",
]

# Reasons that come out of the simulation; such nodes are not re-simulated for
# --unremovable-node-recheck-timeout (CA unremovable/nodes.go AddTimeout after a failed simulation).
SIMULATED_UNREMOVABLE = frozenset({UnremovableReason.NoPlaceToMovePods, UnremovableReason.BlockedByPod})


@dataclass(frozen=True, slots=True)
class GroupSize:
    """A node group's size as the cloud provider reports it (nodes): the whole group's limits
    and size, ``zones``, zone → the same for the group in that zone (its MIGs there on GKE;
    empty when the provider knows no zones), and ``migs``, a MIG's base instance name → the
    same for that MIG (GKE; its instances are named ``<base>-<suffix>``; empty when the
    provider knows no MIGs)."""

    min_size: int
    max_size: int
    target_size: int
    zones: Mapping[str, GroupSize] = field(default_factory=dict)
    migs: Mapping[str, GroupSize] = field(default_factory=dict)

    def mig_of(self, node_name: str) -> str:
        """The base name of the MIG among :attr:`migs` whose instances are named like
        ``node_name`` (the longest ``<base>-`` prefix), ``""`` when none is."""
        return max((b for b in self.migs if node_name.startswith(b + "-")), key=len, default="")


@dataclass(frozen=True, slots=True)
class PlannerState:
    """What the planner remembers between loops (in memory; lost on restart, as in CA).

    Attributes:
        unneeded_since: node → Unix time it became (continuously) unneeded.
        unremovable_until: node → Unix time until which it is ``RecentlyUnremovable``.
        usage_history: node → NodeMetrics samples within the unneeded window, oldest first.
        pod_usage_history: ``(namespace, pod)`` → PodMetrics samples within the unneeded window,
            oldest first, for the pods of the nodes that may become candidates
            (:func:`record_pod_usage`).
        in_flight: node → node group of deletions under way.
        in_flight_drains: nodes among ``in_flight`` that are being drained (not empty).
        last_delete: Unix time of the last loop that started deletions.
        last_failure: Unix time of the last failed scale-down.
        failed_removals: node → why its last removal failed and until when it is not retried
            (the detail of its ``RecentlyUnremovable`` verdict), while that lasts.
        hot_since: node → Unix time since which it has been above a hot-node waterline.
        cool_since: node carrying the ``scaler.io/hot`` taint → Unix time since which it has
            been under both waterlines.
    """

    unneeded_since: Mapping[str, float] = field(default_factory=dict)
    unremovable_until: Mapping[str, float] = field(default_factory=dict)
    usage_history: Mapping[str, tuple[UsageSample, ...]] = field(default_factory=dict)
    pod_usage_history: Mapping[tuple[str, str], tuple[UsageSample, ...]] = field(default_factory=dict)
    in_flight: Mapping[str, str] = field(default_factory=dict)
    in_flight_drains: frozenset[str] = frozenset()
    last_delete: float | None = None
    last_failure: float | None = None
    failed_removals: Mapping[str, str] = field(default_factory=dict)
    hot_since: Mapping[str, float] = field(default_factory=dict)
    cool_since: Mapping[str, float] = field(default_factory=dict)

    def recently_unremovable(self, now: float) -> frozenset[str]:
        """Nodes whose unremovable TTL has not expired at ``now``."""
        return frozenset(n for n, until in self.unremovable_until.items() if until > now)


@dataclass(frozen=True, slots=True)
class ScaleDownPlan:
    """The decision of one loop.

    Attributes:
        now: evaluation time.
        empty: empty nodes to delete now (no pods to move), in order.
        drain: nodes to drain then delete now, in order.
        unneeded: every unneeded node with the time it became unneeded.
        verdicts: final status and reason of every node after timers, min sizes and budgets.
        cooldown: why deletions are paused this loop (``""`` when they are not).
        active_budgets: names of the disruption budgets active at ``now``.
    """

    now: float
    empty: tuple[NodeResult, ...]
    drain: tuple[NodeResult, ...]
    unneeded: Mapping[str, float]
    verdicts: Mapping[str, tuple[NodeStatus, UnremovableReason, str]]
    cooldown: str = ""
    active_budgets: tuple[str, ...] = ()

    @property
    def to_delete(self) -> tuple[NodeResult, ...]:
        """Empty nodes then drained ones."""
        return self.empty + self.drain


def record_failures(
    state: PlannerState, failures: Iterable[tuple[str, float, str]], recheck_timeout: float
) -> PlannerState:
    """The state after failed node removals ``(node, Unix time of the failure, what failed)``:
    ``last_failure`` moves to the newest failure (``--scale-down-delay-after-failure`` starts
    from it), each node is kept out of the candidates until ``time + recheck_timeout`` (seconds,
    ``--unremovable-node-recheck-timeout``) and its unneeded timer is dropped.

    CA sets its failure cooldown only when tainting fails and lets a node whose drain or
    deletion failed come back with a fresh timer; with a short ``--scale-down-unneeded-time``
    that taints, drains and rolls back the same node every loop. Here a failure
    anywhere cools down."""
    since = dict(state.unneeded_since)
    until = dict(state.unremovable_until)
    failed = dict(state.failed_removals)
    last = state.last_failure
    for node, at, what in failures:
        since.pop(node, None)
        until[node] = max(until.get(node, 0.0), at + recheck_timeout)
        failed[node] = (
            f"scale-down failed at {format_time(at)} ({what}); not retried before {format_time(until[node])}"
        )
        last = at if last is None else max(last, at)
    return replace(
        state, unneeded_since=since, unremovable_until=until, failed_removals=failed, last_failure=last
    )


def _cooldown(evaluation: Evaluation, state: PlannerState, last_scale_up: float | None, now: float) -> str:
    # Messages name fixed times, not elapsed ones, so an unchanged situation reads the same
    # every loop (the status ConfigMap is only rewritten when it changes).
    cfg = evaluation.config
    if last_scale_up is not None and now < last_scale_up + cfg.scale_down_delay_after_add:
        return (
            f"scale-down-delay-after-add until {format_time(last_scale_up + cfg.scale_down_delay_after_add)}"
        )
    if state.last_delete is not None and now < state.last_delete + cfg.scale_down_delay_after_delete:
        return f"scale-down-delay-after-delete until {format_time(state.last_delete + cfg.scale_down_delay_after_delete)}"
    if state.last_failure is not None and now < state.last_failure + cfg.scale_down_delay_after_failure:
        return f"scale-down-delay-after-failure until {format_time(state.last_failure + cfg.scale_down_delay_after_failure)}"
    return ""


def _crop_order(r: NodeResult) -> tuple[bool, int]:
    # Empty nodes take the parallelism budgets first (CA budgets.CropNodes), each kind in
    # removal order.
    return (r.status is not NodeStatus.REMOVABLE_EMPTY, r.rank or 0)


Hold = tuple[UnremovableReason, str]
"""Why a check holds a node: its reason and the verdict's detail."""


@dataclass(slots=True)
class _Round:
    """What the hold checks of one :func:`plan` read: the loop's settings, timers and sizes, the
    cooldown, and the counts of deletions in flight and planned so far this loop (per group,
    per group and zone, per group and MIG) with the parallelism budgets left (nodes)."""

    evaluation: Evaluation
    since: Mapping[str, float]
    group_sizes: Mapping[str, GroupSize]
    cooldown: str
    in_flight_by_group: Counter[str]
    in_flight_by_zone: Counter[tuple[str, str]]
    in_flight_by_mig: Counter[tuple[str, str]]
    budget: int
    drain_budget: int
    planned: Counter[str] = field(default_factory=Counter)
    planned_zone: Counter[tuple[str, str]] = field(default_factory=Counter)
    planned_mig: Counter[tuple[str, str]] = field(default_factory=Counter)

    @classmethod
    def start(
        cls,
        evaluation: Evaluation,
        state: PlannerState,
        group_sizes: Mapping[str, GroupSize],
        since: Mapping[str, float],
        cooldown: str,
    ) -> _Round:
        """The round before any node is taken: in-flight counts from ``state``."""
        cfg = evaluation.config
        zone_of = {r.node.name: r.node.zone for r in evaluation.nodes}
        return cls(
            evaluation,
            since,
            group_sizes,
            cooldown,
            Counter(state.in_flight.values()),
            Counter((g, zone_of.get(n, "")) for n, g in state.in_flight.items()),
            Counter((g, group_sizes[g].mig_of(n)) for n, g in state.in_flight.items() if g in group_sizes),
            cfg.max_scale_down_parallelism - len(state.in_flight),
            cfg.max_drain_parallelism - len(state.in_flight_drains),
        )

    def take(self, r: NodeResult) -> None:
        """Count ``r`` as planned for deletion this loop (its group's size is known)."""
        group = r.node.node_group
        self.budget -= 1
        self.planned[group] += 1
        self.planned_zone[(group, r.node.zone)] += 1
        self.planned_mig[(group, self.group_sizes[group].mig_of(r.node.name))] += 1
        if r.status is NodeStatus.REMOVABLE_DRAIN:
            self.drain_budget -= 1


def _hold_unneeded_time(r: NodeResult, rnd: _Round) -> Hold | None:
    """``NotUnneededLongEnough`` (Ready) or ``NotUnreadyLongEnough`` (NotReady) until the node
    has been unneeded for its pool's ``--scale-down-unneeded-time`` or ``-unready-time``."""
    pool_cfg = rnd.evaluation.config.for_pool(r.node.node_group)
    threshold = pool_cfg.scale_down_unneeded_time if r.node.ready else pool_cfg.scale_down_unready_time
    since = rnd.since[r.node.name]
    if rnd.evaluation.now - since >= threshold:
        return None
    reason = (
        UnremovableReason.NotUnneededLongEnough if r.node.ready else UnremovableReason.NotUnreadyLongEnough
    )
    return reason, f"unneeded since {format_time(since)}, deletable at {format_time(since + threshold)}"


def _hold_group_unknown(r: NodeResult, rnd: _Round) -> Hold | None:
    """``NotAutoscaled`` when the cloud provider gave no size for the node's group."""
    group = r.node.node_group
    if group in rnd.group_sizes:
        return None
    return UnremovableReason.NotAutoscaled, f"no size known for node group {group!r}"


def _hold_min_size(r: NodeResult, rnd: _Round) -> Hold | None:
    """``NodeGroupMinSizeReached`` when the node's group, or the group in its zone, or its MIG,
    would go below its minimum (counting in-flight and planned deletions)."""
    group, zone_name = r.node.node_group, r.node.zone
    size = rnd.group_sizes[group]
    # The whole group, then the group in the node's zone (when the provider knows zones).
    levels = [
        (
            size,
            size.target_size - rnd.in_flight_by_group[group] - rnd.planned[group],
            f"node group {group}",
            "",
        )
    ]
    zone = size.zones.get(zone_name)
    if zone is not None:
        key = (group, zone_name)
        left = zone.target_size - rnd.in_flight_by_zone[key] - rnd.planned_zone[key]
        levels.append((zone, left, f"node group {group} zone {zone_name}", " per zone"))
    mig_key = (group, size.mig_of(r.node.name))
    mig = size.migs.get(mig_key[1])
    if mig is not None:  # several MIGs may share a zone: each keeps its own minimum
        left = mig.target_size - rnd.in_flight_by_mig[mig_key] - rnd.planned_mig[mig_key]
        levels.append((mig, left, f"node group {group} MIG {mig_key[1]}-grp", " per MIG"))
    at_min = next(((g, left, what, per) for g, left, what, per in levels if left <= g.min_size), None)
    if at_min is None:
        return None
    g, left, what, per = at_min
    return UnremovableReason.NodeGroupMinSizeReached, f"{what}: {left} nodes left, min {g.min_size}{per}"


def _hold_cooldown(r: NodeResult, rnd: _Round) -> Hold | None:
    """``NotUnneededOtherReason`` while scale-down is in cooldown (:func:`_cooldown`)."""
    if not rnd.cooldown:
        return None
    return UnremovableReason.NotUnneededOtherReason, f"scale-down in cooldown ({rnd.cooldown})"


def _hold_parallelism(r: NodeResult, rnd: _Round) -> Hold | None:
    """``NodeGroupMaxDeletionCountReached`` when ``--max-scale-down-parallelism`` (or, for a
    drain, ``--max-drain-parallelism``) is used up this loop."""
    is_drain = r.status is NodeStatus.REMOVABLE_DRAIN
    if rnd.budget > 0 and not (is_drain and rnd.drain_budget <= 0):
        return None
    what = "--max-drain-parallelism" if is_drain and rnd.budget > 0 else "--max-scale-down-parallelism"
    return UnremovableReason.NodeGroupMaxDeletionCountReached, f"{what} budget used this loop"


HOLD_CHECKS: tuple[Callable[[NodeResult, _Round], Hold | None], ...] = (
    _hold_unneeded_time,
    _hold_group_unknown,
    _hold_min_size,
    _hold_cooldown,
    _hold_parallelism,
)
"""The checks :func:`plan` runs on each candidate, in order; the first that holds it gives its
reason (as CA's drainability rules are a list: ``simulator/drainability/rules``)."""


def _first_hold(r: NodeResult, rnd: _Round) -> Hold | None:
    for check in HOLD_CHECKS:
        held = check(r, rnd)
        if held is not None:
            return held
    return None


def _unneeded_timers(
    evaluation: Evaluation, state: PlannerState, deleting: Collection[str]
) -> tuple[
    dict[str, float], dict[str, float], dict[str, str], dict[str, tuple[NodeStatus, UnremovableReason, str]]
]:
    """This loop's ``(unneeded_since, unremovable_until, failed_removals, verdicts)``: the
    evaluation's verdicts, the unneeded timers kept or started, and the unremovable TTLs."""
    now = evaluation.now
    since: dict[str, float] = {}
    unremovable = {n: t for n, t in state.unremovable_until.items() if t > now}
    verdicts: dict[str, tuple[NodeStatus, UnremovableReason, str]] = {}
    failed = {n: d for n, d in state.failed_removals.items() if n in unremovable}
    for r in evaluation.nodes:
        name = r.node.name
        detail = failed.get(name, r.detail) if r.reason is UnremovableReason.RecentlyUnremovable else r.detail
        verdicts[name] = (r.status, r.reason, detail)
        if (r.removable or r.budget_only) and name not in deleting:
            # A node that only a disruption budget keeps stays unneeded: it goes as soon as the
            # budget lets it (CA keeps the timer of a node cropped by its deletion budgets).
            since[name] = state.unneeded_since.get(name, now)
        elif r.reason in SIMULATED_UNREMOVABLE:
            unremovable[name] = now + evaluation.config.unremovable_node_recheck_timeout
    return since, unremovable, failed, verdicts


def plan(
    evaluation: Evaluation,
    state: PlannerState,
    group_sizes: Mapping[str, GroupSize],
    *,
    last_scale_up: float | None = None,
    deleting: Collection[str] = (),
) -> tuple[ScaleDownPlan, PlannerState]:
    """Decide which nodes to delete now, and the planner state for the next loop.

    Each unneeded candidate, empty nodes first, goes through :data:`HOLD_CHECKS` in order
    (unneeded time, node group known, min size, cooldown, parallelism); the first check that
    holds it gives its verdict, and a node no check holds is planned.

    Args:
        evaluation: this loop's evaluation (its ``now`` is the clock).
        state: the previous loop's state.
        group_sizes: node group → sizes from the cloud provider; a group missing here is
            treated as unknown and nothing in it is deleted (``NotAutoscaled``).
        last_scale_up: Unix time of the newest scale-up (the newest node's creation).
        deleting: nodes whose deletion is under way (not re-planned).

    Returns:
        ``(plan, next_state)``; ``next_state`` keeps timers, the unremovable TTLs and the
        in-flight bookkeeping passed in.
    """
    now = evaluation.now
    since, unremovable, failed, verdicts = _unneeded_timers(evaluation, state, deleting)
    cooldown = _cooldown(evaluation, state, last_scale_up, now)
    rnd = _Round.start(evaluation, state, group_sizes, since, cooldown)
    empty: list[NodeResult] = []
    drain: list[NodeResult] = []
    candidates = [r for r in evaluation.removable() if r.node.name in since]
    candidates.sort(key=_crop_order)
    for r in candidates:
        held = _first_hold(r, rnd)
        if held is not None:
            verdicts[r.node.name] = (NodeStatus.UNREMOVABLE, *held)
            continue
        rnd.take(r)
        (drain if r.status is NodeStatus.REMOVABLE_DRAIN else empty).append(r)

    next_state = replace(state, unneeded_since=since, unremovable_until=unremovable, failed_removals=failed)
    active = evaluation.budgets.active_names if evaluation.budgets is not None else ()
    scale_down_plan = ScaleDownPlan(now, tuple(empty), tuple(drain), dict(since), verdicts, cooldown, active)
    return scale_down_plan, next_state


# ---- hot-node relief ---------------------------------------------------------------------------------


def track_hot(
    state: PlannerState, hot: Collection[str], known: Collection[str], tainted: Collection[str], now: float
) -> PlannerState:
    """The relief timers after one loop's evaluation.

    ``hot_since`` keeps the time a node became hot while it stays in ``hot`` (above a waterline
    now) and forgets it otherwise. ``cool_since`` does the same for the nodes of ``tainted``
    (carrying this instance's ``scaler.io/hot`` taint) that are under both waterlines: in
    ``known`` (usage known) but not in ``hot``. A node of unknown usage is neither: both timers
    restart (when in doubt, neither relieve nor untaint)."""
    hot_set = set(hot)
    since = {n: state.hot_since.get(n, now) for n in hot_set}
    cool = {n: state.cool_since.get(n, now) for n in tainted if n in known and n not in hot_set}
    return replace(state, hot_since=since, cool_since=cool)


def relief_due(state: PlannerState, now: float, hot_node_time: float) -> list[str]:
    """Nodes hot for at least ``hot_node_time`` seconds at ``now`` (sorted)."""
    return sorted(n for n, t in state.hot_since.items() if now - t >= hot_node_time)


def cooled(state: PlannerState, now: float, hot_node_time: float) -> list[str]:
    """Tainted nodes under both waterlines for at least ``hot_node_time`` seconds (sorted): their
    ``scaler.io/hot`` taint can go."""
    return sorted(n for n, t in state.cool_since.items() if now - t >= hot_node_time)


def record_reliefs(state: PlannerState, nodes: Collection[str]) -> PlannerState:
    """The state after reliefs started on ``nodes``: their hot timers restart and their usage
    history is dropped, so that the next relief waits until the node has been hot for
    ``--hot-node-time`` again, measured without the evicted pods (an aggregate over samples
    taken before the evictions would still show them)."""
    gone = set(nodes)
    return replace(
        state,
        hot_since={n: t for n, t in state.hot_since.items() if n not in gone},
        usage_history={n: h for n, h in state.usage_history.items() if n not in gone},
    )


def relief_admission(evaluation: Evaluation) -> Callable[[Node], str | None]:
    """The disruption budgets for the reliefs of ``evaluation``: a function that admits (and
    charges) the relief of a node, or returns why a budget holds it (reason ``relief``). It
    starts from the evaluation's own ledger (:attr:`~scaler.engine.Evaluation.budgets`), so it
    counts what the evaluation's budgets counted: NotReady nodes, ``ToBeDeleted`` ones, the
    removals and reliefs under way (``evaluate``'s ``disrupted``) and every removal the
    evaluation found. The dry-run and the controller therefore hold the same reliefs."""
    ledger = evaluation.budgets.copy() if evaluation.budgets is not None else None

    def admit(node: Node) -> str | None:
        if ledger is None:
            return None
        hold = ledger.admit(node, "relief")
        return None if hold is None else hold.detail

    return admit
