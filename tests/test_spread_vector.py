"""Property test: ``PodTopologySpread.filter_nodes`` (all nodes at once) agrees with ``filter``
(node by node): same pass/fail and the same first reason for every node of random small clusters.
Both share their counting, so both are also checked against :func:`reference`, a plain
node-by-node reading of kube-scheduler's ``podtopologyspread/filtering.go`` written here."""

from __future__ import annotations

import numpy as np
from builders import make_node, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.config import ScalerConfig
from scaler.model.records import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    TAINT_TO_BE_DELETED,
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
from scaler.simulator.filters import PodTopologySpread, node_matches_pod_node_affinity, untolerated_taint
from scaler.simulator.state import ClusterState, NodeState

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
        rack = draw(st.sampled_from(("r1", "r2", "r1", "r2", None)))
        if rack is not None:
            labels[RACK] = rack
        zone = draw(st.sampled_from(("a", "b", "c", "a", "b", "c", "")))  # "": no zone label
        taints = (DEDICATED,) if draw(st.booleans()) else ()
        out.append(make_node(f"n{i}", zone=zone, labels=labels, taints=taints))
    return out


@st.composite
def bound_pods(draw: st.DrawFn, names: list[str]) -> list[Pod]:
    out = []
    crowded = names[:2] * 3 + names  # skewed placement: the first nodes hold more pods
    for i in range(draw(st.integers(0, 20))):
        out.append(
            make_pod(
                f"p{i}",
                namespace=draw(st.sampled_from(("default", "default", "default", "other"))),
                node=draw(st.sampled_from(crowded)),
                labels={
                    "app": draw(st.sampled_from(("web", "web", "api", "db"))),
                    "rev": draw(st.sampled_from("12")),
                },
                deletion_ts=draw(st.sampled_from((None, None, None, 5.0))),
            )
        )
    return out


@st.composite
def constraints(draw: st.DrawFn) -> TopologySpreadConstraint:
    return TopologySpreadConstraint(
        max_skew=draw(st.sampled_from((1, 1, 2))),
        topology_key=draw(st.sampled_from(KEYS)),
        when_unsatisfiable=draw(st.sampled_from(("DoNotSchedule",) * 4 + ("ScheduleAnyway",))),
        label_selector=draw(st.sampled_from((SELECTORS[0],) * 4 + SELECTORS)),
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
        flag = draw(st.sampled_from(("live",) * 4 + ("ghost", "removed")))
        if flag != "live":
            state.set_flags(name, ghost=flag == "ghost", removed=flag == "removed")
    return state, pod


def _skew_reason(c: TopologySpreadConstraint) -> str:
    return f"node didn't match pod topology spread constraints ({c.topology_key}, maxSkew {c.max_skew})"


def reference(pod: Pod, node: NodeState, state: ClusterState) -> str | None:
    """The filter's verdict computed the slow, obvious way: every node, every pod."""
    hard = [c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]
    for c in hard:
        if c.topology_key not in node.node.labels:
            return f"node didn't match pod topology spread constraints (missing label {c.topology_key})"
    keys = [c.topology_key for c in hard]
    for c in hard:
        sel = c.label_selector
        extra = tuple(
            LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in c.match_label_keys if k in pod.labels
        )
        if extra:
            base = sel if sel is not None else LabelSelector()
            sel = LabelSelector(base.match_labels, base.match_expressions + extra)

        def counts_as_domain(ns: NodeState, c: TopologySpreadConstraint = c) -> bool:
            if ns.removed or not all(k in ns.node.labels for k in keys):
                return False
            if c.node_affinity_policy == "Honor" and not node_matches_pod_node_affinity(pod, ns.node):
                return False
            taints = ns.node.taints + ((Taint(TAINT_TO_BE_DELETED, "", "NoSchedule"),) if ns.ghost else ())
            return c.node_taints_policy != "Honor" or untolerated_taint(taints, pod.tolerations) is None

        counts: dict[str, int] = {}
        for ns in state.nodes.values():
            if counts_as_domain(ns):
                value = ns.node.labels[c.topology_key]
                counts[value] = counts.get(value, 0) + sum(
                    1
                    for p in ([] if ns.ghost else ns.pods)
                    if p.namespace == pod.namespace
                    and p.deletion_ts is None
                    and p.uid != pod.uid
                    and sel is not None
                    and sel.matches(p.labels)
                )
        min_domains = c.min_domains or 1
        global_min = 0 if len(counts) < min_domains else min(counts.values())
        self_match = 1 if sel is not None and sel.matches(pod.labels) else 0
        if counts.get(node.node.labels[c.topology_key], 0) + self_match - global_min > c.max_skew:
            return _skew_reason(c)
    return None


@settings(max_examples=400, deadline=None)
@given(scenarios())
def test_filter_nodes_agrees_with_filter(scenario: tuple[ClusterState, Pod]) -> None:
    state, pod = scenario
    f = PodTopologySpread(ScalerConfig())
    positions = np.arange(len(state.names), dtype=np.intp)
    codes, texts = f.filter_nodes(pod, positions, state)
    for i, name in enumerate(state.names):
        expected = reference(pod, state.nodes[name], state)
        assert f.filter(pod, state.nodes[name], state) == expected, name
        got = texts[codes[i] - 1] if codes[i] else None
        assert got == expected, name
    # Any subset, in any order, gives the same verdicts as the whole table.
    subset = positions[::-1][::2]
    sub_codes, sub_texts = f.filter_nodes(pod, subset, state)
    for j, i in enumerate(subset.tolist()):
        whole = texts[codes[i] - 1] if codes[i] else None
        assert (sub_texts[sub_codes[j] - 1] if sub_codes[j] else None) == whole


def test_first_failure_wins_missing_labels_before_skews() -> None:
    """A node lacking both keys is refused for the first constraint's key; a node skewed on the
    first constraint but lacking the second's key is refused for the missing label."""
    web = LabelSelector(match_labels={"app": "web"})
    zone = TopologySpreadConstraint(1, LABEL_ZONE, "DoNotSchedule", web)
    rack = TopologySpreadConstraint(1, RACK, "DoNotSchedule", web)
    nodes = [
        make_node("full", zone="a", labels={RACK: "r1"}),
        make_node("bare", zone=""),
        make_node("skewed", zone="a"),
        make_node("empty", zone="b", labels={RACK: "r2"}),
    ]
    pods = [make_pod(f"w{i}", node="full", labels={"app": "web"}) for i in range(2)]
    state = ClusterState(ClusterSnapshot.create(now=0.0, nodes=nodes, pods=pods))
    pod = make_pod("new", node="", labels={"app": "web"}, topology_spread=(zone, rack))
    f = PodTopologySpread(ScalerConfig())
    codes, texts = f.filter_nodes(pod, np.arange(len(state.names), dtype=np.intp), state)
    got = {n: texts[c - 1] if c else None for n, c in zip(state.names, codes.tolist(), strict=True)}
    missing = "node didn't match pod topology spread constraints (missing label {})"
    assert got == {
        "full": _skew_reason(zone),
        "bare": missing.format(LABEL_ZONE),
        "skewed": missing.format(RACK),
        "empty": None,
    }
    assert {n: f.filter(pod, state.nodes[n], state) for n in state.names} == got
