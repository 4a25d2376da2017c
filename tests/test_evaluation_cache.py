"""The evaluation cache (scaler.simulator.cache): an evaluation with an EvaluationCache equals a
full one at every step, whatever changes between steps (usage, the clock, a pod moved or
deleted, a taint, a PDB), with the snapshots numbered by a source that compares them
(RevisionCounter.follow) or by the live watch cache; and the cache does answer."""

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
from scaler.model.revisions import RevisionCounter
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.cache import EvaluationCache
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


def _same(full: Evaluation, reused: Evaluation) -> None:
    assert reused.nodes == full.nodes
    assert reused.held == full.held
    assert full.context is not None and reused.context is not None
    assert reused.context.simulator.rotation() == full.context.simulator.rotation()


def _both(snap: ClusterSnapshot, cache: EvaluationCache, counter: RevisionCounter) -> Evaluation:
    """Evaluate ``snap`` without a cache, and numbered by ``counter`` with ``cache``; assert
    both are the same and return the full one."""
    full = evaluate(snap, CFG)
    _same(full, evaluate(dataclasses.replace(snap, revisions=counter.follow(snap)), CFG, cache=cache))
    return full


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), data=st.data())
def test_incremental_evaluation_equals_a_full_one_at_every_step(
    cluster: tuple[list, list[Pod]], data: st.DataObject
) -> None:
    nodes, pods = cluster
    cache, counter = EvaluationCache(), RevisionCounter()
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
            else:  # 0 blocks; 1 lets one pod go, so a removal earlier in a pass may spend it; 2, 3 more
                pdb_allowed = data.draw(st.integers(0, 3))
            snap = structure = _snapshot(now, nodes, pods, pdb_allowed, usage)
        _both(snap, cache, counter)
    event(f"checks answered from the cache: {'some' if cache.hits else 'none'}")


def test_a_packed_cluster_is_answered_from_the_cache_once_learnt() -> None:
    """Every node is refused for its first pod by requests alone: the second evaluation with
    the same objects answers every check from the cache, with the same result."""
    nodes = [make_node(f"n{k}", cpu_m=2000) for k in range(4)]
    pods = [make_pod(f"n{k}-big", node=f"n{k}", cpu_m=1500, owner_name="a") for k in range(4)]
    usage = {p.name: 0.1 for p in pods}
    first = _snapshot(NOW, nodes, pods, 0, usage)
    cache, counter = EvaluationCache(), RevisionCounter()
    _both(first, cache, counter)
    assert (cache.hits, cache.misses) == (0, 4)
    fresh = _snapshot(NOW + STEP, nodes, pods, 0, {p.name: 0.2 for p in pods})
    later = dataclasses.replace(
        first, now=NOW + STEP, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
    )
    full = _both(later, cache, counter)
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
    cache, counter = EvaluationCache(), RevisionCounter()
    _both(first, cache, counter)
    fresh = _snapshot(NOW + STEP, nodes, pods, 0, {**busy_a, "a-q": 0.1})
    later = dataclasses.replace(
        first, now=NOW + STEP, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
    )
    full = _both(later, cache, counter)
    by_name = {r.node.name: r for r in full.nodes}
    assert by_name["a"].removable
    assert by_name["c"].detail == "pod default/c-p fits nowhere: NodeResourcesFit: Insufficient cpu (1 node)"


def test_node_facts_are_kept_while_the_node_revision_holds() -> None:
    """Rule 1: a node keeps its facts while its revision is the same; a node whose pods changed
    gets new ones, and the context's utilizations equal a context's without the cache."""
    from scaler.simulator.cluster import RemovalContext
    from scaler.simulator.registry import load_filters

    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=500, owner_name="x"),
        make_pod("b-1", node="b", cpu_m=700, owner_name="x", required_anti_affinity=(ANTI,)),
    ]
    counter = RevisionCounter()

    def numbered(snap: ClusterSnapshot) -> ClusterSnapshot:
        return dataclasses.replace(snap, revisions=counter.follow(snap))

    first = numbered(_snapshot(NOW, nodes, pods, 0, {"a-1": 0.5, "b-1": 0.5}))
    cache = EvaluationCache()
    kept = cache.facts(first, CFG)
    bigger = msgspec.structs.replace(
        pods[0], requests=dataclasses.replace(pods[0].requests, cpu_millicores=1500)
    )
    second = numbered(_snapshot(NOW + STEP, nodes, [bigger, pods[1]], 0, {"a-1": 0.5, "b-1": 0.5}))
    facts = cache.facts(second, CFG)
    assert facts["b"] is kept["b"]
    assert facts["a"] is not kept["a"]
    assert facts["a"].requested.cpu_millicores == 1500
    assert cache.facts(dataclasses.replace(second, revisions=None), CFG)["b"] is not kept["b"]  # no numbers
    filters = load_filters(CFG)
    with_cache, without = RemovalContext(second, CFG, filters, cache=cache), RemovalContext(second, CFG, filters)
    assert with_cache.utils == without.utils
    assert with_cache.utils["a"].request_cpu == 1500 / 4000
    assert with_cache.state.anti_affinity_pods == without.state.anti_affinity_pods == {"b": 1}
    assert (
        with_cache.state.anti_affinity_keys == without.state.anti_affinity_keys == {"kubernetes.io/hostname"}
    )
    # A pod that started after the newest NodeMetrics window began counts by its load, not its
    # PodMetrics: the kept facts tell the two apart.
    fresh = msgspec.structs.replace(bigger, start_ts=NOW + STEP - 10)
    third = numbered(_snapshot(NOW + STEP, nodes, [fresh, pods[1]], 0, {"a-1": 0.5, "b-1": 0.5}))
    with_cache = RemovalContext(third, CFG, filters, cache=cache)
    assert with_cache.utils == RemovalContext(third, CFG, filters).utils
    assert with_cache.utils["a"].pods_not_in_metrics == 1


