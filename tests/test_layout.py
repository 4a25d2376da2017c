"""PodLayout: an updated layout is always the one a fresh build gives (property tests)."""

from __future__ import annotations

from builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.model.layout import PodLayout
from scaler.model.records import Pod
from scaler.model.snapshot import ClusterSnapshot

NAMESPACES = ["a", "b", "kube-system", "a-b"]
NAMES = [f"p{i}" for i in range(12)] + ["p", "p-1", "q"]
NODES = ["", "n1", "n2", "n3", "n10"]

keys = st.tuples(st.sampled_from(NAMESPACES), st.sampled_from(NAMES))
# A change: put the pod at this key on this node (a new object each time), or delete it (None).
changes = st.lists(st.tuples(keys, st.one_of(st.none(), st.sampled_from(NODES))), max_size=30)


def _pod(key: tuple[str, str], node: str, version: int) -> Pod:
    return make_pod(key[1], namespace=key[0], node=node, cpu_m=version)


def _same(a: PodLayout, b: PodLayout) -> None:
    """Same pods in the same order (the same objects), same groups."""
    assert [id(p) for p in a.pods] == [id(p) for p in b.pods]
    assert {k: [id(p) for p in v] for k, v in a.by_node.items()} == {
        k: [id(p) for p in v] for k, v in b.by_node.items()
    }


@settings(max_examples=300, deadline=None)
@given(initial=st.dictionaries(keys, st.sampled_from(NODES), max_size=40), rounds=st.lists(changes, max_size=4))
def test_update_equals_a_fresh_build(initial: dict[tuple[str, str], str], rounds: list[list]) -> None:
    pods = {k: _pod(k, node, 0) for k, node in initial.items()}
    layout = PodLayout.build(pods.values())
    for version, round_ in enumerate(rounds, start=1):
        changed = set()
        for key, node in round_:
            changed.add(key)
            if node is None:
                pods.pop(key, None)
            else:
                pods[key] = _pod(key, node, version)
        layout = layout.update(pods, changed)
        _same(layout, PodLayout.build(pods.values()))
        assert all(group for group in layout.by_node.values())


@settings(max_examples=100, deadline=None)
@given(initial=st.dictionaries(keys, st.sampled_from(NODES), min_size=1, max_size=40), data=st.data())
def test_unchanged_keys_may_be_listed_as_changed(initial: dict[tuple[str, str], str], data: st.DataObject) -> None:
    pods = {k: _pod(k, node, 0) for k, node in initial.items()}
    layout = PodLayout.build(pods.values())
    listed = data.draw(st.sets(st.sampled_from(sorted(pods)) | keys))
    _same(layout.update(pods, listed), layout)


def test_no_change_keeps_the_layout_and_many_changes_build_anew() -> None:
    pods = {("a", f"p{i:03}"): make_pod(f"p{i:03}", namespace="a", node=f"n{i % 7}") for i in range(200)}
    layout = PodLayout.build(pods.values())
    assert layout.update(pods, set()) is layout
    # One pod in eight or fewer changed: the untouched groups are the same objects.
    moved = ("a", "p005")
    pods[moved] = make_pod("p005", namespace="a", node="n6")
    small = layout.update(pods, {moved})
    assert small.by_node["n1"] is layout.by_node["n1"] and small.by_node["n5"] is not layout.by_node["n5"]
    _same(small, PodLayout.build(pods.values()))
    # More: a fresh build (no group is shared), with the same result.
    many = {("a", f"p{i:03}") for i in range(0, 200, 2)}
    for key in many:
        pods[key] = make_pod(key[1], namespace="a", node="n0")
    big = small.update(pods, many)
    assert big.by_node["n1"] is not small.by_node["n1"]
    _same(big, PodLayout.build(pods.values()))


def test_a_snapshot_from_a_layout_equals_one_from_the_pods() -> None:
    nodes = [make_node("n2"), make_node("n1"), make_node("empty")]
    pods = [make_pod(f"p{i}", namespace="ab"[i % 2], node=["n1", "n2", "gone", ""][i % 4]) for i in range(20)]
    from_pods = ClusterSnapshot.create(0.0, nodes, pods)
    from_layout = ClusterSnapshot.create(0.0, nodes, PodLayout.build(reversed(pods)))
    assert from_layout == from_pods
    assert from_layout.pods_by_node["empty"] == ()
    assert set(from_layout.pods_by_node) == {"n1", "n2", "empty"}  # pods on unknown nodes: in pods only
    assert len(from_layout.pods) == 20
