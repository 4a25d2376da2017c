"""Tests of the built-in Filter plugins (kube-scheduler semantics, ``scaler.simulator.filters``)."""

from __future__ import annotations

import copy
from collections.abc import Iterable

import pytest
from builders import GI, MI, make_node, make_pod

from scaler.config import ScalerConfig
from scaler.model.records import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    LABEL_ZONE_BETA,
    TAINT_TO_BE_DELETED,
    LabelSelector,
    Namespace,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinityTerm,
    Resources,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.filters import (
    InterPodAffinity,
    NodeAffinity,
    NodePorts,
    NodeResourcesFit,
    NodeUnschedulable,
    PodTopologySpread,
    TaintToleration,
    VolumeZone,
)
from scaler.simulator.registry import BUILTIN_FILTERS
from scaler.simulator.state import ClusterState, FilterPlugin

CFG = ScalerConfig()


def cluster(
    nodes: Iterable[Node],
    pods: Iterable[Pod] = (),
    pvs: Iterable[PersistentVolume] | None = None,
    pvcs: Iterable[PersistentVolumeClaim] = (),
    usage: dict[str, tuple[int, int]] | None = None,
) -> ClusterState:
    """A ClusterState over a snapshot of ``nodes`` and ``pods``."""
    snap = ClusterSnapshot.create(now=0.0, nodes=nodes, pods=pods, pvs=pvs, pvcs=pvcs)
    return ClusterState(snap, usage=usage)


def incoming(name: str = "new", **kw: object) -> Pod:
    """A pod being moved: not bound to any node of the state."""
    return make_pod(name, node="", **kw)  # type: ignore[arg-type]


def run(plugin: FilterPlugin, pod: Pod, state: ClusterState, node: str) -> str | None:
    return plugin.filter(pod, state.nodes[node], state)


def sel(**labels: str) -> LabelSelector:
    return LabelSelector(match_labels=labels)


# ---- NodeUnschedulable ---------------------------------------------------------------------


class TestNodeUnschedulable:
    f = NodeUnschedulable(CFG)

    def test_plain_node_passes(self) -> None:
        st = cluster([make_node("n1")])
        assert run(self.f, incoming(), st, "n1") is None

    def test_ghost_and_removed_rejected(self) -> None:
        st = cluster([make_node("n1"), make_node("n2")])
        st.set_flags("n1", ghost=True)
        st.set_flags("n2", removed=True)
        assert run(self.f, incoming(), st, "n1") is not None
        assert run(self.f, incoming(), st, "n2") is not None

    @pytest.mark.parametrize("effect", ["NoSchedule", "PreferNoSchedule", "NoExecute"])
    def test_to_be_deleted_rejected_whatever_tolerations(self, effect: str) -> None:
        st = cluster([make_node("n1", taints=(Taint(TAINT_TO_BE_DELETED, "123", effect),))])
        tolerate_all = incoming(tolerations=(Toleration(operator="Exists"),))
        reason = run(self.f, tolerate_all, st, "n1")
        assert reason is not None and TAINT_TO_BE_DELETED in reason

    def test_cordoned_rejected_even_when_tolerated(self) -> None:
        # CA's plugin runner skips unschedulable nodes before any filter runs.
        st = cluster([make_node("n1", unschedulable=True)])
        assert run(self.f, incoming(), st, "n1") == "node is unschedulable (cordoned)"
        tol = Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule")
        assert run(self.f, incoming(tolerations=(tol,)), st, "n1") == "node is unschedulable (cordoned)"
        assert run(self.f, incoming(tolerations=(tol,)), cluster([make_node("n1")]), "n1") is None


# ---- NodeResourcesFit ----------------------------------------------------------------------