def _blocked_after_a_removal(guarded: bool) -> tuple[ClusterSnapshot, ClusterSnapshot, list[Pod]]:
    """Node a empties first (removal committed before b is checked); b's drain is blocked by a
    bare pod, with or without a PDB covering its other pod (a's pod is not covered); c is a
    roomy destination. The second snapshot changes only c (a new pod)."""
    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000), make_node("c", cpu_m=16000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=100, owner_name="x"),
        make_pod("b-bare", node="b", cpu_m=500, owner_kind=None),
        make_pod(
            "b-app",
            node="b",
            cpu_m=500,
            **({"labels": {"app": "guarded"}} if guarded else {"owner_name": "y"}),
        ),
        make_pod("c-big", node="c", cpu_m=9000, owner_name="z"),
    ]
    usage = {p.name: 0.5 for p in pods} | {"c-big": 0.4}
    first = _snapshot(NOW, nodes, pods, 1, usage)
    more = [*pods, make_pod("c-new", node="c", cpu_m=100, owner_name="z")]
    second = _snapshot(NOW + STEP, nodes, more, 1, usage | {"c-new": 0.5})
    return first, second, pods


@pytest.mark.parametrize("guarded", [False, True], ids=["no-pdb", "pdb-untouched"])
def test_a_blocked_drain_is_answered_after_a_removal_elsewhere(guarded: bool) -> None:
    """Rule 3: b's drain reads its own pods and the allowances of the PDBs covering them (none,
    or one a's removal does not charge): its verdict is learnt although a removal was committed
    before it in the pass, and answered again after another node's pods changed."""
    first, second, _ = _blocked_after_a_removal(guarded)
    cache, counter = EvaluationCache(), RevisionCounter()
    full = _both(first, cache, counter)
    assert {r.node.name: r.reason.value for r in full.nodes}["b"] == "BlockedByPod"
    assert full.removable()[0].node.name == "a"
    hits = cache.hits
    _both(second, cache, counter)
    assert cache.hits == hits + 1


def test_a_nodes_drain_rules_are_answered_again_and_charge_its_pdbs() -> None:
    """Rule 5: the second evaluation answers the drain rules of the removable node from the
    cache (its pods, usage aside, unchanged) and charges the PDB covering its pod as the rules
    do: a later node covered by the same PDB is blocked in both evaluations."""
    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000), make_node("c", cpu_m=16000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=100, owner_name="x", labels={"app": "guarded"}),
        make_pod("b-app", node="b", cpu_m=600, owner_name="y", labels={"app": "guarded"}),
        make_pod("c-big", node="c", cpu_m=9000, owner_name="z"),
    ]
    usage = {p.name: 0.5 for p in pods} | {"c-big": 0.4}
    cache, counter = EvaluationCache(), RevisionCounter()
    first = _snapshot(NOW, nodes, pods, 1, usage)
    _both(first, cache, counter)
    assert cache.drain_hits == 0
    fresh = _snapshot(NOW + STEP, nodes, pods, 1, usage | {"a-1": 0.6})
    full = _both(
        dataclasses.replace(first, now=fresh.now, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics),
        cache,
        counter,
    )
    assert cache.drain_hits >= 1
    verdicts = {r.node.name: r.detail for r in full.nodes}
    assert full.removable()[0].node.name == "a"
    assert verdicts["b"].startswith("pod default/b-app: NotEnoughPdb"), verdicts


