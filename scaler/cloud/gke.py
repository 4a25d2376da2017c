"""GKE provider: node pools and their managed instance groups (MIGs) through Google's APIs.

Reads the cluster's node pools with the GKE API (``container.clusters.nodePools.list``: per pool
``autoscaling`` limits and ``instanceGroupUrls``), each MIG's ``targetSize`` with the Compute
Engine API (``compute.instanceGroupManagers.get``), and deletes nodes as cluster-autoscaler's
GCE provider does (reference §6, ``cloudprovider/gce/*``):

* node → instance: ``spec.providerID`` ``gce://<project>/<zone>/<instance>``
  (``GceRefFromProviderId`` in ``gce_cloud_provider.go``);
* instance → MIG: the pool's MIG in that project and zone whose base instance name prefixes the
  instance name (``findMigWithMatchingBasename`` in ``mig_info_provider.go``);
* delete: ``instanceGroupManagers.deleteInstances`` with the instance URLs and
  ``skipInstancesOnValidationError: true``, one call per MIG (at most 1000 instances each), then
  ``zoneOperations.wait`` until ``DONE`` (``autoscaling_gce_client.go DeleteInstances``); the
  MIG's ``targetSize`` drops by the number deleted (CA never calls ``resize`` for scale-down);
* refuse when ``targetSize - in_flight <= min`` (``gceMig.DeleteNodes``), for each MIG with its
  own limits (a large pool has several MIGs in one zone: each keeps its minimum), for each
  zone and for the pool with its total limits.

Every request goes through :meth:`GKEProvider._call`, which only accepts the methods named in
:data:`scaler.cloud.base.READ_CALLS` / :data:`~scaler.cloud.base.DELETE_CALLS`, retries 429 and
5xx answers and connection errors with ``tenacity`` and turns the final failure into
:class:`~scaler.cloud.base.CloudError`. The Google clients' own retry is disabled
(``retry=None``) so that attempts are counted in one place. A retried ``deleteInstances`` carries
the same ``requestId``, so Compute Engine ignores a repeat of a request it already executed; a
``deleteInstances`` whose Operation was returned is never sent again.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials, Credentials
from google.cloud import compute_v1, container_v1, resourcemanager_v3

from scaler.cloud import metadata
from scaler.cloud.base import (
    CHECK_CALLS,
    DELETE_CALLS,
    IAM_PERMISSIONS,
    READ_CALLS,
    CloudError,
    MigInfo,
    MinSizeReached,
    NodeGroupInfo,
    ZoneGroupInfo,
    call_with_retries,
    check_min_sizes,
)
from scaler.config import NodeGroupSpec
from scaler.kube.client import ApiCall
from scaler.limits import GroupLimits
from scaler.model.records import Node

__all__ = [
    "COMPUTE_URL",
    "MAX_INSTANCES_PER_DELETE",
    "ComputeClients",
    "GKEProvider",
    "GceRef",
    "make_clients",
    "make_projects_client",
    "pool_limits",
    "zone_limits",
]

log = logging.getLogger(__name__)

COMPUTE_URL = "https://www.googleapis.com/compute/v1"
"""Prefix of Compute Engine resource URLs (``gce_url.go``); instance URLs sent to
``deleteInstances`` use it whatever endpoint the client talks to."""
MAX_INSTANCES_PER_DELETE = 1000
"""``deleteInstances`` accepts at most this many instances per request (Compute API reference)."""
_OPERATION_POLL_SECONDS = 0.1  # between zoneOperations.wait calls that return not DONE (CA: 100ms)

_ALL_CALLS = frozenset(READ_CALLS) | frozenset(DELETE_CALLS) | frozenset(CHECK_CALLS)
_RETRYABLE_API_ERRORS = (
    gexc.TooManyRequests,
    gexc.InternalServerError,
    gexc.ServiceUnavailable,
    gexc.BadGateway,
    gexc.GatewayTimeout,
)
_PROVIDER_ID = re.compile(r"^gce://(?P<project>[^/]+)/(?P<zone>[^/]+)/(?P<name>[^/]+)$")
_RESOURCE_URL = re.compile(r"/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/[A-Za-z]+/(?P<name>[^/]+)/?$")

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class GceRef:
    """A zonal Compute Engine resource: ``project``, ``zone`` and ``name`` (CA's ``GceRef``)."""

    project: str
    zone: str
    name: str

    @classmethod
    def from_provider_id(cls, provider_id: str) -> GceRef:
        """Parse ``gce://<project>/<zone>/<instance>`` (CA: ``GceRefFromProviderId``).

        Raises:
            ValueError: not a GCE provider id.
        """
        m = _PROVIDER_ID.match(provider_id.strip())
        if m is None:
            raise ValueError(f"not a GCE provider id: {provider_id!r}")
        return cls(m["project"], m["zone"], m["name"])

    @classmethod
    def from_url(cls, url: str) -> GceRef:
        """Parse a zonal resource URL (``…/projects/P/zones/Z/instanceGroupManagers/NAME``),
        whatever its host and API version.

        Raises:
            ValueError: not a zonal resource URL (a regional MIG, for instance).
        """
        m = _RESOURCE_URL.search(url)
        if m is None:
            raise ValueError(f"not a zonal Compute Engine resource URL: {url!r}")
        return cls(m["project"], m["zone"], m["name"])

    @property
    def provider_id(self) -> str:
        """``gce://<project>/<zone>/<name>`` (CA: ``ToProviderId``)."""
        return f"gce://{self.project}/{self.zone}/{self.name}"

    @property
    def instance_url(self) -> str:
        """The URL of the instance of this name, as ``deleteInstances`` takes it."""
        return f"{COMPUTE_URL}/projects/{self.project}/zones/{self.zone}/instances/{self.name}"

    @property
    def mig_url(self) -> str:
        """The URL of the MIG of this name."""
        return f"{COMPUTE_URL}/projects/{self.project}/zones/{self.zone}/instanceGroupManagers/{self.name}"


class ComputeClients(NamedTuple):
    """The Compute Engine clients :class:`GKEProvider` uses."""

    instance_group_managers: compute_v1.InstanceGroupManagersClient
    zone_operations: compute_v1.ZoneOperationsClient


def make_clients(api_endpoint: str | None = None) -> tuple[container_v1.ClusterManagerClient, ComputeClients]:
    """Build the GKE and Compute Engine clients, REST transport.

    ``api_endpoint`` ``None``: Google's endpoints and Application Default Credentials (Workload
    Identity on GKE). Otherwise every client talks to that endpoint (``http://127.0.0.1:PORT``
    works: the REST transports keep an explicit ``http://`` scheme) with anonymous credentials —
    for tests and emulators.

    Raises:
        CloudError: no default credentials could be found.
    """
    kwargs: dict[str, Any] = {"transport": "rest"}
    if api_endpoint is not None:
        anonymous: Callable[[], Credentials] = AnonymousCredentials  # its __init__ is unannotated
        kwargs["credentials"] = anonymous()
        kwargs["client_options"] = ClientOptions(api_endpoint=api_endpoint)
    try:
        return (
            container_v1.ClusterManagerClient(**kwargs),
            ComputeClients(
                compute_v1.InstanceGroupManagersClient(**kwargs),
                compute_v1.ZoneOperationsClient(**kwargs),
            ),
        )
    except auth_exc.GoogleAuthError as e:
        raise CloudError(f"cannot create Google API clients: {e}") from e


def make_projects_client(api_endpoint: str | None = None) -> resourcemanager_v3.ProjectsClient:
    """The Resource Manager client (REST) for ``projects.testIamPermissions``; ``api_endpoint``
    as in :func:`make_clients`.

    Raises:
        CloudError: no default credentials could be found.
    """
    kwargs: dict[str, Any] = {"transport": "rest"}
    if api_endpoint is not None:
        anonymous: Callable[[], Credentials] = AnonymousCredentials
        kwargs["credentials"] = anonymous()
        kwargs["client_options"] = ClientOptions(api_endpoint=api_endpoint)
    try:
        return resourcemanager_v3.ProjectsClient(**kwargs)
    except auth_exc.GoogleAuthError as e:
        raise CloudError(f"cannot create the Resource Manager client: {e}") from e


def pool_limits(
    autoscaling: container_v1.NodePoolAutoscaling | None,
    zone_count: int,
    target_size: int,
    override: NodeGroupSpec | None = None,
) -> tuple[int, int]:
    """``(min, max)`` of a whole node pool, in nodes: the limits that hold for the pool as a
    whole, beside those of each zone (:func:`zone_limits`).

    * ``override`` (a ``--nodes`` entry naming the pool, which limits each zone): ``(0,
      max × zone_count)``, the zones carry the minimum;
    * autoscaling disabled (or absent): ``(target_size, target_size)``: never shrunk;
    * ``totalMinNodeCount``/``totalMaxNodeCount`` set: those (whole pool);
    * else ``minNodeCount``/``maxNodeCount`` are per zone: ``(0, max × zone_count)``.

    A pool whose minimum is per zone has no minimum of its own: with zones of 3, 0 and 0 nodes
    and a minimum of 1 per zone, the first zone may still lose two.
    """
    if override is not None:
        return 0, override.max_size * zone_count
    if autoscaling is None or not autoscaling.enabled:
        return target_size, target_size
    if autoscaling.total_min_node_count or autoscaling.total_max_node_count:
        return autoscaling.total_min_node_count, autoscaling.total_max_node_count
    return 0, autoscaling.max_node_count * zone_count


def zone_limits(
    autoscaling: container_v1.NodePoolAutoscaling | None,
    target_size: int,
    override: NodeGroupSpec | None = None,
) -> tuple[int, int]:
    """``(min, max)`` of one of a node pool's MIGs (the pool in one zone), in nodes.

    * ``override`` (a ``--nodes`` entry naming the MIG, else one naming the pool) wins, as
      explicit settings win over discovery in CA (``gce_manager.go fetchAutoMigs``);
    * autoscaling disabled (or absent): ``(target_size, target_size)``: never shrunk;
    * ``totalMinNodeCount``/``totalMaxNodeCount`` set: ``(0, totalMax)``: the pool as a whole
      carries the minimum (:func:`pool_limits`);
    * else ``(minNodeCount, maxNodeCount)``: GKE's limits are per zone, one MIG per zone (``gcloud
      container node-pools update --min-nodes``: "per zone"), and CA's GCE provider gives each
      MIG those limits.
    """
    if override is not None:
        return override.min_size, override.max_size
    if autoscaling is None or not autoscaling.enabled:
        return target_size, target_size
    if autoscaling.total_min_node_count or autoscaling.total_max_node_count:
        return 0, autoscaling.total_max_node_count
    return autoscaling.min_node_count, autoscaling.max_node_count


@dataclass(slots=True)
class _Mig:
    ref: GceRef
    base_name: str
    target_size: int
    min_size: int = 0
    max_size: int = 0


@dataclass(slots=True)
class _Pool:
    name: str
    min_size: int
    max_size: int
    migs: list[_Mig] = field(default_factory=list)

    def info(self) -> NodeGroupInfo:
        by_zone: dict[str, list[_Mig]] = {}
        for m in self.migs:
            by_zone.setdefault(m.ref.zone, []).append(m)
        return NodeGroupInfo(
            id=self.name,
            min_size=self.min_size,
            max_size=self.max_size,
            target_size=sum(m.target_size for m in self.migs),
            zones=tuple(sorted(by_zone)),
            zone_groups=tuple(
                ZoneGroupInfo(
                    zone,
                    sum(m.min_size for m in migs),
                    sum(m.max_size for m in migs),
                    sum(m.target_size for m in migs),
                )
                for zone, migs in sorted(by_zone.items())
            ),
            migs=tuple(
                MigInfo(m.ref.name, m.base_name, m.ref.zone, m.min_size, m.max_size, m.target_size)
                for m in sorted(self.migs, key=lambda m: m.ref.name)
            ),
        )


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, _RETRYABLE_API_ERRORS):
        return True
    if isinstance(exc, gexc.GoogleAPICallError):
        return False
    # requests' ConnectionError/Timeout are OSErrors; google-auth's TransportError wraps them.
    return isinstance(exc, (OSError, auth_exc.TransportError))


