"""What the controller talks to in a replay, applied to a :class:`scaler.replay.world.World`.

:class:`SimWriter` stands in for the Kubernetes writes (:class:`scaler.kube.writer.KubeWriter`),
:class:`SimCloud` for the cloud provider (node pools and their sizes, deletions checked against
min sizes with :func:`scaler.cloud.base.check_min_sizes`, per zone too).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scaler.cloud.base import CloudError, NodeGroupInfo, check_min_sizes
from scaler.eviction.executor import Evictor
from scaler.kube.client import ApiCall
from scaler.kube.writer import ANNOTATION_OWNER, ANNOTATION_STATE, NotOwned, ObjectRef
from scaler.model.records import Node, Pod

if TYPE_CHECKING:
    from scaler.replay.world import World

__all__ = ["SimCloud", "SimWriter"]


class SimWriter:
    """The Kubernetes writes the controller and actuator make, applied to a :class:`World`
    (a :class:`scaler.cloud.base.ClusterWriter`, standing in for
    :class:`scaler.kube.writer.KubeWriter`; events and the status ConfigMap are counted, not
    stored)."""

    def __init__(self, world: World, instance: str) -> None:
        self.world = world
        self.instance = instance
        self.events: dict[str, int] = {}

    def mark_to_be_deleted(self, name: str, now: float) -> None:
        """See :meth:`World.mark_to_be_deleted`."""
        self.world.mark_to_be_deleted(name, now, self.instance)

    def set_state(self, name: str, state: str) -> None:
        """See :meth:`World.set_state`."""
        self.world.set_state(name, state)

    def clean_to_be_deleted(self, name: str, replica: str | None = None) -> bool:
        """See :meth:`World.clean_to_be_deleted` (a replay has one replica)."""
        return self.world.clean_to_be_deleted(name)

    def get_node(self, name: str) -> dict[str, Any] | None:
        """The node's name and annotations as JSON, ``None`` when it is gone."""
        node = self.world.nodes.get(name)
        return None if node is None else {"metadata": {"name": name, "annotations": dict(node.annotations)}}

    def verify_marked(self, name: str, state: str) -> str:
        """The node still exists, tainted by this instance, in ``state``; ``""`` (no versions).

        Raises:
            NotOwned: it does not.
        """
        node = self.world.nodes.get(name)
        if node is None:
            raise NotOwned(f"verify node {name}: node not found")
        if (
            node.annotations.get(ANNOTATION_OWNER) != self.instance
            or node.annotations.get(ANNOTATION_STATE) != state
        ):
            raise NotOwned(f"verify node {name}: not marked {state} by {self.instance}")
        return ""

    def adopt(self, name: str, replica: str) -> None:
        """Nothing to take over: a replay has one replica.

        Raises:
            NotOwned: the node is gone.
        """
        if name not in self.world.nodes:
            raise NotOwned(f"adopt node {name}: node not found")

    def pod_gone(self, pod: Pod) -> bool:
        """See :meth:`World.pod_gone`."""
        return self.world.pod_gone(pod)

    def pods_on_node(self, name: str) -> list[dict[str, Any]]:
        """See :meth:`World.pods_on_node`."""
        return self.world.pods_on_node(name)

    def evict_once(self, pod: Pod, grace_seconds: int) -> tuple[bool, int | None, str]:
        """One eviction (always accepted)."""
        self.world.evict(pod)
        return True, 201, "evicted"

    def evictor(
        self,
        max_pod_eviction_time: float,
        max_graceful_termination_sec: int,
        stop: threading.Event | None = None,
        *,
        reason: str = "ScaleDown",
    ) -> Evictor:
        """An evictor that evicts in the world at once (pod events are not counted: the node's
        events are)."""
        return self.world.evict

    def mark_hot(self, name: str, now: float) -> None:
        """See :meth:`World.mark_hot`."""
        self.world.mark_hot(name, now, self.instance)

    def clean_hot(self, name: str) -> bool:
        """See :meth:`World.clean_hot`."""
        return self.world.clean_hot(name)

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """Count the event by reason."""
        self.events[reason] = self.events.get(reason, 0) + 1

    def write_config_map(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        """The status ConfigMap is not kept in a replay."""

    def set_node_status(self, name: str, annotation: str, label: str) -> bool:
        """Nodes' status annotations are not kept in a replay."""
        return True


class SimCloud:
    """The node pools of a :class:`World` as a :class:`scaler.cloud.base.CloudProvider`:
    target size = nodes of the pool plus nodes being provisioned; min and max per zone from
    ``--nodes`` (min 0 and max 1000 without; :meth:`World.zone_groups`)."""

    name = "replay"
    kube_calls: tuple[ApiCall, ...] = ()

    def __init__(self, world: World) -> None:
        self.world = world
        self.deleted: list[str] = []

    def refresh(self) -> None:
        """Nothing to read: sizes are always current."""

    def missing_permissions(self, dry_run: bool) -> str:
        """Nothing to check in a replay."""
        return ""

    def node_groups(self) -> list[NodeGroupInfo]:
        """Every pool with its size, sorted by name."""
        limits = self.world._pool_limits()
        sizes = self.world.pool_sizes()
        return [
            NodeGroupInfo(
                pool,
                limits[pool][0],
                limits[pool][1],
                sizes.get(pool, 0),
                self.world.templates[pool].zones,
                self.world.zone_groups(pool),
            )
            for pool in sorted(self.world.templates)
        ]

    def node_group_for(self, node: Node) -> NodeGroupInfo | None:
        """The pool of ``node``."""
        return next((g for g in self.node_groups() if g.id == node.node_group), None)

    def delete_nodes(
        self,
        group_id: str,
        nodes: Sequence[Node],
        in_flight: int = 0,
        zone_in_flight: Mapping[str, int] | None = None,
    ) -> None:
        """Delete ``nodes`` of pool ``group_id``, refusing below the pool's minimum or a zone's.

        Raises:
            MinSizeReached: the pool, or the zone of a node, is at its minimum.
            CloudError: unknown pool or a node outside it.
        """
        group = next((g for g in self.node_groups() if g.id == group_id), None)
        if group is None:
            raise CloudError(f"unknown node group {group_id!r}")
        for n in nodes:
            if n.node_group != group_id:
                raise CloudError(f"node {n.name} is not in node group {group_id}", failed_nodes=[n.name])
        check_min_sizes(group, Counter(n.zone for n in nodes), in_flight, zone_in_flight)
        for n in nodes:
            self.world.delete_node(n.name)
            self.deleted.append(n.name)
