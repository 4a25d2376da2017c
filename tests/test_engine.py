"""End-to-end tests of one evaluation on small hand-built clusters."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from fractions import Fraction

import pytest
from builders import GI, MI, make_node, make_pdb, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.actuation.recheck import recheck
from scaler.config import ScalerConfig
from scaler.engine import Evaluation, NodeResult, evaluate
from scaler.model.records import (
    ANNOTATION_SCALE_DOWN_DISABLED,
    TAINT_TO_BE_DELETED,
    Node,
    NodeMetrics,
    Pod,
    PodDisruptionBudget,
    PodMetrics,
    QoSClass,
    Taint,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.planner import Aggregation, UsageSample, with_aggregated_usage
from scaler.reasons import NodeStatus, UnremovableReason
from scaler.simulator.state import FilterPlugin

NOW = 1_800_000_000.0


def metrics(name: str, cpu_m: int, mem: int, age: float = 30.0) -> NodeMetrics:
    return NodeMetrics(name, NOW - age, 30.0, cpu_m, mem)


def snap(
    nodes: Sequence[Node],
    pods: Iterable[Pod],
    usage: dict[str, tuple[int, int]] | None = None,
    pdbs: Sequence[PodDisruptionBudget] = (),
    pod_metrics: Sequence[PodMetrics] = (),
) -> ClusterSnapshot:
    usage = usage if usage is not None else {n.name: (400, 2 * GI) for n in nodes}
    return ClusterSnapshot.create(
        now=NOW,
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        node_metrics=[metrics(n, c, m) for n, (c, m) in usage.items()],
        pod_metrics=pod_metrics,
    )


def by_name(ev: Evaluation) -> dict[str, NodeResult]:
    return {r.node.name: r for r in ev.nodes}


def ds_pod(name: str, node: str, cpu_m: int = 100) -> Pod:
    return make_pod(name, "kube-system", node, cpu_m, owner_kind="DaemonSet", owner_name="ds")


CFG = ScalerConfig()


def test_daemonset_only_node_is_empty_with_zero_utilization_whatever_the_metrics() -> None:
    nodes = [make_node("a"), make_node("b")]
    s = snap(nodes, [ds_pod("ds-a", "a"), ds_pod("ds-b", "b"), make_pod("w", node="b")],
             usage={"a": (3900, 15 * GI), "b": (400, 2 * GI)})  # fmt: skip
    r = by_name(evaluate(s, CFG))
    assert r["a"].utilization.empty and r["a"].utilization.value == 0.0
    assert r["a"].status is NodeStatus.REMOVABLE_EMPTY
    assert r["a"].daemonset_pods[0].name == "ds-a"


def test_empty_node_without_metrics_is_still_removable() -> None:
    nodes = [make_node("a"), make_node("b")]
    s = snap(nodes, [ds_pod("ds-a", "a"), make_pod("w", node="b")], usage={"b": (400, 2 * GI)})
    r = by_name(evaluate(s, CFG))
    assert r["a"].status is NodeStatus.REMOVABLE_EMPTY


@pytest.mark.parametrize("usage", [None, "stale"])
def test_non_empty_node_without_fresh_metrics_is_never_idle(usage: str | None) -> None:
    nodes = [make_node("a"), make_node("b")]
    pods = [make_pod("w", node="a"), make_pod("v", node="b")]
    s = snap(nodes, pods, usage={"b": (400, 2 * GI)})
    if usage == "stale":
        s = ClusterSnapshot.create(
            NOW, nodes, pods, node_metrics=[metrics("a", 10, GI, age=121), metrics("b", 400, 2 * GI)]
        )
    r = by_name(evaluate(s, CFG))
    assert r["a"].reason is UnremovableReason.MetricsUnavailable
    assert r["a"].utilization.value is None


def test_threshold_is_inclusive_and_above_is_not_underutilized() -> None:
    nodes = [
        make_node("a", cpu_m=1000),
        make_node("b", cpu_m=1000),
        make_node("c", cpu_m=10_000, mem=64 * GI),
    ]
    pods = [make_pod("x", node="a"), make_pod("y", node="b"), make_pod("z", node="c")]
    s = snap(nodes, pods, usage={"a": (500, 1 * GI), "b": (501, 1 * GI), "c": (100, 1 * GI)})
    r = by_name(evaluate(s, CFG.model_copy(update={"target_cpu_usage": 0.45})))
    assert r["a"].reason is not UnremovableReason.NotUnderutilized
    assert r["b"].reason is UnremovableReason.NotUnderutilized


def test_candidates_empty_first_then_ascending_utilization() -> None:
    big = {"cpu_m": 16_000, "mem": 64 * GI}
    nodes = [make_node("d1", **big), make_node("c-low"), make_node("c-high"), make_node("e")]
    pods = [
        make_pod("p1", node="c-low"),
        make_pod("p2", node="c-high"),
        ds_pod("ds", "e"),
        make_pod("p3", node="d1"),
    ]
    usage = {"d1": (1000, 40 * GI), "c-low": (100, GI), "c-high": (1000, GI), "e": (3000, 8 * GI)}
    ev = evaluate(snap(nodes, pods, usage), CFG)
    assert [r.node.name for r in ev.removable()] == ["e", "c-low", "c-high"]
    assert all(dest == "d1" for r in ev.removable() for _, dest in r.moves)


def test_target_usage_is_cumulative_across_candidates() -> None:
    # Destination d: 8 cores, usage 3000m. Each candidate moves a 400m pod: 3400, then 3800 > 3600.
    nodes = [make_node("d", cpu_m=8000, mem=64 * GI), make_node("a"), make_node("b")]
    pods = [
        make_pod("pa", node="a", cpu_m=400),
        make_pod("pb", node="b", cpu_m=400),
        make_pod("pd", node="d"),
    ]
    usage = {"d": (3000, GI), "a": (500, GI), "b": (600, GI)}
    r = by_name(
        evaluate(snap(nodes, pods, usage), CFG.model_copy(update={"scale_down_utilization_threshold": 0.3}))
    )
    # d's 37.5% cpu usage is above 0.3: it is a destination, not a candidate.
    assert r["d"].reason is UnremovableReason.NotUnderutilized
    assert r["a"].status is NodeStatus.REMOVABLE_DRAIN and r["a"].moves[0][1] == "d"
    assert r["b"].reason is UnremovableReason.NoPlaceToMovePods
    assert "TargetUsage" in r["b"].detail


def test_failed_simulation_leaves_no_trace() -> None:
    # b fails first (needs 3 cores), then a still sees d with its full room.
    nodes = [make_node("d", cpu_m=8000, mem=64 * GI), make_node("a"), make_node("b")]
    pods = [
        make_pod("pb1", node="b", cpu_m=600),
        make_pod("pb2", node="b", cpu_m=3000),
        make_pod("pa", node="a", cpu_m=500),
        make_pod("pd", node="d"),
    ]
    usage = {"d": (2000, GI), "a": (600, GI), "b": (100, GI)}
    r = by_name(
        evaluate(snap(nodes, pods, usage), CFG.model_copy(update={"scale_down_utilization_threshold": 0.2}))
    )
    assert r["b"].reason is UnremovableReason.NoPlaceToMovePods
    assert r["a"].status is NodeStatus.REMOVABLE_DRAIN


def test_receiving_node_is_not_removed_later() -> None:
    # Only candidates: a (lower) moves onto b; b is then DestinationForMovedPods.
    nodes = [make_node("a"), make_node("b")]
    pods = [make_pod("pa", node="a"), make_pod("pb", node="b")]
    r = by_name(evaluate(snap(nodes, pods, {"a": (100, GI), "b": (200, GI)}), CFG))
    assert r["a"].status is NodeStatus.REMOVABLE_DRAIN and r["a"].moves[0][1] == "b"
    assert r["b"].reason is UnremovableReason.DestinationForMovedPods


def test_node_group_min_size_counts_planned_removals() -> None:
    nodes = [make_node(n) for n in ("a", "b", "c")] + [
        make_node("big", cpu_m=32_000, mem=128 * GI, pool="other")
    ]
    pods = [ds_pod(f"ds-{n}", n) for n in ("a", "b", "c")] + [make_pod("x", node="big")]
    usage = {"big": (20_000, GI), **{n: (100, GI) for n in "abc"}}
    cfg = ScalerConfig.from_mapping({"nodes": ["2:10:pool-a"]})
    r = by_name(evaluate(snap(nodes, pods, usage), cfg))
    assert [n for n in "abc" if r[n].removable] == ["a"]
    assert r["b"].reason is UnremovableReason.NodeGroupMinSizeReached
    assert r["c"].reason is UnremovableReason.NodeGroupMinSizeReached


def test_pdb_budget_is_consumed_across_nodes() -> None:
    nodes = [make_node("d", cpu_m=16_000, mem=64 * GI), make_node("a"), make_node("b")]
    pods = [
        make_pod("w1", node="a", labels={"app": "web"}),
        make_pod("w2", node="b", labels={"app": "web"}),
        make_pod("x", node="d"),
    ]
    usage = {"d": (1000, 40 * GI), "a": (100, GI), "b": (200, GI)}
    r = by_name(evaluate(snap(nodes, pods, usage, pdbs=[make_pdb("web", disruptions_allowed=1)]), CFG))
    assert r["a"].removable
    assert r["b"].reason is UnremovableReason.BlockedByPod
    assert r["b"].blocking_pod is not None and r["b"].blocking_pod.reason.value == "NotEnoughPdb"


def test_eligibility_reasons() -> None:
    nodes = [
        make_node("off", annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"}),
        make_node("nopool", pool=""),
        make_node("deleting", taints=(Taint(TAINT_TO_BE_DELETED, str(int(NOW - 60)), "NoSchedule"),),
                  to_be_deleted_ts=NOW - 60),
        make_node("dest", cpu_m=16_000, mem=64 * GI),
    ]  # fmt: skip
    pods = [make_pod(f"p-{n.name}", node=n.name) for n in nodes]
    usage = {n.name: (100, GI) for n in nodes} | {"dest": (9000, GI)}
    r = by_name(evaluate(snap(nodes, pods, usage), CFG))
    assert r["off"].reason is UnremovableReason.ScaleDownDisabledAnnotation
    assert r["nopool"].reason is UnremovableReason.NotAutoscaled
    assert r["deleting"].reason is UnremovableReason.CurrentlyBeingDeleted


def test_requests_source_matches_cluster_autoscaler() -> None:
    nodes = [make_node("a", cpu_m=1000, mem=4 * GI), make_node("b")]
    pods = [make_pod("x", node="a", cpu_m=700, mem=GI), make_pod("y", node="b")]
    cfg = CFG.model_copy(update={"utilization_source": "requests"})
    r = by_name(evaluate(snap(nodes, pods, {"a": (10, 10), "b": (10, 10)}), cfg))
    assert r["a"].utilization.source == "requests"
    assert r["a"].utilization.value == pytest.approx(0.7)
    assert r["a"].utilization.resource == "cpu"
    assert r["a"].reason is UnremovableReason.NotUnderutilized


def test_ignore_daemonsets_utilization_removes_their_usage() -> None:
    nodes = [make_node("a", cpu_m=1000, mem=10 * GI)]
    pods = [ds_pod("ds", "a"), make_pod("w", node="a")]
    pm = [PodMetrics("kube-system", "ds", NOW, 30, 400, GI)]
    s = snap(nodes, pods, {"a": (600, 2 * GI)}, pod_metrics=pm)
    plain = by_name(evaluate(s, CFG))["a"].utilization
    ignored = by_name(evaluate(s, CFG.model_copy(update={"ignore_daemonsets_utilization": True})))[
        "a"
    ].utilization
    assert plain.cpu == pytest.approx(0.6)
    assert ignored.cpu == pytest.approx(200 / 600)
    assert ignored.memory == pytest.approx(1 / 9)


def test_expendable_pods_neither_block_nor_move() -> None:
    nodes = [make_node("a"), make_node("b")]
    pods = [make_pod("cheap", node="a", owner_kind=None, priority=-100), make_pod("w", node="b")]
    r = by_name(evaluate(snap(nodes, pods), CFG))
    assert r["a"].status is NodeStatus.REMOVABLE_EMPTY


def test_evaluation_is_deterministic_whatever_the_input_order() -> None:
    nodes = [make_node(f"n{i}", zone=f"z{i % 3}") for i in range(12)]
    pods = [make_pod(f"p{i}", node=f"n{i % 12}", cpu_m=100 + 10 * i) for i in range(40)]
    usage = {f"n{i}": (200 + 150 * i, GI) for i in range(12)}

    def run(seed: int) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
        rng = random.Random(seed)
        ns, ps = nodes[:], pods[:]
        rng.shuffle(ns)
        rng.shuffle(ps)
        ev = evaluate(snap(ns, ps, usage), CFG)
        return [(r.node.name, r.reason.value, tuple((p.key, d) for p, d in r.moves)) for r in ev.nodes]

    assert run(1) == run(2) == run(3)


def test_placements_do_not_depend_on_the_order_of_the_filters() -> None:
    """The simulator runs its vectorized filters most-refusing first (it reorders them as it
    goes); that is only sound because a node must pass all of them. Reversing the configured
    order, on a generated cluster with every constraint kind, changes no verdict and no move."""
    from benchmarks.generate import generate
    from scaler.simulator.registry import load_filters

    snapshot = generate(300).snapshot()
    filters = load_filters(CFG)

    def outcome(fs: list[FilterPlugin]) -> list[tuple[str, bool, tuple[tuple[str, str], ...]]]:
        ev = evaluate(snapshot, CFG, filters=fs, scorers=[])
        return [(r.node.name, r.removable, tuple((p.key, d) for p, d in r.moves)) for r in ev.nodes]

    forward = outcome(filters)
    assert any(moves for _, _, moves in forward), "the cluster exercises placements"
    assert outcome(list(reversed(filters))) == forward


def test_nodes_flag_accepts_a_mig_url_resolved_through_node_names() -> None:
    prefix = "gke-prod-pool-a-3e629681"
    nodes = [make_node(f"{prefix}-{s}") for s in ("aaaa", "bbbb")]
    nodes.append(make_node("big", cpu_m=32_000, mem=128 * GI, pool="other"))
    pods = [ds_pod(f"ds-{n.name}", n.name) for n in nodes[:2]] + [make_pod("x", node="big")]
    usage = {n.name: (100, GI) for n in nodes[:2]} | {"big": (20_000, GI)}
    url = f"https://www.googleapis.com/compute/v1/projects/p/zones/z/instanceGroups/{prefix}-grp"
    r = by_name(evaluate(snap(nodes, pods, usage), ScalerConfig.from_mapping({"nodes": [f"2:5:{url}"]})))
    assert {r[n.name].reason for n in nodes[:2]} == {UnremovableReason.NodeGroupMinSizeReached}
    # A MIG whose base name matches no node limits nothing; a pool-name entry still works.
    other = ScalerConfig.from_mapping({"nodes": ["2:5:gke-prod-pool-x-00000000-grp"]})
    r2 = by_name(evaluate(snap(nodes, pods, usage), other))
    assert all(r2[n.name].removable for n in nodes[:2])


def test_ignore_mirror_pods_utilization_removes_their_usage() -> None:
    nodes = [make_node("a", cpu_m=1000, mem=10 * GI)]
    mirror = make_pod("kube-proxy-a", "kube-system", "a", owner_kind="Node", owner_name="a",
                      annotations={"kubernetes.io/config.mirror": "x"})  # fmt: skip
    pods = [mirror, make_pod("w", node="a")]
    pm = [PodMetrics("kube-system", "kube-proxy-a", NOW, 30, 100, GI)]
    s = snap(nodes, pods, {"a": (600, 2 * GI)}, pod_metrics=pm)
    plain = by_name(evaluate(s, CFG))["a"].utilization
    cfg = CFG.model_copy(update={"ignore_mirror_pods_utilization": True})
    ignored = by_name(evaluate(s, cfg))["a"].utilization
    assert plain.cpu == pytest.approx(0.6)
    assert ignored.cpu == pytest.approx(500 / 900)
    # DaemonSet-ignoring leaves mirror pods counted.
    ds_only = by_name(evaluate(s, CFG.model_copy(update={"ignore_daemonsets_utilization": True})))[
        "a"
    ].utilization
    assert ds_only.cpu == pytest.approx(0.6)


# ---- what a moved pod adds, pods not yet in the metrics, destinations' worst usage -------------


def best_effort(name: str, node: str) -> Pod:
    return make_pod(name, node=node, cpu_m=0, mem=0, qos_class=QoSClass.BEST_EFFORT)


def pod_metrics(name: str, cpu_m: int, mem: int, namespace: str = "default") -> PodMetrics:
    return PodMetrics(namespace, name, NOW - 30, 30.0, cpu_m, mem)


def test_moved_pods_add_their_real_usage_not_their_request() -> None:
    # Ten BestEffort pods using 180m each; the only destination runs at 42.5% of 4 cores (and
    # 60% memory, so it is no candidate itself). Counting requests (0) the pods all fit and the
    # destination ends at 87.5%; counting usage, the first one already passes 45%.
    nodes = [make_node("dst", cpu_m=4000, mem=16 * GI), make_node("src", cpu_m=4000, mem=16 * GI)]
    pods = [best_effort(f"be-{i}", "src") for i in range(10)] + [make_pod("resident", node="dst")]
    usage = {"dst": (1700, int(9.6 * GI)), "src": (1800, 2 * GI)}
    pm = [pod_metrics(f"be-{i}", 180, 64 * MI) for i in range(10)]
    r = by_name(evaluate(snap(nodes, pods, usage, pod_metrics=pm), CFG))
    assert r["dst"].reason is UnremovableReason.NotUnderutilized
    assert r["src"].reason is UnremovableReason.NoPlaceToMovePods
    assert "cpu usage above target 45%" in r["src"].detail


def test_a_moved_pod_without_pod_metrics_adds_its_request() -> None:
    # 3000m + 500m = 43.75% fits; with PodMetrics of 700m it would not (46.25%).
    nodes = [make_node("dst", cpu_m=8000, mem=64 * GI), make_node("src")]
    pods = [make_pod("w", node="src", cpu_m=500), make_pod("resident", node="dst")]
    usage = {"dst": (3000, 40 * GI), "src": (600, GI)}
    r = by_name(evaluate(snap(nodes, pods, usage), CFG))
    assert r["src"].status is NodeStatus.REMOVABLE_DRAIN
    r = by_name(evaluate(snap(nodes, pods, usage, pod_metrics=[pod_metrics("w", 700, GI)]), CFG))
    assert r["src"].reason is UnremovableReason.NoPlaceToMovePods


@pytest.mark.parametrize(("cpu_m", "mem", "missing"), [(0, 0, "cpu"), (100, 0, "memory")])
def test_a_pod_of_unknown_usage_keeps_its_node(cpu_m: int, mem: int, missing: str) -> None:
    nodes = [make_node("dst", cpu_m=16_000, mem=64 * GI), make_node("src")]
    pods = [make_pod("mystery", node="src", cpu_m=cpu_m, mem=mem), make_pod("resident", node="dst")]
    usage = {"dst": (1000, 40 * GI), "src": (300, GI)}
    r = by_name(evaluate(snap(nodes, pods, usage), CFG))
    assert r["src"].reason is UnremovableReason.MetricsUnavailable
    assert r["src"].detail == (
        f"pod default/mystery has neither a {missing} request nor PodMetrics: its usage is unknown"
    )


def test_pods_not_yet_in_the_node_metrics_count_on_their_node() -> None:
    # dst's newest NodeMetrics (timestamp NOW - 30, window 30 s) began at NOW - 60; a 1000m pod
    # started on dst 20 s ago is not in it: dst really runs at 3000 + 1000 of 8000m.
    nodes = [make_node("dst", cpu_m=8000, mem=64 * GI), make_node("src")]
    fresh = make_pod("new", node="dst", cpu_m=1000, mem=GI, start_ts=NOW - 20, creation_ts=NOW - 25)
    old = make_pod("old", node="dst", cpu_m=1000, mem=GI, start_ts=NOW - 3600, creation_ts=NOW - 3600)
    pods = [make_pod("w", node="src", cpu_m=200), old]
    usage = {"dst": (3000, 40 * GI), "src": (300, GI)}
    r = by_name(evaluate(snap(nodes, pods, usage), CFG))
    assert r["src"].status is NodeStatus.REMOVABLE_DRAIN  # 3000 + 200 = 40%
    r = by_name(evaluate(snap(nodes, [*pods, fresh], usage), CFG))
    assert r["dst"].utilization.pods_not_in_metrics == 1
    assert r["dst"].utilization.usage_cpu_millicores == 4000
    assert r["src"].reason is UnremovableReason.NoPlaceToMovePods  # 4000 + 200 = 52.5%
    # The pod's own PodMetrics count when above its request; creation time stands in for a
    # missing start time.
    busy = make_pod("new", node="dst", cpu_m=100, mem=GI, creation_ts=NOW - 10)
    r = by_name(evaluate(snap(nodes, [*pods, busy], usage, pod_metrics=[pod_metrics("new", 900, GI)]), CFG))
    assert r["dst"].utilization.usage_cpu_millicores == 3900


def test_a_pod_not_in_the_metrics_of_unknown_usage_makes_its_node_usage_unknown() -> None:
    nodes = [make_node("a"), make_node("b")]
    pods = [make_pod("new", node="a", cpu_m=0, mem=0, start_ts=NOW - 5), make_pod("w", node="b")]
    r = by_name(evaluate(snap(nodes, pods), CFG))
    assert r["a"].reason is UnremovableReason.MetricsUnavailable
    assert "default/new started after the newest NodeMetrics window began" in r["a"].detail
    assert r["a"].utilization.destination_cpu_millicores is None


def test_a_destination_is_judged_by_its_newest_reading_when_it_is_higher() -> None:
    # The aggregate (p95 over 40 samples) of dst is 2000m, its newest reading 3500m of 8000m.
    nodes = [make_node("dst", cpu_m=8000, mem=64 * GI), make_node("src")]
    pods = [make_pod("w", node="src", cpu_m=400), make_pod("resident", node="dst")]
    s = snap(nodes, pods, {"dst": (3500, 40 * GI), "src": (500, GI)})
    older = [UsageSample(NOW - 30 - 15 * i, 2000, 40 * GI) for i in range(39, 0, -1)]
    history = {
        "dst": (*older, UsageSample(NOW - 30, 3500, 40 * GI)),
        "src": (UsageSample(NOW - 30, 500, GI),),
    }
    aggregated = with_aggregated_usage(s, history, Aggregation.P95)
    assert aggregated.node_metrics["dst"].cpu_millicores == 2000
    r = by_name(evaluate(aggregated, CFG))
    assert r["dst"].utilization.usage_cpu_millicores == 2000  # the candidate view: smoothed
    assert r["dst"].utilization.destination_cpu_millicores == 3500
    assert r["src"].reason is UnremovableReason.NoPlaceToMovePods  # 3500 + 400 > 3600


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_no_destination_ends_above_the_targets(data: st.DataObject) -> None:
    """Invariant: whatever the cluster, every node that receives moved pods ends with its usage
    plus Σ max(request, real usage) of those pods within TargetUsage's targets."""
    n = data.draw(st.integers(2, 6), label="nodes")
    nodes = [
        make_node(f"n{i}", cpu_m=data.draw(st.sampled_from([1000, 2000, 4000])), mem=8 * GI) for i in range(n)
    ]
    usage = {f"n{i}": (data.draw(st.integers(0, 1500)), data.draw(st.integers(0, 6 * GI))) for i in range(n)}
    pods: list[Pod] = []
    pms: list[PodMetrics] = []
    for i in range(data.draw(st.integers(0, 12), label="pods")):
        name = f"p{i}"
        cpu, mem = data.draw(st.integers(1, 600)), data.draw(st.integers(1, GI))
        pods.append(make_pod(name, node=f"n{data.draw(st.integers(0, n - 1))}", cpu_m=cpu, mem=mem))
        if data.draw(st.booleans()):
            pms.append(pod_metrics(name, data.draw(st.integers(0, 900)), data.draw(st.integers(0, 2 * GI))))
    s = snap(nodes, pods, usage, pod_metrics=pms)
    ev = evaluate(s, CFG)
    used = {m.name: (m.cpu_millicores, m.memory_bytes) for m in pms}
    added: dict[str, list[int]] = {}
    for r in ev.nodes:
        for p, dest in r.moves:
            u = used.get(p.name, (0, 0))
            a = added.setdefault(dest, [0, 0])
            a[0] += max(p.requests.cpu_millicores, u[0])
            a[1] += max(p.requests.memory_bytes, u[1])
    for dest, (cpu, mem) in added.items():
        node = s.node_by_name[dest]
        assert not by_name(ev)[dest].removable
        assert Fraction(usage[dest][0] + cpu, node.allocatable.cpu_millicores) <= Fraction(9, 20)
        assert Fraction(usage[dest][1] + mem, node.allocatable.memory_bytes) < Fraction(3, 4)


