"""Hot-node relief's pure parts: hot detection, the choice of pods, the destination check, the
budgets and the planner's timers (scaler.relief, scaler.planner), and the replay's model of
kube-scheduler's TaintToleration score."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest
from builders import GI, MI, make_node, make_pdb, make_pod

from scaler.config import ConfigError, ScalerConfig
from scaler.engine import Evaluation, evaluate
from scaler.model.records import (
    ANNOTATION_SAFE_TO_EVICT,
    ANNOTATION_SCALE_DOWN_DISABLED,
    Node,
    NodeMetrics,
    Pod,
    PodDisruptionBudget,
    PodMetrics,
    Taint,
    Toleration,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.planner import (
    PlannerState,
    UsageSample,
    cooled,
    record_reliefs,
    relief_admission,
    relief_due,
    track_hot,
)
from scaler.reasons import UnremovableReason
from scaler.relief import CAPPED, NodeRelief, hot_nodes, plan_relief
from scaler.replay.world import kube_scheduler_choice
from scaler.simulator.registry import load_filters
from scaler.simulator.state import ClusterState

NOW = 1_800_000_000.0
CFG = ScalerConfig(hot_node_relief=True)  # waterlines: cpu 80%, memory 90%


def node(name: str, cpu_m: int = 4000, mem: int = 16 * GI, **kw: Any) -> Node:
    return make_node(name, cpu_m=cpu_m, mem=mem, **kw)


def pod(name: str, on: str, req: int = 200, mem: int = 256 * MI, **kw: Any) -> Pod:
    return make_pod(name, node=on, cpu_m=req, mem=mem, owner_name=f"rs-{name}", labels={"app": name}, **kw)


def snapshot(
    nodes: Sequence[Node],
    pods: Iterable[Pod],
    node_usage: dict[str, tuple[int, int]],
    pod_usage: dict[str, tuple[int, int]],
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> ClusterSnapshot:
    pods = list(pods)
    return ClusterSnapshot.create(
        now=NOW,
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        node_metrics=[NodeMetrics(n, NOW - 30, 30.0, c, m) for n, (c, m) in node_usage.items()],
        pod_metrics=[
            PodMetrics(p.namespace, p.name, NOW - 30, 30.0, *pod_usage[p.name])
            for p in pods
            if p.name in pod_usage
        ],
    )


def hot_cluster(
    extra_nodes: Sequence[Node] = (), extra_pods: Sequence[Pod] = (), **usage: tuple[int, int]
) -> ClusterSnapshot:
    """``hot`` (4 cores, 3.6 used: 90% > 80%) runs pods a-d using 1.5, 0.8, 0.3 and 0.2 cores
    (and a DaemonSet pod); ``dst`` (8 cores, 5% used, scale-down disabled) has room under
    TargetUsage (45%: 3.6 cores) for any one of them. ``usage`` overrides node or pod usage by
    name."""
    dst = node("dst", cpu_m=8000, mem=32 * GI, annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"})
    nodes = [node("hot"), dst, *extra_nodes]
    pods = [
        pod("a", "hot", req=500),
        pod("b", "hot", req=500),
        pod("c", "hot", req=200),
        pod("d", "hot", req=200),
        make_pod("ds-hot", node="hot", cpu_m=50, owner_kind="DaemonSet", owner_name="ds"),
        pod("busy", "dst", req=400),
        *extra_pods,
    ]
    node_usage = {"hot": (3600, 4 * GI), "dst": (400, 4 * GI)}
    pod_usage = {
        "a": (1500, GI),
        "b": (800, GI),
        "c": (300, GI // 2),
        "d": (200, GI // 2),
        "ds-hot": (50, 64 * MI),
    }
    pod_usage["busy"] = (300, GI)
    for name, u in usage.items():
        (node_usage if name in node_usage or name in {n.name for n in extra_nodes} else pod_usage)[name] = u
    for n in extra_nodes:
        node_usage.setdefault(n.name, (400, 2 * GI))
    for p in extra_pods:
        pod_usage.setdefault(p.name, (100, 256 * MI))
    return snapshot(nodes, pods, node_usage, pod_usage)


def relieve(snap: ClusterSnapshot, config: ScalerConfig = CFG, **kw: Any) -> dict[str, NodeRelief]:
    ev = evaluate(snap, config)
    return {r.node.name: r for r in plan_relief(ev, [n.name for n in snap.nodes], **kw).reliefs}


def evicted(r: NodeRelief) -> list[tuple[str, str]]:
    return [(p.name, dest) for p, dest in r.evictions]


# ---- hot detection ---------------------------------------------------------------------------------


def test_hot_is_strictly_above_a_waterline_and_unknown_usage_is_never_hot() -> None:
    nodes = [node(f"n{i}") for i in range(5)]
    usage = {
        "n0": (3200, 4 * GI),  # exactly 80% cpu: not above
        "n1": (3201, 4 * GI),  # above the cpu waterline
        "n2": (1000, int(14.5 * GI)),  # memory 90.6% > 90%
        "n3": (100, GI),
    }  # n4: no metrics
    pods = [pod(f"p{i}", f"n{i}") for i in range(5)]
    ev = evaluate(snapshot(nodes, pods, usage, {}), CFG)
    hot = hot_nodes(ev)
    assert sorted(hot) == ["n1", "n2"]
    assert hot["n1"].cpu_gap_millicores == 1 and hot["n1"].memory_gap_bytes < 0
    assert hot["n2"].memory_gap_bytes > 0 and hot["n2"].cpu_gap_millicores < 0
    tighter = evaluate(snapshot(nodes, pods, usage, {}), ScalerConfig(hot_node_cpu_threshold=0.2))
    assert sorted(hot_nodes(tighter)) == ["n0", "n1", "n2"]


def test_hot_usage_is_the_aggregate_the_candidates_are_judged_by() -> None:
    """The node's usage plus the pods not yet in its metrics (a replacement just placed there)."""
    late = pod("late", "n0", req=1000, start_ts=NOW - 5)  # started after the metrics window began
    snap = snapshot([node("n0")], [pod("early", "n0"), late], {"n0": (2500, 2 * GI)}, {"late": (1200, GI)})
    hot = hot_nodes(evaluate(snap, CFG))
    assert hot["n0"].cpu_millicores == 2500 + 1200


