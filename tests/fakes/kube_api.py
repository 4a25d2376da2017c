"""A loopback fake of the Kubernetes API server, for tests that must speak real HTTP.

:class:`FakeKubeAPI` serves the read endpoints the scaler uses (cluster-wide and namespaced
LIST, single-object GET) from an in-memory store, the way the real API server answers them:

* List JSON is ``{"kind": "<Kind>List", "apiVersion": ..., "metadata": {"resourceVersion"},
  "items": [...]}`` with items **without** ``kind``/``apiVersion`` (as built-in types are
  served), sorted by namespace then name (etcd key order).
* ``limit``/``continue`` pagination with an opaque continue token bound to the store's
  resourceVersion: once the store changes, an old token gets ``410 Expired``, like a compacted
  etcd revision.
* Unknown paths get a ``404`` JSON ``Status``; a bearer token is required (``401`` otherwise).

Every request is recorded in :attr:`FakeKubeAPI.requests`; :meth:`FakeKubeAPI.fail` and
:meth:`FakeKubeAPI.delay` inject HTTP errors, bodies and latency by path prefix.

Routing is a table of ``(method, regex, handler)`` in :attr:`FakeKubeAPI.routes`, and the kinds
served are the :data:`RESOURCES` table, so watch, eviction POST, node PATCH/DELETE or events can
be added as rows without touching the HTTP plumbing.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

__all__ = ["RESOURCES", "FakeKubeAPI", "RecordedRequest", "Resource", "Response"]

DEFAULT_TOKEN = "fake-token"


@dataclass(frozen=True, slots=True)
class Resource:
    """One kind the fake serves: where it lives and how its List is named."""

    kind: str
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool

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
    Resource("NodeMetrics", "metrics.k8s.io", "v1beta1", "nodes", False),
    Resource("PodMetrics", "metrics.k8s.io", "v1beta1", "pods", True),
)
_BY_KIND = {r.kind: r for r in RESOURCES}
_BY_PATH = {r.path: r for r in RESOURCES}

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
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


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the fake received. ``query`` keeps the last value of each parameter."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes = b""


@dataclass(frozen=True, slots=True)
class Response:
    """What a route handler answers: a status and a JSON-able body (or raw bytes)."""

    status: int
    body: Any

    def encode(self) -> bytes:
        """The response body as bytes (JSON unless already bytes)."""
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


@dataclass(slots=True)
class _Rule:
    prefix: str
    status: int | None  # None: only delay, then serve normally
    remaining: int | None  # None: forever
    body: bytes | None = None
    delay: float = 0.0
    match: Callable[[RecordedRequest], bool] | None = None


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


class FakeKubeAPI:
    """An in-memory Kubernetes API server on ``127.0.0.1:<free port>`` in a daemon thread.

    Use as a context manager (or call :meth:`start`/:meth:`close`). ``token`` is the bearer token
    requests must carry (``None`` disables the check); :meth:`write_kubeconfig` writes it.
    ``routes`` is the dispatch table, tried in order: ``(method, path regex, handler)``.
    """

    def __init__(self, token: str | None = DEFAULT_TOKEN) -> None:
        self.token = token
        self.requests: list[RecordedRequest] = []
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = [("GET", OBJECT_PATH, self._handle_get)]
        self._store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._rules: list[_Rule] = []
        self._rv = 1
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeKubeAPI:
        """Bind a free loopback port and serve in a daemon thread; returns ``self``."""
        if self._server is not None:
            return self
        server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        server.daemon_threads = True
        server.fake = self  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="fake-kube-api", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeKubeAPI:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._server is None:
            raise RuntimeError("FakeKubeAPI is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

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

    def load_objects(self, objects: Iterable[Mapping[str, Any]]) -> None:
        """Add or replace objects (by kind, namespace, name); bumps the resourceVersion.

        Raises:
            ValueError: an object has no ``kind`` the fake serves, or no ``metadata.name``.
        """
        with self._lock:
            for obj in objects:
                res = _BY_KIND.get(str(obj.get("kind")))
                if res is None:
                    raise ValueError(f"FakeKubeAPI does not serve kind {obj.get('kind')!r}")
                meta = obj.get("metadata") or {}
                name = meta.get("name")
                if not name:
                    raise ValueError(f"{res.kind} without metadata.name")
                ns = str(meta.get("namespace") or "") if res.namespaced else ""
                self._store.setdefault(res.path, {})[(ns, str(name))] = json.loads(json.dumps(obj))
            self._rv += 1

    def clear(self) -> None:
        """Remove every object (bumps the resourceVersion)."""
        with self._lock:
            self._store.clear()
            self._rv += 1

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """The stored objects of ``kind`` in key order (as loaded, with their ``kind``)."""
        res = _BY_KIND[kind]
        with self._lock:
            return [v for _, v in sorted(self._store.get(res.path, {}).items())]

    # -- fault injection -------------------------------------------------------------------------

    def fail(
        self,
        path_prefix: str,
        status: int,
        times: int | None = None,
        *,
        body: bytes | None = None,
        match: Callable[[RecordedRequest], bool] | None = None,
    ) -> None:
        """Answer requests whose path starts with ``path_prefix`` with HTTP ``status``.

        Args:
            path_prefix: e.g. ``/apis/metrics.k8s.io`` or ``/api/v1/pods``.
            status: the HTTP status code; the body is a JSON ``Status`` unless ``body`` is given.
            times: how many requests to fail (``None``: all of them, until :meth:`reset_faults`).
            body: raw response bytes instead of a ``Status`` (e.g. malformed JSON with 200).
            match: an extra predicate on the request (e.g. only requests with ``continue``).
        """
        with self._lock:
            self._rules.append(_Rule(path_prefix, status, times, body=body, match=match))

    def delay(self, path_prefix: str, seconds: float, times: int | None = None) -> None:
        """Sleep ``seconds`` before answering requests whose path starts with ``path_prefix``."""
        with self._lock:
            self._rules.append(_Rule(path_prefix, None, times, delay=seconds))

    def reset_faults(self) -> None:
        """Drop every rule set by :meth:`fail` and :meth:`delay`."""
        with self._lock:
            self._rules.clear()

    def requests_to(self, path: str, method: str = "GET") -> list[RecordedRequest]:
        """Recorded requests with exactly this path and method, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path and r.method == method]

    # -- dispatch --------------------------------------------------------------------------------

    def dispatch(self, req: RecordedRequest) -> tuple[Response, float]:
        """Record ``req`` and compute its response and the delay before sending it."""
        with self._lock:
            self.requests.append(req)
            rule = self._take_rule(req)
        wait = 0.0
        if rule is not None:
            wait = rule.delay
            if rule.status is not None:
                if rule.body is not None:
                    return Response(rule.status, rule.body), wait
                return Response(rule.status, status_body(rule.status, "injected failure")), wait
        if self.token is not None and req.headers.get("authorization") != f"Bearer {self.token}":
            return Response(401, status_body(401, "Unauthorized")), wait
        for method, pattern, handler in self.routes:
            m = pattern.match(req.path)
            if m is not None and method == req.method:
                return handler(req, m), wait
        return _not_found(), wait

    def _take_rule(self, req: RecordedRequest) -> _Rule | None:
        for rule in self._rules:
            if not req.path.startswith(rule.prefix) or (rule.match is not None and not rule.match(req)):
                continue
            if rule.remaining is not None:
                if rule.remaining <= 0:
                    continue
                rule.remaining -= 1
            return rule
        return None

    def _handle_get(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        res = _BY_PATH.get(f"{m['prefix']}/{m['plural']}")
        ns, name = m["namespace"], m["name"]
        if res is None or (ns is not None and not res.namespaced):
            return _not_found()
        if name is not None:
            with self._lock:
                obj = self._store.get(res.path, {}).get((ns or "", name))
            if obj is None or (ns is None and res.namespaced):
                return Response(404, status_body(404, f'{res.plural} "{name}" not found'))
            return Response(200, {"apiVersion": res.api_version, "kind": res.kind, **obj})
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


def _not_found() -> Response:
    return Response(404, status_body(404, "the server could not find the requested resource"))


def _strip_type(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


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


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # idle keep-alive connections are dropped after this (seconds)

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without this, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        fake: FakeKubeAPI = self.server.fake  # type: ignore[attr-defined]
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = RecordedRequest(self.command, parts.path, query, headers, body)
        response, wait = fake.dispatch(req)
        if wait > 0:
            time.sleep(wait)
        payload = response.encode()
        try:
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""
