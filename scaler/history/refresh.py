"""History for ``scaler run``, refreshed in the background and never waited for by the loop.

A Prometheus that is slow, down or wrong must not stall scale-down: the control loop never
calls it. :class:`HistoryRefresher` runs in a thread of its own (``history``) and keeps two
caches, each stamped with the time of its last successful refresh:

* **profiles** (``--history-days`` of usage built into workload profiles), refreshed every
  :data:`PROFILE_REFRESH_SECONDS`; after a failure retried every
  :data:`RETRY_SECONDS`. Profiles span days, so the last good ones are kept whatever their
  age; before the first success the loop decides without portraits (the portrait plugins then
  check requests only, as with ``--history none``).
* **gpu_usage** (the GPU nodes' real GPU usage over the last :data:`GPU_USAGE_WINDOW_SECONDS`),
  refreshed every :data:`GPU_REFRESH_SECONDS`. A reading older than
  :data:`GPU_USAGE_MAX_AGE_SECONDS` is not used: the GPU nodes are then judged by their GPU
  requests alone, as cluster-autoscaler judges them, and each such node's detail says why
  (:attr:`~scaler.model.snapshot.ClusterSnapshot.gpu_usage_unknown`).

The loop hands the refresher its newest snapshot (:meth:`HistoryRefresher.attach`), which maps
the pods seen in history to their workloads and names the GPU nodes, and gets it back with what
is known attached. Every failure is recorded in its cache (:class:`CacheState`): the status
ConfigMap's ``history`` section (:meth:`HistoryRefresher.status`), the metrics
``scaler_history_refresh_failures_total``, ``scaler_history_last_success_timestamp_seconds`` and
``scaler_history_age_seconds``, and a warning log line (the first failure of a run of failures,
then at most every :data:`WARN_EVERY_SECONDS`, and one line when it recovers). Any exception of a
refresh counts as a failure: nothing escapes the thread, nothing is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from scaler.config import ScalerConfig
from scaler.history.errors import one_line
from scaler.model.profiles import WorkloadProfile
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_duration, format_time
from scaler.observability import Metrics

__all__ = [
    "GPU_REFRESH_SECONDS",
    "GPU_USAGE_MAX_AGE_SECONDS",
    "PROFILE_REFRESH_SECONDS",
    "RETRY_SECONDS",
    "WARN_EVERY_SECONDS",
    "CacheState",
    "HistoryRefresher",
]

log = logging.getLogger(__name__)

PROFILE_REFRESH_SECONDS = 3600.0
"""Profiles are refetched this often (they span days: an hour changes little)."""
RETRY_SECONDS = 300.0
"""After a failed profile refresh, the next try comes this much later."""
GPU_REFRESH_SECONDS = 60.0
"""GPU usage is refetched this often (GKE's system metrics are sampled every 60 s)."""
GPU_USAGE_MAX_AGE_SECONDS = 300.0
"""A GPU usage reading older than this (seconds since its refresh) is not used: the GPU nodes
are judged by their GPU requests (five refreshes missed)."""
WARN_EVERY_SECONDS = 600.0
"""While a cache keeps failing, its warning is repeated at most this often."""


@dataclass
class CacheState:
    """One background cache: what it holds and how its refreshes went.

    Attributes:
        name: ``profiles`` or ``gpu_usage`` (the metrics' ``cache`` label).
        loaded_at: Unix seconds of the last successful refresh, ``None`` before.
        attempted_at: Unix seconds of the last refresh, successful or not.
        last_error: the one-line message of the last failed refresh, ``""`` when none failed.
        last_error_at: when it failed (Unix seconds), ``None`` when none failed.
        failures: failed refreshes since the last success.
        warned_at: when the last warning about this cache was logged.
    """

    name: str
    loaded_at: float | None = None
    attempted_at: float | None = None
    last_error: str = ""
    last_error_at: float | None = None
    failures: int = 0
    warned_at: float | None = None

    def document(self, max_age: float | None = None, now: float | None = None) -> dict[str, Any]:
        """The status ConfigMap's entry for this cache: ``status`` (``NotLoaded``, ``Loaded``,
        ``Failing`` while failures follow a success, ``Stale`` when older than ``max_age``),
        ``loadedAt``, ``consecutiveFailures``, ``lastError`` and ``lastErrorAt`` (the last failure
        is kept after a success, so that it can be read later)."""
        if self.loaded_at is None:
            status = "NotLoaded"
        elif max_age is not None and now is not None and now - self.loaded_at > max_age:
            status = "Stale"
        else:
            status = "Failing" if self.failures else "Loaded"
        doc: dict[str, Any] = {
            "status": status,
            "loadedAt": format_time(self.loaded_at) if self.loaded_at is not None else None,
            "consecutiveFailures": self.failures,
        }
        if self.last_error:
            doc["lastError"] = self.last_error
            doc["lastErrorAt"] = format_time(self.last_error_at) if self.last_error_at is not None else None
        return doc


ProfileLoader = Callable[[ScalerConfig, ClusterSnapshot, float], dict[str, WorkloadProfile]]
GpuLoader = Callable[[ScalerConfig, ClusterSnapshot, float], dict[str, float]]


class HistoryRefresher:
    """The background history of ``scaler run`` (see the module doc).

    Args:
        config: ``history`` and the Prometheus settings.
        metrics: where the cache metrics go (``None``: none).
        clock: Unix-seconds clock.
        load_profiles, load_gpu_usage: the fetches (default
            :func:`scaler.history.source.load_profiles` and
            :func:`~scaler.history.source.load_gpu_usage`; tests pass others).
    """

    def __init__(
        self,
        config: ScalerConfig,
        metrics: Metrics | None = None,
        *,
        clock: Callable[[], float] = time.time,
        load_profiles: ProfileLoader | None = None,
        load_gpu_usage: GpuLoader | None = None,
    ) -> None:
        from scaler.history import source

        self.config = config
        self.metrics = metrics
        self.clock = clock
        self._load_profiles = load_profiles or source.load_profiles
        self._load_gpu_usage = load_gpu_usage or source.load_gpu_usage
        self.profiles_state = CacheState("profiles")
        self.gpu_state = CacheState("gpu_usage")
        self.profiles: dict[str, WorkloadProfile] = {}
        self.gpu_usage: dict[str, float] = {}
        self._snapshot: ClusterSnapshot | None = None
        self._lock = threading.Lock()

    # ---- the loop's side ------------------------------------------------------------------------

    def attach(self, snapshot: ClusterSnapshot, now: float) -> ClusterSnapshot:
        """Hand ``snapshot`` to the refresher (the next refresh maps pods and GPU nodes with it)
        and return it with what is known: the last profiles, and the GPU usage when its reading
        is at most :data:`GPU_USAGE_MAX_AGE_SECONDS` old (else none, and
        ``gpu_usage_unknown`` says why). Never calls Prometheus; never raises."""
        with self._lock:
            self._snapshot = snapshot
            profiles, gpu_usage = self.profiles, self.gpu_usage
            gpu_loaded, gpu_error = self.gpu_state.loaded_at, self.gpu_state.last_error
        self._observe_age(now)
        note = ""
        if gpu_loaded is None:
            note = "GPU usage not loaded yet" + (f" ({gpu_error})" if gpu_error else "")
        elif now - gpu_loaded > GPU_USAGE_MAX_AGE_SECONDS:
            note = (
                f"GPU usage reading {format_duration(round(now - gpu_loaded))} old, over its "
                f"{format_duration(GPU_USAGE_MAX_AGE_SECONDS)} limit"
            )
            gpu_usage = {}
        else:
            note = "no GPU usage series for this node"
        return replace(
            snapshot,
            workload_profiles=profiles,
            gpu_usage=gpu_usage,
            gpu_usage_unknown=f"judged by GPU requests: {note}",
        )

    def status(self, now: float | None = None) -> dict[str, Any]:
        """The status ConfigMap's ``history`` section: the source and one entry per cache
        (:meth:`CacheState.document`)."""
        t = self.clock() if now is None else now
        with self._lock:
            return {
                "profiles": self.profiles_state.document(),
                "gpuUsage": self.gpu_state.document(GPU_USAGE_MAX_AGE_SECONDS, t),
            }

    # ---- the thread's side ----------------------------------------------------------------------

    CACHES = ("profiles", "gpu_usage")
    """The caches' names, one thread each (:meth:`run`)."""

    def run(self, stop: threading.Event, cache: str, tick: float = 1.0) -> None:
        """Refresh ``cache`` whenever it is due (:meth:`refresh_due`) until ``stop`` is set,
        checking every ``tick`` seconds. One thread per cache, so that a long profile refresh
        does not age the GPU usage."""
        while not stop.is_set():
            self.refresh_due(self.clock(), (cache,))
            stop.wait(tick)

    def refresh_due(self, now: float, caches: tuple[str, ...] = CACHES) -> None:
        """Run the refreshes of ``caches`` that are due at ``now`` with the newest snapshot
        (none before the loop handed one). Every failure is recorded; nothing is raised."""
        with self._lock:
            snapshot = self._snapshot
        if snapshot is None:
            return
        if "profiles" in caches and self._due(self.profiles_state, PROFILE_REFRESH_SECONDS, now):
            self._refresh(self.profiles_state, lambda: self._load_profiles(self.config, snapshot, now), now)
        if "gpu_usage" in caches and self._due(self.gpu_state, GPU_REFRESH_SECONDS, now):
            self._refresh(self.gpu_state, lambda: self._load_gpu_usage(self.config, snapshot, now), now)

    @staticmethod
    def _due(state: CacheState, every: float, now: float) -> bool:
        if state.attempted_at is None:
            return True
        wait = RETRY_SECONDS if state.failures and state.name == "profiles" else every
        return now - state.attempted_at >= wait

    def _refresh(self, state: CacheState, fetch: Callable[[], Mapping[str, Any]], now: float) -> None:
        """Run ``fetch`` for ``state``'s cache and record how it went."""
        state.attempted_at = now
        started = time.monotonic()
        try:
            value = dict(fetch())
        except Exception as e:  # any failure is the cache's, recorded; the thread goes on
            message = one_line(str(e) or type(e).__name__)
            with self._lock:
                state.failures += 1
                state.last_error, state.last_error_at = message, now
            if self.metrics is not None:
                self.metrics.history_failures.labels(state.name).inc()
            if state.warned_at is None or state.failures == 1 or now - state.warned_at >= WARN_EVERY_SECONDS:
                state.warned_at = now
                kept = (
                    f"keeping the one loaded at {format_time(state.loaded_at)}"
                    if state.loaded_at is not None
                    else "none loaded yet"
                )
                log.warning(
                    "history: %s refresh failed (%d in a row; %s): %s",
                    state.name,
                    state.failures,
                    kept,
                    message,
                )
            return
        recovered = state.failures
        with self._lock:
            if state.name == "profiles":
                self.profiles = value
            else:
                self.gpu_usage = value
            state.loaded_at, state.failures = now, 0
        if self.metrics is not None:
            self.metrics.history_last_success.labels(state.name).set(now)
        if recovered:
            state.warned_at = None
            log.warning("history: %s refreshed again after %d failure(s)", state.name, recovered)
        log.debug(
            "history: %s refreshed in %.1fs (%d entries)", state.name, time.monotonic() - started, len(value)
        )

    def _observe_age(self, now: float) -> None:
        if self.metrics is None:
            return
        for state in (self.profiles_state, self.gpu_state):
            if state.loaded_at is not None:
                self.metrics.history_age.labels(state.name).set(max(0.0, now - state.loaded_at))
