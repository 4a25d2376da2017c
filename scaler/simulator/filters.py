"""Built-in Filter plugins: may a pod evicted from a removal candidate go to a given node?

Each class reproduces the Filter step of the kube-scheduler plugin of the same name
(``pkg/scheduler/framework/plugins/<name>/`` in kubernetes/kubernetes), which cluster-autoscaler
runs through ``simulator/clustersnapshot/predicate/plugin_runner.go`` when it simulates a node
removal (reference §4c). Only the parts that decide feasibility are modelled: no scoring, no
PreFilter/PostFilter, no preemption.

Every plugin follows the :class:`~scaler.simulator.state.FilterPlugin` protocol: it is built with
``cls(config)``, has a ``name`` class attribute, and its ``filter(pod, node, state)`` returns
``None`` when the pod fits or a short human-readable reason when it does not. Plugins are pure:
they read ``node`` and ``state`` and never change them, and they keep no cache across calls, so
they stay correct while the simulator moves pods between nodes and reverts. Reasons name the
cause (resource, taint, port, volume, constraint) without per-node figures, so the simulator
can count nodes per reason, as the scheduler's "0/N nodes are available: …" message does.

Units follow :mod:`scaler.model.records`: CPU in millicores, memory and storage in bytes,
extended resources in whole units.

Speed: the filters that read only numbers, labels and taints also answer for many nodes at once
(``filter_nodes``, :class:`~scaler.simulator.state.VectorFilterPlugin`) from the state's
:class:`~scaler.simulator.state.NodeTable` and from per-state memos of snapshot-only facts (which
nodes carry a label, which tolerate a set of tolerations); the pod-scanning filters look pods up
through the state's indexes (topology domains, pods by label) instead of scanning the cluster.
Every ``filter_nodes`` gives, node by node, exactly the verdict and reason of ``filter``.

The base class and the helpers the filters share are in :mod:`scaler.simulator.filter_base`
(re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

from scaler.model.records import (
    TAINT_TO_BE_DELETED,
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinityTerm,
    Taint,
    TopologySpreadConstraint,
)
from scaler.simulator.filter_base import (
    _ANY_IP,
    _TO_GA,
    _VOLUME_TOPOLOGY_LABELS,
    TAINT_UNSCHEDULABLE,
    BaseFilter,
    _fmt_taint,
    _label_positions,
    _no_fail,
    _Reasons,
    node_matches_pod_node_affinity,
    untolerated_taint,
)
from scaler.simulator.state import ClusterState, Codes, NodeState, Positions

__all__ = [
    "TAINT_UNSCHEDULABLE",
    "BaseFilter",
    "InterPodAffinity",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "NodeUnschedulable",
    "PodTopologySpread",
    "TaintToleration",
    "VolumeZone",
    "node_matches_pod_node_affinity",
    "untolerated_taint",
]

# ---- NodeUnschedulable ------------------------------------------------------------------------


class NodeUnschedulable(BaseFilter):
    """kube-scheduler ``NodeUnschedulable``, plus the simulation's own exclusions.

    Rejects, in order:

    * the ghost (the node whose removal is being simulated) and nodes already removed in this
      evaluation (CA: ``IsNodeAcceptable``, ``simulator/cluster.go``);
    * nodes carrying the ``ToBeDeletedByClusterAutoscaler`` taint with any effect, whatever the
      pod tolerates: a node being deleted is never a destination;
    * cordoned nodes (``spec.unschedulable``), whatever the pod tolerates: CA's plugin runner
      skips them before any filter runs (``predicate/plugin_runner.go``), and a cordoned node
      is usually on its way out.
    """

    name = "NodeUnschedulable"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the node may receive pods, else the reason."""
        if node.ghost:
            return "node is being removed (simulated)"
        if node.removed:
            return "node was removed in this simulation"
        if any(t.key == TAINT_TO_BE_DELETED for t in node.node.taints):
            return f"node has taint {TAINT_TO_BE_DELETED} (being deleted)"
        if node.node.unschedulable:
            return "node is unschedulable (cordoned)"
        return None

    _REASONS = (
        "node is being removed (simulated)",
        "node was removed in this simulation",
        f"node has taint {TAINT_TO_BE_DELETED} (being deleted)",
        "node is unschedulable (cordoned)",
    )

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes``."""
        t = state.table
        codes = np.zeros(len(nodes), dtype=np.int16)
        codes[t.cordoned[nodes]] = 4  # lowest precedence first: the first failing check wins
        codes[t.to_be_deleted[nodes]] = 3
        codes[t.removed[nodes]] = 2
        codes[t.ghost[nodes]] = 1
        return codes, self._REASONS


# ---- NodeResourcesFit -------------------------------------------------------------------------


class NodeResourcesFit(BaseFilter):
    """kube-scheduler ``NodeResourcesFit`` (``noderesources/fit.go`` ``fitsRequest``).

    The pod fits when, for each resource, the node's requested total plus the pod's request stays
    within allocatable: pod count always; CPU (millicores), memory and ephemeral storage (bytes)
    only when the pod requests more than 0; every extended resource the pod requests (more than
    0), a resource missing from the node counting as 0 allocatable. Checks run in the
    scheduler's order and the first failure is reported, with the scheduler's wording
    ("Too many pods", "Insufficient cpu", "Insufficient nvidia.com/gpu", …). The pod counts
    with the requests it is placed with (:attr:`~scaler.model.records.Pod.placement_requests`:
    a pod being resized in place asks for the larger of what it holds and what its spec asks).
    """

    name = "NodeResourcesFit"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the pod's requests fit the node's free allocatable."""
        alloc = node.node.allocatable
        used = node.requested
        req = pod.placement_requests
        if len(node.pods) + 1 > alloc.pods:
            return "Too many pods"
        if req.cpu_millicores > 0 and used.cpu_millicores + req.cpu_millicores > alloc.cpu_millicores:
            return "Insufficient cpu"
        if req.memory_bytes > 0 and used.memory_bytes + req.memory_bytes > alloc.memory_bytes:
            return "Insufficient memory"
        if (
            req.ephemeral_storage_bytes > 0
            and used.ephemeral_storage_bytes + req.ephemeral_storage_bytes > alloc.ephemeral_storage_bytes
        ):
            return "Insufficient ephemeral-storage"
        for name in sorted(req.extended):
            want = req.extended[name]
            if want > 0 and used.extended.get(name, 0) + want > alloc.extended.get(name, 0):
                return f"Insufficient {name}"
        return None

    _REASONS = ("Too many pods", "Insufficient cpu", "Insufficient memory", "Insufficient ephemeral-storage")

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes``."""
        t = state.table
        req = pod.placement_requests
        codes = np.zeros(len(nodes), dtype=np.int16)
        # Assigned from the last check to the first, so that the first failing check wins.
        if req.ephemeral_storage_bytes > 0:
            codes[t.req_eph[nodes] + req.ephemeral_storage_bytes > t.alloc_eph[nodes]] = 4
        if req.memory_bytes > 0:
            codes[t.req_mem[nodes] + req.memory_bytes > t.alloc_mem[nodes]] = 3
        if req.cpu_millicores > 0:
            codes[t.req_cpu[nodes] + req.cpu_millicores > t.alloc_cpu[nodes]] = 2
        codes[t.pod_count[nodes] + 1 > t.alloc_pods[nodes]] = 1
        if not any(v > 0 for v in req.extended.values()):
            return codes, self._REASONS
        # Extended resources are not tabled: check them on the nodes that passed the rest.
        interned = _Reasons(self._REASONS)
        names = state.names
        for j in np.flatnonzero(codes == 0).tolist():
            ns = state.nodes[names[nodes[j]]]
            used, alloc = ns.requested.extended, ns.node.allocatable.extended
            for name in sorted(req.extended):
                want = req.extended[name]
                if want > 0 and used.get(name, 0) + want > alloc.get(name, 0):
                    codes[j] = interned.code(f"Insufficient {name}")
                    break
        return codes, tuple(interned.reasons)


# ---- TaintToleration --------------------------------------------------------------------------


class TaintToleration(BaseFilter):
    """kube-scheduler ``TaintToleration``: every ``NoSchedule`` and ``NoExecute`` taint on the
    node must be tolerated by the pod (:meth:`Toleration.tolerates`); ``PreferNoSchedule`` is
    ignored. The reason names the first untolerated taint."""

    name = "TaintToleration"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the pod tolerates every blocking taint of the node."""
        t = untolerated_taint(node.node.taints, pod.tolerations)
        if t is not None:
            return f"untolerated taint {_fmt_taint(t)}"
        return None

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes`` (per set of tolerations,
        computed once per distinct set of node taints)."""
        codes, reasons = _taint_codes(pod, state)
        return codes[nodes], reasons

    @staticmethod
    def _all(pod: Pod, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        def groups() -> dict[tuple[Taint, ...], list[int]]:
            out: dict[tuple[Taint, ...], list[int]] = {}
            for ns in state.nodes.values():
                out.setdefault(ns.node.taints, []).append(ns.position)
            return out

        codes = np.zeros(len(state.names), dtype=np.int16)
        interned = _Reasons()
        for taints, positions in state.static(("taint-groups",), groups).items():
            t = untolerated_taint(taints, pod.tolerations)
            if t is not None:
                codes[positions] = interned.code(f"untolerated taint {_fmt_taint(t)}")
        return codes, tuple(interned.reasons)


# ---- NodeAffinity -----------------------------------------------------------------------------


class NodeAffinity(BaseFilter):
    """kube-scheduler ``NodeAffinity``: the pod's ``nodeSelector`` and its
    ``requiredDuringSchedulingIgnoredDuringExecution`` node affinity must match the node
    (see :func:`node_matches_pod_node_affinity`)."""

    name = "NodeAffinity"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the node matches the pod's node selector and affinity."""
        if not node_matches_pod_node_affinity(pod, node.node):
            return self._REASONS[0]
        return None

    _REASONS = ("node didn't match Pod's node affinity/selector",)

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes`` (per distinct node selector
        and affinity; ``nodeSelector`` pairs through the label index)."""
        return _affinity_codes(pod, state)[nodes], self._REASONS

    @staticmethod
    def _all(pod: Pod, state: ClusterState) -> Codes:
        ok = np.ones(len(state.names), dtype=np.bool_)
        for k, v in pod.node_selector.items():
            match = np.zeros(len(state.names), dtype=np.bool_)
            match[_label_positions(state, k).get(v, np.zeros(0, dtype=np.intp))] = True
            ok &= match
        terms = pod.required_node_affinity
        if terms is not None:
            names = state.names
            for i in np.flatnonzero(ok).tolist():
                node = state.nodes[names[i]].node
                ok[i] = any(t.matches(node.name, node.labels) for t in terms)
        return np.where(ok, 0, 1).astype(np.int16)


def _affinity_codes(pod: Pod, state: ClusterState) -> Codes:
    """:class:`NodeAffinity`'s code for every table node (0 matches, 1 not), memoized per
    distinct node selector and required affinity."""
    key = ("NodeAffinity", tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)
    return state.static(key, lambda: NodeAffinity._all(pod, state))


def _taint_codes(pod: Pod, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
    """:class:`TaintToleration`'s codes and reasons for every table node, memoized per set of
    tolerations."""
    return state.static(("TaintToleration", pod.tolerations), lambda: TaintToleration._all(pod, state))


# ---- NodePorts --------------------------------------------------------------------------------


class NodePorts(BaseFilter):
    """kube-scheduler ``NodePorts`` (``HostPortInfo.CheckConflict``).

    A host port of the pod conflicts with one already used on the node when protocol and port
    are equal and the host IPs are equal or either is ``0.0.0.0`` (empty IP means ``0.0.0.0``,
    empty protocol means TCP; port 0 is no host port).
    """

    name = "NodePorts"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when none of the pod's host ports is taken on the node."""
        if not pod.host_ports:
            return None
        used = [(proto or "TCP", ip or _ANY_IP, port) for proto, ip, port in node.host_ports if port > 0]
        if not used:
            return None
        for proto, ip, port in pod.host_ports:
            if port <= 0:
                continue
            proto, ip = proto or "TCP", ip or _ANY_IP
            for uproto, uip, uport in used:
                if uport == port and uproto == proto and (_ANY_IP in (ip, uip) or uip == ip):
                    return f"host port {proto}/{ip}:{port} already in use"
        return None

    def filter_nodes(
        self, pod: Pod, nodes: Positions, state: ClusterState
    ) -> tuple[Codes, tuple[str, ...]] | None:
        """:meth:`filter` for the nodes at table positions ``nodes``: all fit when the pod has
        no host port, else ``None`` (node by node)."""
        if not pod.host_ports:
            return _no_fail(nodes)
        return None


