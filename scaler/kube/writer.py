"""Every write scaler makes to the Kubernetes API, in one thin adapter.

Node taints, cordon and ownership annotations (with optimistic concurrency and CA's conflict
retry), policy/v1 evictions (retried with tenacity), pod and node reads used to verify a drain,
Events and the status ConfigMap: :class:`KubeWriter` implements
:class:`scaler.cloud.base.ClusterWriter`. Nodes are not deleted here but by the cloud provider
(:meth:`scaler.cloud.base.CloudProvider.delete_nodes`, whose Kubernetes calls are its
:attr:`~scaler.cloud.base.CloudProvider.kube_calls`). :data:`WRITE_CALLS` lists every write call
made here; with :data:`scaler.sources.kube.READ_CALLS` and the provider's calls it is the exact
RBAC the controller needs (:func:`scaler.kube.permissions.required_calls`).

**Fencing.** Every write (node patches, evictions, events, the status ConfigMap) first calls the
writer's ``fence`` (:meth:`scaler.kube.leader.LeaderElector.check`), right before its request,
after any read it is based on: a replica that does not hold the lease now raises
:class:`~scaler.kube.leader.LeaseLost` and sends nothing. Marks name their replica: a node being
removed carries :data:`ANNOTATION_OWNER` (the instance) and :data:`ANNOTATION_REPLICA` (the
leader identity of the replica that tainted it); a rollback only removes marks of this instance
and of the replica it expects (its own, or the one recovery saw), so a replica can never undo
another's fresh taint.

**Holding.** A taint (``ToBeDeletedByClusterAutoscaler``, hot-node relief's) and an eviction
first ask the writer's ``hold`` whether the cluster view they were decided on may be stale (a
watched kind being relisted, :meth:`scaler.sources.watch.WatchCache.stale_kinds`): while it
says why, no such request is sent. A taint fails (:class:`WriteError`); an eviction answers
"not sent" and is tried again at its next retry, until ``--max-pod-eviction-time``. Rollbacks,
statuses and events are not held.

**Retry-After.** Every write answered ``429 Too Many Requests`` with a ``Retry-After`` header
(API Priority and Fairness shedding load) is sent again after that delay, at most three times,
the fence checked again before each attempt
(:func:`scaler.kube.retry.honour_retry_after`); reads honour it in the client itself. A
PodDisruptionBudget's 429 carries no ``Retry-After`` and is retried as CA retries it.

Sources: CA ``utils/taints/taints.go`` (MarkToBeDeleted, CleanToBeDeleted: 750 ms conflict
retry, 5 s deadline), ``core/scaledown/actuation/drain.go`` (eviction retries every 10 s up to
``--max-pod-eviction-time``, NotFound is success, events on the pod).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from kubernetes.client import ApiClient, CoordinationV1Api, CoreV1Api, PolicyV1Api
from kubernetes.client.exceptions import ApiException
from tenacity import (
    RetryError,
    Retrying,
    retry_if_result,
    stop_after_delay,
    stop_never,
    stop_when_event_set,
    wait_fixed,
)

from scaler.errors import ScalerError
from scaler.eviction.executor import Evictor, EvictResult
from scaler.kube.client import ApiCall
from scaler.kube.raw import read_json, release
from scaler.kube.retry import honour_retry_after
from scaler.model.records import TAINT_TO_BE_DELETED, Pod
from scaler.model.times import format_time

__all__ = [
    "ACTUATION_CALLS",
    "ANNOTATION_HOT_OWNER",
    "ANNOTATION_HOT_REPLICA",
    "ANNOTATION_OWNER",
    "ANNOTATION_REPLICA",
    "ANNOTATION_STATE",
    "ANNOTATION_STATUS",
    "ANNOTATION_WAS_UNSCHEDULABLE",
    "DRY_RUN_WRITE_CALLS",
    "LABEL_STATUS",
    "NODE_STATUS_CALLS",
    "STATE_DRAINED",
    "STATE_TAINTED",
    "TAINT_HOT",
    "WRITE_CALLS",
    "KubeWriter",
    "NotOwned",
    "ObjectRef",
    "WriteError",
]

log = logging.getLogger(__name__)

ANNOTATION_OWNER = "scaler.io/scale-down-by"
"""On a node being removed: the ``--instance-name`` of the scaler that tainted it."""
ANNOTATION_REPLICA = "scaler.io/scale-down-replica"
"""On a node being removed: the leader identity (pod name and a random suffix) of the replica
that tainted it. Only that replica rolls it back or deletes it; after a restart or a fail-over,
the new leader's recovery takes the node over (:meth:`KubeWriter.adopt`) or rolls it back."""
ANNOTATION_STATE = "scaler.io/scale-down-state"
"""``tainted`` once tainted and cordoned, ``drained`` once every movable pod is gone."""
ANNOTATION_STATUS = "scaler.io/scale-down-status"
"""On every node (``--write-node-status``): its current verdict as compact JSON, ``{"status",
"reason", "detail", "since"}`` (``since``: RFC 3339, when this status and reason began)."""
LABEL_STATUS = "scaler.io/scale-down-status"
"""On every node (``--write-node-status``): the reason it stays (``NotUnderutilized``, ...) or its
removal (``removable-empty``, ``removable-drain``), for ``kubectl get nodes -L``."""
ANNOTATION_WAS_UNSCHEDULABLE = "scaler.io/was-unschedulable"
"""``true`` when the node was already cordoned before scaler touched it (rollback keeps it so)."""
STATE_TAINTED = "tainted"
STATE_DRAINED = "drained"
TAINT_HOT = "scaler.io/hot"
"""Hot-node relief's soft taint, ``scaler.io/hot=<unix ts>:PreferNoSchedule``: kube-scheduler's
``TaintToleration`` score steers new pods, the relieved pods' replacements first, to other
nodes while the node is hot."""
ANNOTATION_HOT_REPLICA = "scaler.io/hot-replica"
"""On a node carrying :data:`TAINT_HOT`: the leader identity of the replica that put it there."""
ANNOTATION_HOT_OWNER = "scaler.io/hot-by"
"""On a node carrying :data:`TAINT_HOT`: the ``--instance-name`` of the scaler that put it there
(a restart of that instance removes the taints it finds with it)."""
_EVICTION_EVENTS = {
    "ScaleDown": (
        "deleting pod for node scale down",
        "ScaleDownFailed",
        "failed to delete pod for ScaleDown",
    ),
    "HotNodeRelief": (
        "evicting pod to relieve its hot node",
        "HotNodeRelief",
        "failed to evict pod for HotNodeRelief",
    ),
}
"""Per eviction purpose: the event on an evicted pod, and the reason and message on failure."""

