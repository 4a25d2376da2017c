"""The simulated cluster of a replay: nodes, pods, usage over time, a scheduler and a cloud.

The replay drives the **live controller** (:class:`scaler.controller.Controller`) against this
world instead of a real cluster. The world stands in for what the controller talks to:

* the cluster state it reads (:meth:`World.snapshot`, a :class:`ClusterSnapshot` at the replay
  clock with NodeMetrics computed from the trace);
* the Kubernetes writes of the actuator (:class:`SimWriter`: taint and cordon, annotate, evict,
  list a node's pods, clean up);
* the cloud (:class:`SimCloud`: node pools and their sizes; deletions checked against min
  sizes with :func:`scaler.cloud.base.check_min_size`, per zone too);
* kube-scheduler (:meth:`World.schedule_pending`) and a node-pool scale-up
  (:meth:`World.scale_up`).

**Usage model.** A pod mapped to a trace series demands, at each step, the series' value (see
:func:`scaler.replay.traces.resample`); any other pod keeps the usage its PodMetrics had in the
snapshot (0 without PodMetrics). A pod uses its demand capped at its limits
(:attr:`~scaler.model.records.Pod.cpu_limit_millicores`, ``memory_limit_bytes``): CPU above the
CPU limit is throttled by the CFS quota, and memory above the memory limit is an OOM kill, after
which the pod restarts in place and goes on following its series (it never holds more than its
limit). :meth:`World.limit_effects` counts both for the risk figures. PodMetrics and NodeMetrics
show the capped usage, as metrics-server does. A node uses the sum of its pods' usage plus its
own overhead: the snapshot's NodeMetrics minus its pods' PodMetrics (at least 0), constant over
the replay; a new node gets the overhead of its pool's template node. Pending pods use nothing.

**Scheduler model** (kube-scheduler, by requests). Evicted pods of a controller are replaced at
once by a pod of the same name and usage series (created at the eviction time); bare pods and
DaemonSet or mirror pods are not replaced. Pending pods are placed highest priority first, then
largest request first, each on the node that passes scaler's built-in filters (NodeUnschedulable,
NodeResourcesFit, TaintToleration, NodeAffinity, NodePorts, VolumeZone, InterPodAffinity,
PodTopologySpread — TargetUsage and other plugins are *not* scheduler filters) with the highest
score of kube-scheduler's default profile's two scores that differ between such nodes here
(:func:`kube_scheduler_choice`): ``TaintToleration`` (weight 3: the count of ``PreferNoSchedule``
taints the pod does not tolerate, normalised over the feasible nodes and reversed, 0-100, so a
soft-tainted node, e.g. a hot node under relief, scores lowest) plus ``NodeResourcesFit`` with
``LeastAllocated`` (weight 1: mean over CPU and memory of free / allocatable after placing the
pod, 0-100); ties by node name. The weights are kube-scheduler v1.28's
(``pkg/scheduler/apis/config/v1/default_plugins.go``). A pod that fits nowhere stays pending. A placed pod starts
(``status.startTime``) at the step it is placed: until the next step's metrics it is one of its
node's pods not yet in the metrics, as a replacement is live.

With ``scheduler_plugins`` (the replay-only policy flag ``--scheduler-plugins``), the scheduler
also runs the policy's own Filter plugins (``--filter-plugins``, e.g. TargetUsage,
PodFitsResourceOnPortrait) after the built-in ones, and, when the policy names Score plugins,
takes the node with the highest sum of their scores instead of ``LeastAllocated`` (ties by node
name). The plugins' filters are a preference: a pod that no node accepts under them is placed by
the built-in filters alone (left pending, it would ask for new nodes that TargetUsage still
refuses when its request exceeds the target, and never run). It models a cluster whose scheduler
runs the same plugins as scaler, as seed 001's scheduler does (or crane's and koordinator's
load-aware schedulers). Snapshots seen by the scheduler carry the
same workload profiles as the controller's (``attach``). Scale-up still matches pods to pools by
the built-in filters alone.

**Scale-up model** (cluster-autoscaler's, simplified). When pods stay pending after scheduling,
each is matched to the first node pool (by name) whose template node — the pool's first node at
the start, empty but for its DaemonSet and mirror pods — passes the same filters; pods are
bin-packed by requests (first fit, in scheduling order) onto nodes of that pool already being
provisioned, then onto as many new nodes as needed, within the pool's ``--nodes`` maximum. A new
node is a copy of the template (same machine type, labels, taints, DaemonSet pods) that joins
``--provision-delay`` after the request, with ``creationTimestamp`` then; it is billed from the
request. A pod that fits no pool's empty template is *unschedulable* and never triggers a
scale-up.

**Actuation time.** Everything the actuator does (taint, re-check, drain, delete) takes no
replay time: a removal chosen at step ``t`` is complete at ``t``. Evictions always succeed (the
drain rules have already charged PDB budgets; PDB status is the snapshot's throughout).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace as replace_pod

from scaler.cloud.base import CloudError, NodeGroupInfo, ZoneGroupInfo, check_min_sizes
from scaler.config import ScalerConfig
from scaler.eviction.executor import Evictor, EvictResult
from scaler.kube.client import ApiCall
from scaler.kube.writer import (
    ANNOTATION_HOT_OWNER,
    ANNOTATION_OWNER,
    ANNOTATION_STATE,
    ANNOTATION_WAS_UNSCHEDULABLE,
    STATE_TAINTED,
    TAINT_HOT,
    NotOwned,
    ObjectRef,
    WriteError,
)
from scaler.limits import node_group_limits
from scaler.model.records import (
    LABEL_HOSTNAME,
    LABEL_ZONE,
    TAINT_TO_BE_DELETED,
    Node,
    NodeMetrics,
    Pod,
    PodMetrics,
    Taint,
)
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_micro_time as format_time
from scaler.simulator.registry import load_filters, load_scorers
from scaler.simulator.removal import placement_order, score_totals
from scaler.simulator.state import ClusterState, FilterPlugin, ScorePlugin

__all__ = [
    "LABEL_INSTANCE_TYPE",
    "PoolTemplate",
    "SimCloud",
    "SimWriter",
    "StepStats",
    "UsageTable",
    "World",
    "kube_scheduler_choice",
    "pod_limits",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
_LABEL_INSTANCE_TYPE_BETA = "beta.kubernetes.io/instance-type"
_DEFAULT_MAX_POOL_SIZE = 1000


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


TAINT_TOLERATION_WEIGHT = 3
"""kube-scheduler v1.28's default weight of the ``TaintToleration`` score (``NodeResourcesFit``'s is 1)."""


def kube_scheduler_choice(pod: Pod, state: ClusterState, feasible: npt.NDArray[np.intp]) -> int:
    """The table position, among ``feasible`` (positions of nodes that pass the filters, in name
    order), of the node kube-scheduler's default profile would pick for ``pod``, by its two
    scores that differ between nodes here:

    * ``TaintToleration`` (``pkg/scheduler/framework/plugins/tainttoleration``): the number of
      ``PreferNoSchedule`` taints of the node the pod does not tolerate, normalised with
      ``DefaultNormalizeScore(100, reverse=true)`` (no such taint anywhere: 100 for every node;
      else ``100 - 100 × count // max count``), weight 3;
    * ``NodeResourcesFit`` with the ``LeastAllocated`` strategy: the mean over CPU and memory of
      ``(allocatable - requested - pod request) / allocatable`` × 100, weight 1.

    The first maximum wins (nodes are in name order). Raises ``ValueError`` on an empty
    ``feasible``."""
    t = state.table
    r = pod.requests
    cpu_free = (t.alloc_cpu[feasible] - t.req_cpu[feasible] - r.cpu_millicores) / np.maximum(
        t.alloc_cpu[feasible], 1
    )
    mem_free = (t.alloc_mem[feasible] - t.req_mem[feasible] - r.memory_bytes) / np.maximum(
        t.alloc_mem[feasible], 1
    )
    score = (cpu_free + mem_free) / 2 * 100
    names = state.names
    counts = np.fromiter(
        (
            sum(
                1
                for taint in state.nodes[names[int(i)]].node.taints
                if taint.effect == "PreferNoSchedule"
                and not any(tol.tolerates(taint) for tol in pod.tolerations)
            )
            for i in feasible
        ),
        dtype=np.int64,
        count=len(feasible),
    )
    most = int(counts.max()) if len(counts) else 0
    taint_score = np.full(len(feasible), 100, dtype=np.int64) if most == 0 else 100 - counts * 100 // most
    score = score + TAINT_TOLERATION_WEIGHT * taint_score
    return int(feasible[int(np.argmax(score))])


def pod_limits(pod: Pod) -> tuple[float, float]:
    """``pod``'s CPU limit (millicores) and memory limit (bytes), ``inf`` where it has none."""
    cpu, mem = pod.cpu_limit_millicores, pod.memory_limit_bytes
    return (math.inf if cpu is None else float(cpu), math.inf if mem is None else float(mem))


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


class World:
    """The replayed cluster.

    Args:
        snapshot: the starting cluster (its times are moved so that ``snapshot.now`` becomes
            ``usage.times[start_step]``).
        usage: the trace on the replay grid.
        pod_series: ``namespace/name`` → series name, for the pods that follow the trace.
        config: the policy's configuration (node-group limits, instance name).
        provision_delay: seconds from a scale-up request to the node joining.
        start_step: the grid index the replay starts at (earlier steps are history only).
        with_pod_metrics: also publish PodMetrics in snapshots (the replay always does: moved
            pods count ``max(request, usage)``, and ``--ignore-daemonsets-utilization`` reads
            them; without, every pod counts its requests).
        scheduler_plugins: the scheduler also runs the policy's Filter and Score plugins (see
            the module doc).
        attach: applied to each snapshot the scheduler reads (the replay attaches workload
            profiles with it; settable later as the ``attach`` attribute); identity by default.
    Raises:
        scaler.simulator.registry.PluginError: with ``scheduler_plugins``, a plugin of the
            policy cannot be loaded.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        usage: UsageTable,
        pod_series: Mapping[str, str],
        config: ScalerConfig,
        *,
        provision_delay: float = 120.0,
        start_step: int = 0,
        with_pod_metrics: bool = False,
        scheduler_plugins: bool = False,
        attach: Callable[[ClusterSnapshot], ClusterSnapshot] | None = None,
    ) -> None:
        self.config = config
        self.attach = attach
        self.usage = usage
        self.provision_delay = provision_delay
        self.with_pod_metrics = with_pod_metrics
        self.step = start_step
        self.now = float(usage.times[start_step])
        start = _unique_uids(_lifetime_shifted(snapshot, self.now - snapshot.now))
        self._base = start
        self.nodes: dict[str, Node] = {n.name: n for n in start.nodes}
        self.pods: dict[str, Pod] = {p.uid: p for p in start.pods}
        self.pending: dict[str, float] = {
            p.uid: self.now for p in start.pods if not p.node_name and not p.is_terminal
        }
        self.stats = StepStats()
        self.provisioning: list[tuple[float, float, str]] = []  # (requested at, ready at, pool)
        self._version = 0
        self._cached: tuple[int, float, ClusterSnapshot] | None = None
        self._structure: tuple[int, ClusterSnapshot] | None = None
        self._arrays: tuple[int, IntArray, IntArray, list[str]] | None = None
        self._bound: tuple[int, list[tuple[str, str]], IntArray] | None = None
        self._node_counter = 0
        # Usage slots: one per pod (uid), a series row or a constant.
        rows = {s: i for i, s in enumerate(usage.series)}
        self._slot_of: dict[str, int] = {}
        self._slot_row: list[int] = []
        self._slot_const: list[tuple[float, float]] = []
        self._slot_limit: list[tuple[float, float]] = []
        for p in start.pods:
            m = start.pod_metrics.get((p.namespace, p.name))
            const = (float(m.cpu_millicores), float(m.memory_bytes)) if m is not None else (0.0, 0.0)
            series = pod_series.get(p.key)
            self._add_slot(p.uid, rows[series] if series is not None and series in rows else -1, const, p)
        self._slot_arrays: tuple[int, IntArray, FloatArray, FloatArray, FloatArray, FloatArray] | None = None
        # Node overheads: NodeMetrics minus the node's pods' PodMetrics.
        self._overhead: dict[str, tuple[float, float]] = {}
        for n in start.nodes:
            nm = start.node_metrics.get(n.name)
            if nm is None:
                self._overhead[n.name] = (0.0, 0.0)
                continue
            cpu, mem = float(nm.cpu_millicores), float(nm.memory_bytes)
            for p in start.pods_by_node.get(n.name, ()):
                if p.is_terminal:
                    continue
                pm = start.pod_metrics.get((p.namespace, p.name))
                if pm is not None:
                    cpu -= pm.cpu_millicores
                    mem -= pm.memory_bytes
            self._overhead[n.name] = (max(0.0, cpu), max(0.0, mem))
        self.templates = self._templates(start)
        self._sched_filters: list[FilterPlugin] = load_filters(ScalerConfig(filter_plugins=()))
        self._place_filters = load_filters(config) if scheduler_plugins else self._sched_filters
        self._place_scorers: list[ScorePlugin] = load_scorers(config) if scheduler_plugins else []

    # ---- set-up -------------------------------------------------------------------------------------
    def _add_slot(self, uid: str, row: int, const: tuple[float, float], pod: Pod) -> None:
        self._slot_of[uid] = len(self._slot_row)
        self._slot_row.append(row)
        self._slot_const.append(const)
        self._slot_limit.append(pod_limits(pod))
        self._slot_arrays = None

    def _templates(self, start: ClusterSnapshot) -> dict[str, PoolTemplate]:
        out: dict[str, PoolTemplate] = {}
        zones: dict[str, list[str]] = {}
        for n in start.nodes:
            if n.node_group and n.zone and n.zone not in zones.setdefault(n.node_group, []):
                zones[n.node_group].append(n.zone)
        for n in start.nodes:  # sorted by name: the pool's first node is its template
            pool = n.node_group
            if not pool or pool in out:
                continue
            own = [
                p
                for p in start.pods_by_node.get(n.name, ())
                if (p.is_daemonset or p.is_mirror) and not p.is_terminal
            ]
            usage = []
            for p in own:
                pm = start.pod_metrics.get((p.namespace, p.name))
                usage.append((float(pm.cpu_millicores), float(pm.memory_bytes)) if pm else (0.0, 0.0))
            clean = replace(
                n,
                taints=tuple(t for t in n.taints if t.key != TAINT_TO_BE_DELETED),
                unschedulable=False,
                to_be_deleted_ts=None,
                annotations={
                    k: v
                    for k, v in n.annotations.items()
                    if k not in (ANNOTATION_OWNER, ANNOTATION_STATE, ANNOTATION_WAS_UNSCHEDULABLE)
                },
            )
            out[pool] = PoolTemplate(
                clean, tuple(own), tuple(usage), self._overhead[n.name], tuple(sorted(zones.get(pool, [])))
            )
        return out

    # ---- the clock ----------------------------------------------------------------------------------
    def advance(self, step: int) -> None:
        """Move the clock to step ``step``: account pending time, bring up the nodes whose
        provisioning is done, and schedule pending pods."""
        t = float(self.usage.times[step])
        if self.pending:
            self.stats.pending_pod_seconds += len(self.pending) * (t - self.now)
        self.step, self.now = step, t
        ready = [p for p in self.provisioning if p[1] <= t]
        if ready:
            self.provisioning = [p for p in self.provisioning if p[1] > t]
            for _, ready_at, pool in sorted(ready, key=lambda p: (p[1], p[2])):
                self._add_node(pool, ready_at)
        self.schedule_pending()

    def touch(self) -> None:
        """Invalidate cached snapshots after a change of nodes or pods."""
        self._version += 1

    # ---- reading ------------------------------------------------------------------------------------
    def _slots(self) -> tuple[int, IntArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """(slot count, series rows, constant cpu, constant memory, cpu limits, memory limits)
        of every usage slot as arrays (cached until a slot is added)."""
        n = len(self._slot_row)
        if self._slot_arrays is None or self._slot_arrays[0] != n:
            rows = np.asarray(self._slot_row, dtype=np.int64)
            const = np.asarray(self._slot_const, dtype=np.float64).reshape(n, 2)
            limit = np.asarray(self._slot_limit, dtype=np.float64).reshape(n, 2)
            self._slot_arrays = (
                n, rows, const[:, 0].copy(), const[:, 1].copy(), limit[:, 0].copy(), limit[:, 1].copy()
            )  # fmt: skip
        return self._slot_arrays

    def _demand_now(self) -> tuple[FloatArray, FloatArray]:
        """What every usage slot would use at the current step without limits: CPU millicores
        and memory bytes from its series (or its constant)."""
        _, rows, cpu_c, mem_c, _, _ = self._slots()
        cpu, mem = cpu_c.copy(), mem_c.copy()
        mapped = rows >= 0
        if mapped.any():
            cpu[mapped] = self.usage.cpu[rows[mapped], self.step]
            mem[mapped] = self.usage.memory[rows[mapped], self.step]
        return cpu, mem

    def _usage_now(self) -> tuple[FloatArray, FloatArray]:
        """CPU millicores and memory bytes every usage slot uses at the current step: its demand
        capped at the pod's limits (the CFS quota; a container above its memory limit is
        OOM-killed and restarts, so it never holds more than the limit)."""
        _, _, _, _, cpu_limit, mem_limit = self._slots()
        cpu, mem = self._demand_now()
        return np.minimum(cpu, cpu_limit), np.minimum(mem, mem_limit)

    def limit_effects(self) -> tuple[float, int]:
        """What the pods' limits did at the current step, over the pods bound to a node:
        ``(throttled, oom_killed)``: the CPU demand above their CPU limits (millicores, summed)
        and how many pods' memory demand is above their memory limit (each one OOM kill; the
        pod restarts and keeps following its usage series)."""
        slots, _, _ = self._placement()
        if len(slots) == 0:
            return 0.0, 0
        _, _, _, _, cpu_limit, mem_limit = self._slots()
        cpu, mem = self._demand_now()
        throttled = np.maximum(cpu[slots] - cpu_limit[slots], 0.0)
        return float(throttled.sum()), int(np.count_nonzero(mem[slots] > mem_limit[slots]))

    def _placement(self) -> tuple[IntArray, IntArray, list[str]]:
        """(slot of each bound pod, node index of each bound pod, node names) — cached."""
        if self._arrays is None or self._arrays[0] != self._version:
            names = sorted(self.nodes)
            index = {n: i for i, n in enumerate(names)}
            slots, where = [], []
            for p in self.pods.values():
                i = index.get(p.node_name)
                if i is not None and not p.is_terminal:
                    slots.append(self._slot_of[p.uid])
                    where.append(i)
            self._arrays = (
                self._version,
                np.asarray(slots, dtype=np.int64),
                np.asarray(where, dtype=np.int64),
                names,
            )
        _, s, w, names = self._arrays
        return s, w, names

    def node_usage(self) -> tuple[list[str], FloatArray, FloatArray]:
        """Node names (sorted) and their real CPU (millicores) and memory (bytes) usage now."""
        slots, where, names = self._placement()
        cpu, mem = self._usage_now()
        n = len(names)
        node_cpu = np.bincount(where, weights=cpu[slots], minlength=n).astype(np.float64)
        node_mem = np.bincount(where, weights=mem[slots], minlength=n).astype(np.float64)
        over = np.asarray([self._overhead[x] for x in names], dtype=np.float64).reshape(n, 2)
        return names, node_cpu + over[:, 0], node_mem + over[:, 1]

    def pod_usage(self) -> dict[str, tuple[float, float]]:
        """Every pod's usage now, by uid (pending pods included: the usage they would have)."""
        cpu, mem = self._usage_now()
        return {uid: (float(cpu[s]), float(mem[s])) for uid, s in self._slot_of.items() if uid in self.pods}

    def snapshot(self, now: float | None = None) -> ClusterSnapshot:
        """The cluster at the current step as the controller would read it: nodes, pods
        (pending ones unbound), and NodeMetrics from the trace timestamped now."""
        t = self.now if now is None else now
        if self._cached is not None and self._cached[0] == self._version and self._cached[1] == t:
            return self._cached[2]
        if self._structure is None or self._structure[0] != self._version:
            self._structure = (
                self._version,
                _with_objects(self._base, self.nodes.values(), self.pods.values(), t),
            )
        structure = replace(self._structure[1], now=t)
        names, cpu, mem = self.node_usage()
        metrics = {
            n: NodeMetrics(n, t, 30.0, int(c), int(m))
            for n, c, m in zip(names, cpu.tolist(), mem.tolist(), strict=True)
        }
        pod_metrics: Mapping[tuple[str, str], PodMetrics] = {}
        if self.with_pod_metrics:
            cpu, mem = self._usage_now()
            keys, slots = self._bound_slots()
            # int() of each float64, as truncation toward zero, for every pod at once.
            cpu_i, mem_i = cpu[slots].astype(np.int64).tolist(), mem[slots].astype(np.int64).tolist()
            pod_metrics = {
                k: PodMetrics(k[0], k[1], t, 30.0, c, m) for k, c, m in zip(keys, cpu_i, mem_i, strict=True)
            }
        snap = replace(structure, node_metrics=metrics, pod_metrics=pod_metrics)
        self._cached = (self._version, t, snap)
        return snap

    def _bound_slots(self) -> tuple[list[tuple[str, str]], IntArray]:
        """``(namespace, name)`` of every pod bound to a node, in pod order, and its usage slot
        (cached until the pods change)."""
        if self._bound is None or self._bound[0] != self._version:
            bound = [p for p in self.pods.values() if p.node_name]
            slots = np.asarray([self._slot_of[p.uid] for p in bound], dtype=np.int64)
            self._bound = (self._version, [(p.namespace, p.name) for p in bound], slots)
        return self._bound[1], self._bound[2]

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
        name and usage, created now; any other pod is gone."""
        if pod.controller is not None and not pod.is_daemonset and not pod.is_mirror:
            self.pods[pod.uid] = replace_pod(pod, node_name="", creation_ts=self.now, start_ts=None)
            self.pending[pod.uid] = self.now
        else:
            del self.pods[pod.uid]
            if not (pod.is_daemonset or pod.is_mirror):
                self.stats.pods_deleted += 1
        self.touch()

    def evict(self, pod: Pod) -> EvictResult:
        """Evict ``pod`` (see :meth:`_unbind`); the replacement is placed by
        :meth:`schedule_pending`. A pod already gone is a success, as NotFound is live."""
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
        for p in self.pods.values():
            if p.node_name != name:
                continue
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

    def delete_node(self, name: str) -> None:
        """Remove the node; pods still bound to it go with it (a controller's pods are replaced)."""
        if self.nodes.pop(name, None) is None:
            return
        for p in [p for p in self.pods.values() if p.node_name == name]:
            self._unbind(p)
        self.stats.nodes_removed += 1
        self.touch()

    # ---- the scheduler -----------------------------------------------------------------------------
    def _feasible(
        self, pod: Pod, state: ClusterState, positions: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.intp]:
        found = self._passing(pod, state, positions, self._place_filters)
        if len(found) == 0 and self._place_filters is not self._sched_filters:
            found = self._passing(pod, state, positions, self._sched_filters)
        return found

    @staticmethod
    def _passing(
        pod: Pod, state: ClusterState, positions: npt.NDArray[np.intp], filters: Sequence[FilterPlugin]
    ) -> npt.NDArray[np.intp]:
        ok = np.ones(len(positions), dtype=np.bool_)
        names = state.names
        for f in filters:
            idx = np.flatnonzero(ok)
            if len(idx) == 0:
                break
            vector = getattr(f, "filter_nodes", None)
            res = vector(pod, positions[idx], state) if callable(vector) else None
            if res is not None:
                ok[idx[res[0] != 0]] = False
                continue
            for j in idx.tolist():
                if f.filter(pod, state.nodes[names[int(positions[j])]], state) is not None:
                    ok[j] = False
        return positions[ok]

    def schedule_pending(self) -> None:
        """Place pending pods as kube-scheduler would, by requests (see the module doc)."""
        if not self.pending or not self.nodes:
            return
        snap = self.snapshot()
        usage = {n: (m.cpu_millicores, m.memory_bytes) for n, m in snap.node_metrics.items()}
        pod_load = None
        if self._place_filters is not self._sched_filters:  # a load-aware scheduler (TargetUsage)
            used = self.pod_usage()

            def pod_load(p: Pod) -> tuple[int, int]:
                u = used.get(p.uid, (0.0, 0.0))
                return max(p.requests.cpu_millicores, int(u[0])), max(p.requests.memory_bytes, int(u[1]))

        state = ClusterState(
            self.attach(snap) if self.attach is not None else snap, usage=usage, pod_load=pod_load
        )
        positions = np.arange(len(state.names), dtype=np.intp)
        placed = False
        for pod in sorted((self.pods[u] for u in self.pending), key=placement_order):
            feasible = self._feasible(pod, state, positions)
            if len(feasible) == 0:
                continue
            if self._place_scorers:
                best = self._best_by_plugins(pod, state, feasible)
            else:
                best = kube_scheduler_choice(pod, state, feasible)
            dest = state.names[best]
            state.place(pod, dest)
            state.commit()
            self.pods[pod.uid] = replace_pod(pod, node_name=dest, start_ts=self.now)
            del self.pending[pod.uid]
            placed = True
        if placed:
            self.touch()

    def _best_by_plugins(self, pod: Pod, state: ClusterState, feasible: npt.NDArray[np.intp]) -> int:
        """The feasible node with the highest sum of the policy's Score plugins (first maximum)."""
        nodes = [state.nodes[state.names[int(i)]] for i in feasible]
        totals = score_totals(self._place_scorers, pod, nodes, state)
        return int(feasible[max(range(len(nodes)), key=totals.__getitem__)])

    # ---- scale-up ----------------------------------------------------------------------------------
    def _pool_limits(self) -> dict[str, tuple[int, int]]:
        """Pool → (min, max) of the whole pool: ``--nodes`` limits hold per zone, so a pool
        has no minimum of its own and its maximum is the per-zone one times its zones."""
        limits = node_group_limits(self.config, self.nodes.values())
        out = {}
        for pool, tpl in self.templates.items():
            spec = limits.pools.get(pool)
            zones = max(1, len(tpl.zones))
            out[pool] = (0, spec.max_size * zones) if spec is not None else (0, _DEFAULT_MAX_POOL_SIZE)
        return out

    def zone_groups(self, pool: str) -> tuple[ZoneGroupInfo, ...]:
        """The pool in each zone its nodes are in: nodes there, and ``--nodes`` limits (a MIG's
        entry, else the pool's; min 0 and max 1000 without)."""
        limits = node_group_limits(self.config, self.nodes.values())
        counts: dict[str, int] = {}
        for n in self.nodes.values():
            if n.node_group == pool:
                counts[n.zone] = counts.get(n.zone, 0) + 1
        out = []
        for zone, count in sorted(counts.items()):
            spec = limits.for_zone(pool, zone)
            lo, hi = (spec.min_size, spec.max_size) if spec is not None else (0, _DEFAULT_MAX_POOL_SIZE)
            out.append(ZoneGroupInfo(zone, lo, hi, count))
        return tuple(out)

    def pool_sizes(self) -> dict[str, int]:
        """Nodes per pool, counting nodes being provisioned (the MIG's target size)."""
        sizes = dict.fromkeys(self.templates, 0)
        for n in self.nodes.values():
            if n.node_group:
                sizes[n.node_group] = sizes.get(n.node_group, 0) + 1
        for _, _, pool in self.provisioning:
            sizes[pool] = sizes.get(pool, 0) + 1
        return sizes

    def _template_state(self, pool: str) -> tuple[ClusterState, Node]:
        tpl = self.templates[pool]
        node = replace(tpl.node, name=f"~template-{pool}")
        pods = [replace_pod(p, node_name=node.name) for p in tpl.pods]
        snap = _with_objects(self._base, [node], pods, self.now)
        return ClusterState(snap), node

    def scale_up(self) -> int:
        """Request new nodes for the pods still pending (see the module doc). Returns the
        number of nodes requested."""
        if not self.pending:
            return 0
        pods = sorted((self.pods[u] for u in self.pending), key=placement_order)
        states = {pool: self._template_state(pool) for pool in sorted(self.templates)}
        limits = self._pool_limits()
        sizes = self.pool_sizes()
        # Free capacity (cpu, memory, pods) of nodes being provisioned and of new ones, per pool.
        bins: dict[str, list[list[int]]] = {}
        for pool in states:
            state, node = states[pool]
            ns = state.nodes[node.name]
            free = [
                node.allocatable.cpu_millicores - ns.requested.cpu_millicores,
                node.allocatable.memory_bytes - ns.requested.memory_bytes,
                node.allocatable.pods - len(ns.pods),
            ]
            bins[pool] = [list(free) for _ in [p for p in self.provisioning if p[2] == pool]]
        new: dict[str, int] = {}
        for pod in pods:
            target = None
            for pool, (state, node) in states.items():
                if all(f.filter(pod, state.nodes[node.name], state) is None for f in self._sched_filters):
                    target = pool
                    break
            if target is None:
                self.stats.unschedulable_pods.add(pod.key)
                continue
            r = pod.requests
            need = (r.cpu_millicores, r.memory_bytes, 1)
            for b in bins[target]:
                if all(b[i] >= need[i] for i in range(3)):
                    for i in range(3):
                        b[i] -= need[i]
                    break
            else:
                if sizes[target] + new.get(target, 0) >= limits[target][1]:
                    continue
                state, node = states[target]
                ns = state.nodes[node.name]
                free = [
                    node.allocatable.cpu_millicores - ns.requested.cpu_millicores - need[0],
                    node.allocatable.memory_bytes - ns.requested.memory_bytes - need[1],
                    node.allocatable.pods - len(ns.pods) - 1,
                ]
                bins[target].append(free)
                new[target] = new.get(target, 0) + 1
        for pool, count in sorted(new.items()):
            for _ in range(count):
                self.provisioning.append((self.now, self.now + self.provision_delay, pool))
        return sum(new.values())

    def _add_node(self, pool: str, at: float) -> None:
        tpl = self.templates[pool]
        self._node_counter += 1
        k = self._node_counter
        base = tpl.node.name.rsplit("-", 1)[0] if "-" in tpl.node.name else tpl.node.name
        name = f"{base}-r{k:03d}"
        labels = dict(tpl.node.labels)
        labels[LABEL_HOSTNAME] = name
        if tpl.zones and LABEL_ZONE in labels:
            labels[LABEL_ZONE] = tpl.zones[k % len(tpl.zones)]
        node = replace(
            tpl.node,
            name=name,
            uid=f"replay-{_short_hash(name, at, n=16)}",
            labels=labels,
            creation_ts=at,
            ready_transition_ts=at,
            provider_id=f"replay://{pool}/{name}",
        )
        self.nodes[name] = node
        self._overhead[name] = tpl.overhead
        for p, use in zip(tpl.pods, tpl.pod_usage, strict=True):
            if tpl.node.name in p.name:  # a static pod's mirror is named after its node
                pname = p.name.replace(tpl.node.name, name)
            else:  # a DaemonSet pod: <daemonset>-<random suffix>
                pname = f"{p.name.rsplit('-', 1)[0]}-{_short_hash(name, p.name)}"
            uid = f"replay-{_short_hash(pname, at, n=16)}"
            self.pods[uid] = replace_pod(p, name=pname, uid=uid, node_name=name, creation_ts=at, start_ts=at)
            self._add_slot(uid, -1, use, p)
        self.stats.nodes_added += 1
        self.touch()


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
