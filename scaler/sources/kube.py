"""Read-only live cluster source: LIST everything the engine needs from the API server.

All HTTP goes through the official ``kubernetes`` client (config loading, auth, TLS, proxies),
but no client model class ever leaves this module: the generated ``list_*`` methods are called
with ``_preload_content=False`` and each page's JSON body is decoded by msgspec straight into
records (:func:`scaler.model.decode.decode_list`), or into plain dicts for ``scaler snapshot``.

Every request the source makes is described by one entry of
:data:`scaler.kube.client.READ_CALLS` (re-exported here, with the client plumbing the read side
shares with the write side: :class:`~scaler.kube.client.ApiCall`,
:func:`~scaler.kube.client.make_api_client`, the errors); the client layer iterates over that table (an RBAC test compares it with the ClusterRole). Per kind there is one
paginated cluster-wide LIST (``limit``/``continue``), and exactly one LIST each of
``metrics.k8s.io`` nodes and pods: never a request per node or per pod.

An object that does not decode does not fail its LIST: it is kept out of the snapshot as an
:class:`~scaler.model.unreadable.Unreadable`, logged, and charged to the nodes it concerns
(:func:`snapshot_with_unreadable`); a malformed metrics item is left out (its node or pod then
has no reading: unknown usage, never zero). Snapshot files, unlike the API, are strict.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import msgspec
import urllib3
from kubernetes import client as k8s_client
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scaler.kube.client import (
    DRA_GROUP,
    METRICS_GROUP,
    READ_CALLS,
    ApiCall,
    ClusterUnreachable,
    LiveSourceError,
    MetricsUnavailable,
    NoClusterConfig,
    make_api_client,
    unreachable,
)
from scaler.kube.retry import retry_after
from scaler.model.decode import DecodedList, decode_list
from scaler.model.gcpause import no_cycle_collector
from scaler.model.parse import ObjectError
from scaler.model.snapshot import CONTROLLER_KINDS, ClusterSnapshot, RecordSet, SnapshotError
from scaler.model.unreadable import Unreadable, placeholder_node, unreadable_nodes

__all__ = [
    "LISTED_WORKLOAD_KINDS",
    "READ_CALLS",
    "ApiCall",
    "ClusterUnreachable",
    "LiveSourceError",
    "MetricsUnavailable",
    "NoClusterConfig",
    "fetch_objects",
    "list_pages",
    "load_live_snapshot",
    "make_api_client",
    "snapshot_with_unreadable",
    "unreachable",
]

logger = logging.getLogger(__name__)

LISTED_WORKLOAD_KINDS: frozenset[str] = frozenset(
    c.kind for c in READ_CALLS if c.verb == "list" and c.kind in CONTROLLER_KINDS
)
"""The workload controller kinds the live source lists (a snapshot's ``workload_kinds``)."""


# -- requests --------------------------------------------------------------------------------------


class _HttpStatusError(Exception):
    def __init__(self, status: int, reason: str, message: str, retry_after: float | None = None) -> None:
        super().__init__(status, reason, message)
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after  # a 429's Retry-After (seconds), see scaler.kube.client

    def describe(self, call: ApiCall) -> str:
        text = f"cannot {call.verb} {call.display} ({call.path}): HTTP {self.status} {self.reason}".rstrip()
        if self.message:
            text += f": {self.message}"
        if call.group == METRICS_GROUP and self.status in (404, 503):
            text += " (metrics API unavailable: is metrics-server running?)"
        return text


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def _list_method(api: ApiClient, call: ApiCall) -> Callable[..., Any]:
    """The generated client method that performs ``call`` cluster-wide."""
    if "." in call.group:  # aggregated / custom API groups: generic path-based method
        method = k8s_client.CustomObjectsApi(api).list_cluster_custom_object

        def custom(**kwargs: Any) -> Any:
            return method(call.group, call.version, call.resource, **kwargs)

        return custom
    api_class = getattr(k8s_client, f"{(call.group or 'core').capitalize()}{call.version.capitalize()}Api")
    name = f"list_{_snake(call.kind)}" + ("_for_all_namespaces" if call.namespaced else "")
    return getattr(api_class(api), name)  # type: ignore[no-any-return]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _status_message(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body:
        return ""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return _one_line(body)[:200]
    return _one_line(str(doc.get("message") or "")) if isinstance(doc, dict) else ""


def _request(api: ApiClient, call: ApiCall, timeout: float, **params: Any) -> bytes:
    """One GET for ``call``; returns the response body (checked later by the decoder)."""
    try:
        response = _list_method(api, call)(_preload_content=False, _request_timeout=timeout, **params)
        try:
            raw = response.data
            status = int(response.status)
        finally:
            response.release_conn()
    except ApiException as e:
        if not e.status:  # the client's REST layer reports TLS failures as status 0
            raise unreachable(api, call.display, e) from e
        raise _HttpStatusError(
            int(e.status), str(e.reason or ""), _status_message(e.body), retry_after(e)
        ) from e
    except urllib3.exceptions.DecodeError as e:
        raise LiveSourceError(f"{call.display} ({call.path}): undecodable response: {e}") from e
    except (urllib3.exceptions.HTTPError, OSError) as e:  # refused, DNS, timeouts, resets
        raise unreachable(api, call.display, e) from e
    if not 200 <= status <= 299:  # older clients may not raise on their own
        raise _HttpStatusError(status, "", _status_message(raw))
    return bytes(raw)


def _plain_page(call: ApiCall, raw: bytes) -> DecodedList:
    """A LIST page as plain dicts, each with ``kind`` and ``apiVersion`` set."""
    doc = msgspec.json.decode(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("items") or [], list):
        raise msgspec.ValidationError("not a List")
    items = doc.get("items") or []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise LiveSourceError(f"{call.display} ({call.path}): item {i} is not an object")
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return DecodedList(
        [
            item if item.get("kind") else {"apiVersion": call.api_version, "kind": call.kind, **item}
            for item in items
        ],
        str(meta.get("continue") or ""),
        str(meta.get("resourceVersion") or ""),
    )


def _record_page(call: ApiCall, raw: bytes) -> DecodedList:
    """A LIST page decoded straight into records."""
    try:
        return decode_list(raw, call.kind)
    except ObjectError as e:
        raise SnapshotError(f"{call.display}: {e}") from None


def _lenient_page(call: ApiCall, raw: bytes) -> DecodedList:
    """A LIST page decoded straight into records, an item that does not decode becoming an
    :class:`Unreadable` among them (the live source: one bad object does not fail its LIST)."""
    return decode_list(raw, call.kind, lenient=True)


def snapshot_with_unreadable(
    records: RecordSet, unreadable: list[Unreadable], now: float | None, workload_kinds: Iterable[str]
) -> ClusterSnapshot:
    """Build the snapshot of ``records`` (:meth:`RecordSet.snapshot`) with the objects that could
    not be read: each unreadable Node stands in it as a placeholder
    (:func:`~scaler.model.unreadable.placeholder_node`) and every node an unreadable object
    concerns is named in :attr:`ClusterSnapshot.unreadable` (neither candidate nor destination).

    Raises:
        SnapshotError: as :meth:`RecordSet.snapshot`.
    """
    for bad in unreadable:
        if bad.kind == "Node" and bad.name and bad.key not in records.by_kind.get("Node", {}):
            records.add(placeholder_node(bad))
    snap = records.snapshot(now, workload_kinds=workload_kinds)
    if not unreadable:
        return snap
    return replace(snap, unreadable=unreadable_nodes(unreadable, snap.nodes, snap.pods))


def list_pages(
    api: ApiClient,
    call: ApiCall,
    page_size: int,
    timeout: float,
    decode: Callable[[ApiCall, bytes], DecodedList] = _record_page,
) -> tuple[list[Any], str]:
    """Every item of ``call``'s collection, one LIST page after the other (``limit``, then the
    ``continue`` token; the metrics API in one request). Each page is decoded by ``decode``
    (default: into records) and its bytes released before the next one is asked for. A continue
    token that expires mid-list (HTTP 410) restarts the list once.

    Returns:
        The items and the List's ``resourceVersion`` (the first page's).

    Raises:
        _HttpStatusError: an HTTP error status.
        ClusterUnreachable: as :func:`fetch_objects`.
        LiveSourceError: a body that is not a JSON List, or a repeated continue token.
        SnapshotError: an item is malformed (records only; names the object).
    """
    items: list[Any] = []
    token = rv = ""
    seen: set[str] = set()
    restarted = False
    while True:
        params: dict[str, Any] = {}
        if call.paginated:
            params["limit"] = page_size
            if token:
                params["_continue"] = token
        try:
            raw = _request(api, call, timeout, **params)
        except _HttpStatusError as e:
            if e.status == 410 and token and not restarted:  # continue token expired: start over
                logger.warning("%s: continue token expired, restarting the list", call.display)
                items, token, rv, seen, restarted = [], "", "", set(), True
                continue
            raise
        try:
            page = decode(call, raw)
        except msgspec.DecodeError as e:
            raise LiveSourceError(
                f"{call.display} ({call.path}): malformed JSON in the response: {e}"
            ) from None
        except msgspec.ValidationError:
            raise LiveSourceError(f"{call.display} ({call.path}): the response is not a List") from None
        del raw
        items.extend(page.records)
        rv = rv or page.resource_version  # every page answers the first one's
        token = page.continue_token if call.paginated else ""
        if not token:
            return items, rv
        if token in seen:
            raise LiveSourceError(f"{call.display} ({call.path}): the server repeated a continue token")
        seen.add(token)


_DRA_UNSERVED_SAID = False


def skipped_optional(call: ApiCall, status: int, message: str, log: logging.Logger) -> None:
    """Say that optional kind ``call`` was refused (``status`` 403/404). A cluster that does not
    serve ``resource.k8s.io/v1`` (404: before Kubernetes 1.34) is said once per process for the
    four DRA kinds, at info level: it is normal, not a fault."""
    global _DRA_UNSERVED_SAID
    if call.group == DRA_GROUP and status == 404:
        if not _DRA_UNSERVED_SAID:
            _DRA_UNSERVED_SAID = True
            log.info(
                "the cluster does not serve %s/v1 (Dynamic Resource Allocation): no ResourceSlices or "
                "ResourceClaims are read; a pod with resource claims is never moved",
                DRA_GROUP,
            )
        return
    log.warning("skipping %s: %s", call.display, message)


def _each_call(
    api: ApiClient, page_size: int, timeout_seconds: float, decode: Callable[[ApiCall, bytes], DecodedList]
) -> Iterator[list[Any]]:
    """The items of every kind in :data:`READ_CALLS`, a list per kind, skipping refused optional
    kinds."""
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    if timeout_seconds <= 0:
        raise ValueError(f"timeout_seconds must be > 0, got {timeout_seconds}")
    unserved: set[str] = set()
    for call in READ_CALLS:
        if call.verb != "list" or call.group in unserved:
            continue
        try:
            yield list_pages(api, call, page_size, timeout_seconds, decode)[0]
        except _HttpStatusError as e:
            if call.optional and e.status in (403, 404):
                skipped_optional(call, e.status, e.describe(call), logger)
                if call.group == DRA_GROUP and e.status == 404:
                    unserved.add(call.group)  # the group is not served: no request for its other kinds
                continue
            raise LiveSourceError(e.describe(call)) from None


def fetch_objects(api: ApiClient, page_size: int = 500, timeout_seconds: float = 30) -> list[dict[str, Any]]:
    """LIST every kind in :data:`READ_CALLS` cluster-wide and return the objects as plain dicts
    (for ``scaler snapshot``, which writes them out whole).

    Each kind is one paginated LIST (``limit=page_size`` then ``continue``; a continue token
    that expires mid-list, HTTP 410, restarts that kind's list once); the metrics API is read
    with exactly one request per resource. Objects come back in :data:`READ_CALLS` order with
    ``kind`` and ``apiVersion`` set.

    Args:
        api: a ``kubernetes.client.ApiClient`` (see :func:`make_api_client`).
        page_size: items per LIST page (>= 1).
        timeout_seconds: client-side timeout per HTTP attempt, in seconds (> 0); the
            client's connection pool may retry a failed GET a few times before giving up.

    Raises:
        ClusterUnreachable: connection refused, DNS or TLS failure, timeout.
        LiveSourceError: an HTTP error on a required kind (including 404/503 from
            ``metrics.k8s.io``), or a body that is not a JSON List. Optional kinds (PVs, PVCs)
            answering 403/404 are skipped with a logged warning.
        ValueError: ``page_size`` < 1 or ``timeout_seconds`` <= 0.
    """
    return [obj for objs in _each_call(api, page_size, timeout_seconds, _plain_page) for obj in objs]


def load_live_snapshot(
    api: ApiClient, now: float, page_size: int = 500, timeout_seconds: float = 30
) -> ClusterSnapshot:
    """LIST the cluster as :func:`fetch_objects` does, each page decoded straight into records
    and released before the next, and build a snapshot.

    Every controller kind in :data:`READ_CALLS` counts as listed (``workload_kinds``), even when
    the cluster has none of it, so a pod owned by a missing ReplicationController is reported.

    Args:
        api: a ``kubernetes.client.ApiClient``.
        now: evaluation time, Unix seconds.
        page_size, timeout_seconds: as :func:`fetch_objects`.

    An object that does not decode is left out and named in a warning; the nodes it concerns
    are ``UnreadableObject`` (:func:`snapshot_with_unreadable`), as in ``scaler run``; a
    malformed metrics item is left out with a warning.

    Raises:
        ClusterUnreachable, LiveSourceError, ValueError: as :func:`fetch_objects`.
    """
    records = RecordSet()
    unreadable: list[Unreadable] = []
    with no_cycle_collector():  # and the snapshot built inside: its records go to the oldest generation
        for recs in _each_call(api, page_size, timeout_seconds, _lenient_page):
            for rec in recs:
                if isinstance(rec, Unreadable):
                    logger.warning("%s is left out: %s", rec.display, rec.message)
                    if rec.kind not in ("NodeMetrics", "PodMetrics"):
                        unreadable.append(rec)
                else:
                    records.add(rec)
        return snapshot_with_unreadable(records, unreadable, now, LISTED_WORKLOAD_KINDS)
