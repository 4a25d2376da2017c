"""Tests of the TargetUsage filter (seed 004) and the MostHeadroom example score plugin."""

from __future__ import annotations

from fractions import Fraction

import pytest
from builders import GI, make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.examples.most_headroom import MostHeadroom
from plugins.target_usage import TargetUsage
from scaler.config import ScalerConfig
from scaler.model.records import Pod, PodMetrics
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.state import ClusterState, FilterPlugin, NodeState, ScorePlugin
from scaler.utilization import pod_load

CFG = ScalerConfig()  # target cpu 0.45, memory 0.75
EMPTY = ClusterState(ClusterSnapshot.create(now=0.0, nodes=(), pods=()))


def node_state(
    cpu_alloc: int = 1000,
    mem_alloc: int = 4000,
    usage: tuple[int, int] | None = (0, 0),
    moved: tuple[int, int] = (0, 0),
) -> NodeState:
    """A destination NodeState with the given allocatable, usage and moved Σ."""
    return NodeState(
        node=make_node("dst", cpu_m=cpu_alloc, mem=mem_alloc),
        usage_cpu_millicores=None if usage is None else usage[0],
        usage_memory_bytes=None if usage is None else usage[1],
        moved_cpu_millicores=moved[0],
        moved_memory_bytes=moved[1],
    )


def pod(cpu: int = 0, mem: int = 0, name: str = "p") -> Pod:
    return make_pod(name, node="", cpu_m=cpu, mem=mem)


F = TargetUsage(CFG)


def check(ns: NodeState, p: Pod, plugin: TargetUsage = F) -> str | None:
    return plugin.filter(p, ns, EMPTY)


def test_is_a_filter_plugin() -> None:
    assert isinstance(F, FilterPlugin)
    assert F.name == "TargetUsage"


class TestCpuBoundary:
    def test_exactly_45_percent_passes(self) -> None:
        assert check(node_state(usage=(350, 0)), pod(cpu=100)) is None

    def test_just_over_45_percent_rejected(self) -> None:
        reason = check(node_state(usage=(351, 0)), pod(cpu=100))
        assert reason == "cpu usage above target 45%"

    def test_one_millicore_over_is_rejected(self) -> None:
        reason = check(node_state(cpu_alloc=100_000, usage=(45_001, 0)), pod(cpu=0))
        assert reason == "cpu usage above target 45%"
        assert check(node_state(cpu_alloc=100_000, usage=(45_000, 0)), pod(cpu=0)) is None

    def test_request_counts(self) -> None:
        assert check(node_state(usage=(300, 0)), pod(cpu=151)) is not None
        assert check(node_state(usage=(300, 0)), pod(cpu=150)) is None


class TestMemoryBoundary:
    def test_exactly_75_percent_rejected(self) -> None:
        reason = check(node_state(usage=(0, 2900)), pod(mem=100))
        assert reason == "memory usage at or above target 75%"

    def test_just_under_75_percent_passes(self) -> None:
        assert check(node_state(usage=(0, 2899)), pod(mem=100)) is None

    def test_exact_where_float_division_rounds(self) -> None:
        # 3·2^58 − 1 bytes of 2^60: a hair under 75 %, but float division rounds it to 0.75.
        alloc = 2**60
        used = 3 * 2**58 - 1
        assert used / alloc >= 0.75  # the float comparison seed 004 used would reject
        assert check(node_state(mem_alloc=alloc, usage=(0, used)), pod()) is None


@pytest.mark.parametrize("scale", [2**60, 2**62])
def test_values_near_and_beyond_int64_keep_exact_verdicts(scale: int) -> None:
    # Up to 2**62 filter_nodes compares exactly (rooms on Python integers, clamped); beyond it
    # declines (None) and the removal simulator runs filter() on each node. Either way the
    # verdict is filter()'s, one byte either side of the memory target.
    from scaler.simulator.removal import RemovalSimulator

    dst = make_node("dst", cpu_m=1000, mem=scale)
    src = make_node("src", cpu_m=1000, mem=16 * GI)
    p = make_pod("p", node="src", cpu_m=10, mem=GI, owner_kind="ReplicaSet", owner_name="rs")
    snap = ClusterSnapshot.create(now=0.0, nodes=[dst, src], pods=[p])
    limit = 3 * scale // 4  # 75 % of allocatable memory, exactly
    for used, fits in ((limit - GI - 1, True), (limit - GI, False)):
        state = ClusterState(snap, usage={"dst": (0, used), "src": (0, GI)})
        vector = F.filter_nodes(p, state.positions(["dst"]), state)
        if scale >= 2**62:
            assert vector is None
        else:
            assert vector is not None and (int(vector[0][0]) == 0) is fits
        assert (F.filter(p, state.nodes["dst"], state) is None) is fits
        result = RemovalSimulator(state, [F]).simulate("src", [p], [["dst"]])
        assert result.success is fits, result
        if fits:
            assert [(q.name, d) for q, d in result.moves] == [("p", "dst")]
        else:
            assert result.failure is not None and "memory usage at or above target 75%" in str(result.failure)


