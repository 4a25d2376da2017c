"""The replay world's store of objects: its nodes, pods, pending pods and Dynamic Resource
Allocation objects, numbered by one revision counter (:class:`~scaler.replay.world_index.
WorldIndex`), and the Kubernetes writes the actuator makes on them
(:class:`~scaler.replay.sim_cluster.SimWriter` calls them): taint and cordon, annotate, evict,
list a node's pods, delete a node. The other parts of the world build on it, each in its module:
the usage model (:mod:`~scaler.replay.world_usage`), the scheduler
(:mod:`~scaler.replay.world_scheduler`) and the cloud's scale-up
(:mod:`~scaler.replay.world_scaleup`); :class:`scaler.replay.world.World` is all of them.

An evicted pod of a controller is replaced at once by a pending pod of the same name, uid (so
the same usage slot) and usage series, created at the eviction time and requesting what its spec
requests (a replacement carries no in-place resize status); bare pods and DaemonSet or mirror
pods are not replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from msgspec.structs import replace as replace_pod

from scaler.config import ScalerConfig
from scaler.eviction.executor import EvictResult
from scaler.kube.writer import (
    ANNOTATION_HOT_OWNER,
    ANNOTATION_OWNER,
    ANNOTATION_STATE,
    ANNOTATION_WAS_UNSCHEDULABLE,
    STATE_TAINTED,
    TAINT_HOT,
    WriteError,
)
from scaler.model.dra import DraObjects
from scaler.model.records import TAINT_TO_BE_DELETED, Node, Pod, Taint
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_micro_time as format_time
from scaler.replay import sim_dra
from scaler.replay.sim_records import StepStats, UsageTable
from scaler.replay.world_index import TrackedDict, WorldIndex

__all__ = ["WorldSpec", "WorldStore"]


@dataclass(frozen=True)
class WorldSpec:
    """What a world is built from: :class:`scaler.replay.world.World`'s arguments, its start
    snapshot's times already moved to the replay clock. Each layer of the world reads its part.

    Attributes:
        start: the starting cluster, its times moved so that ``start.now`` is
            ``usage.times[step]``.
        config: the policy's configuration.
        step: the grid index the replay starts at.
        usage: the trace on the replay grid.
        pod_series: ``namespace/name`` → series name, for the pods that follow the trace.
        with_pod_metrics: also publish PodMetrics in snapshots.
        scheduler_plugins: the scheduler also runs the policy's Filter and Score plugins.
        attach: applied to each snapshot the scheduler reads; identity when ``None``.
        provision_delay: seconds from a scale-up request to the node joining.
    """

    start: ClusterSnapshot
    config: ScalerConfig
    step: int
    usage: UsageTable
    pod_series: Mapping[str, str]
    with_pod_metrics: bool = False
    scheduler_plugins: bool = False
    attach: Callable[[ClusterSnapshot], ClusterSnapshot] | None = None
    provision_delay: float = 120.0


class WorldStore:
    """The objects of the replayed cluster and the writes on them.

    Args:
        spec: what the world is built from (the store reads ``start``, ``config``, ``step`` and
            the time of that step).

    Attributes:
        nodes, pods: by name and by uid (dicts whose changes the index follows: change them by
            item, never in place).
        pending: uid → since when (Unix seconds) of the pods waiting for a node.
        stats: what happened so far (:class:`~scaler.replay.sim_records.StepStats`).
    """

    def __init__(self, spec: WorldSpec) -> None:
        start = spec.start
        self.config = spec.config
        self.step = spec.step
        self.now = float(spec.usage.times[spec.step])
        self._base = start
        self._dra = start.dra  # the DRA objects now (claims follow pods, slices nodes: sim_dra)
        self.nodes: TrackedDict[str, Node] = TrackedDict((n.name, n) for n in start.nodes)
        self.pods: TrackedDict[str, Pod] = TrackedDict((p.uid, p) for p in start.pods)
        self.pending: dict[str, float] = {
            p.uid: self.now for p in start.pods if not p.node_name and not p.is_terminal
        }
        self.stats = StepStats()
        self._version = 0
        self._slot_of: dict[str, int] = {}  # pod uid -> its usage slot (the usage model's)
        self._index = WorldIndex(self.pods, self.nodes, self._slot_of)

    def touch(self) -> None:
        """Invalidate cached snapshots after a change of nodes or pods."""
        self._version += 1

    @property
    def dra(self) -> DraObjects:
        """The DRA objects now (claims follow their pods, slices their nodes: :mod:`sim_dra`)."""
        return self._dra

    @dra.setter
    def dra(self, value: DraObjects) -> None:
        if value is not self._dra:  # numbered, so that no verdict that read them is reused
            self._dra = value
            self._index.revisions.dra_changed()

    # ---- Kubernetes writes (through SimWriter) -----------------------------------------------------
    def mark_to_be_deleted(self, name: str, now: float, instance: str) -> None:
        """Taint ``ToBeDeletedByClusterAutoscaler``, cordon and annotate, as
        :meth:`scaler.kube.writer.KubeWriter.mark_to_be_deleted` does."""
        node = self.nodes.get(name)
        if node is None:
            raise WriteError(f"mark node {name}: node not found")
        annotations = dict(node.annotations)
        owned = annotations.get(ANNOTATION_OWNER) == instance
        if node.unschedulable and not owned:
            annotations[ANNOTATION_WAS_UNSCHEDULABLE] = "true"
        annotations[ANNOTATION_OWNER] = instance
        annotations[ANNOTATION_STATE] = STATE_TAINTED
        kept = tuple(t for t in node.taints if t.key != TAINT_TO_BE_DELETED)
        taints = (*kept, Taint(TAINT_TO_BE_DELETED, str(int(now)), "NoSchedule"))
        self.nodes[name] = replace(
            node, taints=taints, unschedulable=True, annotations=annotations, to_be_deleted_ts=float(int(now))
        )
        self.touch()

    def set_state(self, name: str, state: str) -> None:
        """Set the scale-down state annotation."""
        node = self.nodes.get(name)
        if node is None:
            raise WriteError(f"annotate node {name}: node not found")
        self.nodes[name] = replace(node, annotations={**node.annotations, ANNOTATION_STATE: state})
        self.touch()

    def clean_to_be_deleted(self, name: str) -> bool:
        """Remove the taint and scaler's annotations; uncordon unless cordoned before."""
        node = self.nodes.get(name)
        if node is None:
            return False
        annotations = dict(node.annotations)
        was = annotations.get(ANNOTATION_WAS_UNSCHEDULABLE) == "true"
        for k in (ANNOTATION_OWNER, ANNOTATION_STATE, ANNOTATION_WAS_UNSCHEDULABLE):
            annotations.pop(k, None)
        self.nodes[name] = replace(
            node,
            taints=tuple(t for t in node.taints if t.key != TAINT_TO_BE_DELETED),
            unschedulable=node.unschedulable if was else False,
            annotations=annotations,
            to_be_deleted_ts=None,
        )
        self.touch()
        return True

    def mark_hot(self, name: str, now: float, instance: str) -> None:
        """Put the ``scaler.io/hot`` soft taint on the node (kept with its first timestamp when
        there), annotated as ``instance``'s, as :meth:`scaler.kube.writer.KubeWriter.mark_hot`."""
        node = self.nodes.get(name)
        if node is None:
            raise WriteError(f"taint node {name} {TAINT_HOT}: node not found")
        taints = node.taints
        if not any(t.key == TAINT_HOT for t in taints):
            taints = (*taints, Taint(TAINT_HOT, str(int(now)), "PreferNoSchedule"))
        annotations = {**node.annotations, ANNOTATION_HOT_OWNER: instance}
        self.nodes[name] = replace(node, taints=taints, annotations=annotations)
        self.touch()

    def clean_hot(self, name: str) -> bool:
        """Remove the ``scaler.io/hot`` taint and its annotation; ``False`` when the node is gone."""
        node = self.nodes.get(name)
        if node is None:
            return False
        annotations = {k: v for k, v in node.annotations.items() if k != ANNOTATION_HOT_OWNER}
        taints = tuple(t for t in node.taints if t.key != TAINT_HOT)
        self.nodes[name] = replace(node, taints=taints, annotations=annotations)
        self.touch()
        return True

    def _unbind(self, pod: Pod) -> None:
        """Take ``pod`` off its node: a controller's pod is replaced by a pending pod of the same
        name and usage, created now, with the requests of its spec (the stand-in for its
        workload's template: a replacement carries no resize status); any other pod is gone.
        Its claims follow it (:func:`sim_dra.release`)."""
        self.dra = sim_dra.release(self.dra, pod)
        if pod.controller is not None and not pod.is_daemonset and not pod.is_mirror:
            requests = pod.requests if pod.spec_requests is None else pod.spec_requests
            self.pods[pod.uid] = replace_pod(
                pod, node_name="", creation_ts=self.now, start_ts=None, requests=requests, spec_requests=None
            )
            self.pending[pod.uid] = self.now
        else:
            del self.pods[pod.uid]
            if not (pod.is_daemonset or pod.is_mirror):
                self.stats.pods_deleted += 1
        self.touch()

    def evict(self, pod: Pod) -> EvictResult:
        """Evict ``pod`` (see :meth:`_unbind`); the replacement is placed by the scheduler
        (:meth:`scaler.replay.world_scheduler.WorldScheduler.schedule_pending`). A pod already
        gone is a success, as NotFound is live."""
        current = self.pods.get(pod.uid)
        if current is None or current.node_name != pod.node_name or not current.node_name:
            return EvictResult(True)
        if not (current.is_daemonset or current.is_mirror):
            self.stats.pods_evicted += 1
        self._unbind(current)
        return EvictResult(True)

    def pod_gone(self, pod: Pod) -> bool:
        """True when ``pod`` no longer runs on its node."""
        current = self.pods.get(pod.uid)
        return current is None or current.node_name != pod.node_name

    def pods_on_node(self, name: str) -> list[dict[str, Any]]:
        """Pods bound to ``name`` as API objects, as the actuator's verify lists them: every
        field it reads (name, namespace, uid, owner, annotations, phase and ``spec.priority``,
        which makes a pod expendable below ``--expendable-pods-priority-cutoff``) and the other
        metadata the pod record carries besides its resources and scheduling constraints."""
        out = []
        for p in self._pods_on(name):
            meta: dict[str, Any] = {"name": p.name, "namespace": p.namespace, "uid": p.uid}
            if p.labels:
                meta["labels"] = dict(p.labels)
            if p.annotations:
                meta["annotations"] = dict(p.annotations)
            if p.creation_ts is not None:
                meta["creationTimestamp"] = format_time(p.creation_ts)
            if p.deletion_ts is not None:
                meta["deletionTimestamp"] = format_time(p.deletion_ts)
            if p.controller is not None:
                meta["ownerReferences"] = [
                    {
                        "apiVersion": p.controller.api_version or "v1",
                        "kind": p.controller.kind,
                        "name": p.controller.name,
                        "uid": p.controller.uid or "",
                        "controller": True,
                    }
                ]
            spec: dict[str, Any] = {
                "nodeName": name,
                "containers": [],
                "priority": p.priority,
                "restartPolicy": p.restart_policy,
                "terminationGracePeriodSeconds": p.termination_grace_seconds,
            }
            status: dict[str, Any] = {"phase": p.phase, "qosClass": p.qos_class.value}
            if p.start_ts is not None:
                status["startTime"] = format_time(p.start_ts)
            out.append({"metadata": meta, "spec": spec, "status": status})
        return out

    def _pods_on(self, name: str) -> list[Pod]:
        """The pods bound to node ``name``, in the order of :attr:`pods`."""
        found = self._index.pods_on(name)
        return found if found is not None else [p for p in self.pods.values() if p.node_name == name]

    def delete_node(self, name: str) -> None:
        """Remove the node; pods still bound to it go with it (a controller's pods are replaced)."""
        if self.nodes.pop(name, None) is None:
            return
        for p in self._pods_on(name):
            self._unbind(p)
        self.dra = sim_dra.without_node(self.dra, name)
        self.stats.nodes_removed += 1
        self.touch()
