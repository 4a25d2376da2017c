"""The records of a replay's simulated cluster, and the snapshot rewrites it starts from.

:class:`UsageTable` (trace usage on the replay grid), :class:`PoolTemplate` (what a new node of
a pool looks like), :class:`StepStats` (what the world counts), :func:`pod_limits`, the pods'
starting readings and the nodes' own usage (:func:`start_reading`, :func:`node_overheads`), the
split of a world's readings that lack a container (:func:`partial_readings`), and the pure
rewrites of a :class:`~scaler.model.snapshot.ClusterSnapshot` that
:class:`scaler.replay.world.World` applies to its start snapshot (times shifted to the replay
clock, unique pod uids).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace as replace_pod

from scaler.model.records import Node, Pod, PodMetrics, missing_containers
from scaler.model.snapshot import ClusterSnapshot

__all__ = [
    "LABEL_INSTANCE_TYPE",
    "PoolTemplate",
    "StepStats",
    "UsageTable",
    "node_overheads",
    "partial_readings",
    "pod_limits",
    "start_reading",
]

FloatArray = npt.NDArray[np.float64]

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"


@dataclass(frozen=True, slots=True)
class UsageTable:
    """Trace usage on the replay grid.

    Attributes:
        times: the step times (Unix s), ascending; the replay may start after the first ones,
            which are then history only (workload profiles).
        series: series names, one row each in ``cpu`` and ``memory``.
        cpu: CPU millicores, shape ``(len(series), len(times))``.
        memory: memory bytes, same shape.
        first_sample: per series, the time of its first real sample (before it, the values
            held backwards are not history).
    """

    times: FloatArray
    series: tuple[str, ...]
    cpu: FloatArray
    memory: FloatArray
    first_sample: FloatArray | None = None


@dataclass(frozen=True, slots=True)
class PoolTemplate:
    """What a new node of a pool looks like: its first node at the start, and that node's
    DaemonSet and mirror pods with their usage, and the node's overhead."""

    node: Node
    pods: tuple[Pod, ...]
    pod_usage: tuple[tuple[float, float], ...]
    overhead: tuple[float, float]
    zones: tuple[str, ...]

    @property
    def machine_type(self) -> str:
        """The template node's ``node.kubernetes.io/instance-type`` label (``""`` if none)."""
        labels = self.node.labels
        return labels.get(LABEL_INSTANCE_TYPE) or labels.get(_LABEL_INSTANCE_TYPE_BETA, "")


@dataclass(slots=True)
class StepStats:
    """What the world counts while the replay runs (totals over the replay so far).

    ``pods_evicted`` counts workload pods (DaemonSet and mirror pods go with their node);
    ``pods_deleted`` the evicted pods nothing replaces (no controller)."""

    nodes_removed: int = 0
    nodes_added: int = 0
    pods_evicted: int = 0
    pods_deleted: int = 0
    unplaceable_pods: set[str] = field(default_factory=set)
    unschedulable_pods: set[str] = field(default_factory=set)
    pending_pod_seconds: float = 0.0
    failed_removals: int = 0


def pod_limits(pod: Pod) -> tuple[float, float]:
    """``pod``'s CPU limit (millicores) and memory limit (bytes), ``inf`` where it has none."""
    cpu, mem = pod.cpu_limit_millicores, pod.memory_limit_bytes
    return (math.inf if cpu is None else float(cpu), math.inf if mem is None else float(mem))


def start_reading(start: ClusterSnapshot, pod: Pod) -> tuple[PodMetrics | None, tuple[str, ...] | None]:
    """``pod``'s PodMetrics in a replay's starting snapshot and, when that reading lacked a
    container the pod runs (:attr:`ClusterSnapshot.partial_pod_metrics`), the containers it
    covered (``None`` otherwise); ``(None, None)`` without a reading."""
    key = (pod.namespace, pod.name)
    m = start.pod_metrics.get(key)
    if m is None and start.partial_pod_metrics:
        partial = start.partial_pod_metrics.get(key)
        if partial is not None and partial[0].containers is not None:
            return partial[0], partial[0].containers
    return m, None


