"""A simulation state that takes over the rows of an earlier one (``ClusterState(prior=...)``,
rule 6 of the evaluation cache) equals a state built anew on the same snapshot, whatever was
simulated in the earlier state (moves kept or not, flags) and whatever changed between the two
snapshots (a pod moved, a node tainted, gone or new); and a state left half-changed by an error
gives none of its rows."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.model.records import LabelSelector, Pod, PodAffinityTerm, Taint
from scaler.model.revisions import RevisionCounter
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.cache import EvaluationCache
from scaler.simulator.state import ClusterState
from tests.builders import GI, MI, make_node, make_pod

NOW = 1_800_000_000.0
CFG = ScalerConfig()
ANTI = PodAffinityTerm(LabelSelector({"app": "x"}), "kubernetes.io/hostname")
PROBES = (make_pod("probe-x", labels={"app": "x"}), make_pod("probe-y", labels={"app": "y"}))


def _pod(name: str, node: str, app: str, anti: bool) -> Pod:
    extra: dict[str, Any] = {"required_anti_affinity": (ANTI,)} if anti else {}
    return make_pod(name, node=node, cpu_m=200, mem=256 * MI, labels={"app": app}, **extra)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list, list[Pod]]:
    nodes = [make_node(f"n{k}", cpu_m=4000, mem=8 * GI) for k in range(draw(st.integers(2, 6)))]
    pods = [
        _pod(f"{n.name}-p{j}", n.name, draw(st.sampled_from("xy")), draw(st.booleans()))
        for n in nodes
        for j in range(draw(st.integers(0, 3)))
    ]
    return nodes, pods


def _state(
    snap: ClusterSnapshot, cache: EvaluationCache, prior: ClusterState | None = None, known: bool = True
) -> ClusterState:
    """A state of ``snap`` as a removal context builds it through ``cache`` (rows from the
    node facts, usage from the nodes' metrics); not ``known``: as the replay world's scheduler
    builds it, from the same pods without their requests, anti-affinity pods or index."""
    facts = cache.facts(snap, CFG)
    usage = {n.name: (100 * (i + 1), (i + 1) * GI) for i, n in enumerate(snap.nodes)}
    return ClusterState(
        snap,
        {name: f.counted for name, f in facts.items()},
        usage,
        None,
        {name: f.requested for name, f in facts.items()} if known else None,
        {name: f.anti_affinity for name, f in facts.items() if f.anti_affinity} if known else None,
        cache.index if known else None,
        prior,
        reusable=True,
    )


def _view(state: ClusterState) -> dict[str, Any]:
    """Everything a filter can read of ``state``, as plain values."""
    rows = [
        (
            ns.node,
            [p.key for p in ns.pods],
            ns.requested,
            ns.usage_cpu_millicores,
            ns.usage_memory_bytes,
            ns.moved_cpu_millicores,
            ns.moved_memory_bytes,
            ns.edits,
            ns.ghost,
            ns.removed,
            ns.position,
        )
        for ns in state.nodes.values()
    ]
    table = {k: v.tolist() for k, v in vars(state.table).items() if hasattr(v, "tolist")}
    holders = [sorted((h.key, t.topology_key, n) for h, t, n in state.holders(p)) for p in PROBES]
    return {
        "names": state.names,
        "rows": rows,
        "table": table,
        "holders": holders,
        "anti_pods": state.anti_affinity_pods,
        "anti_keys": state.anti_affinity_keys,
        "labelled": sorted((ns.name, p.key) for ns, p in state.pods_with_label("default", "app", "x")),
    }


def _simulate(state: ClusterState, data: st.DataObject, pods: list[Pod]) -> None:
    """Random moves, flags and commits in ``state`` (some left uncommitted)."""
    names = list(state.nodes)
    for i in range(data.draw(st.integers(0, 6))):
        op = data.draw(st.sampled_from(["place", "unschedule", "flag", "commit"]))
        node = data.draw(st.sampled_from(names))
        if op == "place":
            state.place(
                _pod(f"moved-{i}", node, data.draw(st.sampled_from("xy")), data.draw(st.booleans())), node
            )
        elif op == "unschedule" and state.nodes[node].pods:
            state.unschedule(data.draw(st.sampled_from(state.nodes[node].pods)), node)
        elif op == "flag":
            state.set_flags(node, ghost=data.draw(st.booleans()), removed=data.draw(st.booleans()))
        elif op == "commit":
            state.commit()


CHANGES = st.sampled_from(["none", "move", "taint", "delete", "add"])


def _changed(nodes: list, pods: list[Pod], change: str, data: st.DataObject) -> tuple[list, list[Pod]]:
    """The cluster after ``change``: new objects for what changed, the others the same."""
    if change == "move" and pods:
        p = data.draw(st.sampled_from(pods))
        to = data.draw(st.sampled_from(nodes)).name
        return nodes, [msgspec.structs.replace(q, node_name=to) if q is p else q for q in pods]
    if change == "taint":
        k = data.draw(st.integers(0, len(nodes) - 1))
        taint = Taint("ToBeDeletedByClusterAutoscaler", str(int(NOW)), "NoSchedule")
        return [dataclasses.replace(n, taints=(taint,)) if i == k else n for i, n in enumerate(nodes)], pods
    if change == "delete":
        gone = data.draw(st.sampled_from(nodes)).name
        return [n for n in nodes if n.name != gone], [p for p in pods if p.node_name != gone]
    if change == "add":
        new = make_node(f"n{len(nodes) + 10}", cpu_m=2000, mem=4 * GI)
        at = data.draw(st.integers(0, len(nodes)))
        return [*nodes[:at], new, *nodes[at:]], [*pods, _pod("new-p0", new.name, "x", True)]
    return nodes, pods


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), data=st.data())
def test_a_state_taking_over_rows_equals_one_built_anew(
    cluster: tuple[list, list[Pod]], data: st.DataObject
) -> None:
    nodes, pods = cluster
    known = data.draw(st.booleans())
    counter, cache = RevisionCounter(), EvaluationCache()
    first = ClusterSnapshot.create(now=NOW, nodes=nodes, pods=pods)
    first = dataclasses.replace(first, revisions=counter.follow(first))
    prior = _state(first, cache, known=known)
    _simulate(prior, data, pods)
    old_rows = dict(prior.nodes)
    change = data.draw(CHANGES)
    nodes, pods = _changed(nodes, pods, change, data)
    second = ClusterSnapshot.create(now=NOW + 300, nodes=nodes, pods=pods)
    second = dataclasses.replace(second, revisions=counter.follow(second))
    taken = _state(second, cache, prior, known)
    if change == "none":  # nothing changed: every row is taken over, none built
        assert all(taken.nodes[n] is row for n, row in old_rows.items())
    assert _view(taken) == _view(_state(second, cache, known=known))
    assert not prior.nodes  # emptied: a stale use fails instead of reading rows now shared
    _simulate(taken, data, pods)  # the rows taken over move and revert as built ones do
    taken.revert(0)


def test_a_state_left_half_changed_by_an_error_gives_no_rows() -> None:
    nodes = [make_node("a", cpu_m=4000, mem=8 * GI), make_node("b", cpu_m=4000, mem=8 * GI)]
    pods = [_pod("a-0", "a", "x", True), _pod("b-0", "b", "y", False)]
    counter, cache = RevisionCounter(), EvaluationCache()
    snap = ClusterSnapshot.create(now=NOW, nodes=nodes, pods=pods)
    snap = dataclasses.replace(snap, revisions=counter.follow(snap))
    prior = _state(snap, cache)

    def failing_load(pod: Pod) -> tuple[int, int]:
        raise RuntimeError("metrics vanished")

    prior._pod_load = failing_load
    with pytest.raises(RuntimeError):
        prior.place(_pod("half", "b", "x", True), "b")  # appended to b's pods, never journaled
    assert [p.name for p in prior.nodes["b"].pods] == ["b-0", "half"]
    old_rows = dict(prior.nodes)
    again = dataclasses.replace(snap, now=NOW + 300)
    taken = _state(again, cache, prior)
    assert _view(taken) == _view(_state(again, cache))
    assert all(taken.nodes[n] is not old_rows[n] for n in ("a", "b"))


def test_a_row_taken_over_carries_the_new_node_object() -> None:
    """A row is a function of its pods: when the same counted pods come with a changed node (a
    taint, here given directly rather than through the cache), the row is taken over and holds
    the new node, as a state built anew would."""
    nodes = [make_node("a", cpu_m=4000, mem=8 * GI), make_node("b", cpu_m=4000, mem=8 * GI)]
    pods = [_pod("a-0", "a", "x", True), _pod("b-0", "b", "y", False)]
    counted = {"a": tuple(pods[:1]), "b": tuple(pods[1:])}
    first = ClusterSnapshot.create(now=NOW, nodes=nodes, pods=pods)
    prior = ClusterState(first, counted, reusable=True)
    old_rows = dict(prior.nodes)
    taint = Taint("ToBeDeletedByClusterAutoscaler", str(int(NOW)), "NoSchedule")
    second = ClusterSnapshot.create(now=NOW, nodes=[dataclasses.replace(nodes[0], taints=(taint,)), nodes[1]], pods=pods)
    taken = ClusterState(second, counted, prior=prior, reusable=True)
    assert all(taken.nodes[n] is old_rows[n] for n in ("a", "b"))
    assert _view(taken) == _view(ClusterState(second, counted))
    assert taken.table.to_be_deleted.tolist() == [True, False]
