"""The TargetUsage filter: keep destinations below a target *real* usage.

Origin: seed 004 (wujiuye.com, "autoscaler缩减低利用率的节点,修改为使用节点的实时指标而不是requests",
2024-05-11), a cluster-autoscaler fork whose ``TargetUsageFilterPlugin`` (a kube-scheduler Filter
plugin named ``TargetUsage``) reads the destination node's NodeMetrics and rejects a pod when
``(usage + pod request) / allocatable`` exceeds 0.45 for CPU or reaches 0.75 for memory. CA itself
places evicted pods first-fit on requests only, ignoring the destination's real load (reference
§10, weakness 3); this filter closes that gap.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from scaler.plugin_api import ClusterState, Codes, NodeState, Pod, Positions, ScalerConfig

__all__ = ["TargetUsage"]


_Rooms = tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], bool
]
"""CPU room, CPU code, memory room, memory code per table row, and whether the codes are uniform."""


def _target(f: Fraction) -> str:
    return f"{float(f * 100):g}%"


class TargetUsage:
    """Filter plugin ``TargetUsage`` (seed 004): a pod may go to a node only if the node's real
    usage, plus what this evaluation already moved there, plus what the pod itself uses stays
    under the targets.

    For destination node *n* and pod *p* (CPU in millicores, memory in bytes)::

        (usage_cpu(n) + Σ load_cpu(moved → n) + load_cpu(p)) / allocatable_cpu(n) <= target_cpu_usage
        (usage_mem(n) + Σ load_mem(moved → n) + load_mem(p)) / allocatable_mem(n) <  target_memory_usage

    ``<=`` for CPU and strict ``<`` for memory, exactly as seed 004 (``cpuUsage > 0.45`` rejects,
    ``memoryUsage >= 0.75`` rejects).

    **usage(n)** is the destination's real usage, fixed for the whole evaluation: the larger of
    its aggregated and its newest NodeMetrics reading, plus the pods that started after that
    reading's window began and so are not in it yet (:func:`scaler.utilization.node_utilization`,
    ``destination_cpu_millicores``).

    **load(p)** is what a moved pod will use on its new node: per resource ``max(request, real
    usage)``, real usage from the pod's PodMetrics aggregated as node usage is (the larger of the
    aggregate and the newest reading), the request alone when the pod has no PodMetrics
    (:meth:`ClusterState.load`, :func:`scaler.utilization.pod_load`). A pod with neither a request
    nor PodMetrics for a resource has unknown usage: the engine keeps its node
    (``MetricsUnavailable``) rather than take it as zero. Seed 004 added the pod's request only,
    and only its first container's (``pod.Spec.Containers[0].Resources.Requests``): a pod using
    more than it requests, or a BestEffort pod requesting nothing, then lands on a destination
    that it pushes past the target (ten BestEffort pods using 180m each fit on a 4-core node at
    42.5% CPU and take it to 87.5%). Requests under-state real use precisely on the clusters
    scaler is for, so scaler counts the larger of the two.

    **Σ load(moved → n)** (``NodeState.moved_cpu_millicores`` / ``moved_memory_bytes``,
    maintained by ``ClusterState.place``) adds every pod already placed on *n* in this
    evaluation, including by earlier, committed node removals: metrics cannot see pods the
    simulation moves. Without it two candidates could each "fit" onto the same destination and
    together push it over the target. Seed 004 had no such term: each Filter call saw only usage
    + one pod.

    The comparison is exact: thresholds become ``Fraction(str(threshold))`` (0.45 → 9/20) and
    the test is an integer cross-multiplication, so a node at exactly 45 % CPU passes and one
    at exactly 75 % memory fails, with no float rounding.

    Rejects with a reason when the node has no usage (no fresh NodeMetrics: "unknown usage") or
    zero allocatable CPU or memory. Thresholds come from ``config.target_cpu_usage`` and
    ``config.target_memory_usage`` (fractions 0–1; defaults 0.45 and 0.75), or from the
    *destination's* node pool where ``node-pools`` overrides them (``config.for_pool``).

    ``filter_nodes`` gives the same verdicts for many nodes at once from the state's node table
    (NumPy int64, still exact integer arithmetic; it falls back to :meth:`filter` node by node
    if a product could overflow 63 bits), and ``fit_mask`` whether the pod passes on every row
    at once (the simulator's fast path). With per-pool targets each row is compared with its
    own pool's fraction (per-row numerator and denominator columns, still exact).
    """

    name = "TargetUsage"

    def __init__(self, config: ScalerConfig) -> None:
        """Read the thresholds from ``config`` (global and per node pool) as exact fractions."""
        self.config = config
        self.target_cpu = Fraction(str(config.target_cpu_usage))
        self.target_memory = Fraction(str(config.target_memory_usage))
        # Distinct targets, the global one first; a pool maps to its (cpu, memory) indices.
        self._cpu_targets = [self.target_cpu]
        self._mem_targets = [self.target_memory]
        self._pool_targets: dict[str, tuple[int, int]] = {}
        for pool in sorted(config.node_pools):
            eff = config.for_pool(pool)
            tc, tm = Fraction(str(eff.target_cpu_usage)), Fraction(str(eff.target_memory_usage))
            if (tc, tm) == (self.target_cpu, self.target_memory):
                continue
            for targets, t in ((self._cpu_targets, tc), (self._mem_targets, tm)):
                if t not in targets:
                    targets.append(t)
            self._pool_targets[pool] = (self._cpu_targets.index(tc), self._mem_targets.index(tm))
        # Codes: 1-3 as below, then one per cpu target, then one per memory target.
        self._reasons = (
            "unknown usage (no fresh node metrics)",
            "node has no allocatable cpu",
            "node has no allocatable memory",
            *(f"cpu usage above target {_target(t)}" for t in self._cpu_targets),
            *(f"memory usage at or above target {_target(t)}" for t in self._mem_targets),
        )
        self._mem_code0 = 4 + len(self._cpu_targets)
        self._rooms_key = (  # integers: a Fraction's hash is slow, and the key is hashed per pod
            "TargetUsage.rooms",
            tuple((t.numerator, t.denominator) for t in self._cpu_targets),
            tuple((t.numerator, t.denominator) for t in self._mem_targets),
            tuple(sorted(self._pool_targets.items())),
        )

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the projected usage of ``node`` with ``pod`` stays within the
        targets, else a reason naming the resource and the target, e.g.
        ``"cpu usage above target 45%"`` (no per-node figures: the simulator counts refusing
        nodes per reason)."""
        usage_cpu, usage_mem = node.usage_cpu_millicores, node.usage_memory_bytes
        if usage_cpu is None or usage_mem is None:
            return self._reasons[0]
        alloc_cpu = node.node.allocatable.cpu_millicores
        alloc_mem = node.node.allocatable.memory_bytes
        if alloc_cpu <= 0:
            return self._reasons[1]
        if alloc_mem <= 0:
            return self._reasons[2]
        ci, mi = self._pool_targets.get(node.node.node_group, (0, 0))
        load_cpu, load_mem = state.load(pod)
        cpu = usage_cpu + node.moved_cpu_millicores + load_cpu
        t = self._cpu_targets[ci]
        if cpu * t.denominator > t.numerator * alloc_cpu:
            return self._reasons[3 + ci]
        mem = usage_mem + node.moved_memory_bytes + load_mem
        t = self._mem_targets[mi]
        if mem * t.denominator >= t.numerator * alloc_mem:
            return self._reasons[self._mem_code0 - 1 + mi]
        return None

    def _rooms(self, state: ClusterState) -> _Rooms:
        """Per table row, built once per state from its static columns: the CPU room (the most
        ``moved + load`` millicores that keep the node within its CPU target) and its failure
        code, then the same for memory (the fewest bytes of ``moved + load`` that reach the
        memory target).

        With target ``t = num/den``, integer usage and allocatable, :meth:`filter`'s checks are
        ``usage + x > floor(num * alloc / den)`` for CPU and ``usage + x >= ceil(num * alloc /
        den)`` for memory, so the rooms are those bounds minus usage, computed exactly on Python
        integers and clamped to ±2**62 (:meth:`filter_nodes` only compares them with values
        below 2**62 in size, so the clamp changes no verdict). A row failing before the targets
        (no usage, no allocatable CPU or memory) gets a CPU room of -2**62, which every value
        exceeds, and that check's code. Last, whether every row has the global targets and no
        such failure (then the codes are the same on every row)."""
        bound = 2**62

        def clamp(v: int) -> int:
            return max(-bound, min(bound, v))

        def build() -> _Rooms:
            tab = state.table
            cpu_room, cpu_code, mem_room, mem_code = [], [], [], []
            rows = zip(
                state.nodes.values(),
                tab.has_usage.tolist(),
                tab.usage_cpu.tolist(),
                tab.usage_mem.tolist(),
                tab.alloc_cpu.tolist(),
                tab.alloc_mem.tolist(),
                strict=True,
            )
            for ns, has_usage, used_cpu, used_mem, alloc_cpu, alloc_mem in rows:
                ci, mi = self._pool_targets.get(ns.node.node_group, (0, 0))
                tc, tm = self._cpu_targets[ci], self._mem_targets[mi]
                first = 1 if not has_usage else 2 if alloc_cpu <= 0 else 3 if alloc_mem <= 0 else 0
                cpu_room.append(
                    -bound if first else clamp(tc.numerator * alloc_cpu // tc.denominator - used_cpu)
                )
                cpu_code.append(first or 4 + ci)
                mem_room.append(clamp(-(-tm.numerator * alloc_mem // tm.denominator) - used_mem))
                mem_code.append(self._mem_code0 + mi)
            uniform = not self._pool_targets and not any(c < 4 for c in cpu_code)

            def arr(col: list[int]) -> npt.NDArray[np.int64]:
                return np.array(col, dtype=np.int64)

            return arr(cpu_room), arr(cpu_code), arr(mem_room), arr(mem_code), uniform

        return state.static(self._rooms_key, build)

    def filter_nodes(
        self, pod: Pod, nodes: Positions, state: ClusterState
    ) -> tuple[Codes, tuple[str, ...]] | None:
        """:meth:`filter` for the nodes at table positions ``nodes``: each node's moved load plus
        the pod's compared with its rooms (:meth:`_rooms`). ``None`` (check node by node) when
        a value is too large for exact int64 arithmetic."""
        tab = state.table
        if len(nodes) == 0:
            return np.zeros(0, dtype=np.int16), self._reasons
        load_cpu, load_mem = state.load(pod)
        # |moved + load| stays below 2**62 (the table's magnitude bounds |moved|): no overflow,
        # and the rooms' clamp changes no comparison.
        if tab.magnitude + abs(load_cpu) + abs(load_mem) >= 2**62:
            return None  # the simulator asks :meth:`filter` node by node
        cpu_room, cpu_code, mem_room, mem_code, uniform = self._rooms(state)
        mem_over = tab.moved_mem[nodes] + load_mem >= mem_room[nodes]
        cpu_over = tab.moved_cpu[nodes] + load_cpu > cpu_room[nodes]
        if uniform:  # one code per check: no per-row lookups (most nodes fail, so it matters)
            return np.where(cpu_over, np.int16(4), mem_over * np.int16(self._mem_code0)), self._reasons
        # Assigned from the last check to the first, so that the first failing check wins.
        codes = np.zeros(len(nodes), dtype=np.int16)
        codes[mem_over] = mem_code[nodes[mem_over]]
        codes[cpu_over] = cpu_code[nodes[cpu_over]]
        return codes, self._reasons

    def fit_mask(self, pod: Pod, state: ClusterState) -> npt.NDArray[np.bool_] | None:
        """Per table row, whether :meth:`filter` passes ``pod`` there: each row's moved load
        plus the pod's against its rooms (:meth:`_rooms`), exact as :meth:`filter_nodes`;
        ``None`` when a value is too large for exact int64 arithmetic."""
        tab = state.table
        load_cpu, load_mem = state.load(pod)
        if tab.magnitude + abs(load_cpu) + abs(load_mem) >= 2**62:
            return None
        cpu_room, _, mem_room, _, _ = self._rooms(state)
        ok: npt.NDArray[np.bool_] = tab.moved_cpu + load_cpu <= cpu_room
        ok &= tab.moved_mem + load_mem < mem_room
        return ok