class TestNodeResourcesFit:
    f = NodeResourcesFit(CFG)

    def state(self, **node_kw: object) -> ClusterState:
        kw: dict[str, object] = {"cpu_m": 1000, "mem": 1 * GI, "max_pods": 3}
        kw.update(node_kw)
        node = make_node("n1", **kw)  # type: ignore[arg-type]
        return cluster([node], [make_pod("a", node="n1", cpu_m=600, mem=512 * MI)])

    def test_fits(self) -> None:
        assert run(self.f, incoming(cpu_m=400, mem=512 * MI), self.state(), "n1") is None

    def test_insufficient_cpu(self) -> None:
        assert run(self.f, incoming(cpu_m=401, mem=0), self.state(), "n1") == "Insufficient cpu"

    def test_insufficient_memory(self) -> None:
        reason = run(self.f, incoming(cpu_m=0, mem=512 * MI + 1), self.state(), "n1")
        assert reason == "Insufficient memory"

    def test_zero_request_fits_full_node(self) -> None:
        st = self.state(cpu_m=600)
        assert run(self.f, incoming(cpu_m=0, mem=0), st, "n1") is None
        assert run(self.f, incoming(cpu_m=1, mem=0), st, "n1") == "Insufficient cpu"

    def test_too_many_pods(self) -> None:
        st = self.state(max_pods=1)
        assert run(self.f, incoming(cpu_m=0, mem=0), st, "n1") == "Too many pods"

    def test_ephemeral_storage_only_when_requested(self) -> None:
        st = self.state()  # node has 0 allocatable ephemeral storage
        assert run(self.f, incoming(cpu_m=1, mem=1), st, "n1") is None
        pod = incoming(requests=Resources(1, 1, ephemeral_storage_bytes=1, pods=1))
        assert run(self.f, pod, st, "n1") == "Insufficient ephemeral-storage"

    def test_extended_resources(self) -> None:
        gpu_node = make_node("g1", allocatable=Resources(8000, 32 * GI, 0, 110, {"nvidia.com/gpu": 1}))
        st = cluster([make_node("n1"), gpu_node])
        wants_gpu = incoming(requests=Resources(100, MI, 0, 1, {"nvidia.com/gpu": 1}))
        assert run(self.f, wants_gpu, st, "n1") == "Insufficient nvidia.com/gpu"
        assert run(self.f, wants_gpu, st, "g1") is None
        st.place(wants_gpu, "g1")
        another = incoming("new2", requests=Resources(100, MI, 0, 1, {"nvidia.com/gpu": 1}))
        assert run(self.f, another, st, "g1") == "Insufficient nvidia.com/gpu"
        zero_gpu = incoming("new3", requests=Resources(100, MI, 0, 1, {"nvidia.com/gpu": 0}))
        assert run(self.f, zero_gpu, st, "n1") is None


# ---- TaintToleration -----------------------------------------------------------------------


class TestTaintToleration:
    f = TaintToleration(CFG)

    @pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
    def test_untolerated_blocking_taint(self, effect: str) -> None:
        st = cluster([make_node("n1", taints=(Taint("dedicated", "gpu", effect),))])
        reason = run(self.f, incoming(), st, "n1")
        assert reason is not None and "dedicated=gpu" in reason

    def test_tolerated(self) -> None:
        st = cluster([make_node("n1", taints=(Taint("dedicated", "gpu", "NoSchedule"),))])
        equal = Toleration("dedicated", "Equal", "gpu", "NoSchedule")
        exists = Toleration("dedicated", "Exists")
        assert run(self.f, incoming(tolerations=(equal,)), st, "n1") is None
        assert run(self.f, incoming(tolerations=(exists,)), st, "n1") is None
        wrong_value = Toleration("dedicated", "Equal", "cpu", "NoSchedule")
        assert run(self.f, incoming(tolerations=(wrong_value,)), st, "n1") is not None

    def test_prefer_no_schedule_ignored(self) -> None:
        st = cluster([make_node("n1", taints=(Taint("soft", "", "PreferNoSchedule"),))])
        assert run(self.f, incoming(), st, "n1") is None


# ---- NodeAffinity --------------------------------------------------------------------------


