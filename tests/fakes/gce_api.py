"""A loopback fake of the GKE (container v1), Compute Engine (compute v1) and metadata APIs.

:class:`FakeGCE` serves, from in-memory state, the REST paths :mod:`scaler.cloud.gke` and
:mod:`scaler.cloud.metadata` call, the way Google's servers answer them (JSON field names in
lowerCamelCase, errors as ``{"error": {"code", "message", "status", "errors"}}``):

* container v1 ``GET /v1/projects/{p}/locations/{l}/clusters/{c}/nodePools`` and
  ``GET …/nodePools/{pool}``: node pools with ``autoscaling`` and ``instanceGroupUrls``;
* compute v1 ``GET /compute/v1/projects/{p}/zones/{z}/instanceGroupManagers/{m}`` (``targetSize``,
  ``baseInstanceName``), ``GET …/{m}/listManagedInstances``, and
  ``POST …/{m}/deleteInstances``: removes the listed instances, lowers ``targetSize`` by the
  number removed and returns a zone Operation (``RUNNING``). Instances not in the MIG are skipped
  when ``skipInstancesOnValidationError`` is true, else the call fails with 400. A repeated
  ``requestId`` returns the first call's Operation and deletes nothing, as Compute does;
* compute v1 ``GET …/zones/{z}/operations/{op}`` and ``POST …/operations/{op}/wait``:
  ``DONE`` after :attr:`FakeGCE.operation_pending_polls` polls;
* Resource Manager v3 ``POST /v3/projects/{p}:testIamPermissions``: the asked permissions
  among :attr:`FakeGCE.iam_permissions`;
* metadata ``GET /computeMetadata/v1/{path}`` (requires ``Metadata-Flavor: Google``, answers
  text with the same header) from :attr:`FakeGCE.metadata`; point ``GCE_METADATA_HOST`` at
  :attr:`FakeGCE.host`.

Every request is recorded in :attr:`FakeGCE.requests`; :meth:`FakeGCE.fail` injects HTTP errors
(before or after the request takes effect) and :meth:`FakeGCE.delay` latency, by method and path
regex. Routing is the table :attr:`FakeGCE.routes` of ``(method, regex, handler)``, as in
:mod:`fakes.kube_api`. No credentials are checked (the clients use anonymous credentials).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fakes.loopback import FaultRule, LoopbackServer, Response
from fakes.loopback import RecordedRequest as _RecordedRequest

__all__ = ["COMPUTE_URL", "FakeGCE", "FakeMig", "FakePool", "RecordedRequest", "Response"]

COMPUTE_URL = "https://www.googleapis.com/compute/v1"
"""Prefix of the resource URLs the fake puts in its documents (as the real APIs do)."""

_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_POOLS = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/clusters/(?P<cluster>[^/]+)/nodePools$"
)
_POOL = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/clusters/(?P<cluster>[^/]+)/nodePools/(?P<pool>[^/:]+)$"
)
_ZONE = r"^/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)"
_MIG = re.compile(_ZONE + r"/instanceGroupManagers/(?P<mig>[^/]+)$")
_MIG_DELETE = re.compile(_ZONE + r"/instanceGroupManagers/(?P<mig>[^/]+)/deleteInstances$")
_MIG_LIST = re.compile(_ZONE + r"/instanceGroupManagers/(?P<mig>[^/]+)/listManagedInstances$")
_OPERATION = re.compile(_ZONE + r"/operations/(?P<op>[^/]+)$")
_OPERATION_WAIT = re.compile(_ZONE + r"/operations/(?P<op>[^/]+)/wait$")
_METADATA = re.compile(r"^/computeMetadata/v1/(?P<path>.+)$")
_TEST_IAM = re.compile(r"^/v3/projects/(?P<project>[^/:]+):testIamPermissions$")


@dataclass(frozen=True, slots=True)
class RecordedRequest(_RecordedRequest):
    """One request the fake received. ``query`` keeps the last value of each parameter;
    ``json`` is the parsed body (``None`` when empty or not JSON)."""

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or ``None``."""
        try:
            return json.loads(self.body) if self.body else None
        except ValueError:
            return None


