"""Property test: every built-in filter and TargetUsage answer the same for every node whether
asked node by node (``filter``), for many nodes (``filter_nodes``) or for the whole table
(``fit_mask``), in random clusters (pod affinity and anti-affinity with namespaces and
namespace selectors, spread constraints, taints, cordons, resources, usage), while the
simulation moves pods, ghosts and removes nodes, and reverts (the counts the pod-reading
filters keep per node must follow every step).

Also :class:`~scaler.simulator.removal.Prefilter`'s destinations: the nodes every filter
passes, as a node-by-node scan finds them."""

from __future__ import annotations

import msgspec
import numpy as np
from builders import GI, MI, make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.target_usage import TargetUsage
from scaler.config import ScalerConfig
from scaler.model.records import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    LabelSelector,
    LabelSelectorRequirement,
    Namespace,
    Pod,
    PodAffinityTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.registry import BUILTIN_FILTERS
from scaler.simulator.removal import Prefilter
from scaler.simulator.state import ClusterState

CFG = ScalerConfig()
FILTERS = [cls(CFG) for cls in BUILTIN_FILTERS] + [TargetUsage(CFG)]
APPS = ("web", "db", "cache")
KEYS = (LABEL_HOSTNAME, LABEL_ZONE, "rack")
NAMESPACES = ("default", "other")

selectors = st.sampled_from(
    [
        LabelSelector({"app": "web"}),
        LabelSelector({"app": "db"}),
        LabelSelector(match_expressions=(LabelSelectorRequirement("app", "In", ("web", "cache")),)),
        LabelSelector(),
        None,
    ]
)
terms = st.builds(
    PodAffinityTerm,
    selectors,
    st.sampled_from(KEYS),
    st.sampled_from([(), ("default",), ("other", "default")]),
    st.booleans(),
    st.sampled_from([None, LabelSelector({"team": "a"})]),
)
spreads = st.builds(
    TopologySpreadConstraint,
    st.integers(1, 2),
    st.sampled_from(KEYS),
    st.sampled_from(["DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"]),
    selectors,
)


@st.composite
def pods(draw: st.DrawFn, name: str, node: str) -> Pod:
    return make_pod(
        name,
        namespace=draw(st.sampled_from(NAMESPACES)),
        node=node,
        cpu_m=draw(st.integers(0, 1500)),
        mem=draw(st.integers(0, 3)) * GI,
        labels={"app": draw(st.sampled_from(APPS))},
        required_anti_affinity=tuple(draw(st.lists(terms, max_size=2))),
        required_affinity=tuple(draw(st.lists(terms, max_size=1))) if draw(st.integers(0, 4)) == 0 else (),
        topology_spread=tuple(draw(st.lists(spreads, max_size=1))),
        tolerations=(Toleration("dedicated", "Equal", "x", "NoSchedule"),) if draw(st.booleans()) else (),
        deletion_ts=1.0 if draw(st.integers(0, 9)) == 0 else None,
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[ClusterState, list[Pod], list[tuple[str, int, int]]]:
    nodes = []
    for i in range(draw(st.integers(2, 7))):
        labels = {"rack": f"r{i // 3}"} if draw(st.integers(0, 5)) else {}
        nodes.append(
            make_node(
                f"n{i}",
                cpu_m=draw(st.sampled_from([2000, 4000])),
                mem=8 * GI,
                zone=draw(st.sampled_from(["z1", "z2", ""])),
                labels=labels,
                taints=(Taint("dedicated", "x", "NoSchedule"),) if draw(st.integers(0, 4)) == 0 else (),
                unschedulable=draw(st.integers(0, 6)) == 0,
            )
        )
    bound = [draw(pods(f"e{i}", draw(st.sampled_from(nodes)).name)) for i in range(draw(st.integers(0, 12)))]
    namespaces = [Namespace("default", {"team": "a"}), Namespace("other", {"team": "b"})]
    snap = ClusterSnapshot.create(0.0, nodes, bound, namespaces=namespaces if draw(st.booleans()) else ())
    usage = {
        n.name: (draw(st.integers(0, 2000)), draw(st.integers(0, 6)) * GI)
        for n in nodes
        if draw(st.integers(0, 5))
    }
    state = ClusterState(snap, usage=usage)
    incoming = [draw(pods(f"q{i}", "")) for i in range(draw(st.integers(1, 5)))]
    # Steps: (what, node index, pod index): place an incoming pod, ghost a node with its pods
    # taken off, remove a node, revert to a checkpoint taken before.
    steps = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["place", "ghost", "remove", "revert"]), st.integers(0, 6), st.integers(0, 4)
            ),
            max_size=6,
        )
    )
    return state, incoming, steps


