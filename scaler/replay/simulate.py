"""Run policies over a replayed cluster, with the live controller's own code.

For each policy a :class:`~scaler.replay.world.World` is built from the same snapshot and trace,
and the live :class:`~scaler.controller.Controller` runs one loop per step with the replay clock.
Its loop is unchanged: record usage (:func:`~scaler.planner.record_usage`), aggregate it
(:func:`~scaler.planner.with_aggregated_usage`), :func:`~scaler.engine.evaluate`,
:func:`~scaler.planner.plan` with the cloud's node-group sizes and the newest node's creation
time, then start the removals. The removals are carried out by the real
:class:`~scaler.actuation.actuator.Actuator` steps (taint and cordon, re-check on fresh state,
drain through the eviction framework, verify, delete through the cloud, roll back on failure)
against the world's in-memory Kubernetes and cloud; only two things differ from live:

* the nodes of one plan are removed one after the other in the loop's thread, instead of one
  thread per node, so a replay is deterministic; the pods each drain evicts are re-placed by
  the world's scheduler before the next node;
* waits (``--node-delete-delay-after-taint``, pod disappearance polls) take no replay time.

Both go through the actuator's public seams (its dispatcher and its sleep), set up by
:class:`~scaler.replay.actuation.ReplayActuation`.

The status ConfigMap is not written. A policy with a ``--usage-window`` shorter than
``--scale-down-unneeded-time`` has the controller's usage history trimmed to that window before
each loop (``seed``: to the newest sample only). A policy with resource-portrait plugins reads
snapshots carrying ``workload_profiles`` built by ``scaler.history.profiles.build_profiles``
from the replay's own past usage (the last ``--history-days`` before the step), rebuilt every
``profile_refresh`` seconds.

Progress and logs: ``progress(policy, steps done, steps, simulated time)`` is called after every
step, in the calling process even when policies run as Ray tasks (they report through a Ray
queue, see :mod:`scaler.fanout`). Log records emitted while a policy replays carry its name and
the simulated time (:class:`ReplayLogContext`); records of Ray tasks are handed to the calling
process's handlers when the policy's replay ends.

Per step, after the loop and the scheduler: every node present or being provisioned is counted
for node-hours (and its pool's price for cost), and a node whose real usage is above 100% of its
allocatable CPU or 95% of its allocatable memory counts one step of overload. Pods still pending
after the scheduler count as unplaceable. The running pods' CPU demand above their CPU limits
counts as throttled CPU (core-minutes), and each pod whose memory demand is above its memory
limit as one OOM kill (:meth:`~scaler.replay.world.World.limit_effects`).
"""

from __future__ import annotations

import contextvars
import dataclasses
import gc
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import numpy as np
import numpy.typing as npt

from scaler.controller import NO_STATUS, Controller
from scaler.history.profiles import build_profiles_from_arrays, workload_key
from scaler.model.gcpause import no_cycle_collector
from scaler.model.profiles import HOURS, WorkloadProfile, hour_of_day
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_time
from scaler.observability import Metrics
from scaler.replay.actuation import ReplayActuation
from scaler.replay.policies import Policy
from scaler.replay.sim_cluster import SimCloud, SimWriter
from scaler.replay.world import UsageTable, World

T = TypeVar("T")

__all__ = [
    "OVERLOAD_CPU",
    "OVERLOAD_MEMORY",
    "PolicyResult",
    "ReplayInput",
    "run_policies",
    "run_policy",
]

OVERLOAD_CPU = 1.0
"""A node is overloaded when its real CPU usage is above this fraction of allocatable …"""
OVERLOAD_MEMORY = 0.95
"""… or its real memory usage above this fraction."""

FloatArray = npt.NDArray[np.float64]
_NO_POOL = "(no node pool)"


