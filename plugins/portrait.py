"""Resource-portrait plugins (seed 001): ``PodFitsResourceOnPortrait`` and
``ResourceBalanceOnPortrait``.

Origin: seed 001, §4.6 "基于资源画像的调度策略实现" (scheduling on resource portraits). Its
Algorithm 1 (``PodFitsResourceOnPortrait``) replaces kube-scheduler's requests-only
``PodFitsResources`` with a *soft limit* on the destination's 24-hour portrait plus a *hard
limit* on its requests scaled by a static oversell rate; its Algorithm 2
(``ResourceBalanceOnPortrait``) scores a destination by a Gaussian estimate of its busiest hour
against a target load ``T``, min-max normalised per resource and summed with weights (formula
4.7). Here they judge where the pods of a node being removed would go.

Profiles (:class:`~scaler.plugin_api.WorkloadProfile`, one per workload, per replica) are
read from ``state.snapshot.workload_profiles`` (``getattr``: an empty mapping when the snapshot
has none). With **no profiles at all** (``--history=none``) the filter checks only the hard
limit and the score is 0 for every node (neutral): instantaneous usage is TargetUsage's job.

The node model (seed 001's ``AssumePodOnNode``), per resource ``r`` (CPU millicores, memory
bytes) and UTC hour of the day ``h``; ``n`` is the destination, ``p`` the pod being placed:

* **A pod's contribution** ``c_q[h]``: the profile of its workload
  (:func:`~scaler.plugin_api.workload_key`): ``peak``, ``mean`` and ``std²`` of hour ``h``.
  An hour without samples takes the workload's busiest sampled hour (largest peak for the peak,
  largest mean, with that hour's std, for the Gaussian). A pod whose workload has no profile,
  or no sample of ``r``, contributes its request every hour (mean = peak = request, std 0): it
  is *unprofiled* for ``r``.
* **The node's load** before ``p``: the sum of the contributions of every pod counted on ``n``:
  the pods it had in the snapshot (the state's counted pods: not terminal, not expendable) and
  the pods moved onto it earlier in this evaluation (including by committed removals of other
  nodes). Means add and variances add (pods' usages are treated as independent Gaussians, so
  the node's load is Gaussian, as seed 001 assumes); peaks add (a safe bound).
* **The node's base, floored by its current usage** ``U_r`` (``NodeState`` usage: fresh
  NodeMetrics, possibly aggregated by the planner) when it is known: the sum over the snapshot's
  pods is raised to at least ``U_r`` at the current hour ``h_now`` (what the node uses now is a
  fact the profiles must not undercut), and at *every* hour when one of those pods is unprofiled
  for ``r`` (its request may understate its use, e.g. a BestEffort pod requests nothing, and
  nothing better is known about its other hours). Moved pods are not in ``U_r``; they add on top.
* **After adding** ``p``: ``load_r[h] = base_r[h] + Σ_moved c_r[h] + c_{p,r}[h]``.

Units and comparisons are in the resources' own units; targets are exact fractions
(``Fraction(str(0.45))`` = 9/20) applied by cross-multiplication.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from scaler.plugin_api import (
    HOURS,
    ClusterState,
    Codes,
    NodeState,
    Pod,
    Positions,
    ScalerConfig,
    WorkloadProfile,
    hour_of_day,
    workload_key,
)

__all__ = [
    "PodFitsResourceOnPortrait",
    "ResourceBalanceOnPortrait",
    "gaussian_balance_score",
    "probability_between",
    "profiles_of",
]

FloatArray = npt.NDArray[np.float64]

# Rows of a contribution matrix (shape (6, 24)): per resource mean, variance and peak.
CPU_MEAN, CPU_VAR, CPU_PEAK, MEM_MEAN, MEM_VAR, MEM_PEAK = range(6)
_PEAKS = [CPU_PEAK, MEM_PEAK]
_STATS = [CPU_MEAN, CPU_VAR, MEM_MEAN, MEM_VAR]  # score_nodes reads its columns as 0, 1, 2, 3
_ALL = list(range(6))


def _hourly_peaks(loads: FloatArray, z: float | None) -> FloatArray:
    """Estimated hourly peaks, shape (k, 2, 24) (CPU, memory), of nodes whose loads (all six
    rows, shape (k, 6, 24)) are given: the sum of peaks when ``z`` is ``None``, else
    ``min(Σ peak, Σ mean + z · sqrt(Σ var))`` (see :class:`PodFitsResourceOnPortrait`)."""
    peaks = loads[:, _PEAKS, :]
    if z is None:
        return peaks
    means = loads[:, [CPU_MEAN, MEM_MEAN], :]
    stds = np.sqrt(np.maximum(loads[:, [CPU_VAR, MEM_VAR], :], 0.0))
    return np.minimum(peaks, means + z * stds)


def profiles_of(state: ClusterState) -> Mapping[str, WorkloadProfile]:
    """The workload profiles of the state's snapshot (``snapshot.workload_profiles``), or an
    empty mapping when the snapshot carries none."""
    found: Mapping[str, WorkloadProfile] | None = getattr(state.snapshot, "workload_profiles", None)
    return found or {}


def probability_between(mu: float, sigma: float, v1: float, v2: float) -> float:
    """Seed 001's ``ProbabilityBetween(μ, σ, v1, v2)``: ``P(v1 < X < v2)`` for
    ``X ~ N(μ, σ²)`` (0 when ``v2 <= v1``).

    ``σ = 0`` is taken as the limit ``σ → 0⁺`` (all mass at ``μ``, split half and half on
    either side of it), so that the score below stays continuous in σ: ``P(μ < X < T) = 0.5``
    for ``T > μ``.
    """
    if v2 <= v1:
        return 0.0
    return _cdf(mu, sigma, v2) - _cdf(mu, sigma, v1)


def _cdf(mu: float, sigma: float, v: float) -> float:
    if sigma > 0:
        return 0.5 * (1.0 + math.erf((v - mu) / (sigma * math.sqrt(2.0))))
    if v > mu:
        return 1.0
    return 0.5 if v == mu else 0.0


def gaussian_balance_score(mean: float, std: float, target: float) -> float:
    """Seed 001's per-resource score (Algorithm 2) for a node whose busiest-hour load is
    ``N(mean, std²)`` against the target load ``T = target`` (all as fractions of allocatable)::

        mean > T:   0.5 − P(T < x < mean)
        mean <= T:  0.5 + P(mean < x < T)

    Below the target a node scores at least 0.5 (the emptier, the closer to 1), above it at most
    0.5 (the fuller, the closer to 0), so any node under ``T`` beats any node over it. Both
    branches equal ``Φ((T − mean) / std)``, the probability that the busiest hour stays under the
    target. With ``std = 0``: 1 below the target, 0.5 at it, 0 above.
    """
    if mean > target:
        return 0.5 - probability_between(mean, std, target, mean)
    return 0.5 + probability_between(mean, std, mean, target)


def _pct(f: Fraction) -> str:
    return f"{float(f * 100):g}%"


class _Portraits:
    """Per-:class:`ClusterState` cache of contributions (see the module docstring for the model).

    Holds, lazily, each workload's and each pod's contribution matrix, and for each node of the
    state's table its base (snapshot pods, floored by usage) and the sum of its moved pods.
    A live destination's pods are its snapshot pods followed by the pods moved onto it (the
    state only appends to and pops from destinations; only the ghost loses pods), so the moved
    pods are ``pods[n_base:]``, identified by the pods' identities for the cache.
    """

    def __init__(self, state: ClusterState) -> None:
        self.profiles = profiles_of(state)
        self.active = bool(self.profiles)
        self.snapshot = state.snapshot
        self.hour_now = hour_of_day(state.snapshot.now)
        self._workloads: dict[str, tuple[FloatArray, bool, bool] | None] = {}
        self._pods: dict[str, tuple[Pod, tuple[FloatArray, bool, bool]]] = {}
        n = len(state.names)
        self.have = np.zeros(n, dtype=np.bool_)
        self.n_base = np.zeros(n, dtype=np.int64)
        self.base = np.zeros((n, 6, HOURS), dtype=np.float64)
        self._moved: dict[int, tuple[tuple[int, ...], FloatArray]] = {}

    # ---- contributions -----------------------------------------------------------------------
    def _workload(self, key: str) -> tuple[FloatArray, bool, bool] | None:
        """(matrix, cpu profiled, memory profiled) of a workload's profile, ``None`` without."""
        try:
            return self._workloads[key]
        except KeyError:
            pass
        prof = self.profiles.get(key)
        out = None
        if prof is not None:
            m = np.zeros((6, HOURS), dtype=np.float64)
            cpu = _fill(m, CPU_MEAN, prof.cpu_mean, prof.cpu_std, prof.cpu_peak, prof.cpu_samples)
            mem = _fill(m, MEM_MEAN, prof.memory_mean, prof.memory_std, prof.memory_peak, prof.memory_samples)
            out = (m, cpu, mem)
        self._workloads[key] = out
        return out

    def pod(self, pod: Pod) -> tuple[FloatArray, bool, bool]:
        """(contribution matrix, cpu profiled, memory profiled) of ``pod``."""
        hit = self._pods.get(pod.uid)
        if hit is not None and hit[0] is pod:
            return hit[1]
        w = self._workload(workload_key(pod, self.snapshot)) if self.active else None
        m = np.zeros((6, HOURS), dtype=np.float64)
        cpu = mem = False
        if w is not None:
            m[:] = w[0]
            cpu, mem = w[1], w[2]
        if not cpu:
            m[CPU_MEAN] = m[CPU_PEAK] = float(pod.requests.cpu_millicores)
            m[CPU_VAR] = 0.0
        if not mem:
            m[MEM_MEAN] = m[MEM_PEAK] = float(pod.requests.memory_bytes)
            m[MEM_VAR] = 0.0
        entry = (m, cpu, mem)
        self._pods[pod.uid] = (pod, entry)
        return entry

    # ---- node loads --------------------------------------------------------------------------
    def node_base(self, ns: NodeState) -> tuple[FloatArray, int]:
        """The node's base (6×24, floored by usage) and the number of its snapshot pods."""
        name = ns.name
        base = np.zeros((6, HOURS), dtype=np.float64)
        count = 0
        unprofiled = [False, False]
        for p in ns.pods:
            if p.node_name != name:
                continue
            count += 1
            m, cpu, mem = self.pod(p)
            base += m
            unprofiled[0] |= not cpu
            unprofiled[1] |= not mem
        for usage, rows, unprof in (
            (ns.usage_cpu_millicores, (CPU_MEAN, CPU_PEAK), unprofiled[0]),
            (ns.usage_memory_bytes, (MEM_MEAN, MEM_PEAK), unprofiled[1]),
        ):
            if usage is None:
                continue
            u = float(usage)
            for r in rows:
                if unprof:
                    np.maximum(base[r], u, out=base[r])
                else:
                    base[r, self.hour_now] = max(base[r, self.hour_now], u)
        return base, count

    def moved(self, ns: NodeState, n_base: int) -> FloatArray | None:
        """Σ contributions of the pods moved onto ``ns`` (``None`` when there are none)."""
        tail = ns.pods[n_base:]
        if not tail:
            return None
        if any(p.node_name == ns.name for p in tail):  # not the expected layout: scan every pod
            tail = [p for p in ns.pods if p.node_name != ns.name]
            if not tail:
                return None
        total = np.zeros((6, HOURS), dtype=np.float64)
        for p in tail:
            total += self.pod(p)[0]
        return total

    def ensure(self, nodes: Positions, state: ClusterState) -> None:
        """Compute the base of every node at ``nodes`` not computed yet. A ghost's base is
        computed but not kept: its pods are off it only for the simulation of its removal."""
        missing = nodes[~self.have[nodes]]
        names = state.names
        for i in missing.tolist():
            ns = state.nodes[names[i]]
            base, count = self.node_base(ns)
            self.base[i] = base
            self.n_base[i] = count
            self.have[i] = not ns.ghost

    def moved_sum(self, i: int, ns: NodeState) -> FloatArray | None:
        """Σ contributions of the pods moved onto the node at table row ``i`` (cached while
        the same pods sit there), ``None`` when there are none."""
        nb = int(self.n_base[i])
        if len(ns.pods) == nb:
            return None
        sig = tuple(id(p) for p in ns.pods[nb:])
        cached = self._moved.get(i)
        if cached is None or cached[0] != sig:
            moved = self.moved(ns, nb)
            cached = (sig, moved if moved is not None else np.zeros((6, HOURS), dtype=np.float64))
            self._moved[i] = cached
        return cached[1]

    def loads(self, nodes: Positions, state: ClusterState, rows: list[int]) -> FloatArray:
        """The load rows ``rows`` (base + moved) of the nodes at ``nodes``: shape (k, len(rows), 24)."""
        self.ensure(nodes, state)
        out = self.base[nodes][:, rows, :]
        counts = state.table.pod_count[nodes]
        names = state.names
        for j in np.flatnonzero(counts != self.n_base[nodes]).tolist():
            i = int(nodes[j])
            moved = self.moved_sum(i, state.nodes[names[i]])
            if moved is not None:
                out[j] += moved[rows]
        return out

    def in_state(self, ns: NodeState, state: ClusterState) -> bool:
        """True when ``ns`` is a node of ``state`` (its table row is valid)."""
        return 0 <= ns.position < len(self.have) and state.nodes.get(ns.name) is ns

    def node_load(self, ns: NodeState, state: ClusterState) -> FloatArray:
        """Base + moved (6×24) of one node, through the cache when ``ns`` belongs to ``state``.
        The result may be the cache's own array: callers must not modify it."""
        if self.in_state(ns, state):
            i = ns.position
            if not self.have[i]:
                self.ensure(np.array([i], dtype=np.intp), state)
            base: FloatArray = self.base[i]
            moved = self.moved_sum(i, ns)
            return base if moved is None else base + moved
        base, count = self.node_base(ns)
        moved = self.moved(ns, count)
        return base if moved is None else base + moved