class TestNodeAffinity:
    f = NodeAffinity(CFG)
    st = cluster([make_node("n1", labels={"disk": "ssd", "gen": "3"}), make_node("n2")])

    def test_node_selector(self) -> None:
        pod = incoming(node_selector={"disk": "ssd"})
        assert run(self.f, pod, self.st, "n1") is None
        assert run(self.f, pod, self.st, "n2") is not None

    def test_required_terms_are_ored(self) -> None:
        terms = (
            NodeSelectorTerm((NodeSelectorRequirement("disk", "In", ("hdd",)),)),
            NodeSelectorTerm((NodeSelectorRequirement("gen", "Gt", ("2",)),)),
        )
        pod = incoming(required_node_affinity=terms)
        assert run(self.f, pod, self.st, "n1") is None
        assert run(self.f, pod, self.st, "n2") is not None

    def test_match_fields_and_empty_terms(self) -> None:
        by_name = NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n2",)),))
        pod = incoming(required_node_affinity=(by_name,))
        assert run(self.f, pod, self.st, "n2") is None
        assert run(self.f, pod, self.st, "n1") is not None
        assert run(self.f, incoming(required_node_affinity=()), self.st, "n1") is not None
        assert run(self.f, incoming(required_node_affinity=None), self.st, "n2") is None


# ---- NodePorts -----------------------------------------------------------------------------


class TestNodePorts:
    f = NodePorts(CFG)

    def state(self, ports: tuple[tuple[str, str, int], ...]) -> ClusterState:
        return cluster([make_node("n1")], [make_pod("a", node="n1", host_ports=ports)])

    def test_conflict_any_ip(self) -> None:
        st = self.state((("TCP", "0.0.0.0", 8080),))
        assert run(self.f, incoming(host_ports=(("TCP", "10.0.0.1", 8080),)), st, "n1") is not None
        assert run(self.f, incoming(host_ports=(("TCP", "0.0.0.0", 8080),)), st, "n1") is not None

    def test_specific_ip_vs_any(self) -> None:
        st = self.state((("TCP", "10.0.0.1", 8080),))
        assert run(self.f, incoming(host_ports=(("TCP", "0.0.0.0", 8080),)), st, "n1") is not None
        assert run(self.f, incoming(host_ports=(("TCP", "10.0.0.1", 8080),)), st, "n1") is not None
        assert run(self.f, incoming(host_ports=(("TCP", "10.0.0.2", 8080),)), st, "n1") is None

    def test_no_conflict(self) -> None:
        st = self.state((("TCP", "0.0.0.0", 8080),))
        assert run(self.f, incoming(host_ports=(("UDP", "0.0.0.0", 8080),)), st, "n1") is None
        assert run(self.f, incoming(host_ports=(("TCP", "0.0.0.0", 8081),)), st, "n1") is None
        assert run(self.f, incoming(), st, "n1") is None


# ---- VolumeZone ----------------------------------------------------------------------------


def pvc_pod(claim: str = "data") -> Pod:
    return incoming(volumes=(Volume("vol", "persistentVolumeClaim", claim_name=claim),))