# ---- VolumeZone -------------------------------------------------------------------------------


class VolumeZone(BaseFilter):
    """kube-scheduler ``VolumeZone`` plus the bound-PV node-affinity check of ``VolumeBinding``.

    Active only when the snapshot includes PersistentVolumes (``snapshot.has_pvs``); without
    them nothing can be checked and every node passes. For each ``persistentVolumeClaim``
    volume of the pod, the PVC (same namespace) and its bound PV must be in the snapshot,
    otherwise the pod is rejected everywhere (unbound claims too: a running pod's claims are
    bound, so an unbound one means the input is inconsistent). Then:

    * PV ``nodeAffinity`` (when set): one of its terms must match the node;
    * PV zone/region labels (``topology.kubernetes.io/zone``, ``…/region`` and the
      ``failure-domain.beta`` forms; a value may list several zones joined by ``__``) must
      contain the node's value for the same key (the GA key when the node lacks the beta one).
      As in the scheduler, a node with no zone or region label at all passes this part.
    """

    name = "VolumeZone"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when every PV the pod uses may be attached on the node."""
        snap = state.snapshot
        if not snap.has_pvs:
            return None
        claims = [v for v in pod.volumes if v.kind == "persistentVolumeClaim"]
        if not claims:
            return None
        labels = node.node.labels
        node_has_topology = any(k in labels for k in _VOLUME_TOPOLOGY_LABELS)
        for vol in claims:
            if not vol.claim_name:
                return f"volume {vol.name!r}: PersistentVolumeClaim had no name"
            pvc = snap.pvcs.get((pod.namespace, vol.claim_name))
            if pvc is None:
                return f"unknown PersistentVolumeClaim {pod.namespace}/{vol.claim_name}"
            if not pvc.volume_name:
                return f"PersistentVolumeClaim {pod.namespace}/{vol.claim_name} is not bound"
            pv = snap.pvs.get(pvc.volume_name)
            if pv is None:
                return f"unknown PersistentVolume {pvc.volume_name}"
            if pv.node_affinity is not None and not any(
                t.matches(node.name, labels) for t in pv.node_affinity
            ):
                return f"volume node affinity conflict (PersistentVolume {pv.name})"
            if not node_has_topology:
                continue
            for key in _VOLUME_TOPOLOGY_LABELS:
                raw = pv.labels.get(key)
                if raw is None:
                    continue
                allowed = {z.strip() for z in raw.split("__") if z.strip()}
                have = labels.get(key)
                if have is None:
                    have = labels.get(_TO_GA.get(key, key))
                if have is None or have not in allowed:
                    return f"no available volume zone (PersistentVolume {pv.name} {key}={raw})"
        return None

    def filter_nodes(
        self, pod: Pod, nodes: Positions, state: ClusterState
    ) -> tuple[Codes, tuple[str, ...]] | None:
        """:meth:`filter` for the nodes at table positions ``nodes``: all fit when there is no
        PV to check, else ``None`` (node by node)."""
        if not state.snapshot.has_pvs or not any(v.kind == "persistentVolumeClaim" for v in pod.volumes):
            return _no_fail(nodes)
        return None


# ---- InterPodAffinity -------------------------------------------------------------------------


def _matches_all_terms(
    terms: tuple[PodAffinityTerm, ...],
    owner_namespace: str,
    pod: Pod,
    namespace_labels: Mapping[str, Mapping[str, str]] | None,
) -> bool:
    """``podMatchesAllAffinityTerms``: ``pod`` is selected by every (affinity) term (false for
    no terms); a namespace selector with unknown namespace labels selects nothing."""
    return bool(terms) and all(
        t.selects(owner_namespace, pod, namespace_labels, unknown=False) for t in terms
    )


def _namespace_labels(state: ClusterState) -> Mapping[str, Mapping[str, str]] | None:
    """The namespaces' labels (``None`` when the snapshot lists no Namespace), computed once."""
    return state.static("namespace-labels", lambda: state.snapshot.namespace_labels)


