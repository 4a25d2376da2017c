"""Property test: ``PodTopologySpread.filter_nodes`` (all nodes at once) agrees with ``filter``
(node by node): same pass/fail and the same first reason for every node of random small clusters."""

from __future__ import annotations

import numpy as np
from builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.model.records import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.filters import PodTopologySpread
from scaler.simulator.state import ClusterState

RACK = "example.com/rack"
KEYS = (LABEL_ZONE, LABEL_HOSTNAME, RACK)
DEDICATED = Taint("dedicated", "batch", "NoSchedule")

SELECTORS = (
    LabelSelector(match_labels={"app": "web"}),
    LabelSelector(match_labels={"app": "api"}),
    LabelSelector(match_expressions=(LabelSelectorRequirement("app", "In", ("web", "api")),)),
    LabelSelector(),  # matches every pod of the namespace
    None,  # matches nothing
)


@st.composite
def nodes(draw: st.DrawFn) -> list[Node]:
    out = []
    for i in range(draw(st.integers(1, 8))):
        labels = {"pool": draw(st.sampled_from(("x", "y")))}
        rack = draw(st.sampled_from(("r1", "r2", None)))
        if rack is not None:
            labels[RACK] = rack
        zone = draw(st.sampled_from(("a", "b", "c", "")))  # "": no zone label
        taints = (DEDICATED,) if draw(st.booleans()) else ()
        out.append(make_node(f"n{i}", zone=zone, labels=labels, taints=taints))
    return out


@st.composite
def bound_pods(draw: st.DrawFn, names: list[str]) -> list[Pod]:
    out = []
    for i in range(draw(st.integers(0, 14))):
        out.append(
            make_pod(
                f"p{i}",
                namespace=draw(st.sampled_from(("default", "default", "other"))),
                node=draw(st.sampled_from(names)),
                labels={
                    "app": draw(st.sampled_from(("web", "api", "db"))),
                    "rev": draw(st.sampled_from("12")),
                },
                deletion_ts=draw(st.sampled_from((None, None, None, 5.0))),
            )
        )
    return out


@st.composite
def constraints(draw: st.DrawFn) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=draw(st.integers(1, 2)),
        topology_key=draw(st.sampled_from(KEYS)),
        when_unsatisfiable=draw(st.sampled_from(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway"))),
        label_selector=draw(st.sampled_from(SELECTORS)),
        min_domains=draw(st.sampled_from((None, 1, 2, 3, 5))),
        node_affinity_policy=draw(st.sampled_from(("Honor", "Ignore"))),
        node_taints_policy=draw(st.sampled_from(("Honor", "Ignore"))),
        match_label_keys=draw(st.sampled_from(((), ("rev",)))),
    )


@st.composite
def incoming(draw: st.DrawFn, bound: list[Pod]) -> Pod:
    # Sometimes the pod being moved is one of the bound pods (same uid): it never counts itself.
    names = ["new"] + [p.name for p in bound if p.namespace == "default"]
    affinity = None
    if draw(st.booleans()):
        affinity = (
            NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(LABEL_ZONE, "In", ("a", "b")),)),
        )
    return make_pod(
        draw(st.sampled_from(names)),
        node="",
        labels={"app": draw(st.sampled_from(("web", "api", "db"))), "rev": draw(st.sampled_from("12"))},
        node_selector=draw(st.sampled_from(({}, {"pool": "x"}))),
        required_node_affinity=affinity,
        tolerations=(Toleration("dedicated", "Exists"),) if draw(st.booleans()) else (),
        topology_spread=tuple(draw(st.lists(constraints(), min_size=1, max_size=2))),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[ClusterState, Pod]:
    node_list = draw(nodes())
    names = [n.name for n in node_list]
    pods = draw(bound_pods(names))
    state = ClusterState(ClusterSnapshot.create(now=0.0, nodes=node_list, pods=pods))
    pod = draw(incoming(pods))
    # Simulated moves first (the pods-by-label index must follow them), then flags.
    for p in draw(st.lists(st.sampled_from(pods), unique_by=lambda p: p.uid, max_size=3)) if pods else []:
        state.unschedule(p, p.node_name)
        state.place(p, draw(st.sampled_from(names)))
    for name in names:
        flag = draw(st.sampled_from(("live", "live", "ghost", "removed")))
        if flag != "live":
            state.set_flags(name, ghost=flag == "ghost", removed=flag == "removed")
    return state, pod


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_filter_nodes_agrees_with_filter(scenario: tuple[ClusterState, Pod]) -> None:
    state, pod = scenario
    f = PodTopologySpread(ScalerConfig())
    positions = np.arange(len(state.names), dtype=np.intp)
    codes, texts = f.filter_nodes(pod, positions, state)
    for i, name in enumerate(state.names):
        expected = f.filter(pod, state.nodes[name], state)
        got = texts[codes[i] - 1] if codes[i] else None
        assert got == expected, name
    # Any subset, in any order, gives the same verdicts as the whole table.
    subset = positions[::-1][::2]
    sub_codes, sub_texts = f.filter_nodes(pod, subset, state)
    for j, i in enumerate(subset.tolist()):
        whole = texts[codes[i] - 1] if codes[i] else None
        assert (sub_texts[sub_codes[j] - 1] if sub_codes[j] else None) == whole
