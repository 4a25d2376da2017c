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
from typing import Protocol, runtime_checkable

from scaler.model.records import Node

__all__ = [
    "DELETE_CALLS",
    "IAM_PERMISSIONS",
    "READ_CALLS",
    "CloudError",
    "CloudProvider",
    "MinSizeReached",
    "NodeGroupInfo",
    "ZoneGroupInfo",
    "check_min_size",
    "check_zone_min_size",
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

IAM_PERMISSIONS: Mapping[str, str] = {
    "container.clusters.nodePools.list": "container.clusters.get",
    "compute.instanceGroupManagers.get": "compute.instanceGroupManagers.get",
    "compute.zoneOperations.wait": "compute.zoneOperations.get",
    "compute.instanceGroupManagers.deleteInstances": "compute.instanceGroupManagers.update",
}
"""The IAM permission each call in :data:`READ_CALLS` / :data:`DELETE_CALLS` requires (from each
method's "Authorization requires the following IAM permission" in the API reference)."""


@dataclass(frozen=True, slots=True)
class ZoneGroupInfo:
    """A node group in one zone (on GKE: the node pool's MIG there) and its limits, in nodes.

    Attributes:
        zone: the zone (``topology.kubernetes.io/zone`` of its nodes).
        min_size: the smallest size scale-down may leave in this zone.
        max_size: the largest size in this zone; informative for scale-down.
        target_size: the current size in this zone (the MIG's ``targetSize`` on GKE).
    """

    zone: str
    min_size: int
    max_size: int
    target_size: int


@dataclass(frozen=True, slots=True)
class NodeGroupInfo:
    """A node group (GKE node pool) and its size limits, in nodes.

    A GKE node pool's autoscaling limits are per zone (``minNodeCount``/``maxNodeCount``: one
    MIG per zone, each a node group of its own for CA's GCE provider), optionally with
    whole-pool limits (``totalMinNodeCount``/``totalMaxNodeCount``). Both levels are kept:
    scale-down leaves at least ``min_size`` nodes in the pool *and* at least each zone's
    ``min_size`` in that zone.

    Attributes:
        id: the node pool name (value of ``cloud.google.com/gke-nodepool``).
        min_size: the smallest size scale-down may leave in the whole pool (its total minimum;
            0 when the pool's minimums are per zone).
        max_size: the largest size (nodes, whole pool); informative for scale-down.
        target_size: the current size: sum of the pool's MIG ``targetSize`` (GKE), or the
            number of Node objects of the pool (Kubernetes provider).
        zones: the zones of the pool's MIGs (GKE), sorted; empty when unknown.
        zone_groups: the pool in each zone with its own limits, sorted by zone; empty when the
            provider knows no zones.
    """

    id: str
    min_size: int
    max_size: int
    target_size: int
    zones: tuple[str, ...] = ()
    zone_groups: tuple[ZoneGroupInfo, ...] = ()

    def zone_group(self, zone: str) -> ZoneGroupInfo | None:
        """The pool in ``zone``, or ``None`` when the provider knows no such zone of it."""
        return next((z for z in self.zone_groups if z.zone == zone), None)


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


def check_zone_min_size(group: NodeGroupInfo, zone: str, count: int, in_flight: int) -> None:
    """Refuse deleting ``count`` nodes of ``group`` in ``zone`` with ``in_flight`` deletions of
    that zone already under way: :func:`check_min_size` for one zone (on GKE, one MIG: CA's
    ``gceMig.DeleteNodes`` refuses at the MIG's ``minSize``). A zone the group does not know is
    not checked.

    Raises:
        MinSizeReached: ``target - in_flight <= min`` in the zone, or ``count`` exceeds the room.
    """
    z = group.zone_group(zone)
    if z is None:
        return
    room = z.target_size - in_flight - z.min_size
    if room <= 0 or count > room:
        raise MinSizeReached(
            f"node group {group.id} zone {zone}: min size reached (target size {z.target_size}, "
            f"{in_flight} deletions in flight, min size {z.min_size} per zone); "
            f"{'nodes will not be deleted' if room <= 0 else f'at most {room} may go'}",
            failed_nodes=(),
        )


@runtime_checkable
class CloudProvider(Protocol):
    """The scale-down surface of a cloud (CA's ``CloudProvider`` + ``NodeGroup``).

    ``name`` identifies the provider (``gke``, ``kubernetes``). Groups are read by
    :meth:`refresh`, once per control loop, and served from that cache until the next one.
    """

    name: str

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

    def delete_nodes(
        self,
        group_id: str,
        nodes: Sequence[Node],
        in_flight: int = 0,
        zone_in_flight: Mapping[str, int] | None = None,
    ) -> None:
        """Delete ``nodes``, all of group ``group_id``; returns once the cloud accepted the deletion.

        ``in_flight``: deletions of this group started elsewhere and not yet reflected in its
        ``target_size`` (this provider's own completed and running deletions are already counted);
        ``zone_in_flight``: the same per zone (``None``: unknown, every one of ``in_flight`` is
        taken to be in each node's zone).

        Raises:
            MinSizeReached: the group, or the zone of one of the nodes, is at its min size (see
                :func:`check_min_size`, :func:`check_zone_min_size`); nothing was deleted.
            CloudError: unknown group, a node outside the group, or an API failure after retries;
                ``failed_nodes`` names the nodes that may remain.
        """
        ...