ACTUATION_CALLS: tuple[ApiCall, ...] = (
    ApiCall("", "v1", "nodes", "get", namespaced=False, optional=False),
    ApiCall("", "v1", "pods", "get", namespaced=True, optional=False),
    ApiCall("", "v1", "pods/eviction", "create", namespaced=True, optional=False),
)
"""The calls only actuation makes: read a node before tainting, cordoning, annotating or rolling
it back (every such patch is a read-modify-write with the node's resourceVersion, so it starts
with this GET), evict and wait for a pod. A ``--dry-run`` controller never makes them, and the
dry-run overlay does not grant them: without the node GET it cannot taint or cordon a node even
with ``--dry-run`` removed by mistake. Deleting a node is the cloud provider's (:attr:`scaler.cloud.base.CloudProvider.kube_calls`:
``nodes delete`` for :class:`scaler.cloud.kubernetes.KubernetesProvider`)."""

NODE_STATUS_CALLS: tuple[ApiCall, ...] = (
    ApiCall("", "v1", "nodes", "patch", namespaced=False, optional=False),
)
"""The nodes' status annotation and label (``--write-node-status``: a blind merge patch of those
two keys, no read). An active controller makes it by default; a ``--dry-run`` one only with
``--write-node-status=true``, so that by default a dry-run writes nothing to the nodes."""