def _check(state: ClusterState, pod: Pod) -> None:
    rows = np.arange(len(state.names), dtype=np.intp)
    for f in FILTERS:
        slow = [f.filter(pod, state.nodes[n], state) for n in state.names]
        vector = f.filter_nodes(pod, rows, state)  # type: ignore[attr-defined]
        if vector is not None:
            codes, reasons = vector
            assert [None if c == 0 else reasons[c - 1] for c in codes.tolist()] == slow, f.name
        mask = f.fit_mask(pod, state)  # type: ignore[attr-defined]
        if mask is not None:
            got = [True] * len(rows) if mask is True else mask.tolist()
            assert got == [r is None for r in slow], f.name
    live = [not (ns.ghost or ns.removed) for ns in state.nodes.values()]
    every = [
        i
        for i, n in enumerate(state.names)
        if live[i] and all(f.filter(pod, state.nodes[n], state) is None for f in FILTERS)
    ]
    assert Prefilter(FILTERS).of(pod, state).rows(rows).tolist() == every


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_every_way_of_asking_a_filter_agrees_through_moves_and_reverts(
    scenario: tuple[ClusterState, list[Pod], list[tuple[str, int, int]]],
) -> None:
    state, incoming, steps = scenario
    marks = [state.checkpoint()]
    for pod in incoming:
        _check(state, pod)
    for what, node_at, pod_at in steps:
        name = state.names[node_at % len(state.names)]
        if what == "place":  # a copy: the same UID, another object (as a replaced pod is)
            state.place(msgspec.structs.replace(incoming[pod_at % len(incoming)], node_name=name), name)
        elif what == "ghost":
            marks.append(state.checkpoint())
            state.set_flags(name, ghost=True)
            state.unschedule_all(list(state.nodes[name].pods), name)
        elif what == "remove":
            state.set_flags(name, removed=True)
        else:
            state.revert(marks.pop() if len(marks) > 1 else marks[0])
        for pod in incoming:
            _check(state, pod)


def test_a_pod_moved_under_an_anti_affinity_term_refuses_its_new_domain_and_frees_the_old() -> None:
    """The holder's term follows it: after the move only the new zone refuses the pod."""
    nodes = [make_node("a", zone="z1"), make_node("b", zone="z2")]
    guard = make_pod(
        "guard",
        node="a",
        labels={"app": "db"},
        required_anti_affinity=(PodAffinityTerm(LabelSelector({"app": "web"}), LABEL_ZONE),),
    )
    state = ClusterState(ClusterSnapshot.create(0.0, nodes, [guard]))
    web = make_pod("web", node="", labels={"app": "web"}, cpu_m=10, mem=10 * MI)
    f = FILTERS[[type(x).__name__ for x in FILTERS].index("InterPodAffinity")]
    rows = np.arange(2, dtype=np.intp)
    assert f.filter_nodes(web, rows, state)[0].tolist() == [1, 0]  # type: ignore[attr-defined]
    mark = state.checkpoint()
    state.unschedule(guard, "a")
    state.place(guard, "b")
    assert f.filter_nodes(web, rows, state)[0].tolist() == [0, 1]  # type: ignore[attr-defined]
    state.revert(mark)
    assert f.filter_nodes(web, rows, state)[0].tolist() == [1, 0]  # type: ignore[attr-defined]