def test_relief_needs_target_usage() -> None:
    with pytest.raises(ConfigError, match="hot-node-relief: needs TargetUsage"):
        ScalerConfig.from_mapping({"hot-node-relief": "true", "filter-plugins": ""})


# ---- the choice of pods ------------------------------------------------------------------------------


def test_the_fewest_pods_in_crane_order_close_the_gap() -> None:
    """Gap 400m: the pod using the most CPU (a, 1.5 cores) closes it alone; nothing else goes."""
    r = relieve(hot_cluster())["hot"]
    assert evicted(r) == [("a", "dst")]
    assert r.gap_closed and r.remaining_cpu_gap_millicores == 400 - 1500
    assert r.kept == () and r.held == ""


def test_a_larger_gap_takes_the_next_pods_in_order() -> None:
    r = relieve(hot_cluster(hot=(3200 + 2200, 4 * GI)))["hot"]  # gap 2.2 cores: a, then b (2.3)
    assert evicted(r) == [("a", "dst"), ("b", "dst")]
    assert r.gap_closed


def test_priority_and_qos_come_before_usage() -> None:
    """Crane's order: lower priority first, whatever the usage."""
    low = pod("low", "hot", req=100, priority=-5)
    snap = hot_cluster(extra_pods=[low], low=(450, GI))
    r = relieve(snap)["hot"]
    assert evicted(r) == [("low", "dst")], "450m closes the 400m gap: the higher-priority a stays"


