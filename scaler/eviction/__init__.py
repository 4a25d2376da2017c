"""Precise eviction: evict just enough pods, in the right order, to bring a node under its
waterlines — or every pod, for a drain.

A port of crane-agent's "Pod Sorting And Precise Execution" framework (seed 002; crane
``pkg/ensurance/executor`` at HEAD 2b0ddae8, reference §5) without its known defects. A pure core:
the controller injects the :class:`Evictor` that talks to the Kubernetes Eviction API.

* :mod:`~scaler.eviction.podinfo` — :class:`PodUsage`, a candidate pod with its usage.
* :mod:`~scaler.eviction.sort` — comparators and sorters (which pod goes first).
* :mod:`~scaler.eviction.metrics` — :class:`EvictionMetric`, :class:`MetricRegistry`, the
  built-in CPU and memory metrics and third-party metrics (entry points
  ``scaler.eviction_metrics``).
* :mod:`~scaler.eviction.waterline` — :class:`Waterlines` and :class:`Gaps`.
* :mod:`~scaler.eviction.executor` — :func:`execute` (precise, or all when precision is
  impossible) and :func:`drain`.
"""

from scaler.eviction.executor import Evictor, EvictResult, ExecutionMode, ExecutionResult, drain, execute
from scaler.eviction.metrics import (
    CPU_TOTAL_USAGE,
    ENTRY_POINT_GROUP,
    MEMORY_TOTAL_USAGE,
    EvictionConfigError,
    EvictionMetric,
    MetricRegistry,
    default_registry,
    load_metric_plugins,
    node_usage_from_metrics,
)
from scaler.eviction.podinfo import PodUsage, pod_usages
from scaler.eviction.sort import (
    Comparator,
    PodSorter,
    class_and_priority,
    general_sorter,
    ordered_by,
    running_time,
    usage,
)
from scaler.eviction.waterline import USAGE_MISSED, Gaps, Threshold, Waterlines, calculate_gaps

__all__ = [
    "CPU_TOTAL_USAGE",
    "ENTRY_POINT_GROUP",
    "MEMORY_TOTAL_USAGE",
    "USAGE_MISSED",
    "Comparator",
    "EvictResult",
    "EvictionConfigError",
    "EvictionMetric",
    "Evictor",
    "ExecutionMode",
    "ExecutionResult",
    "Gaps",
    "MetricRegistry",
    "PodSorter",
    "PodUsage",
    "Threshold",
    "Waterlines",
    "calculate_gaps",
    "class_and_priority",
    "default_registry",
    "drain",
    "execute",
    "general_sorter",
    "load_metric_plugins",
    "node_usage_from_metrics",
    "ordered_by",
    "pod_usages",
    "running_time",
    "usage",
]
