"""Per node pool settings (``node-pools``): the configuration, the engine's eligibility, the
planner's timers, TargetUsage's targets (node by node and vectorised), usage aggregation, the
pools' size limits and the dry-run's effective flags."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from builders import GI, make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.target_usage import TargetUsage
from scaler.cli import main
from scaler.config import POOL_KEYS, ConfigError, NodePoolSettings, ScalerConfig
from scaler.engine import evaluate
from scaler.limits import node_group_limits
from scaler.model.records import NodeMetrics, PodMetrics
from scaler.model.snapshot import ClusterSnapshot
from scaler.planner import Aggregation, GroupSize, PlannerState, UsageSample, plan, with_aggregated_usage
from scaler.reasons import UnremovableReason
from scaler.simulator.state import ClusterState

T0 = 1_800_000_000.0
POOLS = {
    "batch": {"scale-down-utilization-threshold": 0.7, "scale-down-unneeded-time": "2m", "target-cpu-usage": 0.9,
              "usage-aggregation": "max"},
    "web": {"target-memory-usage": 0.5},
}  # fmt: skip
CFG = ScalerConfig.from_mapping({"node-pools": POOLS, "nodes": ["1:1:big"]})  # big stays


def test_for_pool_overrides_only_what_the_pool_sets() -> None:
    batch, web, other = CFG.for_pool("batch"), CFG.for_pool("web"), CFG.for_pool("other")
    assert batch.scale_down_utilization_threshold == 0.7 and batch.scale_down_unneeded_time == 120.0
    assert batch.target_cpu_usage == 0.9 and batch.usage_aggregation == "max"
    assert batch.target_memory_usage == 0.75 and batch.scale_down_unready_time == 1200.0  # global
    assert web.target_memory_usage == 0.5 and web.target_cpu_usage == 0.45
    assert other == CFG.for_pool("") and other.scale_down_utilization_threshold == 0.5
    assert ScalerConfig.from_mapping({"nodePools": POOLS}).node_pools == CFG.node_pools  # camelCase


def test_pool_keys_have_the_global_keys_bounds() -> None:
    for key in POOL_KEYS:
        assert NodePoolSettings.model_fields[key].metadata == ScalerConfig.model_fields[key].metadata, key


@pytest.mark.parametrize(("pools", "message"), [
    ({"web": {"target-cpu-usage": 1.5}}, "node-pools.web.target-cpu-usage"),
    ({"web": {"scale-down-utilization-threshold": -0.1}}, "node-pools.web.scale-down-utilization-threshold"),
    ({"web": {"usage-aggregation": "mean"}}, "node-pools.web.usage-aggregation"),
    ({"web": {"scale-down-unneeded-time": "soon"}}, "node-pools.web"),
    ({"web": {"min-size": 3, "max-size": 2}}, "min-size 3 is greater than max-size 2"),
    ({"web": {"max-pods": 3}}, "unknown configuration key 'node-pools.web.max-pods'"),
])  # fmt: skip
def test_bad_pool_settings_are_one_line_errors(
    pools: dict[str, Any], message: str, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=message):
        ScalerConfig.from_mapping({"node-pools": pools})
    f = tmp_path / "c.yaml"
    f.write_text(json.dumps({"node-pools": pools}))
    assert main(["dry-run", "--config", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("scaler: error: ") and err.count("\n") == 1


def snapshot(now: float, usage: dict[str, tuple[int, int]]) -> ClusterSnapshot:
    nodes = [
        make_node("big", cpu_m=32_000, mem=128 * GI, pool="big"),
        make_node("batch-1", pool="batch"),
        make_node("web-1", pool="web"),
    ]
    pods = [make_pod("x", node="big"), make_pod("b", node="batch-1"), make_pod("w", node="web-1")]
    metrics = [NodeMetrics(n, now - 10, 30, c, m) for n, (c, m) in usage.items()]
    return ClusterSnapshot.create(now, nodes, pods, node_metrics=metrics)


# 60% cpu on both small nodes: above the global 0.5, under batch's 0.7; big has room at 40%.
BUSY = {"big": (12_800, 8 * GI), "batch-1": (2_400, GI), "web-1": (2_400, GI)}


def test_the_utilization_threshold_is_the_nodes_pool() -> None:
    ev = evaluate(snapshot(T0, BUSY), CFG)
    by = {r.node.name: r for r in ev.nodes}
    assert by["batch-1"].removable
    assert by["web-1"].reason is UnremovableReason.NotUnderutilized and "threshold 50%" in by["web-1"].detail
    without = evaluate(snapshot(T0, BUSY), ScalerConfig(nodes=("1:1:big",)))  # type: ignore[arg-type]
    assert {r.node.name: r.reason for r in without.nodes}["batch-1"] is UnremovableReason.NotUnderutilized


def test_the_unneeded_time_is_the_nodes_pool() -> None:
    idle = {"big": (1_000, 8 * GI), "batch-1": (100, GI), "web-1": (100, GI)}
    sizes = {"batch": GroupSize(0, 5, 2), "web": GroupSize(0, 5, 2), "big": GroupSize(1, 1, 1)}
    cfg = CFG.model_copy(update={"max_drain_parallelism": 2})
    _, state = plan(evaluate(snapshot(T0, idle), cfg), PlannerState(), sizes)
    decision, _ = plan(evaluate(snapshot(T0 + 120, idle), cfg), state, sizes)
    assert [r.node.name for r in decision.to_delete] == ["batch-1"]  # batch waits 2m, web 10m
    assert decision.verdicts["web-1"][1] is UnremovableReason.NotUnneededLongEnough
    decision, _ = plan(evaluate(snapshot(T0 + 600, idle), cfg), state, sizes)
    assert {r.node.name for r in decision.to_delete} == {"batch-1", "web-1"}


def test_usage_aggregation_is_the_nodes_pool() -> None:
    snap = snapshot(T0, BUSY)
    spike = [UsageSample(T0 - 30 * i, 100, GI) for i in range(19)] + [UsageSample(T0 - 600, 3_900, GI)]
    history = {"batch-1": tuple(spike), "web-1": tuple(spike)}
    out = with_aggregated_usage(snap, history, Aggregation.P95, {"batch": Aggregation.MAX})
    assert out.node_metrics["batch-1"].cpu_millicores == 3_900  # max: the spike counts
    assert out.node_metrics["web-1"].cpu_millicores == 100  # p95: one spike in 20 is ignored
    # A pod's aggregation is its node's pool's too (looked up when the pod is first read).
    readings = [PodMetrics("default", p, T0 - 10, 30, 100, GI) for p in ("b", "w", "x")]
    snap = replace(snap, pod_metrics={(m.namespace, m.name): m for m in readings})
    pod_history = {("default", p): tuple(spike) for p in ("b", "w")}
    out = with_aggregated_usage(snap, {}, Aggregation.P95, {"batch": Aggregation.MAX}, pod_history=pod_history)
    assert [out.pod_metrics[("default", p)].cpu_millicores for p in ("b", "w", "x")] == [3_900, 100, 100]


def test_pool_size_limits_and_the_nodes_flag_wins() -> None:
    nodes = snapshot(T0, BUSY).nodes
    sized = {"batch": {"min-size": 1, "max-size": 20}}
    limits = node_group_limits(ScalerConfig.from_mapping({"node-pools": sized}), nodes)
    assert (limits.pools["batch"].min_size, limits.pools["batch"].max_size) == (1, 20) and "web" not in limits.pools
    with_flag = ScalerConfig.from_mapping({"node-pools": sized, "nodes": ["0:3:batch"]})
    assert node_group_limits(with_flag, nodes).pools["batch"].min_size == 0
    only_min = ScalerConfig.from_mapping({"node-pools": {"web": {"min-size": 2}}})
    assert node_group_limits(only_min, nodes).pools["web"].min_size == 2
    ev = evaluate(snapshot(T0, {k: (100, GI) for k in BUSY}), only_min)
    assert {r.node.name: r.reason for r in ev.nodes}["web-1"] is UnremovableReason.NodeGroupMinSizeReached


# ---- TargetUsage with per-pool targets ---------------------------------------------------------


def test_target_usage_uses_the_destinations_pool_targets() -> None:
    nodes = [make_node("batch-1", pool="batch"), make_node("web-1", pool="web"), make_node("x-1", pool="x")]
    usage = {"batch-1": (3_000, 4 * GI), "web-1": (1_000, 7 * GI), "x-1": (1_000, 7 * GI)}
    state = ClusterState(ClusterSnapshot.create(T0, nodes, []), usage=usage)
    plugin = TargetUsage(CFG)
    p = make_pod("p", node="", cpu_m=500, mem=GI)
    verdicts = {ns.name: plugin.filter(p, ns, state) for ns in state.nodes.values()}
    assert verdicts == {
        "batch-1": None,  # 3.5 of 4 cores = 87.5% <= batch's 90%
        "web-1": "memory usage at or above target 50%",  # 8 GiB of 16 >= web's 50%
        "x-1": None,  # global targets: 37.5% cpu, 50% memory
    }
    codes, reasons = plugin.filter_nodes(p, state.positions(["batch-1", "web-1", "x-1"]), state) or ((), ())
    assert [reasons[c - 1] if c else None for c in codes] == list(verdicts.values())
    # Without the overrides, the global 45% refuses batch-1.
    assert TargetUsage(ScalerConfig()).filter(p, state.nodes["batch-1"], state) == "cpu usage above target 45%"


targets = st.integers(1, 100).map(lambda n: n / 100)


@settings(max_examples=150, deadline=None)
@given(
    pool_targets=st.lists(st.tuples(st.none() | targets, st.none() | targets), min_size=3, max_size=3),
    rows=st.lists(
        st.tuples(
            st.sampled_from(["p0", "p1", "p2", "other"]),
            st.integers(0, 8_000),
            st.integers(0, 32 * GI),
            st.none() | st.tuples(st.integers(0, 8_000), st.integers(0, 32 * GI)),
            st.tuples(st.integers(0, 4_000), st.integers(0, 8 * GI)),
        ),
        min_size=1,
        max_size=12,
    ),
    request=st.tuples(st.integers(0, 4_000), st.integers(0, 8 * GI)),
)
def test_vectorised_target_usage_agrees_with_node_by_node(
    pool_targets: list[tuple[float | None, float | None]],
    rows: list[tuple[str, int, int, tuple[int, int] | None, tuple[int, int]]],
    request: tuple[int, int],
) -> None:
    pools = {
        f"p{i}": {k: v for k, v in (("target-cpu-usage", c), ("target-memory-usage", m)) if v is not None}
        for i, (c, m) in enumerate(pool_targets)
    }
    _assert_vector_agrees(TargetUsage(ScalerConfig.from_mapping({"node-pools": pools})), rows, request)


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.just("p0"),
            st.integers(1, 8_000),
            st.integers(1, 32 * GI),
            st.tuples(st.integers(0, 8_000), st.integers(0, 32 * GI)),
            st.tuples(st.integers(0, 4_000), st.integers(0, 8 * GI)),
        ),
        min_size=1,
        max_size=12,
    ),
    request=st.tuples(st.integers(0, 4_000), st.integers(0, 8 * GI)),
)
def test_vectorised_target_usage_agrees_with_one_target_and_no_early_failure(
    rows: list[tuple[str, int, int, tuple[int, int] | None, tuple[int, int]]],
    request: tuple[int, int],
) -> None:
    """The path where every row has the same codes (global targets, usage and allocatable known)."""
    _assert_vector_agrees(TargetUsage(ScalerConfig()), rows, request)


def _assert_vector_agrees(
    plugin: TargetUsage,
    rows: list[tuple[str, int, int, tuple[int, int] | None, tuple[int, int]]],
    request: tuple[int, int],
) -> None:
    nodes = [make_node(f"n{i}", cpu_m=c, mem=m, pool=pool) for i, (pool, c, m, _, _) in enumerate(rows)]
    usage = {f"n{i}": u for i, (*_, u, _) in enumerate(rows) if u is not None}
    state = ClusterState(ClusterSnapshot.create(T0, nodes, []), usage=usage)
    for i, (*_, moved) in enumerate(rows):
        ns = state.nodes[f"n{i}"]
        ns.moved_cpu_millicores, ns.moved_memory_bytes = moved
        state.table.sync(ns)
    p = make_pod("p", node="", cpu_m=request[0], mem=request[1])
    result = plugin.filter_nodes(p, state.positions(state.names), state)
    assert result is not None
    codes, reasons = result
    assert [reasons[c - 1] if c else None for c in codes] == [
        plugin.filter(p, state.nodes[n], state) for n in state.names
    ]


# ---- the dry-run -----------------------------------------------------------------------------


def test_the_dry_run_shows_effective_values_per_pool(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(json.dumps({"node-pools": {"default-pool": {"scale-down-utilization-threshold": 0.9, "min-size": 3}}}))
    example = "scaler/examples/bitbrains-gke-day1"
    assert main(["dry-run", "--snapshot", example, "-o", "json"]) == 0
    base = json.loads(capsys.readouterr().out)
    assert main(["dry-run", "--snapshot", example, "-o", "json", "--config", str(f)]) == 0
    report = json.loads(capsys.readouterr().out)
    pools = report["flags"]["node-pools"]
    assert set(pools) == {"default-pool", "highmem-pool"}
    assert pools["default-pool"]["scale-down-utilization-threshold"] == 0.9
    assert pools["default-pool"]["min-size"] == 3 and "min-size" not in pools["highmem-pool"]
    assert pools["highmem-pool"] == {
        "scale-down-utilization-threshold": 0.5, "scale-down-unneeded-time": 600.0,
        "scale-down-unready-time": 1200.0, "target-cpu-usage": 0.45, "target-memory-usage": 0.75,
        "usage-aggregation": "p95",
    }  # fmt: skip

    def not_underutilized(r: dict[str, Any], pool: str) -> int:
        return sum(1 for n in r["nodes"] if n["nodeGroup"] == pool and n["reason"] == "NotUnderutilized")

    assert not_underutilized(report, "default-pool") < not_underutilized(base, "default-pool")
    assert not_underutilized(report, "highmem-pool") == not_underutilized(base, "highmem-pool")
