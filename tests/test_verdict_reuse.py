"""Reusing failed removal checks from one evaluation to the next (scaler.simulator.reuse): an
evaluation with a VerdictCache equals a full one at every step, whatever changes between steps
(usage, the clock, a pod moved or deleted, a taint, a PDB), and the cache does answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.engine import Evaluation, evaluate
from scaler.model.records import LabelSelector, NodeMetrics, Pod, PodAffinityTerm, PodMetrics, Taint
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.reuse import VerdictCache
from tests.builders import GI, MI, make_node, make_pdb, make_pod

NOW = 1_800_000_000.0
ANTI = PodAffinityTerm(LabelSelector({"app": "x"}), "kubernetes.io/hostname")
STEP = 300.0
CFG = ScalerConfig()


def _pods(draw: st.DrawFn, node: str, k: int) -> list[Pod]:
    pods = []
    for j in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["app", "app", "app", "bare", "pdb", "system", "terminating"]))
        name = f"{node}-p{j}"
        cpu = draw(st.integers(100, 1800))
        mem = draw(st.integers(64, 3000)) * MI
        if kind == "bare":
            pods.append(make_pod(name, node=node, cpu_m=cpu, mem=mem, owner_kind=None))
        elif kind == "pdb":
            pods.append(make_pod(name, node=node, cpu_m=cpu, mem=mem, labels={"app": "guarded"}))
        elif kind == "system":  # blocks until an hour after its creation, which falls mid-replay
            created = NOW - 3600 + draw(st.integers(0, 6)) * STEP
            pods.append(make_pod(name, "kube-system", node, cpu, mem, creation_ts=created))
        elif kind == "terminating":  # becomes long-terminating (skipped) mid-replay
            pods.append(
                make_pod(
                    name, node=node, cpu_m=cpu, mem=mem, deletion_ts=NOW + draw(st.integers(0, 4)) * STEP
                )
            )
        else:
            pods.append(make_pod(name, node=node, cpu_m=cpu, mem=mem, owner_name=f"app{k % 2}"))
    return pods


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list, list[Pod]]:
    nodes = [
        make_node(f"n{k}", cpu_m=draw(st.sampled_from([2000, 4000])), mem=8 * GI)
        for k in range(draw(st.integers(2, 7)))
    ]
    pods = [p for k, n in enumerate(nodes) for p in _pods(draw, n.name, k)]
    return nodes, pods


CHANGES = st.sampled_from(["usage", "usage", "usage", "usage", "move", "delete", "taint", "pdb"])


def _snapshot(
    now: float, nodes: list, pods: Sequence[Pod], pdb_allowed: int, usage: dict[str, float]
) -> ClusterSnapshot:
    pm = [
        PodMetrics(
            p.namespace,
            p.name,
            now,
            30.0,
            int(p.requests.cpu_millicores * usage[p.name]),
            p.requests.memory_bytes // 2,
        )
        for p in pods
    ]
    per_node: dict[str, list[int]] = {n.name: [50, 256 * MI] for n in nodes}
    for p, m in zip(pods, pm, strict=True):
        per_node[p.node_name][0] += m.cpu_millicores
        per_node[p.node_name][1] += m.memory_bytes
    return ClusterSnapshot.create(
        now=now,
        nodes=nodes,
        pods=pods,
        pdbs=[make_pdb("guarded", disruptions_allowed=pdb_allowed)],
        node_metrics=[NodeMetrics(n, now, 30.0, c, m) for n, (c, m) in per_node.items()],
        pod_metrics=pm,
    )


def _keeping_tuples(snap: ClusterSnapshot, before: ClusterSnapshot) -> ClusterSnapshot:
    """``snap`` with the pods tuple of every node whose pods did not change taken from
    ``before``, as the replay's world keeps them."""
    kept = {
        name: before.pods_by_node[name] if before.pods_by_node.get(name) == pods else pods
        for name, pods in snap.pods_by_node.items()
    }
    return dataclasses.replace(snap, pods_by_node=kept)


