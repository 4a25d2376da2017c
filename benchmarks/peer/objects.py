"""A snapshot's API objects, reshaped to be created in a real API server beside the real
cluster-autoscaler (pure functions, no I/O except :func:`read_snapshot`).

A snapshot (``kubectl get -o json`` output, or :meth:`benchmarks.generate.Cluster.iter_objects`)
holds objects as the API server printed them: server-set fields (``uid``, ``resourceVersion``,
``creationTimestamp``, ``status``) that a create ignores or refuses, owner references naming
uids the new server will not give, GCE provider IDs. :func:`load_plan` turns it into a
:class:`LoadPlan`, the objects to create in dependency order, each with the status to write
through its ``status`` subresource afterwards:

* **Nodes** become the kwok cloud provider's nodes (``cloudprovider/kwok`` in CA 1.30):
  ``spec.providerID: kwok:<name>`` and the annotations ``cluster-autoscaler.kwok.nodegroup/name:
  <GKE node pool>`` and ``kwok.x-k8s.io/node: fake``; a node without a node-pool label keeps a
  non-kwok provider ID (CA: not autoscaled, as scaler: ``NotAutoscaled``) but gets the group
  annotation ``unmanaged`` (the provider's ``Refresh`` exits when a node has neither).
  :func:`kwok_config_maps` gives the provider its two ConfigMaps: one template node per pool
  (min 0, max far above the pool's size, desired = the pool's size).
* **Workloads** (Deployments before their ReplicaSets, CronJobs before their Jobs) and **pods**
  keep their names, labels and specs; owner references are re-pointed at the new uids by
  (kind, namespace, name) once the owners exist. Jobs get ``manualSelector`` (their selector is
  the snapshot's) and a ``Never`` restart policy when their template has none.
* **Pods** are created bound (``spec.nodeName`` kept), then given their snapshot status
  (Running, Ready) without ``qosClass`` (computed by the server). ``priority`` and
  ``preemptionPolicy`` are dropped so that the Priority admission plugin computes them from
  the class; a pod with a priority but no class gets the class ``peer-priority-<value>``.
  Mirror pods lose ``serviceAccountName`` and any projected token volume (the ServiceAccount
  admission refuses a mirror pod with either); other pods get no new token volume
  (``automountServiceAccountToken: false``) and keep the ones they had.
* **Namespaces**, their ``default`` ServiceAccount (no controller-manager creates it) and the
  **PriorityClasses** the pods name are created first.

Metrics (``NodeMetrics``/``PodMetrics``) are not API objects: they are returned apart, for the
harness's metrics.k8s.io server.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ANNOTATION_KWOK_GROUP",
    "ANNOTATION_KWOK_MANAGED",
    "BUILTIN_PRIORITY_CLASSES",
    "POOL_LABEL",
    "LoadPlan",
    "Step",
    "kwok_config_maps",
    "load_plan",
    "object_path",
    "read_snapshot",
]

Obj = dict[str, Any]

POOL_LABEL = "cloud.google.com/gke-nodepool"
"""The node label naming a node's GKE node pool: the node group for both autoscalers."""
ANNOTATION_KWOK_GROUP = "cluster-autoscaler.kwok.nodegroup/name"
ANNOTATION_KWOK_MANAGED = "kwok.x-k8s.io/node"
ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
UNMANAGED_GROUP = "unmanaged"
BUILTIN_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})

_API_VERSIONS = {
    "Namespace": "v1",
    "ServiceAccount": "v1",
    "Node": "v1",
    "Pod": "v1",
    "ReplicationController": "v1",
    "PersistentVolume": "v1",
    "PersistentVolumeClaim": "v1",
    "ConfigMap": "v1",
    "Deployment": "apps/v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "CronJob": "batch/v1",
    "PodDisruptionBudget": "policy/v1",
    "PriorityClass": "scheduling.k8s.io/v1",
}
_CLUSTER_SCOPED = frozenset({"Namespace", "Node", "PersistentVolume", "PriorityClass"})
_PLURALS = {"PriorityClass": "priorityclasses", "PodDisruptionBudget": "poddisruptionbudgets"}
# Owners first: a kind's objects are created once every kind before it exists.
_WORKLOAD_ORDER = (
    "Deployment",
    "CronJob",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
    "ReplicationController",
)
_SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink",
                "deletionTimestamp", "deletionGracePeriodSeconds")  # fmt: skip


