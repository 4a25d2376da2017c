"""Read-only live cluster source: LIST everything the engine needs from the API server.

All HTTP goes through the official ``kubernetes`` client (config loading, auth, TLS, proxies),
but no client model class ever leaves this module: the generated ``list_*`` methods are called
with ``_preload_content=False`` and each page's JSON body is decoded by msgspec straight into
records (:func:`scaler.model.decode.decode_list`), or into plain dicts for ``scaler snapshot``.

Every request the source makes is described by one entry of :data:`READ_CALLS`; the client layer
iterates over that table (an RBAC test compares it with the ClusterRole). Per kind there is one
paginated cluster-wide LIST (``limit``/``continue``), and exactly one LIST each of
``metrics.k8s.io`` nodes and pods: never a request per node or per pod.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from scaler.errors import InputError, TransientError
from scaler.model.decode import DecodedList, decode_list
from scaler.model.gcpause import no_cycle_collector
from scaler.model.parse import ObjectError
from scaler.model.snapshot import CONTROLLER_KINDS, ClusterSnapshot, RecordSet, SnapshotError

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
    "unreachable",
]

logger = logging.getLogger(__name__)

# The config loaders are untyped in some client versions and typed in none: call them through Any.
k8s_config: Any = _k8s_config

METRICS_GROUP = "metrics.k8s.io"


class ClusterUnreachable(TransientError):
    """No cluster to talk to: no kubeconfig and no in-cluster config (or an unusable one), or
    the API server cannot be reached (connection refused, DNS, TLS handshake, timeout).

    The caller may fall back to the bundled example snapshot; the message says why.
    """


class NoClusterConfig(ClusterUnreachable):
    """No cluster was named anywhere: no kubeconfig argument, no kubeconfig file in
    ``$KUBECONFIG`` or at ``~/.kube/config``, no context, and no in-cluster service account.

    The only case in which a command may fall back to the bundled example snapshot; a cluster
    that was named but cannot be reached is a plain :class:`ClusterUnreachable`.
    """


class LiveSourceError(InputError, ValueError):
    """The API server answered, but badly: an HTTP error status (other than on an optional
    kind), a body that is not a JSON List, or the metrics API missing (404/503 on
    ``metrics.k8s.io``). The one-line message names the resource, the path and the status."""


class MetricsUnavailable(LiveSourceError):
    """``metrics.k8s.io`` did not answer a metrics LIST with a List: an HTTP error (404: the
    APIService is missing; 503: metrics-server is down), a malformed body. The API server itself
    answered. ``scaler dry-run`` exits 2 on it; ``scaler run`` treats it as an outage (a state
    it reports and waits out, acting on nothing)."""


@dataclass(frozen=True, slots=True)
class ApiCall:
    """One API request the live source makes, as RBAC sees it.

    Attributes:
        group: API group, ``""`` for the core group.
        version: API version within the group (``v1``, ``v1beta1``).
        resource: plural resource name (``pods``).
        verb: RBAC verb (``list``).
        namespaced: whether the resource is namespaced (the LIST is still cluster-wide).
        optional: a 403/404 answer is logged and the kind skipped instead of failing.
    """

    group: str
    version: str
    resource: str
    verb: str
    namespaced: bool
    optional: bool

    @property
    def api_version(self) -> str:
        """``apiVersion`` of the objects: ``v1`` for core, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path(self) -> str:
        """The cluster-wide collection path (``/api/v1/pods``, ``/apis/apps/v1/replicasets``)."""
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/{self.resource}"

    @property
    def kind(self) -> str:
        """The kind of the listed objects (``Pod``, ``NodeMetrics``)."""
        return _KINDS[(self.group, self.resource)]

    @property
    def display(self) -> str:
        """``resource[.group]`` as kubectl and RBAC name it (``poddisruptionbudgets.policy``)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def paginated(self) -> bool:
        """Whether the LIST is chunked with ``limit``/``continue``. The aggregated metrics API
        is always read in one request (metrics-server serves it from memory)."""
        return self.group != METRICS_GROUP


_KINDS: dict[tuple[str, str], str] = {
    ("", "nodes"): "Node",
    ("", "pods"): "Pod",
    ("policy", "poddisruptionbudgets"): "PodDisruptionBudget",
    ("apps", "replicasets"): "ReplicaSet",
    ("apps", "statefulsets"): "StatefulSet",
    ("apps", "daemonsets"): "DaemonSet",
    ("", "replicationcontrollers"): "ReplicationController",
    ("batch", "jobs"): "Job",
    ("", "persistentvolumes"): "PersistentVolume",
    ("", "persistentvolumeclaims"): "PersistentVolumeClaim",
    ("", "namespaces"): "Namespace",
    (METRICS_GROUP, "nodes"): "NodeMetrics",
    (METRICS_GROUP, "pods"): "PodMetrics",
}

READ_CALLS: tuple[ApiCall, ...] = (
    ApiCall("", "v1", "nodes", "list", namespaced=False, optional=False),
    ApiCall("", "v1", "pods", "list", namespaced=True, optional=False),
    ApiCall("policy", "v1", "poddisruptionbudgets", "list", namespaced=True, optional=False),
    ApiCall("apps", "v1", "replicasets", "list", namespaced=True, optional=False),
    ApiCall("apps", "v1", "statefulsets", "list", namespaced=True, optional=False),
    ApiCall("apps", "v1", "daemonsets", "list", namespaced=True, optional=False),
    ApiCall("", "v1", "replicationcontrollers", "list", namespaced=True, optional=False),
    ApiCall("batch", "v1", "jobs", "list", namespaced=True, optional=False),
    ApiCall("", "v1", "persistentvolumes", "list", namespaced=False, optional=True),
    ApiCall("", "v1", "persistentvolumeclaims", "list", namespaced=True, optional=True),
    # Namespace labels, for pod affinity terms' namespaceSelector (unknown without: see
    # scaler.simulator.filters.InterPodAffinity).
    ApiCall("", "v1", "namespaces", "list", namespaced=False, optional=True),
    ApiCall(METRICS_GROUP, "v1beta1", "nodes", "list", namespaced=False, optional=False),
    ApiCall(METRICS_GROUP, "v1beta1", "pods", "list", namespaced=True, optional=False),
)
"""Every API call the live source makes, in the order :func:`fetch_objects` makes them."""

LISTED_WORKLOAD_KINDS: frozenset[str] = frozenset(
    c.kind for c in READ_CALLS if c.verb == "list" and c.kind in CONTROLLER_KINDS
)
"""The workload controller kinds the live source lists (a snapshot's ``workload_kinds``)."""


# -- configuration ---------------------------------------------------------------------------------


def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """Build a ``kubernetes.client.ApiClient`` for the cluster to read.

    Looks for, in order: ``kubeconfig`` if given (and only it), else the files in
    ``$KUBECONFIG`` (``os.pathsep``-separated, missing ones skipped), else ``~/.kube/config``,
    else the in-cluster service-account config. Nothing is written back to kubeconfig files.
    Nothing is contacted yet.

    Args:
        kubeconfig: path of a kubeconfig file.
        context: kubeconfig context to use (default: its ``current-context``).

    Raises:
        NoClusterConfig: no kubeconfig file, no context named, and no in-cluster config.
        ClusterUnreachable: the config found (or named) is unusable (missing named file, unknown
            context, malformed file, failing credential plugin); the message says which.
    """
    cfg = k8s_client.Configuration()
    if kubeconfig is not None:
        candidates = [kubeconfig]
    elif os.environ.get("KUBECONFIG"):
        candidates = os.environ["KUBECONFIG"].split(os.pathsep)
    else:
        candidates = ["~/.kube/config"]
    found = [p for p in candidates if p and Path(p).expanduser().is_file()]
    if found:
        where = os.pathsep.join(found)
        try:
            k8s_config.load_kube_config(
                config_file=where, context=context, client_configuration=cfg, persist_config=False
            )
        except Exception as e:  # ConfigException, YAML errors, credential plugin failures
            raise ClusterUnreachable(f"kubeconfig {where}: {_one_line(str(e))}") from e
        return ApiClient(configuration=cfg)
    if kubeconfig is not None:
        raise ClusterUnreachable(f"kubeconfig {kubeconfig}: no such file")
    searched = " or ".join(repr(p) for p in candidates if p)
    if context is not None:
        raise ClusterUnreachable(f"context {context!r} requested but no kubeconfig found ({searched})")
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)
    except Exception as e:
        raise NoClusterConfig(
            f"no kubeconfig found ({searched}) and no in-cluster config: {_one_line(str(e))}"
        ) from e
    return ApiClient(configuration=cfg)


