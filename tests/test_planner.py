"""Planner: unneeded timers, usage aggregation, cooldowns, min sizes and budgets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from builders import GI, make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.model.records import Node, NodeMetrics, Pod, PodMetrics
from scaler.model.snapshot import ClusterSnapshot
from scaler.planner import (
    AggregatedPodMetrics,
    Aggregation,
    GroupSize,
    PlannerState,
    UsageSample,
    aggregate_usage,
    plan,
    record_pod_usage,
    record_usage,
    with_aggregated_usage,
)
from scaler.reasons import NodeStatus, UnremovableReason
from scaler.utilization import pod_usage

T0 = 1_800_000_000.0
CFG = ScalerConfig()


def cluster(
    now: float,
    usage: dict[str, tuple[int, int]],
    nodes: Sequence[Node] | None = None,
    pods: Sequence[Pod] | None = None,
) -> ClusterSnapshot:
    nodes = nodes or [
        make_node("big", cpu_m=32_000, mem=128 * GI, pool="big"),
        make_node("a"),
        make_node("b"),
        make_node("c"),
    ]
    pods = (
        pods
        if pods is not None
        else [make_pod("x", node="big"), make_pod("pa", node="a"), make_pod("pb", node="b")]
    )
    metrics = [NodeMetrics(n, now - 10, 30, c, m) for n, (c, m) in usage.items()]
    return ClusterSnapshot.create(now, nodes, pods, node_metrics=metrics)


IDLE = {"big": (20_000, 8 * GI), "a": (100, GI), "b": (200, GI), "c": (300, GI)}
SIZES = {"pool-a": GroupSize(0, 10, 3), "big": GroupSize(1, 1, 1)}


def step(
    state: PlannerState, now: float, usage: dict[str, tuple[int, int]], cfg: ScalerConfig = CFG, **kw: object
):  # type: ignore[no-untyped-def]
    ev = evaluate(cluster(now, usage), cfg, recently_unremovable=state.recently_unremovable(now))
    return plan(ev, state, kw.pop("sizes", SIZES), **kw)  # type: ignore[arg-type]


def test_timer_starts_keeps_and_resets() -> None:
    p1, s1 = step(PlannerState(), T0, IDLE)
    assert p1.unneeded == {"a": T0, "c": T0}
    assert p1.verdicts["a"][1] is UnremovableReason.NotUnneededLongEnough
    assert p1.to_delete == ()
    p2, s2 = step(s1, T0 + 300, IDLE)
    assert p2.unneeded["a"] == T0
    busy = IDLE | {"a": (3000, GI)}
    p3, s3 = step(s2, T0 + 400, busy)
    assert "a" not in p3.unneeded
    p4, _ = step(s3, T0 + 500, IDLE)
    assert p4.unneeded["a"] == T0 + 500


def test_deletable_after_unneeded_time_empty_first_then_one_drain() -> None:
    _, s1 = step(PlannerState(), T0, IDLE)
    p2, _ = step(s1, T0 + 600, IDLE)
    assert [r.node.name for r in p2.empty] == ["c"]
    assert [r.node.name for r in p2.drain] == ["a"]
    assert p2.verdicts["c"][0] is NodeStatus.REMOVABLE_EMPTY


def test_unready_nodes_use_the_unready_time() -> None:
    nodes = [
        make_node("big", cpu_m=32_000, mem=128 * GI, pool="big"),
        make_node("a"),
        make_node("n", ready=False),
    ]
    pods = [make_pod("x", node="big")]
    usage = {"big": (20_000, 8 * GI), "a": (100, GI), "n": (0, 0)}
    snap0 = cluster(T0, usage, nodes, pods)
    _, s1 = plan(evaluate(snap0, CFG), PlannerState(), SIZES)
    p2, _ = plan(evaluate(cluster(T0 + 700, usage, nodes, pods), CFG), s1, SIZES)
    assert p2.verdicts["n"][1] is UnremovableReason.NotUnreadyLongEnough
    assert "a" in {r.node.name for r in p2.to_delete}
    p3, _ = plan(evaluate(cluster(T0 + 1200, usage, nodes, pods), CFG), s1, SIZES)
    assert "n" in {r.node.name for r in p3.to_delete}


def test_min_size_counts_in_flight_and_planned() -> None:
    _, s1 = step(PlannerState(), T0, IDLE)
    sizes = {"pool-a": GroupSize(2, 10, 3), "big": GroupSize(1, 1, 1)}
    p2, _ = step(s1, T0 + 600, IDLE, sizes=sizes)
    assert [r.node.name for r in p2.to_delete] == ["c"]
    assert p2.verdicts["a"][1] is UnremovableReason.NodeGroupMinSizeReached
    busy = PlannerState(unneeded_since=s1.unneeded_since, in_flight={"zz": "pool-a"})
    p3, _ = step(busy, T0 + 600, IDLE, sizes=sizes)
    assert p3.to_delete == ()


def test_cooldowns_pause_deletion_but_not_timers() -> None:
    _, s1 = step(PlannerState(), T0, IDLE)
    p2, s2 = step(s1, T0 + 600, IDLE, last_scale_up=T0 + 100)
    assert p2.to_delete == () and "delay-after-add" in p2.cooldown
    assert s2.unneeded_since["a"] == T0
    p3, _ = step(s2, T0 + 701, IDLE, last_scale_up=T0 + 100)
    assert p3.to_delete
    failed = PlannerState(unneeded_since=s1.unneeded_since, last_failure=T0 + 500)
    p4, _ = step(failed, T0 + 600, IDLE)
    assert p4.to_delete == () and "after-failure" in p4.cooldown
    p5, _ = step(failed, T0 + 681, IDLE)
    assert p5.to_delete


def test_the_first_hold_check_in_order_gives_the_reason() -> None:
    # Order: unneeded time, node group known, min size, cooldown, parallelism. Each case is
    # held by two checks at once (a cooldown, or the parallelism budget, beside another).
    _, s1 = step(PlannerState(), T0, IDLE)
    cooling = {"last_scale_up": T0 + 100}
    only_big = {"big": GroupSize(1, 1, 1)}
    early, _ = step(s1, T0 + 300, IDLE, sizes=only_big, **cooling)
    assert early.verdicts["a"][1] is UnremovableReason.NotUnneededLongEnough
    unknown, _ = step(s1, T0 + 600, IDLE, sizes=only_big, **cooling)
    assert unknown.verdicts["a"][1] is UnremovableReason.NotAutoscaled
    at_min = {"pool-a": GroupSize(3, 10, 3), "big": GroupSize(1, 1, 1)}
    minimum, _ = step(s1, T0 + 600, IDLE, sizes=at_min, **cooling)
    assert minimum.verdicts["a"][1] is UnremovableReason.NodeGroupMinSizeReached
    full = PlannerState(unneeded_since=s1.unneeded_since, in_flight={"q": "big"})
    one = CFG.model_copy(update={"max_scale_down_parallelism": 1})
    cooldown, _ = step(full, T0 + 600, IDLE, one, **cooling)
    assert cooldown.verdicts["a"][1] is UnremovableReason.NotUnneededOtherReason
    budget, _ = step(full, T0 + 600, IDLE, one)
    assert budget.verdicts["a"][1] is UnremovableReason.NodeGroupMaxDeletionCountReached


def test_drain_budget_and_parallelism_budget() -> None:
    _, s1 = step(PlannerState(), T0, IDLE)
    draining = PlannerState(
        unneeded_since=s1.unneeded_since, in_flight={"q": "big"}, in_flight_drains=frozenset({"q"})
    )
    p, _ = step(draining, T0 + 600, IDLE)
    assert [r.node.name for r in p.to_delete] == ["c"]
    assert p.verdicts["a"][1] is UnremovableReason.NodeGroupMaxDeletionCountReached
    cfg = CFG.model_copy(update={"max_scale_down_parallelism": 1})
    p2, _ = step(PlannerState(unneeded_since=s1.unneeded_since), T0 + 600, IDLE, cfg)
    assert [r.node.name for r in p2.to_delete] == ["c"]


def test_simulated_unremovable_nodes_are_not_rechecked_for_a_while() -> None:
    tight = IDLE | {"big": (14_250, 8 * GI)}  # a's 100m pod fits under 45% of 32 cores; then b's does not
    p1, s1 = step(PlannerState(), T0, tight)
    blocked = [n for n, v in p1.verdicts.items() if v[1] is UnremovableReason.NoPlaceToMovePods]
    assert blocked
    assert all(s1.unremovable_until[n] == T0 + 300 for n in blocked)
    p2, _ = step(s1, T0 + 100, tight)
    assert all(p2.verdicts[n][1] is UnremovableReason.RecentlyUnremovable for n in blocked)


def samples(values: Sequence[int]) -> list[UsageSample]:
    return [UsageSample(T0 + 30 * i, v, v * 1000) for i, v in enumerate(values)]


def test_aggregations() -> None:
    s = samples([100] * 19 + [4000])
    assert aggregate_usage(s, Aggregation.MAX) == (4000, 4_000_000)
    assert aggregate_usage(s, Aggregation.P95) == (100, 100_000)
    ewma = aggregate_usage(samples([100, 100, 1000]), Aggregation.EWMA)[0]
    assert 100 < ewma < 1000
    assert aggregate_usage(samples([100] * 18 + [4000, 4000]), Aggregation.P95)[0] == 4000
    with pytest.raises(ValueError):
        aggregate_usage([], Aggregation.MAX)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 10**6), min_size=45, max_size=45))
def test_p95_is_the_nearest_rank_percentile_at_every_sample_count(values: list[int]) -> None:
    """Below 20 samples the p95 is taken as the maximum (a shortcut): at every count from 1 to
    45 it must be the nearest-rank 95th percentile (numpy's ``inverted_cdf``)."""
    for n in range(1, len(values) + 1):
        expected = int(np.percentile(values[:n], 95, method="inverted_cdf"))
        assert aggregate_usage(samples(values[:n]), Aggregation.P95)[0] == expected, n


def test_record_usage_trims_window_and_dedupes() -> None:
    hist: dict[str, tuple[UsageSample, ...]] = {}
    for i in range(30):
        snap = cluster(T0 + 60 * i, IDLE)
        hist = record_usage(hist, snap, 600)
        hist = record_usage(hist, snap, 600)  # same metrics again: not added twice
    assert len(hist["a"]) == 10  # samples at T0+1190 … T0+1730, inside the last 600 s
    assert hist["a"][0].timestamp >= T0 + 60 * 29 - 10 - 600


def test_single_spike_does_not_reset_the_timer_with_p95_but_does_with_max() -> None:
    def run(method: Aggregation) -> float | None:
        state = PlannerState()
        for i in range(25):
            now = T0 + 30 * i
            usage = IDLE | ({"a": (3900, GI)} if i == 20 else {})
            snap = cluster(now, usage)
            history = record_usage(state.usage_history, snap, CFG.scale_down_unneeded_time)
            state = PlannerState(
                unneeded_since=state.unneeded_since,
                unremovable_until=state.unremovable_until,
                usage_history=history,
            )
            ev = evaluate(
                with_aggregated_usage(snap, history, method),
                CFG,
                recently_unremovable=state.recently_unremovable(now),
            )
            p, state = plan(ev, state, SIZES)
            state = PlannerState(
                unneeded_since=state.unneeded_since,
                unremovable_until=state.unremovable_until,
                usage_history=history,
            )
        return p.unneeded.get("a")

    assert run(Aggregation.P95) == T0
    assert run(Aggregation.MAX) is None


def test_aggregated_snapshot_keeps_freshness() -> None:
    snap = cluster(T0, IDLE)
    hist = {"a": tuple(samples([50, 60, 70]))}
    agg = with_aggregated_usage(snap, hist, Aggregation.MAX)
    assert agg.node_metrics["a"].cpu_millicores == 70
    assert agg.node_metrics["a"].timestamp == snap.node_metrics["a"].timestamp
    assert agg.node_metrics["b"] == snap.node_metrics["b"]


def test_aggregated_snapshot_keeps_the_newest_readings_beside_the_aggregates() -> None:
    snap = cluster(T0, IDLE)
    snap = replace(snap, pod_metrics={("default", "pa"): PodMetrics("default", "pa", T0 - 10, 30, 80, GI)})
    hist = {"a": tuple(samples([500, 400, 300, 100]))}
    pod_hist = {("default", "pa"): tuple(samples([600, 50]))}
    agg = with_aggregated_usage(snap, hist, Aggregation.MAX, pod_history=pod_hist)
    assert agg.node_metrics["a"].cpu_millicores == 500
    assert agg.newest_node_metric("a") == snap.node_metrics["a"]
    assert agg.pod_metrics[("default", "pa")].cpu_millicores == 600
    assert agg.newest_pod_metric("default", "pa") == snap.pod_metrics[("default", "pa")]
    # A moved pod counts the larger of its aggregate and its newest reading.
    assert pod_usage(make_pod("pa", node="a"), agg, CFG) == (600, GI)


def test_record_pod_usage_keeps_the_pods_of_the_given_nodes_within_the_window() -> None:
    hist: dict[tuple[str, str], tuple[UsageSample, ...]] = {}
    for i in range(30):
        now = T0 + 60 * i
        snap = cluster(now, IDLE)
        pms = [PodMetrics("default", p, now - 10, 30, 10 * i, GI) for p in ("x", "pa", "pb")]
        snap = replace(snap, pod_metrics={(m.namespace, m.name): m for m in pms})
        hist = record_pod_usage(hist, snap, 600, {"a", "b"})
        hist = record_pod_usage(hist, snap, 600, {"a", "b"})  # same readings: not added twice
    assert set(hist) == {("default", "pa"), ("default", "pb")}  # "x" is on "big"
    assert len(hist[("default", "pa")]) == 10
    assert hist[("default", "pa")][-1].cpu_millicores == 290
    assert set(record_pod_usage(hist, snap, 600, {"b"})) == {("default", "pb")}
    assert set(record_pod_usage({}, snap, 600)) == {("default", "x"), ("default", "pa"), ("default", "pb")}


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 1000), max_size=50).map(sorted),
    st.integers(-10, 1010),
    st.integers(1, 3),
)
def test_the_window_is_trimmed_as_a_pass_over_it_would(times: list[int], horizon: int, n_pods: int) -> None:
    """record_usage and record_pod_usage cut the samples before the horizon by bisection: the
    same samples a filter over the whole window keeps (equal timestamps included)."""
    window = tuple(UsageSample(float(t), i, i) for i, t in enumerate(times))
    now = float(horizon + 600)
    snap = cluster(now, IDLE)
    pods = [("default", p) for p in ("x", "pa", "pb")[:n_pods]]
    snap = replace(snap, node_metrics={}, pod_metrics={})  # no new reading: only the trim shows
    kept = tuple(s for s in window if s.timestamp >= horizon)
    nodes = record_usage({n.name: window for n in snap.nodes}, snap, 600)
    assert all(v == kept for v in nodes.values()) and len(nodes) == (len(snap.nodes) if kept else 0)
    pod_hist = record_pod_usage(dict.fromkeys(pods, window), snap, 600)
    assert pod_hist == (dict.fromkeys(pods, kept) if kept else {})


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 8 * GI)), max_size=25),
    ),
    st.sampled_from(list(Aggregation)),
    st.sets(st.sampled_from(["a", "b", "c", "d", "e"])),
)
def test_pods_are_aggregated_when_read_as_they_were_all_at_once(
    histories: dict[str, list[tuple[int, int]]], method: Aggregation, read: set[str]
) -> None:
    newest = {("ns", p): PodMetrics("ns", p, T0, 30, 100, GI) for p in "abce"}
    history = {
        ("ns", p): tuple(UsageSample(T0 - 30 * (len(v) - i), c, m) for i, (c, m) in enumerate(v))
        for p, v in histories.items()
    }
    asked: list[tuple[str, str]] = []

    def method_of(key: tuple[str, str]) -> Aggregation:
        asked.append(key)
        return method

    lazy = AggregatedPodMetrics(newest, history, method_of)
    for p in sorted(read):  # only the pods read are aggregated, each once
        lazy.get(("ns", p))
        lazy.get(("ns", p))
    assert sorted(asked) == sorted(("ns", p) for p in read if p in "abce" and history.get(("ns", p)))
    eager = {}
    for key, pm in newest.items():
        samples = history.get(key)
        cpu, mem = aggregate_usage(samples, method) if samples else (pm.cpu_millicores, pm.memory_bytes)
        eager[key] = replace_usage(pm, cpu, mem)
    assert dict(lazy.items()) == eager and lazy == eager and len(lazy) == 4
    assert lazy.get(("ns", "e")) == newest[("ns", "e")] and lazy.get(("ns", "z")) is None
    assert ("ns", "z") not in lazy and set(lazy) == set(newest)
    with pytest.raises(KeyError):
        lazy[("ns", "z")]


