"""Write raw API objects as a snapshot directory that :func:`scaler.sources.files.load_snapshot`
reads back: the same layout as the bundled examples, one kubectl-style List per file.

=====================  =====================================================================
file                   content
=====================  =====================================================================
``nodes.json``         Nodes (``v1 List``)
``pods.json``          Pods (``v1 List``)
``pdbs.json``          PodDisruptionBudgets (``v1 List``)
``workloads.json``     every controller kind: ReplicaSets, StatefulSets, … (``v1 List``)
``volumes.json``       PersistentVolumes and PersistentVolumeClaims, only if there are any
``namespaces.json``    Namespaces (their labels, for ``namespaceSelector``), only if listed
``dra.json``           ResourceSlices, ResourceClaims, ResourceClaimTemplates and DeviceClasses
                       (Dynamic Resource Allocation), only if there are any
``node-metrics.json``  ``metrics.k8s.io/v1beta1 NodeMetricsList`` (items without ``kind``)
``pod-metrics.json``   ``metrics.k8s.io/v1beta1 PodMetricsList`` (items without ``kind``)
=====================  =====================================================================
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scaler.model.snapshot import CONTROLLER_KINDS, DRA_KINDS

__all__ = ["SNAPSHOT_FILES", "write_snapshot"]

_METRICS_API = "metrics.k8s.io/v1beta1"

# file name -> (List apiVersion, List kind, kinds it holds); written in this order.
SNAPSHOT_FILES: dict[str, tuple[str, str, frozenset[str]]] = {
    "nodes.json": ("v1", "List", frozenset({"Node"})),
    "pods.json": ("v1", "List", frozenset({"Pod"})),
    "pdbs.json": ("v1", "List", frozenset({"PodDisruptionBudget"})),
    "workloads.json": ("v1", "List", CONTROLLER_KINDS),
    "volumes.json": ("v1", "List", frozenset({"PersistentVolume", "PersistentVolumeClaim"})),
    "namespaces.json": ("v1", "List", frozenset({"Namespace"})),
    "dra.json": ("v1", "List", DRA_KINDS),
    "node-metrics.json": (_METRICS_API, "NodeMetricsList", frozenset({"NodeMetrics"})),
    "pod-metrics.json": (_METRICS_API, "PodMetricsList", frozenset({"PodMetrics"})),
}
"""Snapshot file name -> (List ``apiVersion``, List ``kind``, object kinds it holds)."""

_OPTIONAL_FILES = frozenset({"volumes.json", "namespaces.json", "dra.json"})  # written only when non-empty

_API_VERSIONS = {
    "Node": "v1",
    "Pod": "v1",
    "ReplicationController": "v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
    "Namespace": "v1",
    "PodDisruptionBudget": "policy/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    **dict.fromkeys(DRA_KINDS, "resource.k8s.io/v1"),
}
_FILE_OF_KIND = {kind: name for name, (_, _, kinds) in SNAPSHOT_FILES.items() for kind in kinds}


def write_snapshot(
    objects: Iterable[Mapping[str, Any]], out_dir: Path, *, overwrite: bool = False
) -> list[Path]:
    """Write ``objects`` (dicts with ``kind`` set, e.g. from
    :func:`scaler.sources.kube.fetch_objects`) as a snapshot directory.

    Items keep their input order. In the ``v1 List`` files every item has ``apiVersion`` and
    ``kind`` (a missing ``apiVersion`` is filled in for known kinds); metrics items are written
    without either, as the metrics API serves them.

    Args:
        objects: API objects as dicts.
        out_dir: directory to create (parents too).
        overwrite: allow a non-empty ``out_dir``; the snapshot files are replaced and a stale
            ``volumes.json`` is removed when there are no volumes. Other files are left alone.

    Returns:
        The files written, in :data:`SNAPSHOT_FILES` order.

    Raises:
        ValueError: ``out_dir`` exists and is not a directory, or is a non-empty directory and
            ``overwrite`` is false (the message names the path); an object has a missing or
            unsupported ``kind``.
    """
    out_dir = Path(out_dir)
    groups: dict[str, list[dict[str, Any]]] = {name: [] for name in SNAPSHOT_FILES}
    for i, obj in enumerate(objects):
        kind = obj.get("kind") if isinstance(obj, Mapping) else None
        name = _FILE_OF_KIND.get(str(kind)) if kind else None
        if name is None:
            raise ValueError(f"object {i} ({_describe(obj)}): unsupported kind {kind!r}")
        groups[name].append(_item(obj, metrics=SNAPSHOT_FILES[name][0] == _METRICS_API))

    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise ValueError(f"{out_dir}: directory is not empty (use overwrite to replace its snapshot)")
    out_dir.mkdir(parents=True, exist_ok=True)

    written: list[Path] = []
    for name, (api_version, list_kind, _) in SNAPSHOT_FILES.items():
        path = out_dir / name
        items = groups[name]
        if not items and name in _OPTIONAL_FILES:
            path.unlink(missing_ok=True)
            continue
        doc = {
            "apiVersion": api_version,
            "kind": list_kind,
            "metadata": {"resourceVersion": ""},
            "items": items,
        }
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, path)
        written.append(path)
    return written


def _item(obj: Mapping[str, Any], metrics: bool) -> dict[str, Any]:
    rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if metrics:
        return rest
    kind = str(obj["kind"])
    api_version = obj.get("apiVersion") or _API_VERSIONS.get(kind, "v1")
    return {"apiVersion": api_version, "kind": kind, **rest}


def _describe(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "no metadata"
    ns, name = meta.get("namespace"), meta.get("name")
    return f"{ns}/{name}" if ns else str(name)