@dataclass(slots=True)
class FakeMig:
    """A zonal managed instance group: its instances (names) and ``targetSize``."""

    project: str
    zone: str
    name: str
    base_instance_name: str
    instances: list[str]
    target_size: int
    id: int = 0

    @property
    def url(self) -> str:
        """The MIG's resource URL (as in a node pool's ``instanceGroupUrls``)."""
        return f"{COMPUTE_URL}/projects/{self.project}/zones/{self.zone}/instanceGroupManagers/{self.name}"

    def instance_url(self, instance: str) -> str:
        """An instance's resource URL."""
        return f"{COMPUTE_URL}/projects/{self.project}/zones/{self.zone}/instances/{instance}"

    def to_json(self) -> dict[str, Any]:
        """The ``compute#instanceGroupManager`` document."""
        zone_url = f"{COMPUTE_URL}/projects/{self.project}/zones/{self.zone}"
        return {
            "kind": "compute#instanceGroupManager",
            "id": str(self.id),
            "name": self.name,
            "zone": zone_url,
            "baseInstanceName": self.base_instance_name,
            "instanceGroup": f"{zone_url}/instanceGroups/{self.name}",
            "targetSize": self.target_size,
            "currentActions": {"none": len(self.instances)},
            "status": {"isStable": True},
            "selfLink": self.url,
        }


@dataclass(slots=True)
class FakePool:
    """A GKE node pool: its autoscaling settings (the REST ``autoscaling`` object) and MIGs."""

    name: str
    autoscaling: dict[str, Any]
    migs: list[FakeMig]
    locations: list[str]

    def to_json(self, parent: str) -> dict[str, Any]:
        """The container v1 ``NodePool`` document."""
        return {
            "name": self.name,
            "config": {"machineType": "e2-standard-4"},
            "initialNodeCount": 1,
            "autoscaling": self.autoscaling,
            "locations": self.locations,
            "instanceGroupUrls": [m.url for m in self.migs],
            "status": "RUNNING",
            "selfLink": f"https://container.googleapis.com/v1/{parent}/nodePools/{self.name}",
        }


Handler = Callable[[RecordedRequest, "re.Match[str]"], Response]


def error_body(code: int, message: str, reason: str = "backendError") -> dict[str, Any]:
    """A Google JSON error document (``{"error": {...}}``) for HTTP status ``code``."""
    return {
        "error": {
            "code": code,
            "message": message,
            "status": _STATUS.get(code, "UNKNOWN"),
            "errors": [{"message": message, "domain": "global", "reason": reason}],
        }
    }