def object_path(kind: str, name: str = "", namespace: str | None = None) -> str:
    """The API path of a kind's collection (``name`` empty) or of one object, e.g.
    ``/apis/apps/v1/namespaces/web/replicasets/web-1``.

    Raises:
        KeyError: a kind this module does not load.
    """
    version = _API_VERSIONS[kind]
    prefix = "/api/v1" if version == "v1" else f"/apis/{version}"
    plural = _PLURALS.get(kind, kind.lower() + "s")
    where = "" if kind in _CLUSTER_SCOPED or namespace is None else f"/namespaces/{namespace}"
    return f"{prefix}{where}/{plural}" + (f"/{name}" if name else "")


@dataclass(slots=True)
class Step:
    """One object to create: the body to POST, then the status to write through the ``status``
    subresource (``None``: none), then a merge patch of the object (``None``: none; a node's
    taints, once admission has added ``node.kubernetes.io/not-ready``), and for a pod being
    deleted in the snapshot, the grace period of the DELETE that follows."""

    kind: str
    body: Obj
    status: Obj | None = None
    patch: Obj | None = None
    delete_grace_seconds: int | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """(kind, namespace, name): how owner references find their new uid."""
        meta = self.body["metadata"]
        return self.kind, str(meta.get("namespace") or ""), str(meta["name"])

    @property
    def path(self) -> str:
        """The collection to POST to."""
        return object_path(self.kind, namespace=self.body["metadata"].get("namespace"))


@dataclass(slots=True)
class LoadPlan:
    """What to create, in waves: every step of a wave may run concurrently, and a wave starts
    once the previous one is done (its new uids known).

    Attributes:
        waves: (name, steps) in order: ``namespaces``, ``serviceaccounts`` (with the priority
            classes), one wave per workload kind, ``pdbs``, ``nodes``, ``pods``.
        node_metrics: the snapshot's ``NodeMetrics`` items.
        pod_metrics: its ``PodMetrics`` items.
        pools: GKE node pool → its nodes, in snapshot order (nodes without a pool left out).
        notes: what was changed beyond the rules in the module docstring (counts).
    """

    waves: list[tuple[str, list[Step]]]
    node_metrics: list[Obj] = field(default_factory=list)
    pod_metrics: list[Obj] = field(default_factory=list)
    pools: dict[str, list[Obj]] = field(default_factory=dict)
    notes: Counter[str] = field(default_factory=Counter)

    def counts(self) -> dict[str, int]:
        """Objects per wave."""
        return {name: len(steps) for name, steps in self.waves}


def read_snapshot(directory: Path) -> Iterator[Obj]:
    """Every object of a snapshot directory's ``*.json`` files (kubectl ``List``s, metrics
    lists or single objects), items of a metrics list given their ``kind``.

    Raises:
        ValueError: a file is not JSON (the message names it).
    """
    for path in sorted(directory.glob("*.json")):
        try:
            doc = json.loads(path.read_bytes())
        except ValueError as e:
            raise ValueError(f"{path}: not JSON: {e}") from e
        kind = str(doc.get("kind") or "")
        if not kind.endswith("List"):
            yield doc
            continue
        item_kind = kind[: -len("List")] if kind in ("NodeMetricsList", "PodMetricsList") else ""
        for item in doc.get("items") or []:
            if item_kind and "kind" not in item:
                item = {"kind": item_kind, **item}
            yield item


def _clean_meta(meta: Mapping[str, Any]) -> Obj:
    out = {k: copy.deepcopy(v) for k, v in meta.items() if k not in _SERVER_META}
    out.pop("ownerReferences", None)
    return out


def _owner_refs(meta: Mapping[str, Any]) -> list[Obj]:
    return [dict(r) for r in meta.get("ownerReferences") or []]