class InterPodAffinity(BaseFilter):
    """kube-scheduler ``InterPodAffinity`` (``interpodaffinity/filtering.go``), required terms only.

    Three checks, on pods of live, non-ghost nodes (the incoming pod itself, by UID, excluded):

    1. existing pods' anti-affinity (symmetry): a pod P with a term T that selects the incoming
       pod, on a node whose ``T.topologyKey`` value equals the candidate's, rejects the candidate;
    2. the incoming pod's anti-affinity: for each term whose topology key the candidate carries,
       no pod in the candidate's domain may be selected by the term (nodes without the label pass);
    3. the incoming pod's affinity: the candidate must carry every term's topology key and, for
       each term, its domain must hold a pod matching *all* the terms (the scheduler counts only
       pods that match every term). Special case, as in the scheduler: if no such pod exists
       anywhere (on a node carrying any of the keys) and the incoming pod matches all its own
       terms, the first pod of a self-affine group may go anywhere that has the keys.

    Pods are looked up at each call through the state's indexes (topology domains, pods by
    label), which follow every simulated move. A term's ``namespaceSelector`` is matched against
    the labels of the snapshot's Namespaces (:meth:`PodAffinityTerm.selects`); when the snapshot
    lists none, a selector is taken to select every namespace for anti-affinity and none for
    affinity, the side that refuses more destinations.
    """

    name = "InterPodAffinity"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when placing the pod on the node breaks no required (anti-)affinity."""
        labels = node.node.labels
        ns_labels = _namespace_labels(state)
        # 1. Existing pods' required anti-affinity towards the incoming pod: only pods on nodes
        # of the candidate's domain, for each topology key any anti-affinity term uses.
        holders = state.anti_affinity_pods  # nodes holding a pod with anti-affinity terms
        for key in state.anti_affinity_keys:
            v = labels.get(key)
            if v is None:
                continue
            for name in state.domains(key).get(v, ()):
                if name not in holders:
                    continue
                other = state.nodes[name]
                if other.removed or other.ghost:
                    continue
                for p in other.pods:
                    if not p.required_anti_affinity or p.uid == pod.uid:
                        continue
                    for t in p.required_anti_affinity:
                        if t.topology_key == key and t.selects(p.namespace, pod, ns_labels):
                            return "node didn't satisfy existing pods anti-affinity rules"
        # 2. The incoming pod's required anti-affinity.
        for t in pod.required_anti_affinity:
            v = labels.get(t.topology_key)
            if v is None:
                continue
            for p in state.pods_in_domain(t.topology_key, v):
                if p.uid != pod.uid and t.selects(pod.namespace, p, ns_labels):
                    return "node didn't match pod anti-affinity rules"
        # 3. The incoming pod's required affinity.
        terms = pod.required_affinity
        if terms:
            for t in terms:
                if t.topology_key not in labels:
                    return f"node didn't match pod affinity rules (no label {t.topology_key})"
            satisfied = all(
                any(
                    p.uid != pod.uid and _matches_all_terms(terms, pod.namespace, p, ns_labels)
                    for p in state.pods_in_domain(t.topology_key, labels[t.topology_key])
                )
                for t in terms
            )
            if not satisfied:
                if _matches_all_terms(terms, pod.namespace, pod, ns_labels) and not self._any_affinity_match(
                    pod, state
                ):
                    return None
                return "node didn't match pod affinity rules"
        return None

    @staticmethod
    def _any_affinity_match(pod: Pod, state: ClusterState) -> bool:
        """True when the scheduler's ``affinityCounts`` would be non-empty: some pod matching all
        of ``pod``'s affinity terms sits on a live, non-ghost node carrying one of their keys."""
        terms = pod.required_affinity
        keys = {t.topology_key for t in terms}
        ns_labels = _namespace_labels(state)
        for other in state.nodes.values():
            if other.removed or other.ghost or not any(k in other.node.labels for k in keys):
                continue
            for p in other.pods:
                if p.uid != pod.uid and _matches_all_terms(terms, pod.namespace, p, ns_labels):
                    return True
        return False


