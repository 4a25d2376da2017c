"""What the controller needs from the outside: a cloud (node groups, node deletion) and a
Kubernetes writer (taints, evictions, events, status).

A *node group* is a GKE node pool (label ``cloud.google.com/gke-nodepool``). Providers:
:class:`scaler.cloud.gke.GKEProvider` (node pools and their MIGs through the GKE and Compute
Engine APIs) and :class:`scaler.cloud.kubernetes.KubernetesProvider` (Node objects only).

This mirrors cluster-autoscaler's ``cloudprovider.CloudProvider`` / ``NodeGroup`` (see the
reference, §6: ``cloudprovider/gce/gce_cloud_provider.go``), cut down to scale-down.

:class:`ClusterWriter` is every Kubernetes write the actuator and the controller make:
:class:`scaler.kube.writer.KubeWriter` on a real API server, :class:`scaler.replay.sim_cluster.SimWriter`
in a replay. A node is deleted in one place only, :meth:`CloudProvider.delete_nodes` (on GKE
through its MIG; with the ``kubernetes`` provider by deleting the Node object).

:func:`call_with_retries` is the one retry loop (tenacity) both providers run their API calls in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from scaler.errors import ScalerError
from scaler.eviction.executor import Evictor
from scaler.kube.client import ApiCall
from scaler.kube.writer import ObjectRef
from scaler.model.records import Node, Pod

__all__ = [
    "CHECK_CALLS",
    "DELETE_CALLS",
    "IAM_PERMISSIONS",
    "READ_CALLS",
    "CloudError",
    "CloudProvider",
    "ClusterWriter",
    "MigInfo",
    "MinSizeReached",
    "NodeChanged",
    "NodeGroupInfo",
    "ZoneGroupInfo",
    "call_with_retries",
    "check_min_size",
    "check_min_sizes",
    "check_zone_min_size",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

# The Google API methods :class:`scaler.cloud.gke.GKEProvider` calls. The provider's client layer
# refuses any call not listed here, so these lists are the complete set (deploy/gke/iam-role.yaml
# must grant the permissions of :data:`IAM_PERMISSIONS` for them).
READ_CALLS: tuple[str, ...] = (
    "container.clusters.nodePools.list",
    "compute.instanceGroupManagers.get",
)
"""The Google API methods every evaluation reads with (a dry-run makes no other): node pools of
the cluster (``projects.locations.clusters.nodePools.list``) and a MIG's ``targetSize``
(``instanceGroupManagers.get``)."""

DELETE_CALLS: tuple[str, ...] = (
    "compute.instanceGroupManagers.deleteInstances",
    "compute.zoneOperations.wait",
)
"""The Google API methods of a deletion, made only by an active controller:
``instanceGroupManagers.deleteInstances`` (mutating; CA:
``cloudprovider/gce/autoscaling_gce_client.go`` ``DeleteInstances``) and waiting for its zone
operation (``zoneOperations.wait``)."""

CHECK_CALLS: tuple[str, ...] = ("cloudresourcemanager.projects.testIamPermissions",)
"""Google API methods that check permissions before acting: Resource Manager's
``projects.testIamPermissions`` (needs no permission of its own). Compute Engine v1 offers no
``testIamPermissions`` for managed instance groups and GKE none for clusters, so the project is
what can be asked; the IAM role is granted on the project (docs/getting-started/install-gke.md)."""

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
class MigInfo:
    """One managed instance group of a node pool and its limits, in nodes (GKE). A large pool
    can have several MIGs in one zone; each keeps its own minimum (CA's GCE provider makes each
    MIG a node group of its own).

    Attributes:
        name: the MIG's name (``gke-<cluster>-<pool>-<hash>-grp``).
        base_name: its base instance name: its instances are named ``<base_name>-<suffix>``.
        zone: its zone.
        min_size, max_size: its limits.
        target_size: its ``targetSize``.
    """

    name: str
    base_name: str
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
        migs: the pool's MIGs with their own limits, sorted by name; empty when the provider
            knows none (only the GKE provider does).
    """

    id: str
    min_size: int
    max_size: int
    target_size: int
    zones: tuple[str, ...] = ()
    zone_groups: tuple[ZoneGroupInfo, ...] = ()
    migs: tuple[MigInfo, ...] = ()

    def zone_group(self, zone: str) -> ZoneGroupInfo | None:
        """The pool in ``zone``, or ``None`` when the provider knows no such zone of it."""
        return next((z for z in self.zone_groups if z.zone == zone), None)