# ---- one decision path -----------------------------------------------------------------------


def test_the_recheck_words_a_refusal_as_the_evaluation_does() -> None:
    nodes = [make_node("dst", cpu_m=8000, mem=64 * GI), make_node("a"), make_node("b")]
    pods = [
        make_pod(
            "guarded", node="a", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
        ),
        make_pod("huge", node="b", cpu_m=3500),
        make_pod("resident", node="dst"),
    ]
    s = snap(nodes, pods, {"dst": (1000, 40 * GI), "a": (100, GI), "b": (100, GI)})
    r = by_name(evaluate(s, CFG))
    for name in ("a", "b"):
        assert r[name].reason in (UnremovableReason.BlockedByPod, UnremovableReason.NoPlaceToMovePods)
        again = recheck(s, CFG, name, expect_empty=False)
        assert again.reason == f"{r[name].reason.value}: {r[name].detail}"


def test_the_recheck_refuses_a_node_whose_metrics_are_far_below_its_pods() -> None:
    """A node tainted while its pods were not yet in the metrics (judged by their requests) whose
    pods' PodMetrics then say 3 cores while its NodeMetrics say 1m: the recheck, on the fresh
    state, refuses it as the evaluation does (``MetricsUnavailable``), though its pods fit
    elsewhere: a node whose metrics are not trusted is never drained."""
    nodes = [make_node("n1"), make_node("n2"), make_node("n3")]
    pods = [make_pod(f"hot-{i}", node="n1") for i in range(2)]
    pod_metrics = [PodMetrics("default", f"hot-{i}", NOW - 30, 30.0, 1500, 256 * MI) for i in range(2)]
    s = snap(nodes, pods, {"n1": (1, GI), "n2": (100, GI), "n3": (100, GI)}, pod_metrics=pod_metrics)
    r = by_name(evaluate(s, CFG))["n1"]
    assert r.reason is UnremovableReason.MetricsUnavailable, r
    again = recheck(s, CFG, "n1", expect_empty=False)
    assert again.reason == f"MetricsUnavailable: {r.detail}"
    # The same pods with PodMetrics matching the node's: the recheck lets the node go.
    s = snap(nodes, pods, {"n1": (3100, GI), "n2": (100, GI), "n3": (100, GI)}, pod_metrics=pod_metrics)
    assert recheck(s, CFG, "n1", expect_empty=False).ok