def test_a_pod_without_a_destination_stays_and_the_next_one_is_tried() -> None:
    """a requests 3.3 cores: no destination stays under TargetUsage's 45% with it; b and c go.
    (Its request, not its usage: a node's usage is never below what its pods use, so a pod
    using 3.3 cores would make ``hot`` use more than the 4.2 cores its NodeMetrics say.)"""
    snap = hot_cluster(hot=(3200 + 1000, 4 * GI))
    pods = [p if p.name != "a" else pod("a", "hot", req=3300) for p in snap.pods]
    snap = snapshot(
        list(snap.nodes),
        pods,
        {n: (m.cpu_millicores, m.memory_bytes) for n, m in snap.node_metrics.items()},
        {k[1]: (m.cpu_millicores, m.memory_bytes) for k, m in snap.pod_metrics.items()},
    )
    r = relieve(snap)["hot"]
    assert evicted(r) == [("b", "dst"), ("c", "dst")]
    assert [(p.name, why.split(":")[0]) for p, why in r.kept] == [("a", "NoPlaceToMovePods")]
    assert "TargetUsage: cpu usage above target 45%" in r.kept[0][1]
    assert r.gap_closed


def test_drain_rules_pdbs_and_unknown_usage_keep_pods() -> None:
    snap = hot_cluster(hot=(3200 + 2500, 4 * GI))
    pods = [
        p if p.name != "a" else make_pod("a", node="hot", cpu_m=500, owner_kind=None)  # bare pod
        for p in snap.pods
    ]
    pods = [
        p if p.name != "b" else pod("b", "hot", req=500, annotations={ANNOTATION_SAFE_TO_EVICT: "false"})
        for p in pods
    ]
    snap2 = snapshot(
        list(snap.nodes),
        pods,
        {n: (m.cpu_millicores, m.memory_bytes) for n, m in snap.node_metrics.items()},
        {k[1]: (m.cpu_millicores, m.memory_bytes) for k, m in snap.pod_metrics.items() if k[1] != "d"},
        pdbs=[make_pdb("c", disruptions_allowed=0)],
    )
    r = relieve(snap2)["hot"]
    assert evicted(r) == []
    why = {p.name: reason for p, reason in r.kept}
    assert "NotReplicated" in why["a"] and "NotSafeToEvictAnnotation" in why["b"]
    assert "NotEnoughPdb" in why["c"] and "no PodMetrics" in why["d"]
    assert "ds-hot" not in why, "DaemonSet pods are never candidates"
    assert not r.gap_closed and r.detail.startswith("nothing to evict: BlockedByPod")


def test_evictions_per_loop_are_capped_over_all_nodes_hottest_first() -> None:
    hot2 = node("hot2")
    extra = [pod(f"x{i}", "hot2", req=100) for i in range(3)]
    snap = hot_cluster(
        [hot2],
        extra,
        hot=(3200 + 2200, 4 * GI),
        hot2=(3400, 4 * GI),
        **{f"x{i}": (100, GI) for i in range(3)},
    )
    reliefs = relieve(snap, ScalerConfig(hot_node_relief=True, max_relief_evictions_per_loop=3))
    assert evicted(reliefs["hot"]) == [("a", "dst"), ("b", "dst")], "hot (135%) before hot2 (85%)"
    assert len(reliefs["hot2"].evictions) == 1 and reliefs["hot2"].capped and not reliefs["hot2"].gap_closed
    assert CAPPED in reliefs["hot2"].detail
    again = relieve(snap, ScalerConfig(hot_node_relief=True, max_relief_evictions_per_loop=2))
    assert again["hot2"].held == CAPPED and again["hot2"].evictions == ()


# ---- the destination check --------------------------------------------------------------------------


def test_hot_nodes_are_never_destinations() -> None:
    """Another hot node with room by requests is not a destination, whatever the filters say."""
    other = node("hot2", cpu_m=64000, mem=64 * GI)  # 64 cores: 2.9 cores used is under 45%, but
    snap = hot_cluster([other], hot2=(60000, 4 * GI))  # it is hot (94%)
    snap = snapshot(
        [n for n in snap.nodes if n.name != "dst"],
        [p for p in snap.pods if p.node_name != "dst"],
        {n: (m.cpu_millicores, m.memory_bytes) for n, m in snap.node_metrics.items() if n != "dst"},
        {k[1]: (m.cpu_millicores, m.memory_bytes) for k, m in snap.pod_metrics.items()},
    )
    r = relieve(snap, ScalerConfig(hot_node_relief=True, target_cpu_usage=1.0))["hot"]
    assert evicted(r) == [] and all("no destination nodes" in why for _, why in r.kept)


