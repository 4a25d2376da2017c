"""End-to-end tests of one evaluation on small hand-built clusters."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

import pytest
from builders import GI, make_node, make_pdb, make_pod

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
    Taint,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import NodeStatus, UnremovableReason

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
        s = ClusterSnapshot.create(NOW, nodes, pods, node_metrics=[metrics("a", 10, GI, age=121), metrics("b", 400, 2 * GI)])
    r = by_name(evaluate(s, CFG))
    assert r["a"].reason is UnremovableReason.MetricsUnavailable
    assert r["a"].utilization.value is None


def test_threshold_is_inclusive_and_above_is_not_underutilized() -> None:
    nodes = [make_node("a", cpu_m=1000), make_node("b", cpu_m=1000), make_node("c", cpu_m=10_000, mem=64 * GI)]
    pods = [make_pod("x", node="a"), make_pod("y", node="b"), make_pod("z", node="c")]
    s = snap(nodes, pods, usage={"a": (500, 1 * GI), "b": (501, 1 * GI), "c": (100, 1 * GI)})
    r = by_name(evaluate(s, CFG.model_copy(update={"target_cpu_usage": 0.45})))
    assert r["a"].reason is not UnremovableReason.NotUnderutilized
    assert r["b"].reason is UnremovableReason.NotUnderutilized


def test_candidates_empty_first_then_ascending_utilization() -> None:
    big = {"cpu_m": 16_000, "mem": 64 * GI}
    nodes = [make_node("d1", **big), make_node("c-low"), make_node("c-high"), make_node("e")]
    pods = [make_pod("p1", node="c-low"), make_pod("p2", node="c-high"), ds_pod("ds", "e"), make_pod("p3", node="d1")]
    usage = {"d1": (1000, 40 * GI), "c-low": (100, GI), "c-high": (1000, GI), "e": (3000, 8 * GI)}
    ev = evaluate(snap(nodes, pods, usage), CFG)
    assert [r.node.name for r in ev.removable()] == ["e", "c-low", "c-high"]
    assert all(dest == "d1" for r in ev.removable() for _, dest in r.moves)


def test_target_usage_is_cumulative_across_candidates() -> None:
    # Destination d: 8 cores, usage 3000m. Each candidate moves a 400m pod: 3400, then 3800 > 3600.
    nodes = [make_node("d", cpu_m=8000, mem=64 * GI), make_node("a"), make_node("b")]
    pods = [make_pod("pa", node="a", cpu_m=400), make_pod("pb", node="b", cpu_m=400), make_pod("pd", node="d")]
    usage = {"d": (3000, GI), "a": (500, GI), "b": (600, GI)}
    r = by_name(evaluate(snap(nodes, pods, usage), CFG.model_copy(update={"scale_down_utilization_threshold": 0.3})))
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
    r = by_name(evaluate(snap(nodes, pods, usage), CFG.model_copy(update={"scale_down_utilization_threshold": 0.2})))
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
    nodes = [make_node(n) for n in ("a", "b", "c")] + [make_node("big", cpu_m=32_000, mem=128 * GI, pool="other")]
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
    ignored = by_name(evaluate(s, CFG.model_copy(update={"ignore_daemonsets_utilization": True})))["a"].utilization
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
    ds_only = by_name(evaluate(s, CFG.model_copy(update={"ignore_daemonsets_utilization": True})))["a"].utilization
    assert ds_only.cpu == pytest.approx(0.6)