class TestCumulative:
    def test_second_pod_moved_onto_same_node_rejected(self) -> None:
        dst = make_node("dst", cpu_m=1000, mem=16 * GI)
        src = make_node("src", cpu_m=1000, mem=16 * GI)
        p1 = make_pod("p1", node="src", cpu_m=150, mem=GI)
        p2 = make_pod("p2", node="src", cpu_m=150, mem=GI)
        snap = ClusterSnapshot.create(now=0.0, nodes=[dst, src], pods=[p1, p2])
        state = ClusterState(snap, usage={"dst": (200, 4 * GI), "src": (100, GI)})
        state.unschedule_all([p1, p2], "src")
        state.set_flags("src", ghost=True)
        assert F.filter(p1, state.nodes["dst"], state) is None  # 200 + 150 = 35 %
        state.place(p1, "dst")
        reason = F.filter(p2, state.nodes["dst"], state)  # 200 + 150 + 150 = 50 %
        assert reason == "cpu usage above target 45%"

    def test_moved_memory_counts(self) -> None:
        assert check(node_state(usage=(0, 2000), moved=(0, 900)), pod(mem=100)) is not None
        assert check(node_state(usage=(0, 2000), moved=(0, 899)), pod(mem=100)) is None


class TestRejections:
    def test_unknown_usage(self) -> None:
        assert check(node_state(usage=None), pod()) == "unknown usage (no fresh node metrics)"

    def test_node_absent_from_usage_has_unknown_usage(self) -> None:
        snap = ClusterSnapshot.create(now=0.0, nodes=[make_node("n1")], pods=[])
        state = ClusterState(snap, usage={})
        reason = F.filter(pod(), state.nodes["n1"], state)
        assert reason is not None and "unknown usage" in reason

    @pytest.mark.parametrize(("cpu", "mem"), [(0, 4000), (1000, 0)])
    def test_zero_allocatable(self, cpu: int, mem: int) -> None:
        reason = check(node_state(cpu_alloc=cpu, mem_alloc=mem), pod())
        assert reason is not None and "allocatable" in reason


def test_thresholds_from_config() -> None:
    strict = TargetUsage(ScalerConfig(target_cpu_usage=0.3, target_memory_usage=0.5))
    assert check(node_state(usage=(300, 0)), pod(), strict) is None
    assert check(node_state(usage=(301, 0)), pod(), strict) == "cpu usage above target 30%"
    assert check(node_state(usage=(0, 2000)), pod(), strict) == "memory usage at or above target 50%"


thresholds = st.integers(min_value=1, max_value=100).map(lambda n: n / 100) | st.floats(
    min_value=0.001, max_value=1.0, allow_nan=False
)


