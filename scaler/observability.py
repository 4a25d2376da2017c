"""Metrics, health, logs and the status ConfigMap of ``scaler run``.

Prometheus metrics are analogous to cluster-autoscaler's (``metrics/metrics.go``), prefixed
``scaler_`` instead of ``cluster_autoscaler_``. ``/healthz`` fails when no loop finished within
``--max-inactivity`` (CA's liveness rule). The status ConfigMap holds YAML shaped like CA's
``cluster-autoscaler-status`` (``clusterstate/utils/status.go``) plus every node's verdict.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, Gauge, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from scaler.planner import ScaleDownPlan
from scaler.reasons import NodeStatus, UnremovableReason

__all__ = [
    "HealthServer",
    "JsonFormatter",
    "Metrics",
    "configure_logging",
    "node_status",
    "status_document",
    "status_label",
    "status_yaml",
]


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
    month: what removing them saves).

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
        for result in ("succeeded", "failed"):
            self.evicted_pods.labels(result)
            self.relief_evictions.labels(result)
        for reason in ("empty", "underutilized", "unready"):
            self.scaled_down_nodes.labels(reason)
        for kind in ERROR_TYPES:
            self.errors.labels(kind)
        self._reasons: set[str] = set()

    def observe_plan(self, plan: ScaleDownPlan, budgets: Sequence[str] = ()) -> None:
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


class HealthServer:
    """``/metrics`` and ``/healthz`` on ``address`` (``host:port``; ``:0`` picks a free port).

    ``/healthz`` answers 200 while ``healthy()`` is true, else 500.
    """

    def __init__(self, address: str, metrics: Metrics, healthy: Callable[[], bool]) -> None:
        host, _, port = address.rpartition(":")
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/metrics"):
                    self._send(200, outer.metrics.exposition(), CONTENT_TYPE_LATEST)
                elif self.path.startswith("/healthz"):
                    ok = outer.healthy()
                    self._send(200 if ok else 500, b"ok\n" if ok else b"loop stalled\n", "text/plain")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.metrics = metrics
        self.healthy = healthy
        self.server = ThreadingHTTPServer((host or "0.0.0.0", int(port or 8085)), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="health", daemon=True)

    def start(self) -> HealthServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class JsonFormatter(logging.Formatter):
    """One JSON object per log line: time, level, logger, message, and any ``extra`` fields."""

    _skip = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in self._skip:
                out[k] = v
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(fmt: str, level: int = logging.INFO) -> None:
    """Log to stderr as ``text`` or ``json``."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))  # fmt: skip
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def status_label(status: NodeStatus, reason: UnremovableReason) -> str:
    """A node's ``scaler.io/scale-down-status`` label: the reason it stays, or
    ``removable-empty`` / ``removable-drain`` (a valid label value: at most 63 letters, digits
    and dashes). It alone tells whether the node's annotation must change."""
    return reason.value if status is NodeStatus.UNREMOVABLE else status.value


def node_status(status: NodeStatus, reason: UnremovableReason, detail: str, since: str) -> tuple[str, str]:
    """A node's verdict as its ``scaler.io/scale-down-status`` label (:func:`status_label`) and
    annotation: compact JSON ``{"status", "reason", "detail", "since"}``, ``since`` (RFC 3339)
    being when this status and reason began."""
    doc = {"status": status.value, "reason": reason.value, "detail": detail, "since": since}
    return status_label(status, reason), json.dumps(doc, separators=(",", ":"))


def _usd(v: float | None) -> float | str:
    return "unknown" if v is None else round(v, 2)


def status_document(
    plan: ScaleDownPlan,
    groups: Mapping[str, Any],
    in_flight: Mapping[str, str],
    *,
    leader: str,
    dry_run: bool,
    costs: Mapping[str, float | None] | None = None,
    price_source: str = "",
    metrics_api: Mapping[str, str] | None = None,
    relief: Mapping[str, Any] | None = None,
    rollbacks: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The status ConfigMap's content without its timestamps: CA's layout
    (``clusterWide.scaleDown``, ``nodeGroups[].scaleDown``) plus ``nodes`` (every node's status
    and reason), ``deletionsInProgress`` and ``metricsAPI`` (``status: Available``, or
    ``Unavailable`` with ``since`` and ``message``). ``groups`` maps node name → node group.

    With ``costs`` (node → USD per month, ``None`` when unknown) the unneeded nodes' entries get
    ``monthlyCostUsd`` and ``clusterWide.scaleDown.savings`` sums them (``monthlyUsd``, the
    number of ``unpricedNodes``, whose cost says ``unknown``, and the ``priceSource``).

    With ``relief`` (``--hot-node-relief``) the document has ``hotNodeRelief``: that mapping
    (the controller's hot nodes, since when, which carry the ``scaler.io/hot`` taint and which
    are being relieved).

    With ``rollbacks`` (node → the last error of its rollback) the document has
    ``rollbacksPending``: the nodes whose removal failed and are still tainted or cordoned
    because undoing it failed so far (it is retried)."""
    costs = costs or {}
    per_group: Counter[str] = Counter()
    for name in plan.unneeded:
        per_group[str(groups.get(name, ""))] += 1
    unneeded_costs = [costs.get(n) for n in plan.unneeded]
    known = [c for c in unneeded_costs if c is not None]
    savings = {
        "monthlyUsd": _usd(sum(known) if known or not unneeded_costs else None),
        "unpricedNodes": len(unneeded_costs) - len(known),
        "priceSource": price_source,
    }
    nodes = []
    for name, (status, reason, detail) in sorted(plan.verdicts.items()):
        entry: dict[str, Any] = {
            "name": name,
            "status": status.value,
            "reason": reason.value,
            "detail": detail,
        }
        if name in plan.unneeded:
            entry["monthlyCostUsd"] = _usd(costs.get(name))
        nodes.append(entry)
    doc: dict[str, Any] = {
        "autoscalerStatus": "Running",
        "mode": "dry-run" if dry_run else "active",
        "leader": leader,
        "metricsAPI": dict(metrics_api or {"status": "Available"}),
        "clusterWide": {
            "scaleDown": {
                "status": "CandidatesPresent" if plan.unneeded else "NoCandidates",
                "candidates": len(plan.unneeded),
                "cooldown": plan.cooldown or None,
                "activeBudgets": list(plan.active_budgets),
                "savings": savings,
            }
        },
        "nodeGroups": [
            {
                "name": g,
                "scaleDown": {"status": "CandidatesPresent" if n else "NoCandidates", "candidates": n},
            }
            for g, n in sorted(per_group.items())
            if g
        ],
        "deletionsInProgress": sorted(in_flight),
        "nodes": nodes,
    }
    if relief is not None:
        doc["hotNodeRelief"] = dict(relief)
    if rollbacks:
        doc["rollbacksPending"] = [{"name": n, "error": e} for n, e in sorted(rollbacks.items())]
    return doc


def status_yaml(document: Mapping[str, Any], now: float) -> str:
    """The ``status`` key of the status ConfigMap: ``document`` with ``time`` (and CA's
    ``clusterWide.scaleDown.lastProbeTime``) set to ``now`` (Unix seconds)."""
    stamp = dt.datetime.fromtimestamp(now, dt.UTC).isoformat().replace("+00:00", "Z")
    doc = {"time": stamp, **document}
    cluster = dict(doc.get("clusterWide") or {})
    cluster["scaleDown"] = {**(cluster.get("scaleDown") or {}), "lastProbeTime": stamp}
    doc["clusterWide"] = cluster
    return yaml.safe_dump(doc, sort_keys=False)
