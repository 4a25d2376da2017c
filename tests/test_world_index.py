"""The replay world's incremental indexes give what a full rebuild gives (property tests):
:class:`WorldIndex` after any sequence of pod and node changes, and :class:`AntiAffinity`'s
verdicts against the InterPodAffinity filter node by node."""

from __future__ import annotations

import numpy as np
from builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.model.layout import PodLayout
from scaler.model.records import LabelSelector, Pod, PodAffinityTerm
from scaler.model.snapshot import ClusterSnapshot
from scaler.replay.sim_affinity import AntiAffinity
from scaler.replay.world_index import TrackedDict, WorldIndex
from scaler.simulator.filters import InterPodAffinity
from scaler.simulator.state import ClusterState

NODES = ["n1", "n2", "n3", "n10"]
NAMES = [f"p{i}" for i in range(10)]
PHASES = ["Running", "Running", "Succeeded"]

# A change: (what, pod name, node name, phase).
changes = st.lists(
    st.tuples(
        st.sampled_from(["bind", "unbind", "delete", "add-node", "remove-node", "mark-node"]),
        st.sampled_from(NAMES),
        st.sampled_from([*NODES, "gone"]),
        st.sampled_from(PHASES),
    ),
    max_size=25,
)


def _full(pods: dict[str, Pod], nodes: dict[str, object], slot_of: dict[str, int]) -> tuple[list, list, list]:
    """What the world computed from every pod before the index: placement and bound pods."""
    names = sorted(nodes)
    index = {n: i for i, n in enumerate(names)}
    placed = [
        (slot_of[p.uid], index[p.node_name])
        for p in pods.values()
        if p.node_name in index and not p.is_terminal
    ]
    bound = [((p.namespace, p.name), slot_of[p.uid]) for p in pods.values() if p.node_name]
    return placed, bound, names