class TestVolumeZone:
    f = VolumeZone(CFG)
    nodes = (
        make_node("a1", zone="zone-a"),
        make_node("b1", zone="zone-b"),
        make_node("c1", zone="zone-c"),
        make_node("bare", zone=""),
    )

    def state(self, pv: PersistentVolume, claim: str = "data") -> ClusterState:
        return cluster(self.nodes, pvs=[pv], pvcs=[PersistentVolumeClaim("default", claim, pv.name)])

    def test_zone_match(self) -> None:
        st = self.state(PersistentVolume("pv1", {LABEL_ZONE: "zone-a"}))
        assert run(self.f, pvc_pod(), st, "a1") is None
        reason = run(self.f, pvc_pod(), st, "b1")
        assert reason is not None and "zone" in reason

    def test_multi_zone_value(self) -> None:
        st = self.state(PersistentVolume("pv1", {LABEL_ZONE: "zone-a__zone-b"}))
        assert run(self.f, pvc_pod(), st, "a1") is None
        assert run(self.f, pvc_pod(), st, "b1") is None
        assert run(self.f, pvc_pod(), st, "c1") is not None

    def test_beta_pv_label_against_ga_node_label(self) -> None:
        st = self.state(PersistentVolume("pv1", {LABEL_ZONE_BETA: "zone-b"}))
        assert run(self.f, pvc_pod(), st, "b1") is None
        assert run(self.f, pvc_pod(), st, "a1") is not None

    def test_node_without_topology_labels_passes_zone_check(self) -> None:
        st = self.state(PersistentVolume("pv1", {LABEL_ZONE: "zone-a"}))
        assert run(self.f, pvc_pod(), st, "bare") is None

    def test_pv_node_affinity(self) -> None:
        term = NodeSelectorTerm((NodeSelectorRequirement(LABEL_HOSTNAME, "In", ("a1",)),))
        st = self.state(PersistentVolume("local-pv", {}, (term,)))
        assert run(self.f, pvc_pod(), st, "a1") is None
        assert run(self.f, pvc_pod(), st, "bare") is not None

    def test_unknown_claim_rejected(self) -> None:
        st = self.state(PersistentVolume("pv1", {LABEL_ZONE: "zone-a"}))
        reason = run(self.f, pvc_pod("missing"), st, "a1")
        assert reason is not None and "unknown PersistentVolumeClaim default/missing" in reason

    def test_unknown_pv_and_unbound_claim_rejected(self) -> None:
        st = cluster(
            self.nodes,
            pvs=[PersistentVolume("other")],
            pvcs=[PersistentVolumeClaim("default", "data", "gone"), PersistentVolumeClaim("default", "u")],
        )
        assert run(self.f, pvc_pod("data"), st, "a1") is not None
        assert run(self.f, pvc_pod("u"), st, "a1") is not None

    def test_inactive_without_pvs(self) -> None:
        st = cluster(self.nodes)
        assert run(self.f, pvc_pod("missing"), st, "a1") is None

    def test_other_volume_kinds_ignored(self) -> None:
        st = self.state(PersistentVolume("pv1", {LABEL_ZONE: "zone-a"}))
        pod = incoming(volumes=(Volume("tmp", "emptyDir"), Volume("cfg", "configMap")))
        assert run(self.f, pod, st, "b1") is None


# ---- InterPodAffinity ----------------------------------------------------------------------


def anti(topology_key: str, **labels: str) -> PodAffinityTerm:
    return PodAffinityTerm(sel(**labels), topology_key)


