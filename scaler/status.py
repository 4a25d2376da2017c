"""``scaler status``: what a running ``scaler run`` says about the cluster, read back.

The leader writes its status ConfigMap (``<namespace>/<status-config-map-name>``, key
``status``: YAML shaped like cluster-autoscaler's ``cluster-autoscaler-status``, see
:func:`scaler.observability.status_document`) every loop that changes it, and, with
``--write-node-status``, each node's verdict as the ``scaler.io/scale-down-status`` annotation
(JSON ``{"status", "reason", "detail", "since"}``). :func:`read_status` reads both through the
API; :func:`status_lines` and :func:`status_object` render them. Reading needs ``get`` on that
ConfigMap and ``list`` on nodes, nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from scaler.errors import InputError
from scaler.kube.client import READ_CALLS, ApiCall
from scaler.kube.writer import ANNOTATION_STATUS
from scaler.report.columns import render_columns

__all__ = [
    "STATUS_CALLS",
    "VIEWER_CALLS",
    "StatusError",
    "StatusView",
    "read_status",
    "status_lines",
    "status_object",
]

STATUS_CALLS: tuple[ApiCall, ...] = (
    ApiCall("", "v1", "configmaps", "get", namespaced=True, optional=False),
    ApiCall("", "v1", "nodes", "list", namespaced=False, optional=False),
)
"""The calls :func:`read_status` makes: ``get`` of the status ConfigMap (in ``--namespace``, by
its name) and ``list`` of the nodes (their status annotations)."""

VIEWER_CALLS: tuple[ApiCall, ...] = tuple(
    {(c.group, c.resource, c.verb): c for c in (*READ_CALLS, *STATUS_CALLS)}.values()
)
"""Every call of the read-only commands ``kubectl scaler`` offers (``scaler dry-run``, ``scaler
why`` and ``scaler status`` on a live cluster): one LIST of each kind of
:data:`~scaler.kube.client.READ_CALLS` and :data:`STATUS_CALLS`; duplicates removed. What
``deploy/viewer``'s roles grant (a test compares)."""


class StatusError(InputError):
    """The status cannot be read (no ConfigMap, malformed content, API error); one line."""


@dataclass(frozen=True)
class StatusView:
    """The status ConfigMap's document (``status``: a mapping) and the node annotations
    (``annotations``: node name → the parsed ``scaler.io/scale-down-status`` JSON) of
    ``namespace``/``name``."""

    namespace: str
    name: str
    status: dict[str, Any]
    annotations: dict[str, dict[str, Any]]


def parse_status(text: str, where: str) -> dict[str, Any]:
    """The ConfigMap's ``status`` YAML as a mapping.

    Raises:
        StatusError: not YAML, or not a mapping.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise StatusError(f"{where}: the status key is not YAML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise StatusError(f"{where}: the status key is nested too deeply to be read") from None
    if not isinstance(doc, dict):
        raise StatusError(f"{where}: the status key is not a YAML mapping")
    return doc


def parse_annotations(nodes: list[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Node name → its parsed ``scaler.io/scale-down-status`` annotation (nodes without one, or
    with one that is not a JSON object, are left out)."""
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(ANNOTATION_STATUS)
        if not raw:
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested too deeply: not ours
            continue
        if isinstance(value, dict):
            out[str(meta.get("name", ""))] = value
    return out


def read_status(api: Any, namespace: str, name: str) -> StatusView:
    """Read the status ConfigMap ``namespace/name`` and every node's status annotation through
    ``api`` (a ``kubernetes.client.ApiClient``).

    Raises:
        StatusError: the ConfigMap does not exist or holds no ``status`` key (scaler is not
            running there, or has not finished a loop), or the API refused or failed.
    """
    from kubernetes.client import CoreV1Api
    from kubernetes.client.exceptions import ApiException

    core = CoreV1Api(api)
    where = f"ConfigMap {namespace}/{name}"
    try:
        cm: Any = core.read_namespaced_config_map(
            name, namespace, _preload_content=False, _request_timeout=30
        )
        data = (json.loads(cm.data).get("data") or {}).get("status")
        listed: Any = core.list_node(_preload_content=False, _request_timeout=60)
        nodes = json.loads(listed.data).get("items") or []
    except ApiException as e:
        if e.status == 404:
            raise StatusError(
                f"no {where}: scaler is not running in namespace {namespace}, or has not finished a loop "
                "(--namespace, --status-config-map-name)"
            ) from None
        raise StatusError(f"reading {where} and the nodes: HTTP {e.status} {e.reason}") from None
    except Exception as e:  # connection refused, TLS, timeouts
        raise StatusError(f"cluster unreachable: {type(e).__name__}: {e}") from None
    if not data:
        raise StatusError(f"{where} has no status key")
    return StatusView(namespace, name, parse_status(data, where), parse_annotations(nodes))