def replace_usage(pm: PodMetrics, cpu: int, mem: int) -> PodMetrics:
    return PodMetrics(pm.namespace, pm.name, pm.timestamp, pm.window_seconds, cpu, mem)


def test_a_not_ready_node_with_pods_is_judged_by_requests_and_goes_after_the_unready_time() -> None:
    # n is NotReady: no NodeMetrics. Its pod requests 10% of it; the pod fits on "big".
    nodes = [
        make_node("big", cpu_m=32_000, mem=128 * GI, pool="big"),
        make_node("a"),
        make_node("n", ready=False),
    ]
    pods = [make_pod("x", node="big"), make_pod("pa", node="a"), make_pod("pn", node="n", cpu_m=400)]
    usage = {"big": (10_000, 80 * GI), "a": (3000, GI)}
    ev = evaluate(cluster(T0, usage, nodes, pods), CFG)
    n = next(r for r in ev.nodes if r.node.name == "n")
    assert n.utilization.source == "requests (NotReady)"
    assert n.utilization.value == pytest.approx(0.1)
    assert n.status is NodeStatus.REMOVABLE_DRAIN
    _, s1 = plan(ev, PlannerState(), SIZES)
    p2, s2 = plan(evaluate(cluster(T0 + 700, usage, nodes, pods), CFG), s1, SIZES)
    assert p2.verdicts["n"][1] is UnremovableReason.NotUnreadyLongEnough
    p3, _ = plan(evaluate(cluster(T0 + 1200, usage, nodes, pods), CFG), s2, SIZES)
    assert [r.node.name for r in p3.drain] == ["n"]
    # --scale-down-unready-enabled=false keeps it, as in CA.
    off = evaluate(
        cluster(T0, usage, nodes, pods), CFG.model_copy(update={"scale_down_unready_enabled": False})
    )
    assert (
        next(r for r in off.nodes if r.node.name == "n").reason is UnremovableReason.ScaleDownUnreadyDisabled
    )


def test_the_planner_holds_a_zone_at_its_minimum() -> None:
    # a and c are both in zone z1; the pool has room (target 3, min 0) but z1 allows one deletion.
    sizes = {
        "pool-a": GroupSize(0, 10, 3, {"z1": GroupSize(1, 5, 2), "z2": GroupSize(1, 5, 1)}),
        "big": GroupSize(1, 1, 1),
    }
    _, s1 = step(PlannerState(), T0, IDLE, sizes=sizes)
    p2, _ = step(s1, T0 + 600, IDLE, sizes=sizes)
    assert [r.node.name for r in p2.to_delete] == ["c"]
    assert p2.verdicts["a"][1] is UnremovableReason.NodeGroupMinSizeReached
    assert p2.verdicts["a"][2] == "node group pool-a zone z1: 1 nodes left, min 1 per zone"
    # A deletion in flight in z1 counts there.
    _, s2 = step(PlannerState(), T0, IDLE, sizes=sizes)
    s2 = replace(s2, in_flight={"b": "pool-a"})
    p3, _ = step(s2, T0 + 600, IDLE, sizes=sizes, deleting={"b"})
    assert p3.to_delete == ()