DRY_RUN_WRITE_CALLS: tuple[ApiCall, ...] = (
    ApiCall("", "v1", "events", "create", namespaced=True, optional=False),
    ApiCall("", "v1", "configmaps", "get", namespaced=True, optional=False),
    ApiCall("", "v1", "configmaps", "create", namespaced=True, optional=False),
    ApiCall("", "v1", "configmaps", "update", namespaced=True, optional=False),
    ApiCall("coordination.k8s.io", "v1", "leases", "get", namespaced=True, optional=False),
    ApiCall("coordination.k8s.io", "v1", "leases", "create", namespaced=True, optional=False),
    ApiCall("coordination.k8s.io", "v1", "leases", "update", namespaced=True, optional=False),
)
"""The writes a ``--dry-run`` controller makes, none of them to a node or a pod: events
(ScaleDownDryRun), the status ConfigMap and its leader-election Lease, in its own namespace
(events about nodes go to ``default``). The active controller makes them too."""

WRITE_CALLS: tuple[ApiCall, ...] = ACTUATION_CALLS + NODE_STATUS_CALLS + DRY_RUN_WRITE_CALLS
"""Every write call of the controller (with :data:`scaler.sources.kube.READ_CALLS`: the controller's RBAC)."""

_MERGE_PATCH = "application/merge-patch+json"
_RETRYABLE = frozenset({429, 500, 502, 503, 504})


class WriteError(ScalerError):
    """A write failed for good; the message names the object and the HTTP status."""


class _Held(Exception):
    """An eviction not sent: the cluster view may be stale (the message says why)."""


class NotOwned(WriteError):
    """The node no longer carries this replica's marks as expected (tainted and cordoned by it,
    in the expected state): someone else changed it, so it is not touched."""


def _body(e: ApiException) -> str:
    try:
        return str(json.loads(e.body or "").get("message") or e.reason)
    except (TypeError, ValueError, AttributeError, RecursionError):
        return str(e.reason)


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an Event is about."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"


