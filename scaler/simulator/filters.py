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
:class:`~scaler.simulator.node_table.NodeTable` and from per-state memos of snapshot-only facts
(which nodes carry a label, which tolerate a set of tolerations); the pod-scanning filters look pods up
through the state's indexes (topology domains, pods by label) instead of scanning the cluster.
Every ``filter_nodes`` gives, node by node, exactly the verdict and reason of ``filter``.

The base class and the helpers the filters share are in :mod:`scaler.simulator.filter_base`
(re-exported here).
"""

from __future__ import annotations

import numpy as np

from scaler.model.records import (
    TAINT_TO_BE_DELETED,
    Pod,
)
from scaler.simulator.filter_base import (
    _ANY_IP,
    _TO_GA,
    _VOLUME_TOPOLOGY_LABELS,
    TAINT_UNSCHEDULABLE,
    BaseFilter,
    _affinity_codes,
    _fmt_taint,
    _no_fail,
    _Reasons,
    _taint_codes,
    node_matches_pod_node_affinity,
    untolerated_taint,
)
from scaler.simulator.pod_filters import InterPodAffinity, PodTopologySpread
from scaler.simulator.state import ClusterState, Codes, Mask, NodeState, Positions

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

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask:
        """Per table row, whether :meth:`filter` passes a pod there (the same for every pod)."""
        t = state.table
        static = state.static(("NodeUnschedulable.fit",), lambda: ~(t.to_be_deleted | t.cordoned))
        return state.per_flags(("NodeUnschedulable.fit",), lambda: static & ~(t.ghost | t.removed))


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
            codes[t.free_eph[nodes] < req.ephemeral_storage_bytes] = 4
        if req.memory_bytes > 0:
            codes[t.free_mem[nodes] < req.memory_bytes] = 3
        if req.cpu_millicores > 0:
            codes[t.free_cpu[nodes] < req.cpu_millicores] = 2
        codes[t.free_pods[nodes] < 1] = 1
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

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask | None:
        """Per table row, whether :meth:`filter` passes ``pod`` there; ``None`` for a pod with
        extended resources (not tabled: :meth:`filter_nodes` checks them)."""
        req = pod.placement_requests
        if any(v > 0 for v in req.extended.values()):
            return None
        t = state.table  # used + request <= allocatable, as request <= allocatable - used
        ok = t.free_pods >= 1
        if req.cpu_millicores > 0:
            ok &= t.free_cpu >= req.cpu_millicores
        if req.memory_bytes > 0:
            ok &= t.free_mem >= req.memory_bytes
        if req.ephemeral_storage_bytes > 0:
            ok &= t.free_eph >= req.ephemeral_storage_bytes
        return ok


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

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask:
        """Per table row, whether :meth:`filter` passes ``pod`` there (memoized per set of
        tolerations)."""
        return state.static(
            ("TaintToleration.fit", pod.tolerations), lambda: _taint_codes(pod, state)[0] == 0
        )


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

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask | bool:
        """Per table row, whether :meth:`filter` passes ``pod`` there (``True``: everywhere)."""
        if not pod.node_selector and pod.required_node_affinity is None:
            return True
        passes: Mask = _affinity_codes(pod, state) == 0
        return passes


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

    def fit_mask(self, pod: Pod, state: ClusterState) -> bool | None:
        """``True`` (passes everywhere) for a pod without host ports, else ``None``."""
        return True if not pod.host_ports else None


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

    def fit_mask(self, pod: Pod, state: ClusterState) -> bool | None:
        """``True`` (passes everywhere) when there is no PV to check, else ``None``."""
        if not state.snapshot.has_pvs or not any(v.kind == "persistentVolumeClaim" for v in pod.volumes):
            return True
        return None