@settings(max_examples=300, deadline=None)
@given(
    t_cpu=thresholds,
    t_mem=thresholds,
    cpu_alloc=st.integers(0, 64_000),
    mem_alloc=st.integers(0, 2**40),
    usage=st.none() | st.tuples(st.integers(0, 64_000), st.integers(0, 2**40)),
    moved=st.tuples(st.integers(0, 64_000), st.integers(0, 2**40)),
    req=st.tuples(st.integers(0, 64_000), st.integers(0, 2**40)),
    used=st.none() | st.tuples(st.integers(0, 64_000), st.integers(0, 2**40)),
)
def test_accepts_iff_exact_rational_inequality(
    t_cpu: float,
    t_mem: float,
    cpu_alloc: int,
    mem_alloc: int,
    usage: tuple[int, int] | None,
    moved: tuple[int, int],
    req: tuple[int, int],
    used: tuple[int, int] | None,
) -> None:
    """The pod counts ``max(request, real usage)`` per resource (its request without PodMetrics)."""
    plugin = TargetUsage(ScalerConfig(target_cpu_usage=t_cpu, target_memory_usage=t_mem))
    ns = node_state(cpu_alloc, mem_alloc, usage, moved)
    p = pod(*req)
    pms = [] if used is None else [PodMetrics("default", "p", 0.0, 30.0, *used)]
    snap = ClusterSnapshot.create(now=0.0, nodes=(), pods=(), pod_metrics=pms)
    state = ClusterState(snap, pod_load=lambda q: (lambda c, m: (c or 0, m or 0))(*pod_load(q, snap, CFG)))
    accepted = plugin.filter(p, ns, state) is None
    if usage is None or cpu_alloc == 0 or mem_alloc == 0:
        assert not accepted
        return
    load = req if used is None else (max(req[0], used[0]), max(req[1], used[1]))
    cpu = Fraction(usage[0] + moved[0] + load[0], cpu_alloc)
    mem = Fraction(usage[1] + moved[1] + load[1], mem_alloc)
    expected = cpu <= Fraction(str(t_cpu)) and mem < Fraction(str(t_mem))
    assert accepted == expected


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_moved_columns_are_the_sum_of_the_loads_placed_through_every_revert(data: st.DataObject) -> None:
    """Invariant of the simulation state: after any sequence of moves, checkpoints and reverts,
    each node's moved term (NodeState and table alike) is Σ load of the pods placed on it since
    the state was built, and ``filter_nodes`` agrees with ``filter`` node by node."""
    nodes = [make_node(f"n{i}", cpu_m=4000, mem=16 * GI) for i in range(3)]
    loads = {f"p{i}": (data.draw(st.integers(0, 3000)), data.draw(st.integers(0, 8 * GI))) for i in range(8)}
    pods = [make_pod(name, node="", cpu_m=data.draw(st.integers(0, 500)), mem=GI) for name in loads]
    state = ClusterState(
        ClusterSnapshot.create(now=0.0, nodes=nodes, pods=()),
        usage={n.name: (data.draw(st.integers(0, 2000)), 4 * GI) for n in nodes},
        pod_load=lambda p: loads[p.name],
    )
    expected: list[dict[str, list[int]]] = [{n.name: [0, 0] for n in nodes}]
    marks: list[int] = []
    for p in pods:
        action = data.draw(st.sampled_from(["place", "place", "checkpoint", "revert"]))
        if action == "checkpoint":
            marks.append(state.checkpoint())
            expected.append({k: v[:] for k, v in expected[-1].items()})
        elif action == "revert" and marks:
            state.revert(marks.pop())
            expected.pop()
        else:
            dest = data.draw(st.sampled_from([n.name for n in nodes]))
            state.place(p, dest)
            expected[-1][dest][0] += loads[p.name][0]
            expected[-1][dest][1] += loads[p.name][1]
    for n in nodes:
        ns = state.nodes[n.name]
        assert [ns.moved_cpu_millicores, ns.moved_memory_bytes] == expected[-1][n.name]
        assert [int(state.table.moved_cpu[ns.position]), int(state.table.moved_mem[ns.position])] == expected[
            -1
        ][n.name]
    probe = pods[0]
    res = F.filter_nodes(probe, state.positions([n.name for n in nodes]), state)
    assert res is not None
    codes, reasons = res
    for code, n in zip(codes.tolist(), nodes, strict=True):
        assert (None if code == 0 else reasons[code - 1]) == F.filter(probe, state.nodes[n.name], state)


# ---- MostHeadroom --------------------------------------------------------------------------


class TestMostHeadroom:
    s = MostHeadroom(CFG)

    def test_protocol(self) -> None:
        assert isinstance(self.s, ScorePlugin)
        assert self.s.name == "MostHeadroom"

    def test_score_is_one_minus_max_projected_fraction(self) -> None:
        ns = node_state(cpu_alloc=1000, mem_alloc=4000, usage=(200, 1000), moved=(100, 0))
        assert self.s.score(pod(cpu=100, mem=1000), ns, EMPTY) == pytest.approx(1 - 0.5)  # mem 50 %
        assert self.s.score(pod(cpu=500, mem=0), ns, EMPTY) == pytest.approx(1 - 0.8)  # cpu 80 %

    def test_prefers_emptier_node(self) -> None:
        busy = node_state(usage=(400, 1000))
        idle = node_state(usage=(100, 1000))
        p = pod(cpu=50)
        assert self.s.score(p, idle, EMPTY) > self.s.score(p, busy, EMPTY)

    def test_unknown_usage_scores_zero(self) -> None:
        assert self.s.score(pod(), node_state(usage=None), EMPTY) == 0.0
        assert self.s.score(pod(), node_state(cpu_alloc=0), EMPTY) == 0.0
