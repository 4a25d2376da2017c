"""Where workload profiles come from, by configuration (``--history``).

* ``none`` (default): no profiles. The portrait plugins then check requests only (filter) and
  score every node alike; decisions rest on instantaneous usage (TargetUsage, seed 004).
* ``prometheus``: range queries to ``--prometheus-url`` over the last ``--history-days``
  (:mod:`scaler.history.prometheus`), built into profiles (:func:`build_profiles`, seed 001).

:func:`load_profiles` fetches every time it is called; :class:`ProfileCache` is for a control
loop: it refetches at most every ``refresh_seconds`` and keeps serving the last good profiles
when a refresh fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scaler.config import ScalerConfig
from scaler.history.profiles import build_profiles
from scaler.history.prometheus import HistoryError, PrometheusClient, fetch_gpu_usage, fetch_samples
from scaler.model.profiles import WorkloadProfile
from scaler.model.snapshot import ClusterSnapshot
from scaler.utilization import RESOURCE_GPU, is_gpu_node

__all__ = [
    "DEFAULT_STEP_SECONDS",
    "GPU_USAGE_WINDOW_SECONDS",
    "HistoryError",
    "ProfileCache",
    "load_gpu_usage",
    "load_profiles",
]

DEFAULT_STEP_SECONDS = 300.0
"""Resolution of the Prometheus range queries (5 minutes, the rate window)."""


def load_profiles(config: ScalerConfig, snapshot: ClusterSnapshot, now: float) -> dict[str, WorkloadProfile]:
    """The workload profiles for an evaluation at ``now``, as ``config.history`` says.

    Args:
        config: ``history``, ``prometheus_url``, ``prometheus_auth_file``,
            ``prometheus_selector`` and ``history_days`` are read.
        snapshot: maps the pods seen in history to their workloads.
        now: end of the history window (exclusive), Unix seconds.

    Returns:
        Profiles by workload key; empty with ``--history=none``.

    Raises:
        HistoryError: the history cannot be loaded (one-line message naming the server).
    """
    if config.history == "none":
        return {}
    samples = fetch_samples(
        config.prometheus_url,
        snapshot,
        now,
        config.history_days,
        auth_file=config.prometheus_auth_file,
        step=DEFAULT_STEP_SECONDS,
        selector=config.prometheus_selector,
    )
    return build_profiles(samples, now, config.history_days)


GPU_USAGE_WINDOW_SECONDS = 600.0
"""The window before ``now`` whose highest GPU readings a GPU node is judged by (seconds):
cluster-autoscaler's default ``--scale-down-unneeded-time``, the time a node must stay unneeded."""


def load_gpu_usage(config: ScalerConfig, snapshot: ClusterSnapshot, now: float) -> dict[str, float]:
    """The real GPU usage of the snapshot's GPU nodes (node → fraction 0-1 of its GPUs, see
    :func:`~scaler.history.prometheus.fetch_gpu_usage`) over the :data:`GPU_USAGE_WINDOW_SECONDS`
    before ``now``; empty with ``--history=none`` or without GPU nodes (no query is made).

    Raises:
        HistoryError: the query failed (one-line message naming the server).
    """
    gpus = {n.name: n.allocatable.extended.get(RESOURCE_GPU, 0) for n in snapshot.nodes if is_gpu_node(n)}
    if config.history == "none" or not gpus:
        return {}
    with PrometheusClient(config.prometheus_url, auth_file=config.prometheus_auth_file) as client:
        return fetch_gpu_usage(client, gpus, now - GPU_USAGE_WINDOW_SECONDS, now, config.prometheus_selector)


@dataclass
class ProfileCache:
    """Profiles for a control loop: fetched at most every ``refresh_seconds`` (profiles span
    days; an hour of staleness changes little), the last good ones kept on failure.

    Attributes:
        refresh_seconds: minimum time between two fetches.
        profiles: the last profiles loaded (empty before the first success).
        loaded_at: ``now`` of the last successful load, ``None`` before.
        attempted_at: ``now`` of the last fetch, successful or not, ``None`` before.
        last_error: the message of the last failed refresh, ``""`` after a success.
    """

    refresh_seconds: float = 3600.0
    profiles: dict[str, WorkloadProfile] = field(default_factory=dict)
    loaded_at: float | None = None
    attempted_at: float | None = None
    last_error: str = ""

    def get(self, config: ScalerConfig, snapshot: ClusterSnapshot, now: float) -> dict[str, WorkloadProfile]:
        """The profiles to use at ``now``: refreshed through :func:`load_profiles` when the last
        attempt is older than ``refresh_seconds`` (or there was none).

        Raises:
            HistoryError: a refresh failed and no profiles were ever loaded. After one success a
                failure only sets :attr:`last_error` and the previous profiles are returned.
        """
        if config.history == "none":
            return {}
        if self.attempted_at is not None and now - self.attempted_at < self.refresh_seconds:
            if self.loaded_at is None and self.last_error:
                raise HistoryError(self.last_error)
            return self.profiles
        self.attempted_at = now
        try:
            self.profiles = load_profiles(config, snapshot, now)
        except HistoryError as e:
            self.last_error = str(e)
            if self.loaded_at is None:
                raise
            return self.profiles
        self.loaded_at = now
        self.last_error = ""
        return self.profiles
