"""The re-check validates the evaluation's plan before a drain, and falls back to a full check.

:func:`scaler.simulator.cluster.validate_node_removal` answers from the planned destinations
alone when every pod still passes every filter there (the node can go); otherwise it says the
plan no longer holds and :func:`scaler.actuation.recheck.recheck` simulates the node's removal
in full, as without a plan. A refusal is then worded as the full check words it.
"""

from __future__ import annotations

from collections.abc import Sequence

from builders import GI, make_node, make_pdb, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.actuation.recheck import recheck
from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.model.records import Node, NodeMetrics, Pod, PodDisruptionBudget
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import UnremovableReason
from scaler.simulator.cluster import RemovalContext, validate_node_removal
from scaler.simulator.registry import load_filters

NOW = 1_800_000_000.0
CFG = ScalerConfig()


def snap(
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    usage: dict[str, tuple[int, int]],
    pdbs: Sequence[PodDisruptionBudget] = (),
) -> ClusterSnapshot:
    return ClusterSnapshot.create(
        now=NOW,
        nodes=nodes,
        pods=pods,
        pdbs=pdbs,
        node_metrics=[NodeMetrics(n, NOW - 30, 30.0, c, m) for n, (c, m) in usage.items()],
    )


def cluster() -> tuple[list[Node], list[Pod], dict[str, tuple[int, int]]]:
    """Node ``a`` (underused, two pods) and two destinations with room for them."""
    nodes = [make_node("a"), make_node("d1"), make_node("d2")]
    pods = [
        make_pod("p1", node="a", cpu_m=800, labels={"app": "web"}),
        make_pod("p2", node="a", cpu_m=600, labels={"app": "web"}),
        make_pod("r1", node="d1", cpu_m=1000),
        make_pod("r2", node="d2", cpu_m=1000),
    ]
    usage = {"a": (300, GI), "d1": (300, 4 * GI), "d2": (300, 4 * GI)}
    return nodes, pods, usage


def plan_of(s: ClusterSnapshot, name: str = "a") -> tuple[tuple[Pod, str], ...]:
    r = next(r for r in evaluate(s, CFG).nodes if r.node.name == name)
    assert r.removable and r.moves, r
    return r.moves


def validated(s: ClusterSnapshot, plan: Sequence[tuple[Pod, str]], name: str = "a") -> object:
    ctx = RemovalContext(s, CFG, load_filters(CFG), only={name, *(d for _, d in plan)})
    return validate_node_removal(ctx, name, plan)


def test_a_plan_that_still_holds_is_the_proof_the_node_can_go() -> None:
    nodes, pods, usage = cluster()
    s = snap(nodes, pods, usage)
    plan = plan_of(s)
    removal = validated(s, plan)
    assert removal is not None and removal.removable, removal
    again = recheck(s, CFG, "a", expect_empty=False, plan=plan)
    assert again.ok and {p.uid for p in again.pods} == {"default/p1", "default/p2"}


def test_a_destination_now_full_makes_the_plan_fail_and_the_full_check_decide() -> None:
    nodes, pods, usage = cluster()
    plan = plan_of(snap(nodes, pods, usage))
    dest = {d for _, d in plan}
    # Every planned destination filled up since (a new pod takes its room): the plan no longer
    # holds; with the other destination full too, the full check refuses, worded as without a plan.
    fillers = [make_pod(f"fill-{d}", node=d, cpu_m=2900) for d in ("d1", "d2")]
    s = snap(nodes, pods + fillers, usage)
    assert validated(s, plan) is None
    with_plan = recheck(s, CFG, "a", expect_empty=False, plan=plan)
    without = recheck(s, CFG, "a", expect_empty=False)
    assert not with_plan.ok and with_plan.reason == without.reason
    assert with_plan.reason.startswith(UnremovableReason.NoPlaceToMovePods.value)
    # Only the planned destinations full: the plan fails, the full check finds the other one.
    if dest != {"d1", "d2"}:
        (free,) = {"d1", "d2"} - dest
        s = snap(nodes, pods + [f for f in fillers if f.node_name != free], usage)
        assert validated(s, plan) is None
        assert recheck(s, CFG, "a", expect_empty=False, plan=plan).ok


