"""The replay world's usage model: what every pod and node uses at each step, and the cluster
as the controller reads it (:meth:`UsageModel.snapshot`).

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

Each pod has a usage slot (by uid: a replacement keeps its pod's), a trace series row or a
constant; the usage of every slot at a step is computed once, as arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from scaler.model.pod_usage import PodMetricsColumns
from scaler.model.records import NodeMetrics, Pod, PodMetrics
from scaler.model.snapshot import ClusterSnapshot
from scaler.replay.sim_records import node_overheads, partial_readings, pod_limits, start_reading
from scaler.replay.world_store import WorldSpec, WorldStore

__all__ = ["UsageModel"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class UsageModel(WorldStore):
    """The store (:class:`~scaler.replay.world_store.WorldStore`) with the usage of its pods and
    nodes over the replay, and the snapshots the controller reads.

    Args:
        spec: what the world is built from (the usage model reads ``start``, ``usage``,
            ``pod_series`` and ``with_pod_metrics``).
    """

    def __init__(self, spec: WorldSpec) -> None:
        super().__init__(spec)
        start, usage, pod_series = spec.start, spec.usage, spec.pod_series
        self.usage = usage
        self.with_pod_metrics = spec.with_pod_metrics
        self._cached: tuple[int, float, ClusterSnapshot] | None = None
        self._structure: tuple[int, ClusterSnapshot] | None = None
        self._arrays: tuple[int, IntArray, IntArray, list[str]] | None = None
        # Usage slots: one per pod (uid), a series row or a constant.
        rows = {s: i for i, s in enumerate(usage.series)}
        self._slot_row: list[int] = []
        self._slot_const: list[tuple[float, float]] = []
        self._slot_limit: list[tuple[float, float]] = []
        # Pods whose snapshot PodMetrics lacked a container they run: uid -> the containers the
        # reading covered. Their readings in the world cover the same, so the controller keeps
        # reading their usage as the snapshot gave it (unknown usage is never zero).
        self._covered: dict[str, tuple[str, ...]] = {}
        self._slot_arrays: tuple[int, IntArray, FloatArray, FloatArray, FloatArray, FloatArray] | None = None
        for p in start.pods:
            m, covered = start_reading(start, p)
            if covered is not None:
                self._covered[p.uid] = covered
            const = (float(m.cpu_millicores), float(m.memory_bytes)) if m is not None else (0.0, 0.0)
            series = pod_series.get(p.key)
            self._add_slot(p.uid, rows[series] if series is not None and series in rows else -1, const, p)
        self._demand: tuple[int, int, FloatArray, FloatArray] | None = None  # (step, slots, cpu, mem)
        self._used: tuple[int, int, FloatArray, FloatArray] | None = None
        self._overhead = node_overheads(start)

    def _add_slot(self, uid: str, row: int, const: tuple[float, float], pod: Pod) -> None:
        self._index.slot_added(uid, uid in self._slot_of)
        self._slot_of[uid] = len(self._slot_row)
        self._slot_row.append(row)
        self._slot_const.append(const)
        self._slot_limit.append(pod_limits(pod))

    # ---- reading ------------------------------------------------------------------------------------
    def _slots(self) -> tuple[int, IntArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """(slot count, series rows, constant cpu, constant memory, cpu limits, memory limits)
        of every usage slot as arrays. Slots are only ever appended: the arrays are kept and
        extended by the slots added since (a replacement pod adds one)."""
        n = len(self._slot_row)
        kept = self._slot_arrays
        if kept is not None and kept[0] == n:
            return kept
        at = 0 if kept is None else kept[0]
        rows = np.asarray(self._slot_row[at:], dtype=np.int64)
        const = np.asarray(self._slot_const[at:], dtype=np.float64).reshape(n - at, 2)
        limit = np.asarray(self._slot_limit[at:], dtype=np.float64).reshape(n - at, 2)
        cpu_c, mem_c = const[:, 0].copy(), const[:, 1].copy()
        cpu_l, mem_l = limit[:, 0].copy(), limit[:, 1].copy()
        if kept is not None:
            _, rows0, cpu_c0, mem_c0, cpu_l0, mem_l0 = kept
            rows = np.concatenate((rows0, rows))
            cpu_c, mem_c = np.concatenate((cpu_c0, cpu_c)), np.concatenate((mem_c0, mem_c))
            cpu_l, mem_l = np.concatenate((cpu_l0, cpu_l)), np.concatenate((mem_l0, mem_l))
        self._slot_arrays = (n, rows, cpu_c, mem_c, cpu_l, mem_l)
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