@settings(max_examples=200, deadline=None)
@given(
    initial=st.dictionaries(st.sampled_from(NAMES), st.sampled_from(["", *NODES])),
    rounds=st.lists(changes, max_size=4),
)
def test_world_index_answers_as_a_full_rebuild(initial: dict[str, str], rounds: list[list]) -> None:
    nodes: TrackedDict[str, object] = TrackedDict((n, make_node(n)) for n in NODES[:3])
    pods: TrackedDict[str, Pod] = TrackedDict()
    slot_of: dict[str, int] = {}
    index = WorldIndex(pods, nodes, slot_of)  # type: ignore[arg-type]

    def add(name: str, node: str) -> None:
        pod = make_pod(name, node=node, uid=f"uid-{name}-{len(slot_of)}")
        pods[pod.uid] = pod
        index.slot_added(pod.uid, pod.uid in slot_of)
        slot_of[pod.uid] = len(slot_of)

    for name, node in initial.items():
        add(name, node)
    for step, round_ in enumerate(rounds):
        for what, name, node, phase in round_:
            uid = next((u for u, p in pods.items() if p.name == name), None)
            if what == "bind" and uid is not None:
                pods[uid] = make_pod(name, node=node, uid=uid, phase=phase)
            elif what == "bind":
                add(name, node)
            elif what == "unbind" and uid is not None:
                pods[uid] = make_pod(name, node="", uid=uid)
            elif what == "delete" and uid is not None:
                del pods[uid]
            elif what == "add-node":
                nodes[node] = make_node(node)
            elif what == "remove-node":
                nodes.pop(node, None)
            elif what == "mark-node" and node in nodes:
                nodes[node] = make_node(node, unschedulable=True)
        placed, bound, names = _full(pods, nodes, slot_of)
        slots, where, got_names = index.placement()
        assert got_names == names
        assert list(zip(slots.tolist(), where.tolist(), strict=True)) == placed
        for node in [*NODES, "gone"]:
            assert index.pods_on(node) == [p for p in pods.values() if p.node_name == node]
        keys, bound_slots = index.bound()
        assert list(zip(keys, bound_slots.tolist(), strict=True)) == bound
        # PodMetrics: the same at the same step whether made now or reused (two rounds a step).
        at = (float(step // 2), step // 2)
        usage = np.arange(len(slot_of), dtype=np.float64) * 1.5 + at[0]
        metrics = index.pod_metrics(keys, bound_slots, at, usage, usage * 2)
        assert list(metrics) == [k for k, _ in bound]
        assert [
            (m.namespace, m.name, m.timestamp, m.cpu_millicores, m.memory_bytes) for m in metrics.values()
        ] == [(*k, at[0], int(usage[s]), int(usage[s] * 2)) for k, s in bound]
        layout, fresh = index.layout(), PodLayout.build(pods.values())
        assert [id(p) for p in layout.pods] == [id(p) for p in fresh.pods]
        assert {k: [id(p) for p in v] for k, v in layout.by_node.items()} == {
            k: [id(p) for p in v] for k, v in fresh.by_node.items()
        }
        snap = index.structure(ClusterSnapshot.create(0.0, [], []))
        counted = index.counted_pods(snap)  # the snapshot's pods_by_node when none is terminal
        terminal = any(p.is_terminal for p in pods.values() if p.node_name)
        assert (counted is None) == terminal and (counted is None or counted is snap.pods_by_node)
        want = ClusterSnapshot.create(0.0, nodes.values(), pods.values())  # type: ignore[arg-type]
        assert (snap.nodes, snap.pods, snap.pods_by_node, snap.node_by_name) == (
            want.nodes,
            want.pods,
            want.pods_by_node,
            want.node_by_name,
        )


def test_tracked_dict_records_every_change_and_the_order_of_new_keys() -> None:
    d: TrackedDict[str, int] = TrackedDict([("a", 1)])
    assert d.take() == ({"a"}, ["a"]) and d.take() == (set(), [])
    d["b"] = 2
    d["a"] = 3  # replaced: keeps its place, not new
    d.setdefault("c", 4)
    d.update(d=5)
    d.pop("b")
    del d["c"]
    assert d.take() == ({"a", "b", "c", "d"}, ["b", "c", "d"])
    d.clear()
    assert d.take() == ({"a", "d"}, []) and d == {}


# ---- AntiAffinity ------------------------------------------------------------------------------

APPS = ["web", "db", "cache"]
ZONES = ["z1", "z2"]


def _term(app: str, key: str, namespaces: tuple[str, ...]) -> PodAffinityTerm:
    return PodAffinityTerm(LabelSelector({"app": app}), key, namespaces)


terms = st.lists(
    st.builds(
        _term,
        st.sampled_from(APPS),
        st.sampled_from(["kubernetes.io/hostname", "topology.kubernetes.io/zone", "rack"]),
        st.sampled_from([(), ("default",), ("other", "default")]),
    ),
    max_size=2,
)
pods_st = st.lists(
    st.tuples(st.sampled_from(APPS), st.sampled_from(["default", "other"]), st.integers(0, 5), terms),
    max_size=14,
)


@settings(max_examples=200, deadline=None)
@given(existing=pods_st, pending=pods_st)
def test_anti_affinity_gives_the_filters_verdicts(existing: list, pending: list) -> None:
    nodes = [
        make_node(f"n{i}", zone=ZONES[i % 2], labels={"rack": f"r{i // 3}"} if i != 5 else {})
        for i in range(6)
    ]
    pods = [
        make_pod(f"e{i}", namespace=ns, node=f"n{at}", labels={"app": app}, required_anti_affinity=tuple(ts))
        for i, (app, ns, at, ts) in enumerate(existing)
    ]
    state = ClusterState(ClusterSnapshot.create(0.0, nodes, pods))
    fast = AntiAffinity(state)
    f = InterPodAffinity(ScalerConfig())
    positions = state.positions(state.names)
    for i, (app, ns, at, ts) in enumerate(pending):
        pod = make_pod(f"q{i}", namespace=ns, node="", labels={"app": app}, required_anti_affinity=tuple(ts))
        refused = fast.refused(pod, positions)
        assert refused is not None
        slow = [f.filter(pod, state.nodes[n], state) is not None for n in state.names]
        assert refused.tolist() == slow
        dest = f"n{at}"
        state.place(pod, dest)  # as the scheduler does, whether or not the filter agrees
        state.commit()
        fast.placed(pod, dest)