# ---- PodTopologySpread ------------------------------------------------------------------------


def _spread_selector(c: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with ``matchLabelKeys`` merged in as ``key In (pod's value)``
    requirements (keys the pod lacks are skipped). ``None`` selects nothing, except that, as in
    ``mergeLabelSetWithSelector``, a null selector plus match-label keys becomes those keys."""
    extra = tuple(
        LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in c.match_label_keys if k in pod.labels
    )
    if not extra:
        return c.label_selector
    if c.label_selector is None:
        return LabelSelector({}, extra)
    return LabelSelector(c.label_selector.match_labels, c.label_selector.match_expressions + extra)


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and selector.matches(labels)


def _domain_ids(state: ClusterState, key: str) -> tuple[npt.NDArray[np.intp], list[str]]:
    """Per node, the id of its value of label ``key`` (-1 without it), and the values by id."""

    def compute() -> tuple[npt.NDArray[np.intp], list[str]]:
        ids = np.full(len(state.names), -1, dtype=np.intp)
        values: list[str] = []
        for v, positions in _label_positions(state, key).items():
            ids[positions] = len(values)
            values.append(v)
        return ids, values

    return state.static(("domain-ids", key), compute)


def _selected_pods(
    state: ClusterState, namespace: str, selector: LabelSelector | None
) -> Iterator[tuple[NodeState, Pod]]:
    """``(node state, pod)`` for the pods of ``namespace`` on any node that ``selector`` matches,
    looked up by the selector's first ``matchLabels`` pair when it has one."""
    if selector is None:
        return
    if selector.match_labels:
        k, v = next(iter(selector.match_labels.items()))
        candidates = state.pods_with_label(namespace, k, v)
    else:
        candidates = state.pods_with_label(namespace)
    for ns, p in candidates:
        if selector.matches(p.labels):
            yield ns, p


def _hard_constraints(pod: Pod) -> list[TopologySpreadConstraint]:
    """The pod's ``whenUnsatisfiable: DoNotSchedule`` constraints, in order."""
    return [c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]


def _missing_label(c: TopologySpreadConstraint) -> str:
    return f"node didn't match pod topology spread constraints (missing label {c.topology_key})"


def _too_skewed(c: TopologySpreadConstraint) -> str:
    return f"node didn't match pod topology spread constraints ({c.topology_key}, maxSkew {c.max_skew})"


class PodTopologySpread(BaseFilter):
    """kube-scheduler ``PodTopologySpread`` (``podtopologyspread/filtering.go``, ``common.go``).

    Only constraints with ``whenUnsatisfiable: DoNotSchedule`` filter. For each of them:

    * eligible nodes carry the topology keys of *all* those constraints, are not removed, and —
      per the node inclusion policies — match the pod's node selector/affinity
      (``nodeAffinityPolicy: Honor``, the default) and have no untolerated
      ``NoSchedule``/``NoExecute`` taint (``nodeTaintsPolicy: Honor``; default ``Ignore``);
    * the ghost stays an eligible domain with zero pods (CA's "tainted ghost",
      ``simulator/cluster.go``): under ``nodeTaintsPolicy: Honor`` it is treated as carrying
      ``ToBeDeletedByClusterAutoscaler:NoSchedule``, as CA's ghost copy does;
    * per domain, count pods in the pod's namespace matched by the selector (``matchLabelKeys``
      merged in), terminating pods excluded;
    * ``skew = count(candidate's domain) + (1 if the pod matches its own selector) − min``, where
      ``min`` is the smallest count over eligible domains, or 0 when there are fewer domains than
      ``minDomains`` (default 1); reject when ``skew > maxSkew``.

    A candidate lacking a constraint's topology key is rejected.
    """

    name = "PodTopologySpread"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when placing the pod keeps every hard spread constraint's skew.

        The missing-label check runs over all constraints first, then the skew checks in
        constraint order; the first failure is returned. Counts come from :meth:`_skew_base`,
        shared with :meth:`filter_nodes`."""
        constraints = _hard_constraints(pod)
        if not constraints:
            return None
        labels = node.node.labels
        for c in constraints:
            if c.topology_key not in labels:
                return _missing_label(c)
        keys = tuple(c.topology_key for c in constraints)
        for c in constraints:
            ids, values, counts, offset = self._skew_base(c, pod, keys, state)
            if node.position >= 0:
                here = int(ids[node.position])
            else:
                value = labels[c.topology_key]
                here = values.index(value) if value in values else -1
            skew = (int(counts[here]) if here >= 0 else 0) + offset
            if skew > c.max_skew:
                return _too_skewed(c)
        return None

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes``, all at once: per hard
        constraint the matching-pod counts per domain are computed once (:meth:`_skew_base`),
        then each node's skew is an array lookup. A node's code is that of the first failing
        check in :meth:`filter`'s order (missing labels over all constraints, then skews)."""
        constraints = _hard_constraints(pod)
        if not constraints:
            return _no_fail(nodes)
        reasons = _Reasons()
        codes = np.zeros(len(nodes), dtype=np.int16)
        for c in constraints:
            missing = (codes == 0) & (_domain_ids(state, c.topology_key)[0][nodes] < 0)
            if missing.any():
                codes[missing] = reasons.code(_missing_label(c))
        keys = tuple(c.topology_key for c in constraints)
        for c in constraints:
            open_ = codes == 0
            if not open_.any():
                break
            ids, _, counts, offset = self._skew_base(c, pod, keys, state)
            here = ids[nodes[open_]]  # every open node carries the key: ids >= 0
            skewed = counts[here] + offset > c.max_skew
            if skewed.any():
                codes[np.flatnonzero(open_)[skewed]] = reasons.code(_too_skewed(c))
        return codes, tuple(reasons.reasons)

    def _skew_base(
        self, c: TopologySpreadConstraint, pod: Pod, keys: tuple[str, ...], state: ClusterState
    ) -> tuple[npt.NDArray[np.intp], list[str], npt.NDArray[np.intp], int]:
        """What the skew of ``c`` on any candidate node depends on (the pod and the state, not
        the candidate), computed once per call: per node its domain id (-1 without the key) and the values by id (as
        :func:`_domain_ids`), the matching pods per domain id (pods in the pod's namespace
        selected by ``c``'s selector, on eligible non-ghost nodes, neither terminating nor the
        pod itself), and ``offset`` = (1 if the pod matches its own selector) − the global
        minimum, so that a node's skew is ``counts[id] + offset`` (``offset`` alone for a value
        no table node carries)."""
        selector = _spread_selector(c, pod)
        eligible, domains = self._eligible(c, pod, keys, state)
        ids, values = _domain_ids(state, c.topology_key)
        where = np.fromiter(
            (
                ns.position
                for ns, p in _selected_pods(state, pod.namespace, selector)
                if not ns.ghost and p.deletion_ts is None and p.uid != pod.uid
            ),
            dtype=np.intp,
        )
        counts = np.bincount(ids[where[eligible[where]]], minlength=len(values))
        min_domains = c.min_domains if c.min_domains is not None else 1
        # The smallest count over eligible domains; 0 with fewer domains than minDomains.
        global_min = 0 if len(domains) < max(min_domains, 1) else int(counts[domains].min())
        self_match = 1 if _selects(selector, pod.labels) else 0
        return ids, values, counts, self_match - global_min

    def _eligible(
        self, c: TopologySpreadConstraint, pod: Pod, keys: tuple[str, ...], state: ClusterState
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
        """Which nodes count for ``c`` (carry every key, not removed, pass the inclusion
        policies; the ghost with its ``ToBeDeleted`` taint), and the ids of the domains they
        form (sorted, distinct). Depends on the pod only through its node affinity and
        tolerations, and on the state only through the ghost/removed flags: memoized per flag
        change."""
        honor_affinity = c.node_affinity_policy == "Honor"
        honor_taints = c.node_taints_policy == "Honor"
        key = (
            "PodTopologySpread",
            c.topology_key,
            keys,
            (tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)
            if honor_affinity
            else None,
            pod.tolerations if honor_taints else None,
        )

        def static() -> npt.NDArray[np.bool_]:
            ok = np.ones(len(state.names), dtype=np.bool_)
            for k in keys:
                ok &= _domain_ids(state, k)[0] >= 0
            if honor_affinity:  # shared with NodeAffinity's verdicts for the same pod
                ok &= _affinity_codes(pod, state) == 0
            if honor_taints:  # shared with TaintToleration's verdicts for the same pod
                ok &= _taint_codes(pod, state)[0] == 0
            return ok

        def current() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
            ok = state.static(key, static) & ~state.table.removed
            for i in np.flatnonzero(state.table.ghost).tolist():
                if ok[i]:
                    ok[i] = self._included(c, pod, state.nodes[state.names[i]])
            ids, values = _domain_ids(state, c.topology_key)
            present = np.zeros(len(values), dtype=np.bool_)
            present[ids[ok]] = True  # every eligible node carries the key: ids >= 0
            return ok, np.flatnonzero(present)  # the distinct ids, sorted (np.unique sorts: slower)

        return state.per_flags(key, current)

    @staticmethod
    def _included(c: TopologySpreadConstraint, pod: Pod, ns: NodeState) -> bool:
        """``matchNodeInclusionPolicies`` for one node."""
        if c.node_affinity_policy == "Honor" and not node_matches_pod_node_affinity(pod, ns.node):
            return False
        if c.node_taints_policy == "Honor":
            taints: tuple[Taint, ...] = ns.node.taints
            if ns.ghost:
                taints = (*taints, Taint(TAINT_TO_BE_DELETED, "", "NoSchedule"))
            if untolerated_taint(taints, pod.tolerations) is not None:
                return False
        return True