# -- requests --------------------------------------------------------------------------------------


class _HttpStatusError(Exception):
    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(status, reason, message)
        self.status = status
        self.reason = reason
        self.message = message

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


def _status_message(body: Any) -> str:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str) or not body:
        return ""
    try:
        doc = json.loads(body)
    except ValueError:
        return _one_line(body)[:200]
    return _one_line(str(doc.get("message") or "")) if isinstance(doc, dict) else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())


def unreachable(api: ApiClient, what: str, error: BaseException) -> ClusterUnreachable:
    """The one-line :class:`ClusterUnreachable` for a request ``what`` (e.g. ``"list pods"``)
    that could not reach the API server of ``api``: it names the server's URL and the cause
    (refused, DNS, TLS, timeout), e.g. ``cannot reach API server https://10.0.0.1:443 (list
    pods): connection refused``."""
    host = getattr(api.configuration, "host", "?")
    reason = getattr(error, "reason", None) or error
    return ClusterUnreachable(f"cannot reach API server {host} ({what}): {_one_line(str(reason))}")


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
        raise _HttpStatusError(int(e.status), str(e.reason or ""), _status_message(e.body)) from e
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


def _each_call(
    api: ApiClient, page_size: int, timeout_seconds: float, decode: Callable[[ApiCall, bytes], DecodedList]
) -> Iterator[list[Any]]:
    """The items of every kind in :data:`READ_CALLS`, a list per kind, skipping refused optional
    kinds."""
    if page_size < 1:
        raise ValueError(f"page_size must be >= 1, got {page_size}")
    if timeout_seconds <= 0:
        raise ValueError(f"timeout_seconds must be > 0, got {timeout_seconds}")
    for call in READ_CALLS:
        if call.verb != "list":
            continue
        try:
            yield list_pages(api, call, page_size, timeout_seconds, decode)[0]
        except _HttpStatusError as e:
            if call.optional and e.status in (403, 404):
                logger.warning("skipping %s: %s", call.display, e.describe(call))
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

    Raises:
        ClusterUnreachable, LiveSourceError, ValueError: as :func:`fetch_objects`.
        SnapshotError: an object the API returned is malformed (names the resource and object).
    """
    records = RecordSet()
    with no_cycle_collector():  # and the snapshot built inside: its records go to the oldest generation
        for recs in _each_call(api, page_size, timeout_seconds, _record_page):
            for rec in recs:
                records.add(rec)
        return records.snapshot(now, workload_kinds=LISTED_WORKLOAD_KINDS)
