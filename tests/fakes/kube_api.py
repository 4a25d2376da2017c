"""A loopback fake of the Kubernetes API server, for tests that must speak real HTTP.

:class:`FakeKubeAPI` serves, from an in-memory store, the endpoints the scaler uses, the way the
real API server answers them, so that the official ``kubernetes`` client can drive it:

Reads
    * Cluster-wide and namespaced LIST: ``{"kind": "<Kind>List", "apiVersion": ...,
      "metadata": {"resourceVersion"}, "items": [...]}`` with items **without**
      ``kind``/``apiVersion`` (as built-in types are served), sorted by namespace then name (etcd
      key order). ``limit``/``continue`` pagination with an opaque continue token bound to the
      store's resourceVersion: once the store changes, an old token gets ``410 Expired``, like a
      compacted etcd revision.
    * Single-object GET (``kind``/``apiVersion`` set).
    * WATCH (``?watch=true``): a chunked stream of newline-delimited JSON events ``{"type":
      "ADDED"|"MODIFIED"|"DELETED"|"BOOKMARK"|"ERROR", "object": {...}}``. Events after
      ``resourceVersion=N`` are replayed first (no ``resourceVersion``, or ``0``: synthetic
      ``ADDED`` events for every current object). ``N`` older than the bounded event history
      (:attr:`FakeKubeAPI.history_size` events) answers, like the real server, ``200`` with one
      ``ERROR`` event whose object is a ``410 Expired`` ``Status`` (or HTTP ``410`` when
      :attr:`FakeKubeAPI.watch_gone_as_http` is set). With ``allowWatchBookmarks=true`` a
      ``BOOKMARK`` carrying the current resourceVersion is sent every
      :attr:`FakeKubeAPI.bookmark_interval` seconds of idleness. ``timeoutSeconds`` ends the
      stream cleanly.
    * LIST and WATCH honour ``labelSelector`` and ``fieldSelector`` (any dotted field path, ``=``,
      ``==``, ``!=``). A watch only sees events whose object matches: an object that stops
      matching is not turned into a ``DELETED`` event as the real server does.

Writes (every create/update/delete bumps the global resourceVersion, stamps
``metadata.resourceVersion`` and is recorded as a watch event; objects seeded with
:meth:`FakeKubeAPI.load_objects` are stored unstamped unless asked, so LIST serves them verbatim,
but their watch events carry their resourceVersion)
    * ``POST`` on a collection (create; ``409 AlreadyExists``; ``generateName`` honoured),
      ``PUT`` on an object (replace; ``409 Conflict`` when the body's
      ``metadata.resourceVersion`` is set and stale), ``DELETE`` on an object (immediate; deletes
      nothing else, e.g. a node's pods stay; ``preconditions`` honoured).
    * ``PATCH`` with ``application/merge-patch+json`` (RFC 7386),
      ``application/strategic-merge-patch+json`` (treated as a merge patch: **lists are replaced
      wholesale**, which is what the real server does for ``spec.taints``; ``$patch``-style
      directives answer 400) and ``application/json-patch+json`` (RFC 6902, all six ops; a
      failed ``test`` or a bad path answers ``422``). A patched ``metadata.resourceVersion``
      different from the current one answers ``409 Conflict`` (optimistic concurrency).
    * ``POST /api/v1/namespaces/{ns}/pods/{name}/eviction`` (policy/v1 ``Eviction``): see
      :meth:`FakeKubeAPI._handle_eviction`: PDBs honoured (``429``), the pod marked terminating
      and deleted after its grace period times :attr:`FakeKubeAPI.grace_scale`.
    * ``GET``/``PATCH``/``PUT /api/v1/namespaces/{ns}/pods/{name}/resize`` (in-place resize,
      KEP-1287): only the CPU and memory requests and limits (and ``resizePolicy``) of the
      containers and sidecars change, validated as the API server validates a resize
      (:func:`_resized_pod`); a strategic merge patch merges ``containers`` by name. The kubelet's
      part (``allocatedResources``, ``resources``, the ``PodResize*`` conditions) is the test's:
      ``.../pods/{name}/status`` replaces or patches the pod's ``status`` only.
    * ``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: answered by
      :attr:`FakeKubeAPI.authorizer` (everything allowed by default).
    * ``dryRun=All`` is honoured by every write (validated, nothing stored).
    * The metrics API (``metrics.k8s.io``) is read-only (``405``).

Kinds are the :data:`RESOURCES` table (including ``Lease``, ``ConfigMap`` and both ``Event``
APIs). Unknown paths get a ``404`` JSON ``Status``; a bearer token is required (``401``).

Every request is recorded in :attr:`FakeKubeAPI.requests`; :meth:`FakeKubeAPI.fail` and
:meth:`FakeKubeAPI.delay` inject HTTP errors (with headers: a 429's ``Retry-After``), bodies and latency by path prefix (optionally exact
path, method, predicate, and "after the write took effect"); :meth:`FakeKubeAPI.drop_watches`
and :meth:`FakeKubeAPI.expire_history` break watches.

Routing is a table of ``(method, regex, handler)`` in :attr:`FakeKubeAPI.routes`, so new
endpoints are rows, not HTTP plumbing.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import queue
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any

import yaml

from fakes.loopback import AbortStream, FaultRule, LoopbackServer, Response
from fakes.loopback import RecordedRequest as _RecordedRequest

__all__ = [
    "EVICTION_PATH",
    "OBJECT_PATH",
    "RESOURCES",
    "FakeKubeAPI",
    "RecordedRequest",
    "Resource",
    "Response",
    "status_body",
]

DEFAULT_TOKEN = "fake-token"

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind the fake serves: where it lives and how its List is named.

    ``writable=False`` kinds (the metrics API) answer ``405`` to POST/PUT/PATCH/DELETE.
    """

    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool
    writable: bool = True

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, else ``group/version``."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def prefix(self) -> str:
        """``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def path(self) -> str:
        """The cluster-wide collection path, the store key (``/api/v1/pods``)."""
        return f"{self.prefix}/{self.plural}"

    @property
    def list_kind(self) -> str:
        """The kind of the List document (``PodList``, ``NodeMetricsList``)."""
        return f"{self.kind}List"


RESOURCES: tuple[Resource, ...] = (
    Resource("Node", "", "v1", "nodes", False),
    Resource("Pod", "", "v1", "pods", True),
    Resource("Namespace", "", "v1", "namespaces", False),
    Resource("Event", "", "v1", "events", True),
    Resource("ConfigMap", "", "v1", "configmaps", True),
    Resource("ReplicationController", "", "v1", "replicationcontrollers", True),
    Resource("PersistentVolume", "", "v1", "persistentvolumes", False),
    Resource("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True),
    Resource("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True),
    Resource("ReplicaSet", "apps", "v1", "replicasets", True),
    Resource("StatefulSet", "apps", "v1", "statefulsets", True),
    Resource("DaemonSet", "apps", "v1", "daemonsets", True),
    Resource("Deployment", "apps", "v1", "deployments", True),
    Resource("Job", "batch", "v1", "jobs", True),
    Resource("CronJob", "batch", "v1", "cronjobs", True),
    Resource("Lease", "coordination.k8s.io", "v1", "leases", True),
    Resource("Event", "events.k8s.io", "v1", "events", True),
    # Dynamic Resource Allocation, resource.k8s.io/v1 (k8s.io/api/resource/v1/register.go):
    # ResourceSlices and DeviceClasses are cluster-scoped, claims and templates namespaced.
    Resource("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False),
    Resource("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True),
    Resource("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True),
    Resource("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False),
    Resource("NodeMetrics", "metrics.k8s.io", "v1beta1", "nodes", False, writable=False),
    Resource("PodMetrics", "metrics.k8s.io", "v1beta1", "pods", True, writable=False),
)
_BY_KIND: dict[str, Resource] = {}
for _r in RESOURCES:
    _BY_KIND.setdefault(_r.kind, _r)  # "Event" is the core v1 Event; see _resource_of
_BY_TYPE = {(r.api_version, r.kind): r for r in RESOURCES}
_BY_PATH = {r.path: r for r in RESOURCES}
_POD = _BY_KIND["Pod"]
_PDB = _BY_KIND["PodDisruptionBudget"]

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

# /api/v1[/namespaces/<ns>]/<plural>[/<name>] or /apis/<group>/<version>[/namespaces/<ns>]/<plural>[/<name>]
OBJECT_PATH = re.compile(
    r"^(?P<prefix>/api/v1|/apis/[^/]+/[^/]+)(?:/namespaces/(?P<namespace>[^/]+))?"
    r"/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?$"
)
EVICTION_PATH = re.compile(r"^/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<name>[^/]+)/eviction$")
POD_SUBRESOURCE_PATH = re.compile(
    r"^/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<name>[^/]+)/(?P<sub>resize|status)$"
)
DISCOVERY_PATH = re.compile(r"^/apis(?:/(?P<group>[^/]+)(?:/(?P<version>[^/]+))?)?/?$")
DRA_GROUP = "resource.k8s.io"
ACCESS_REVIEW_PATH = re.compile(r"^/apis/authorization\.k8s\.io/v1/selfsubjectaccessreviews$")


@dataclass(frozen=True, slots=True)
class RecordedRequest(_RecordedRequest):
    """One request the fake received. ``query`` keeps the last value of each parameter."""

    @property
    def watch(self) -> bool:
        """Whether this is a WATCH (``?watch=true``)."""
        return self.query.get("watch", "").lower() in ("true", "1")

    @property
    def content_type(self) -> str:
        """The media type of the body, without parameters (``application/merge-patch+json``)."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    def json(self) -> Any:
        """The body parsed as JSON (``None`` when empty).

        Raises:
            ValueError: the body is not JSON.
        """
        return json.loads(self.body) if self.body else None


