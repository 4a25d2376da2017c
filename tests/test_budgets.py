"""Scheduled disruption budgets: Karpenter's arithmetic, windows in time zones across DST, the
ledger's accounting, the planner and the dry-run (``scaler.budgets``, ``scaler.planner``)."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from typing import Any

import pytest
from builders import GI, make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.budgets import BudgetHold, BudgetLedger, allowed_disruptions, disruption_reason, window_start
from scaler.cli import main
from scaler.config import ConfigError, ScaleDownBudget, ScalerConfig
from scaler.engine import evaluate
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, Node, NodeMetrics
from scaler.model.snapshot import ClusterSnapshot
from scaler.observability import Metrics
from scaler.planner import GroupSize, PlannerState, plan
from scaler.reasons import NodeStatus, UnremovableReason

UTC = dt.UTC


def budget(**fields: Any) -> ScaleDownBudget:
    return ScaleDownBudget.model_validate({"name": "b", "nodes": "0", **fields})


def at(*args: int, zone: str = "UTC") -> float:
    """Unix seconds of a wall-clock time in ``zone`` (for unambiguous times)."""
    from zoneinfo import ZoneInfo

    return dt.datetime(*args, tzinfo=ZoneInfo(zone)).timestamp()  # type: ignore[misc]


def utc(*args: int) -> float:
    return dt.datetime(*args, tzinfo=UTC).timestamp()  # type: ignore[misc]


def active(b: ScaleDownBudget, now: float) -> bool:
    return allowed_disruptions(b, 10, now) is not None


# ---- arithmetic -------------------------------------------------------------------------------


def test_percentages_round_up_as_karpenter_and_counts_are_absolute() -> None:
    now = utc(2026, 6, 1, 12)
    for pct in (0, 1, 5, 10, 33, 50, 99, 100):
        b = budget(nodes=f"{pct}%")
        for n in range(0, 201):
            # intstr.GetScaledValueFromIntOrPercent(..., roundUp=true): ceil(pct * n / 100)
            assert allowed_disruptions(b, n, now) == -(-pct * n // 100), (pct, n)
    assert allowed_disruptions(budget(nodes="5%"), 10, now) == 1  # Karpenter's own example
    assert allowed_disruptions(budget(nodes="10%"), 94, now) == 10
    assert allowed_disruptions(budget(nodes=3), 1, now) == 3
    assert allowed_disruptions(budget(nodes="0"), 500, now) == 0


def test_a_window_is_half_open_from_each_schedule_hit() -> None:
    b = budget(schedule="0 9 * * *", duration="1h")
    assert not active(b, utc(2026, 6, 1, 8, 59, 59))
    assert active(b, utc(2026, 6, 1, 9))  # a hit exactly now: active (Karpenter's IsActive)
    assert active(b, utc(2026, 6, 1, 9, 59, 59))
    assert not active(b, utc(2026, 6, 1, 10))  # hit + duration: over
    assert window_start(b, utc(2026, 6, 1, 9, 30)) == dt.datetime(2026, 6, 1, 9, tzinfo=UTC)
    assert window_start(budget(), utc(2026, 6, 1)) is None and active(budget(), utc(2026, 6, 1))


def test_overlapping_windows_extend_each_other() -> None:
    b = budget(schedule="0 9,10 * * *", duration="90m")
    assert active(b, utc(2026, 6, 1, 9, 45)) and active(b, utc(2026, 6, 1, 10, 45))
    assert active(b, utc(2026, 6, 1, 11, 29)) and not active(b, utc(2026, 6, 1, 11, 30))
    # The earliest hit still in range: 10:00 (09:00 + 90m ended at 10:30).
    assert window_start(b, utc(2026, 6, 1, 10, 45)) == dt.datetime(2026, 6, 1, 10, tzinfo=UTC)
    hourly = budget(schedule="@hourly", duration="61m")  # every hit overlaps the next
    assert all(active(hourly, utc(2026, 6, 1) + m * 60) for m in range(0, 24 * 60, 7))


@settings(max_examples=60, deadline=None)
@given(
    minute=st.integers(0, 59),
    hour=st.integers(0, 23),
    weekday=st.sampled_from(["*", 0, 1, 2, 3, 4, 5, 6]),
    duration_minutes=st.integers(1, 3000),
    offset=st.integers(0, 14 * 86400),
)
def test_window_start_matches_a_minute_by_minute_scan_in_utc(
    minute: int, hour: int, weekday: int | str, duration_minutes: int, offset: int
) -> None:
    b = budget(schedule=f"{minute} {hour} * * {weekday}", duration=f"{duration_minutes}m")
    now = utc(2026, 3, 1) + offset
    start = now - duration_minutes * 60
    expected = None
    t = (int(start) // 60 + 1) * 60  # the first whole minute strictly after start
    while t <= now:
        d = dt.datetime.fromtimestamp(t, UTC)
        cron_weekday = (d.weekday() + 1) % 7  # cron: Sunday is 0
        if d.minute == minute and d.hour == hour and weekday in ("*", cron_weekday):
            expected = d
            break
        t += 60
    assert window_start(b, now) == expected


# ---- time zones and DST -----------------------------------------------------------------------

# Europe/Amsterdam: 2026-03-29 02:00 CET -> 03:00 CEST and 2026-10-25 03:00 CEST -> 02:00 CET, both
# at 01:00 UTC. America/New_York: 2026-03-08 02:00 EST -> 03:00 EDT at 07:00 UTC and 2026-11-01
# 02:00 EDT -> 01:00 EST at 06:00 UTC.
SKIPPED = {  # zone: (schedule in the skipped hour, UTC instant of the gap's end)
    "Europe/Amsterdam": ("30 2 * * *", utc(2026, 3, 29, 1)),
    "America/New_York": ("30 2 * * *", utc(2026, 3, 8, 7)),
}
REPEATED = {  # zone: (schedule in the repeated hour, UTC of its first occurrence, of its second)
    "Europe/Amsterdam": ("30 2 * * *", utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)),
    "America/New_York": ("30 1 * * *", utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 30)),
}


@pytest.mark.parametrize("zone", sorted(SKIPPED))
def test_a_start_in_the_skipped_hour_opens_the_window_when_the_clock_jumps(zone: str) -> None:
    schedule, gap_end = SKIPPED[zone]
    b = budget(schedule=schedule, duration="1h", timeZone=zone)
    assert not active(b, gap_end - 1)  # 01:59:59 local, just before the jump
    assert active(b, gap_end)  # 03:00 local: the 02:30 start happens at the first valid minute
    start = window_start(b, gap_end + 600)
    assert start is not None and (start.hour, start.minute) == (3, 0) and start.timestamp() == gap_end
    assert active(b, gap_end + 3599) and not active(b, gap_end + 3600)  # for 1 elapsed hour
    # The day after, 02:30 exists again.
    next_day = window_start(b, gap_end + 86400 - 900)  # 02:45 local the next day
    assert next_day is not None and (next_day.hour, next_day.minute) == (2, 30)


@pytest.mark.parametrize("zone", sorted(REPEATED))
def test_a_start_in_the_repeated_hour_opens_once_at_its_first_occurrence(zone: str) -> None:
    schedule, first, second = REPEATED[zone]
    b = budget(schedule=schedule, duration="20m", timeZone=zone)
    assert not active(b, first - 1)
    assert active(b, first) and active(b, first + 1199) and not active(b, first + 1200)
    start = window_start(b, first + 60)
    assert start is not None and start.timestamp() == first and start.fold == 0  # summer time
    # The same wall-clock time an hour later (winter time) starts nothing.
    assert not any(active(b, second + s) for s in range(0, 1500, 30))


@pytest.mark.parametrize(("zone", "spring", "autumn"), [
    ("Europe/Amsterdam", utc(2026, 3, 29), utc(2026, 10, 25)),
    ("America/New_York", utc(2026, 3, 8, 5), utc(2026, 11, 1, 4)),
])  # fmt: skip
def test_a_stepped_schedule_follows_the_real_clock(zone: str, spring: float, autumn: float) -> None:
    hour = 2 if zone == "Europe/Amsterdam" else 1
    b = budget(schedule=f"*/30 {hour} * * *", duration="10m", timeZone=zone)
    starts = {  # every 5 minutes over 4 hours from the given UTC instant: the window starts seen
        window_start(b, t).timestamp()  # type: ignore[union-attr]
        for t in (autumn + 300 * i for i in range(48))
        if window_start(b, t) is not None
    }
    assert len(starts) == 4  # the repeated hour holds :00 and :30 twice
    if zone == "Europe/Amsterdam":  # 02:xx does not exist on the spring day: no window at all
        assert not any(active(b, spring + 300 * i) for i in range(48))


@pytest.mark.parametrize("zone", ["Europe/Amsterdam", "America/New_York"])
def test_duration_is_elapsed_time_across_a_clock_change(zone: str) -> None:
    # A night window 22:00 for 10h on the night clocks go forward ends at 09:00 local, not 08:00.
    b = budget(schedule="0 22 * * *", duration="10h", timeZone=zone)
    day = 28 if zone == "Europe/Amsterdam" else 7
    start = at(2026, 3, day, 22, zone=zone)
    end = start + 10 * 3600
    assert active(b, start) and active(b, end - 1) and not active(b, end)
    assert dt.datetime.fromtimestamp(end, dt.UTC).astimezone(window_start(b, start).tzinfo).hour == 9  # type: ignore[union-attr]


def test_utc_is_the_default_time_zone() -> None:
    b = budget(schedule="0 9 * * *", duration="1h")
    assert b.time_zone == "UTC" and active(b, utc(2026, 1, 5, 9, 30))
    ams = budget(schedule="0 9 * * *", duration="1h", timeZone="Europe/Amsterdam")
    assert not active(ams, utc(2026, 1, 5, 9, 30)) and active(ams, utc(2026, 1, 5, 8, 30))


# ---- the ledger -------------------------------------------------------------------------------


def nodes(pool: str, n: int, **kw: Any) -> list[Node]:
    return [make_node(f"{pool}-{i}", pool=pool, **kw) for i in range(n)]


def test_most_restrictive_active_budget_wins_per_reason() -> None:
    budgets = (
        budget(name="ten-percent", nodes="10%"),
        budget(name="office", nodes=1, schedule="0 9 * * 1-5", duration="9h"),
        budget(name="no-empty", nodes=0, reasons=["Empty"]),  # Karpenter's spelling is accepted
    )
    web = nodes("web", 30)
    monday_10 = utc(2026, 6, 1, 10)
    ledger = BudgetLedger(budgets, monday_10, {"web": 30}, {})
    assert ledger.active_names == ("ten-percent", "office", "no-empty")
    held = ledger.admit(web[0], "empty")
    assert held is not None and held.budget == "no-empty"
    assert ledger.admit(web[1], "underutilized") is None
    held = ledger.admit(web[2], "underutilized")
    assert (
        held is not None and held.budget == "office" and "allows 1 of node pool web's 30 nodes" in held.detail
    )
    assert "window since 2026-06-01 09:00 UTC" in held.detail and "1 already are" in held.detail
    # Monday 20:00: only ten-percent (3 of 30) limits drains.
    ledger = BudgetLedger(budgets, utc(2026, 6, 1, 20), {"web": 30}, {})
    assert [ledger.admit(n, "unready") for n in web[:3]] == [None] * 3
    assert ledger.admit(web[3], "unready") == BudgetHold(
        "ten-percent",
        "budget ten-percent (nodes 10%) allows 3 of node pool web's 30 nodes disrupted at once; 3 already are",
    )


def test_budgets_apply_to_each_named_pool_on_its_own() -> None:
    budgets = (budget(name="freeze-web", nodes=0, nodePools=["web"]), budget(name="one-each", nodes=1))
    web, batch, other = nodes("web", 4), nodes("batch", 4), nodes("other", 4)
    ledger = BudgetLedger(budgets, utc(2026, 6, 1), {"web": 4, "batch": 4, "other": 4}, {})
    assert ledger.admit(web[0], "empty") is not None
    assert ledger.admit(batch[0], "empty") is None and ledger.admit(other[0], "empty") is None
    assert ledger.admit(batch[1], "empty") is not None  # one per pool, not one in all


def test_notready_and_deleting_nodes_count_as_disrupted_but_not_twice() -> None:
    pool = nodes("p", 10)
    two = (budget(name="two", nodes=2),)
    # One NotReady node and one being deleted already use the budget of 2.
    ledger = BudgetLedger(two, utc(2026, 6, 1), {"p": 10}, {"p": {"p-8", "p-9"}})
    held = ledger.admit(pool[0], "underutilized")
    assert held is not None and "2 already are" in held.detail
    # A NotReady candidate is already unavailable: removing it adds no disruption...
    ledger = BudgetLedger((budget(name="one", nodes=1),), utc(2026, 6, 1), {"p": 10}, {"p": {"p-9"}})
    assert ledger.admit(pool[9], "unready") is None
    # ... but nodes: 0 still holds it.
    ledger = BudgetLedger((budget(name="zero", nodes=0),), utc(2026, 6, 1), {"p": 10}, {"p": {"p-9"}})
    assert ledger.admit(pool[9], "unready") is not None


def test_disruption_reasons_are_cas_scale_down_reasons() -> None:
    assert disruption_reason(True, True) == "empty"
    assert disruption_reason(True, False) == "unready"  # CA 1.30 nodeScaleDownReason: NotReady first
    assert disruption_reason(False, True) == "underutilized"
    assert disruption_reason(False, False) == "unready"


# ---- configuration --------------------------------------------------------------------------------


def test_the_compact_flag_and_the_yaml_form_are_the_same_budget() -> None:
    flag = ScalerConfig.from_mapping({
        "budgets": ["0;schedule=0 9 * * 1-5;duration=9h;timeZone=Europe/Amsterdam;reasons=underutilized,unready;"
                    "nodePools=web,api;name=office"]
    }).budgets  # fmt: skip
    yaml_form = ScalerConfig.from_mapping({
        "budgets": [{"name": "office", "nodes": 0, "schedule": "0 9 * * 1-5", "duration": "9h",
                     "timeZone": "Europe/Amsterdam", "reasons": ["underutilized", "unready"],
                     "nodePools": ["web", "api"]}]
    }).budgets  # fmt: skip
    assert flag == yaml_form
    assert ScalerConfig.from_mapping({"budgets": ["10%", "2;reasons=empty"]}).budgets[1].name == "budget-2"


@pytest.mark.parametrize(("spec", "message"), [
    ("0;schedule=0 9 * * *", "schedule and duration must be given together"),
    ("101%", "nodes must be a count or a percentage"),
    ("-1", "nodes must be a count or a percentage"),
    ("1;timeZone=Mars/Olympus", "unknown IANA time zone 'Mars/Olympus'"),
    ("1;schedule=0 9 * *;duration=1h", "5-field cron"),
    ("1;schedule=61 * * * *;duration=1h", "invalid cron schedule"),
    ("1;reasons=drifted", "'drifted'"),
    ("1;zone=UTC", "unknown key 'zone'"),
    ("schedule=0 9 * * *;duration=1h", "no nodes"),
    ("1;duration=0s;schedule=@daily", "greater than 0"),
])  # fmt: skip
def test_bad_budgets_are_one_line_errors(spec: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match=message):
        ScalerConfig.from_mapping({"budgets": [spec]})
    assert main(["dry-run", "--scale-down-budget", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaler: error: ") and err.count("\n") == 1 and message in err


# ---- planner and dry-run ----------------------------------------------------------------------

MONDAY_10 = utc(2026, 6, 1, 10)
SIZES = {"pool-a": GroupSize(0, 10, 3), "big": GroupSize(1, 1, 1)}


def cluster(now: float) -> ClusterSnapshot:
    ns = [
        make_node("big", cpu_m=32_000, mem=128 * GI, pool="big"),
        make_node("a"),
        make_node("b"),
        make_node("c"),
    ]
    pods = [make_pod("x", node="big"), make_pod("pa", node="a"), make_pod("pb", node="b")]
    usage = {"big": (20_000, 8 * GI), "a": (100, GI), "b": (200, GI), "c": (300, GI)}
    metrics = [NodeMetrics(n, now - 10, 30, c, m) for n, (c, m) in usage.items()]
    return ClusterSnapshot.create(now, ns, pods, node_metrics=metrics)


def run(cfg: ScalerConfig, now: float) -> tuple[Any, Any]:
    _, state = plan(evaluate(cluster(now - 600), cfg), PlannerState(), SIZES)
    return plan(evaluate(cluster(now), cfg), state, SIZES)


def test_the_planner_holds_nodes_a_budget_refuses_and_names_it() -> None:
    office = {"budgets": ["0;schedule=0 9 * * 1-5;duration=9h;reasons=underutilized;name=office"]}
    cfg = ScalerConfig.from_mapping(office)
    decision, _ = run(cfg, MONDAY_10)
    # The empty node goes (the budget limits drains only); both drains are held, naming the
    # budget (the evaluation holds them before --max-drain-parallelism paces anything).
    assert [r.node.name for r in decision.empty] == ["c"] and decision.drain == ()
    for name in ("a", "b"):
        status, reason, detail = decision.verdicts[name]
        assert (status, reason) == (NodeStatus.UNREMOVABLE, UnremovableReason.ScaleDownBudgetExhausted)
        assert detail.startswith("budget office (") and detail.endswith("disrupted at once; 1 already are")
    assert decision.active_budgets == ("office",)
    metrics = Metrics()
    metrics.observe_plan(decision, ["office"])
    text = metrics.exposition()
    assert b'scaler_unremovable_nodes_count{reason="ScaleDownBudgetExhausted"} 2.0' in text
    assert b'scaler_scale_down_budget_active{budget="office"} 1.0' in text
    # Monday 20:00: out of the window, both go.
    decision, _ = run(cfg, utc(2026, 6, 1, 20))
    assert {r.node.name for r in decision.to_delete} == {"a", "c"} and decision.active_budgets == ()


def test_removals_in_flight_use_the_budget() -> None:
    cfg = ScalerConfig.from_mapping({"budgets": ["1"]})
    _, state = plan(evaluate(cluster(MONDAY_10 - 600), cfg), PlannerState(), SIZES)
    decision, _ = plan(evaluate(cluster(MONDAY_10), cfg), state, SIZES)
    assert len(decision.to_delete) == 1  # one per pool at a time: the empty node c
    held = [v for v in decision.verdicts.values() if v[1] is UnremovableReason.ScaleDownBudgetExhausted]
    assert len(held) == 2
    # b (being deleted) already takes pool-a's one slot.
    decision, _ = plan(evaluate(cluster(MONDAY_10), cfg, disrupted=("b",)), state, SIZES, deleting=("b",))
    assert decision.to_delete == ()


EXAMPLE = "scaler/examples/bitbrains-gke-day1"


def dry_run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["dry-run", "--snapshot", EXAMPLE, "-o", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_the_dry_run_applies_the_budgets_active_at_its_time(capsys: pytest.CaptureFixture[str]) -> None:
    base = dry_run_json(capsys)
    removable = [n for n in base["nodes"] if n["removable"]]
    assert len(removable) >= 2
    # The bundled example's time (2026-11-04T13:59:48Z) is a Wednesday, 14:59 in Amsterdam.
    office = "0;schedule=0 9 * * 1-5;duration=9h;timeZone=Europe/Amsterdam;name=office"
    held = dry_run_json(capsys, "--scale-down-budget", office)
    assert held["summary"]["removable"] == 0
    # Every node that would go is held; so is every other candidate that could go on its own
    # (nothing is removed during the window, so none of them loses its room to another).
    assert held["summary"]["unremovableByReason"]["ScaleDownBudgetExhausted"] >= len(removable)
    reasons = {n["name"]: (n["reason"], n["detail"]) for n in held["nodes"]}
    for n in removable:
        assert reasons[n["name"]][0] == "ScaleDownBudgetExhausted"
    for reason, detail in reasons.values():
        if reason == "ScaleDownBudgetExhausted":
            assert "budget office" in detail and "CET" in detail
    assert held["flags"]["budgets"][0]["timeZone"] == "Europe/Amsterdam"
    # In Tokyo it is already 22:59: out of the window, nothing is held.
    tokyo = office.replace("Europe/Amsterdam", "Asia/Tokyo")
    assert dry_run_json(capsys, "--scale-down-budget", tokyo)["summary"]["removable"] == len(removable)
    # One at a time per pool: the first in removal order of each pool goes.
    one = dry_run_json(capsys, "--scale-down-budget", "1")
    kept = [n for n in one["nodes"] if n["removable"]]
    assert len(kept) == len({n["nodeGroup"] for n in removable})


# ---- budgets before the simulation: a property ---------------------------------------------------

POOLS = ("p", "q", "r")


@st.composite
def budgeted_clusters(draw: st.DrawFn) -> tuple[ClusterSnapshot, ScalerConfig, frozenset[str]]:
    """Three to seven 4-core nodes in up to three pools, each with up to three movable pods and
    real usage, a few NotReady or being deleted; any set of always-active budgets (counts,
    percentages, pool scopes, reasons); and removals in flight (``disrupted``)."""
    now = MONDAY_10
    count = draw(st.integers(3, 7))
    nodes, pods, metrics = [], [], []
    for i in range(count):
        name = f"n{i}"
        ready = draw(st.booleans()) if i % 3 == 2 else True
        deleting = draw(st.sampled_from([None, None, None, now - 3600.0]))
        nodes.append(
            make_node(name, pool=draw(st.sampled_from(POOLS)), ready=ready, to_be_deleted_ts=deleting)
        )
        for j in range(draw(st.integers(0, 3))):
            cpu = draw(st.integers(1, 8)) * 100
            pods.append(make_pod(f"{name}-{j}", node=name, cpu_m=cpu, mem=draw(st.integers(1, 4)) * GI // 2))
        cpu_used = draw(st.integers(1, 19)) * 100
        metrics.append(NodeMetrics(name, now - 10, 30, cpu_used, draw(st.integers(1, 10)) * GI))
    snapshot = ClusterSnapshot.create(now, nodes, pods, node_metrics=metrics)
    specs = []
    for _ in range(draw(st.integers(1, 3))):
        spec = draw(st.sampled_from(["0", "1", "2", "34%", "50%"]))
        pools = draw(st.lists(st.sampled_from(POOLS), max_size=2, unique=True))
        if pools:
            spec += ";nodePools=" + ",".join(pools)
        reasons = draw(
            st.lists(st.sampled_from(["empty", "underutilized", "unready"]), max_size=2, unique=True)
        )
        if reasons:
            spec += ";reasons=" + ",".join(reasons)
        specs.append(spec)
    config = ScalerConfig.from_mapping({"budgets": specs})
    disrupted = frozenset(draw(st.lists(st.sampled_from([n.name for n in nodes]), max_size=2)))
    return snapshot, config, disrupted


@settings(max_examples=150, deadline=None)
@given(budgeted_clusters())
def test_budgets_hold_nodes_exactly_as_scale_down_disabled_would(
    case: tuple[ClusterSnapshot, ScalerConfig, frozenset[str]],
) -> None:
    """With any budgets, the removals (and their moves) are those of the same evaluation with
    the held nodes marked ``scale-down-disabled`` and no budget: a held node moves no pod in
    the simulation, so no later candidate is judged against load that will not arrive. And no
    budget is exceeded."""
    snapshot, config, disrupted = case
    budgeted = evaluate(snapshot, config, disrupted=disrupted)
    disabled_nodes = [
        replace(n, annotations={**n.annotations, ANNOTATION_SCALE_DOWN_DISABLED: "true"})
        if n.name in budgeted.held
        else n
        for n in snapshot.nodes
    ]
    unbudgeted = config.model_copy(update={"budgets": ()})
    disabled = evaluate(
        ClusterSnapshot.create(
            snapshot.now, disabled_nodes, snapshot.pods, node_metrics=snapshot.node_metrics.values()
        ),
        unbudgeted,
    )
    removals = {r.node.name: r.moves for r in budgeted.removable()}
    assert removals == {r.node.name: r.moves for r in disabled.removable()}
    assert [r.node.name for r in budgeted.removable()] == [r.node.name for r in disabled.removable()]
    held = {r.node.name for r in budgeted.nodes if r.reason is UnremovableReason.ScaleDownBudgetExhausted}
    assert held <= budgeted.held and not (budgeted.held & set(removals))
    # Within every active budget: replaying the removals in order through a fresh ledger holds none.
    ledger = BudgetLedger.for_nodes(config.budgets, snapshot.now, snapshot.nodes, disrupted)
    for r in budgeted.removable():
        reason = disruption_reason(r.utilization.empty, r.node.ready)
        assert ledger.admit(r.node, reason) is None, r.node.name


def test_a_node_only_a_budget_keeps_stays_unneeded_and_goes_when_the_window_ends() -> None:
    """Its unneeded timer runs during the window (the budget alone keeps it), so at 18:00 it is
    deleted at once instead of waiting --scale-down-unneeded-time more."""
    cfg = ScalerConfig.from_mapping(
        {"budgets": ["0;schedule=0 9 * * 1-5;duration=9h;reasons=underutilized;name=office"]}
    )
    state = PlannerState()
    for minute in range(0, 60, 10):  # 17:00 .. 17:50, in the window
        decision, state = plan(evaluate(cluster(utc(2026, 6, 1, 17, minute)), cfg), state, SIZES)
        assert decision.verdicts["a"][1] is UnremovableReason.ScaleDownBudgetExhausted
        assert decision.unneeded["a"] == utc(2026, 6, 1, 17)
    decision, _ = plan(evaluate(cluster(utc(2026, 6, 1, 18)), cfg), state, SIZES)
    assert decision.active_budgets == ()
    assert [r.node.name for r in decision.drain] == ["a"]  # the first drain (--max-drain-parallelism 1)