class CloudError(ScalerError):
    """A cloud API call failed (after retries where the failure was retryable), or a request
    could not be made (unknown group, node outside the group). The message names the call, the
    resource and the HTTP status.

    ``failed_nodes`` names the nodes of a :meth:`CloudProvider.delete_nodes` call that may not
    have been deleted (empty when not applicable).
    """

    def __init__(self, message: str, *, failed_nodes: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.failed_nodes: tuple[str, ...] = tuple(failed_nodes)


class NodeChanged(CloudError):
    """:meth:`CloudProvider.delete_nodes` refused: a node changed after the caller verified it
    (its ``resource_version`` precondition failed). Nothing of that node was deleted; the
    caller may verify again."""


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


def check_min_sizes(
    group: NodeGroupInfo,
    per_zone: Mapping[str, int],
    in_flight: int = 0,
    zone_in_flight: Mapping[str, int] | None = None,
    pending: Mapping[str, int] | None = None,
) -> None:
    """Refuse deleting ``per_zone[z]`` nodes in each zone ``z`` of ``group``: :func:`check_min_size`
    for the whole group and :func:`check_zone_min_size` for each zone.

    Args:
        group: the group as last read.
        per_zone: zone → nodes to delete there.
        in_flight, zone_in_flight: deletions started elsewhere (the caller's), in all and per
            zone (``None``: unknown per zone; ``in_flight`` is then taken for each zone).
        pending: zone → nodes of the provider's own deletions still running.

    Raises:
        MinSizeReached: see :func:`check_min_size`, :func:`check_zone_min_size`.
    """
    pending = pending or {}
    check_min_size(group, sum(per_zone.values()), in_flight + sum(pending.values()))
    for zone, count in sorted(per_zone.items()):
        elsewhere = in_flight if zone_in_flight is None else zone_in_flight.get(zone, 0)
        check_zone_min_size(group, zone, count, elsewhere + pending.get(zone, 0))


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
        taken to be in each node's zone). A node with a ``resource_version`` is deleted only at
        that version where the cloud can make it a precondition (the Node object's delete).

        Raises:
            NodeChanged: a node's ``resource_version`` precondition failed.
            MinSizeReached: the group, or the zone of one of the nodes, is at its min size (see
                :func:`check_min_size`, :func:`check_zone_min_size`); nothing was deleted.
            CloudError: unknown group, a node outside the group, or an API failure after retries;
                ``failed_nodes`` names the nodes that may remain.
        """
        ...


@runtime_checkable
class ClusterWriter(Protocol):
    """Every Kubernetes write the actuator (:class:`scaler.actuation.actuator.Actuator`) and the
    controller (:class:`scaler.controller.Controller`) make, and the pod reads that verify a
    drain. Node deletion is not here: it belongs to :meth:`CloudProvider.delete_nodes`.

    Implemented by :class:`scaler.kube.writer.KubeWriter` (the API server) and
    :class:`scaler.replay.sim_cluster.SimWriter` (a replay's in-memory cluster). Times are Unix
    seconds.
    """

    def mark_to_be_deleted(self, name: str, now: float) -> None:
        """Taint node ``name`` ``ToBeDeletedByClusterAutoscaler=<now>:NoSchedule``, cordon it and
        annotate it as this scaler's (state ``tainted``).

        Raises:
            scaler.kube.writer.WriteError: the node is gone or the write failed.
        """
        ...

    def set_state(self, name: str, state: str) -> None:
        """Set the ``scaler.io/scale-down-state`` annotation of node ``name``.

        Raises:
            scaler.kube.writer.WriteError: the write failed.
        """
        ...

    def clean_to_be_deleted(self, name: str, replica: str | None = None) -> bool:
        """Undo :meth:`mark_to_be_deleted` on node ``name`` if it carries this instance's marks
        made by ``replica`` (default: this replica); ``False`` when the node is gone.

        Raises:
            scaler.kube.writer.WriteError: the write failed.
        """
        ...

    def get_node(self, name: str) -> dict[str, Any] | None:
        """Node ``name`` read fresh (its JSON), ``None`` when it does not exist.

        Raises:
            scaler.kube.writer.WriteError: the read failed.
        """
        ...

    def verify_marked(self, name: str, state: str) -> str:
        """Read node ``name`` fresh: still tainted and cordoned by this replica, in ``state``?
        Returns its resourceVersion (``""`` where there is none).

        Raises:
            scaler.kube.writer.NotOwned: it is not, or the node is gone.
            scaler.kube.writer.WriteError: the read failed.
        """
        ...

    def adopt(self, name: str, replica: str) -> None:
        """Make node ``name``, marked by ``replica`` of this instance, this replica's.

        Raises:
            scaler.kube.writer.NotOwned: its marks are not ``replica``'s, or it is gone.
            scaler.kube.writer.WriteError: the write failed.
        """
        ...

    def pod_gone(self, pod: Pod) -> bool:
        """True when ``pod`` no longer runs on its node (gone, recreated, or moved)."""
        ...

    def pods_on_node(self, name: str) -> list[dict[str, Any]]:
        """The raw Pod objects bound to node ``name`` now (a fresh read).

        Raises:
            scaler.kube.writer.WriteError: the read failed.
        """
        ...

    def evict_once(self, pod: Pod, grace_seconds: int) -> tuple[bool, int | None, str]:
        """One policy/v1 eviction of ``pod``: (success, HTTP status or ``None``, message)."""
        ...

    def evictor(
        self,
        max_pod_eviction_time: float,
        max_graceful_termination_sec: int,
        stop: threading.Event | None = None,
        *,
        reason: str = "ScaleDown",
    ) -> Evictor:
        """An :data:`~scaler.eviction.executor.Evictor` that retries one pod's eviction for up to
        ``max_pod_eviction_time`` seconds, with grace periods capped at
        ``max_graceful_termination_sec``; ``reason`` (``ScaleDown`` or ``HotNodeRelief``) names
        the events it records on the pods."""
        ...

    def mark_hot(self, name: str, now: float) -> None:
        """Put hot-node relief's soft taint ``scaler.io/hot=<now>:PreferNoSchedule`` on node
        ``name`` (kept with its first timestamp when already there), annotated as this
        scaler's.

        Raises:
            scaler.kube.writer.WriteError: the node is gone or the write failed.
        """
        ...

    def clean_hot(self, name: str) -> bool:
        """Undo :meth:`mark_hot` on node ``name``; ``False`` when the node is gone.

        Raises:
            scaler.kube.writer.WriteError: the write failed.
        """
        ...

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Record an Event (``Normal`` or ``Warning``) about ``ref``; best effort."""
        ...

    def write_config_map(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        """Create or replace ConfigMap ``namespace/name`` (the status ConfigMap).

        Raises:
            scaler.kube.writer.WriteError: the write failed.
        """
        ...

    def set_node_status(self, name: str, annotation: str, label: str) -> bool:
        """Set node ``name``'s ``scaler.io/scale-down-status`` annotation and label (its current
        verdict); ``False`` when the node is gone.

        Raises:
            scaler.kube.writer.WriteError: the write failed.
        """
        ...


def call_with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    retryable: Callable[[BaseException], bool],
    max_attempts: int,
    wait_seconds: float,
    wait_at_least: Callable[[BaseException], float | None] | None = None,
) -> T:
    """Run ``fn`` (one API request), again after ``wait_seconds`` while it raises an exception
    that ``retryable`` accepts, at most ``max_attempts`` times in all; each retry is logged as a
    warning naming ``what`` (the call and its resource). ``wait_at_least`` may ask a longer
    wait for an exception (a 429's ``Retry-After``: :func:`scaler.kube.retry.retry_after`).

    Returns:
        What ``fn`` returned.

    Raises:
        Exception: the last exception ``fn`` raised, unchanged (a non-retryable one at once).
    """

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s: attempt %d failed (%s); retrying", what, state.attempt_number, exc)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = wait_at_least(exc) if wait_at_least is not None and exc is not None else None
        return max(wait_seconds, asked or 0.0)

    retrying = Retrying(
        stop=stop_after_attempt(max(1, max_attempts)),
        wait=wait,
        retry=retry_if_exception(retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(fn)
