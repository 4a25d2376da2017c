"""Where workload profiles come from, by configuration (``--history``).

* ``none`` (default): no profiles. The portrait plugins then check requests only (filter) and
  score every node alike; decisions rest on instantaneous usage (TargetUsage, seed 004).
* ``prometheus``: range queries to ``--prometheus-url`` over the last ``--history-days``
  (:mod:`scaler.history.prometheus`), built into profiles (:func:`build_profiles`, seed 001).

:func:`load_profiles` and :func:`load_gpu_usage` fetch every time they are called (the
dry-run calls them once); ``scaler run`` calls them in the background through
:class:`scaler.history.refresh.HistoryRefresher`, never from its control loop.
"""

from __future__ import annotations

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
        metrics=config.prometheus_metrics,
        auth=config.prometheus_auth,
        deadline=config.prometheus_timeout,
    )
    return build_profiles(samples, now, config.history_days)


GPU_USAGE_WINDOW_SECONDS = 600.0
"""The window before ``now`` whose highest GPU readings a GPU node is judged by (seconds):
cluster-autoscaler's default ``--scale-down-unneeded-time``, the time a node must stay unneeded."""


def load_gpu_usage(config: ScalerConfig, snapshot: ClusterSnapshot, now: float) -> dict[str, float]:
    """The real GPU usage of the snapshot's GPU nodes (node → fraction 0-1 of its GPUs, see
    :func:`~scaler.history.prometheus.fetch_gpu_usage`) over the :data:`GPU_USAGE_WINDOW_SECONDS`
    before ``now`` (GKE system metrics: the window ends their lateness earlier, the newest
    points not being visible yet); empty with ``--history=none`` or without GPU nodes (no query
    is made).

    Raises:
        HistoryError: the query failed (one-line message naming the server).
    """
    from scaler.history.usage_metrics import CADVISOR, choose

    gpus = {n.name: n.allocatable.extended.get(RESOURCE_GPU, 0) for n in snapshot.nodes if is_gpu_node(n)}
    if config.history == "none" or not gpus:
        return {}
    with PrometheusClient(
        config.prometheus_url,
        auth_file=config.prometheus_auth_file,
        auth=config.prometheus_auth,
        deadline=config.prometheus_timeout,
    ) as client:
        metrics, _why = choose(
            client,
            config.prometheus_metrics,
            config.prometheus_selector,
            now - 3600.0,
            now,
            fallback=CADVISOR,
        )
        end = now - metrics.lateness_seconds
        pod_nodes = {(p.namespace, p.name): p.node_name for p in snapshot.pods if p.node_name in gpus}
        return fetch_gpu_usage(
            client, gpus, end - GPU_USAGE_WINDOW_SECONDS, end, config.prometheus_selector,
            metrics=metrics, pod_nodes=pod_nodes,
        )  # fmt: skip