def test_a_destination_gone_or_being_deleted_is_not_a_destination() -> None:
    nodes, pods, usage = cluster()
    plan = plan_of(snap(nodes, pods, usage))
    used = sorted({d for _, d in plan})
    s = snap([n for n in nodes if n.name != used[0]], [p for p in pods if p.node_name != used[0]], usage)
    assert validated(s, plan) is None
    s = snap(nodes, pods, usage)
    with_plan = recheck(s, CFG, "a", expect_empty=False, plan=plan, excluded=used)
    assert with_plan == recheck(s, CFG, "a", expect_empty=False, excluded=used)


def test_a_pod_that_appeared_on_the_node_voids_the_plan() -> None:
    nodes, pods, usage = cluster()
    plan = plan_of(snap(nodes, pods, usage))
    s = snap(nodes, [*pods, make_pod("p3", node="a", cpu_m=100)], usage)
    assert validated(s, plan) is None
    again = recheck(s, CFG, "a", expect_empty=False, plan=plan)
    assert again.ok and {p.uid for p in again.pods} == {"default/p1", "default/p2", "default/p3"}


def test_the_drain_rules_run_first_on_the_fresh_state() -> None:
    nodes, pods, usage = cluster()
    plan = plan_of(snap(nodes, pods, usage))
    s = snap(nodes, pods, usage, pdbs=[make_pdb("web", disruptions_allowed=0)])
    removal = validated(s, plan)
    assert removal is not None and removal.reason is UnremovableReason.BlockedByPod  # type: ignore[attr-defined]
    with_plan = recheck(s, CFG, "a", expect_empty=False, plan=plan)
    assert not with_plan.ok and with_plan == recheck(s, CFG, "a", expect_empty=False)


@settings(max_examples=60, deadline=None)
@given(
    fill=st.lists(st.integers(0, 3200), min_size=3, max_size=3),
    extra=st.integers(0, 2),
    allowed=st.integers(0, 2),
    busy=st.lists(st.integers(200, 3500), min_size=3, max_size=3),
)
def test_the_plan_never_refuses_what_the_full_check_would_let_go_nor_words_a_refusal_otherwise(
    fill: list[int], extra: int, allowed: int, busy: list[int]
) -> None:
    """On any fresh state (destinations filled, usage moved, pods added to the node, a PDB), a
    re-check with the plan refuses exactly when and as the full check does, except that a plan
    that still holds lets the node go where the full check's greedy placement finds no place."""
    nodes = [make_node("a"), make_node("d1"), make_node("d2"), make_node("d3")]
    pods = [make_pod(f"p{i}", node="a", cpu_m=600 + 200 * i, labels={"app": "web"}) for i in range(3)]
    pods += [make_pod(f"r{i}", node=f"d{i}", cpu_m=500) for i in (1, 2, 3)]
    usage = {"a": (200, GI), "d1": (500, 2 * GI), "d2": (500, 2 * GI), "d3": (500, 2 * GI)}
    first = snap(nodes, pods, usage)
    r = next(r for r in evaluate(first, CFG).nodes if r.node.name == "a")
    assert r.removable
    fresh_pods = pods + [make_pod(f"f{i}", node=f"d{i + 1}", cpu_m=c) for i, c in enumerate(fill) if c]
    fresh_pods += [make_pod(f"x{i}", node="a", cpu_m=300, labels={"app": "web"}) for i in range(extra)]
    fresh_usage = {"a": (200, GI)} | {f"d{i + 1}": (b, 2 * GI) for i, b in enumerate(busy)}
    s = snap(nodes, fresh_pods, fresh_usage, pdbs=[make_pdb("web", disruptions_allowed=allowed)])
    with_plan = recheck(s, CFG, "a", expect_empty=False, plan=r.moves)
    without = recheck(s, CFG, "a", expect_empty=False)
    if not with_plan.ok or without.ok:
        assert with_plan == without
    else:  # the plan held where first-fit did not: only a placement can differ, never a drain rule
        assert without.reason.startswith(UnremovableReason.NoPlaceToMovePods.value), without
        assert {p.uid for p in with_plan.pods} == {p.uid for p, _ in r.moves}
        for dest in {d for _, d in r.moves}:  # the plan, checked by hand: requests and CPU target
            moved = sum(p.requests.cpu_millicores for p, d in r.moves if d == dest)
            held = sum(p.requests.cpu_millicores for p in fresh_pods if p.node_name == dest)
            assert held + moved <= 4000 and fresh_usage[dest][0] + moved <= 4000 * 45 // 100