@dataclass(frozen=True, slots=True)
class ReplayInput:
    """Everything the policies of one replay share.

    Attributes:
        snapshot: the starting cluster.
        usage: the trace on the replay grid (its ``times`` are the steps).
        pod_series: ``namespace/name`` → series name for the pods that follow the trace.
        step: seconds between steps.
        provision_delay: seconds from a scale-up request to the node joining.
        prices: machine type → USD per node-hour.
        profile_refresh: seconds between rebuilds of workload profiles (portrait policies).
        start_step: the index of ``usage.times`` the replay starts at; the steps before it are
            the trace's past, read only as history by workload profiles.
    """

    snapshot: ClusterSnapshot
    usage: UsageTable
    pod_series: Mapping[str, str]
    step: float
    provision_delay: float = 120.0
    prices: Mapping[str, float] = field(default_factory=dict)
    profile_refresh: float = 3600.0
    start_step: int = 0


@dataclass(slots=True)
class PolicyResult:
    """What one policy did over the replay.

    Attributes:
        name, description, flags: the policy.
        node_hours: Σ nodes (present or being provisioned) × time.
        node_hours_by_pool: the same per node pool.
        cost: USD, node-hours × the pool's machine-type price; ``None`` when a pool has no price.
        cost_by_pool: USD per pool (pools without a price are absent).
        missing_prices: machine types that had no price.
        nodes_removed, nodes_added: nodes deleted by scale-down; nodes added by scale-up.
        pods_evicted: evictions by drains and by hot-node relief.
        relief_evictions: evictions by hot-node relief (``--hot-node-relief``).
        pods_deleted: evicted pods that were not replaced (no controller).
        overload_node_minutes: node-minutes with real usage above 100% CPU or 95% memory.
        overload_cpu_node_minutes, overload_memory_node_minutes: the same per resource.
        throttled_cpu_core_minutes: Σ over steps and running pods of the CPU demand above the
            pod's CPU limit (cores × minutes): what the CFS quota withheld.
        oom_kills: pods OOM-killed, one per pod and step whose memory demand is above its
            memory limit (the pod restarts and follows its series again).
        unplaceable_pods: pods that stayed pending after the scheduler ran, at least once.
        unschedulable_pods: pending pods that fit no node pool even on a new node.
        pending_pod_minutes: Σ pending pods × time.
        failed_removals: removals rolled back (re-check, drain or delete failed).
        times: the step times.
        nodes: nodes counted at each step.
        overloaded: overloaded nodes at each step.
        cost_per_step: USD spent during each step.
        elapsed_seconds: wall time of the replay of this policy.
        events: events the controller and actuator emitted, by reason.
    """

    name: str
    description: str
    flags: tuple[str, ...]
    node_hours: float = 0.0
    node_hours_by_pool: dict[str, float] = field(default_factory=dict)
    cost: float | None = 0.0
    cost_by_pool: dict[str, float] = field(default_factory=dict)
    missing_prices: tuple[str, ...] = ()
    nodes_removed: int = 0
    nodes_added: int = 0
    pods_evicted: int = 0
    relief_evictions: int = 0
    pods_deleted: int = 0
    overload_node_minutes: float = 0.0
    overload_cpu_node_minutes: float = 0.0
    overload_memory_node_minutes: float = 0.0
    throttled_cpu_core_minutes: float = 0.0
    oom_kills: int = 0
    unplaceable_pods: int = 0
    unschedulable_pods: int = 0
    pending_pod_minutes: float = 0.0
    failed_removals: int = 0
    times: list[float] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    overloaded: list[int] = field(default_factory=list)
    cost_per_step: list[float] = field(default_factory=list)
    elapsed_seconds: float = 0.0
    events: dict[str, int] = field(default_factory=dict)


# ---- workload profiles (resource portraits) ---------------------------------------------------------


_Values = tuple[float, float, float, float, float, float, int, int]
"""One workload's figures in one hour of the day: cpu mean, std, peak, memory mean, std, peak,
cpu samples, memory samples."""


