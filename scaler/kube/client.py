"""The Kubernetes client plumbing every adapter shares: which API calls scaler makes
(:class:`ApiCall`, :data:`READ_CALLS`), how the ``kubernetes.client.ApiClient`` is built from a
kubeconfig or the in-cluster service account (:func:`make_api_client`), and the errors of a
cluster that cannot be reached or answers badly.

The read side (:mod:`scaler.sources.kube`, :mod:`scaler.sources.watch`), the write side
(:mod:`scaler.kube.writer`), the permission check (:mod:`scaler.kube.permissions`) and the cloud
providers (:mod:`scaler.cloud`) all take these from here.

**Retry-After.** Every client :func:`make_api_client` builds honours a 429's ``Retry-After`` as
client-go does (:mod:`scaler.kube.retry`): GET requests (reads, LISTs, WATCHes) through the
``kubernetes`` client's own client-go retries (``Configuration.client_go_retries``: the
header's delay, up to three retries), every other request through
:func:`~scaler.kube.retry.honour_retry_after`, which the writers call so that the lease fence is
checked again before each retry (urllib3's own Retry-After retries are off: they would resend a
write after the wait without that check). :mod:`scaler.sources.watch` handles the 429s of its
LISTs and WATCHes itself, to mark the kind stale at once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as _k8s_config
from kubernetes.client import ApiClient

from scaler.errors import InputError, TransientError
from scaler.kube.retry import RETRY_AFTER_ATTEMPTS

__all__ = [
    "DRA_GROUP",
    "METRICS_GROUP",
    "READ_CALLS",
    "ApiCall",
    "ClusterUnreachable",
    "LiveSourceError",
    "MetricsUnavailable",
    "NoClusterConfig",
    "make_api_client",
    "unreachable",
]

# The config loaders are untyped in some client versions and typed in none: call them through Any.
k8s_config: Any = _k8s_config

METRICS_GROUP = "metrics.k8s.io"
DRA_GROUP = "resource.k8s.io"
"""Dynamic Resource Allocation's API group (``resource.k8s.io/v1``: Kubernetes 1.34+)."""


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
    (DRA_GROUP, "resourceslices"): "ResourceSlice",
    (DRA_GROUP, "resourceclaims"): "ResourceClaim",
    (DRA_GROUP, "resourceclaimtemplates"): "ResourceClaimTemplate",
    (DRA_GROUP, "deviceclasses"): "DeviceClass",
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
    # Dynamic Resource Allocation: devices, claims, claim templates and classes. Optional: a
    # cluster before 1.34 does not serve resource.k8s.io/v1 (said once, see scaler.sources.kube).
    ApiCall(DRA_GROUP, "v1", "resourceslices", "list", namespaced=False, optional=True),
    ApiCall(DRA_GROUP, "v1", "resourceclaims", "list", namespaced=True, optional=True),
    ApiCall(DRA_GROUP, "v1", "resourceclaimtemplates", "list", namespaced=True, optional=True),
    ApiCall(DRA_GROUP, "v1", "deviceclasses", "list", namespaced=False, optional=True),
    ApiCall(METRICS_GROUP, "v1beta1", "nodes", "list", namespaced=False, optional=False),
    ApiCall(METRICS_GROUP, "v1beta1", "pods", "list", namespaced=True, optional=False),
)
"""Every API call the live source makes, in the order :func:`fetch_objects` makes them."""


def _honour_retry_after_in_reads(cfg: Any) -> None:
    """Set ``cfg`` (a ``kubernetes.client.Configuration``) so that GET requests honour
    ``Retry-After`` (the client's client-go retries, :data:`RETRY_AFTER_ATTEMPTS` attempts) and
    that urllib3 never retries an answer by itself (its default resends PUT and DELETE requests
    after a ``Retry-After`` wait, past the writer's fence)."""
    cfg.retries = urllib3.Retry(RETRY_AFTER_ATTEMPTS - 1, respect_retry_after_header=False)
    cfg.client_go_retries = True


# -- configuration ---------------------------------------------------------------------------------


def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> ApiClient:
    """Build a ``kubernetes.client.ApiClient`` for the cluster to read.

    Looks for, in order: ``kubeconfig`` if given (and only it), else the files in
    ``$KUBECONFIG`` (``os.pathsep``-separated, missing ones skipped), else ``~/.kube/config``,
    else the in-cluster service-account config. Nothing is written back to kubeconfig files.
    Nothing is contacted yet. GET requests honour ``Retry-After`` (see the module docstring).

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
        _honour_retry_after_in_reads(cfg)
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
    _honour_retry_after_in_reads(cfg)
    return ApiClient(configuration=cfg)


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
