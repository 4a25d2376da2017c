"""What the controller needs from a cloud: node groups with their sizes, and node deletion.

A *node group* is a GKE node pool (label ``cloud.google.com/gke-nodepool``). Providers:
:class:`scaler.cloud.gke.GKEProvider` (node pools and their MIGs through the GKE and Compute
Engine APIs) and :class:`scaler.cloud.kubernetes.KubernetesProvider` (Node objects only).

This mirrors cluster-autoscaler's ``cloudprovider.CloudProvider`` / ``NodeGroup`` (see the
reference, §6: ``cloudprovider/gce/gce_cloud_provider.go``), cut down to scale-down.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scaler.model.records import Node

if TYPE_CHECKING:
    from scaler.sources.kube import ApiCall

__all__ = [
    "CHECK_CALLS",
    "DELETE_CALLS",
    "IAM_PERMISSIONS",
    "READ_CALLS",
    "CloudError",
    "CloudProvider",
    "MinSizeReached",
    "NodeGroupInfo",
    "check_min_size",
]

# The Google API methods :class:`scaler.cloud.gke.GKEProvider` calls. The provider's client layer
# refuses any call not listed here, so these lists are the complete set (deploy/gke/iam-role.yaml
# must grant the permissions of :data:`IAM_PERMISSIONS` for them).
READ_CALLS: tuple[str, ...] = (
    "container.clusters.nodePools.list",
    "compute.instanceGroupManagers.get",
    "compute.zoneOperations.wait",
)
"""Read-only Google API methods: node pools of the cluster (``projects.locations.clusters.
nodePools.list``), a MIG's ``targetSize`` (``instanceGroupManagers.get``), and waiting for a zone
operation (``zoneOperations.wait``)."""

DELETE_CALLS: tuple[str, ...] = ("compute.instanceGroupManagers.deleteInstances",)
"""Mutating Google API methods: ``instanceGroupManagers.deleteInstances`` (CA:
``cloudprovider/gce/autoscaling_gce_client.go`` ``DeleteInstances``)."""

CHECK_CALLS: tuple[str, ...] = ("cloudresourcemanager.projects.testIamPermissions",)
"""Google API methods that check permissions before acting: Resource Manager's
``projects.testIamPermissions`` (needs no permission of its own). Compute Engine v1 offers no
``testIamPermissions`` for managed instance groups and GKE none for clusters, so the project is
what can be asked; the IAM role is granted on the project (docs/gke.md)."""

IAM_PERMISSIONS: Mapping[str, str] = {
    "container.clusters.nodePools.list": "container.clusters.get",
    "compute.instanceGroupManagers.get": "compute.instanceGroupManagers.get",
    "compute.zoneOperations.wait": "compute.zoneOperations.get",
    "compute.instanceGroupManagers.deleteInstances": "compute.instanceGroupManagers.update",
}
"""The IAM permission each call in :data:`READ_CALLS` / :data:`DELETE_CALLS` requires (from each
method's "Authorization requires the following IAM permission" in the API reference)."""


@dataclass(frozen=True, slots=True)
class NodeGroupInfo:
    """A node group (GKE node pool) and its size limits, in nodes.

    Attributes:
        id: the node pool name (value of ``cloud.google.com/gke-nodepool``).
        min_size: the smallest size scale-down may leave (nodes, whole pool).
        max_size: the largest size (nodes, whole pool); informative for scale-down.
        target_size: the current size: sum of the pool's MIG ``targetSize`` (GKE), or the
            number of Node objects of the pool (Kubernetes provider).
        zones: the zones of the pool's MIGs (GKE), sorted; empty when unknown.
    """

    id: str
    min_size: int
    max_size: int
    target_size: int
    zones: tuple[str, ...] = ()


class CloudError(Exception):
    """A cloud API call failed (after retries where the failure was retryable), or a request
    could not be made (unknown group, node outside the group). The message names the call, the
    resource and the HTTP status.

    ``failed_nodes`` names the nodes of a :meth:`CloudProvider.delete_nodes` call that may not
    have been deleted (empty when not applicable).
    """

    def __init__(self, message: str, *, failed_nodes: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.failed_nodes: tuple[str, ...] = tuple(failed_nodes)


class MinSizeReached(CloudError):
    """:meth:`CloudProvider.delete_nodes` refused: the group is at (or would go below) its
    minimum size. Nothing was deleted. (CA: ``gceMig.DeleteNodes`` in
    ``cloudprovider/gce/gce_cloud_provider.go``, "min size reached, nodes will not be deleted".)"""


def check_min_size(group: NodeGroupInfo, count: int, in_flight: int) -> None:
    """Refuse deleting ``count`` nodes of ``group`` with ``in_flight`` deletions already under way.

    CA refuses when ``targetSize <= minSize``; scaler also subtracts the deletions in flight and
    never deletes more than ``target - in_flight - min`` nodes in one call.

    Raises:
        MinSizeReached: ``target - in_flight <= min``, or ``count > target - in_flight - min``.
    """
    room = group.target_size - in_flight - group.min_size
    if room <= 0:
        raise MinSizeReached(
            f"node group {group.id}: min size reached (target size {group.target_size}, "
            f"{in_flight} deletions in flight, min size {group.min_size}); nodes will not be deleted",
            failed_nodes=(),
        )
    if count > room:
        raise MinSizeReached(
            f"node group {group.id}: deleting {count} nodes would go below min size {group.min_size} "
            f"(target size {group.target_size}, {in_flight} deletions in flight; at most {room} may go)",
            failed_nodes=(),
        )


@runtime_checkable
class CloudProvider(Protocol):
    """The scale-down surface of a cloud (CA's ``CloudProvider`` + ``NodeGroup``).

    ``name`` identifies the provider (``gke``, ``kubernetes``). ``kube_calls`` are the
    Kubernetes API calls the provider makes itself, beyond the controller's own (for RBAC and the
    start-up permission check: the ``kubernetes`` provider deletes Node objects, the ``gke``
    provider makes none). Groups are read by :meth:`refresh`, once per control loop, and served
    from that cache until the next one.
    """

    name: str
    kube_calls: tuple[ApiCall, ...]

    def refresh(self) -> None:
        """Re-read the node groups and their sizes (one round of API reads).

        Raises:
            CloudError: the reads failed after retries.
        """
        ...

    def node_group_for(self, node: Node) -> NodeGroupInfo | None:
        """The group ``node`` belongs to, or ``None`` when it is in none the provider manages."""
        ...

    def node_groups(self) -> list[NodeGroupInfo]:
        """Every group, sorted by id, as of the last :meth:`refresh`."""
        ...

    def missing_permissions(self, dry_run: bool) -> str:
        """Check, where the cloud's API allows it, that the provider may make the calls it will
        make (with ``dry_run``: its reads only). ``""`` when nothing is missing or nothing can be
        checked, else one line naming each missing permission and the call that needs it.
        Never raises: a check that cannot be made is logged and passes."""
        ...

    def delete_nodes(self, group_id: str, nodes: Sequence[Node], in_flight: int = 0) -> None:
        """Delete ``nodes``, all of group ``group_id``; returns once the cloud accepted the deletion.

        ``in_flight``: deletions of this group started elsewhere and not yet reflected in its
        ``target_size`` (this provider's own completed and running deletions are already counted).

        Raises:
            MinSizeReached: the group is at its min size (see :func:`check_min_size`); nothing
                was deleted.
            CloudError: unknown group, a node outside the group, or an API failure after retries;
                ``failed_nodes`` names the nodes that may remain.
        """
        ...
