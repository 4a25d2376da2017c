"""The immutable cluster snapshot every evaluation reads, for live and offline alike.

Records (decoded from files, LIST pages or WATCH events by :mod:`scaler.model.decode`) are
collected in a :class:`RecordSet` and built into a :class:`ClusterSnapshot` with indexes by node,
owner and name; :func:`build_snapshot` does the same from plain dicts. Nothing downstream parses
JSON again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from scaler.errors import InputError
from scaler.model.decode import Place, parse_object, place_text
from scaler.model.dra import (
    EMPTY_DRA,
    DeviceClass,
    DraObjects,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from scaler.model.gcpause import no_cycle_collector
from scaler.model.layout import PodLayout
from scaler.model.parse import ObjectError, Record, ident
from scaler.model.profiles import WorkloadProfile
from scaler.model.records import (
    Controller,
    Namespace,
    Node,
    NodeMetrics,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    PodMetrics,
    missing_containers,
)
from scaler.model.revisions import Revisions

__all__ = [
    "CONTROLLER_KINDS",
    "DRA_KINDS",
    "ClusterSnapshot",
    "RecordSet",
    "SnapshotError",
    "build_snapshot",
    "drop_partial_pod_metrics",
    "record_key",
]

CONTROLLER_KINDS = frozenset(
    {"ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job", "Deployment", "CronJob"}
)


class SnapshotError(InputError, ValueError):
    """The input does not form a valid snapshot; the message names the bad value."""


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """A consistent view of the cluster at ``now`` (Unix seconds).

    Indexes (``pods_by_node``, ``node_by_name``) are derived at construction. ``has_pvs`` says
    whether PersistentVolumes were part of the input, which enables the VolumeZone filter.
    ``workload_profiles`` are 24-hour usage profiles by workload (seed 001's resource portraits,
    :mod:`scaler.history.profiles`), empty without history; the portrait plugins read them.
    ``workload_kinds`` are the controller kinds that were listed: the ReplicaCount drain rule
    only reports ``ControllerNotFound`` for a kind that was listed (a snapshot without
    ReplicationControllers says nothing about them).

    ``namespaces`` (by name) give pod affinity terms' ``namespaceSelector`` the namespaces'
    labels; empty when Namespaces were not listed (:attr:`namespace_labels` is then ``None``).

    ``node_metrics`` and ``pod_metrics`` are what nodes and pods are judged by; in ``scaler run``
    they hold usage aggregated over the unneeded window
    (:func:`scaler.planner.with_aggregated_usage`), and ``newest_node_metrics`` /
    ``newest_pod_metrics`` then keep the newest readings as listed (empty otherwise: the
    metrics are themselves the newest readings). See :meth:`newest_node_metric`.

    **Unknown usage is never zero.** A PodMetrics reading that lacks a container its pod runs
    (``containers: []`` included) is not the pod's usage: it is left out of ``pod_metrics``, so
    everything downstream (utilization, TargetUsage's loads, relief, the report) treats the pod
    as one without PodMetrics (its request, or unknown). ``partial_pod_metrics`` keeps, by pod,
    such a reading and the containers it lacked: the reasons name them, and a pod with a request
    is loaded with the larger of its request and the part that was reported.
    """

    now: float
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    controllers: Mapping[tuple[str, str, str], Controller] = field(default_factory=dict)
    node_metrics: Mapping[str, NodeMetrics] = field(default_factory=dict)
    pod_metrics: Mapping[tuple[str, str], PodMetrics] = field(default_factory=dict)
    pvs: Mapping[str, PersistentVolume] = field(default_factory=dict)
    pvcs: Mapping[tuple[str, str], PersistentVolumeClaim] = field(default_factory=dict)
    has_pvs: bool = False
    workload_kinds: frozenset[str] = frozenset()
    workload_profiles: Mapping[str, WorkloadProfile] = field(default_factory=dict)
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    newest_node_metrics: Mapping[str, NodeMetrics] = field(default_factory=dict)
    newest_pod_metrics: Mapping[tuple[str, str], PodMetrics] = field(default_factory=dict)
    pods_by_node: Mapping[str, tuple[Pod, ...]] = field(default_factory=dict)
    node_by_name: Mapping[str, Node] = field(default_factory=dict)
    partial_pod_metrics: Mapping[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]] = field(
        default_factory=dict
    )
    dra: DraObjects = EMPTY_DRA
    """The Dynamic Resource Allocation objects (ResourceSlices, ResourceClaims,
    ResourceClaimTemplates, DeviceClasses); empty where none were read."""
    gpu_usage: Mapping[str, float] = field(default_factory=dict)
    """Node name → real GPU usage, fraction 0-1 of its allocatable GPUs (NVIDIA DCGM's
    ``DCGM_FI_DEV_GPU_UTIL`` through ``--history prometheus``, :func:`scaler.history.prometheus.
    fetch_gpu_usage`); empty without history. A GPU node missing here has unknown GPU usage."""
    gpu_usage_unknown: str = ""
    """Why a GPU node missing from :attr:`gpu_usage` has no reading, when history is on (the
    reading is older than its limit, not loaded yet, no series for the node): the evaluation
    adds it to such a node's detail, judged by its GPU requests alone. ``""``: nothing to say."""
    unreadable: Mapping[str, str] = field(default_factory=dict)
    """Node name → why its verdict is unknown: an API object the live source could not read
    concerns it (:func:`scaler.model.unreadable.unreadable_nodes`). Such a node is neither a
    candidate nor a destination (``UnreadableObject``). Empty for snapshot files, which are
    strict."""
    revisions: Revisions | None = field(default=None, compare=False, repr=False)
    """What changed since the source's previous snapshot (:mod:`scaler.model.revisions`), read
    by the evaluation cache; ``None``: unknown (nothing kept is reused). Not part of the
    snapshot's value."""

    @staticmethod
    def create(
        now: float,
        nodes: Iterable[Node],
        pods: Iterable[Pod] | PodLayout,
        pdbs: Iterable[PodDisruptionBudget] = (),
        controllers: Iterable[Controller] = (),
        node_metrics: Iterable[NodeMetrics] = (),
        pod_metrics: Iterable[PodMetrics] = (),
        pvs: Iterable[PersistentVolume] | None = None,
        pvcs: Iterable[PersistentVolumeClaim] = (),
        workload_kinds: Iterable[str] | None = None,
        namespaces: Iterable[Namespace] = (),
        dra: DraObjects = EMPTY_DRA,
    ) -> ClusterSnapshot:
        """Build a snapshot from records, computing the indexes.

        Nodes are kept sorted by name and each node's pods by ``namespace/name``, so every
        evaluation sees the same order whatever order the input had. ``pods`` may come already
        sorted and grouped, as a :class:`~scaler.model.layout.PodLayout` (the watch cache keeps
        one from loop to loop).
        """
        node_t = tuple(sorted(nodes, key=attrgetter("name")))
        layout = pods if isinstance(pods, PodLayout) else PodLayout.build(pods)
        grouped = layout.by_node
        ctrl = tuple(controllers)
        pv_list = None if pvs is None else tuple(pvs)
        metrics = {(m.namespace, m.name): m for m in pod_metrics}
        partial = drop_partial_pod_metrics(layout.pods, metrics)
        return ClusterSnapshot(
            now=now,
            nodes=node_t,
            pods=layout.pods,
            pdbs=tuple(sorted(pdbs, key=lambda b: (b.namespace, b.name))),
            controllers={(c.kind, c.namespace, c.name): c for c in ctrl},
            node_metrics={m.name: m for m in node_metrics},
            pod_metrics=metrics,
            pvs={v.name: v for v in pv_list or ()},
            pvcs={(c.namespace, c.name): c for c in pvcs},
            has_pvs=pv_list is not None and len(pv_list) > 0,
            workload_kinds=frozenset(c.kind for c in ctrl)
            if workload_kinds is None
            else frozenset(workload_kinds),
            namespaces={ns.name: ns for ns in namespaces},
            pods_by_node={n.name: grouped.get(n.name, ()) for n in node_t},
            node_by_name={n.name: n for n in node_t},
            partial_pod_metrics=partial,
            dra=dra,
        )

    @property
    def namespace_labels(self) -> Mapping[str, Mapping[str, str]] | None:
        """Namespace name → labels, ``None`` when no Namespace was listed (every cluster has
        some, so none means unknown)."""
        if not self.namespaces:
            return None
        return {name: ns.labels for name, ns in self.namespaces.items()}

    def newest_node_metric(self, name: str) -> NodeMetrics | None:
        """The newest NodeMetrics reading of node ``name`` as listed (``None`` without one)."""
        m = self.newest_node_metrics.get(name)
        return m if m is not None else self.node_metrics.get(name)

    def newest_pod_metric(self, namespace: str, name: str) -> PodMetrics | None:
        """The newest PodMetrics reading of pod ``namespace/name`` as listed (``None`` without one)."""
        m = self.newest_pod_metrics.get((namespace, name))
        return m if m is not None else self.pod_metrics.get((namespace, name))

    @property
    def has_workloads(self) -> bool:
        """True when any workload controller kind was listed (CA's listers are available)."""
        return bool(self.workload_kinds)

    def metrics_time(self) -> float | None:
        """The newest NodeMetrics timestamp (or PodMetrics if no node has any), else ``None``."""
        if self.node_metrics:
            return max(m.timestamp for m in self.node_metrics.values())
        if self.pod_metrics:
            return max(m.timestamp for m in self.pod_metrics.values())
        return None


def drop_partial_pod_metrics(
    pods: Iterable[Pod], metrics: dict[tuple[str, str], PodMetrics]
) -> dict[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]]:
    """Remove from ``metrics`` every reading that lacks a container its pod runs
    (:func:`~scaler.model.records.missing_containers`): such a reading would count the missing
    containers as using nothing.

    Returns:
        ``(namespace, name)`` → the removed reading and the containers it lacked.
    """
    partial: dict[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]] = {}
    if not metrics:
        return partial
    get = metrics.get
    for p in pods:
        want = p.containers
        if not want:
            continue
        m = get((p.namespace, p.name))
        if m is None or m.containers is want:  # the usual case: the same shared tuple
            continue
        missing = missing_containers(p, m)
        if missing:
            key = (p.namespace, p.name)
            del metrics[key]
            partial[key] = (m, missing)
    return partial