def _same(full: Evaluation, reused: Evaluation) -> None:
    assert reused.nodes == full.nodes
    assert reused.held == full.held
    assert full.context is not None and reused.context is not None
    assert reused.context.simulator.rotation() == full.context.simulator.rotation()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), data=st.data())
def test_incremental_evaluation_equals_a_full_one_at_every_step(
    cluster: tuple[list, list[Pod]], data: st.DataObject
) -> None:
    nodes, pods = cluster
    cache = VerdictCache()
    pdb_allowed = 0
    usage = {p.name: data.draw(st.floats(0.05, 1.5)) for p in pods}
    structure = _snapshot(NOW, nodes, pods, pdb_allowed, usage)
    for step in range(data.draw(st.integers(4, 10))):
        now = NOW + step * STEP
        change = data.draw(CHANGES)
        if change == "usage":  # the same objects, new metrics and clock: what the replay's world gives
            usage = {p.name: data.draw(st.floats(0.05, 1.5)) for p in pods}
            fresh = _snapshot(now, nodes, pods, pdb_allowed, usage)
            snap = dataclasses.replace(
                structure, now=now, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
            )
        else:
            if change == "move" and pods:
                i = data.draw(st.integers(0, len(pods) - 1))
                dest = data.draw(st.sampled_from(nodes)).name
                pods[i] = msgspec.structs.replace(pods[i], node_name=dest)
            elif change == "delete" and pods:
                pods.pop(data.draw(st.integers(0, len(pods) - 1)))
            elif change == "taint":
                k = data.draw(st.integers(0, len(nodes) - 1))
                nodes[k] = dataclasses.replace(
                    nodes[k], taints=(*nodes[k].taints, Taint(f"t{step}", "x", "NoSchedule"))
                )
            else:
                pdb_allowed = 1 - pdb_allowed
            snap = structure = _keeping_tuples(_snapshot(now, nodes, pods, pdb_allowed, usage), structure)
        _same(evaluate(snap, CFG), evaluate(snap, CFG, verdicts=cache))
    event(f"checks answered from the cache: {'some' if cache.hits else 'none'}")


def test_a_packed_cluster_is_answered_from_the_cache_once_learnt() -> None:
    """Every node is refused for its first pod by requests alone: the second evaluation with
    the same objects answers every check from the cache, with the same result."""
    nodes = [make_node(f"n{k}", cpu_m=2000) for k in range(4)]
    pods = [make_pod(f"n{k}-big", node=f"n{k}", cpu_m=1500, owner_name="a") for k in range(4)]
    usage = {p.name: 0.1 for p in pods}
    first = _snapshot(NOW, nodes, pods, 0, usage)
    cache = VerdictCache()
    _same(evaluate(first, CFG), evaluate(first, CFG, verdicts=cache))
    assert (cache.hits, cache.misses) == (0, 4)
    fresh = _snapshot(NOW + STEP, nodes, pods, 0, {p.name: 0.2 for p in pods})
    later = dataclasses.replace(
        first, now=NOW + STEP, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
    )
    full = evaluate(later, CFG)
    _same(full, evaluate(later, CFG, verdicts=cache))
    assert cache.hits == 4
    assert {r.reason.value for r in full.nodes} == {"NoPlaceToMovePods"}