# ---- node-group minimums are per zone ----------------------------------------------------------


def test_a_pool_minimum_holds_in_each_zone() -> None:
    """A 3-zone pool with min 1 per zone whose two underused nodes are both in one zone keeps
    one of them (a pool-wide minimum of 3 of 4 nodes would let both go)."""
    nodes = [
        make_node("u1", zone="z1"),
        make_node("u2", zone="z1"),
        make_node("b2", zone="z2"),
        make_node("b3", zone="z3"),
    ]
    nodes.append(make_node("big", cpu_m=32_000, mem=128 * GI, pool="other"))
    pods = [ds_pod(f"ds-{n.name}", n.name) for n in nodes[:4]] + [make_pod("x", node="big")]
    pods += [make_pod(f"busy-{n}", node=n, cpu_m=3000) for n in ("b2", "b3")]
    usage = {"u1": (100, GI), "u2": (100, GI), "b2": (3500, GI), "b3": (3500, GI), "big": (20_000, 100 * GI)}
    r = by_name(evaluate(snap(nodes, pods, usage), ScalerConfig.from_mapping({"nodes": ["1:5:pool-a"]})))
    assert [n for n in ("u1", "u2") if r[n].removable] == ["u1"]
    assert r["u2"].reason is UnremovableReason.NodeGroupMinSizeReached
    assert r["u2"].detail == "node group pool-a zone z1: 2 nodes, 1 already removable, min 1 per zone"