def _guarded() -> tuple[list, list[Pod], dict[str, float]]:
    """Nodes a, b and c; a PDB's selector (app=guarded) covers a's pod and b's pod b-app, b also
    holds a bare pod, c a big one; the usage of all pods but a's."""
    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000), make_node("c", cpu_m=16000)]
    pods = [
        make_pod("a-1", node="a", cpu_m=100, owner_name="x", labels={"app": "guarded"}),
        make_pod("b-app", node="b", cpu_m=500, owner_name="y", labels={"app": "guarded"}),
        make_pod("b-bare", node="b", cpu_m=500, owner_kind=None),
        make_pod("c-big", node="c", cpu_m=9000, owner_name="z"),
    ]
    return nodes, pods, {"b-app": 0.5, "b-bare": 0.5, "c-big": 0.4}


def test_a_nodes_drain_answers_at_two_allowance_levels_are_both_kept() -> None:
    """Rule 5 keeps several answers per node: a PDB allowing 1 covers a's pod and b's pod b-app.
    When a is removed first (idle), its removal spends the allowance and b-app blocks b's drain;
    when a stays (busy), b's bare pod blocks. Busy, idle, busy: the third pass answers b's drain
    rules from the answer of the first, kept beside the second's, and every pass equals a full
    evaluation."""
    nodes, pods, usage = _guarded()
    cache, counter = EvaluationCache(), RevisionCounter()
    first = _snapshot(NOW, nodes, pods, 1, {**usage, "a-1": 35.0})
    hits = []
    for step, a_usage in enumerate((35.0, 0.5, 35.0)):
        fresh = _snapshot(NOW + step * STEP, nodes, pods, 1, {**usage, "a-1": a_usage})
        snap = dataclasses.replace(first, now=fresh.now, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics)
        _both(snap, cache, counter)
        hits.append(cache.drain_hits)
    assert hits[2] > hits[1], hits


def test_a_kept_drain_answer_is_not_used_for_a_node_whose_pods_moved_in_the_state() -> None:
    """Rule 5 holds only while the simulation state holds the node's pods as the snapshot gave
    them: with one pod taken off b and a bare pod put on it (the same count), b's drain rules
    run again and the bare pod blocks."""
    from scaler.simulator.cluster import RemovalContext, simulate_node_removal
    from scaler.simulator.registry import load_filters

    nodes = [make_node("a", cpu_m=4000), make_node("b", cpu_m=4000)]
    pods = [
        make_pod("b-1", node="b", cpu_m=100, owner_name="x"),
        make_pod("b-2", node="b", cpu_m=100, owner_name="x"),
    ]
    counter = RevisionCounter()
    first = _snapshot(NOW, nodes, pods, 1, {p.name: 0.5 for p in pods})
    first = dataclasses.replace(first, revisions=counter.follow(first))
    cache, filters = EvaluationCache(), load_filters(CFG)
    ctx = RemovalContext(first, CFG, filters, cache=cache)
    assert simulate_node_removal(ctx, "b", (["a"],), commit=False).removable
    ctx = RemovalContext(first, CFG, filters, cache=cache)
    ctx.state.unschedule(pods[1], "b")
    ctx.state.place(make_pod("bare", node="b", cpu_m=100, owner_kind=None), "b")
    removal = simulate_node_removal(ctx, "b", (["a"],), commit=False)
    assert removal.reason.value == "BlockedByPod" and "default/bare" in removal.detail, removal


@pytest.mark.parametrize("allowed", [1, 3], ids=["pdb-1", "pdb-3"])
@pytest.mark.parametrize("a_first", [35.0, 0.5], ids=["removal-later", "removal-first"])
def test_a_blocked_drain_is_checked_again_when_a_removal_charged_its_pdb(a_first: float, allowed: int) -> None:
    """A PDB covers b's pod b-app and a's pod, a is busy (35) in one evaluation and idle (0.5,
    removed before b is checked) in the other. Allowing 1, a's removal spends it and b-app blocks
    b's drain; without that removal, b's bare pod blocks. Whichever comes first, a verdict found
    in one pass must not answer the other (the allowance it read went below 1). Allowing 3, b
    sees 2 or 3, both "at least 1", the only level the drain rules read (rule 3): its bare pod
    blocks both times and the second evaluation answers it from the cache."""
    nodes, pods, usage = _guarded()
    cache, counter = EvaluationCache(), RevisionCounter()
    first = _snapshot(NOW, nodes, pods, allowed, {**usage, "a-1": a_first})
    details = []
    hits = 0
    for step, a_usage in enumerate((a_first, 35.5 - a_first)):  # a busy (35) or idle (0.5)
        fresh = _snapshot(NOW + step * STEP, nodes, pods, allowed, {**usage, "a-1": a_usage})
        snap = dataclasses.replace(
            first, now=fresh.now, node_metrics=fresh.node_metrics, pod_metrics=fresh.pod_metrics
        )
        hits = cache.hits
        full = _both(snap, cache, counter)
        details.append({r.node.name: r.detail for r in full.nodes}["b"])
    blocked_by = ["b-bare", "b-app: NotEnoughPdb"] if allowed == 1 else ["b-bare", "b-bare"]
    order = blocked_by if a_first > 1 else blocked_by[::-1]
    assert [d.startswith(f"pod default/{w}") for d, w in zip(details, order, strict=True)] == [True, True]
    assert cache.hits == hits + (allowed > 1)