def _fix_job(body: Obj) -> None:
    spec = body.setdefault("spec", {})
    if spec.get("selector") and not spec.get("manualSelector"):
        spec["manualSelector"] = True
    tmpl_spec = spec.setdefault("template", {}).setdefault("spec", {})
    if tmpl_spec.get("restartPolicy") not in ("Never", "OnFailure"):
        tmpl_spec["restartPolicy"] = "Never"


def _fix_cronjob(body: Obj) -> None:
    job = body.setdefault("spec", {}).setdefault("jobTemplate", {})
    tmpl_spec = job.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
    if tmpl_spec.get("restartPolicy") not in ("Never", "OnFailure"):
        tmpl_spec["restartPolicy"] = "Never"


def kwok_node(node: Mapping[str, Any]) -> Obj:
    """A snapshot Node as the kwok provider manages it (see the module docstring): the body to
    create. Its status and taints are written afterwards (:func:`load_plan`)."""
    meta = _clean_meta(node["metadata"])
    name = str(meta["name"])
    labels = dict(meta.get("labels") or {})
    pool = labels.get(POOL_LABEL)
    annotations = dict(meta.get("annotations") or {})
    annotations[ANNOTATION_KWOK_GROUP] = pool or UNMANAGED_GROUP
    annotations[ANNOTATION_KWOK_MANAGED] = "fake"
    meta["annotations"] = annotations
    spec = {k: copy.deepcopy(v) for k, v in (node.get("spec") or {}).items() if k != "taints"}
    if pool:
        spec["providerID"] = f"kwok:{name}"
    elif str(spec.get("providerID") or "").startswith("kwok"):
        spec["providerID"] = f"external://{name}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}


def kwok_config_maps(pools: Mapping[str, list[Obj]], namespace: str) -> list[Obj]:
    """The kwok provider's ConfigMaps ``kwok-provider-config`` and ``kwok-provider-templates``
    in ``namespace`` (CA's ``POD_NAMESPACE``): node groups read from the templates, one per
    pool (its first node: labels, allocatable, capacity, Ready), each annotated min 0, max ten
    times the pool's size (at least 1,000) and desired = its size; no kwok taint on templates."""
    templates = []
    for pool, nodes in sorted(pools.items()):
        first = nodes[0]
        size = len(nodes)
        status = first.get("status") or {}
        templates.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": f"template-{pool}",
                "labels": dict(first["metadata"].get("labels") or {}),
                "annotations": {
                    ANNOTATION_KWOK_GROUP: pool,
                    "cluster-autoscaler.kwok.nodegroup/min-count": "0",
                    "cluster-autoscaler.kwok.nodegroup/max-count": str(max(1000, 10 * size)),
                    "cluster-autoscaler.kwok.nodegroup/desired-count": str(size),
                },
            },
            "spec": {"taints": copy.deepcopy((first.get("spec") or {}).get("taints") or [])},
            "status": {
                "allocatable": dict(status.get("allocatable") or {}),
                "capacity": dict(status.get("capacity") or {}),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        })  # fmt: skip
    config = "\n".join([
        "apiVersion: v1alpha1",
        "readNodesFrom: configmap",
        "nodegroups:",
        f'  fromNodeLabelKey: "{POOL_LABEL}"',
        "nodes:",
        "  skipTaint: true",
        "configmap:",
        "  name: kwok-provider-templates",
        "",
    ])  # fmt: skip
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-config", "namespace": namespace},
         "data": {"config": config}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kwok-provider-templates", "namespace": namespace},
         "data": {"templates": json.dumps({"apiVersion": "v1", "kind": "List", "items": templates})}},
    ]  # fmt: skip


def _node_status(node: Mapping[str, Any], now: str) -> Obj:
    status = copy.deepcopy(dict(node.get("status") or {}))
    for c in status.get("conditions") or []:
        if "lastHeartbeatTime" in c:
            c["lastHeartbeatTime"] = now
    return status


def _pod_status(pod: Mapping[str, Any]) -> Obj | None:
    status = {k: copy.deepcopy(v) for k, v in (pod.get("status") or {}).items() if k != "qosClass"}
    return status or None