class KubeWriter:
    """Writes to the API server through ``api`` (a ``kubernetes.client.ApiClient``).

    Args:
        api: the client.
        instance: ``--instance-name``; written in :data:`ANNOTATION_OWNER`.
        replica: this replica's leader identity; written in :data:`ANNOTATION_REPLICA`.
        fence: called right before every write request; raises
            :class:`~scaler.kube.leader.LeaseLost` when this replica must not write (default:
            none, for a single replica without leader election).
        hold: called before every taint and eviction: why the cluster view may be stale now
            (``""`` when it is not); while it says anything, none is sent (default: never).
        clock, sleep: injectable time functions (Unix seconds).
        conflict_retry_seconds, conflict_deadline_seconds: CA's taint-update retry (750 ms, 5 s).
        eviction_retry_seconds: wait between eviction attempts (CA: 10 s).
    """

    def __init__(
        self,
        api: ApiClient,
        instance: str,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        conflict_retry_seconds: float = 0.75,
        conflict_deadline_seconds: float = 5.0,
        eviction_retry_seconds: float = 10.0,
        request_timeout_seconds: float = 30.0,
        replica: str = "",
        fence: Callable[[], None] | None = None,
        hold: Callable[[], str] | None = None,
    ) -> None:
        self.core = CoreV1Api(api)
        self.policy = PolicyV1Api(api)
        self.coordination = CoordinationV1Api(api)
        self.instance = instance
        self.replica = replica
        self.fence: Callable[[], None] = fence or (lambda: None)
        self.hold: Callable[[], str] = hold or (lambda: "")
        self.clock = clock
        self.sleep = sleep
        self.conflict_retry_seconds = conflict_retry_seconds
        self.conflict_deadline_seconds = conflict_deadline_seconds
        self.eviction_retry_seconds = eviction_retry_seconds
        self.timeout = request_timeout_seconds
        self._config_map_versions: dict[tuple[str, str], str | None] = {}

    # ---- nodes ----------------------------------------------------------------------------
    def get_node(self, name: str) -> dict[str, Any] | None:
        """The Node as JSON, or ``None`` when it does not exist.

        Raises:
            WriteError: any other API error.
        """
        try:
            resp = self.core.read_node(name, _preload_content=False, _request_timeout=self.timeout)
        except ApiException as e:
            if e.status == 404:
                return None
            raise WriteError(f"get node {name}: HTTP {e.status} {_body(e)}") from None
        return cast(dict[str, Any], read_json(resp))

    def _patch_node(self, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> bool:
        """Read-modify-write with the node's resourceVersion as precondition; retries 409s.

        ``change`` returns the merge patch to send (without resourceVersion), or ``None`` when
        there is nothing to do. Returns False when the node is gone. The fence is checked
        between the read and the write.

        Raises:
            WriteError: the API refused (``change`` may raise :class:`NotOwned`).
            scaler.kube.leader.LeaseLost: this replica must not write.
        """
        deadline = self.clock() + self.conflict_deadline_seconds
        while True:
            node = self.get_node(name)
            if node is None:
                return False
            patch = change(node)
            if patch is None:
                return True
            version = node["metadata"].get("resourceVersion")
            if version:  # optimistic concurrency; a null would delete the precondition
                patch.setdefault("metadata", {})["resourceVersion"] = version
            try:
                self._write(f"patch node {name}", lambda p=patch: self.core.patch_node(  # type: ignore[misc]
                    name, p, _content_type=_MERGE_PATCH, _request_timeout=self.timeout, _preload_content=False))  # fmt: skip
                return True
            except ApiException as e:
                if e.status == 409 and self.clock() < deadline:
                    self.sleep(self.conflict_retry_seconds)
                    continue
                if e.status == 404:
                    return False
                raise WriteError(f"patch node {name}: HTTP {e.status} {_body(e)}") from None

    def _fenced(self, what: str, send: Callable[[], Any]) -> Any:
        """Send one write (``send`` returns the raw response), fenced before every attempt and
        sent again after a 429's ``Retry-After``; returns the raw response.

        Raises:
            ApiException: the API refused (the caller words it).
            scaler.kube.leader.LeaseLost: this replica must not write (nothing was sent).
        """
        return honour_retry_after(send, what=what, before=self.fence, sleep=self.sleep)

    def _write(self, what: str, send: Callable[[], Any]) -> bytes:
        """:meth:`_fenced`, the body read and the connection released."""
        return release(self._fenced(what, send))

    def _check_hold(self, what: str) -> None:
        """Raise :class:`WriteError` when the cluster view may be stale (``hold``)."""
        why = self.hold()
        if why:
            raise WriteError(f"{what}: not sent, the cluster view may be stale ({why})")

    def mark_to_be_deleted(self, name: str, now: float) -> None:
        """Taint ``ToBeDeletedByClusterAutoscaler=<unix ts>:NoSchedule``, cordon, and annotate
        the node with this instance's name, this replica's identity and state ``tainted``.

        Raises:
            WriteError: the node is gone, the patch failed after retries, or the cluster view
                may be stale (``hold``: nothing sent).
        """
        self._check_hold(f"taint node {name}")

        def change(node: dict[str, Any]) -> dict[str, Any]:
            spec = node.get("spec") or {}
            taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_TO_BE_DELETED]
            taints.append({"key": TAINT_TO_BE_DELETED, "value": str(int(now)), "effect": "NoSchedule"})
            annotations: dict[str, str | None] = {
                ANNOTATION_OWNER: self.instance,
                ANNOTATION_REPLICA: self.replica or None,
                ANNOTATION_STATE: STATE_TAINTED,
            }
            owned = (node["metadata"].get("annotations") or {}).get(ANNOTATION_OWNER) == self.instance
            if spec.get("unschedulable") and not owned:
                annotations[ANNOTATION_WAS_UNSCHEDULABLE] = "true"
            return {
                "metadata": {"annotations": annotations},
                "spec": {"taints": taints, "unschedulable": True},
            }

        if not self._patch_node(name, change):
            raise WriteError(f"mark node {name}: node not found")

    def _why_not_mine(self, node: dict[str, Any], replica: str | None = None) -> str:
        """Why ``node`` is not tainted and cordoned by this instance's ``replica`` (default:
        this replica), ``""`` when it is."""
        replica = self.replica if replica is None else replica
        annotations = node["metadata"].get("annotations") or {}
        spec = node.get("spec") or {}
        if annotations.get(ANNOTATION_OWNER) != self.instance:
            return f"owned by {annotations.get(ANNOTATION_OWNER)!r}, not instance {self.instance!r}"
        if annotations.get(ANNOTATION_REPLICA, "") != replica:
            return f"marked by replica {annotations.get(ANNOTATION_REPLICA)!r}, not {replica!r}"
        if not any(t.get("key") == TAINT_TO_BE_DELETED for t in spec.get("taints") or []):
            return (
                f"{TAINT_TO_BE_DELETED} taint removed by someone else "
                "(a cluster-autoscaler removes every such taint when it starts)"
            )
        if not spec.get("unschedulable"):
            return "uncordoned"
        return ""

    def set_state(self, name: str, state: str) -> None:
        """Set :data:`ANNOTATION_STATE` on a node this replica tainted and cordoned.

        Raises:
            NotOwned: the node is no longer tainted and cordoned by this replica.
            WriteError: the node is gone or the patch failed.
        """

        def change(node: dict[str, Any]) -> dict[str, Any]:
            why = self._why_not_mine(node)
            if why:
                raise NotOwned(f"annotate node {name}: {why}")
            return {"metadata": {"annotations": {ANNOTATION_STATE: state}}}

        if not self._patch_node(name, change):
            raise WriteError(f"annotate node {name}: node not found")

    def verify_marked(self, name: str, state: str) -> str:
        """Read node ``name`` fresh and check that it is still tainted and cordoned by this
        replica, in ``state``. Returns its resourceVersion (the precondition of its deletion).

        Raises:
            NotOwned: it is not (someone untainted, uncordoned or took it over), or it is gone.
            WriteError: the read failed.
        """
        node = self.get_node(name)
        if node is None:
            raise NotOwned(f"verify node {name}: node not found")
        annotations = node["metadata"].get("annotations") or {}
        why = self._why_not_mine(node) or (
            "" if annotations.get(ANNOTATION_STATE) == state
            else f"state {annotations.get(ANNOTATION_STATE)!r}, not {state!r}"
        )  # fmt: skip
        if why:
            raise NotOwned(f"verify node {name}: {why}")
        return str(node["metadata"].get("resourceVersion") or "")

    def adopt(self, name: str, replica: str) -> None:
        """Take over node ``name`` marked by ``replica`` of this instance (a previous leader):
        its :data:`ANNOTATION_REPLICA` becomes this replica's, only if the node still carries
        exactly those marks (taint, cordon, instance, replica).

        Raises:
            NotOwned: the marks are not ``replica``'s any more, or the node is gone.
            WriteError: the patch failed.
        """

        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            why = self._why_not_mine(node, replica)
            if why:
                raise NotOwned(f"adopt node {name}: {why}")
            if replica == self.replica:
                return None
            return {"metadata": {"annotations": {ANNOTATION_REPLICA: self.replica or None}}}

        if not self._patch_node(name, change):
            raise NotOwned(f"adopt node {name}: node not found")

    def clean_to_be_deleted(self, name: str, replica: str | None = None) -> bool:
        """Remove the ToBeDeleted taint and scaler's annotations; uncordon unless the node was
        cordoned before scaler marked it. Only marks of this instance made by ``replica``
        (default: this replica; recovery passes the one it saw) are removed: a node marked by
        anyone else, or no longer marked, is left as it is. Returns False when the node no
        longer exists.

        Raises:
            WriteError: the patch failed after retries.
            scaler.kube.leader.LeaseLost: this replica must not write.
        """
        replica = self.replica if replica is None else replica

        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            spec = node.get("spec") or {}
            annotations = node["metadata"].get("annotations") or {}
            if (
                annotations.get(ANNOTATION_OWNER) != self.instance
                or annotations.get(ANNOTATION_REPLICA, "") != replica
            ):
                if ANNOTATION_OWNER in annotations or any(
                    t.get("key") == TAINT_TO_BE_DELETED for t in spec.get("taints") or []
                ):
                    log.warning("node %s not rolled back: its marks are not ours (%s, replica %r)", name,
                                annotations.get(ANNOTATION_OWNER), annotations.get(ANNOTATION_REPLICA))  # fmt: skip
                return None
            taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_TO_BE_DELETED]
            mine = [
                k
                for k in (
                    ANNOTATION_OWNER,
                    ANNOTATION_REPLICA,
                    ANNOTATION_STATE,
                    ANNOTATION_WAS_UNSCHEDULABLE,
                )
                if k in annotations
            ]
            had_taint = len(taints) != len(spec.get("taints") or [])
            if not had_taint and not mine:
                return None
            patch: dict[str, Any] = {"spec": {"taints": taints or None}}
            if annotations.get(ANNOTATION_WAS_UNSCHEDULABLE) != "true":
                patch["spec"]["unschedulable"] = None
            if mine:
                patch["metadata"] = {"annotations": dict.fromkeys(mine)}
            return patch

        return self._patch_node(name, change)

    def mark_hot(self, name: str, now: float) -> None:
        """Put :data:`TAINT_HOT` (``scaler.io/hot=<unix ts>:PreferNoSchedule``) on node ``name``
        and annotate it with this instance's name (:data:`ANNOTATION_HOT_OWNER`). A node that
        already carries the taint keeps it, with its first timestamp.

        Raises:
            WriteError: the node is gone, the patch failed after retries, or the cluster view
                may be stale (``hold``: nothing sent).
        """
        self._check_hold(f"taint node {name} {TAINT_HOT}")

        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            annotations = node["metadata"].get("annotations") or {}
            has_taint = any(t.get("key") == TAINT_HOT for t in taints)
            if (
                has_taint
                and annotations.get(ANNOTATION_HOT_OWNER) == self.instance
                and annotations.get(ANNOTATION_HOT_REPLICA, "") == self.replica
            ):
                return None
            if not has_taint:
                taints.append({"key": TAINT_HOT, "value": str(int(now)), "effect": "PreferNoSchedule"})
            owner = {ANNOTATION_HOT_OWNER: self.instance, ANNOTATION_HOT_REPLICA: self.replica or None}
            return {"metadata": {"annotations": owner}, "spec": {"taints": taints}}

        if not self._patch_node(name, change):
            raise WriteError(f"taint node {name} {TAINT_HOT}: node not found")

    def clean_hot(self, name: str) -> bool:
        """Remove :data:`TAINT_HOT` and its annotations from node ``name`` when this instance put
        it there (another's, or one without an owner, is left as it is); ``False`` when the node
        no longer exists.

        Raises:
            WriteError: the patch failed after retries.
        """

        def change(node: dict[str, Any]) -> dict[str, Any] | None:
            taints = list((node.get("spec") or {}).get("taints") or [])
            kept = [t for t in taints if t.get("key") != TAINT_HOT]
            annotations = node["metadata"].get("annotations") or {}
            if annotations.get(ANNOTATION_HOT_OWNER) != self.instance:
                return None  # not ours (or no longer there)
            mine = [k for k in (ANNOTATION_HOT_OWNER, ANNOTATION_HOT_REPLICA) if k in annotations]
            return {"spec": {"taints": kept or None}, "metadata": {"annotations": dict.fromkeys(mine)}}

        return self._patch_node(name, change)

    def set_node_status(self, name: str, annotation: str, label: str) -> bool:
        """Set :data:`ANNOTATION_STATUS` and :data:`LABEL_STATUS` on node ``name`` with one JSON
        merge patch of those two metadata keys: no read first and no resourceVersion (nothing
        else of the node is read or written, so a concurrent change cannot be lost). Returns
        ``False`` when the node is gone.

        Raises:
            WriteError: any other API error.
        """
        patch = {
            "metadata": {"annotations": {ANNOTATION_STATUS: annotation}, "labels": {LABEL_STATUS: label}}
        }
        try:
            self._write(f"patch node {name} status", lambda: self.core.patch_node(
                name, patch, _content_type=_MERGE_PATCH, _request_timeout=self.timeout, _preload_content=False))  # fmt: skip
            return True
        except ApiException as e:
            if e.status == 404:
                return False
            raise WriteError(f"patch node {name} status: HTTP {e.status} {_body(e)}") from None

    # ---- pods -------------------------------------------------------------------------------
    def pod_gone(self, pod: Pod) -> bool:
        """True when ``pod`` no longer runs on its node: NotFound, another UID (recreated), or
        another node (CA ``waitPodsToDisappear``).

        Raises:
            WriteError: any other API error.
        """
        try:
            resp = self.core.read_namespaced_pod(pod.name, pod.namespace, _preload_content=False,
                                                 _request_timeout=self.timeout)  # fmt: skip
        except ApiException as e:
            if e.status == 404:
                return True
            raise WriteError(f"get pod {pod.key}: HTTP {e.status} {_body(e)}") from None
        obj = read_json(resp)
        same_uid = obj["metadata"].get("uid") == pod.uid
        return not same_uid or (obj.get("spec") or {}).get("nodeName") != pod.node_name

    def pods_on_node(self, name: str) -> list[dict[str, Any]]:
        """Every pod bound to node ``name`` (one LIST with ``fieldSelector=spec.nodeName=…``),
        read fresh before a node is deleted.

        Raises:
            WriteError: the LIST failed.
        """
        try:
            resp = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}",
                                                         _preload_content=False, _request_timeout=self.timeout)  # fmt: skip
        except ApiException as e:
            raise WriteError(f"list pods on node {name}: HTTP {e.status} {_body(e)}") from None
        items = read_json(resp).get("items") or []
        # The server filters already; filtering again costs nothing and guards against a proxy
        # or API that ignores fieldSelector.
        return [p for p in items if (p.get("spec") or {}).get("nodeName") == name]

    def evict_once(self, pod: Pod, grace_seconds: int) -> tuple[bool, int | None, str]:
        """One policy/v1 Eviction (sent again after a 429's ``Retry-After``, fenced each time).
        Returns ``(ok, http_status, message)``; NotFound is ok; while the cluster view may be
        stale (``hold``) nothing is sent: ``(False, None, "not sent: …")``, retried by the
        evictor.

        Raises:
            scaler.kube.leader.LeaseLost: this replica must not write (nothing was sent).
        """
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
            "deleteOptions": {"gracePeriodSeconds": grace_seconds},
        }

        def fenced() -> None:
            self.fence()
            why = self.hold()
            if why:
                raise _Held(why)

        try:
            release(honour_retry_after(
                lambda: self.core.create_namespaced_pod_eviction(pod.name, pod.namespace, cast(Any, body),
                                                                 _preload_content=False, _request_timeout=self.timeout),
                what=f"evict pod {pod.key}", before=fenced, sleep=self.sleep,
            ))  # fmt: skip
            return True, 201, "evicted"
        except _Held as e:
            return False, None, f"not sent: the cluster view may be stale ({e})"
        except ApiException as e:
            if e.status == 404:
                return True, 404, "pod already gone"
            return False, e.status, _body(e)
        except ScalerError:  # LeaseLost from the fence: nothing was sent
            raise
        except Exception as e:  # connection errors: retried like 5xx
            return False, None, f"{type(e).__name__}: {e}"

    def evictor(
        self,
        max_pod_eviction_time: float,
        max_graceful_termination_sec: int,
        stop: threading.Event | None = None,
        *,
        reason: str = "ScaleDown",
    ) -> Evictor:
        """An :class:`~scaler.eviction.executor.Evictor` that retries 429, 5xx and connection
        errors every ``eviction_retry_seconds`` until ``max_pod_eviction_time`` has passed
        (at least one attempt), emitting an event on the pod on success (``reason``:
        ``ScaleDown`` for a drain, ``HotNodeRelief`` for a relief) and a Warning on final
        failure (``ScaleDownFailed``, ``HotNodeRelief``). Once ``stop`` is set (SIGTERM, or the
        node being drained was deleted) it makes no further attempt, not even a first one, and
        the wait between attempts ends at once."""
        done_message, failed_reason, failed_message = _EVICTION_EVENTS[reason]

        def evict(pod: Pod) -> EvictResult:
            grace = min(pod.termination_grace_seconds, max_graceful_termination_sec)
            attempts: list[tuple[bool, int | None, str]] = []

            def attempt() -> tuple[bool, int | None, str]:
                if stop is not None and stop.is_set() and attempts:
                    return attempts[-1]  # stopping: no further request
                if stop is not None and stop.is_set():
                    result: tuple[bool, int | None, str] = (False, None, "not attempted: stopping")
                    attempts.append(result)
                    return result
                result = self.evict_once(pod, grace)
                attempts.append(result)
                return result

            def retryable(r: tuple[bool, int | None, str]) -> bool:
                return not r[0] and (r[1] is None or r[1] in _RETRYABLE)

            def pause(seconds: float) -> None:
                if stop is None:
                    self.sleep(seconds)
                else:
                    stop.wait(seconds)

            retrying = Retrying(
                retry=retry_if_result(retryable),
                wait=wait_fixed(self.eviction_retry_seconds),
                stop=stop_after_delay(max_pod_eviction_time)
                | (stop_when_event_set(stop) if stop is not None else stop_never),
                sleep=pause,
                reraise=False,
            )
            try:
                ok, status, message = retrying(attempt)
            except RetryError:
                ok, status, message = attempts[-1]
            if not ok and status is None and message.startswith("not attempted"):
                return EvictResult(False, f"evict {pod.key}: {message}")  # stopped before any request
            ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)
            if ok:
                self.event(ref, "Normal", reason, done_message)
                return EvictResult(True)
            why = f"HTTP {status}: {message}" if status is not None else message
            self.event(ref, "Warning", failed_reason, f"{failed_message}: {why}")
            return EvictResult(False, f"evict {pod.key} after {len(attempts)} attempt(s): {why}")

        return evict

    # ---- events and status --------------------------------------------------------------------
    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Create a core/v1 Event about ``ref`` (cluster-scoped objects' events go to
        ``default``). Failures are logged, never raised: events are best effort."""
        namespace = ref.namespace or "default"
        now = format_time(self.clock())
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "name": ref.name,
                "namespace": ref.namespace,
                "uid": ref.uid,
                "apiVersion": ref.api_version,
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": "scaler"},
            "reportingComponent": "scaler",
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            self._write(f"create event {reason}", lambda: self.core.create_namespaced_event(
                namespace, cast(Any, body), _preload_content=False, _request_timeout=self.timeout))  # fmt: skip
        except Exception as e:  # best effort, as CA's recorder
            log.warning("event %s on %s %s not recorded: %s", reason, ref.kind, ref.name, e)

    def write_config_map(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        """Create or replace a ConfigMap (the status ConfigMap).

        Raises:
            WriteError: the API refused (other than a lost update race, which is retried once).
        """
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "annotations": dict(annotations)},
            "data": dict(data),
        }
        key = (namespace, name)
        cached = self._config_map_versions.get(key)
        if cached is not None:
            # Our own last write: replace directly, without a GET (a steady loop stays quiet).
            body["metadata"]["resourceVersion"] = cached
            try:
                self._remember(key, self._fenced(f"update configmap {namespace}/{name}", lambda: self.core.replace_namespaced_config_map(
                    name, namespace, cast(Any, body), _preload_content=False, _request_timeout=self.timeout)))  # fmt: skip
                return
            except ApiException as e:
                if e.status not in (404, 409):
                    raise WriteError(
                        f"update configmap {namespace}/{name}: HTTP {e.status} {_body(e)}"
                    ) from None
                self._config_map_versions.pop(key, None)
        for _ in range(2):
            try:
                current = read_json(self.core.read_namespaced_config_map(name, namespace, _preload_content=False,
                                                                     _request_timeout=self.timeout))  # fmt: skip
            except ApiException as e:
                if e.status != 404:
                    raise WriteError(
                        f"get configmap {namespace}/{name}: HTTP {e.status} {_body(e)}"
                    ) from None
                body["metadata"].pop("resourceVersion", None)
                try:
                    self._remember(key, self._fenced(f"create configmap {namespace}/{name}", lambda: self.core.create_namespaced_config_map(
                        namespace, cast(Any, body), _preload_content=False, _request_timeout=self.timeout)))  # fmt: skip
                    return
                except ApiException as e2:
                    if e2.status == 409:
                        continue
                    raise WriteError(
                        f"create configmap {namespace}/{name}: HTTP {e2.status} {_body(e2)}"
                    ) from None
            body["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            try:
                self._remember(key, self._fenced(f"update configmap {namespace}/{name}", lambda: self.core.replace_namespaced_config_map(
                    name, namespace, cast(Any, body), _preload_content=False, _request_timeout=self.timeout)))  # fmt: skip
                return
            except ApiException as e:
                if e.status == 409:
                    continue
                raise WriteError(f"update configmap {namespace}/{name}: HTTP {e.status} {_body(e)}") from None
        raise WriteError(f"configmap {namespace}/{name}: conflicting updates")

    def _remember(self, key: tuple[str, str], resp: Any) -> None:
        """Keep the resourceVersion of our own ConfigMap write (the next write replaces directly)."""
        self._config_map_versions[key] = read_json(resp)["metadata"].get("resourceVersion")