_KIND_OF: dict[type, str] = {
    Node: "Node",
    NodeMetrics: "NodeMetrics",
    PersistentVolume: "PersistentVolume",
    Pod: "Pod",
    PodMetrics: "PodMetrics",
    PodDisruptionBudget: "PodDisruptionBudget",
    PersistentVolumeClaim: "PersistentVolumeClaim",
    Namespace: "Namespace",
    ResourceSlice: "ResourceSlice",
    ResourceClaim: "ResourceClaim",
    ResourceClaimTemplate: "ResourceClaimTemplate",
    DeviceClass: "DeviceClass",
}
_CLUSTER_SCOPED = (Node, NodeMetrics, PersistentVolume, Namespace, ResourceSlice, DeviceClass)
DRA_KINDS = frozenset({"ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass"})
"""The kinds of Dynamic Resource Allocation (resource.k8s.io/v1)."""


def record_key(rec: Record) -> tuple[str, str, str]:
    """(kind, namespace, name) of a record: what makes two objects the same object."""
    if isinstance(rec, Controller):
        return rec.kind, rec.namespace, rec.name
    if isinstance(rec, _CLUSTER_SCOPED):
        return _KIND_OF[type(rec)], "", rec.name
    return _KIND_OF[type(rec)], rec.namespace, rec.name


