"""Before acting: may scaler make every Kubernetes call it will make? (SelfSubjectAccessReview)

The calls come from the lists the code itself keeps, the one source of truth that
``deploy/``'s RBAC is also tested against:

* reads: :data:`scaler.sources.kube.READ_CALLS` (every kind LISTed, the metrics API included) and
  :data:`scaler.sources.watch.WATCH_CALLS` (the watch caches);
* writes: :data:`scaler.kube.writer.DRY_RUN_WRITE_CALLS` (events, the status ConfigMap, the
  leader-election Lease), :data:`scaler.kube.writer.NODE_STATUS_CALLS` when the nodes' verdicts
  are written (``--write-node-status``: by default not with ``--dry-run``) and, unless
  ``--dry-run``, :data:`scaler.kube.writer.ACTUATION_CALLS`
  (taint, cordon, evict) plus the cloud provider's own
  :attr:`~scaler.cloud.base.CloudProvider.kube_calls` (the ``kubernetes`` provider deletes Node
  objects).

Each becomes one ``authorization.k8s.io/v1`` SelfSubjectAccessReview (every authenticated user
may create them: ``system:basic-user``), cluster-wide, except the ConfigMap and the Lease, which
are checked in ``--namespace`` and, for ``get``/``update``, on their names
(``--status-config-map-name``, ``--instance-name``) as the Role grants them. This is what
``kubectl auth can-i`` asks. A missing permission is found before anything is tainted, instead
of as a 403 after a node was drained.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import urllib3
from kubernetes.client import ApiClient, AuthorizationV1Api
from kubernetes.client.exceptions import ApiException

from scaler.config import ScalerConfig
from scaler.kube.client import READ_CALLS, ApiCall, LiveSourceError, unreachable
from scaler.kube.raw import read_json
from scaler.kube.retry import honour_retry_after
from scaler.kube.writer import ACTUATION_CALLS, DRY_RUN_WRITE_CALLS, NODE_STATUS_CALLS
from scaler.sources.watch import WATCH_CALLS

__all__ = [
    "Permission",
    "PermissionCheckError",
    "missing_permissions",
    "required_calls",
    "required_permissions",
]


@dataclass(frozen=True, slots=True)
class Permission:
    """One call as RBAC sees it, where it is made: ``namespace`` ``""`` is cluster-wide (every
    namespace), ``name`` ``""`` any object."""

    call: ApiCall
    namespace: str = ""
    name: str = ""

    @property
    def display(self) -> str:
        """``verb resource[.group][/name][ in namespace]``, as ``kubectl auth can-i`` takes it
        (``delete nodes``, ``create pods/eviction``, ``update leases.coordination.k8s.io/scaler
        in scaler-system``)."""
        text = f"{self.call.verb} {self.call.display}" + (f"/{self.name}" if self.name else "")
        return text + (f" in {self.namespace}" if self.namespace else "")


class PermissionCheckError(LiveSourceError):
    """The permission check itself could not be made (the API server refused or failed the
    SelfSubjectAccessReview); the message names the permission and the status."""


def required_calls(
    provider_calls: Sequence[ApiCall], dry_run: bool, node_status: bool | None = None
) -> tuple[ApiCall, ...]:
    """Every Kubernetes call ``scaler run`` makes with a cloud provider that makes
    ``provider_calls`` itself; with ``dry_run`` only the dry-run's calls (no actuation, no
    provider writes). ``node_status``: whether the nodes' verdicts are written (``None``: the
    default, yes unless ``dry_run``). Duplicates removed, first occurrence kept."""
    status = (*NODE_STATUS_CALLS,) if (not dry_run if node_status is None else node_status) else ()
    if dry_run:
        writes: tuple[ApiCall, ...] = (*status, *DRY_RUN_WRITE_CALLS)
    else:
        writes = (*ACTUATION_CALLS, *status, *DRY_RUN_WRITE_CALLS, *provider_calls)
    seen: dict[tuple[str, str, str], ApiCall] = {}
    for call in (*READ_CALLS, *WATCH_CALLS, *writes):
        seen.setdefault((call.group, call.resource, call.verb), call)
    return tuple(seen.values())


_OWN_OBJECTS = {
    ("", "configmaps"): "status_config_map_name",
    ("coordination.k8s.io", "leases"): "instance_name",
}
"""Resources scaler only touches in ``--namespace``, by the configuration key naming its object."""


def required_permissions(
    config: ScalerConfig, provider_calls: Sequence[ApiCall], dry_run: bool
) -> tuple[Permission, ...]:
    """:func:`required_calls` placed where they are made (see the module docstring)."""
    out = []
    for call in required_calls(provider_calls, dry_run, config.writes_node_status(dry_run)):
        key = _OWN_OBJECTS.get((call.group, call.resource))
        if key is None:
            out.append(Permission(call))
        else:
            name = str(getattr(config, key)) if call.verb in ("get", "update") else ""
            out.append(Permission(call, config.namespace, name))
    return tuple(out)


def _review(permission: Permission) -> dict[str, Any]:
    resource, _, subresource = permission.call.resource.partition("/")
    attributes = {"group": permission.call.group, "resource": resource, "verb": permission.call.verb}
    if subresource:
        attributes["subresource"] = subresource
    if permission.namespace:
        attributes["namespace"] = permission.namespace
    if permission.name:
        attributes["name"] = permission.name
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


def missing_permissions(
    api: ApiClient, permissions: Iterable[Permission], timeout_seconds: float = 30.0
) -> list[Permission]:
    """The ``permissions`` the client's identity lacks, one SelfSubjectAccessReview each.

    Raises:
        ClusterUnreachable: the API server cannot be reached.
        PermissionCheckError: a review was refused or failed (HTTP error).
    """
    authz = AuthorizationV1Api(api)
    missing = []
    for permission in permissions:
        try:
            resp = honour_retry_after(
                lambda p=permission: authz.create_self_subject_access_review(  # type: ignore[misc]
                    cast(Any, _review(p)), _preload_content=False, _request_timeout=timeout_seconds
                ),
                what=f"SelfSubjectAccessReview of {permission.display}",
            )
        except ApiException as e:
            if not e.status:
                raise unreachable(api, "permission check", e) from None
            try:
                message = json.loads(e.body or "").get("message") or e.reason
            except (ValueError, AttributeError, RecursionError):
                message = e.reason
            raise PermissionCheckError(
                f"cannot check permission {permission.display} (SelfSubjectAccessReview): HTTP {e.status} {message}"
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as e:
            raise unreachable(api, "permission check", e) from None
        status = read_json(resp).get("status") or {}
        if not status.get("allowed") or status.get("denied"):
            missing.append(permission)
    return missing