def test_a_removal_earlier_in_the_pass_makes_later_checks_run_in_full() -> None:
    """Rule 2: once a removal is committed, destinations hold its pods, so a kept verdict may no
    longer hold. Here node a's pod moves to b, after which b refuses c's pod for CPU instead of
    memory: the detail must say so."""
    nodes = [
        make_node("a", cpu_m=3500, mem=8 * GI),
        make_node("b", cpu_m=16000, mem=8 * GI),
        make_node("c", cpu_m=4000, mem=8 * GI),
    ]
    pods = [
        make_pod("a-q", node="a", cpu_m=2800, mem=100 * MI, owner_name="q"),
        make_pod("b-big", node="b", cpu_m=12500, mem=7 * GI, owner_name="big"),
        make_pod("c-p", node="c", cpu_m=1000, mem=2 * GI, owner_name="p"),
    ]
    busy_a = {"a-q": 1.5, "b-big": 0.1, "c-p": 0.1}
    first = _snapshot(NOW, nodes, pods, 0, busy_a)
    cache = VerdictCache()
    _same(evaluate(first, CFG), evaluate(first, CFG, verdicts=cache))
    fresh = _snapshot(NOW + STEP, nodes, pods, 0, {**busy_a, "a-q": 0.1})
    later = dataclasses.replace(
        first, now=NOW + STEP, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
    )
    full = evaluate(later, CFG)
    _same(full, evaluate(later, CFG, verdicts=cache))
    by_name = {r.node.name: r for r in full.nodes}
    assert by_name["a"].removable
    assert by_name["c"].detail == "pod default/c-p fits nowhere: NodeResourcesFit: Insufficient cpu (1 node)"


def test_the_node_memo_reuses_unchanged_nodes_and_recomputes_changed_ones() -> None:
    """A node keeps its facts while its node object and pods tuple are the same objects; a node
    whose pods changed gets new ones, and the context's utilizations equal a context's without
    the memo."""
    from scaler.simulator.cluster import NodeMemo, RemovalContext
    from scaler.simulator.registry import load_filters

    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=500, owner_name="x"),
        make_pod("b-1", node="b", cpu_m=700, owner_name="x", required_anti_affinity=(ANTI,)),
    ]
    first = _snapshot(NOW, nodes, pods, 0, {"a-1": 0.5, "b-1": 0.5})
    memo = NodeMemo()
    kept = memo.facts(first, CFG)
    bigger = msgspec.structs.replace(
        pods[0], requests=dataclasses.replace(pods[0].requests, cpu_millicores=1500)
    )
    fresh_metrics = _snapshot(NOW + STEP, nodes, [bigger, pods[1]], 0, {"a-1": 0.5, "b-1": 0.5})
    second = dataclasses.replace(
        first,
        now=NOW + STEP,
        pods=(bigger, pods[1]),
        pods_by_node={**first.pods_by_node, "a": (bigger,)},
        node_metrics=fresh_metrics.node_metrics,
        pod_metrics=fresh_metrics.pod_metrics,
    )
    facts = memo.facts(second, CFG)
    assert facts["b"] is kept["b"]
    assert facts["a"] is not kept["a"]
    assert facts["a"].requested.cpu_millicores == 1500
    filters = load_filters(CFG)
    with_memo, without = RemovalContext(second, CFG, filters, memo=memo), RemovalContext(second, CFG, filters)
    assert with_memo.utils == without.utils
    assert with_memo.utils["a"].request_cpu == 1500 / 4000
    assert with_memo.state.anti_affinity_pods == without.state.anti_affinity_pods == {"b": 1}
    assert with_memo.state.anti_affinity_keys == without.state.anti_affinity_keys == {"kubernetes.io/hostname"}
    # A pod that started after the newest NodeMetrics window began counts by its load, not its
    # PodMetrics: the kept facts tell the two apart.
    fresh = msgspec.structs.replace(bigger, start_ts=NOW + STEP - 10)
    third = dataclasses.replace(second, pods=(fresh, pods[1]), pods_by_node={**second.pods_by_node, "a": (fresh,)})
    with_memo = RemovalContext(third, CFG, filters, memo=memo)
    assert with_memo.utils == RemovalContext(third, CFG, filters).utils
    assert with_memo.utils["a"].pods_not_in_metrics == 1
    assert RemovalContext(second, CFG, filters, memo=memo).utils["a"].pods_not_in_metrics == 0


