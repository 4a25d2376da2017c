"""The controller's Prometheus metrics, analogous to cluster-autoscaler's (``metrics/metrics.go``),
prefixed ``scaler_`` instead of ``cluster_autoscaler_``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client import Counter as PromCounter

from scaler.observability.plan import PlanView
from scaler.reasons import NodeStatus

__all__ = ["ERROR_TYPES", "Metrics"]


ERROR_TYPES = (
    "loop", "unreachable", "stale_cache", "metrics_unavailable", "status", "node_status", "relief", "rollback",
)  # fmt: skip
"""The ``type`` values of ``scaler_errors_total``: a loop that failed (``loop``), the API server
unreachable, the watch cache stale, metrics.k8s.io unavailable, the status ConfigMap or a
node's status not written, a relief step or a rollback that failed."""


class Metrics:
    """The controller's Prometheus metrics, in their own registry.

    Attributes mirror CA's names: ``unneeded_nodes_count``, ``unremovable_nodes_count{reason}``,
    ``scaled_down_nodes_total{reason=empty|underutilized|unready}``,
    ``evicted_pods_total{eviction_result=succeeded|failed}``, ``failed_scale_downs_total{reason}``,
    ``scale_down_in_cooldown``, ``function_duration_seconds{function}``,
    ``last_activity{activity}`` (Unix seconds), ``errors_total{type}``, plus ``is_leader``,
    ``metrics_api_available`` (0 during a metrics.k8s.io outage), and hot-node relief's
    ``relief_evictions_total{eviction_result=succeeded|failed}`` and ``hot_nodes_count`` (nodes
    above a hot-node waterline in the last loop); ``evictions_refused_by_pdb_total`` (drain
    evictions that a PodDisruptionBudget still refused after ``--max-pod-eviction-time`` of
    retries) and ``unneeded_nodes_monthly_cost_usd`` (the priced unneeded nodes' cost, USD per
    month: what removing them saves). With ``--history prometheus``, per history cache
    (``cache`` = ``profiles`` | ``gpu_usage``): ``history_last_success_timestamp_seconds``,
    ``history_age_seconds`` (of what the last loop decided with) and
    ``history_refresh_failures_total``.

    The counters' fixed label values (eviction results, scale-down reasons) are exported at 0
    from the start, so that a rate over them has data before the first event (Prometheus'
    instrumentation practice for known label values).
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.unneeded_nodes = Gauge("scaler_unneeded_nodes_count", "Nodes currently unneeded.", registry=r)
        self.unremovable_nodes = Gauge(
            "scaler_unremovable_nodes_count", "Unremovable nodes by reason.", ["reason"], registry=r
        )
        self.scaled_down_nodes = PromCounter(
            "scaler_scaled_down_nodes_total", "Nodes removed, by reason.", ["reason"], registry=r
        )
        self.evicted_pods = PromCounter(
            "scaler_evicted_pods_total", "Pod evictions, by result.", ["eviction_result"], registry=r
        )
        self.failed_scale_downs = PromCounter(
            "scaler_failed_scale_downs_total", "Node removals rolled back, by step.", ["reason"], registry=r
        )
        self.in_cooldown = Gauge(
            "scaler_scale_down_in_cooldown", "1 while scale-down is in cooldown.", registry=r
        )
        self.duration = Histogram(
            "scaler_function_duration_seconds", "Duration of controller functions.", ["function"], registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )  # fmt: skip
        self.last_activity = Gauge(
            "scaler_last_activity", "Last time an activity happened (Unix seconds).", ["activity"], registry=r
        )
        self.errors = PromCounter("scaler_errors_total", "Errors by type.", ["type"], registry=r)
        self.is_leader = Gauge("scaler_is_leader", "1 when this replica is the leader.", registry=r)
        self.metrics_api_available = Gauge(
            "scaler_metrics_api_available",
            "1 while metrics.k8s.io answers the node and pod metrics LISTs, 0 during an outage.",
            registry=r,
        )
        self.relief_evictions = PromCounter(
            "scaler_relief_evictions_total", "Pod evictions by hot-node relief, by result.", ["eviction_result"],
            registry=r,
        )  # fmt: skip
        self.hot_nodes = Gauge(
            "scaler_hot_nodes_count", "Nodes above a hot-node waterline (--hot-node-relief).", registry=r
        )
        self.rollbacks_pending = Gauge(
            "scaler_rollbacks_pending",
            "Nodes whose removal failed and whose rollback (untaint, uncordon) has not succeeded yet; retried.",
            registry=r,
        )
        self.budget_active = Gauge(
            "scaler_scale_down_budget_active",
            "1 while a disruption budget is active.",
            ["budget"],
            registry=r,
        )
        self.evictions_refused_by_pdb = PromCounter(
            "scaler_evictions_refused_by_pdb_total",
            "Drain evictions a PodDisruptionBudget refused until --max-pod-eviction-time ran out.",
            registry=r,
        )
        self.unneeded_monthly_cost = Gauge(
            "scaler_unneeded_nodes_monthly_cost_usd",
            "Monthly cost (USD, 730 hours) of the unneeded nodes whose price is known: the savings of removing them.",
            registry=r,
        )
        self._history_metrics(r)
        self.unreadable_objects = Gauge(
            "scaler_unreadable_objects",
            "API objects the live source could not read, by kind: left out, the nodes they concern neither "
            "candidates nor destinations (UnreadableObject).",
            ["kind"],
            registry=r,
        )
        for result in ("succeeded", "failed"):
            self.evicted_pods.labels(result)
            self.relief_evictions.labels(result)
        for reason in ("empty", "underutilized", "unready"):
            self.scaled_down_nodes.labels(reason)
        for kind in ERROR_TYPES:
            self.errors.labels(kind)
        self._reasons: set[str] = set()

    def _history_metrics(self, r: CollectorRegistry) -> None:
        """The background history caches' metrics (``--history prometheus``)."""
        self.history_last_success = Gauge(
            "scaler_history_last_success_timestamp_seconds",
            "When each history cache (profiles, gpu_usage) last refreshed successfully (Unix seconds).",
            ["cache"], registry=r,
        )  # fmt: skip
        self.history_age = Gauge(
            "scaler_history_age_seconds",
            "Age of the history each loop decided with, by cache (seconds; absent before the first load).",
            ["cache"], registry=r,
        )  # fmt: skip
        self.history_failures = PromCounter(
            "scaler_history_refresh_failures_total",
            "Failed refreshes of each history cache (an unreachable, slow or wrong Prometheus).",
            ["cache"], registry=r,
        )  # fmt: skip
        for cache in ("profiles", "gpu_usage"):
            self.history_failures.labels(cache)

    def observe_plan(self, plan: PlanView, budgets: Sequence[str] = ()) -> None:
        """Update the unneeded and unremovable gauges from a loop's plan, and
        ``scale_down_budget_active`` for every configured budget name in ``budgets``."""
        for name in budgets:
            self.budget_active.labels(name).set(1 if name in plan.active_budgets else 0)
        self.unneeded_nodes.set(len(plan.unneeded))
        counts = Counter(
            reason.value for status, reason, _ in plan.verdicts.values() if status is NodeStatus.UNREMOVABLE
        )
        for reason in self._reasons | set(counts):
            self.unremovable_nodes.labels(reason).set(counts.get(reason, 0))
        self._reasons |= set(counts)
        self.in_cooldown.set(1 if plan.cooldown else 0)

    def exposition(self) -> bytes:
        """The text exposition of every metric."""
        return generate_latest(self.registry)
