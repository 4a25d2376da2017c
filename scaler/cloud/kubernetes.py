"""Kubernetes-only provider: node groups from node labels, deletion by deleting Node objects.

For clusters whose nodes are not cloud VMs scaler can remove (and for tests): a group is a value
of the ``cloud.google.com/gke-nodepool`` label, its size is the number of Node objects with it
(one paginated node LIST per :meth:`KubernetesProvider.refresh`, or none when the provider is
given ``node_source``: the nodes the controller already has from its watch cache), its limits come from
``--nodes`` per zone (the zone label of its nodes; min 0 and max = current size without), and
deleting a node deletes its Node object
(``CoreV1Api.delete_node``, with a UID precondition when the node's UID is known, so a node
re-created under the same name is never deleted by mistake, and a resourceVersion precondition
when the caller verified one, so a node changed since, e.g. untainted, is not deleted). Needs RBAC ``list`` and ``delete``
on ``nodes``.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import urllib3
from kubernetes.client import ApiClient, CoreV1Api, V1DeleteOptions, V1Preconditions
from kubernetes.client.exceptions import ApiException

from scaler.cloud.base import (
    CloudError,
    NodeChanged,
    NodeGroupInfo,
    ZoneGroupInfo,
    call_with_retries,
    check_min_sizes,
)
from scaler.kube.client import ApiCall
from scaler.kube.retry import retry_after
from scaler.limits import GroupLimits
from scaler.model.records import LABEL_NODEPOOL, LABEL_ZONE, LABEL_ZONE_BETA, Node

__all__ = ["KUBE_CALLS", "KubernetesProvider"]

log = logging.getLogger(__name__)

T = TypeVar("T")

_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})

KUBE_CALLS: tuple[ApiCall, ...] = (
    ApiCall("", "v1", "nodes", "delete", namespaced=False, optional=False),
    ApiCall("", "v1", "nodes", "list", namespaced=False, optional=False),
)
"""The Kubernetes calls :class:`KubernetesProvider` makes: delete a Node; LIST nodes (when it
is not given ``node_source``)."""


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, ApiException):
        return exc.status in _RETRYABLE_STATUS or not exc.status  # 0: transport failure
    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError))


class KubernetesProvider:
    """Node groups from the node-pool label; deletes Node objects.

    Args:
        api_client: a ``kubernetes.client.ApiClient`` (see ``scaler.sources.kube.make_api_client``).
        limits: ``--nodes`` limits (:class:`~scaler.limits.GroupLimits`), per zone.
        retry_wait_seconds: wait between attempts of a 429/5xx/connection failure (seconds).
        max_attempts: attempts per API call before :class:`~scaler.cloud.base.CloudError`.
        page_size: ``limit`` of each page of the node LIST.
        request_timeout_seconds: timeout of one HTTP request (seconds).
        node_source: where :meth:`refresh` takes the nodes from instead of a node LIST, e.g. the
            nodes of the snapshot the controller just built from its watch cache, so that a
            steady loop makes no request for the group sizes (``None``: LIST the nodes).
    """

    name = "kubernetes"
    kube_calls = KUBE_CALLS

    def __init__(
        self,
        api_client: ApiClient,
        limits: GroupLimits | None = None,
        *,
        retry_wait_seconds: float = 1.0,
        max_attempts: int = 5,
        page_size: int = 500,
        request_timeout_seconds: float = 30.0,
        node_source: Callable[[], Iterable[Node]] | None = None,
    ) -> None:
        self._core = CoreV1Api(api_client)
        self._limits = limits if limits is not None else GroupLimits()
        self._retry_wait = retry_wait_seconds
        self._max_attempts = max(1, max_attempts)
        self._page_size = page_size
        self._timeout = request_timeout_seconds
        self._node_source = node_source
        self._sizes: dict[str, dict[str, int]] | None = None  # group -> zone -> nodes
        self._pending: dict[str, Counter[str]] = {}  # group -> zone -> nodes being deleted
        self._lock = threading.Lock()

    def _call(self, call: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` with retries on 429, 5xx and connection errors.

        Raises:
            ApiException: a non-retryable API error (the caller decides).
            CloudError: the last retryable failure after ``max_attempts``.
        """

        try:
            return call_with_retries(
                fn,
                what=call,
                retryable=_retryable,
                max_attempts=self._max_attempts,
                wait_seconds=self._retry_wait,
                wait_at_least=retry_after,
            )
        except ApiException as e:
            if _retryable(e):
                raise CloudError(f"{call}: HTTP {e.status}: {e.reason}") from e
            raise
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise CloudError(f"{call}: {type(e).__name__}: {e}") from e

    def _list_page(self, token: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": self._page_size}
        if token:
            params["_continue"] = token
        # _preload_content=False returns the raw urllib3 response, not the typed V1NodeList.
        resp: Any = self._core.list_node(_preload_content=False, _request_timeout=self._timeout, **params)
        try:
            doc = json.loads(resp.data)
        finally:
            resp.release_conn()
        if not isinstance(doc, dict):
            raise CloudError("list nodes: response is not a NodeList")
        return doc

    def refresh(self) -> None:
        """LIST nodes (paginated) and count them per node-pool label value and zone; with
        ``node_source``, count its nodes instead (no request).

        Raises:
            CloudError: the LIST failed (after retries for 429/5xx/connection errors).
        """
        sizes: dict[str, dict[str, int]] = {}

        def count(pool: str, zone: str) -> None:
            zones = sizes.setdefault(pool, {})
            zones[zone] = zones.get(zone, 0) + 1

        if self._node_source is not None:
            for node in self._node_source():
                if node.node_group:
                    count(node.node_group, node.zone)
            with self._lock:
                self._sizes = sizes
            return
        token: str | None = None
        while True:
            try:
                doc = self._call("list nodes", functools.partial(self._list_page, token))
            except ApiException as e:
                raise CloudError(f"list nodes: HTTP {e.status}: {e.reason}") from e
            for item in doc.get("items") or []:
                labels = (item.get("metadata") or {}).get("labels") or {}
                pool = labels.get(LABEL_NODEPOOL)
                if pool:
                    count(str(pool), str(labels.get(LABEL_ZONE) or labels.get(LABEL_ZONE_BETA) or ""))
            token = (doc.get("metadata") or {}).get("continue") or None
            if not token:
                break
        with self._lock:
            self._sizes = sizes

    def _ensure(self) -> dict[str, dict[str, int]]:
        if self._sizes is None:
            self.refresh()
        assert self._sizes is not None
        return self._sizes

    def _info(self, group: str, zones: Mapping[str, int]) -> NodeGroupInfo:
        size = sum(zones.values())
        zone_groups = []
        for zone, n in sorted(zones.items()):
            spec = self._limits.for_zone(group, zone)
            lo, hi = (spec.min_size, spec.max_size) if spec is not None else (0, n)
            zone_groups.append(ZoneGroupInfo(zone, lo, hi, n))
        max_size = sum(z.max_size for z in zone_groups)
        return NodeGroupInfo(group, 0, max_size, size, tuple(sorted(zones)), tuple(zone_groups))

    def node_group_for(self, node: Node) -> NodeGroupInfo | None:
        """The group named by ``node``'s node-pool label, or ``None`` (no label, or a value no node
        had at the last refresh). Refreshes first if :meth:`refresh` was never called.

        Raises:
            CloudError: the first refresh failed.
        """
        sizes = self._ensure()
        with self._lock:
            group = node.node_group
            return self._info(group, sizes[group]) if group in sizes else None

    def node_groups(self) -> list[NodeGroupInfo]:
        """Every group, sorted by name, as of the last refresh (refreshes if never done).

        Raises:
            CloudError: the first refresh failed.
        """
        sizes = self._ensure()
        with self._lock:
            return [self._info(g, sizes[g]) for g in sorted(sizes)]

    def missing_permissions(self, dry_run: bool) -> str:
        """Always ``""``: this provider's calls (:data:`KUBE_CALLS`) are Kubernetes calls, checked
        with the controller's own (:mod:`scaler.kube.permissions`)."""
        return ""

    def delete_nodes(
        self,
        group_id: str,
        nodes: Sequence[Node],
        in_flight: int = 0,
        zone_in_flight: Mapping[str, int] | None = None,
    ) -> None:
        """Delete the Node objects of ``nodes`` (all labelled ``group_id``), one DELETE each. A node
        already gone (404), or re-created with another UID (409), counts as deleted.

        Raises:
            MinSizeReached: see :func:`scaler.cloud.base.check_min_size` and
                :func:`~scaler.cloud.base.check_zone_min_size`; nothing was deleted.
            NodeChanged: every node not deleted had changed since its ``resource_version``.
            CloudError: unknown group or a node of another group (nothing deleted), or a DELETE
                failed (``failed_nodes`` names the nodes not deleted).
        """
        sizes = self._ensure()
        unique = list({n.name: n for n in nodes}.values())
        if not unique:
            return
        with self._lock:
            if group_id not in sizes:
                raise CloudError(f"node group {group_id!r}: no node has {LABEL_NODEPOOL}={group_id}")
            for node in unique:
                if node.node_group != group_id:
                    raise CloudError(f"node {node.name} does not belong to node group {group_id}")
            per_zone = Counter(node.zone for node in unique)
            pending = self._pending.setdefault(group_id, Counter())
            check_min_sizes(
                self._info(group_id, sizes[group_id]), per_zone, in_flight, zone_in_flight, pending
            )
            pending.update(per_zone)
        failed: list[str] = []
        errors: list[str] = []
        changed = True  # every failure a failed resourceVersion precondition
        try:
            for node in unique:
                try:
                    self._delete(node)
                except CloudError as e:
                    failed.append(node.name)
                    errors.append(str(e))
                    changed = changed and isinstance(e, NodeChanged)
                    continue
                with self._lock:
                    zones = sizes[group_id]
                    zones[node.zone] = max(0, zones.get(node.zone, 0) - 1)
        finally:
            with self._lock:
                pending.subtract(per_zone)
        if failed:
            kind = NodeChanged if changed else CloudError
            raise kind(f"node group {group_id}: " + "; ".join(errors), failed_nodes=failed)

    def _delete(self, node: Node) -> None:
        body = None
        if node.uid or node.resource_version:
            body = V1DeleteOptions(preconditions=V1Preconditions(uid=node.uid or None,
                                                                 resource_version=node.resource_version or None))  # fmt: skip
        call = f"delete node {node.name}"
        log.info("deleting Node %s", node.name)
        try:
            self._call(
                call, lambda: self._core.delete_node(node.name, body=body, _request_timeout=self._timeout)
            )
        except ApiException as e:
            if e.status == 404:  # gone
                return
            if e.status == 409:
                # A precondition failed: another node under that name now (deleted, as far as
                # this one goes), or this node changed since it was verified (not deleted).
                current = self._current(node.name)
                if current is None or (node.uid and current.get("uid") != node.uid):
                    return
                raise NodeChanged(
                    f"{call}: changed since verified (resourceVersion {current.get('resourceVersion')}, "
                    f"verified {node.resource_version}); not deleted",
                    failed_nodes=[node.name],
                ) from e
            raise CloudError(f"{call}: HTTP {e.status}: {e.reason}") from e

    def _current(self, name: str) -> dict[str, Any] | None:
        """The metadata of Node ``name`` now, ``None`` when it is gone.

        Raises:
            CloudError: the read failed.
        """
        try:
            resp: Any = self._call(f"get node {name}", lambda: self._core.read_node(
                name, _preload_content=False, _request_timeout=self._timeout))  # fmt: skip
        except ApiException as e:
            if e.status == 404:
                return None
            raise CloudError(f"get node {name}: HTTP {e.status}: {e.reason}") from e
        try:
            doc = json.loads(resp.data)
        finally:
            resp.release_conn()
        return dict((doc or {}).get("metadata") or {})
