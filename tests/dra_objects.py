"""API objects (plain dicts, as ``kubectl get -o json`` prints them) of small clusters with
Dynamic Resource Allocation, for tests: GPU nodes whose devices a DRA driver publishes, claims
made for pods from templates, shared claims, and the snapshot directory they form."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
NOW = "2026-11-28T12:00:00Z"
CREATED = "2026-11-27T12:00:00Z"
RESOURCE_API = "resource.k8s.io/v1"


def node(
    name: str, *, pool: str = "gpu", cpu: str = "8", memory: str = "32Gi", zone: str = "us-central1-a",
    labels: Mapping[str, str] | None = None, extended: Mapping[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A Ready GKE node of node pool ``pool``."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "creationTimestamp": CREATED,
            "labels": {
                "cloud.google.com/gke-nodepool": pool,
                "topology.kubernetes.io/zone": zone,
                "kubernetes.io/hostname": name,
                **(labels or {}),
            },
        },
        "spec": {"providerID": f"gce://p/{zone}/{name}"},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110", **(extended or {})},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": CREATED}],
        },
    }


def device(name: str, **attributes: Any) -> dict[str, Any]:
    """A device with typed attributes (``int``, ``bool``, ``string``; a ``("version", s)`` tuple
    for a version)."""
    attrs = {}
    for k, v in attributes.items():
        if isinstance(v, tuple):
            attrs[k] = {v[0]: v[1]}
        elif isinstance(v, bool):
            attrs[k] = {"bool": v}
        elif isinstance(v, int):
            attrs[k] = {"int": v}
        else:
            attrs[k] = {"string": v}
    return {"name": name, "attributes": attrs}


def local_slice(
    node_name: str, devices: Sequence[Mapping[str, Any]], *, driver: str = DRIVER, generation: int = 1,
    count: int = 1, name: str | None = None, shared_counters: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A ResourceSlice of ``node_name``'s own devices (pool named after the node)."""
    spec: dict[str, Any] = {
        "driver": driver,
        "nodeName": node_name,
        "pool": {"name": node_name, "generation": generation, "resourceSliceCount": count},
        "devices": list(devices),
    }
    if shared_counters:
        spec["sharedCounters"] = list(shared_counters)
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node_name}-{driver}"},
        "spec": spec,
    }


def device_class(name: str = CLASS, *selectors: str) -> dict[str, Any]:
    """A DeviceClass; by default selecting the devices of :data:`DRIVER`."""
    exprs = selectors or (f'device.driver == "{DRIVER}"',)
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]},
    }


def request(
    name: str = "gpu", *, count: int = 1, device_class_name: str = CLASS, selectors: Sequence[str] = (),
    mode: str = "ExactCount", admin: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """One ``exactly`` device request."""
    exactly: dict[str, Any] = {"deviceClassName": device_class_name, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if admin:
        exactly["adminAccess"] = True
    return {"name": name, "exactly": exactly}


def claim(
    name: str, namespace: str = "ml", *, requests: Sequence[Mapping[str, Any]] | None = None,
    owner: str = "", allocated: Sequence[tuple[str, str, str]] = (), node_name: str = "",
    reserved_for: Sequence[str] = (), constraints: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A ResourceClaim; ``allocated`` are ``(request, pool, device)`` of :data:`DRIVER`,
    reachable from ``node_name`` only when it is given."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-claim-{name}"}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": f"uid-{owner}", "controller": True}
        ]
    devices: dict[str, Any] = {"requests": list(requests or [request()])}
    if constraints:
        devices["constraints"] = list(constraints)
    obj: dict[str, Any] = {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": devices},
    }
    status: dict[str, Any] = {}
    if allocated:
        alloc: dict[str, Any] = {
            "devices": {
                "results": [{"request": r, "driver": DRIVER, "pool": p, "device": d} for r, p, d in allocated]
            }
        }
        if node_name:
            alloc["nodeSelector"] = {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            }
        status["allocation"] = alloc
    if reserved_for:
        status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved_for]
    if status:
        obj["status"] = status
    return obj


def template(
    name: str, namespace: str = "ml", *, requests: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """A ResourceClaimTemplate."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": list(requests or [request()])}}},
    }


def pod(
    name: str, node_name: str, namespace: str = "ml", *, cpu: str = "500m", memory: str = "1Gi",
    claims: Mapping[str, str] | None = None, template_claims: Mapping[str, str] | None = None,
    owner: tuple[str, str] | None = ("ReplicaSet", "infer-rs"),
) -> dict[str, Any]:  # fmt: skip
    """A running pod. ``claims``: pod claim name → ResourceClaim name; ``template_claims``: pod
    claim name → the claim made for it from template ``tmpl``."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "creationTimestamp": CREATED,
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner[0],
                "name": owner[1],
                "uid": f"uid-{owner[1]}",
                "controller": True,
            }
        ]
    spec: dict[str, Any] = {
        "nodeName": node_name,
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    status: dict[str, Any] = {"phase": "Running", "startTime": CREATED}
    refs = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    refs += [{"name": k, "resourceClaimTemplateName": "tmpl"} for k in (template_claims or {})]
    if refs:
        spec["resourceClaims"] = refs
    if template_claims:
        status["resourceClaimStatuses"] = [
            {"name": k, "resourceClaimName": v} for k, v in template_claims.items()
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def node_metrics(name: str, cpu: str = "500m", memory: str = "2Gi") -> dict[str, Any]:
    """A NodeMetrics reading at :data:`NOW`."""
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "NodeMetrics",
        "metadata": {"name": name},
        "timestamp": NOW,
        "window": "30s",
        "usage": {"cpu": cpu, "memory": memory},
    }


def pod_metrics(name: str, namespace: str = "ml", cpu: str = "100m", memory: str = "512Mi") -> dict[str, Any]:
    """A PodMetrics reading at :data:`NOW` (one container, ``main``)."""
    return {
        "apiVersion": "metrics.k8s.io/v1beta1",
        "kind": "PodMetrics",
        "metadata": {"name": name, "namespace": namespace},
        "timestamp": NOW,
        "window": "30s",
        "containers": [{"name": "main", "usage": {"cpu": cpu, "memory": memory}}],
    }


def write_snapshot(directory: Path, objects: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``objects`` as one ``v1 List`` per kind group (``nodes.json``, ``pods.json``,
    ``dra.json``, ``metrics.json``) under ``directory``."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        kind = obj["kind"]
        file = {"Node": "nodes", "Pod": "pods", "NodeMetrics": "metrics", "PodMetrics": "metrics"}.get(
            kind, "other"
        )
        if obj.get("apiVersion") == RESOURCE_API:
            file = "dra"
        groups.setdefault(file, []).append(obj)
    directory.mkdir(parents=True, exist_ok=True)
    for file, items in groups.items():
        (directory / f"{file}.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=1)
        )
    return directory