def _dns_label(name: str) -> str:
    """``name`` as an RFC 1123 label (lower case, ``[a-z0-9-]``), as container names must be."""
    label = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-")
    return label[:63] or "c"


def _rename_containers(spec: Obj) -> bool:
    """Make every container name a DNS label (a generated snapshot may hold names with dots);
    True when one changed."""
    changed = False
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        name = str(c.get("name") or "")
        if _dns_label(name) != name:
            c["name"] = _dns_label(name)
            changed = True
    return changed


def _drop_token_volumes(spec: Obj, notes: Counter[str]) -> None:
    """Remove projected ServiceAccount token volumes (and their mounts) from a mirror pod's
    spec: the ServiceAccount admission plugin refuses a mirror pod using one."""
    dropped = {
        str(v.get("name"))
        for v in spec.get("volumes") or []
        if any("serviceAccountToken" in src for src in (v.get("projected") or {}).get("sources") or [])
    }
    if not dropped:
        return
    spec["volumes"] = [v for v in spec["volumes"] if v.get("name") not in dropped]
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        c["volumeMounts"] = [m for m in c.get("volumeMounts") or [] if m.get("name") not in dropped]
    notes["mirror pods without their ServiceAccount token volume"] += 1


def _pdb_status(pdb: Mapping[str, Any], notes: Counter[str]) -> Obj:
    """The PDB's status as the disruption controller would have written it for the new object
    (``observedGeneration`` 1); counts below 0, which the API server refuses, become 0."""
    status = copy.deepcopy(dict(pdb.get("status") or {}))
    for key in ("currentHealthy", "desiredHealthy", "expectedPods", "disruptionsAllowed"):
        if isinstance(status.get(key), int) and status[key] < 0:
            status[key] = 0
            notes[f"PDB status {key} below 0 set to 0"] += 1
    status["observedGeneration"] = 1
    return status


