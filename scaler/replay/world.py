"""The simulated cluster of a replay: nodes, pods, usage over time, a scheduler and a cloud.

The replay drives the **live controller** (:class:`scaler.controller.Controller`) against this
world instead of a real cluster. The world stands in for what the controller talks to:

* the cluster state it reads (:meth:`World.snapshot`, a :class:`ClusterSnapshot` at the replay
  clock with NodeMetrics computed from the trace);
* the Kubernetes writes of the actuator (:class:`~scaler.replay.sim_cluster.SimWriter`: taint
  and cordon, annotate, evict, list a node's pods, clean up);
* the cloud (:class:`~scaler.replay.sim_cluster.SimCloud`: node pools and their sizes;
  deletions checked against min sizes with :func:`scaler.cloud.base.check_min_size`, per zone
  too);
* kube-scheduler (:meth:`World.schedule_pending`) and a node-pool scale-up
  (:meth:`World.scale_up`).

**Usage model.** A pod mapped to a trace series demands, at each step, the series' value (see
:func:`scaler.replay.traces.resample`); any other pod keeps the usage its PodMetrics had in the
snapshot (0 without PodMetrics; what the reading reported when it lacked a container the pod
runs, and the world's readings of that pod then lack the same containers, so the controller
judges its usage as it judged it in the snapshot). A pod uses its demand capped at its limits
(:attr:`~scaler.model.records.Pod.cpu_limit_millicores`, ``memory_limit_bytes``): CPU above the
CPU limit is throttled by the CFS quota, and memory above the memory limit is an OOM kill, after
which the pod restarts in place and goes on following its series (it never holds more than its
limit). :meth:`World.limit_effects` counts both for the risk figures. PodMetrics and NodeMetrics
show the capped usage, as metrics-server does. A node uses the sum of its pods' usage plus its
own overhead: the snapshot's NodeMetrics minus its pods' PodMetrics (at least 0), constant over
the replay; a new node gets the overhead of its pool's template node. Pending pods use nothing.

**Scheduler model** (kube-scheduler, by requests). Evicted pods of a controller are replaced at
once by a pod of the same name and usage series (created at the eviction time, requesting what
its spec requests: a replacement carries no in-place resize status); bare pods and
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

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace as replace_pod

from scaler.cloud.base import ZoneGroupInfo
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
from scaler.limits import GroupLimits, node_group_limits
from scaler.model.dra import DraObjects
from scaler.model.pod_usage import PodMetricsColumns
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
from scaler.replay import sim_dra
from scaler.replay.kube_scheduler import kube_scheduler_choice
from scaler.replay.sim_records import (
    LABEL_INSTANCE_TYPE,
    PoolTemplate,
    StepStats,
    UsageTable,
    _lifetime_shifted,
    _short_hash,
    _unique_uids,
    _with_objects,
    node_overheads,
    partial_readings,
    pod_limits,
    start_reading,
)
from scaler.replay.world_index import TrackedDict, WorldIndex
from scaler.simulator.pod_index import PodIndex
from scaler.simulator.registry import load_filters, load_scorers
from scaler.simulator.removal import Prefilter, placement_order, score_totals
from scaler.simulator.state import ClusterState, FilterPlugin, ScorePlugin

__all__ = [  # the records and the scheduler's choice re-exported from where they live
    "LABEL_INSTANCE_TYPE",
    "PoolTemplate",
    "StepStats",
    "UsageTable",
    "World",
    "kube_scheduler_choice",
    "pod_limits",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

_DEFAULT_MAX_POOL_SIZE = 1000


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
        self._dra = start.dra  # the DRA objects now (claims follow pods, slices nodes: sim_dra)
        self.nodes: TrackedDict[str, Node] = TrackedDict((n.name, n) for n in start.nodes)
        self.pods: TrackedDict[str, Pod] = TrackedDict((p.uid, p) for p in start.pods)
        self.pending: dict[str, float] = {
            p.uid: self.now for p in start.pods if not p.node_name and not p.is_terminal
        }
        self.stats = StepStats()
        self.provisioning: list[tuple[float, float, str]] = []  # (requested at, ready at, pool)
        self._version = 0
        self._cached: tuple[int, float, ClusterSnapshot] | None = None
        self._structure: tuple[int, ClusterSnapshot] | None = None
        self._arrays: tuple[int, IntArray, IntArray, list[str]] | None = None
        self._node_counter = 0
        self._facts: tuple[int, GroupLimits, dict[str, dict[str, int]], dict[str, int]] | None = None
        # Usage slots: one per pod (uid), a series row or a constant.
        rows = {s: i for i, s in enumerate(usage.series)}
        self._slot_of: dict[str, int] = {}
        self._index = WorldIndex(self.pods, self.nodes, self._slot_of)
        self._slot_row: list[int] = []
        self._slot_const: list[tuple[float, float]] = []
        self._slot_limit: list[tuple[float, float]] = []
        # Pods whose snapshot PodMetrics lacked a container they run: uid -> the containers the
        # reading covered. Their readings in the world cover the same, so the controller keeps
        # reading their usage as the snapshot gave it (unknown usage is never zero).
        self._covered: dict[str, tuple[str, ...]] = {}
        for p in start.pods:
            m, covered = start_reading(start, p)
            if covered is not None:
                self._covered[p.uid] = covered
            const = (float(m.cpu_millicores), float(m.memory_bytes)) if m is not None else (0.0, 0.0)
            series = pod_series.get(p.key)
            self._add_slot(p.uid, rows[series] if series is not None and series in rows else -1, const, p)
        self._slot_arrays: tuple[int, IntArray, FloatArray, FloatArray, FloatArray, FloatArray] | None = None
        self._demand: tuple[int, int, FloatArray, FloatArray] | None = None  # (step, slots, cpu, mem)
        self._used: tuple[int, int, FloatArray, FloatArray] | None = None
        self._overhead = node_overheads(start)
        self.templates = self._templates(start)
        self._sched_filters: list[FilterPlugin] = load_filters(ScalerConfig(filter_plugins=()))
        self._place_filters = load_filters(config) if scheduler_plugins else self._sched_filters
        self._place_scorers: list[ScorePlugin] = load_scorers(config) if scheduler_plugins else []
        self._pod_index = PodIndex()  # the scheduler's pods indexed, updated node by node
        self._sched_pass = Prefilter(self._sched_filters)
        self._place_pass = Prefilter(self._place_filters) if scheduler_plugins else self._sched_pass

    # ---- set-up -------------------------------------------------------------------------------------
    def _add_slot(self, uid: str, row: int, const: tuple[float, float], pod: Pod) -> None:
        self._index.slot_added(uid, uid in self._slot_of)
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
        and memory bytes from its series (or its constant). Read-only arrays, kept for the
        step."""
        n, rows, cpu_c, mem_c, _, _ = self._slots()
        if self._demand is not None and self._demand[:2] == (self.step, n):
            return self._demand[2], self._demand[3]
        cpu, mem = cpu_c.copy(), mem_c.copy()
        mapped = rows >= 0
        if mapped.any():
            cpu[mapped] = self.usage.cpu[rows[mapped], self.step]
            mem[mapped] = self.usage.memory[rows[mapped], self.step]
        cpu.flags.writeable = mem.flags.writeable = False
        self._demand = (self.step, n, cpu, mem)
        return cpu, mem

    def _usage_now(self) -> tuple[FloatArray, FloatArray]:
        """CPU millicores and memory bytes every usage slot uses at the current step: its demand
        capped at the pod's limits (the CFS quota; a container above its memory limit is
        OOM-killed and restarts, so it never holds more than the limit). Read-only arrays, kept
        for the step."""
        n, _, _, _, cpu_limit, mem_limit = self._slots()
        if self._used is not None and self._used[:2] == (self.step, n):
            return self._used[2], self._used[3]
        cpu, mem = self._demand_now()
        cpu, mem = np.minimum(cpu, cpu_limit), np.minimum(mem, mem_limit)
        cpu.flags.writeable = mem.flags.writeable = False
        self._used = (self.step, n, cpu, mem)
        return cpu, mem

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
            self._arrays = (self._version, *self._index.placement())
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

    @property
    def dra(self) -> DraObjects:
        """The DRA objects now (claims follow their pods, slices their nodes: :mod:`sim_dra`)."""
        return self._dra

    @dra.setter
    def dra(self, value: DraObjects) -> None:
        if value is not self._dra:  # numbered, so that no verdict that read them is reused
            self._dra = value
            self._index.revisions.dra_changed()

    def snapshot(self, now: float | None = None) -> ClusterSnapshot:
        """The cluster at the current step as the controller would read it: nodes, pods
        (pending ones unbound), and NodeMetrics from the trace timestamped now."""
        t = self.now if now is None else now
        if self._cached is not None and self._cached[0] == self._version and self._cached[1] == t:
            return self._cached[2]
        if self._structure is None or self._structure[0] != self._version:
            structure = self._index.structure(self._base)
            if structure.dra is not self.dra:  # stamped again: the numbers include the DRA objects'
                structure = replace(structure, dra=self.dra)
                structure = replace(structure, revisions=self._index.revisions.stamp(structure))
            self._structure = (self._version, structure)
        structure = replace(self._structure[1], now=t)
        names, cpu, mem = self.node_usage()
        metrics = {
            n: NodeMetrics(n, t, 30.0, int(c), int(m))
            for n, c, m in zip(names, cpu.tolist(), mem.tolist(), strict=True)
        }
        pod_metrics: Mapping[tuple[str, str], PodMetrics] = {}
        partial: dict[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]] = {}
        if self.with_pod_metrics:  # as columns: a PodMetrics is made when a pod is read
            cpu, mem = self._usage_now()
            rows = self._index.bound_rows()
            layout = self._index.rows_token if self._index.exact else rows
            pod_metrics = PodMetricsColumns(rows, cpu.astype(np.int64), mem.astype(np.int64), t, 30.0, layout)
            if self._covered:  # readings lacking containers: split as a snapshot holds them
                pod_metrics, partial = partial_readings(pod_metrics, self.pods, self._covered)
        snap = replace(structure, node_metrics=metrics, pod_metrics=pod_metrics, partial_pod_metrics=partial)
        self._cached = (self._version, t, snap)
        return snap

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

    # ---- the scheduler -----------------------------------------------------------------------------
    def _feasible(
        self, pod: Pod, state: ClusterState, positions: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.intp]:
        """The nodes at ``positions`` where ``pod`` may go: by the policy's filters, else (none
        passing) by the built-in ones alone."""
        found = self._place_pass.of(pod, state).rows(positions)
        if len(found) == 0 and self._place_filters is not self._sched_filters:
            found = self._sched_pass.of(pod, state).rows(positions)
        return found

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

        counted = self._index.counted_pods(snap)  # skips the terminal pods' scan when none
        if counted is not None:
            self._pod_index.follow({n.name: counted.get(n.name, ()) for n in snap.nodes})
        state = ClusterState(
            self.attach(snap) if self.attach is not None else snap,
            pods_by_node=counted,
            usage=usage,
            pod_load=pod_load,
            requested=None if counted is None else self._index.requested(snap.pods_by_node),
            index=self._pod_index if counted is not None else None,
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
            if pod.resource_claims:
                self.dra = sim_dra.allocated(self.dra, state.dra, [pod])
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
        limits = self._node_facts()[0]
        out = {}
        for pool, tpl in self.templates.items():
            spec = limits.pools.get(pool)
            zones = max(1, len(tpl.zones))
            out[pool] = (0, spec.max_size * zones) if spec is not None else (0, _DEFAULT_MAX_POOL_SIZE)
        return out

    def _node_facts(self) -> tuple[GroupLimits, dict[str, dict[str, int]], dict[str, int]]:
        """``--nodes`` limits resolved over the nodes, nodes per pool and zone, and nodes per
        pool (the template pools first), kept while no node changes."""
        rev = self._index.node_revision()
        if self._facts is None or self._facts[0] != rev:
            counts: dict[str, dict[str, int]] = {}
            sizes = dict.fromkeys(self.templates, 0)
            for n in self.nodes.values():
                by_zone = counts.setdefault(n.node_group, {})
                by_zone[n.zone] = by_zone.get(n.zone, 0) + 1
                if n.node_group:
                    sizes[n.node_group] = sizes.get(n.node_group, 0) + 1
            self._facts = (rev, node_group_limits(self.config, self.nodes.values()), counts, sizes)
        return self._facts[1:]

    def zone_groups(self, pool: str) -> tuple[ZoneGroupInfo, ...]:
        """The pool in each zone its nodes are in: nodes there, and ``--nodes`` limits (a MIG's
        entry, else the pool's; min 0 and max 1000 without)."""
        limits, counts, _ = self._node_facts()
        out = []
        for zone, count in sorted(counts.get(pool, {}).items()):
            spec = limits.for_zone(pool, zone)
            lo, hi = (spec.min_size, spec.max_size) if spec is not None else (0, _DEFAULT_MAX_POOL_SIZE)
            out.append(ZoneGroupInfo(zone, lo, hi, count))
        return tuple(out)

    def pool_sizes(self) -> dict[str, int]:
        """Nodes per pool, counting nodes being provisioned (the MIG's target size)."""
        sizes = dict(self._node_facts()[2])
        for _, _, pool in self.provisioning:
            sizes[pool] = sizes.get(pool, 0) + 1
        return sizes

    def _template_state(self, pool: str) -> tuple[ClusterState, Node]:
        tpl = self.templates[pool]
        node = replace(tpl.node, name=f"~template-{pool}")
        pods = [replace_pod(p, node_name=node.name) for p in tpl.pods]
        snap = _with_objects(self._base, [node], pods, self.now)
        if self.dra.present:  # the template node's devices, and the claims as they are now
            snap = replace(
                snap, dra=sim_dra.with_node_slices(self.dra, self._base.dra, tpl.node.name, node.name)
            )
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
        self.dra = sim_dra.with_node_slices(self.dra, self._base.dra, tpl.node.name, name)
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