class TestInterPodAffinity:
    f = InterPodAffinity(CFG)
    nodes = (
        make_node("a1", zone="zone-a"),
        make_node("a2", zone="zone-a"),
        make_node("b1", zone="zone-b"),
        make_node("nolabel", zone="", labels={LABEL_HOSTNAME: "nolabel"}),
    )

    def test_incoming_anti_affinity_hostname(self) -> None:
        st = cluster(self.nodes, [make_pod("web-0", node="a1", labels={"app": "web"})])
        pod = incoming(labels={"app": "web"}, required_anti_affinity=(anti(LABEL_HOSTNAME, app="web"),))
        assert run(self.f, pod, st, "a1") is not None
        assert run(self.f, pod, st, "a2") is None
        assert run(self.f, pod, st, "b1") is None

    def test_incoming_anti_affinity_zone(self) -> None:
        st = cluster(self.nodes, [make_pod("web-0", node="a1", labels={"app": "web"})])
        pod = incoming(labels={"app": "web"}, required_anti_affinity=(anti(LABEL_ZONE, app="web"),))
        assert run(self.f, pod, st, "a1") is not None
        assert run(self.f, pod, st, "a2") is not None
        assert run(self.f, pod, st, "b1") is None
        assert run(self.f, pod, st, "nolabel") is None  # no zone label: the term does not apply

    def test_anti_affinity_respects_namespace(self) -> None:
        st = cluster(self.nodes, [make_pod("web-0", namespace="other", node="a1", labels={"app": "web"})])
        pod = incoming(required_anti_affinity=(anti(LABEL_ZONE, app="web"),))
        assert run(self.f, pod, st, "a1") is None
        all_ns = PodAffinityTerm(sel(app="web"), LABEL_ZONE, all_namespaces=True)
        assert run(self.f, incoming(required_anti_affinity=(all_ns,)), st, "a1") is not None

    def test_namespace_selector_is_resolved_against_namespace_labels(self) -> None:
        """kube-scheduler matches a namespaceSelector against the namespaces' labels: for
        affinity the destination's domain must hold a matching pod in a selected namespace."""
        db = [
            make_pod("db-b", namespace="team-b", node="a1", labels={"app": "db"}),
            make_pod("db-a", namespace="team-a", node="b1", labels={"app": "db"}),
        ]
        term = PodAffinityTerm(sel(app="db"), LABEL_ZONE, namespace_selector=sel(team="a"))
        pod = incoming(namespace="web", labels={"app": "web"}, required_affinity=(term,))
        namespaces = [Namespace("team-a", {"team": "a"}), Namespace("team-b", {"team": "b"}), Namespace("web")]
        snap = ClusterSnapshot.create(now=0.0, nodes=self.nodes, pods=db, namespaces=namespaces)
        st = ClusterState(snap)
        assert run(self.f, pod, st, "a2") is not None  # zone-a holds only team-b's db
        assert run(self.f, pod, st, "b1") is None
        # Namespaces not listed: the selector selects nothing for affinity (no proof of a match).
        unknown = cluster(self.nodes, db)
        assert run(self.f, pod, unknown, "a2") is not None
        assert run(self.f, pod, unknown, "b1") is not None

    def test_namespace_selector_for_anti_affinity(self) -> None:
        guard_term = PodAffinityTerm(sel(app="web"), LABEL_ZONE, namespace_selector=sel(team="web"))
        guard = make_pod("guard", namespace="ops", node="a1", labels={"app": "guard"},
                         required_anti_affinity=(guard_term,))  # fmt: skip
        namespaces = [Namespace("ops"), Namespace("web", {"team": "web"}), Namespace("other", {"team": "x"})]
        st = ClusterState(ClusterSnapshot.create(now=0.0, nodes=self.nodes, pods=[guard], namespaces=namespaces))
        assert run(self.f, incoming(namespace="web", labels={"app": "web"}), st, "a2") is not None
        assert run(self.f, incoming(namespace="other", labels={"app": "web"}), st, "a2") is None
        # Namespaces not listed: the selector selects every namespace for anti-affinity.
        unknown = cluster(self.nodes, [guard])
        assert run(self.f, incoming(namespace="other", labels={"app": "web"}), unknown, "a2") is not None

    def test_existing_pods_anti_affinity_symmetry(self) -> None:
        guard = make_pod(
            "guard", node="a1", labels={"app": "guard"}, required_anti_affinity=(anti(LABEL_ZONE, app="web"),)
        )
        st = cluster(self.nodes, [guard])
        web = incoming(labels={"app": "web"})
        assert run(self.f, web, st, "a2") is not None  # same zone as the guard
        assert run(self.f, web, st, "b1") is None
        assert run(self.f, incoming(labels={"app": "api"}), st, "a2") is None

    def test_pods_on_ghost_do_not_count(self) -> None:
        guard = make_pod(
            "guard", node="a1", labels={"app": "guard"}, required_anti_affinity=(anti(LABEL_ZONE, app="web"),)
        )
        st = cluster(self.nodes, [guard, make_pod("web-0", node="a1", labels={"app": "web"})])
        st.set_flags("a1", ghost=True)
        web = incoming(labels={"app": "web"}, required_anti_affinity=(anti(LABEL_ZONE, app="web"),))
        assert run(self.f, web, st, "a2") is None

    def test_anti_affinity_follows_moved_pods(self) -> None:
        st = cluster(self.nodes, [make_pod("web-0", node="a1", labels={"app": "web"})])
        pod = incoming(
            "web-1", labels={"app": "web"}, required_anti_affinity=(anti(LABEL_HOSTNAME, app="web"),)
        )
        assert run(self.f, pod, st, "b1") is None
        mark = st.checkpoint()
        st.place(make_pod("web-2", node="", labels={"app": "web"}), "b1")
        assert run(self.f, pod, st, "b1") is not None
        st.revert(mark)
        assert run(self.f, pod, st, "b1") is None

    def test_existing_pods_anti_affinity_follows_moves(self) -> None:
        """A moved pod's anti-affinity guards its new node, no longer its old one, and a revert
        restores both (the state counts the pods with anti-affinity on each node)."""
        guard = make_pod(
            "guard", node="a1", labels={"app": "guard"}, required_anti_affinity=(anti(LABEL_HOSTNAME, app="web"),)
        )
        st = cluster(self.nodes, [guard])
        web = incoming(labels={"app": "web"})
        assert run(self.f, web, st, "a1") is not None
        assert run(self.f, web, st, "b1") is None
        mark = st.checkpoint()
        st.unschedule(guard, "a1")
        st.place(guard, "b1")
        assert run(self.f, web, st, "a1") is None
        assert run(self.f, web, st, "b1") is not None
        st.revert(mark)
        assert run(self.f, web, st, "a1") is not None
        assert run(self.f, web, st, "b1") is None

    def test_required_affinity(self) -> None:
        st = cluster(self.nodes, [make_pod("db-0", node="a1", labels={"app": "db"})])
        pod = incoming(labels={"app": "web"}, required_affinity=(anti(LABEL_ZONE, app="db"),))
        assert run(self.f, pod, st, "a2") is None  # same zone as db-0
        assert run(self.f, pod, st, "b1") is not None
        assert run(self.f, pod, st, "nolabel") is not None

    def test_required_affinity_first_of_self_affine_group(self) -> None:
        st = cluster(self.nodes, [make_pod("x", node="a1", labels={"app": "other"})])
        self_affine = incoming(labels={"app": "cache"}, required_affinity=(anti(LABEL_ZONE, app="cache"),))
        assert run(self.f, self_affine, st, "b1") is None
        assert run(self.f, self_affine, st, "nolabel") is not None  # still needs the key
        not_self = incoming(labels={"app": "web"}, required_affinity=(anti(LABEL_ZONE, app="cache"),))
        assert run(self.f, not_self, st, "b1") is not None
        # once a matching pod exists somewhere, the special case no longer applies
        st2 = cluster(self.nodes, [make_pod("cache-0", node="a1", labels={"app": "cache"})])
        assert run(self.f, self_affine, st2, "b1") is not None
        assert run(self.f, self_affine, st2, "a2") is None