class RecordSet:
    """Records collected by kind, then built into a :class:`ClusterSnapshot`.

    Args:
        places: remember where each object came from (``pods.json item 3``, see
            :data:`scaler.model.decode.Place`) and refuse a second object with the same kind,
            namespace and name, naming both places; without it a later record replaces the
            earlier one (a live cache's update).
    """

    def __init__(self, *, places: bool = False) -> None:
        self.by_kind: dict[str, dict[tuple[str, str], Record]] = {}
        """Kind (``Pod``, ``ReplicaSet``...) -> (namespace, name) -> record."""
        self._places: dict[str, dict[tuple[str, str], Place]] | None = {} if places else None
        self.pod_layout: PodLayout | None = None
        """The Pod records already sorted and grouped (a watch cache's), else ``None``: the
        snapshot sorts them. Adding a Pod record drops it."""

    def add(self, rec: Record, place: Place = "") -> None:
        """Add one record (found at ``place``).

        Raises:
            SnapshotError: with ``places``, an object with the same kind, namespace and name was
                added before (the message names both places).
        """
        t = type(rec)
        if t is Pod:
            self.pod_layout = None
        if t in _CLUSTER_SCOPED:
            kind, key = _KIND_OF[t], ("", rec.name)
        else:
            kind, key = rec.kind if t is Controller else _KIND_OF[t], (rec.namespace, rec.name)  # type: ignore[union-attr]
        store = self.by_kind.get(kind)
        if store is None:
            store = self.by_kind[kind] = {}
        if self._places is not None:
            places = self._places.get(kind)
            if places is None:
                places = self._places[kind] = {}
            if key in places:
                first, second = place_text(places[key]), place_text(place)
                raise SnapshotError(f"{ident(kind, *key)} appears twice: in {first} and in {second}")
            places[key] = place
        store[key] = rec

    def values(self, kind: str) -> list[Any]:
        """The records of one kind, in the order they were added."""
        return list(self.by_kind.get(kind, {}).values())

    def dra_objects(self) -> DraObjects:
        """The DRA records collected, indexed (:data:`EMPTY_DRA` when there are none)."""
        if not any(k in self.by_kind for k in DRA_KINDS):
            return EMPTY_DRA
        slices: list[ResourceSlice] = self.values("ResourceSlice")
        claims: list[ResourceClaim] = self.values("ResourceClaim")
        templates: list[ResourceClaimTemplate] = self.values("ResourceClaimTemplate")
        classes: list[DeviceClass] = self.values("DeviceClass")
        return DraObjects(
            slices=tuple(sorted(slices, key=lambda x: x.name)),
            claims={c.key: c for c in sorted(claims, key=lambda x: x.key)},
            templates={
                (t.namespace, t.name): t for t in sorted(templates, key=lambda x: (x.namespace, x.name))
            },
            classes={c.name: c for c in sorted(classes, key=lambda x: x.name)},
        )

    def snapshot(self, now: float | None, workload_kinds: Iterable[str] | None = None) -> ClusterSnapshot:
        """Build the snapshot (see :func:`build_snapshot` for ``now`` and ``workload_kinds``).

        Raises:
            SnapshotError: ``now`` is ``None`` and there is no metrics timestamp.
        """
        with no_cycle_collector():
            snap = self._snapshot(now, workload_kinds)
            # The records are long-lived: hand them to the oldest generation at once (both calls are
            # O(1) list splices), so that resuming the collector does not first traverse every one of
            # them as "young" objects (about 1 s at 150,000 pods). Full collections still see them.
            gc.freeze()
            gc.unfreeze()
            return snap

    def _snapshot(self, now: float | None, workload_kinds: Iterable[str] | None) -> ClusterSnapshot:
        controllers = [r for k in sorted(CONTROLLER_KINDS) for r in self.values(k)]
        snap = ClusterSnapshot.create(
            now=0.0,
            nodes=self.values("Node"),
            pods=self.values("Pod") if self.pod_layout is None else self.pod_layout,
            pdbs=self.values("PodDisruptionBudget"),
            controllers=controllers,
            node_metrics=self.values("NodeMetrics"),
            pvs=self.values("PersistentVolume") if "PersistentVolume" in self.by_kind else None,
            pvcs=self.values("PersistentVolumeClaim"),
            namespaces=self.values("Namespace"),
            dra=self.dra_objects(),
            workload_kinds=(k for k in CONTROLLER_KINDS if k in self.by_kind)
            if workload_kinds is None
            else workload_kinds,
        )
        # Kept by the same (namespace, name) key as the snapshot's: a copy, not a rebuild.
        pod_metrics: dict[tuple[str, str], PodMetrics] = dict(self.by_kind.get("PodMetrics", {}))  # type: ignore[arg-type]
        partial = drop_partial_pod_metrics(snap.pods, pod_metrics)
        snap = replace(snap, pod_metrics=pod_metrics, partial_pod_metrics=partial)
        if now is None:
            now = snap.metrics_time()
            if now is None:
                raise SnapshotError("snapshot has no metrics timestamp; pass --now")
        return replace(snap, now=now)


def build_snapshot(
    objects: Iterable[Mapping[str, Any]],
    now: float | None = None,
    workload_kinds: Iterable[str] | None = None,
) -> ClusterSnapshot:
    """Parse API objects given as plain values (dicts with ``kind`` set) into a
    :class:`ClusterSnapshot` (:func:`scaler.model.decode.parse_object` for each one).

    Args:
        objects: API objects; later duplicates (same kind, namespace, name) replace earlier ones.
        now: evaluation time in Unix seconds; ``None`` uses the metrics timestamp.
        workload_kinds: controller kinds that were listed (the live source lists them all);
            ``None`` takes the kinds present among ``objects``.

    Raises:
        SnapshotError: an object is malformed, of an unsupported kind, or ``now`` cannot be set
            because there is no metrics timestamp.
    """
    records = RecordSet()
    with no_cycle_collector():
        for obj in objects:
            try:
                records.add(parse_object(obj))
            except ObjectError as e:
                raise SnapshotError(str(e)) from None
    return records.snapshot(now, workload_kinds)