def _blocked_after_a_removal(guarded: bool) -> tuple[ClusterSnapshot, ClusterSnapshot, list[Pod]]:
    """Node a empties first (removal committed before b is checked); b's drain is blocked by a
    bare pod, with or without a PDB covering its other pod; c is a roomy destination. The second
    snapshot changes only c (a new pod), so b keeps its pods tuple."""
    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000), make_node("c", cpu_m=16000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=100, owner_name="x"),
        make_pod("b-bare", node="b", cpu_m=500, owner_kind=None),
        make_pod("b-app", node="b", cpu_m=500, **({"labels": {"app": "guarded"}} if guarded else {"owner_name": "y"})),
        make_pod("c-big", node="c", cpu_m=9000, owner_name="z"),
    ]
    usage = {p.name: 0.5 for p in pods} | {"c-big": 0.4}
    first = _snapshot(NOW, nodes, pods, 1, usage)
    more = [*pods, make_pod("c-new", node="c", cpu_m=100, owner_name="z")]
    second = _keeping_tuples(_snapshot(NOW + STEP, nodes, more, 1, usage | {"c-new": 0.5}), first)
    return first, second, pods


def test_a_blocked_drain_is_answered_after_a_removal_elsewhere() -> None:
    """b's drain reads only its own pods: its verdict is learnt although a removal was committed
    before it in the pass, and answered again after another node's pods changed."""
    first, second, _ = _blocked_after_a_removal(guarded=False)
    cache = VerdictCache()
    full = evaluate(first, CFG)
    assert {r.node.name: r.reason.value for r in full.nodes}["b"] == "BlockedByPod"
    assert full.removable()[0].node.name == "a"
    _same(full, evaluate(first, CFG, verdicts=cache))
    hits = cache.hits
    assert second.pods_by_node["b"] is first.pods_by_node["b"]
    _same(evaluate(second, CFG), evaluate(second, CFG, verdicts=cache))
    assert cache.hits == hits + 1


def test_a_blocked_drain_a_pdb_covers_is_checked_again_after_a_committed_removal() -> None:
    """A PDB covers one of b's pods: the allowances left by the removal committed before it may
    change its drain, so its verdict is neither learnt nor answered there."""
    first, second, _ = _blocked_after_a_removal(guarded=True)
    cache = VerdictCache()
    _same(evaluate(first, CFG), evaluate(first, CFG, verdicts=cache))
    hits = cache.hits
    _same(evaluate(second, CFG), evaluate(second, CFG, verdicts=cache))
    assert cache.hits == hits


@pytest.mark.parametrize("a_first", [35.0, 0.5], ids=["removal-later", "removal-first"])
def test_a_blocked_drain_a_pdb_covers_is_kept_only_from_a_pass_without_removals(a_first: float) -> None:
    """A PDB covers b's pod b-app. Without a removal before b, its drain is blocked by its bare
    pod; after a's removal spends that PDB, b-app blocks first. Whichever comes first, a verdict
    found in one pass must not answer the other (learnt after a removal, or answered after
    one)."""
    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000), make_node("c", cpu_m=16000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=100, owner_name="x", labels={"app": "guarded"}),
        make_pod("b-app", node="b", cpu_m=500, owner_name="y", labels={"app": "guarded"}),
        make_pod("b-bare", node="b", cpu_m=500, owner_kind=None),
        make_pod("c-big", node="c", cpu_m=9000, owner_name="z"),
    ]
    usage = {"b-app": 0.5, "b-bare": 0.5, "c-big": 0.4}
    cache = VerdictCache()
    first = _snapshot(NOW, nodes, pods, 1, {**usage, "a-1": a_first})
    details = []
    for step, a_usage in enumerate((a_first, 35.5 - a_first)):  # a busy (35) or idle (0.5)
        fresh = _snapshot(NOW + step * STEP, nodes, pods, 1, {**usage, "a-1": a_usage})
        snap = dataclasses.replace(
            first, now=fresh.now, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
        )
        full = evaluate(snap, CFG)
        _same(full, evaluate(snap, CFG, verdicts=cache))
        details.append({r.node.name: r.detail for r in full.nodes}["b"])
    blocked_by = ["b-bare", "b-app: NotEnoughPdb"]
    order = blocked_by if a_first > 1 else blocked_by[::-1]
    assert [d.startswith(f"pod default/{w}") for d, w in zip(details, order, strict=True)] == [True, True]
