"""The immutable cluster snapshot every evaluation reads, for live and offline alike.

:func:`build_snapshot` turns raw API objects (dicts as ``kubectl get -o json`` prints them, from
files or from the live API) into a :class:`ClusterSnapshot` of slim records with indexes by node,
owner and name. Nothing downstream parses JSON again.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scaler.model.gcpause import no_cycle_collector
from scaler.model.parse import (
    ObjectError,
    parse_controller,
    parse_namespace,
    parse_node,
    parse_node_metrics,
    parse_pdb,
    parse_pod,
    parse_pod_metrics,
    parse_pv,
    parse_pvc,
)
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
)

__all__ = ["CONTROLLER_KINDS", "IGNORED_KINDS", "ClusterSnapshot", "SnapshotError", "build_snapshot"]

CONTROLLER_KINDS = frozenset(
    {"ReplicaSet", "ReplicationController", "StatefulSet", "DaemonSet", "Job", "Deployment", "CronJob"}
)
# Kinds a `kubectl get all`-style dump may hold that the engine does not need.
IGNORED_KINDS = frozenset(
    {
        "Service",
        "Endpoints",
        "EndpointSlice",
        "ConfigMap",
        "Secret",
        "Event",
        "ServiceAccount",
        "HorizontalPodAutoscaler",
        "Ingress",
        "StorageClass",
        "PriorityClass",
        "Lease",
    }
)


class SnapshotError(ValueError):
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

    @staticmethod
    def create(
        now: float,
        nodes: Iterable[Node],
        pods: Iterable[Pod],
        pdbs: Iterable[PodDisruptionBudget] = (),
        controllers: Iterable[Controller] = (),
        node_metrics: Iterable[NodeMetrics] = (),
        pod_metrics: Iterable[PodMetrics] = (),
        pvs: Iterable[PersistentVolume] | None = None,
        pvcs: Iterable[PersistentVolumeClaim] = (),
        workload_kinds: Iterable[str] | None = None,
        namespaces: Iterable[Namespace] = (),
    ) -> ClusterSnapshot:
        """Build a snapshot from records, computing the indexes.

        Nodes are kept sorted by name and each node's pods by ``namespace/name``, so every
        evaluation sees the same order whatever order the input had.
        """
        node_t = tuple(sorted(nodes, key=lambda n: n.name))
        pod_t = tuple(sorted(pods, key=lambda p: (p.namespace, p.name)))
        by_node: dict[str, list[Pod]] = {n.name: [] for n in node_t}
        for p in pod_t:
            if p.node_name in by_node:
                by_node[p.node_name].append(p)
        ctrl = tuple(controllers)
        pv_list = None if pvs is None else tuple(pvs)
        return ClusterSnapshot(
            now=now,
            nodes=node_t,
            pods=pod_t,
            pdbs=tuple(sorted(pdbs, key=lambda b: (b.namespace, b.name))),
            controllers={(c.kind, c.namespace, c.name): c for c in ctrl},
            node_metrics={m.name: m for m in node_metrics},
            pod_metrics={(m.namespace, m.name): m for m in pod_metrics},
            pvs={v.name: v for v in pv_list or ()},
            pvcs={(c.namespace, c.name): c for c in pvcs},
            has_pvs=pv_list is not None and len(pv_list) > 0,
            workload_kinds=frozenset(c.kind for c in ctrl)
            if workload_kinds is None
            else frozenset(workload_kinds),
            namespaces={ns.name: ns for ns in namespaces},
            pods_by_node={k: tuple(v) for k, v in by_node.items()},
            node_by_name={n.name: n for n in node_t},
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


_ITEM_KIND = {"NodeMetricsList": "NodeMetrics", "PodMetricsList": "PodMetrics"}


def flatten_objects(doc: Any, source: str) -> list[dict[str, Any]]:
    """Flatten one decoded document (a List, a ``*List`` or a single object) into objects, each
    with its ``kind`` set (metrics list items have none in the API, so the list's kind names them).

    Raises:
        SnapshotError: the document is not an object or a list of objects (names ``source``).
    """
    if doc is None:
        return []
    if not isinstance(doc, Mapping):
        raise SnapshotError(f"{source}: expected a Kubernetes object or List, got {type(doc).__name__}")
    kind = doc.get("kind")
    if "items" in doc and (kind is None or str(kind).endswith("List")):
        items = doc.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise SnapshotError(f"{source}: 'items' must be a list")
        default_kind = _ITEM_KIND.get(str(kind)) or (str(kind)[:-4] if kind and kind != "List" else None)
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise SnapshotError(f"{source}: item {i} is not an object")
            for sub in flatten_objects(item, f"{source} item {i}"):
                if not sub.get("kind") and default_kind:
                    sub = {**sub, "kind": default_kind}
                out.append(sub)
        return out
    return [dict(doc)]


def build_snapshot(
    objects: Iterable[Mapping[str, Any]],
    now: float | None = None,
    workload_kinds: Iterable[str] | None = None,
) -> ClusterSnapshot:
    """Parse raw API objects of any supported kind into a :class:`ClusterSnapshot`.

    Args:
        objects: API objects with ``kind`` set; later duplicates (same kind, namespace, name)
            replace earlier ones.
        now: evaluation time in Unix seconds; ``None`` uses the metrics timestamp.
        workload_kinds: controller kinds that were listed (the live source lists them all);
            ``None`` takes the kinds present among ``objects``.

    Raises:
        SnapshotError: an object is malformed, of an unknown kind, or ``now`` cannot be set
            because there is no metrics timestamp.
    """
    with no_cycle_collector():
        snap = _build_snapshot(objects, now, workload_kinds)
        # The records are long-lived: hand them to the oldest generation at once (both calls are
        # O(1) list splices), so that resuming the collector does not first traverse every one of
        # them as "young" objects (about 1 s at 150,000 pods). Full collections still see them.
        gc.freeze()
        gc.unfreeze()
        return snap


def _build_snapshot(
    objects: Iterable[Mapping[str, Any]],
    now: float | None,
    workload_kinds: Iterable[str] | None,
) -> ClusterSnapshot:
    parsed: dict[str, dict[tuple[str, str], Any]] = {}
    kinds = {
        "Node": parse_node,
        "Pod": parse_pod,
        "PodDisruptionBudget": parse_pdb,
        "NodeMetrics": parse_node_metrics,
        "PodMetrics": parse_pod_metrics,
        "PersistentVolume": parse_pv,
        "PersistentVolumeClaim": parse_pvc,
        "Namespace": parse_namespace,
    }
    saw_pvs = False
    seen_kinds: set[str] = set()
    for obj in objects:
        raw_kind = obj.get("kind")
        kind = (
            raw_kind if type(raw_kind) is str or isinstance(raw_kind, str) else None
        )  # a list or dict kind is unhashable
        raw_meta = obj.get("metadata")
        meta: Mapping[str, Any] = raw_meta if type(raw_meta) is dict or isinstance(raw_meta, Mapping) else {}
        ns = meta.get("namespace")
        name = meta.get("name")
        key = (ns if type(ns) is str else str(ns or ""), name if type(name) is str else str(name or ""))
        try:
            parse = kinds.get(kind)  # type: ignore[arg-type]
            if parse is not None:
                parsed.setdefault(str(kind), {})[key] = parse(obj)
                saw_pvs |= kind == "PersistentVolume"
            elif kind in CONTROLLER_KINDS:
                seen_kinds.add(str(kind))
                parsed.setdefault("Controller", {})[(str(kind), *key)] = parse_controller(obj)  # type: ignore[index]
            elif kind in IGNORED_KINDS:
                continue
            else:
                raise SnapshotError(
                    f"unsupported object kind {raw_kind!r} ({key[0] + '/' if key[0] else ''}{key[1]})"
                )
        except ObjectError as e:
            raise SnapshotError(str(e)) from None

    def values(kind: str) -> list[Any]:
        return list(parsed.get(kind, {}).values())

    snap = ClusterSnapshot.create(
        now=0.0,
        nodes=values("Node"),
        pods=values("Pod"),
        pdbs=values("PodDisruptionBudget"),
        controllers=values("Controller"),
        node_metrics=values("NodeMetrics"),
        pod_metrics=values("PodMetrics"),
        pvs=values("PersistentVolume") if saw_pvs else None,
        pvcs=values("PersistentVolumeClaim"),
        workload_kinds=seen_kinds if workload_kinds is None else workload_kinds,
        namespaces=values("Namespace"),
    )
    if now is None:
        now = snap.metrics_time()
        if now is None:
            raise SnapshotError("snapshot has no metrics timestamp; pass --now")
    return _with_now(snap, now)


def _with_now(snap: ClusterSnapshot, now: float) -> ClusterSnapshot:
    from dataclasses import replace

    return replace(snap, now=now)
