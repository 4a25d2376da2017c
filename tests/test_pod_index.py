"""The pod index: :class:`LazyPodIndex` (each kind built on its first question) answers as
:class:`PodIndex` does for the same pods, in the same order, whatever is asked first; and
:class:`PodIndex` updated node by node answers as one built anew (each node's pods in any
order), whether the pods of the update are new objects or the same ones kept, moved to other
nodes, listed in another order or twice."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.model.records import Pod
from scaler.simulator.pod_index import LazyPodIndex, PodIndex
from tests.builders import make_pod

NAMESPACES = ("default", "shop")
KEYS = ("app", "tier")
VALUES = ("a", "b")


@st.composite
def pods_by_node(draw: st.DrawFn) -> dict[str, list[Pod]]:
    out: dict[str, list[Pod]] = {}
    for n in range(draw(st.integers(0, 4))):
        node = f"n{n}"
        out[node] = []
        for j in range(draw(st.integers(0, 4))):
            labels = {k: draw(st.sampled_from(VALUES)) for k in KEYS if draw(st.booleans())}
            uid = draw(st.sampled_from(["u1", "u2", f"{node}-{j}"]))  # a UID may repeat
            out[node].append(
                make_pod(
                    f"{node}-p{j}",
                    namespace=draw(st.sampled_from(NAMESPACES)),
                    node=node,
                    labels=labels,
                    uid=uid,
                )
            )
    return out


QUESTIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("label"),
            st.sampled_from(NAMESPACES),
            st.sampled_from(("", *KEYS)),
            st.sampled_from(VALUES),
        ),
        st.tuples(st.just("uid"), st.sampled_from(["u1", "u2", "n0-0", "none"])),
        st.tuples(st.just("namespaces")),
    ),
    max_size=12,
)


def _ask(index: PodIndex | LazyPodIndex, q: tuple) -> object:
    if q[0] == "label":
        return {n: [id(p) for p in pods] for n, pods in index.with_label(q[1], q[2], q[3]).items()}
    if q[0] == "uid":
        return {n: [id(p) for p in pods] for n, pods in index.with_uid(q[1]).items()}
    return list(index.namespaces())


@settings(max_examples=150, deadline=None)
@given(pods=pods_by_node(), questions=QUESTIONS)
def test_a_lazy_index_answers_as_the_full_one(pods: dict[str, list[Pod]], questions: list[tuple]) -> None:
    full, lazy = PodIndex.of(pods), LazyPodIndex(pods)
    assert len(lazy) == len(full)
    for q in questions:
        assert _ask(lazy, q) == _ask(full, q), q


@settings(max_examples=100, deadline=None)
@given(before=pods_by_node(), after=pods_by_node(), questions=QUESTIONS)
def test_an_index_followed_node_by_node_answers_as_one_built_anew(
    before: dict[str, list[Pod]], after: dict[str, list[Pod]], questions: list[tuple]
) -> None:
    index = PodIndex.of(before)
    index.follow(after)
    fresh = PodIndex.of(after)
    for q in questions:
        got, want = _ask(index, q), _ask(fresh, q)
        if q[0] == "namespaces":
            got, want = sorted(got), sorted(want)  # type: ignore[type-var]
        else:  # node order follows the updates, and each node's pods are in any order
            got, want = _as_set(got), _as_set(want)
        assert got == want, q


@st.composite
def updated(draw: st.DrawFn, before: dict[str, list[Pod]]) -> dict[str, list[Pod]]:
    """``before`` after pods were kept, dropped, moved between nodes, added, reordered or
    listed twice: mostly the very objects of ``before``, as a world's update gives them."""
    pool = [p for pods in before.values() for p in pods]
    out: dict[str, list[Pod]] = {}
    for n in range(draw(st.integers(0, 5))):
        node = f"n{n}"
        kept = [p for p in before.get(node, []) if draw(st.booleans())]
        moved = draw(st.lists(st.sampled_from(pool), max_size=2)) if pool else []
        fresh = [
            make_pod(f"{node}-new{j}", node=node, labels={"app": "a"}) for j in range(draw(st.integers(0, 2)))
        ]
        out[node] = draw(st.permutations([*kept, *moved, *fresh]))
    return out


def _as_set(answer: object) -> object:
    if isinstance(answer, dict):
        return {n: sorted(ids) for n, ids in answer.items()}
    return sorted(answer)  # type: ignore[call-overload]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), before=pods_by_node(), questions=QUESTIONS)
def test_an_index_updated_with_the_same_pod_objects_answers_as_one_built_anew(
    data: st.DataObject, before: dict[str, list[Pod]], questions: list[tuple]
) -> None:
    index, after = PodIndex.of(before), before
    for _ in range(data.draw(st.integers(1, 3))):
        after = data.draw(updated(after))
        index.follow(after)
    fresh = PodIndex.of(after)
    for q in questions:
        assert _as_set(_ask(index, q)) == _as_set(_ask(fresh, q)), q