def _fill(
    m: FloatArray,
    row: int,
    mean: Sequence[float],
    std: Sequence[float],
    peak: Sequence[float],
    samples: Sequence[int],
) -> bool:
    """Write mean, variance and peak rows (``row``, ``row + 1``, ``row + 2``) of one resource
    from a profile, filling unsampled hours from the busiest sampled hour. False when the
    profile has no sample of the resource (the rows are left for the request fallback)."""
    have = np.asarray(samples) > 0
    if not have.any():
        return False
    mu = np.asarray(mean, dtype=np.float64)
    sd = np.asarray(std, dtype=np.float64)
    pk = np.asarray(peak, dtype=np.float64)
    busiest = int(np.argmax(np.where(have, mu, -np.inf)))
    m[row] = np.where(have, mu, mu[busiest])
    m[row + 1] = np.where(have, sd * sd, sd[busiest] ** 2)
    m[row + 2] = np.where(have, pk, pk[have].max())
    return True


def _portraits(state: ClusterState) -> _Portraits:
    return state.static(("plugins.portrait", "portraits"), lambda: _Portraits(state))


class PodFitsResourceOnPortrait:
    """Filter plugin ``PodFitsResourceOnPortrait`` (seed 001, Algorithm 1).

    With the pod assumed on the destination (the module docstring's node model), the node fits
    when, in this order:

    1. *hard limit* (seed: 已分配资源不超过超卖率缩放的资源总量) — requests after adding the pod::

           Σ cpu requests <= allocatable_cpu × oversell_rate
           Σ memory requests <= allocatable_memory       (memory is never oversold, as in the seed)

       ``--oversell-rate`` (default 1, at most 1): the built-in NodeResourcesFit already holds
       requests to allocatable, the way kube-scheduler will re-place the evicted pods, so a rate
       above 1 could never be used; below 1 it keeps a requests reserve on destinations.
    2. *soft limit* (seed: 24 小时画像数据中的 cpucap/memcap 都不超过…), only when the snapshot
       has profiles: for every hour ``h`` of the day::

           peak_cpu[h] <= portrait_target_cpu_usage × allocatable_cpu
           peak_mem[h] <= portrait_target_memory_usage × allocatable_memory

       ``peak_r[h]`` is the node's hourly peak with every pod on it, moved ones and the pod
       included (request where a pod has no profile), its base floored by its current usage.
       ``--portrait-peak`` says how it is estimated:

       * ``sum`` (default): the sum of the pods' hourly peaks, a bound that assumes every peak
         coincides;
       * ``gaussian``: the ``--portrait-quantile`` (default 0.99) of the node's hourly load
         ``N(Σ mean, Σ std²)`` (seed 001's model, the one its Score uses): ``Σ mean + z · sqrt(Σ
         std²)`` with ``z = Φ⁻¹(quantile)``, and never more than the sum of peaks.

       Seed 001 bounds the portrait by the node's capacity; the targets
       (``--portrait-target-cpu-usage`` / ``--portrait-target-memory-usage``) default to
       TargetUsage's 0.45 and 0.75, so the two filters keep the same headroom, one for now and
       one for every hour (docs/tasks/replay.md's findings compare capacity). Both comparisons are
       ``<=`` (the seed's "不超过", does not exceed).

    Reasons name the resource and the limit, never per-node figures. ``filter_nodes`` answers
    for many nodes at once with the same verdicts.
    """

    name = "PodFitsResourceOnPortrait"

    def __init__(self, config: ScalerConfig) -> None:
        """Read the targets and the oversell rate from ``config`` as exact fractions."""
        self.config = config
        self.target_cpu = Fraction(str(config.portrait_target_cpu_usage))
        self.target_memory = Fraction(str(config.portrait_target_memory_usage))
        self.oversell = Fraction(str(config.oversell_rate))
        self.z = (
            NormalDist().inv_cdf(config.portrait_quantile) if config.portrait_peak == "gaussian" else None
        )
        self._reasons = (
            "node has no allocatable cpu",
            "node has no allocatable memory",
            f"cpu requests above {_pct(self.oversell)} of allocatable (oversell rate)",
            "memory requests above allocatable",
            f"cpu portrait peak above target {_pct(self.target_cpu)} in some hour",
            f"memory portrait peak above target {_pct(self.target_memory)} in some hour",
        )

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every reason this filter can return, in check order."""
        return self._reasons

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when ``pod`` fits on ``node`` by requests and by portrait, else the
        reason of the first failing check."""
        alloc = node.node.allocatable
        if alloc.cpu_millicores <= 0:
            return self._reasons[0]
        if alloc.memory_bytes <= 0:
            return self._reasons[1]
        o = self.oversell
        cpu_req = node.requested.cpu_millicores + pod.requests.cpu_millicores
        if cpu_req * o.denominator > o.numerator * alloc.cpu_millicores:
            return self._reasons[2]
        if node.requested.memory_bytes + pod.requests.memory_bytes > alloc.memory_bytes:
            return self._reasons[3]
        cache = _portraits(state)
        if not cache.active:
            return None
        est = _hourly_peaks((cache.node_load(node, state) + cache.pod(pod)[0])[np.newaxis], self.z)[0]
        cpu_peak = float(est[0].max())
        t = self.target_cpu
        if cpu_peak * t.denominator > t.numerator * alloc.cpu_millicores:
            return self._reasons[4]
        mem_peak = float(est[1].max())
        t = self.target_memory
        if mem_peak * t.denominator > t.numerator * alloc.memory_bytes:
            return self._reasons[5]
        return None

    def filter_nodes(
        self, pod: Pod, nodes: Positions, state: ClusterState
    ) -> tuple[Codes, tuple[str, ...]] | None:
        """:meth:`filter` for the nodes at table positions ``nodes``; ``None`` (check node by
        node) when requests or allocatable are too large for exact int64 arithmetic."""
        codes = np.zeros(len(nodes), dtype=np.int16)
        if len(nodes) == 0:
            return codes, self._reasons
        tab = state.table
        alloc_cpu, alloc_mem = tab.alloc_cpu[nodes], tab.alloc_mem[nodes]
        req_cpu = tab.req_cpu[nodes] + pod.requests.cpu_millicores
        req_mem = tab.req_mem[nodes] + pod.requests.memory_bytes
        o = self.oversell
        if max(int(req_cpu.max()), int(alloc_cpu.max())) * max(o.numerator, o.denominator) >= 2**62:
            return None  # beyond int64: the simulator asks :meth:`filter` node by node
        cache = _portraits(state)
        # Assigned from the last check to the first, so that the first failing check wins.
        if cache.active:
            rows = _ALL if self.z is not None else _PEAKS
            loads = cache.loads(nodes, state, rows) + cache.pod(pod)[0][rows]
            est = loads if self.z is None else _hourly_peaks(loads, self.z)
            cpu_peak = est[:, 0, :].max(axis=1)
            mem_peak = est[:, 1, :].max(axis=1)
            tm, tc = self.target_memory, self.target_cpu
            codes[mem_peak * tm.denominator > tm.numerator * alloc_mem.astype(np.float64)] = 6
            codes[cpu_peak * tc.denominator > tc.numerator * alloc_cpu.astype(np.float64)] = 5
        codes[req_mem > alloc_mem] = 4
        codes[req_cpu * o.denominator > o.numerator * alloc_cpu] = 3
        codes[alloc_mem <= 0] = 2
        codes[alloc_cpu <= 0] = 1
        return codes, self._reasons