class FakeGCE(LoopbackServer[RecordedRequest]):
    """In-memory GKE + Compute + metadata server on ``127.0.0.1:<free port>`` in a daemon thread.

    Use as a context manager (or :meth:`start`/:meth:`close`). ``project``, ``location`` and
    ``cluster`` name the one cluster served (other clusters answer 404) and fill the metadata
    entries ``project/project-id``, ``instance/attributes/cluster-name`` and
    ``instance/attributes/cluster-location``. :attr:`url` is the ``api_endpoint`` for both Google
    clients; :attr:`host` the form ``GCE_METADATA_HOST`` takes.
    """

    thread_name = "fake-gce"

    def __init__(self, project: str = "proj", location: str = "europe-west1", cluster: str = "c1") -> None:
        super().__init__(RecordedRequest)
        self.project = project
        self.location = location
        self.cluster = cluster
        self.pools: dict[str, FakePool] = {}
        self.migs: dict[tuple[str, str], FakeMig] = {}  # (zone, name)
        self.operations: dict[tuple[str, str], dict[str, Any]] = {}  # (zone, name) -> Operation JSON
        self.operation_pending_polls = 0
        """How many GET/wait polls of a new Operation answer ``RUNNING`` before ``DONE``."""
        self.operation_errors: list[list[dict[str, Any]]] = []
        """Queued ``Operation.error.errors`` lists: the next deleteInstances ends DONE with the first
        one (and deletes nothing). Use :meth:`fail_next_operation`."""
        self.deleted_instances: list[str] = []
        """Every instance a deleteInstances removed, in order (a name twice = deleted twice)."""
        self.iam_permissions: set[str] | None = None
        """The IAM permissions the caller holds on the project (``projects.testIamPermissions``
        answers the asked ones among them); ``None``: every permission asked."""
        self.metadata: dict[str, str] = {
            "project/project-id": project,
            "instance/attributes/cluster-name": cluster,
            "instance/attributes/cluster-location": location,
        }
        self.routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("GET", _POOLS, self._list_pools),
            ("GET", _POOL, self._get_pool),
            ("GET", _MIG, self._get_mig),
            ("POST", _MIG_DELETE, self._delete_instances),
            ("GET", _MIG_LIST, self._list_managed_instances),
            ("POST", _MIG_LIST, self._list_managed_instances),
            ("GET", _OPERATION, self._poll_operation),
            ("POST", _OPERATION_WAIT, self._poll_operation),
            ("GET", _METADATA, self._metadata),
            ("POST", _TEST_IAM, self._test_iam_permissions),
        ]
        self._op_polls: dict[tuple[str, str], int] = {}
        self._by_request_id: dict[str, dict[str, Any]] = {}
        self._ids = itertools.count(1000)

    # -- state -----------------------------------------------------------------------------------

    def add_pool(
        self,
        name: str,
        zones: list[str] | tuple[str, ...],
        nodes_per_zone: int,
        min: int = 0,
        max: int = 10,
        total: bool = False,
        *,
        enabled: bool = True,
        project: str | None = None,
        migs_per_zone: int = 1,
    ) -> list[str]:
        """Add a node pool with one MIG per zone (``migs_per_zone`` for a large pool), each
        holding ``nodes_per_zone`` instances.

        Names follow GKE: MIG ``gke-<cluster>-<pool>-<hash>-grp``, base instance name without
        ``-grp``, instances ``<base>-<4 chars>``. ``min``/``max`` become ``minNodeCount`` /
        ``maxNodeCount`` (per zone), or ``totalMinNodeCount``/``totalMaxNodeCount`` with
        ``total=True``; ``enabled=False`` gives ``autoscaling: {}`` as GKE returns for a pool
        without autoscaling. Returns the instance names, zone by zone.
        """
        project = project or self.project
        autoscaling: dict[str, Any] = {}
        if enabled:
            autoscaling = {"enabled": True, "locationPolicy": "BALANCED"}
            if total:
                autoscaling |= {"totalMinNodeCount": min, "totalMaxNodeCount": max}
            else:
                autoscaling |= {"minNodeCount": min, "maxNodeCount": max}
        names: list[str] = []
        migs: list[FakeMig] = []
        with self._lock:
            for zone in zones:
                for k in range(migs_per_zone):
                    seed = f"{self.cluster}/{name}/{zone}" + (f"/{k}" if k else "")
                    digest = hashlib.sha256(seed.encode()).hexdigest()[:8]
                    base = f"gke-{self.cluster}-{name}-{digest}"
                    instances = [f"{base}-{_suffix(i)}" for i in range(nodes_per_zone)]
                    mig = FakeMig(project, zone, f"{base}-grp", base, instances, nodes_per_zone, next(self._ids))
                    self.migs[(zone, mig.name)] = mig
                    migs.append(mig)
                    names.extend(instances)
            self.pools[name] = FakePool(name, autoscaling, migs, list(zones))
        return names

    def mig_of(self, instance: str) -> FakeMig:
        """The MIG holding (or having held) ``instance`` — matched by base instance name."""
        with self._lock:
            for mig in self.migs.values():
                if instance.startswith(mig.base_instance_name + "-"):
                    return mig
        raise KeyError(instance)

    def provider_id(self, instance: str) -> str:
        """``gce://<project>/<zone>/<instance>``: the node's ``spec.providerID``."""
        mig = self.mig_of(instance)
        return f"gce://{mig.project}/{mig.zone}/{instance}"

    def pool_of(self, instance: str) -> str:
        """The node pool whose MIG holds ``instance``."""
        mig = self.mig_of(instance)
        with self._lock:
            return next(p.name for p in self.pools.values() if mig in p.migs)

    def target_size(self, pool: str) -> int:
        """Sum of ``targetSize`` over the pool's MIGs."""
        with self._lock:
            return sum(m.target_size for m in self.pools[pool].migs)

    def fail_next_operation(self, code: str = "RESOURCE_NOT_FOUND", message: str = "injected") -> None:
        """Make the next deleteInstances Operation end DONE with this error (nothing deleted)."""
        with self._lock:
            self.operation_errors.append([{"code": code, "message": message}])

    # -- fault injection -------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        path_regex: str,
        status: int,
        times: int | None = None,
        *,
        after: bool = False,
        body: Any = None,
    ) -> None:
        """Answer requests of ``method`` whose path matches ``path_regex`` (``re.search``) with
        HTTP ``status`` and a Google error body (or ``body``).

        ``times``: how many requests to fail (``None``: all, until :meth:`reset_faults`).
        ``after=True``: the request takes effect first and only its answer is lost (as when a
        server fails after committing), to test idempotent retries.
        """
        self._add_rule(FaultRule(_matcher(method, path_regex), status, times, body=body, after=after))

    def delay(self, method: str, path_regex: str, seconds: float, times: int | None = None) -> None:
        """Sleep ``seconds`` before answering matching requests."""
        self._add_rule(FaultRule(_matcher(method, path_regex), None, times, delay=seconds))

    def requests_matching(self, method: str, path_regex: str) -> list[RecordedRequest]:
        """Recorded requests of ``method`` whose path matches ``path_regex``, in arrival order."""
        pattern = re.compile(path_regex)
        with self._lock:
            return [r for r in self.requests if r.method == method and pattern.search(r.path)]

    # -- dispatch --------------------------------------------------------------------------------

    def _route(self, req: RecordedRequest) -> Response:
        for method, pattern, handler in self.routes:
            m = pattern.match(req.path)
            if m is not None and method == req.method:
                with self._lock:
                    return handler(req, m)
        return Response(404, error_body(404, f"The requested URL {req.path} was not found.", "notFound"))

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    # -- handlers (called with the lock held) ----------------------------------------------------

    def _cluster_ok(self, m: re.Match[str]) -> bool:
        return (m["project"], m["location"], m["cluster"]) == (self.project, self.location, self.cluster)

    def _list_pools(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        if not self._cluster_ok(m):
            return Response(404, error_body(404, f"Not found: cluster {m['cluster']!r}.", "notFound"))
        parent = f"projects/{m['project']}/locations/{m['location']}/clusters/{m['cluster']}"
        return Response(200, {"nodePools": [p.to_json(parent) for p in self.pools.values()]})

    def _get_pool(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        pool = self.pools.get(m["pool"])
        if not self._cluster_ok(m) or pool is None:
            return Response(404, error_body(404, f"Not found: node pool {m['pool']!r}.", "notFound"))
        parent = f"projects/{m['project']}/locations/{m['location']}/clusters/{m['cluster']}"
        return Response(200, pool.to_json(parent))

    def _mig(self, m: re.Match[str]) -> FakeMig | None:
        mig = self.migs.get((m["zone"], m["mig"]))
        return mig if mig is not None and mig.project == m["project"] else None

    def _mig_not_found(self, m: re.Match[str]) -> Response:
        return Response(
            404,
            error_body(
                404,
                f"The resource 'projects/{m['project']}/zones/{m['zone']}/instanceGroupManagers/{m['mig']}' "
                "was not found",
                "notFound",
            ),
        )

    def _get_mig(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        mig = self._mig(m)
        return Response(200, mig.to_json()) if mig is not None else self._mig_not_found(m)

    def _list_managed_instances(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        mig = self._mig(m)
        if mig is None:
            return self._mig_not_found(m)
        items = [
            {"instance": mig.instance_url(i), "instanceStatus": "RUNNING", "currentAction": "NONE"}
            for i in mig.instances
        ]
        return Response(200, {"managedInstances": items})

    def _delete_instances(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        mig = self._mig(m)
        if mig is None:
            return self._mig_not_found(m)
        request_id = req.query.get("requestId", "")
        if request_id and request_id in self._by_request_id:
            return Response(200, self._by_request_id[request_id])
        doc = req.json or {}
        urls = doc.get("instances") or []
        skip = bool(doc.get("skipInstancesOnValidationError", False))
        names = [str(u).rstrip("/").rsplit("/", 1)[-1] for u in urls]
        zones_ok = [f"/zones/{mig.zone}/instances/" in str(u) for u in urls]
        missing = [n for n, ok in zip(names, zones_ok, strict=True) if not ok or n not in mig.instances]
        if missing and not skip:
            return Response(
                400,
                error_body(400, f"Instance {missing[0]!r} is not a member of {mig.name!r}.", "invalid"),
            )
        error = self.operation_errors.pop(0) if self.operation_errors else None
        if error is None:
            for name in names:
                if name in mig.instances and name not in missing:
                    mig.instances.remove(name)
                    mig.target_size -= 1
                    self.deleted_instances.append(name)
        op = self._new_operation(mig, "compute.instanceGroupManagers.deleteInstances", error)
        if request_id:
            self._by_request_id[request_id] = op
        return Response(200, op)

    def _new_operation(self, mig: FakeMig, kind: str, error: Any) -> dict[str, Any]:
        n = next(self._ids)
        name = f"operation-{n}-fake"
        zone_url = f"{COMPUTE_URL}/projects/{mig.project}/zones/{mig.zone}"
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(n),
            "name": name,
            "zone": zone_url,
            "operationType": kind,
            "targetLink": mig.url,
            "status": "RUNNING",
            "progress": 0,
            "selfLink": f"{zone_url}/operations/{name}",
        }
        if error is not None:
            op["error"] = {"errors": error}
            op["httpErrorStatusCode"] = 400
        self.operations[(mig.zone, name)] = op
        self._op_polls[(mig.zone, name)] = self.operation_pending_polls
        return dict(op)

    def _poll_operation(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        key = (m["zone"], m["op"])
        op = self.operations.get(key)
        if op is None:
            return Response(
                404, error_body(404, f"The resource operation {m['op']!r} was not found", "notFound")
            )
        left = self._op_polls.get(key, 0)
        if left > 0:
            self._op_polls[key] = left - 1
        else:
            op["status"] = "DONE"
            op["progress"] = 100
        return Response(200, dict(op))

    def _test_iam_permissions(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        if m["project"] != self.project:
            return Response(403, error_body(403, f"project {m['project']!r}: permission denied", "forbidden"))
        asked = list((req.json or {}).get("permissions") or [])
        granted = [p for p in asked if self.iam_permissions is None or p in self.iam_permissions]
        return Response(200, {"permissions": granted} if granted else {})

    def _metadata(self, req: RecordedRequest, m: re.Match[str]) -> Response:
        flavor = {"Metadata-Flavor": "Google"}
        if req.headers.get("metadata-flavor") != "Google":
            return Response(403, "Missing Metadata-Flavor:Google header.", "text/html", flavor)
        value = self.metadata.get(m["path"])
        if value is None:
            return Response(404, "Not Found", "text/html", flavor)
        return Response(200, value, "application/text", flavor)


def _matcher(method: str, path_regex: str) -> Callable[[RecordedRequest], bool]:
    pattern = re.compile(path_regex)
    return lambda req: req.method == method and pattern.search(req.path) is not None


def _suffix(i: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    digest = hashlib.sha256(str(i).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:4])
