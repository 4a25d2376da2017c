"""Metrics, health, logs and the status ConfigMap of ``scaler run``, one module each.

:mod:`~scaler.observability.metrics` (Prometheus metrics analogous to cluster-autoscaler's
``metrics/metrics.go``, prefixed ``scaler_``), :mod:`~scaler.observability.health` (``/metrics``
and ``/healthz``, which fails when no loop finished within ``--max-inactivity``, CA's liveness
rule), :mod:`~scaler.observability.logs` (text or JSON logs) and
:mod:`~scaler.observability.status` (the status ConfigMap, shaped like CA's
``cluster-autoscaler-status``, ``clusterstate/utils/status.go``, plus every node's verdict). They
read a loop's plan through :class:`~scaler.observability.plan.PlanView`, so this package sits
below the planner. The names are re-exported here.
"""

from scaler.observability.health import HealthServer
from scaler.observability.logs import JsonFormatter, configure_logging
from scaler.observability.metrics import ERROR_TYPES, Metrics
from scaler.observability.plan import PlanView
from scaler.observability.status import node_status, status_document, status_label, status_yaml

__all__ = [
    "ERROR_TYPES",
    "HealthServer",
    "JsonFormatter",
    "Metrics",
    "PlanView",
    "configure_logging",
    "node_status",
    "status_document",
    "status_label",
    "status_yaml",
]