def test_destinations_count_the_moves_of_the_evaluation_before_relief() -> None:
    """``idle``'s pod requests 3 cores (and uses 1); when the evaluation removes ``idle``, its pod
    takes dst's room under TargetUsage (0.4 + 3 of 3.6 cores), and a (1.5 cores) no longer fits
    there."""
    idle = node("idle")
    big = pod("big", "idle", req=3000)
    removed = relieve(hot_cluster([idle], [big], idle=(1200, 2 * GI), big=(1000, GI)))
    assert evicted(removed["hot"]) == [("d", "dst")], "only d (0.2 cores) still fits: 0.4 + 3 + 0.2"
    assert [p.name for p, _ in removed["hot"].kept] == ["a", "b", "c"]
    kept = relieve(hot_cluster([node("idle", annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"})], [big],
                               idle=(1200, 2 * GI), big=(1000, GI)))  # fmt: skip
    assert evicted(kept["hot"]) == [("a", "dst")], "without the removal, a goes to dst"


def test_a_node_being_removed_is_never_relieved() -> None:
    roomy = node("roomy", cpu_m=64000, mem=256 * GI, annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"})
    r = relieve(
        hot_cluster([roomy]), ScalerConfig(hot_node_relief=True, scale_down_utilization_threshold=1.0)
    )
    assert r["hot"].held == "being removed: removable in this evaluation" and r["hot"].evictions == ()
    tainted = [n if n.name != "hot" else node("hot", to_be_deleted_ts=NOW - 10) for n in hot_cluster().nodes]
    base = hot_cluster()
    snap = snapshot(tainted, base.pods, {n: (m.cpu_millicores, m.memory_bytes) for n, m in base.node_metrics.items()},
                    {k[1]: (m.cpu_millicores, m.memory_bytes) for k, m in base.pod_metrics.items()})  # fmt: skip
    assert relieve(snap)["hot"].held == "being removed: tainted ToBeDeletedByClusterAutoscaler"
    excluded = relieve(hot_cluster(), excluded={"hot": "a relief of this node is under way"})
    assert excluded["hot"].held == "a relief of this node is under way"


def test_disruption_budgets_hold_reliefs_with_the_relief_reason() -> None:
    def budget(reasons: str) -> ScalerConfig:
        return ScalerConfig.from_mapping(
            {"hot-node-relief": True, "scale-down-budget": [f"0;reasons={reasons}"]}
        )

    for cfg, held in ((budget("relief"), True), (budget("underutilized,empty"), False)):
        ev = evaluate(hot_cluster(), cfg)
        plan = plan_relief(ev, ["hot"], admit=relief_admission(ev))
        assert bool(plan.reliefs[0].held) is held, cfg.budgets
        if held:
            assert "allows 0 of node pool pool-a's 2 nodes disrupted" in plan.reliefs[0].held


def test_a_candidate_held_by_a_budget_is_relieved_of_its_own_pods() -> None:
    """``hot`` is a scale-down candidate (threshold 100%) that a budget holds: its pods were
    never simulated away, so relief evicts them from where they are (it used to find the pods
    gone: "nothing to evict"; the controller called the node "being removed")."""
    roomy = node("roomy", cpu_m=64000, mem=256 * GI, annotations={ANNOTATION_SCALE_DOWN_DISABLED: "true"})
    cfg = ScalerConfig.from_mapping({
        "hot-node-relief": True, "scale-down-utilization-threshold": 1.0,
        "scale-down-budget": ["0;reasons=underutilized;name=office"],
    })  # fmt: skip
    ev = evaluate(hot_cluster([roomy]), cfg)
    result = next(r for r in ev.nodes if r.node.name == "hot")
    assert result.reason is UnremovableReason.ScaleDownBudgetExhausted and result.budget_only
    (relief,) = plan_relief(ev, ["hot"], admit=relief_admission(ev)).reliefs
    assert not relief.held and [p.name for p, _ in relief.evictions] == ["a"] and relief.gap_closed


class _BrokenFilter:
    """A filter with a bug: it raises for pod ``a``."""

    name = "broken"

    def filter(self, pod: Pod, node: Any, state: Any) -> str | None:
        if pod.name == "a":
            raise RuntimeError("bug in a filter")
        return None


def test_an_error_in_the_relief_simulation_is_raised_not_reported_as_nothing_to_evict() -> None:
    """The executor records a live evictor's exceptions as failed evictions, but relief's
    evictor is a simulation: an exception there is a bug and must surface, not become a kept
    pod (or "nothing to evict")."""
    filters = [*load_filters(CFG), _BrokenFilter()]
    ev = evaluate(hot_cluster(), CFG, filters=filters)  # hot is not a candidate: nothing simulated yet
    with pytest.raises(RuntimeError, match="bug in a filter"):
        plan_relief(ev, ["hot"])


def test_plan_relief_needs_the_evaluation_state() -> None:
    ev = evaluate(hot_cluster(), CFG)
    with pytest.raises(ValueError, match="needs an evaluation made by"):
        plan_relief(Evaluation(ev.now, ev.config, ev.nodes), ["hot"])


# ---- the planner's timers ------------------------------------------------------------------------------


def test_hot_and_cool_timers() -> None:
    s = PlannerState()
    s = track_hot(s, {"a"}, {"a", "b", "c"}, tainted={"b"}, now=100.0)
    assert s.hot_since == {"a": 100.0} and s.cool_since == {"b": 100.0}
    assert relief_due(s, 399.0, 300.0) == [] and relief_due(s, 400.0, 300.0) == ["a"]
    s = track_hot(s, {"a", "b"}, {"a", "b", "c"}, tainted={"b"}, now=200.0)
    assert s.hot_since == {"a": 100.0, "b": 200.0} and s.cool_since == {}, (
        "hot again: the cool timer restarts"
    )
    s = track_hot(s, set(), {"a"}, tainted={"a", "b"}, now=300.0)
    assert s.hot_since == {} and s.cool_since == {"a": 300.0}, "b's usage unknown: neither hot nor cool"
    assert cooled(s, 599.0, 300.0) == [] and cooled(s, 600.0, 300.0) == ["a"]


def test_a_relief_restarts_the_hot_timer_and_the_usage_history() -> None:
    s = PlannerState(
        hot_since={"a": 1.0, "b": 1.0},
        usage_history={"a": (UsageSample(1.0, 10, 10),), "b": (UsageSample(1.0, 10, 10),)},
    )
    s = record_reliefs(s, ["a"])
    assert s.hot_since == {"b": 1.0} and set(s.usage_history) == {"b"}


# ---- kube-scheduler's TaintToleration score in the replay -----------------------------------------------


def test_kube_scheduler_prefers_nodes_without_intolerable_prefer_no_schedule_taints() -> None:
    soft = Taint("scaler.io/hot", "1", "PreferNoSchedule")
    emptiest = node("a-hot", cpu_m=16000, taints=(soft,))  # LeastAllocated's favourite
    other = node("b", cpu_m=4000)
    state = ClusterState(ClusterSnapshot.create(NOW, [emptiest, other], [pod("x", "b", req=3000)]))
    both = np.array([0, 1], dtype=np.intp)
    assert state.names[kube_scheduler_choice(pod("new", "", req=100), state, both)] == "b"
    tolerant = pod("new", "", req=100, tolerations=(Toleration("scaler.io/hot", "Exists"),))
    assert state.names[kube_scheduler_choice(tolerant, state, both)] == "a-hot"
    plain = ClusterState(
        ClusterSnapshot.create(NOW, [node("a", cpu_m=16000), other], [pod("x", "b", req=3000)])
    )
    assert plain.names[kube_scheduler_choice(pod("new", "", req=100), plain, both)] == "a", "LeastAllocated"
    # A soft-tainted node that is not feasible counts for no feasible node.
    three = ClusterState(
        ClusterSnapshot.create(
            NOW,
            [emptiest, node("b", cpu_m=16000), node("c", cpu_m=4000)],
            [pod("x", "c", req=3000)],
        )
    )
    assert three.names[kube_scheduler_choice(pod("new", "", req=100), three, np.array([1, 2]))] == "b"


# ---- scaler dry-run --hot-node-relief ---------------------------------------------------------------------


def test_dry_run_reports_the_relief_section_and_its_json(capsys: pytest.CaptureFixture[str]) -> None:
    import json
    from pathlib import Path

    from scaler.cli import main

    night = str(Path(__file__).resolve().parents[1] / "scaler" / "examples" / "bitbrains-gke-night-lowreq")
    args = ["dry-run", "--snapshot", night, "--hot-node-relief", "--hot-node-cpu-threshold=0.3"]
    assert main([*args, "-o", "json"]) == 0
    relief = json.loads(capsys.readouterr().out)["relief"]
    assert relief["cpuThreshold"] == 0.3 and relief["memoryThreshold"] == 0.9
    hottest = relief["hotNodes"][0]
    assert hottest["name"].endswith("4369") and len(hottest["evictions"]) == relief["evictions"] == 5
    assert all(e["destination"] and e["cpuMillicores"] is not None for e in hottest["evictions"])
    assert any("NotEnoughPdb" in k["reason"] for k in hottest["kept"]) and hottest["capped"]
    assert [n["held"] for n in relief["hotNodes"][1:]] == [CAPPED, CAPPED]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Hot-node relief: 3 node(s) above the waterlines (cpu 30%, memory 90% of allocatable)" in out
    assert "NODE" in out and "partial" in out and "held" in out
    assert main(["dry-run", "--snapshot", night, "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["relief"] is None, "off by default"


@pytest.mark.parametrize("sidecar_request", [0, 300])
def test_a_container_missing_from_pod_metrics_counts_its_request_or_keeps_its_pod(sidecar_request: int) -> None:
    """``a`` runs ``c`` and ``sidecar``; its PodMetrics report ``c`` only (1.5 cores). With a
    300m request the sidecar counts at it: ``a`` is credited 1.8 cores and goes first, as the
    pod using the most. Without one (and a gap the other pods cannot close), relief keeps ``a``
    and says which container nobody measures."""
    base = hot_cluster(hot=(3200 + 1000, 4 * GI) if sidecar_request else (3200 + 5000, 4 * GI))
    each = (("c", 500, 256 * MI), ("sidecar", sidecar_request, sidecar_request * MI))
    pods = [
        p if p.name != "a" else msgspec.structs.replace(p, containers=("c", "sidecar"), container_requests=each)
        for p in base.pods
    ]
    metrics = [
        m if m.name != "a" else msgspec.structs.replace(m, containers=("c",)) for m in base.pod_metrics.values()
    ]
    snap = ClusterSnapshot.create(NOW, base.nodes, pods, node_metrics=base.node_metrics.values(), pod_metrics=metrics)
    r = relieve(snap)["hot"]
    if sidecar_request:
        assert evicted(r)[0] == ("a", "dst"), r
    else:
        assert all(name != "a" for name, _ in evicted(r)), r
        why = dict((p.name, reason) for p, reason in r.kept)
        assert "its PodMetrics lack container 'sidecar', which has no cpu request" in why.get("a", ""), r.kept


def test_pod_metrics_lacking_a_running_container_are_unknown_usage_to_relief() -> None:
    """``a`` runs containers ``c`` and ``sidecar``; its PodMetrics report ``c`` only: relief
    treats it as a pod without PodMetrics (its usage unknown: it no longer goes first as the
    pod using the most), as the evaluation does."""
    base = hot_cluster(hot=(3200 + 1000, 4 * GI))
    pods = [p if p.name != "a" else msgspec.structs.replace(p, containers=("c", "sidecar")) for p in base.pods]
    metrics = [
        m if m.name != "a" else msgspec.structs.replace(m, containers=("c",)) for m in base.pod_metrics.values()
    ]
    snap = ClusterSnapshot.create(NOW, base.nodes, pods, node_metrics=base.node_metrics.values(), pod_metrics=metrics)
    assert ("default", "a") not in snap.pod_metrics
    assert ("a", "dst") in evicted(relieve(base)["hot"])
    r = relieve(snap)["hot"]
    assert all(name != "a" for name, _ in evicted(r)), r
    assert r.gap_closed