def _operation_done(op: compute_v1.Operation) -> bool:
    return bool(op.status == compute_v1.Operation.Status.DONE)


class GKEProvider:
    """Node pools of one GKE cluster as node groups; deletes nodes through their MIGs.

    Args:
        project, location, cluster: the cluster (``location`` is a region or a zone).
        container_client: a ``container_v1.ClusterManagerClient``; default: :func:`make_clients`.
        compute_clients: a :class:`ComputeClients`; default: :func:`make_clients`.
        projects_client: a ``resourcemanager_v3.ProjectsClient`` for the permission check;
            default: :func:`make_projects_client`, made on first use.
        limits: ``--nodes`` limits (:class:`~scaler.limits.GroupLimits`): an entry naming a
            MIG, else one naming its pool, overrides the MIG's autoscaling limits.
        retry_wait_seconds: wait between attempts of a retryable failure (seconds).
        max_attempts: attempts per API call before :class:`CloudError`.
        operation_timeout_seconds: how long to wait for a zone operation to be ``DONE``
            (CA: 20 s).
        request_timeout_seconds: timeout of one HTTP request (seconds).

    Raises:
        CloudError: default clients were needed and no credentials were found.
    """

    name = "gke"
    kube_calls: tuple[ApiCall, ...] = ()  # VMs go through the MIG; GKE removes the Node objects

    def __init__(
        self,
        project: str,
        location: str,
        cluster: str,
        *,
        container_client: container_v1.ClusterManagerClient | None = None,
        compute_clients: ComputeClients | None = None,
        projects_client: resourcemanager_v3.ProjectsClient | None = None,
        limits: GroupLimits | None = None,
        retry_wait_seconds: float = 1.0,
        max_attempts: int = 5,
        operation_timeout_seconds: float = 20.0,
        request_timeout_seconds: float = 30.0,
    ) -> None:
        if container_client is None or compute_clients is None:
            default_container, default_compute = make_clients()
            container_client = container_client or default_container
            compute_clients = compute_clients or default_compute
        self.project = project
        self.location = location
        self.cluster = cluster
        self._container = container_client
        self._compute = compute_clients
        self._projects = projects_client
        self._limits = limits if limits is not None else GroupLimits()
        self._retry_wait = retry_wait_seconds
        self._max_attempts = max(1, max_attempts)
        self._operation_timeout = operation_timeout_seconds
        self._request_timeout = request_timeout_seconds
        self._pools: dict[str, _Pool] | None = None
        self._pending: dict[str, Counter[str]] = {}  # group -> zone -> nodes of delete_nodes calls running
        self._mig_pending: dict[str, Counter[str]] = {}  # group -> MIG name -> the same per MIG
        self._lock = threading.Lock()

    @classmethod
    def from_environment(
        cls,
        project: str | None = None,
        location: str | None = None,
        cluster: str | None = None,
        **kw: Any,
    ) -> GKEProvider:
        """A provider for the cluster scaler runs in: each unset value comes from the metadata
        server (:mod:`scaler.cloud.metadata`); ``kw`` goes to the constructor.

        Raises:
            MetadataUnavailable: a value was needed and the metadata server did not give it.
            CloudError: see the constructor.
        """
        project = project or metadata.project_id()
        location = location or metadata.cluster_location()
        cluster = cluster or metadata.cluster_name()
        return cls(project, location, cluster, **kw)

    @property
    def parent(self) -> str:
        """``projects/<project>/locations/<location>/clusters/<cluster>``."""
        return f"projects/{self.project}/locations/{self.location}/clusters/{self.cluster}"

    # -- API calls -------------------------------------------------------------------------------

    def _call(self, call: str, resource: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` (one request of the Google API method ``call``) with retries.

        Raises:
            CloudError: a non-retryable failure, or the last one after ``max_attempts``.
        """
        if call not in _ALL_CALLS:
            raise AssertionError(f"{call} is not in READ_CALLS or DELETE_CALLS")

        try:
            return call_with_retries(
                fn,
                what=f"{call} {resource}",
                retryable=_retryable,
                max_attempts=self._max_attempts,
                wait_seconds=self._retry_wait,
            )
        except gexc.GoogleAPICallError as e:
            raise CloudError(f"{call} {resource}: HTTP {e.code}: {e.message}") from e
        except (OSError, auth_exc.GoogleAuthError) as e:
            raise CloudError(f"{call} {resource}: {type(e).__name__}: {e}") from e

    def _list_node_pools(self) -> list[container_v1.NodePool]:
        resp = self._call(
            "container.clusters.nodePools.list",
            self.parent,
            lambda: self._container.list_node_pools(
                parent=self.parent, retry=None, timeout=self._request_timeout
            ),
        )
        return list(resp.node_pools)

    def _get_mig(self, ref: GceRef) -> compute_v1.InstanceGroupManager:
        return self._call(
            "compute.instanceGroupManagers.get",
            f"{ref.project}/{ref.zone}/{ref.name}",
            lambda: self._compute.instance_group_managers.get(
                project=ref.project,
                zone=ref.zone,
                instance_group_manager=ref.name,
                retry=None,
                timeout=self._request_timeout,
            ),
        )

    def _delete_instances(self, mig: GceRef, instances: Sequence[GceRef]) -> compute_v1.Operation:
        request = compute_v1.DeleteInstancesInstanceGroupManagerRequest(
            project=mig.project,
            zone=mig.zone,
            instance_group_manager=mig.name,
            instance_group_managers_delete_instances_request_resource=compute_v1.InstanceGroupManagersDeleteInstancesRequest(
                instances=[i.instance_url for i in instances],
                skip_instances_on_validation_error=True,
            ),
            # One id for every attempt: Compute ignores a retry of a request it already ran.
            request_id=str(uuid.uuid4()),
        )
        return self._call(
            "compute.instanceGroupManagers.deleteInstances",
            f"{mig.project}/{mig.zone}/{mig.name}",
            lambda: self._compute.instance_group_managers.delete_instances_unary(
                request=request, retry=None, timeout=self._request_timeout
            ),
        )

    def _wait_operation(self, mig: GceRef, op: compute_v1.Operation) -> compute_v1.Operation:
        """Wait until ``op`` is DONE (``zoneOperations.wait``), at most ``operation_timeout_seconds``,
        and return it (its ``error`` may be set).

        Raises:
            CloudError: the wait calls failed, or the operation is not DONE in time.
        """
        resource = f"{mig.project}/{mig.zone}/{op.name}"
        deadline = time.monotonic() + self._operation_timeout
        while not _operation_done(op):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CloudError(
                    f"compute.zoneOperations.wait {resource}: not DONE after {self._operation_timeout:g}s "
                    f"(status {compute_v1.Operation.Status(op.status).name})"
                )
            op = self._call(
                "compute.zoneOperations.wait",
                resource,
                functools.partial(
                    self._compute.zone_operations.wait,
                    project=mig.project,
                    zone=mig.zone,
                    operation=op.name,
                    retry=None,
                    timeout=min(self._request_timeout, remaining),
                ),
            )
            if not _operation_done(op):
                time.sleep(min(_OPERATION_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        return op

    def missing_permissions(self, dry_run: bool) -> str:
        """Ask Resource Manager's ``projects.testIamPermissions`` (one call) for the IAM
        permissions of the calls the provider will make (:data:`IAM_PERMISSIONS` of
        ``READ_CALLS``, plus ``DELETE_CALLS`` unless ``dry_run``) on the cluster's project,
        where the role is granted. ``""`` when all are granted; a check that cannot be made (the
        Resource Manager API disabled, no network) is logged as a warning and passes.
        """
        calls = READ_CALLS if dry_run else (*READ_CALLS, *DELETE_CALLS)
        wanted = sorted({IAM_PERMISSIONS[c] for c in calls})
        resource = f"projects/{self.project}"
        try:
            client = self._projects or make_projects_client()
            self._projects = client
            resp = self._call(
                "cloudresourcemanager.projects.testIamPermissions",
                resource,
                lambda: client.test_iam_permissions(
                    resource=resource, permissions=wanted, retry=None, timeout=self._request_timeout
                ),
            )
        except CloudError as e:
            log.warning("cannot check the IAM permissions of the gke provider (%s); going on", e)
            return ""
        missing = [p for p in wanted if p not in set(resp.permissions)]
        if not missing:
            return ""
        needs = "; ".join(
            f"{p} (for {', '.join(c for c in calls if IAM_PERMISSIONS[c] == p)})" for p in missing
        )
        return (
            f"missing Google Cloud IAM permission(s) on {resource}: {needs} "
            f"(projects.testIamPermissions; grant the role of deploy/gke/iam-role"
            f"{'-dry-run' if dry_run else ''}.yaml)"
        )

    # -- CloudProvider ---------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read node pools (1 call) and every MIG's ``targetSize`` (1 call per MIG).

        MIG URLs that are not zonal are skipped with a warning.

        Raises:
            CloudError: a read failed after retries.
        """
        pools: dict[str, _Pool] = {}
        for np in self._list_node_pools():
            migs: list[_Mig] = []
            for url in np.instance_group_urls:
                try:
                    ref = GceRef.from_url(url)
                except ValueError:
                    log.warning("node pool %s: skipping instance group %s (not a zonal MIG)", np.name, url)
                    continue
                got = self._get_mig(ref)
                base = got.base_instance_name or ref.name.removesuffix("-grp")
                migs.append(_Mig(ref, base, int(got.target_size)))
            target = sum(m.target_size for m in migs)
            zones = len({m.ref.zone for m in migs}) or len(np.locations)
            autoscaling = np.autoscaling if "autoscaling" in np else None
            for m in migs:
                spec = self._limits.for_zone(np.name, m.ref.zone, m.ref.name)
                m.min_size, m.max_size = zone_limits(autoscaling, m.target_size, spec)
            lo, hi = pool_limits(autoscaling, zones, target, self._limits.pools.get(np.name))
            pools[np.name] = _Pool(np.name, lo, hi, migs)
        with self._lock:
            self._pools = pools

    def _ensure_pools(self) -> dict[str, _Pool]:
        if self._pools is None:
            self.refresh()
        assert self._pools is not None
        return self._pools

    @staticmethod
    def _match_mig(pools: Sequence[_Pool], ref: GceRef) -> tuple[_Pool, _Mig] | None:
        """The MIG, among ``pools``, with ``ref``'s project and zone whose base instance name
        (plus ``-``) prefixes ``ref.name``; the longest base name wins."""
        best: tuple[_Pool, _Mig] | None = None
        for pool in pools:
            for mig in pool.migs:
                if (
                    mig.ref.project == ref.project
                    and mig.ref.zone == ref.zone
                    and ref.name.startswith(mig.base_name + "-")
                    and (best is None or len(mig.base_name) > len(best[1].base_name))
                ):
                    best = (pool, mig)
        return best

    def node_group_for(self, node: Node) -> NodeGroupInfo | None:
        """The node pool of ``node``: by its MIG (``spec.providerID`` and the MIG base names),
        else by its ``cloud.google.com/gke-nodepool`` label; ``None`` when neither is a known pool.
        Refreshes first if :meth:`refresh` was never called.

        Raises:
            CloudError: the first refresh failed.
        """
        pools = self._ensure_pools()
        with self._lock:
            try:
                found = self._match_mig(list(pools.values()), GceRef.from_provider_id(node.provider_id))
            except ValueError:
                found = None
            if found is not None:
                return found[0].info()
            pool = pools.get(node.node_group) if node.node_group else None
            return pool.info() if pool is not None else None

    def node_groups(self) -> list[NodeGroupInfo]:
        """Every node pool, sorted by name, as of the last refresh (refreshes if never done).

        Raises:
            CloudError: the first refresh failed.
        """
        pools = self._ensure_pools()
        with self._lock:
            return [pools[k].info() for k in sorted(pools)]

    def delete_nodes(
        self,
        group_id: str,
        nodes: Sequence[Node],
        in_flight: int = 0,
        zone_in_flight: Mapping[str, int] | None = None,
    ) -> None:
        """Delete ``nodes`` of pool ``group_id``: one ``deleteInstances`` per MIG, then wait for
        each operation. The cached ``target_size`` of the pool drops by the nodes deleted (also
        when the outcome is unknown, so that min-size checks stay conservative until the next
        :meth:`refresh`).

        ``in_flight`` / ``zone_in_flight``: deletions of this pool (in all, per zone) started
        elsewhere and not yet in its target size. Concurrent calls on one provider count each
        other's nodes without them.

        Raises:
            MinSizeReached: for the pool or for one of its MIGs, ``target - in_flight <= min``
                or more nodes than ``target - in_flight - min``; nothing was deleted.
            CloudError: unknown pool; a node without a GCE ``providerID`` or not in one of the
                pool's MIGs (nothing was deleted); or an API failure (``failed_nodes`` names the
                nodes of the MIGs that failed; the other MIGs' deletions went through).
        """
        pools = self._ensure_pools()
        unique = list({n.name: n for n in nodes}.values())
        if not unique:
            return
        with self._lock:
            pool = pools.get(group_id)
            if pool is None:
                raise CloudError(f"node group {group_id!r} is not a node pool of {self.parent}")
            by_mig: dict[GceRef, tuple[_Mig, list[tuple[Node, GceRef]]]] = {}
            for node in unique:
                try:
                    ref = GceRef.from_provider_id(node.provider_id)
                except ValueError:
                    raise CloudError(
                        f"node {node.name}: providerID {node.provider_id!r} is not a GCE instance"
                    ) from None
                found = self._match_mig([pool], ref)
                if found is None:
                    raise CloudError(
                        f"node {node.name} ({ref.provider_id}) does not belong to node group {group_id}"
                    )
                by_mig.setdefault(found[1].ref, (found[1], []))[1].append((node, ref))
            per_zone: Counter[str] = Counter()
            for mig, items in by_mig.values():
                per_zone[mig.ref.zone] += len(items)
            pending = self._pending.setdefault(group_id, Counter())
            check_min_sizes(pool.info(), per_zone, in_flight, zone_in_flight, pending)
            mig_pending = self._mig_pending.setdefault(group_id, Counter())
            for mig, items in by_mig.values():  # each MIG keeps its own minimum (several may share a zone)
                room = mig.target_size - mig_pending[mig.ref.name] - mig.min_size
                if len(items) > room:
                    raise MinSizeReached(
                        f"node group {group_id} MIG {mig.ref.name}: min size reached (target size "
                        f"{mig.target_size}, {mig_pending[mig.ref.name]} deletions in flight, min size "
                        f"{mig.min_size}); {'nodes will not be deleted' if room <= 0 else f'at most {room} may go'}",
                        failed_nodes=(),
                    )
            pending.update(per_zone)
            per_mig = Counter({mig.ref.name: len(items) for mig, items in by_mig.values()})
            mig_pending.update(per_mig)
        try:
            self._delete_per_mig(group_id, by_mig)
        finally:
            with self._lock:
                pending.subtract(per_zone)
                mig_pending.subtract(per_mig)

    def _delete_per_mig(
        self, group_id: str, by_mig: Mapping[GceRef, tuple[_Mig, list[tuple[Node, GceRef]]]]
    ) -> None:
        failed: list[str] = []
        errors: list[str] = []
        started: list[tuple[_Mig, list[Node], compute_v1.Operation]] = []
        for key in sorted(by_mig):
            mig, items = by_mig[key]
            for i in range(0, len(items), MAX_INSTANCES_PER_DELETE):
                chunk = items[i : i + MAX_INSTANCES_PER_DELETE]
                chunk_nodes = [n for n, _ in chunk]
                log.info("deleting %s from MIG %s", ", ".join(n.name for n in chunk_nodes), mig.ref.mig_url)
                try:
                    op = self._delete_instances(mig.ref, [r for _, r in chunk])
                except CloudError as e:
                    failed.extend(n.name for n in chunk_nodes)
                    errors.append(str(e))
                    continue
                started.append((mig, chunk_nodes, op))
        for mig, chunk_nodes, op in started:
            try:
                done = self._wait_operation(mig.ref, op)
            except CloudError as e:  # outcome unknown: count the nodes as gone (conservative)
                failed.extend(n.name for n in chunk_nodes)
                errors.append(str(e))
                done = None
            if done is not None and done.error.errors:  # the operation ran and failed: nothing deleted
                detail = "; ".join(f"{e.code}: {e.message}" for e in done.error.errors)
                status = f"HTTP {done.http_error_status_code}: " if done.http_error_status_code else ""
                failed.extend(n.name for n in chunk_nodes)
                errors.append(
                    f"compute.instanceGroupManagers.deleteInstances {mig.ref.project}/{mig.ref.zone}/"
                    f"{mig.ref.name} operation {done.name}: {status}{detail}"
                )
                continue
            with self._lock:
                mig.target_size = max(0, mig.target_size - len(chunk_nodes))
        if failed:
            raise CloudError(f"node group {group_id}: " + "; ".join(errors), failed_nodes=failed)