def node_overheads(start: ClusterSnapshot) -> dict[str, tuple[float, float]]:
    """Each node's own usage (CPU millicores, memory bytes): its NodeMetrics minus its pods'
    PodMetrics (:func:`start_reading`), at least 0; 0 without NodeMetrics."""
    out: dict[str, tuple[float, float]] = {}
    for n in start.nodes:
        nm = start.node_metrics.get(n.name)
        if nm is None:
            out[n.name] = (0.0, 0.0)
            continue
        cpu, mem = float(nm.cpu_millicores), float(nm.memory_bytes)
        for p in start.pods_by_node.get(n.name, ()):
            if p.is_terminal:
                continue
            pm = start_reading(start, p)[0]
            if pm is not None:
                cpu -= pm.cpu_millicores
                mem -= pm.memory_bytes
        out[n.name] = (max(0.0, cpu), max(0.0, mem))
    return out


def partial_readings(
    readings: Mapping[tuple[str, str], PodMetrics],
    pods: Mapping[str, Pod],
    covered: Mapping[str, tuple[str, ...]],
) -> tuple[dict[tuple[str, str], PodMetrics], dict[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]]]:
    """A world's PodMetrics ``readings`` split as a snapshot holds them: the readings of the
    pods in ``covered`` (uid → the containers their starting reading covered) cover those
    containers only, and those that lack a container the pod runs are moved out, with the
    containers they lack (as :func:`scaler.model.snapshot.drop_partial_pod_metrics` does).
    ``pods`` are the world's pods by uid."""
    full = dict(readings)
    partial: dict[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]] = {}
    for uid, names in covered.items():
        pod = pods.get(uid)
        m = full.get((pod.namespace, pod.name)) if pod is not None else None
        if pod is None or m is None:
            continue
        m = replace_pod(m, containers=names)
        missing = missing_containers(pod, m)
        if missing:
            del full[(pod.namespace, pod.name)]
            partial[(pod.namespace, pod.name)] = (m, missing)
    return full, partial


def _short_hash(*parts: object, n: int = 5) -> str:
    return hashlib.sha1("/".join(map(str, parts)).encode()).hexdigest()[:n]


def _workload_name(pod: Pod, snapshot: ClusterSnapshot) -> str | None:
    """The pod's top-level owner name: a ReplicaSet's Deployment, else its controller."""
    c = pod.controller
    if c is None:
        return None
    if c.kind == "ReplicaSet":
        rs = snapshot.controllers.get(("ReplicaSet", pod.namespace, c.name))
        if rs is not None and rs.owner is not None and rs.owner.kind == "Deployment":
            return rs.owner.name
    if c.kind == "Job":
        job = snapshot.controllers.get(("Job", pod.namespace, c.name))
        if job is not None and job.owner is not None and job.owner.kind == "CronJob":
            return job.owner.name
    return c.name


def _lifetime_shifted(snapshot: ClusterSnapshot, delta: float) -> ClusterSnapshot:
    """The snapshot with every node and pod time moved by ``delta`` seconds (unknown times,
    ``None`` or 0, stay unknown)."""

    def mv(t: float | None) -> float | None:
        return None if t is None else t + delta

    nodes = [
        replace(
            n,
            creation_ts=n.creation_ts + delta if n.creation_ts else n.creation_ts,
            ready_transition_ts=n.ready_transition_ts + delta if n.ready_transition_ts else 0.0,
            to_be_deleted_ts=mv(n.to_be_deleted_ts),
        )
        for n in snapshot.nodes
    ]
    pods = [
        replace_pod(p, creation_ts=mv(p.creation_ts), deletion_ts=mv(p.deletion_ts), start_ts=mv(p.start_ts))
        for p in snapshot.pods
    ]
    return _with_objects(snapshot, nodes, pods, snapshot.now + delta)


def _unique_uids(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The snapshot with a uid on every pod (the world tracks pods by uid): a pod without one,
    or sharing one, gets ``replay-<namespace>/<name>``."""
    seen: set[str] = set()
    pods, changed = [], False
    for p in snapshot.pods:
        if not p.uid or p.uid in seen:
            p, changed = replace_pod(p, uid=f"replay-{p.key}"), True
        seen.add(p.uid)
        pods.append(p)
    return _with_objects(snapshot, snapshot.nodes, pods, snapshot.now) if changed else snapshot


def _with_objects(
    base: ClusterSnapshot, nodes: Iterable[Node], pods: Iterable[Pod], now: float
) -> ClusterSnapshot:
    """``base`` with other nodes and pods (indexes rebuilt); every other field is kept."""
    fresh = ClusterSnapshot.create(now, nodes, pods)
    return replace(
        base,
        now=now,
        nodes=fresh.nodes,
        pods=fresh.pods,
        pods_by_node=fresh.pods_by_node,
        node_by_name=fresh.node_by_name,
    )
