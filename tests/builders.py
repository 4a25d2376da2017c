"""Small factories for model records in tests. Units: CPU millicores, memory bytes, seconds.

Every factory takes ``**overrides`` passed straight to the record's constructor, so any field
not covered by a named parameter can still be set.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scaler.model.records import (
    LABEL_HOSTNAME,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    Controller,
    LabelSelector,
    Node,
    OwnerRef,
    Pod,
    PodDisruptionBudget,
    Resources,
    Taint,
)

__all__ = [
    "GI",
    "KI",
    "MI",
    "OBJECT_NAMESPACE",
    "Sleeps",
    "make_controller",
    "make_node",
    "make_pdb",
    "make_pod",
    "node_object",
    "owner_ref",
    "pdb_object",
    "pod_object",
]

KI = 1024
MI = 1024**2
GI = 1024**3

_API_VERSIONS = {
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Deployment": "apps/v1",
    "ReplicationController": "v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
}


def owner_ref(kind: str, name: str, api_version: str | None = None) -> OwnerRef:
    """A controller reference; ``api_version`` defaults to the kind's usual group/version
    (``apps/v1``, ``batch/v1``, ``v1``; ``example.com/v1`` for unknown kinds)."""
    version = api_version if api_version is not None else _API_VERSIONS.get(kind, "example.com/v1")
    return OwnerRef(kind=kind, name=name, uid=f"uid-{kind.lower()}-{name}", api_version=version)


def make_pod(
    name: str,
    namespace: str = "default",
    node: str = "n1",
    cpu_m: int = 100,
    mem: int = 256 * MI,
    owner_kind: str | None = "ReplicaSet",
    owner_name: str = "app",
    annotations: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Pod:
    """A running pod on ``node`` requesting ``cpu_m`` millicores and ``mem`` bytes (pods=1).

    ``owner_kind=None`` makes a bare pod (no controller); otherwise the controller is
    ``owner_kind/owner_name`` (see :func:`owner_ref`). Pass ``controller=...`` in
    ``overrides`` for full control.
    """
    fields: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "uid": f"{namespace}/{name}",
        "node_name": node,
        "requests": Resources(cpu_millicores=cpu_m, memory_bytes=mem, pods=1),
        "labels": dict(labels or {}),
        "annotations": dict(annotations or {}),
        "controller": owner_ref(owner_kind, owner_name) if owner_kind is not None else None,
    }
    fields.update(overrides)
    return Pod(**fields)


def make_node(
    name: str,
    cpu_m: int = 4000,
    mem: int = 16 * GI,
    pool: str = "pool-a",
    zone: str = "z1",
    labels: Mapping[str, str] | None = None,
    taints: tuple[Taint, ...] = (),
    max_pods: int = 110,
    **overrides: Any,
) -> Node:
    """A ready node with allocatable ``cpu_m`` millicores, ``mem`` bytes and ``max_pods`` pods.

    Labels: node pool ``pool`` (omitted when ``""``), zone ``zone`` (omitted when ``""``),
    hostname ``name``, then ``labels`` on top.
    """
    all_labels: dict[str, str] = {LABEL_HOSTNAME: name}
    if pool:
        all_labels[LABEL_NODEPOOL] = pool
    if zone:
        all_labels[LABEL_ZONE] = zone
    all_labels.update(labels or {})
    fields: dict[str, Any] = {
        "name": name,
        "allocatable": Resources(cpu_millicores=cpu_m, memory_bytes=mem, pods=max_pods),
        "labels": all_labels,
        "taints": taints,
        "uid": f"uid-node-{name}",
    }
    fields.update(overrides)
    return Node(**fields)


def make_pdb(
    name: str,
    namespace: str = "default",
    match_labels: Mapping[str, str] | None = None,
    disruptions_allowed: int = 1,
    **overrides: Any,
) -> PodDisruptionBudget:
    """A PDB selecting ``match_labels`` (``None`` → ``{"app": name}``; ``{}`` → every pod of the
    namespace) with ``status.disruptionsAllowed`` = ``disruptions_allowed``. Pass
    ``selector=None`` in ``overrides`` for a null selector (matches nothing)."""
    fields: dict[str, Any] = {
        "namespace": namespace,
        "name": name,
        "selector": LabelSelector(
            match_labels=dict(match_labels) if match_labels is not None else {"app": name}
        ),
        "disruptions_allowed": disruptions_allowed,
    }
    fields.update(overrides)
    return PodDisruptionBudget(**fields)


def make_controller(
    kind: str = "ReplicaSet",
    name: str = "app",
    namespace: str = "default",
    replicas: int | None = -1,
    **overrides: Any,
) -> Controller:
    """A workload controller. ``replicas`` defaults to 3 for kinds with ``spec.replicas``
    (ReplicaSet, ReplicationController, StatefulSet, Deployment) and ``None`` otherwise."""
    if replicas == -1:
        replicas = 3 if kind in ("ReplicaSet", "ReplicationController", "StatefulSet", "Deployment") else None
    fields: dict[str, Any] = {
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "uid": f"uid-{kind.lower()}-{name}",
        "replicas": replicas,
    }
    fields.update(overrides)
    return Controller(**fields)


# -- API objects (JSON as the API server serves them), for the loopback fakes -----------------------

OBJECT_NAMESPACE = "shop"
"""The namespace of :func:`pod_object` and :func:`pdb_object` unless told otherwise."""


def node_object(name: str, **spec: Any) -> dict[str, Any]:
    """A v1 Node named ``name`` in pool ``default`` (4 CPUs, 16 GiB allocatable); ``spec`` keys
    are added to its spec (``unschedulable=True``, ``taints=[...]``)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"pool": "default"}},
        "spec": {"providerID": f"gce://p/europe-west1-b/{name}", **spec},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


def pod_object(
    name: str,
    *,
    app: str = "web",
    owner: str | None = "ReplicaSet",
    grace: int | None = 30,
    node: str = "n1",
    namespace: str = OBJECT_NAMESPACE,
) -> dict[str, Any]:
    """A running v1 Pod ``namespace/name`` (UID ``uid-<name>``, label ``app``) on ``node``,
    controlled by a ``owner`` (``None``: a bare pod), with ``grace`` seconds of termination grace
    (``None``: unset)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": f"{app}-rs", "uid": "rs", "controller": True}
        ]
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "image": "i"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Running"}}


def pdb_object(
    name: str, allowed: int, selector: dict[str, Any] | None = None, namespace: str = OBJECT_NAMESPACE
) -> dict[str, Any]:
    """A policy/v1 PodDisruptionBudget ``namespace/name`` (``minAvailable: 1``) whose status
    allows ``allowed`` disruptions, selecting ``selector`` (default: ``app=web``)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": selector if selector is not None else {"matchLabels": {"app": "web"}},
            "minAvailable": 1,
        },
        "status": {
            "disruptionsAllowed": allowed,
            "currentHealthy": 2,
            "desiredHealthy": 1,
            "expectedPods": 2,
        },
    }


class Sleeps:
    """An injected sleep (a writer's, a retry's): records each wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