class ResourceBalanceOnPortrait:
    """Score plugin ``ResourceBalanceOnPortrait`` (seed 001, Algorithm 2 and formula 4.7).

    For each resource ``r`` (CPU, memory), with the pod assumed on the node (the module
    docstring's node model): take the hour whose mean load is highest (the seed's loop: the first
    hour with the largest mean), its mean and standard deviation ``sqrt(Σ std²)``, both as
    fractions of allocatable, and score them against ``T`` = ``--target-cpu-usage`` /
    ``--target-memory-usage`` with :func:`gaussian_balance_score`
    (``0.5 − P(T < x < mean)`` above the target, ``0.5 + P(mean < x < T)`` below).

    Seed formula 4.7 then min-max normalises each resource's scores over the candidate nodes and
    sums them with weights ``ω`` (``--portrait-cpu-weight``, ``--portrait-memory-weight``,
    default 1 each)::

        final[n] = Σ_r ω_r · (score_r[n] − min_m score_r[m]) / (max_m score_r[m] − min_m score_r[m])

    (a resource whose scores are all equal normalises to 1 for every node). Normalising needs
    every candidate at once: :meth:`score_nodes` does it for a list of feasible nodes, and is
    what a simulator with a batch hook calls. :meth:`score` sees one node and returns the
    un-normalised ``Σ_r ω_r · score_r``, which ranks nodes the same way when only one resource
    varies among them.

    Without profiles (``--history=none``) every node scores 0 (neutral). A node with zero
    allocatable of a resource scores 0 on it.
    """

    name = "ResourceBalanceOnPortrait"

    def __init__(self, config: ScalerConfig) -> None:
        """Read the targets and weights from ``config``."""
        self.config = config
        self.target_cpu = float(config.target_cpu_usage)
        self.target_memory = float(config.target_memory_usage)
        self.weight_cpu = float(config.portrait_cpu_weight)
        self.weight_memory = float(config.portrait_memory_weight)

    def raw_scores(self, pod: Pod, node: NodeState, state: ClusterState) -> tuple[float, float]:
        """The seed's per-resource scores ``(cpu, memory)`` of ``node`` with ``pod`` on it, before
        normalisation (``(0.0, 0.0)`` without profiles)."""
        cache = _portraits(state)
        if not cache.active:
            return 0.0, 0.0
        total = cache.node_load(node, state) + cache.pod(pod)[0]
        alloc = node.node.allocatable
        return (
            _resource_score(total[CPU_MEAN], total[CPU_VAR], alloc.cpu_millicores, self.target_cpu),
            _resource_score(total[MEM_MEAN], total[MEM_VAR], alloc.memory_bytes, self.target_memory),
        )

    def score(self, pod: Pod, node: NodeState, state: ClusterState) -> float:
        """``ω_cpu · score_cpu + ω_mem · score_mem`` of one node, not normalised (see the class
        docstring; :meth:`score_nodes` is the seed's normalised form)."""
        cpu, mem = self.raw_scores(pod, node, state)
        return self.weight_cpu * cpu + self.weight_memory * mem

    def score_nodes(self, pod: Pod, nodes: Sequence[NodeState], state: ClusterState) -> list[float]:
        """Seed formula 4.7 over the candidate ``nodes``: per resource, the raw scores min-max
        normalised over ``nodes``, weighted and summed; one value per node, in order."""
        if not nodes:
            return []
        cache = _portraits(state)
        if not cache.active:
            return [0.0] * len(nodes)
        if all(cache.in_state(n, state) for n in nodes):
            pos = np.fromiter((n.position for n in nodes), dtype=np.intp, count=len(nodes))
            totals = cache.loads(pos, state, _STATS) + cache.pod(pod)[0][_STATS]
            tab = state.table
            raw = np.empty((len(nodes), 2), dtype=np.float64)
            for col, (mean_row, var_row, alloc, target) in enumerate(
                ((0, 1, tab.alloc_cpu[pos], self.target_cpu), (2, 3, tab.alloc_mem[pos], self.target_memory))
            ):
                means, variances = totals[:, mean_row, :], totals[:, var_row, :]
                h = np.argmax(means, axis=1)
                k = np.arange(len(nodes))
                for j, (m, v, a) in enumerate(
                    zip(means[k, h].tolist(), variances[k, h].tolist(), alloc.tolist(), strict=True)
                ):
                    raw[j, col] = _score_of(m, v, a, target)
        else:
            raw = np.array([self.raw_scores(pod, n, state) for n in nodes], dtype=np.float64)
        final = np.zeros(len(nodes), dtype=np.float64)
        for col, w in ((0, self.weight_cpu), (1, self.weight_memory)):
            s = raw[:, col]
            lo, hi = float(s.min()), float(s.max())
            norm = (s - lo) / (hi - lo) if hi > lo else np.ones_like(s)
            final += w * norm
        return [float(x) for x in final]


def _resource_score(mean_row: FloatArray, var_row: FloatArray, alloc: int, target: float) -> float:
    """Algorithm 2 for one resource: the busiest hour's mean and std as fractions of
    ``alloc``, scored against ``target``."""
    h = int(np.argmax(mean_row))
    return _score_of(float(mean_row[h]), float(var_row[h]), alloc, target)


def _score_of(mean: float, var: float, alloc: int, target: float) -> float:
    """The score of a busiest-hour ``mean`` and variance ``var`` (resource units) on a node
    with ``alloc`` of the resource (0 when it has none)."""
    if alloc <= 0:
        return 0.0
    if not mean > 0:  # the seed starts from mean = std = 0 and keeps the first larger mean
        mean = var = 0.0
    return gaussian_balance_score(mean / alloc, math.sqrt(max(var, 0.0)) / alloc, target)