# ---- PodTopologySpread ---------------------------------------------------------------------


def spread(key: str = LABEL_ZONE, max_skew: int = 1, **kw: object) -> TopologySpreadConstraint:
    fields: dict[str, object] = {
        "max_skew": max_skew,
        "topology_key": key,
        "when_unsatisfiable": "DoNotSchedule",
        "label_selector": sel(app="web"),
    }
    fields.update(kw)
    return TopologySpreadConstraint(**fields)  # type: ignore[arg-type]


def web_pods(counts: dict[str, int], ns: str = "default") -> list[Pod]:
    return [
        make_pod(f"web-{node}-{i}", namespace=ns, node=node, labels={"app": "web"})
        for node, n in counts.items()
        for i in range(n)
    ]


class TestPodTopologySpread:
    f = PodTopologySpread(CFG)
    nodes = (make_node("a1", zone="a"), make_node("b1", zone="b"), make_node("c1", zone="c"))

    def test_skew(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 2, "b1": 1, "c1": 1}))
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(),))
        reason = run(self.f, pod, st, "a1")
        assert reason is not None and "maxSkew 1" in reason
        assert run(self.f, pod, st, "b1") is None
        assert run(self.f, pod, st, "c1") is None

    def test_pod_not_matching_own_selector(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 2, "b1": 1, "c1": 1}))
        pod = incoming(labels={"app": "other"}, topology_spread=(spread(),))
        assert run(self.f, pod, st, "a1") is None  # 2 + 0 - 1 = 1

    def test_ghost_is_a_domain_with_zero_pods(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 1, "b1": 1, "c1": 1}))
        st.unschedule_all(list(st.nodes["c1"].pods), "c1")
        st.set_flags("c1", ghost=True)
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(),))
        # min is 0 (zone c, the ghost): 1 + 1 - 0 = 2 > 1
        assert run(self.f, pod, st, "a1") is not None
        assert run(self.f, pod, st, "b1") is not None
        # once the removal is committed the ghost is no domain: 1 + 1 - 1 = 1
        st.set_flags("c1", ghost=False, removed=True)
        assert run(self.f, pod, st, "a1") is None

    def test_ghost_excluded_under_taints_honor(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 1, "b1": 1, "c1": 1}))
        st.unschedule_all(list(st.nodes["c1"].pods), "c1")
        st.set_flags("c1", ghost=True)
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(node_taints_policy="Honor"),))
        assert run(self.f, pod, st, "a1") is None

    def test_ghost_pods_are_not_counted(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 3, "b1": 3, "c1": 3}))
        st.set_flags("a1", ghost=True)  # pods still listed on the ghost must not count
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(max_skew=3),))
        # ghost zone a counts 0, so min is 0: 3 + 1 - 0 = 4 > 3 (counting them would give 1)
        assert run(self.f, pod, st, "b1") == (
            "node didn't match pod topology spread constraints (topology.kubernetes.io/zone, maxSkew 3)"
        )
        # the same cluster without the ghost: a's pods count, min is 3, 3 + 1 - 3 = 1 <= 3
        counted = cluster(self.nodes, web_pods({"a1": 3, "b1": 3, "c1": 3}))
        assert run(self.f, pod, counted, "b1") is None

    def test_missing_label_rejected(self) -> None:
        st = cluster([*self.nodes, make_node("x1", zone="")])
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(),))
        reason = run(self.f, pod, st, "x1")
        assert reason is not None and "missing label" in reason

    def test_schedule_anyway_ignored(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 5}))
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(when_unsatisfiable="ScheduleAnyway"),))
        assert run(self.f, pod, st, "a1") is None

    def test_min_domains(self) -> None:
        nodes = self.nodes[:2]
        st = cluster(nodes, web_pods({"a1": 1, "b1": 1}))
        plain = incoming(labels={"app": "web"}, topology_spread=(spread(),))
        assert run(self.f, plain, st, "a1") is None  # 1 + 1 - 1
        wide = incoming(labels={"app": "web"}, topology_spread=(spread(min_domains=3),))
        assert run(self.f, wide, st, "a1") is not None  # 2 domains < 3: min = 0

    def test_node_affinity_policy(self) -> None:
        nodes = (
            make_node("a1", zone="a", labels={"pool": "x"}),
            make_node("b1", zone="b", labels={"pool": "x"}),
            make_node("c1", zone="c", labels={"pool": "y"}),
        )
        st = cluster(nodes, web_pods({"a1": 1, "b1": 1}))
        honor = incoming(labels={"app": "web"}, node_selector={"pool": "x"}, topology_spread=(spread(),))
        assert run(self.f, honor, st, "a1") is None  # zone c not eligible: min 1
        ignore = incoming(
            labels={"app": "web"},
            node_selector={"pool": "x"},
            topology_spread=(spread(node_affinity_policy="Ignore"),),
        )
        assert run(self.f, ignore, st, "a1") is not None  # zone c counts: min 0

    def test_taints_policy(self) -> None:
        nodes = (
            make_node("a1", zone="a"),
            make_node("b1", zone="b"),
            make_node("c1", zone="c", taints=(Taint("dedicated", "x", "NoSchedule"),)),
        )
        st = cluster(nodes, web_pods({"a1": 1, "b1": 1}))
        ignore = incoming(labels={"app": "web"}, topology_spread=(spread(),))
        assert run(self.f, ignore, st, "a1") is not None
        honor = incoming(labels={"app": "web"}, topology_spread=(spread(node_taints_policy="Honor"),))
        assert run(self.f, honor, st, "a1") is None

    def test_counts_only_same_namespace(self) -> None:
        st = cluster(self.nodes, web_pods({"a1": 3}, ns="other") + web_pods({"b1": 1, "c1": 1}))
        pod = incoming(labels={"app": "web"}, topology_spread=(spread(),))
        assert run(self.f, pod, st, "a1") is None  # 0 + 1 - 0

    def test_match_label_keys(self) -> None:
        old = [make_pod(f"old-{i}", node="a1", labels={"app": "web", "rev": "1"}) for i in range(3)]
        st = cluster(self.nodes, [*old, *web_pods({"b1": 0})])
        pod = incoming(
            labels={"app": "web", "rev": "2"}, topology_spread=(spread(match_label_keys=("rev",)),)
        )
        assert run(self.f, pod, st, "a1") is None  # rev=1 pods are not counted
        plain = incoming(labels={"app": "web", "rev": "2"}, topology_spread=(spread(),))
        assert run(self.f, plain, st, "a1") is not None

    def test_hostname_spread_uses_moved_pods(self) -> None:
        st = cluster(self.nodes[:2], web_pods({"a1": 1, "b1": 1}))
        pod = incoming("web-x", labels={"app": "web"}, topology_spread=(spread(LABEL_HOSTNAME),))
        assert run(self.f, pod, st, "a1") is None
        st.place(make_pod("web-y", node="", labels={"app": "web"}), "a1")
        assert run(self.f, pod, st, "a1") is not None
        assert run(self.f, pod, st, "b1") is None