def test_nodes_entries_naming_migs_limit_each_mig() -> None:
    """Three DaemonSet-only nodes, one per MIG of one pool, each MIG at its --nodes minimum: all
    stay (only the first entry used to count, as the pool's minimum)."""
    migs = [f"gke-prod-pool-a-{h}" for h in ("11111111", "22222222", "33333333")]
    nodes = [make_node(f"{m}-abcd", zone=z) for m, z in zip(migs, ("z1", "z2", "z3"), strict=True)]
    nodes.append(make_node("big", cpu_m=32_000, mem=128 * GI, pool="other"))
    pods = [ds_pod(f"ds-{n.name}", n.name) for n in nodes[:3]] + [make_pod("x", node="big")]
    usage = {n.name: (100, GI) for n in nodes[:3]} | {"big": (20_000, GI)}
    cfg = ScalerConfig.from_mapping({"nodes": [f"1:3:{m}-grp" for m in migs]})
    r = by_name(evaluate(snap(nodes, pods, usage), cfg))
    assert {r[n.name].reason for n in nodes[:3]} == {UnremovableReason.NodeGroupMinSizeReached}
    # A MIG's entry wins over the pool's in its zone.
    cfg = ScalerConfig.from_mapping({"nodes": ["1:3:pool-a", f"0:3:{migs[0]}-grp"]})
    r = by_name(evaluate(snap(nodes, pods, usage), cfg))
    assert [n.name for n in nodes[:3] if r[n.name].removable] == [nodes[0].name]
