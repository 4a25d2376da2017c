"""Workload resource portraits: a 24-hour usage profile per workload (seed 001).

Seed 001 (§4.6, "基于资源画像的调度策略实现") schedules on *application resource portraits*: for
every hour of the day, what one instance of an application really uses. Its filter
(``PodFitsResourceOnPortrait``) checks a destination's per-hour capacity against the node, and its
score (``ResourceBalanceOnPortrait``) models each hour's load as a Gaussian ``N(mean, std²)``. Both
need, per workload and per hour of the day, the mean, the standard deviation and a capacity bound
(the peak) of each resource. This module builds them.

Model (what :func:`build_profiles` computes):

* A **workload** is a pod's owner (:func:`workload_key`): a Deployment (through its ReplicaSet),
  a StatefulSet, a DaemonSet, a Job, … or the pod itself when it has no controller.
* A **sample** is one pod's usage at one instant: ``(workload key, Unix seconds, CPU millicores,
  memory bytes)``. Only samples with ``now - history_days·86400 <= t < now`` count.
* Samples fall into the **hour of the day** of their timestamp, in UTC (``(t mod 86400) // 3600``),
  so a week of history gives up to 7 days × 12 five-minute samples × replicas per hour bucket.
* The profile describes **one replica** (a per-pod profile, as seed 001's portraits are per
  application instance): every pod sample of the workload in an hour bucket is one observation
  of "what one replica uses at this hour". ``mean`` is their average (so two replicas at 100m
  and 300m give 200m, not 400m), ``std`` their population standard deviation (ddof 0), ``peak``
  their maximum: the capacity bound seed 001's filter checks each hour (its ``cpucap`` /
  ``memcap``). Pooling replicas (instead of averaging the replicas at each instant first) keeps
  the spread between replicas in ``std`` and the hottest replica in ``peak``, which is what a
  single moved pod may turn out to be.
* A missing value (NaN, or any non-finite number) is ignored for that resource only; hence
  separate sample counts for CPU and memory. An hour with no sample has mean, std and peak 0
  and count 0; consumers decide how to fill it (the portrait plugins use the workload's busiest
  sampled hour).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from scaler.model.profiles import DAY_SECONDS, HOURS, WorkloadProfile
from scaler.model.records import Pod
from scaler.model.snapshot import ClusterSnapshot

__all__ = ["build_profiles", "build_profiles_from_arrays", "workload_key"]

FloatArray = npt.NDArray[np.float64]


def workload_key(pod: Pod, snapshot: ClusterSnapshot) -> str:
    """The key of the workload owning ``pod``: ``"namespace/Kind/name"``.

    * A pod owned by a ReplicaSet keys by the ReplicaSet's Deployment when
      ``snapshot.controllers`` has that ReplicaSet with a Deployment owner (its replicas of all
      revisions share one profile); otherwise by the ReplicaSet.
    * Any other controller keys by itself (``ns/StatefulSet/db``, ``ns/DaemonSet/agent``, …).
    * A pod without a controller keys by itself: ``"namespace/Pod/name"``.
    """
    ref = pod.controller
    ns = pod.namespace
    if ref is None:
        return f"{ns}/Pod/{pod.name}"
    if ref.kind == "ReplicaSet":
        rs = snapshot.controllers.get(("ReplicaSet", ns, ref.name))
        if rs is not None and rs.owner is not None and rs.owner.kind == "Deployment":
            return f"{ns}/Deployment/{rs.owner.name}"
    return f"{ns}/{ref.kind}/{ref.name}"


def build_profiles(
    samples: Iterable[tuple[str, float, float, float]], now: float, history_days: float
) -> dict[str, WorkloadProfile]:
    """Build a :class:`WorkloadProfile` per workload from per-pod usage samples.

    Args:
        samples: ``(workload key, Unix seconds, CPU millicores, memory bytes)``, one per pod
            and instant, any order; NaN for a resource not measured at that instant.
        now: end of the window (exclusive), Unix seconds.
        history_days: length of the window in days (> 0): samples with
            ``now - history_days·86400 <= t < now`` count, the others are ignored.

    Returns:
        Profiles by workload key, for every workload with at least one usable sample in the
        window. See the module docstring for the model (UTC hour buckets, pooled replicas).

    Raises:
        ValueError: ``history_days`` is not positive.
    """
    keys: list[str] = []
    ts: list[float] = []
    cpu: list[float] = []
    mem: list[float] = []
    for k, t, c, m in samples:
        keys.append(k)
        ts.append(t)
        cpu.append(c)
        mem.append(m)
    return build_profiles_from_arrays(
        keys,
        np.asarray(ts, dtype=np.float64),
        np.asarray(cpu, dtype=np.float64),
        np.asarray(mem, dtype=np.float64),
        now,
        history_days,
    )


def build_profiles_from_arrays(
    keys: Sequence[str],
    timestamps: FloatArray,
    cpu_millicores: FloatArray,
    memory_bytes: FloatArray,
    now: float,
    history_days: float,
) -> dict[str, WorkloadProfile]:
    """:func:`build_profiles` on column arrays (one row per pod sample): the fast path for
    callers that already hold columns (a replay rebuilding profiles from its own past).

    Raises:
        ValueError: ``history_days`` is not positive, or the columns differ in length.
    """
    if not history_days > 0 or not math.isfinite(history_days):
        raise ValueError(f"history_days must be a positive number of days, got {history_days!r}")
    n = len(keys)
    if not len(timestamps) == len(cpu_millicores) == len(memory_bytes) == n:
        raise ValueError("build_profiles: keys, timestamps, cpu and memory must have the same length")
    if n == 0:
        return {}
    t = np.asarray(timestamps, dtype=np.float64)
    start = now - history_days * DAY_SECONDS
    window = (t >= start) & (t < now)
    if not window.any():
        return {}
    codes_of: dict[str, int] = {}
    codes = np.fromiter((codes_of.setdefault(k, len(codes_of)) for k in keys), dtype=np.int64, count=n)
    hours = (np.floor(np.mod(t, DAY_SECONDS) / 3600.0).astype(np.int64)) % HOURS
    bucket = codes * HOURS + hours
    size = len(codes_of) * HOURS
    stats = [
        _bucket_stats(bucket, np.asarray(v, dtype=np.float64), window, size)
        for v in (cpu_millicores, memory_bytes)
    ]
    (c_mean, c_std, c_peak, c_count), (m_mean, m_std, m_peak, m_count) = stats
    out: dict[str, WorkloadProfile] = {}
    for key, code in codes_of.items():
        sl = slice(code * HOURS, (code + 1) * HOURS)
        if not (c_count[sl].any() or m_count[sl].any()):
            continue
        out[key] = WorkloadProfile(
            key=key,
            cpu_mean=tuple(c_mean[sl].tolist()),
            cpu_std=tuple(c_std[sl].tolist()),
            cpu_peak=tuple(c_peak[sl].tolist()),
            memory_mean=tuple(m_mean[sl].tolist()),
            memory_std=tuple(m_std[sl].tolist()),
            memory_peak=tuple(m_peak[sl].tolist()),
            cpu_samples=tuple(int(x) for x in c_count[sl].tolist()),
            memory_samples=tuple(int(x) for x in m_count[sl].tolist()),
        )
    return out


def _bucket_stats(
    bucket: npt.NDArray[np.int64], values: FloatArray, window: npt.NDArray[np.bool_], size: int
) -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.int64]]:
    """Mean, population std, max and count of ``values`` per bucket, over the rows in
    ``window`` with a finite value (two passes for the variance: no cancellation)."""
    ok = window & np.isfinite(values)
    b, v = bucket[ok], values[ok]
    count = np.bincount(b, minlength=size).astype(np.int64)
    total = np.bincount(b, weights=v, minlength=size)
    has = count > 0
    mean = np.zeros(size, dtype=np.float64)
    mean[has] = total[has] / count[has]
    dev = v - mean[b]
    var = np.zeros(size, dtype=np.float64)
    var[has] = np.bincount(b, weights=dev * dev, minlength=size)[has] / count[has]
    peak = np.full(size, -np.inf, dtype=np.float64)
    np.maximum.at(peak, b, v)
    peak[~has] = 0.0
    return mean, np.sqrt(var), peak, count