def test_a_kept_placement_failure_is_checked_again_when_a_reading_lacks_a_container() -> None:
    """Rule 4 answers a kept ``NoPlaceToMovePods`` without checking loads again only while every
    pod to move requests CPU and memory and no reading is partial: a pod whose PodMetrics come to
    lack a container without a memory request has an unknown load whatever its own request, and
    its node is ``MetricsUnavailable``, with the cache as without."""
    nodes = [make_node(f"n{k}", cpu_m=2000) for k in range(4)]
    pods = [
        make_pod(
            f"n{k}-big",
            node=f"n{k}",
            cpu_m=1500,
            owner_name="a",
            containers=("app", "log"),
            container_requests=(("app", 1500, 256 * MI), ("log", 0, 0)),
        )
        for k in range(4)
    ]
    first = _snapshot(NOW, nodes, pods, 0, {p.name: 0.1 for p in pods})
    cache, counter = EvaluationCache(), RevisionCounter()
    _both(first, cache, counter)
    fresh = _snapshot(NOW + STEP, nodes, pods, 0, {p.name: 0.2 for p in pods})
    lacking = [
        msgspec.structs.replace(m, containers=("app",)) if m.name == "n0-big" else m
        for m in fresh.pod_metrics.values()
    ]
    later = ClusterSnapshot.create(
        now=NOW + STEP,
        nodes=nodes,
        pods=first.pods,
        pdbs=first.pdbs,
        node_metrics=fresh.node_metrics.values(),
        pod_metrics=lacking,
    )
    assert later.partial_pod_metrics
    full = _both(later, cache, counter)
    by_name = {r.node.name: r for r in full.nodes}
    assert by_name["n0"].reason.value == "MetricsUnavailable", by_name["n0"]




def test_a_kept_verdict_is_checked_again_when_only_the_dra_objects_change() -> None:
    """Rule 3 with Dynamic Resource Allocation: gpu-1's pod holds a device through a claim of
    its own, whose DeviceClass selects with a CEL function the simulation does not know: the
    claim cannot be decided, so gpu-1 is ``BlockedByPod``. Then the DeviceClass is fixed (no
    node, pod or PDB changed, only a DRA object): the kept verdict must not be answered again.
    The evaluation with the cache equals the full one at both steps, and the full one no longer
    finds the drain blocked."""
    from dra_objects import CLASS, DRIVER, claim, device, device_class, local_slice, node, node_metrics, pod

    from scaler.model.snapshot import build_snapshot

    acc = {"cloud.google.com/gke-accelerator": "nvidia-l4"}

    def objects(selector: str) -> list[dict[str, object]]:
        return [
            node("gpu-1", labels=acc), node("gpu-2", labels=acc), node("cpu-1", pool="cpu"),
            local_slice("gpu-1", [device(f"gpu-{i}") for i in range(4)]),
            local_slice("gpu-2", [device(f"gpu-{i}") for i in range(4)]),
            device_class(CLASS, selector),
            claim("infer-0-gpu", owner="infer-0", allocated=[("gpu", "gpu-1", "gpu-0")], node_name="gpu-1",
                  reserved_for=["infer-0"]),
            pod("infer-0", "gpu-1", template_claims={"gpu": "infer-0-gpu"}),
            node_metrics("gpu-1"), node_metrics("gpu-2"), node_metrics("cpu-1"),
        ]  # fmt: skip

    cache, counter = EvaluationCache(), RevisionCounter()
    first = _both(build_snapshot(objects(f'device.driver.frobnicate() == "{DRIVER}"')), cache, counter)
    assert {r.node.name: r.reason.value for r in first.nodes}["gpu-1"] == "BlockedByPod"
    later = _both(build_snapshot(objects(f'device.driver == "{DRIVER}"')), cache, counter)
    assert {r.node.name: r.reason.value for r in later.nodes}["gpu-1"] != "BlockedByPod"
