"""Scheduled disruption budgets: how many nodes of a node pool may be disrupted at once.

Semantics are Karpenter's (``kubernetes-sigs/karpenter``, ``pkg/apis/v1/nodepool.go`` and
``pkg/controllers/disruption/helpers.go``), with scaler's two additions, a time zone per budget
and a pool scope:

* **Allowed disruptions** (``Budget.GetAllowedDisruptions``): ``nodes`` is a count, or a
  percentage of the pool's nodes rounded **up** (``intstr.GetScaledValueFromIntOrPercent(...,
  roundUp=true)``: ``5%`` of 10 nodes allows 1, as ``maxUnavailable`` does for PDBs).
* **Active** (``Budget.IsActive``): a budget without a schedule is always active; one with a
  schedule is active when a schedule hit lies in ``(now - duration, now]``, i.e. during
  ``[hit, hit + duration)``. Overlapping windows simply extend each other.
* **Most restrictive wins** (``NodePool.GetAllowedDisruptionsByReason``): of the active budgets
  that apply to the pool and to the reason (no ``reasons``: every reason), the smallest
  allowance binds.
* **What counts as disrupted** (``BuildDisruptionBudgetMapping``): nodes of the pool that are
  NotReady or being deleted (here: in flight, or tainted ``ToBeDeletedByClusterAutoscaler``),
  plus the removals already planned in this loop. Unlike Karpenter, a NotReady candidate is not
  counted twice: removing a node that is already unavailable does not add a disruption (it is
  still held when the budget allows 0).

Time zones (``timeZone``, IANA, via :mod:`zoneinfo`; Karpenter is UTC only, #3074): the
schedule is read as Debian's cron reads a crontab in that zone (the ``cronsim`` library):

* a schedule with a fixed minute and hour (``30 2 * * *``) whose time falls in the hour skipped
  when clocks go forward starts its window at the first minute after the gap (03:00);
* one whose time falls in the hour repeated when clocks go back starts once, at the first
  occurrence (still summer time);
* a schedule with ``*`` or a step in the minute or hour field (``0 * * * *``) follows the real
  clock: no start in a skipped hour, two starts in a repeated one.

``duration`` is elapsed time: a 10-hour window that spans a clock change ends 10 real hours
after it started (09:00 or 07:00 on the wall clock instead of 08:00).

Everything here is a pure function of the budgets, the pools' nodes and a clock (Unix seconds).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from cronsim import CronSim

from scaler.config import DisruptionReasonName, ScaleDownBudget
from scaler.model.records import Node

__all__ = [
    "BudgetHold",
    "BudgetLedger",
    "allowed_disruptions",
    "allowed_disruptions_of",
    "disruption_reason",
    "unavailable_nodes",
    "window_start",
]


def disruption_reason(empty: bool, ready: bool) -> DisruptionReasonName:
    """The budget reason of a removal, as CA's ``scaled_down_nodes_total{reason}`` names it
    (CA 1.30 ``core/scaledown/actuation/actuator.go nodeScaleDownReason``): ``unready`` for a
    NotReady node, empty or not; for a Ready node ``empty`` (only DaemonSet/mirror pods) or
    ``underutilized`` (drained)."""
    if not ready:
        return "unready"
    return "empty" if empty else "underutilized"


def window_start(budget: ScaleDownBudget, now: float) -> dt.datetime | None:
    """The schedule hit whose window contains ``now`` (Unix seconds), as an aware datetime in
    the budget's time zone, or ``None`` when the budget has no schedule or is not active.

    Karpenter's ``IsActive``: the first hit strictly after ``now - duration``, if it is not after
    ``now``. With overlapping windows it is the earliest hit still in range.
    """
    if budget.schedule is None or budget.duration is None:
        return None
    zone = dt.UTC if budget.time_zone == "UTC" else ZoneInfo(budget.time_zone)
    start = now - budget.duration
    hits = CronSim(budget.schedule, dt.datetime.fromtimestamp(start, zone))
    # cronsim walks fixed-time schedules in local wall time and returns a repeated hour's first
    # occurrence, which can lie before ``start`` when ``start`` is in the second one: skip it.
    for hit in itertools.islice(hits, 4):
        t = hit.timestamp()
        if t > start:
            return hit if t <= now else None
    return None


def _is_active(budget: ScaleDownBudget, now: float) -> bool:
    return budget.schedule is None or window_start(budget, now) is not None


def allowed_disruptions(budget: ScaleDownBudget, pool_nodes: int, now: float) -> int | None:
    """How many of a pool's ``pool_nodes`` nodes ``budget`` lets be disrupted at once at
    ``now``; ``None`` when it is not active. Percentages round up (Karpenter)."""
    if not _is_active(budget, now):
        return None
    return allowed_disruptions_of(budget, pool_nodes)


@dataclass(frozen=True, slots=True)
class BudgetHold:
    """A removal refused by a budget: its name and one line saying why."""

    budget: str
    detail: str


class BudgetLedger:
    """The budgets of one planning pass: admits removals one by one and charges them.

    Args:
        budgets: the configured budgets.
        now: Unix seconds; which budgets are active is decided once, at construction.
        pool_nodes: node pool → its number of nodes.
        unavailable: node pool → names of its nodes already disrupted (NotReady, or being
            deleted).
    """

    def __init__(
        self,
        budgets: Sequence[ScaleDownBudget],
        now: float,
        pool_nodes: Mapping[str, int],
        unavailable: Mapping[str, Collection[str]],
    ) -> None:
        self.pool_nodes = pool_nodes
        self.unavailable = {pool: set(names) for pool, names in unavailable.items()}
        self.active: list[tuple[ScaleDownBudget, str]] = []
        for b in budgets:
            if b.schedule is None:
                self.active.append((b, ""))
                continue
            hit = window_start(b, now)
            if hit is not None:
                self.active.append((b, f"window since {hit.strftime('%Y-%m-%d %H:%M %Z')}"))

    @property
    def active_names(self) -> tuple[str, ...]:
        """Names of the budgets active at this pass's time, in configuration order."""
        return tuple(b.name for b, _ in self.active)

    def admit(self, node: Node, reason: DisruptionReasonName) -> BudgetHold | None:
        """Whether removing ``node`` for ``reason`` stays within every active budget that
        applies to its pool and reason. Admitted removals are charged (the node counts as
        disrupted for later calls); a refusal names the most restrictive budget exceeded."""
        pool = node.node_group
        taken = self.unavailable.setdefault(pool, set())
        after = len(taken | {node.name})
        total = self.pool_nodes.get(pool, 0)
        worst: tuple[int, ScaleDownBudget, str] | None = None
        for budget, window in self.active:
            if budget.node_pools and pool not in budget.node_pools:
                continue
            if budget.reasons and reason not in budget.reasons:
                continue
            allowed = allowed_disruptions_of(budget, total)
            if after > allowed and (worst is None or allowed < worst[0]):
                worst = (allowed, budget, window)
        if worst is None:
            taken.add(node.name)
            return None
        allowed, budget, window = worst
        where = f"; {window}" if window else ""
        return BudgetHold(
            budget.name,
            f"budget {budget.name} ({budget.describe()}{where}) allows {allowed} of node pool {pool}'s "
            f"{total} nodes disrupted at once; {len(taken)} already are",
        )


def allowed_disruptions_of(budget: ScaleDownBudget, pool_nodes: int) -> int:
    """The allowance of an active ``budget`` for a pool of ``pool_nodes`` nodes (rounded up)."""
    if budget.nodes.endswith("%"):
        return math.ceil(int(budget.nodes[:-1]) * pool_nodes / 100)
    return int(budget.nodes)


def unavailable_nodes(nodes: Iterable[Node], deleting: Collection[str]) -> dict[str, set[str]]:
    """Node pool → its nodes that are already disrupted: NotReady, tainted
    ``ToBeDeletedByClusterAutoscaler``, or in ``deleting`` (removals in flight)."""
    out: dict[str, set[str]] = {}
    for n in nodes:
        if not n.ready or n.to_be_deleted_ts is not None or n.name in deleting:
            out.setdefault(n.node_group, set()).add(n.name)
    return out