def _rows(view: StatusView) -> list[dict[str, str]]:
    """One row per node of the status document, with ``since`` from the node's annotation."""
    rows = []
    for entry in view.status.get("nodes") or []:
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name", ""))
        note = view.annotations.get(name, {})
        rows.append({
            "name": name,
            "status": str(entry.get("status", "")),
            "reason": str(entry.get("reason", "")),
            "since": str(note.get("since") or "-"),
            "detail": str(entry.get("detail", "")),
            "monthlyCostUsd": str(entry.get("monthlyCostUsd", "-")),
        })  # fmt: skip
    return rows


def status_object(view: StatusView) -> dict[str, Any]:
    """``-o json|yaml``: ``{"configMap": "ns/name", "status": <the document>, "nodes": [...]}``,
    each node with ``name``, ``status``, ``reason``, ``detail`` and ``since`` (RFC 3339, from
    its annotation; ``null`` without one)."""
    nodes = [
        {k: (None if v == "-" and k == "since" else v) for k, v in r.items() if k != "monthlyCostUsd"}
        for r in _rows(view)
    ]
    return {"configMap": f"{view.namespace}/{view.name}", "status": view.status, "nodes": nodes}


def status_lines(view: StatusView, wide: bool = False) -> list[str]:
    """The default view: a few ``Field: value`` lines (leader, mode, last loop, metrics API,
    candidates and savings, deletions and rollbacks in progress), a blank line, then one
    kubectl-style row per node (NODE, STATUS, REASON, SINCE; ``wide`` adds the monthly cost and
    the DETAIL)."""
    doc = view.status
    scale_down = ((doc.get("clusterWide") or {}).get("scaleDown")) or {}
    savings = scale_down.get("savings") or {}
    metrics_api = doc.get("metricsAPI") or {}
    fields = [
        ("Leader", f"{doc.get('leader', '-')} ({doc.get('mode', '-')})"),
        ("Last update", str(doc.get("time", "-"))),
        ("Metrics API", str(metrics_api.get("status", "-"))
         + (f" since {metrics_api['since']}" if metrics_api.get("since") else "")),
        ("Scale-down", f"{scale_down.get('status', '-')}, {scale_down.get('candidates', 0)} candidate(s)"
         + (f", in cooldown: {scale_down['cooldown']}" if scale_down.get("cooldown") else "")),
        ("Savings", f"{savings.get('monthlyUsd', '-')} USD/month"
         + (f" ({savings['unpricedNodes']} unpriced)" if savings.get("unpricedNodes") else "")),
    ]  # fmt: skip
    if doc.get("deletionsInProgress"):
        fields.append(("Deleting", ", ".join(map(str, doc["deletionsInProgress"]))))
    for r in doc.get("rollbacksPending") or []:
        fields.append(("Rollback pending", f"{r.get('name')}: {r.get('error')}"))
    width = max(len(k) for k, _ in fields) + 2
    lines = [f"{k + ':':<{width}}{v}" for k, v in fields]
    rows = _rows(view)
    if not rows:
        return [*lines, "", "No nodes in the status."]
    headers = ["NODE", "STATUS", "REASON", "SINCE"]
    cells = [[r["name"], r["status"], r["reason"], r["since"]] for r in rows]
    if wide:
        headers += ["MONTHLY-USD", "DETAIL"]
        cells = [[*c, r["monthlyCostUsd"], r["detail"] or "-"] for c, r in zip(cells, rows, strict=True)]
    return [*lines, "", *render_columns(headers, cells)]