def load_plan(objects: Iterable[Mapping[str, Any]], now: str, kwok_namespace: str = "") -> LoadPlan:
    """Sort a snapshot's objects into a :class:`LoadPlan` (see the module docstring).

    Args:
        objects: the snapshot's objects (with ``kind``); kinds not loaded (Events, …) are
            counted in ``notes`` and skipped.
        now: RFC 3339 time written as the nodes' condition heartbeats.
        kwok_namespace: when given, a last wave ``kwok`` creates :func:`kwok_config_maps` there.
    """
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    notes: Counter[str] = Counter()
    node_metrics: list[Obj] = []
    pod_metrics: list[Obj] = []
    for obj in objects:
        kind = str(obj.get("kind") or "")
        if kind == "NodeMetrics":
            node_metrics.append(dict(obj))
        elif kind == "PodMetrics":
            pod_metrics.append(dict(obj))
        elif kind in _API_VERSIONS:
            by_kind[kind].append(obj)
        else:
            notes[f"skipped {kind or 'objects without kind'}"] += 1

    namespaces: set[str] = set()
    service_accounts: set[tuple[str, str]] = set()
    classes: dict[str, int] = {}
    for kind, objs in by_kind.items():
        if kind in _CLUSTER_SCOPED:
            continue
        for o in objs:
            namespaces.add(str(o["metadata"].get("namespace") or "default"))
    for ns in namespaces:
        service_accounts.add((ns, "default"))

    pods: list[Step] = []
    renamed: dict[tuple[str, str], bool] = {}
    for pod in by_kind.get("Pod", []):
        meta = _clean_meta(pod["metadata"])
        meta.setdefault("namespace", "default")
        spec = copy.deepcopy(dict(pod.get("spec") or {}))
        priority = spec.pop("priority", None)
        spec.pop("preemptionPolicy", None)
        cls = spec.get("priorityClassName")
        if cls:
            if cls not in BUILTIN_PRIORITY_CLASSES:
                classes.setdefault(str(cls), int(priority or 0))
        elif priority:
            spec["priorityClassName"] = f"peer-priority-{int(priority)}"
            classes[spec["priorityClassName"]] = int(priority)
            notes["pods given a priority class for their priority"] += 1
        if _rename_containers(spec):
            renamed[(meta["namespace"], str(meta["name"]))] = True
            notes["pods whose container names were made DNS labels"] += 1
        if ANNOTATION_MIRROR in (meta.get("annotations") or {}):
            spec.pop("serviceAccountName", None)
            spec.pop("serviceAccount", None)
            _drop_token_volumes(spec, notes)
        else:
            spec["automountServiceAccountToken"] = False
            sa = spec.get("serviceAccountName") or spec.get("serviceAccount")
            if sa:
                service_accounts.add((meta["namespace"], str(sa)))
        body: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        body["metadata"]["ownerReferences"] = _owner_refs(pod["metadata"])
        grace = None
        if pod["metadata"].get("deletionTimestamp"):
            grace = int(pod["metadata"].get("deletionGracePeriodSeconds") or 30)
            notes["pods deleted after creation (Terminating in the snapshot)"] += 1
        pods.append(Step("Pod", body, _pod_status(pod), None, grace))

    for m in pod_metrics:
        meta = m.get("metadata") or {}
        if renamed.get((str(meta.get("namespace") or "default"), str(meta.get("name")))):
            m["containers"] = [
                {**c, "name": _dns_label(str(c.get("name")))} for c in m.get("containers") or []
            ]

    waves: list[tuple[str, list[Step]]] = []
    waves.append(("namespaces", [
        Step("Namespace", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for ns in sorted(namespaces - BUILTIN_NAMESPACES)
    ]))  # fmt: skip
    prelude = [
        Step("ServiceAccount", {"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": name, "namespace": ns}})
        for ns, name in sorted(service_accounts)
    ]  # fmt: skip
    prelude += [
        Step("PriorityClass", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": name}, "value": value, "globalDefault": False})
        for name, value in sorted(classes.items())
    ]  # fmt: skip
    prelude += [
        Step(kind, {"apiVersion": _API_VERSIONS[kind], "kind": kind, "metadata": _clean_meta(o["metadata"]),
                    "spec": copy.deepcopy(o.get("spec") or {})})
        for kind in ("PersistentVolume", "PersistentVolumeClaim") for o in by_kind.get(kind, [])
    ]  # fmt: skip
    waves.append(("serviceaccounts", prelude))

    for kind in _WORKLOAD_ORDER:
        steps = []
        for o in by_kind.get(kind, []):
            meta = _clean_meta(o["metadata"])
            meta["ownerReferences"] = _owner_refs(o["metadata"])
            body = {"apiVersion": _API_VERSIONS[kind], "kind": kind, "metadata": meta,
                    "spec": copy.deepcopy(o.get("spec") or {})}  # fmt: skip
            if kind == "Job":
                _fix_job(body)
            elif kind == "CronJob":
                _fix_cronjob(body)
            elif kind == "StatefulSet":
                body["spec"].setdefault("serviceName", meta["name"])
            steps.append(Step(kind, body, copy.deepcopy(o.get("status")) or None))
        if steps:
            waves.append((kind, steps))

    waves.append(("pdbs", [
        Step("PodDisruptionBudget",
             {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": _clean_meta(o["metadata"]),
              "spec": copy.deepcopy(o.get("spec") or {})},
             _pdb_status(o, notes))
        for o in by_kind.get("PodDisruptionBudget", [])
    ]))  # fmt: skip

    pools: dict[str, list[Obj]] = defaultdict(list)
    node_steps = []
    for node in by_kind.get("Node", []):
        pool = (node["metadata"].get("labels") or {}).get(POOL_LABEL)
        if pool:
            pools[str(pool)].append(dict(node))
        else:
            notes["nodes without a node pool (not autoscaled)"] += 1
        taints = copy.deepcopy((node.get("spec") or {}).get("taints") or [])
        node_steps.append(
            Step("Node", kwok_node(node), _node_status(node, now), {"spec": {"taints": taints or None}})
        )
    waves.append(("nodes", node_steps))
    waves.append(("pods", pods))
    if kwok_namespace:
        waves.append(("kwok", [Step("ConfigMap", cm) for cm in kwok_config_maps(pools, kwok_namespace)]))
    return LoadPlan(waves, node_metrics, pod_metrics, dict(pools), notes)