def _matcher(
    path_prefix: str,
    match: Callable[[RecordedRequest], bool] | None,
    method: str | None,
    exact: bool,
) -> Callable[[RecordedRequest], bool]:
    """The predicate of a :meth:`FakeKubeAPI.fail` or :meth:`FakeKubeAPI.delay` rule."""

    def applies(req: RecordedRequest) -> bool:
        if method is not None and req.method != method.upper():
            return False
        if (req.path != path_prefix) if exact else not req.path.startswith(path_prefix):
            return False
        return match is None or match(req)

    return applies


@dataclass(frozen=True, slots=True)
class _Selector:
    """``labelSelector`` and ``fieldSelector`` of a LIST or WATCH.

    Labels: ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``. Fields:
    ``a.b=v``, ``a.b==v``, ``a.b!=v`` on any dotted path (a missing field is ``""``); the real
    server allows only a few fields per kind (pods: ``spec.nodeName``, ``status.phase``, ...).
    """

    labels: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (key, op, values)
    fields: tuple[tuple[tuple[str, ...], bool, str], ...] = ()  # (path, equal, value)

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> _Selector:
        """Parse the query's selectors.

        Raises:
            _ApiError: 400 on a malformed selector.
        """
        labels = []
        for term in _split_terms(query.get("labelSelector", "")):
            m = re.fullmatch(r"\s*(\S+?)\s+(in|notin)\s+\(([^)]*)\)\s*", term)
            if m:
                values = tuple(v.strip() for v in m[3].split(",") if v.strip())
                labels.append((m[1], m[2], values))
                continue
            m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*([^=!\s]*)\s*", term)
            if m:
                labels.append((m[1], "!=" if m[2] == "!=" else "=", (m[3],)))
            elif re.fullmatch(r"\s*!?[^=!\s()]+\s*", term):
                key = term.strip()
                labels.append((key.lstrip("!"), "!exists" if key.startswith("!") else "exists", ()))
            else:
                raise _ApiError(400, f"unable to parse requirement: {term!r}")
        fields = []
        for term in _split_terms(query.get("fieldSelector", "")):
            m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*([^=!]*?)\s*", term)
            if not m:
                raise _ApiError(400, f"invalid field selector: {term!r}")
            fields.append((tuple(m[1].split(".")), m[2] != "!=", m[3]))
        return cls(tuple(labels), tuple(fields))

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` satisfies every requirement."""
        have = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, values in self.labels:
            ok = {
                "=": have.get(key) == values[0] if values else False,
                "!=": have.get(key) != values[0] if values else True,
                "in": key in have and have[key] in values,
                "notin": key not in have or have[key] not in values,
                "exists": key in have,
                "!exists": key not in have,
            }[op]
            if not ok:
                return False
        for path, equal, value in self.fields:
            field_value: Any = obj
            for part in path:
                field_value = field_value.get(part) if isinstance(field_value, dict) else None
            text = (
                ""
                if field_value is None
                else str(field_value).lower()
                if isinstance(field_value, bool)
                else str(field_value)
            )
            if (text == value) != equal:
                return False
        return True


def _split_terms(selector: str) -> list[str]:
    """Split a selector on the commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for ch in selector:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += ch
    terms.append(current)
    return [t for t in terms if t.strip()]


@dataclass(frozen=True, slots=True)
class _Event:
    rv: int
    path: str  # the Resource's collection path
    namespace: str
    line: bytes  # the encoded watch event, newline-terminated
    obj: Mapping[str, Any]  # the event's object (for selectors)


# Sentinels a watcher's queue may carry besides encoded events.
_END = "end"  # end the stream cleanly
_ABORT = "abort"  # cut the connection
_GONE = "gone"  # send a 410 ERROR event, then end


@dataclass(eq=False, slots=True)
class _Watcher:
    path: str
    namespace: str | None
    selector: _Selector = field(default_factory=_Selector)
    queue: queue.SimpleQueue[bytes | str] = field(default_factory=queue.SimpleQueue)

    def wants(self, ev: _Event) -> bool:
        return (
            ev.path == self.path
            and (self.namespace is None or ev.namespace == self.namespace)
            and self.selector.matches(ev.obj)
        )


class _ApiError(Exception):
    """A handler's early exit with an error Response."""

    def __init__(self, code: int, message: str, **extra: Any) -> None:
        super().__init__(code, message)
        body = status_body(code, message)
        body.update(extra)
        self.response = Response(code, body)


Handler = Callable[[RecordedRequest, "re.Match[str]"], Response]


def _phrase(code: int) -> str:
    try:
        return HTTPStatus(code).phrase
    except ValueError:
        return ""


def status_body(code: int, message: str) -> dict[str, Any]:
    """A ``meta/v1 Status`` failure document as the API server returns it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": _REASONS.get(code, _phrase(code).replace(" ", "")),
        "details": {},
        "code": code,
    }


def _success(code: int, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _copy(doc: Any) -> Any:
    """A deep copy of a JSON document (faster than :func:`copy.deepcopy`)."""
    if isinstance(doc, dict):
        return {k: _copy(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_copy(v) for v in doc]
    return doc


class FakeKubeAPI(LoopbackServer[RecordedRequest]):
    """An in-memory Kubernetes API server on ``127.0.0.1:<free port>`` in a daemon thread.

    Use as a context manager (or call :meth:`start`/:meth:`close`). ``token`` is the bearer token
    requests must carry (``None`` disables the check); :meth:`write_kubeconfig` writes it.
    ``routes`` is the dispatch table, tried in order: ``(method, path regex, handler)``.

    Args:
        token: the bearer token to require.
        stamp_loaded: whether :meth:`load_objects` writes ``metadata.resourceVersion`` into the
            objects it stores by default (off, so that LIST returns seeded objects verbatim;
            watch events always carry their resourceVersion).
        history_size: how many events the watch history keeps.
        bookmark_interval: seconds of idleness between BOOKMARK events on watches that allow them.

    Tunables (plain attributes, change them any time):
        grace_scale: multiplies every pod deletion grace period (``0``: evicted pods are deleted
            before the eviction call returns).
        replace_evicted_pods: when a pod that an eviction took budget for is deleted and is owned
            by a ReplicaSet, give the budget back (``disruptionsAllowed += 1`` on the PDBs the
            eviction decremented), as if the ReplicaSet's replacement pod had become healthy. No
            replacement pod is created.
        multi_pdb_error: answer ``500`` to the eviction of a pod matched by more than one PDB, as
            the real server does (default off: every matching PDB is checked and decremented).
        watch_gone_as_http: answer a too-old watch with HTTP ``410`` instead of ``200`` and an
            ``ERROR`` event.
        default_watch_timeout: seconds a watch without ``timeoutSeconds`` stays open.
        clock: the wall clock used for timestamps (``time.time``).
        serve_dra: serve ``resource.k8s.io/v1`` (Dynamic Resource Allocation; on by default, as
            Kubernetes 1.34+ does); off, its paths answer ``404`` as on an older cluster.
        authorizer: answers ``SelfSubjectAccessReview`` s: called with the review's
            ``spec.resourceAttributes`` (group, resource, subresource, verb, namespace, name),
            returns whether the caller may; ``None`` allows everything. Only the reviews consult
            it (other requests are not authorized).
    """

    thread_name = "fake-kube-api"

    def __init__(
        self,
        token: str | None = DEFAULT_TOKEN,
        *,
        stamp_loaded: bool = False,
        history_size: int = 1000,
        bookmark_interval: float = 1.0,
    ) -> None:
        super().__init__(RecordedRequest)
        self.token = token
        self.stamp_loaded = stamp_loaded
        self.history_size = history_size
        self.bookmark_interval = bookmark_interval
        self.grace_scale = 1.0
        self.replace_evicted_pods = False
        self.multi_pdb_error = False
        self.watch_gone_as_http = False
        self.default_watch_timeout = 1800.0
        self.clock: Callable[[], float] = time.time
        self.authorizer: Callable[[Mapping[str, str]], bool] | None = None
        self.serve_dra = True
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("POST", ACCESS_REVIEW_PATH, self._handle_access_review),
            ("GET", DISCOVERY_PATH, self._handle_discovery),
            ("GET", OBJECT_PATH, self._handle_get),
            ("POST", EVICTION_PATH, self._handle_eviction),
            ("GET", POD_SUBRESOURCE_PATH, self._handle_pod_subresource_get),
            ("PATCH", POD_SUBRESOURCE_PATH, self._handle_pod_subresource_write),
            ("PUT", POD_SUBRESOURCE_PATH, self._handle_pod_subresource_write),
            ("POST", OBJECT_PATH, self._handle_create),
            ("PUT", OBJECT_PATH, self._handle_replace),
            ("PATCH", OBJECT_PATH, self._handle_patch),
            ("DELETE", OBJECT_PATH, self._handle_delete),
        ]
        self._store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._rv = 1
        self._history: deque[_Event] = deque()
        self._compacted = 0  # a watch from N < this is too old (410)
        self._watchers: list[_Watcher] = []
        self._evicted: dict[tuple[str, str, str], list[tuple[str, str]]] = {}  # pod -> PDBs charged
        self._timers: list[threading.Timer] = []
        self._event_seq: dict[tuple[str, str, str], int] = {}
        self._seq = itertools.count()

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        """End open watches, cancel pending pod deletions, stop serving and release the port
        (idempotent)."""
        with self._lock:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()
            self._end_watches(_END)
        super().close()

    def write_kubeconfig(self, path: str | Path, context: str = "fake") -> Path:
        """Write a kubeconfig (YAML) whose current context ``context`` points at :attr:`url`
        with a bearer-token user. Returns the path."""
        out = Path(path)
        user: dict[str, str] = {"token": self.token} if self.token else {}
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "preferences": {},
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return out

    # -- store -----------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The current global resourceVersion (what a LIST would answer now)."""
        with self._lock:
            return self._rv

    def load_objects(self, objects: Iterable[Mapping[str, Any]], *, stamp: bool | None = None) -> None:
        """Add or replace objects (by kind, namespace, name). Each one is a write: it bumps the
        resourceVersion and is an ``ADDED``/``MODIFIED`` watch event.

        Args:
            objects: objects with ``kind`` (and ``apiVersion`` where the kind is ambiguous,
                ``events.k8s.io/v1`` Events).
            stamp: write ``metadata.resourceVersion`` into the stored objects (default
                :attr:`stamp_loaded`); unstamped objects are served as given.

        Raises:
            ValueError: an object has no ``kind`` the fake serves, or no ``metadata.name``.
        """
        do_stamp = self.stamp_loaded if stamp is None else stamp
        with self._lock:
            for obj in objects:
                res = _resource_of(obj)
                meta = obj.get("metadata") or {}
                name = meta.get("name")
                if not name:
                    raise ValueError(f"{res.kind} without metadata.name")
                ns = str(meta.get("namespace") or "") if res.namespaced else ""
                self._commit(res, ns, str(name), _copy(dict(obj)), stamp=do_stamp)

    def put_object(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace one object, stamped with a new resourceVersion; returns a copy of
        what is stored (as the API would serve it, ``kind``/``apiVersion`` set).

        Raises:
            ValueError: as :meth:`load_objects`.
        """
        res = _resource_of(obj)
        self.load_objects([obj], stamp=True)
        meta = obj.get("metadata") or {}
        found = self.get_object(
            res.kind, str(meta["name"]), str(meta.get("namespace") or ""), res.api_version
        )
        assert found is not None
        return found

    def get_object(
        self, kind: str, name: str, namespace: str | None = "", api_version: str | None = None
    ) -> dict[str, Any] | None:
        """A copy of one stored object with ``kind``/``apiVersion`` set, or ``None``."""
        res = _BY_TYPE[(api_version, kind)] if api_version else _BY_KIND[kind]
        with self._lock:
            obj = self._store.get(res.path, {}).get(((namespace or "") if res.namespaced else "", name))
            return None if obj is None else _typed(res, obj)

    def delete_object(
        self, kind: str, name: str, namespace: str | None = "", api_version: str | None = None
    ) -> bool:
        """Delete one object now (a ``DELETED`` watch event); returns whether it existed."""
        res = _BY_TYPE[(api_version, kind)] if api_version else _BY_KIND[kind]
        with self._lock:
            key = ((namespace or "") if res.namespaced else "", name)
            if key not in self._store.get(res.path, {}):
                return False
            self._delete_locked(res, *key)
            return True

    def clear(self) -> None:
        """Remove every object, like a fresh etcd: bumps the resourceVersion, forgets the watch
        history and ends open watches (their next watch gets 410 and must relist)."""
        with self._lock:
            self._store.clear()
            self._evicted.clear()
            self._rv += 1
            self._history.clear()
            self._compacted = self._rv
            self._end_watches(_END)

    def objects(self, kind: str, api_version: str | None = None) -> list[dict[str, Any]]:
        """Copies of the stored objects of ``kind`` in key order (as stored: objects loaded with
        :meth:`load_objects` keep their own ``kind``/``apiVersion``)."""
        res = _BY_TYPE[(api_version, kind)] if api_version else _BY_KIND[kind]
        with self._lock:
            return [_copy(v) for _, v in sorted(self._store.get(res.path, {}).items())]

    def events(self) -> list[dict[str, Any]]:
        """Every stored Event, core ``v1`` and ``events.k8s.io/v1`` alike, in creation order,
        with ``kind``/``apiVersion`` set."""
        with self._lock:
            found = [
                (self._event_seq.get((res.path, *key), -1), _typed(res, obj))
                for res in RESOURCES
                if res.kind == "Event"
                for key, obj in self._store.get(res.path, {}).items()
            ]
        return [obj for _, obj in sorted(found, key=lambda p: p[0])]

    # -- watches ---------------------------------------------------------------------------------

    def open_watches(self, path: str | None = None) -> int:
        """How many watch streams are open (on collection ``path`` if given, e.g.
        ``/api/v1/pods``)."""
        with self._lock:
            return sum(1 for w in self._watchers if path is None or w.path == path)

    def drop_watches(self, *, abrupt: bool = False) -> int:
        """End every open watch stream now; returns how many.

        Args:
            abrupt: cut the TCP connection mid-stream (the client sees a protocol error) instead
                of ending the chunked response cleanly (as the server does on ``timeoutSeconds``).
        """
        with self._lock:
            return self._end_watches(_ABORT if abrupt else _END)

    def expire_history(self, *, notify: bool = False) -> None:
        """Compact the watch history: bump the resourceVersion, forget every event, and end
        open watches, so that every watcher's next WATCH from the resourceVersion it had seen
        gets ``410`` and must relist (a LIST now answers a resourceVersion that can be watched).

        Args:
            notify: end open watches with an ``ERROR`` 410 event instead of a clean end.
        """
        with self._lock:
            self._rv += 1
            self._history.clear()
            self._compacted = self._rv
            self._end_watches(_GONE if notify else _END)

    def _end_watches(self, how: str) -> int:
        watchers, self._watchers = self._watchers, []
        for w in watchers:
            w.queue.put(how)
        return len(watchers)

    # -- fault injection -------------------------------------------------------------------------

    def fail(
        self,
        path_prefix: str,
        status: int,
        times: int | None = None,
        *,
        body: bytes | None = None,
        match: Callable[[RecordedRequest], bool] | None = None,
        method: str | None = None,
        exact: bool = False,
        after: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Answer requests whose path starts with ``path_prefix`` with HTTP ``status``.

        Args:
            path_prefix: e.g. ``/apis/metrics.k8s.io`` or ``/api/v1/pods``.
            status: the HTTP status code; the body is a JSON ``Status`` unless ``body`` is given.
            times: how many requests to fail (``None``: all of them, until :meth:`reset_faults`).
            body: raw response bytes instead of a ``Status`` (e.g. malformed JSON with 200).
            match: an extra predicate on the request (e.g. only requests with ``continue``, or
                ``lambda r: r.watch``).
            method: only requests with this HTTP method (``"POST"``).
            exact: the path must equal ``path_prefix`` (one object, not its siblings).
            after: the request takes effect first and only its answer is replaced (a server
                that fails after committing), to test idempotent retries.
            headers: extra response headers (``{"Retry-After": "2"}``, as API Priority and
                Fairness sends with its 429s).
        """
        self._add_rule(
            FaultRule(
                _matcher(path_prefix, match, method, exact), status, times, body=body, after=after,
                headers=dict(headers or {}),
            )
        )  # fmt: skip

    def delay(
        self,
        path_prefix: str,
        seconds: float,
        times: int | None = None,
        *,
        method: str | None = None,
        exact: bool = False,
        match: Callable[[RecordedRequest], bool] | None = None,
    ) -> None:
        """Sleep ``seconds`` before answering requests whose path starts with ``path_prefix``
        (same filters as :meth:`fail`). Delays of several matching rules add up."""
        self._add_rule(FaultRule(_matcher(path_prefix, match, method, exact), None, times, delay=seconds))

    def requests_to(self, path: str, method: str = "GET") -> list[RecordedRequest]:
        """Recorded requests with exactly this path and method, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path and r.method == method]

    # -- dispatch --------------------------------------------------------------------------------

    def _route(self, req: RecordedRequest) -> Response:
        if self.token is not None and req.headers.get("authorization") != f"Bearer {self.token}":
            return Response(401, status_body(401, "Unauthorized"))
        for method, pattern, handler in self.routes:
            m = pattern.match(req.path)
            if m is not None and method == req.method:
                try:
                    return handler(req, m)
                except _ApiError as e:
                    return e.response
        if any(pattern.match(req.path) for _, pattern, _ in self.routes):
            return Response(405, status_body(405, f"the server does not allow this method on {req.path}"))
        return _not_found()

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return status_body(status, message)

    # -- mutations (call with the lock held) -----------------------------------------------------

    def _commit(
        self, res: Resource, ns: str, name: str, obj: dict[str, Any], *, stamp: bool = True
    ) -> dict[str, Any]:
        """Store ``obj`` (owned by the store from now on), bump the resourceVersion, record and
        broadcast the event. Returns the stored object."""
        self._rv += 1
        store = self._store.setdefault(res.path, {})
        kind = "MODIFIED" if (ns, name) in store else "ADDED"
        meta = obj.setdefault("metadata", {})
        if stamp:
            meta["resourceVersion"] = str(self._rv)
        store[(ns, name)] = obj
        if res.kind == "Event" and kind == "ADDED":
            self._event_seq[(res.path, ns, name)] = next(self._seq)
        self._emit(res, ns, kind, obj)
        return obj

    def _delete_locked(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self._store[res.path].pop((ns, name))
        self._rv += 1
        self._event_seq.pop((res.path, ns, name), None)
        self._emit(res, ns, "DELETED", obj)
        if res is _POD:
            self._pod_gone(ns, name, obj)
        return obj

    def _emit(self, res: Resource, ns: str, kind: str, obj: Mapping[str, Any]) -> None:
        # A shallow view is enough: it is serialized right away. Events always carry their rv.
        meta = {**(obj.get("metadata") or {}), "resourceVersion": str(self._rv)}
        doc = {"apiVersion": res.api_version, "kind": res.kind, **_strip_type(obj), "metadata": meta}
        line = json.dumps({"type": kind, "object": doc}).encode() + b"\n"
        ev = _Event(self._rv, res.path, ns, line, doc)
        if len(self._history) >= max(1, self.history_size):
            self._compacted = self._history.popleft().rv
        self._history.append(ev)
        for w in self._watchers:
            if w.wants(ev):
                w.queue.put(line)

    def _current(self, res: Resource, ns: str, name: str) -> dict[str, Any]:
        obj = self._store.get(res.path, {}).get((ns, name))
        if obj is None:
            raise _ApiError(404, f'{_group_resource(res)} "{name}" not found', details=_details(res, name))
        return obj

    # -- reads -----------------------------------------------------------------------------------

    def _served(self, res: Resource | None) -> Resource | None:
        return None if res is not None and res.group == DRA_GROUP and not self.serve_dra else res

    def _handle_discovery(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        """``GET /apis`` (an ``APIGroupList``) and ``GET /apis/<group>/<version>`` (an
        ``APIResourceList``), as the real server's aggregated-less discovery answers, for the
        groups of :data:`RESOURCES` (``resource.k8s.io`` only while :attr:`serve_dra`)."""
        served = [r for r in RESOURCES if r.group and self._served(r) is not None]
        group, version = m["group"], m["version"]
        if group is None:
            groups: dict[str, list[str]] = {}
            for r in served:
                if r.version not in groups.setdefault(r.group, []):
                    groups[r.group].append(r.version)
            return Response(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                 "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]}}
                for g, vs in groups.items()
            ]})  # fmt: skip
        mine = [r for r in served if r.group == group and (version is None or r.version == version)]
        if not mine or version is None:
            return _not_found()
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        return Response(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}",
            "resources": [
                {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced, "kind": r.kind,
                 "verbs": verbs if r.writable else ["get", "list"]}
                for r in mine
            ]})  # fmt: skip

    def _handle_get(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        res = self._served(_BY_PATH.get(f"{m['prefix']}/{m['plural']}"))
        ns, name = m["namespace"], m["name"]
        if res is None or (ns is not None and not res.namespaced):
            return _not_found()
        if name is not None:
            with self._lock:
                obj = self._store.get(res.path, {}).get((ns or "", name))
            if obj is None or (ns is None and res.namespaced):
                return Response(404, status_body(404, f'{res.plural} "{name}" not found'))
            return Response(200, _typed(res, obj))
        if req.watch:
            return self._watch(res, ns, req.query)
        return self._list(res, ns, req.query)

    def _list(self, res: Resource, namespace: str | None, query: Mapping[str, str]) -> Response:
        try:
            limit = int(query["limit"]) if query.get("limit") else 0
        except ValueError:
            return Response(400, status_body(400, f"invalid limit {query['limit']!r}"))
        with self._lock:
            rv = self._rv
            keys = sorted(self._store.get(res.path, {}))
            if namespace is not None:
                keys = [k for k in keys if k[0] == namespace]
            selector = _Selector.parse(query)
            if selector.labels or selector.fields:
                everything = self._store.get(res.path, {})
                keys = [k for k in keys if selector.matches(everything[k])]
            after: tuple[str, str] | None = None
            if query.get("continue"):
                token = _decode_token(query["continue"])
                if token is None:
                    return Response(400, status_body(400, "continue key is not valid"))
                if token[0] != rv:
                    return Response(
                        410,
                        status_body(
                            410,
                            "The provided continue parameter is too old to display a consistent list "
                            "result. You can start a new list without the continue parameter.",
                        ),
                    )
                after = token[1]
            if after is not None:
                keys = [k for k in keys if k > after]
            page = keys[:limit] if limit > 0 else keys
            store = self._store.get(res.path, {})
            items = [_strip_type(store[k]) for k in page]
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if limit > 0 and len(keys) > len(page):
            meta["continue"] = _encode_token(rv, page[-1])
            meta["remainingItemCount"] = len(keys) - len(page)
        return Response(
            200, {"kind": res.list_kind, "apiVersion": res.api_version, "metadata": meta, "items": items}
        )

    def _watch(self, res: Resource, namespace: str | None, query: Mapping[str, str]) -> Response:
        raw_rv = query.get("resourceVersion", "")
        try:
            since = int(raw_rv) if raw_rv not in ("", "0") else None
            timeout = (
                float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else self.default_watch_timeout
            )
        except ValueError:
            return Response(400, status_body(400, "invalid resourceVersion or timeoutSeconds"))
        bookmarks = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        selector = _Selector.parse(query)
        with self._lock:
            if since is not None and since < self._compacted and self.watch_gone_as_http:
                return Response(
                    410, status_body(410, f"too old resource version: {since} ({self._compacted})")
                )
        return Response(200, None, stream=self._stream(res, namespace, selector, since, timeout, bookmarks))

    def _subscribe(
        self, res: Resource, namespace: str | None, selector: _Selector, since: int | None
    ) -> _Watcher:
        """Register a watcher whose queue starts with the events it must replay (or a 410)."""
        watcher = _Watcher(res.path, namespace, selector)
        with self._lock:
            if since is not None and since < self._compacted:
                gone = status_body(410, f"too old resource version: {since} ({self._compacted})")
                watcher.queue.put(json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n")
                watcher.queue.put(_END)
                return watcher
            if since is None:  # "any"/"most recent": synthetic ADDED events for the current state
                store = self._store.get(res.path, {})
                for key in sorted(store):
                    if (namespace is None or key[0] == namespace) and selector.matches(store[key]):
                        doc = _typed(res, store[key])
                        doc["metadata"].setdefault("resourceVersion", str(self._rv))
                        watcher.queue.put(json.dumps({"type": "ADDED", "object": doc}).encode() + b"\n")
            else:
                for ev in self._history:
                    if ev.rv > since and watcher.wants(ev):
                        watcher.queue.put(ev.line)
            self._watchers.append(watcher)
        return watcher

    def _stream(
        self,
        res: Resource,
        namespace: str | None,
        selector: _Selector,
        since: int | None,
        timeout: float,
        bookmarks: bool,
    ) -> Generator[bytes | None, None, None]:
        # Subscribing when the stream starts (not when the route answers) leaves nothing
        # registered for a response that is never sent.
        watcher = self._subscribe(res, namespace, selector, since)
        now = time.monotonic()
        deadline = now + timeout
        interval = max(self.bookmark_interval, 0.01)
        next_bookmark = now + interval
        try:
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return
                until = min(deadline, next_bookmark) if bookmarks else deadline
                try:
                    item = watcher.queue.get(timeout=max(0.0, min(until - now, 0.25)))
                except queue.Empty:
                    now = time.monotonic()
                    if bookmarks and now >= next_bookmark:
                        next_bookmark = now + interval
                        with self._lock:  # events are queued under the lock: none is in flight
                            if watcher.queue.empty():
                                mark = {
                                    "kind": res.kind,
                                    "apiVersion": res.api_version,
                                    "metadata": {"resourceVersion": str(self._rv)},
                                }
                                line = json.dumps({"type": "BOOKMARK", "object": mark}).encode() + b"\n"
                            else:
                                line = None
                        if line is not None:
                            yield line
                            continue
                    yield None  # idle tick: lets the server notice a client that hung up
                    continue
                if isinstance(item, bytes):
                    yield item
                elif item == _ABORT:
                    raise AbortStream()
                elif item == _GONE:
                    with self._lock:
                        gone = status_body(410, f"too old resource version ({self._compacted})")
                    yield json.dumps({"type": "ERROR", "object": gone}).encode() + b"\n"
                    return
                else:
                    return
        finally:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

    # -- writes ----------------------------------------------------------------------------------

    def _writable(self, m: re.Match[str], *, collection: bool) -> tuple[Resource, str, str | None]:
        res = _BY_PATH.get(f"{m['prefix']}/{m['plural']}")
        ns, name = m["namespace"], m["name"]
        if res is None or (ns is not None and not res.namespaced):
            raise _ApiError(404, "the server could not find the requested resource")
        if not res.writable or (res.namespaced and ns is None) or collection != (name is None):
            raise _ApiError(405, f"the server does not allow this method on {_group_resource(res)}")
        return res, ns or "", name

    def _handle_create(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        res, ns, _ = self._writable(m, collection=True)
        obj = _body_object(req, res)
        meta = obj.setdefault("metadata", {})
        if res.namespaced and meta.get("namespace") not in (None, "", ns):
            raise _ApiError(
                400, "the namespace of the provided object does not match the namespace sent on the request"
            )
        with self._lock:
            name = meta.get("name") or ""
            if not name and meta.get("generateName"):
                name = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
            if not name:
                raise _ApiError(
                    422,
                    f"{res.kind} is invalid: metadata.name: Required value: name or generateName is required",
                )
            if (ns, name) in self._store.get(res.path, {}):
                raise _ApiError(
                    409,
                    f'{_group_resource(res)} "{name}" already exists',
                    reason="AlreadyExists",
                    details=_details(res, name),
                )
            meta.update(name=name, uid=str(uuid.uuid4()), creationTimestamp=_rfc3339(self.clock()))
            if res.namespaced:
                meta["namespace"] = ns
            meta.pop("resourceVersion", None)
            obj.update(apiVersion=res.api_version, kind=res.kind)
            if _dry_run(req):
                return Response(201, obj)
            return Response(201, _typed(res, self._commit(res, ns, name, obj)))

    def _handle_replace(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        res, ns, name = self._writable(m, collection=False)
        assert name is not None
        obj = _body_object(req, res)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") != name:
            raise _ApiError(400, "the name of the object does not match the name on the URL")
        with self._lock:
            old = self._current(res, ns, name)
            _check_version(res, name, old, meta.get("resourceVersion"))
            old_meta = old.get("metadata") or {}
            for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if k in old_meta:
                    meta[k] = old_meta[k]
            if res.namespaced:
                meta["namespace"] = ns
            obj.update(apiVersion=res.api_version, kind=res.kind)
            if _dry_run(req):
                return Response(200, obj)
            return Response(200, _typed(res, self._commit(res, ns, name, obj)))

    def _handle_patch(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        res, ns, name = self._writable(m, collection=False)
        assert name is not None
        try:
            patch = req.json()
        except ValueError as e:
            raise _ApiError(400, f"invalid JSON in the patch: {e}") from None
        with self._lock:
            old = self._current(res, ns, name)
            patched = _apply_patch(req.content_type, _typed(res, old), patch)
            _check_version(res, name, old, (patched.get("metadata") or {}).get("resourceVersion"))
            meta = patched.setdefault("metadata", {})
            old_meta = old.get("metadata") or {}
            meta["name"] = name
            for k in ("uid", "creationTimestamp", "namespace"):
                if k in old_meta:
                    meta[k] = old_meta[k]
            patched.update(apiVersion=res.api_version, kind=res.kind)
            if _dry_run(req):
                return Response(200, patched)
            return Response(200, _typed(res, self._commit(res, ns, name, patched)))

    def _handle_delete(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        res, ns, name = self._writable(m, collection=False)
        assert name is not None
        try:
            options = req.json() or {}
        except ValueError:
            options = {}
        pre = options.get("preconditions") or {} if isinstance(options, dict) else {}
        with self._lock:
            old = self._current(res, ns, name)
            old_meta = old.get("metadata") or {}
            if pre.get("uid") and pre["uid"] != old_meta.get("uid"):
                raise _ApiError(
                    409,
                    f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {old_meta.get('uid')}",
                )
            _check_version(res, name, old, pre.get("resourceVersion"))
            details = _details(res, name, old_meta.get("uid"))
            if not _dry_run(req):
                self._delete_locked(res, ns, name)
        return Response(200, _success(200, details))

    # -- eviction --------------------------------------------------------------------------------

    def _handle_access_review(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        """``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: ``status.allowed``
        from :attr:`authorizer` (everything allowed without one); ``400`` without
        ``spec.resourceAttributes``."""
        try:
            body = req.json() or {}
        except ValueError as e:
            raise _ApiError(400, f"invalid JSON in the review: {e}") from None
        attributes = ((body.get("spec") or {}) if isinstance(body, dict) else {}).get("resourceAttributes")
        if not isinstance(attributes, dict):
            raise _ApiError(400, "spec.resourceAttributes is required")
        allowed = self.authorizer is None or self.authorizer(attributes)
        out = {
            **body,
            "status": {"allowed": allowed, **({} if allowed else {"reason": "denied by the fake"})},
        }
        return Response(201, out)

    def _handle_eviction(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        """``POST .../pods/{name}/eviction``: a policy/v1 ``Eviction``.

        * ``404`` when the pod does not exist; ``400`` when the body names another pod.
        * A pod already terminating, or ``Pending``/``Succeeded``/``Failed``, is evicted without
          looking at PDBs (as the real server does).
        * Otherwise the PDBs of the pod's namespace whose ``spec.selector`` matches the pod's
          labels (``matchLabels`` and ``matchExpressions``; an empty selector matches every pod)
          are checked: if any has ``status.disruptionsAllowed < 1`` the answer is ``429
          TooManyRequests`` with a ``DisruptionBudget`` cause, and nothing changes. (With
          :attr:`multi_pdb_error`, more than one matching PDB is a ``500``.)
        * Else each matching PDB gets ``disruptionsAllowed - 1`` and the pod in
          ``status.disruptedPods``; the pod gets ``metadata.deletionTimestamp`` and
          ``deletionGracePeriodSeconds`` and is deleted after ``deleteOptions.gracePeriodSeconds``
          (else ``spec.terminationGracePeriodSeconds``, else 30) times :attr:`grace_scale`
          seconds (right away when that is 0). The answer is ``201`` with a ``Success`` Status.
        """
        ns, name = m["namespace"], m["name"]
        try:
            body = req.json() or {}
        except ValueError as e:
            raise _ApiError(400, f"invalid JSON in the eviction: {e}") from None
        if not isinstance(body, dict):
            raise _ApiError(400, "the eviction is not a JSON object")
        if (body.get("metadata") or {}).get("name") not in (None, "", name):
            raise _ApiError(400, "name in URL does not match name in Eviction object")
        options = body.get("deleteOptions") or {}
        dry = _dry_run(req) or "All" in (options.get("dryRun") or [])
        with self._lock:
            pod = self._current(_POD, ns, name)
            meta = pod.get("metadata") or {}
            phase = (pod.get("status") or {}).get("phase")
            charged: list[tuple[str, str]] = []
            if not meta.get("deletionTimestamp") and phase not in ("Pending", "Succeeded", "Failed"):
                labels = meta.get("labels") or {}
                pdbs = sorted(
                    (key, pdb)
                    for key, pdb in self._store.get(_PDB.path, {}).items()
                    if key[0] == ns and _selects((pdb.get("spec") or {}).get("selector"), labels)
                )
                if len(pdbs) > 1 and self.multi_pdb_error:
                    raise _ApiError(
                        500,
                        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    )
                for key, pdb in pdbs:
                    allowed = int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)
                    if allowed < 1:
                        raise _ApiError(
                            429,
                            "Cannot evict pod as it would violate the pod's disruption budget.",
                            details={
                                "causes": [
                                    {
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {key[1]} needs "
                                        f"{(pdb.get('status') or {}).get('desiredHealthy', 0)} healthy pods "
                                        f"and has {(pdb.get('status') or {}).get('currentHealthy', 0)} currently",
                                    }
                                ]
                            },
                        )
                charged = [key for key, _ in pdbs]
            if dry:
                return Response(201, _success(201))
            now = self.clock()
            for key in charged:
                pdb = _copy(self._store[_PDB.path][key])
                status = pdb.setdefault("status", {})
                status["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) - 1
                status.setdefault("disruptedPods", {})[name] = _rfc3339(now)
                self._commit(_PDB, *key, pdb)
            grace = options.get("gracePeriodSeconds")
            if grace is None:
                grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = 30 if grace is None else max(0, int(grace))
            uid = str(meta.get("uid") or "")
            if charged:
                self._evicted[(ns, name, uid)] = charged
            if not meta.get("deletionTimestamp"):
                updated = _copy(pod)
                updated["metadata"]["deletionTimestamp"] = _rfc3339(now + grace)
                updated["metadata"]["deletionGracePeriodSeconds"] = grace
                self._commit(_POD, ns, name, updated)
            delay = grace * self.grace_scale
            if delay <= 0:
                self._delete_locked(_POD, ns, name)
            else:
                timer = threading.Timer(delay, self._finish_pod_deletion, (ns, name, uid))
                timer.daemon = True
                self._timers = [t for t in self._timers if t.is_alive()]
                self._timers.append(timer)
                timer.start()
        return Response(201, _success(201))

    # -- pods/resize and pods/status ----------------------------------------------------------------

    def _handle_pod_subresource_get(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        """``GET .../pods/{name}/resize`` or ``/status``: the pod."""
        with self._lock:
            return Response(200, _typed(_POD, self._current(_POD, m["namespace"], m["name"])))

    def _handle_pod_subresource_write(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        """``PATCH``/``PUT .../pods/{name}/resize`` or ``/status``.

        ``resize``: the patched (or given) pod's container resources replace the stored ones
        once :func:`_resized_pod` accepts them (``422`` naming every violation otherwise), and
        ``metadata.generation`` goes up by one, as the API server's resize strategy does
        (``pkg/registry/core/pod/strategy.go``, ``dropNonResizeUpdates``). ``status``: only the
        ``status`` of the result is kept. A stale ``metadata.resourceVersion`` is a ``409``.
        """
        ns, name, sub = m["namespace"], m["name"], m["sub"]
        try:
            body = req.json()
        except ValueError as e:
            raise _ApiError(400, f"invalid JSON in the {sub} request: {e}") from None
        with self._lock:
            old = self._current(_POD, ns, name)
            current = _typed(_POD, old)
            if req.method == "PUT":
                if not isinstance(body, dict):
                    raise _ApiError(400, "the body is not a Pod")
                wanted = _copy(body)
            elif sub == "resize" and req.content_type == STRATEGIC_MERGE_PATCH:
                wanted = _strategic_pod_patch(current, body)
            else:
                wanted = _apply_patch(req.content_type, current, body)
            _check_version(_POD, name, old, (wanted.get("metadata") or {}).get("resourceVersion"))
            new = _copy(current)
            if sub == "status":
                new["status"] = _copy(wanted.get("status") or {})
            else:
                new["spec"] = _resized_pod(current, wanted, name)
                meta = new["metadata"]
                meta["generation"] = int(meta.get("generation") or 1) + 1
            if _dry_run(req):
                return Response(200, new)
            return Response(200, _typed(_POD, self._commit(_POD, ns, name, new)))

    def _finish_pod_deletion(self, ns: str, name: str, uid: str) -> None:
        with self._lock:
            pod = self._store.get(_POD.path, {}).get((ns, name))
            if pod is not None and str((pod.get("metadata") or {}).get("uid") or "") == uid:
                self._delete_locked(_POD, ns, name)

    def _pod_gone(self, ns: str, name: str, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        charged = self._evicted.pop((ns, name, str(meta.get("uid") or "")), [])
        owned_by_rs = any(o.get("kind") == "ReplicaSet" for o in meta.get("ownerReferences") or [])
        if not (self.replace_evicted_pods and owned_by_rs):
            return
        for key in charged:
            current = self._store.get(_PDB.path, {}).get(key)
            if current is None:
                continue
            pdb = _copy(current)
            status = pdb.setdefault("status", {})
            status["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) + 1
            (status.get("disruptedPods") or {}).pop(name, None)
            self._commit(_PDB, *key, pdb)


# -- helpers ---------------------------------------------------------------------------------------


def _resource_of(obj: Mapping[str, Any]) -> Resource:
    kind = str(obj.get("kind"))
    res = _BY_TYPE.get((str(obj.get("apiVersion")), kind)) or _BY_KIND.get(kind)
    if res is None:
        raise ValueError(f"FakeKubeAPI does not serve kind {obj.get('kind')!r}")
    return res


def _group_resource(res: Resource) -> str:
    return f"{res.plural}.{res.group}" if res.group else res.plural


def _details(res: Resource, name: str, uid: str | None = None) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    if uid:
        details["uid"] = uid
    return details


def _not_found() -> Response:
    return Response(404, status_body(404, "the server could not find the requested resource"))


def _strip_type(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _typed(res: Resource, obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``obj`` as the API serves a single object: ``apiVersion``/``kind`` first."""
    doc: dict[str, Any] = {"apiVersion": res.api_version, "kind": res.kind, **_copy(_strip_type(obj))}
    doc.setdefault("metadata", {})
    return doc


def _dry_run(req: RecordedRequest) -> bool:
    return req.query.get("dryRun") == "All"


def _body_object(req: RecordedRequest, res: Resource) -> dict[str, Any]:
    try:
        obj = req.json()
    except ValueError as e:
        raise _ApiError(400, f"invalid JSON in the request body: {e}") from None
    if not isinstance(obj, dict):
        raise _ApiError(400, "the request body is not a JSON object")
    if obj.get("kind") not in (None, "", res.kind):
        raise _ApiError(400, f"the body is a {obj.get('kind')}, not a {res.kind}")
    return obj


def _check_version(res: Resource, name: str, current: Mapping[str, Any], wanted: Any) -> None:
    """409 when the request carries a resourceVersion other than the stored one."""
    if wanted in (None, ""):
        return
    if str(wanted) != str((current.get("metadata") or {}).get("resourceVersion") or ""):
        raise _ApiError(
            409,
            f'Operation cannot be fulfilled on {_group_resource(res)} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again",
            details=_details(res, name),
        )


def _selects(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether a ``LabelSelector`` matches ``labels`` (``None`` matches nothing, ``{}`` all)."""
    if not isinstance(selector, dict):
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(str(op))
        if not ok:
            return False
    return True


# -- patches ---------------------------------------------------------------------------------------


def _apply_patch(content_type: str, doc: dict[str, Any], patch: Any) -> dict[str, Any]:
    if content_type in (MERGE_PATCH, STRATEGIC_MERGE_PATCH):
        if not isinstance(patch, dict):
            raise _ApiError(400, "a merge patch must be a JSON object")
        if content_type == STRATEGIC_MERGE_PATCH and _has_directive(patch):
            raise _ApiError(
                400, "strategic merge patch directives ($patch, $setElementOrder, ...) are not supported"
            )
        result = _merge_patch(doc, patch)
        assert isinstance(result, dict)
        return result
    if content_type == JSON_PATCH:
        if not isinstance(patch, list):
            raise _ApiError(400, "a JSON patch must be a JSON array of operations")
        result = _json_patch(doc, patch)
        if not isinstance(result, dict):
            raise _ApiError(422, "the patched document is not an object")
        return result
    raise _ApiError(
        415,
        "the body of the request was in an unknown format - accepted media types include: "
        f"{JSON_PATCH}, {MERGE_PATCH}, {STRATEGIC_MERGE_PATCH}; got {content_type!r}",
    )


_RESIZABLE = ("cpu", "memory")


def _qos(spec: Mapping[str, Any]) -> str:
    """A pod's QoS class from its containers' CPU and memory requests and limits
    (``qos.ComputePodQOS`` without pod-level resources; a missing request defaults to its
    limit)."""
    containers = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        limits = {k: v for k, v in (res.get("limits") or {}).items() if k in _RESIZABLE and str(v) not in ("0", "")}
        requests = {k: v for k, v in (res.get("requests") or {}).items() if k in _RESIZABLE and str(v) not in ("0", "")}
        requests = {**limits, **requests}
        any_set = any_set or bool(limits) or bool(requests)
        if set(limits) != set(_RESIZABLE) or any(str(requests.get(k)) != str(limits[k]) for k in _RESIZABLE):
            guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _without_cpu_memory(c: Mapping[str, Any]) -> dict[str, Any]:
    """A container without its CPU and memory requests and limits and its ``resizePolicy``: what
    a resize must leave as it was."""
    out = _copy(c)
    out.pop("resizePolicy", None)
    res = out.get("resources") or {}
    for kind in ("requests", "limits"):
        values = {k: v for k, v in (res.get(kind) or {}).items() if k not in _RESIZABLE}
        if values:
            res[kind] = values
        else:
            res.pop(kind, None)
    if res:
        out["resources"] = res
    else:
        out.pop("resources", None)
    return out


def _resized_pod(old: Mapping[str, Any], new: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The spec of pod ``old`` after the resize to ``new``: ``old``'s spec with the containers'
    and sidecars' ``resources`` and ``resizePolicy`` of ``new`` (everything else in ``new`` is
    dropped), as the API server validates a resize (``ValidatePodResize``,
    ``pkg/apis/core/validation/validation.go``): containers neither added, removed, renamed nor
    reordered; only CPU and memory change, for containers and sidecars (a plain init
    container's resources are immutable); no request or limit removed; the QoS class kept; no
    static pod.

    Raises:
        _ApiError: ``422`` naming every violation, worded as the API server words it.
    """
    old_spec = old.get("spec") or {}
    new_spec = new.get("spec") or {}
    errors: list[str] = []
    if "kubernetes.io/config.mirror" in ((old.get("metadata") or {}).get("annotations") or {}):
        errors.append("spec: Forbidden: static pods cannot be resized")
    result = _copy(old_spec)
    for key in ("containers", "initContainers"):
        olds, news = old_spec.get(key) or [], new_spec.get(key) or []
        names = [c.get("name") for c in olds]
        if [c.get("name") for c in news] != names:
            errors += [
                f"spec.{key}[{i}].name: Forbidden: containers may not be renamed or reordered on resize"
                for i in range(max(len(olds), len(news)))
                if i >= len(olds) or i >= len(news) or olds[i].get("name") != news[i].get("name")
            ]
            continue
        for i, (o, n) in enumerate(zip(olds, news, strict=True)):
            sidecar = key == "initContainers" and o.get("restartPolicy") == "Always"
            if key == "initContainers" and not sidecar:
                if n != o:
                    errors.append("spec: Forbidden: resources for non-sidecar init containers are immutable")
                continue
            if _without_cpu_memory(n) != _without_cpu_memory(o):
                which = "for sidecar containers " if sidecar else ""
                errors.append(f"spec: Forbidden: only cpu and memory resources {which}are mutable")
            for kind in ("requests", "limits"):
                had = (o.get("resources") or {}).get(kind) or {}
                has = (n.get("resources") or {}).get(kind) or {}
                errors += [
                    f"spec.{key}[{i}].resources.{kind}[{r}]: Forbidden: resource {kind} cannot be removed"
                    for r in _RESIZABLE
                    if r in had and r not in has
                ]
            resized = result[key][i]
            for field_name in ("resources", "resizePolicy"):
                if field_name in n:
                    resized[field_name] = _copy(n[field_name])
                else:
                    resized.pop(field_name, None)
    if not errors:
        was = (old.get("status") or {}).get("qosClass") or _qos(old_spec)
        now = _qos(result)
        if now != was:
            errors.append(f'spec: Invalid value: "{now}": Pod QOS Class may not change as a result of resizing')
    if errors:
        detail = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise _ApiError(422, f'Pod "{name}" is invalid: {detail}', reason="Invalid")
    return result


def _strategic_pod_patch(doc: dict[str, Any], patch: Any) -> dict[str, Any]:
    """A strategic merge patch of a pod whose ``spec.containers`` and ``spec.initContainers``
    merge by ``name`` (their patch strategy): each patched container is merged into the one of
    the same name (a new name is added); the patched ones come in the patch's order and the
    others keep their places (``normalizeElementOrder`` in apimachinery's ``strategicpatch``).
    Everything else merges as a JSON merge patch."""
    if not isinstance(patch, dict):
        raise _ApiError(400, "a merge patch must be a JSON object")
    if _has_directive(patch):
        raise _ApiError(400, "strategic merge patch directives ($patch, $setElementOrder, ...) are not supported")
    spec_patch = patch.get("spec") or {}
    lists = {k: spec_patch[k] for k in ("containers", "initContainers") if isinstance(spec_patch.get(k), list)}
    plain = {**patch, "spec": {k: v for k, v in spec_patch.items() if k not in lists}} if "spec" in patch else patch
    result = _merge_patch(doc, plain)
    for key, items in lists.items():
        server = list((result.get("spec") or {}).get(key) or [])
        order = {c.get("name"): i for i, c in enumerate(server)}
        patched = []
        for c in items:
            at = order.get(c.get("name"))
            patched.append((at, _merge_patch(server[at] if at is not None else {}, c)))
        names = {c.get("name") for c in items}
        rest = [(i, c) for i, c in enumerate(server) if c.get("name") not in names]
        merged: list[Any] = []
        while patched or rest:
            if rest and (not patched or patched[0][0] is None or rest[0][0] < patched[0][0]):
                merged.append(rest.pop(0)[1])
            else:
                merged.append(patched.pop(0)[1])
        result.setdefault("spec", {})[key] = merged
    return result


def _has_directive(doc: Any) -> bool:
    if isinstance(doc, dict):
        return any(str(k).startswith("$") or _has_directive(v) for k, v in doc.items())
    if isinstance(doc, list):
        return any(_has_directive(v) for v in doc)
    return False


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge recursively, ``null`` deletes, anything else
    (lists included) replaces."""
    if not isinstance(patch, dict):
        return _copy(patch)
    result = _copy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = _merge_patch(result.get(k), v)
    return result


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise _ApiError(400, f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]] if path else []


def _index(container: list[Any], token: str, *, insert: bool) -> int:
    if insert and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _ApiError(422, f"invalid array index {token!r}")
    i = int(token)
    if i > len(container) or (not insert and i == len(container)):
        raise _ApiError(422, f"array index {i} out of bounds")
    return i


def _resolve(doc: Any, tokens: list[str]) -> Any:
    for t in tokens:
        if isinstance(doc, dict):
            if t not in doc:
                raise _ApiError(422, f"path element {t!r} does not exist")
            doc = doc[t]
        elif isinstance(doc, list):
            doc = doc[_index(doc, t, insert=False)]
        else:
            raise _ApiError(422, f"cannot descend into a scalar at {t!r}")
    return doc


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, insert=True), value)
    else:
        raise _ApiError(422, f"cannot add to a scalar at {last!r}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> tuple[Any, Any]:
    if not tokens:
        raise _ApiError(422, "cannot remove the whole document")
    parent = _resolve(doc, tokens[:-1])
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _ApiError(422, f"cannot remove missing key {last!r}")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, insert=False))
    raise _ApiError(422, f"cannot remove from a scalar at {last!r}")


def _json_patch(doc: Any, ops: list[Any]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test), all or nothing."""
    doc = _copy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _ApiError(400, f"invalid JSON patch operation {op!r}")
        name, tokens = op["op"], _pointer(op["path"])
        if name in ("add", "replace", "test") and "value" not in op:
            raise _ApiError(400, f"JSON patch operation {name!r} needs a value")
        if name == "add":
            doc = _add(doc, tokens, _copy(op["value"]))
        elif name == "remove":
            doc, _ = _remove(doc, tokens)
        elif name == "replace":
            if tokens:
                doc, _ = _remove(doc, tokens)
            doc = _add(doc, tokens, _copy(op["value"]))
        elif name == "test":
            if _resolve(doc, tokens) != op["value"]:
                raise _ApiError(422, f"testing value {op['path']} failed")
        elif name in ("move", "copy"):
            source = _pointer(op.get("from"))
            if name == "move":
                doc, value = _remove(doc, source)
            else:
                value = _copy(_resolve(doc, source))
            doc = _add(doc, tokens, value)
        else:
            raise _ApiError(400, f"unknown JSON patch operation {name!r}")
    return doc


# -- continue tokens -------------------------------------------------------------------------------


def _encode_token(rv: int, after: tuple[str, str]) -> str:
    raw = json.dumps({"rv": rv, "start": list(after)}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> tuple[int, tuple[str, str]] | None:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        doc = json.loads(raw)
        ns, name = doc["start"]
        return int(doc["rv"]), (str(ns), str(name))
    except (binascii.Error, ValueError, KeyError, TypeError):
        return None
