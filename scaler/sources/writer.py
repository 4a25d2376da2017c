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

Snapshots are meant to be shared, fed to ``scaler replay`` and ``scaler tune`` and put on a volume
for a Ray job, so by default they keep no secret a pod spec may carry (:func:`redact`): literal
environment variable values (``env[].value`` of every container, init and ephemeral container,
in Pods and in every controller's pod template; ``valueFrom`` references are kept, they name a
Secret or ConfigMap key but hold no value), ``metadata.managedFields`` and kubectl's
``kubectl.kubernetes.io/last-applied-configuration`` annotation (a copy of the applied object,
env values included). Nothing scaler decides with reads any of them. Files are written mode
0600 and a directory it creates 0700, whatever the umask allows beyond that.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from scaler.model.snapshot import CONTROLLER_KINDS, DRA_KINDS

__all__ = ["LAST_APPLIED_ANNOTATION", "SNAPSHOT_FILES", "redact", "write_snapshot"]

LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
"""kubectl's client-side apply annotation: the whole object as last applied, as JSON."""

_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
_FILE_MODE = 0o600
_DIR_MODE = 0o700

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


def redact(obj: Any) -> Any:
    """A copy of the API object ``obj`` without the secrets a snapshot must not keep (see the
    module docstring): every ``metadata`` loses ``managedFields`` and the
    :data:`LAST_APPLIED_ANNOTATION`, every container list (``containers``, ``initContainers``,
    ``ephemeralContainers``, at any depth: pod specs and pod templates alike) loses its
    ``env[].value``. Everything else is kept as it is; ``obj`` is not changed."""
    return _redact(obj, "")


def _redact(value: Any, key: str) -> Any:
    if isinstance(value, list):
        if key in _CONTAINER_LISTS:
            return [_container(c) for c in value]
        return [_redact(v, "") for v in value]
    if not isinstance(value, Mapping):
        return value
    out = {k: _redact(v, k) for k, v in value.items()}
    if key == "metadata":
        out.pop("managedFields", None)
        annotations = out.get("annotations")
        if isinstance(annotations, Mapping) and LAST_APPLIED_ANNOTATION in annotations:
            out["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED_ANNOTATION}
    return out


def _container(container: Any) -> Any:
    out = _redact(container, "")
    env = out.get("env") if isinstance(out, dict) else None
    if isinstance(env, list):
        out["env"] = [
            {k: v for k, v in e.items() if k != "value"} if isinstance(e, Mapping) else e for e in env
        ]
    return out


def write_snapshot(
    objects: Iterable[Mapping[str, Any]], out_dir: Path, *, overwrite: bool = False, raw: bool = False
) -> list[Path]:
    """Write ``objects`` (dicts with ``kind`` set, e.g. from
    :func:`scaler.sources.kube.fetch_objects`) as a snapshot directory, each object through
    :func:`redact` unless ``raw``; files mode 0600, ``out_dir`` (when created here) 0700.

    Items keep their input order. In the ``v1 List`` files every item has ``apiVersion`` and
    ``kind`` (a missing ``apiVersion`` is filled in for known kinds); metrics items are written
    without either, as the metrics API serves them.

    Args:
        objects: API objects as dicts.
        out_dir: directory to create (parents too).
        overwrite: allow a non-empty ``out_dir``; the snapshot files are replaced and a stale
            ``volumes.json`` is removed when there are no volumes. Other files are left alone.
        raw: write the objects as the API server served them (env values, managedFields and
            the last-applied annotation included).

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
        groups[name].append(
            _item(obj if raw else redact(obj), metrics=SNAPSHOT_FILES[name][0] == _METRICS_API)
        )

    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{out_dir}: exists and is not a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise ValueError(f"{out_dir}: directory is not empty (use overwrite to replace its snapshot)")
    if not out_dir.is_dir():
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        out_dir.mkdir(mode=_DIR_MODE)

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
        _write_private(tmp, (json.dumps(doc, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
        os.replace(tmp, path)
        written.append(path)
    return written


def _write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable by its owner only (0600), never through a symlink; an
    existing file (a stale temporary) is truncated and its mode reset."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, _FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), _FILE_MODE)
        f.write(data)


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