# ---- all filters ---------------------------------------------------------------------------


def test_filters_do_not_mutate_state() -> None:
    nodes = [make_node("a1", zone="a"), make_node("b1", zone="b", unschedulable=True)]
    pods = [
        make_pod("web-0", node="a1", labels={"app": "web"}, host_ports=(("TCP", "0.0.0.0", 80),)),
        make_pod(
            "guard", node="b1", labels={"app": "g"}, required_anti_affinity=(anti(LABEL_ZONE, app="web"),)
        ),
    ]
    st = cluster(nodes, pods, pvs=[PersistentVolume("pv", {LABEL_ZONE: "a"})], pvcs=[])
    pod = incoming(
        labels={"app": "web"},
        host_ports=(("TCP", "0.0.0.0", 80),),
        required_anti_affinity=(anti(LABEL_ZONE, app="web"),),
        required_affinity=(anti(LABEL_ZONE, app="web"),),
        topology_spread=(spread(),),
        volumes=(Volume("v", "persistentVolumeClaim", claim_name="c"),),
    )
    before = {
        n: (list(s.pods), s.requested, s.moved_cpu_millicores, s.ghost, s.removed)
        for n, s in st.nodes.items()
    }
    snap_before = copy.copy(st.snapshot)
    for cls in BUILTIN_FILTERS:
        plugin = cls(CFG)
        assert isinstance(plugin, FilterPlugin)
        for name in st.nodes:
            run(plugin, pod, st, name)
    after = {
        n: (list(s.pods), s.requested, s.moved_cpu_millicores, s.ghost, s.removed)
        for n, s in st.nodes.items()
    }
    assert before == after
    assert st.snapshot == snap_before