class _Profiles:
    """Builds workload profiles from the world's past usage, at most every ``refresh`` seconds
    (as the live ``ProfileCache``), with ``scaler.history.profiles.build_profiles_from_arrays``.

    Samples are the replay's own past: one per pod and past step within the last
    ``history_days``. Two shortcuts keep a month-long replay fast, neither changing a profile's
    mean, deviation or peak:

    * The figures of one hour of the day depend only on that hour's samples. A refresh moves the
      window by about an hour, so only the hours of the steps that entered or left it are
      recomputed (by the same function, on those hours' samples); the other hours are kept.
    * Workloads none of whose pods follow the trace have constant usage; their profiles are
      built once from one sample per pod and hour (smaller sample counts) and rebuilt only when
      their pods change.

    ``incremental=False`` recomputes every hour at each refresh (the tests compare both).
    """

    def __init__(
        self, world: World, history_days: float, refresh: float, *, incremental: bool = True
    ) -> None:
        self.world = world
        self.history_days = history_days
        self.refresh = refresh
        self.incremental = incremental
        self.built_at: float | None = None
        self.profiles: Mapping[str, WorkloadProfile] = {}
        self.keys: dict[str, str] = {}
        self._hours = np.asarray([hour_of_day(float(t)) for t in world.usage.times], dtype=np.int64)
        self._constant: tuple[tuple[tuple[str, float, float], ...], dict[str, WorkloadProfile]] | None = None
        self._traced_sig: tuple[tuple[str, int, float, float, float, float], ...] | None = None
        self._window: tuple[int, int] | None = None
        self._by_hour: list[dict[str, _Values]] = [{} for _ in range(HOURS)]

    def _pods(
        self, snapshot: ClusterSnapshot
    ) -> tuple[list[tuple[str, int, float, float, float, float]], list[tuple[str, float, float]]]:
        """(key, series row, constant cpu, constant memory, cpu limit, memory limit) of the pods
        of traced workloads, and (key, cpu, memory) of the pods of constant ones (capped at
        their limits), in a stable order. Past usage is what the pods used: their demand capped
        at their limits, as Prometheus would have recorded it."""
        w = self.world
        by_key: dict[str, list[tuple[int, float, float, float, float]]] = {}
        for p in w.pods.values():
            if p.is_terminal:
                continue
            key = self.keys.get(p.uid)
            if key is None:
                key = self.keys[p.uid] = workload_key(p, snapshot)
            slot = w._slot_of[p.uid]
            c, m = w._slot_const[slot]
            lc, lm = w._slot_limit[slot]
            by_key.setdefault(key, []).append((w._slot_row[slot], min(c, lc), min(m, lm), lc, lm))
        traced: list[tuple[str, int, float, float, float, float]] = []
        constant: list[tuple[str, float, float]] = []
        for key in sorted(by_key):
            pods = by_key[key]
            if any(row >= 0 for row, *_ in pods):
                traced.extend((key, *pod) for pod in pods)
            else:
                constant.extend((key, c, m) for _, c, m, _, _ in pods)
        return traced, sorted(constant)

    def _constant_profiles(
        self, constant: list[tuple[str, float, float]], now: float
    ) -> dict[str, WorkloadProfile]:
        sig = tuple(constant)
        if self._constant is None or self._constant[0] != sig:
            hours = now - 86400.0 + 3600.0 * np.arange(24, dtype=np.float64)
            keys = [k for k, _, _ in constant for _ in range(24)]
            cpu = np.repeat(np.asarray([c for _, c, _ in constant], dtype=np.float64), 24)
            mem = np.repeat(np.asarray([m for _, _, m in constant], dtype=np.float64), 24)
            ts = np.tile(hours, len(constant))
            self._constant = (sig, build_profiles_from_arrays(keys, ts, cpu, mem, now, 1.0))
        return self._constant[1]

    def _recompute(
        self,
        traced: list[tuple[str, int, float, float, float, float]],
        steps: npt.NDArray[np.int64],
        hours: set[int],
        now: float,
    ) -> None:
        """Recompute the figures of ``hours`` from the samples of the window's ``steps`` in them."""
        w = self.world
        sel = steps[np.isin(self._hours[steps], list(hours))]
        n = len(sel)
        for h in hours:
            self._by_hour[h] = {}
        if n == 0 or not traced:
            return
        t = w.usage.times[sel]
        keys: list[str] = []
        cpu_parts: list[FloatArray] = []
        mem_parts: list[FloatArray] = []
        for key, row, c, m, lc, lm in traced:
            keys.extend([key] * n)
            if row >= 0:
                cpu_row = np.minimum(w.usage.cpu[row, sel], lc)
                mem_row = np.minimum(w.usage.memory[row, sel], lm)
                first = w.usage.first_sample
                if first is not None and t[0] < first[row]:
                    unseen = t < first[row]  # before the series starts: not history
                    cpu_row, mem_row = np.where(unseen, np.nan, cpu_row), np.where(unseen, np.nan, mem_row)
                cpu_parts.append(cpu_row)
                mem_parts.append(mem_row)
            else:
                cpu_parts.append(np.full(n, c))
                mem_parts.append(np.full(n, m))
        built = build_profiles_from_arrays(
            keys,
            np.tile(t, len(traced)),
            np.concatenate(cpu_parts),
            np.concatenate(mem_parts),
            now,
            self.history_days,
        )
        for key, prof in built.items():
            for h in hours:
                if prof.cpu_samples[h] or prof.memory_samples[h]:
                    self._by_hour[h][key] = (
                        prof.cpu_mean[h],
                        prof.cpu_std[h],
                        prof.cpu_peak[h],
                        prof.memory_mean[h],
                        prof.memory_std[h],
                        prof.memory_peak[h],
                        prof.cpu_samples[h],
                        prof.memory_samples[h],
                    )

    def _build(self, snapshot: ClusterSnapshot) -> dict[str, WorkloadProfile]:
        w = self.world
        times = w.usage.times
        upto = w.step
        now = float(times[upto])
        first = int(np.searchsorted(times, now - self.history_days * 86400.0, side="left"))
        if first >= upto:
            return {}  # no past yet
        traced, constant = self._pods(snapshot)
        sig = tuple(traced)
        every = set(range(HOURS))
        if not self.incremental or self._window is None or sig != self._traced_sig:
            hours = every
        else:
            old_first, old_upto = self._window
            moved = np.concatenate(
                [
                    np.arange(old_upto, upto, dtype=np.int64),
                    np.arange(old_first, min(first, old_upto), dtype=np.int64),
                ]
            )
            hours = set(self._hours[moved].tolist()) if len(moved) else set()
        if hours:
            self._recompute(traced, np.arange(first, upto, dtype=np.int64), hours, now)
        self._traced_sig, self._window = sig, (first, upto)
        out: dict[str, WorkloadProfile] = dict(self._constant_profiles(constant, now))
        zero: _Values = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0)
        for key in sorted({k for table in self._by_hour for k in table}):
            v = [table.get(key, zero) for table in self._by_hour]
            out[key] = WorkloadProfile(
                key=key,
                cpu_mean=tuple(x[0] for x in v),
                cpu_std=tuple(x[1] for x in v),
                cpu_peak=tuple(x[2] for x in v),
                memory_mean=tuple(x[3] for x in v),
                memory_std=tuple(x[4] for x in v),
                memory_peak=tuple(x[5] for x in v),
                cpu_samples=tuple(x[6] for x in v),
                memory_samples=tuple(x[7] for x in v),
            )
        return out

    def attach(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """``snapshot`` with ``workload_profiles`` built from the usage before the current step."""
        now = self.world.now
        if self.built_at is None or now - self.built_at >= self.refresh:
            self.profiles = self._build(snapshot)
            self.built_at = now
        return dataclasses.replace(snapshot, workload_profiles=self.profiles)


# ---- one policy --------------------------------------------------------------------------------------


Progress = Callable[[str, int, int, float], None]
"""``progress(policy name, steps done, steps in all, simulated time in Unix seconds)``."""

_LOG_CONTEXT: contextvars.ContextVar[tuple[str, float] | None] = contextvars.ContextVar(
    "replay_log_context", default=None
)


class ReplayLogContext(logging.Filter):
    """A handler filter that prefixes records emitted during a replay with the policy's name and
    the simulated time: ``policy scaler at 2013-07-08T03:05:00Z: scale-down of node … failed``.
    Records emitted outside a replay pass unchanged; a record is prefixed once."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Prefix ``record.msg`` (always keeps the record)."""
        ctx = _LOG_CONTEXT.get()
        if ctx is not None and not getattr(record, "replay_context", None):
            where = f"policy {ctx[0]} at {format_time(ctx[1])}"
            record.replay_context = where  # marks it as prefixed
            record.msg = f"{where}: {record.getMessage()}"
            record.args = None
        return True


COLLECT_EVERY_STEPS = 288
"""Steps between two runs of the cycle collector in a replay (a day of 5-minute steps)."""


def run_policy(
    inp: ReplayInput,
    policy: Policy,
    progress: Progress | None = None,
    observe: Callable[[World], None] | None = None,
) -> PolicyResult:
    """Replay ``policy`` over ``inp`` and measure it (see the module doc); ``progress`` is called
    after every step.

    ``observe``, when given, is called once per step with the :class:`World` after that step's
    accounting (the controller's loop, the scheduler and scale-up have run; the node-hours and
    overload of the interval ``[t, t + step)`` are counted), so a diagnostic can read the very
    state the figures were taken from (``world.node_usage()``, ``world.pod_usage()``,
    ``world.snapshot()``). It must not change the world. Used by
    :mod:`benchmarks.relief_bound`.
    """
    token = _LOG_CONTEXT.set((policy.name, float(inp.usage.times[inp.start_step])))
    try:
        return _run_policy(inp, policy, progress, observe)
    finally:
        _LOG_CONTEXT.reset(token)


def _count_overload(world: World, result: PolicyResult, minutes: float) -> int:
    """Add one step (``minutes`` long) of overload, throttled CPU and OOM kills to ``result``;
    returns the number of overloaded nodes (real usage above :data:`OVERLOAD_CPU` of allocatable
    CPU or :data:`OVERLOAD_MEMORY` of allocatable memory)."""
    names, cpu, mem = world.node_usage()
    alloc = np.asarray(
        [(world.nodes[n].allocatable.cpu_millicores, world.nodes[n].allocatable.memory_bytes) for n in names],
        dtype=np.float64,
    ).reshape(len(names), 2)
    over_cpu = cpu > alloc[:, 0] * OVERLOAD_CPU
    over_mem = mem > alloc[:, 1] * OVERLOAD_MEMORY
    over = int(np.count_nonzero(over_cpu | over_mem))
    result.overload_node_minutes += over * minutes
    result.overload_cpu_node_minutes += int(np.count_nonzero(over_cpu)) * minutes
    result.overload_memory_node_minutes += int(np.count_nonzero(over_mem)) * minutes
    throttled, oom = world.limit_effects()
    result.throttled_cpu_core_minutes += throttled / 1000.0 * minutes
    result.oom_kills += oom
    return over


def _fill_totals(
    result: PolicyResult, world: World, by_pool: Mapping[str, float], price: Mapping[str, float | None]
) -> None:
    """Set ``result``'s totals at the end of the replay: node-hours (per pool), cost (``None``
    when a pool with node-hours has no price: those machine types are listed) and the world's
    counters (removals, additions, evictions, unplaceable pods, pending pod-minutes)."""
    templates = world.templates
    st = world.stats
    result.node_hours = float(sum(by_pool.values()) + 0.0)
    result.node_hours_by_pool = {p: round(h, 6) for p, h in sorted(by_pool.items())}
    missing = sorted(
        {
            (templates[p].machine_type or f"(pool {p})") if p in templates else p
            for p in by_pool
            if price.get(p) is None and by_pool[p] > 0
        }
    )
    result.missing_prices = tuple(missing)
    result.cost_by_pool = {
        p: by_pool[p] * cast(float, price[p]) for p in sorted(by_pool) if price.get(p) is not None
    }
    result.cost = None if missing else float(sum(result.cost_by_pool.values()))
    result.nodes_removed = st.nodes_removed
    result.nodes_added = st.nodes_added
    result.pods_evicted = st.pods_evicted
    result.pods_deleted = st.pods_deleted
    result.unplaceable_pods = len(st.unplaceable_pods)
    result.unschedulable_pods = len(st.unschedulable_pods)
    result.pending_pod_minutes = st.pending_pod_seconds / 60.0


def _build_policy(inp: ReplayInput, policy: Policy) -> tuple[World, SimWriter, Controller, ReplayActuation]:
    """One policy's replayed cluster (its world, in-memory Kubernetes and cloud) and the live
    controller that acts on it, leader from the start, acting through :class:`ReplayActuation`."""
    cfg = policy.config
    world = World(
        inp.snapshot,
        inp.usage,
        inp.pod_series,
        cfg,
        provision_delay=inp.provision_delay,
        start_step=inp.start_step,
        with_pod_metrics=True,  # moved pods count max(request, PodMetrics usage)
        scheduler_plugins=policy.scheduler_plugins,
    )
    writer = SimWriter(world, cfg.instance_name)
    cloud = SimCloud(world)
    profiles = _Profiles(world, policy.history_days, inp.profile_refresh) if policy.portrait else None
    if profiles is not None and policy.scheduler_plugins:
        world.attach = profiles.attach

    def source(now: float) -> ClusterSnapshot:
        snap = world.snapshot(now)
        return profiles.attach(snap) if profiles is not None else snap

    actuation = ReplayActuation(world)
    controller = Controller(
        cfg,
        source,
        writer,
        cloud,
        Metrics(),
        identity="replay",
        clock=lambda: world.now,
        actuator_factory=actuation.build,
        status_sink=NO_STATUS,
    )
    controller.leader.set()
    return world, writer, controller, actuation


def _run_policy(
    inp: ReplayInput,
    policy: Policy,
    progress: Progress | None,
    observe: Callable[[World], None] | None,
) -> PolicyResult:
    started = time.perf_counter()
    cfg = policy.config
    world, writer, controller, actuation = _build_policy(inp, policy)
    window = policy.usage_window
    trim = window is not None and window < cfg.scale_down_unneeded_time

    templates = world.templates
    price = {pool: inp.prices.get(t.machine_type) for pool, t in templates.items()}
    result = PolicyResult(policy.name, policy.description, policy.flags)
    hours = inp.step / 3600.0
    minutes = inp.step / 60.0
    by_pool: dict[str, float] = dict.fromkeys(templates, 0.0)
    n_steps = len(inp.usage.times)
    # The cycle collector, paused for the whole replay, runs once a simulated day: resumed after
    # every loop, it soon ran a full collection (~0.4 s at 150,000 pods) over a heap whose
    # records form no cycles (reference counting frees them); at most a day's cyclic garbage waits.
    with no_cycle_collector():
        for k in range(inp.start_step, n_steps):
            if (k - inp.start_step) % COLLECT_EVERY_STEPS == COLLECT_EVERY_STEPS - 1:
                gc.collect()
            world.advance(k)
            _LOG_CONTEXT.set((policy.name, world.now))
            if policy.scale_down:
                if trim:
                    controller.trim_usage_history(world.now, cast(float, window))
                controller.run_once()
            for uid in world.pending:
                world.stats.unplaceable_pods.add(world.pods[uid].key)
            world.scale_up()
            # Accounting for the interval [t, t + step).
            sizes = world.pool_sizes()
            other = len(world.nodes) - sum(1 for n in world.nodes.values() if n.node_group in sizes)
            if other:  # nodes in no pool the world knows: counted, never priced
                by_pool[_NO_POOL] = by_pool.get(_NO_POOL, 0.0) + other * hours
            step_cost = 0.0
            for pool, count in sizes.items():
                by_pool[pool] = by_pool.get(pool, 0.0) + count * hours
                p = price.get(pool)
                if p is not None:
                    step_cost += count * hours * p
            over = _count_overload(world, result, minutes)
            result.times.append(world.now)
            result.nodes.append(sum(sizes.values()) + other)
            result.overloaded.append(over)
            result.cost_per_step.append(step_cost)
            if observe is not None:
                observe(world)
            if progress is not None:
                progress(policy.name, k + 1 - inp.start_step, n_steps - inp.start_step, world.now)
    # The last step's pending time.
    if world.pending:
        world.stats.pending_pod_seconds += len(world.pending) * inp.step
    _fill_totals(result, world, by_pool, price)
    result.relief_evictions = actuation.relief_evictions
    result.failed_removals = sum(1 for o in actuation.outcomes if not o.ok)
    result.events = dict(sorted(writer.events.items()))
    result.elapsed_seconds = time.perf_counter() - started
    return result


# ---- several policies, in parallel ---------------------------------------------------------------------


def _policy_task(inp: ReplayInput, policy: Policy, report: Callable[..., None]) -> PolicyResult:
    """One policy's replay in a Ray task, reporting progress at most ten times a second."""
    gc.freeze()  # the shared input is never collected: keep the collector off it
    last = 0.0

    def progress(name: str, done: int, total: int, now: float) -> None:
        nonlocal last
        t = time.monotonic()
        if t - last >= 0.1 or done == total:
            last = t
            report(name, done, total, now)

    return run_policy(inp, policy, progress)


def _expected_cost(policy: Policy) -> int:
    """A rough rank of a policy's replay time: no scale-down < requests < usage < portraits."""
    if not policy.scale_down:
        return 0
    if policy.portrait:
        return 3
    return 1 if policy.config.utilization_source == "requests" else 2


def run_policies(
    inp: ReplayInput,
    policies: Sequence[Policy],
    *,
    workers: int | None = None,
    address: str | None = None,
    progress: Progress | None = None,
    processes: int | None = None,
) -> list[PolicyResult]:
    """Replay every policy on an identical copy of ``inp``; results in the order of ``policies``.

    With ``workers`` (default: the CPU count, at most one per policy) above 1, or an
    ``address``, the policies run as Ray tasks (:class:`scaler.fanout.Pool`: an embedded local
    Ray with ``workers`` CPUs, or the Ray cluster at ``address``), ``inp`` put once in Ray's
    object store; with one worker they run here one after the other. Either way ``progress``
    and the log handlers are called in this process (see the module doc). ``processes`` is the
    former name of ``workers``.

    Raises:
        scaler.fanout.RayUnavailable: Ray cannot be started, or ``address`` does not answer.
    """
    from scaler.fanout import Pool

    wanted = workers if workers is not None else processes
    n = max(1, min(wanted or os.cpu_count() or 1, len(policies)))
    if n == 1 and address is None:
        return [run_policy(inp, p, progress) for p in policies]
    # Longest first, so that the last policy to finish is a short one.
    order = sorted(range(len(policies)), key=lambda i: -_expected_cost(policies[i]))

    def relay(_index: int, name: str, done: int, total: int, now: float) -> None:
        if progress is not None:
            progress(name, done, total, now)

    with Pool(inp, n, address, relay if progress is not None else None, ReplayLogContext()) as pool:
        done = pool.map(_policy_task, [policies[i] for i in order])
    results = {order[d.index]: d.result for d in done}
    return [results[i] for i in range(len(policies))]
