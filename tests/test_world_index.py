"""The replay world's incremental indexes give what a full rebuild gives (property tests):
:class:`WorldIndex` after any sequence of pod and node changes."""

from __future__ import annotations

from builders import make_node, make_pod
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scaler.model.layout import PodLayout
from scaler.model.records import Pod
from scaler.model.revisions import Revisions
from scaler.model.snapshot import ClusterSnapshot
from scaler.replay.world_index import TrackedDict, WorldIndex

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
@example(  # a pod deleted and made again under its name: its key moves to a new usage slot
    initial={"p0": "n1", "p1": "n1"},
    rounds=[[("delete", "p0", "n1", "Running"), ("bind", "p0", "n2", "Running")]],
)
@example(  # evicted, then bound again in its own (earlier) slot: it cannot just go last
    initial={"p0": "n1", "p1": "n1"},
    rounds=[[("unbind", "p0", "", "Running")], [("bind", "p0", "n2", "Running")]],
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
    before: tuple[ClusterSnapshot, Revisions] | None = None
    for round_ in rounds:
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
        # The rows of PodMetricsColumns: every bound pod's slot (any key order), the same dict
        # while no pod changed.
        rows = index.bound_rows()
        assert rows == dict(bound) and len(rows) == len(bound) and index.bound_rows() is rows
        for key, slot in bound:  # read as PodMetricsColumns reads it
            assert key in rows and rows.get(key) == slot and rows[key] == slot
        for key in [("default", "never"), *(("default", p.name) for p in pods.values() if not p.node_name)]:
            assert key not in rows and rows.get(key, -1) == -1
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
        # Revisions: made for this snapshot, and a node whose object or pods changed has a new one.
        rev = snap.revisions
        assert rev is not None and rev.describes(snap)
        if before is not None:
            for name in want.node_by_name:
                moved = before[0].pods_by_node.get(name) != want.pods_by_node.get(name)
                if moved or before[0].node_by_name.get(name) != want.node_by_name[name]:
                    assert rev.nodes[name] != before[1].nodes.get(name)
        before = (want, rev)
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
