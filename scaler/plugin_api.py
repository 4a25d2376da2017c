"""The public API for plugins: everything a Filter, Score or eviction-metric plugin may import.

A plugin written outside scaler imports from this module only; the built-in plugins in
``plugins/`` do the same, so they are written exactly as a third party would write them. What
is listed in ``__all__`` is kept compatible across minor releases (``tests/test_plugin_api.py``
pins it); everything else under ``scaler`` is internal and may change.

**Simulator plugins** (entry-point group ``scaler.plugins``, enabled by name with
``--filter-plugins`` / ``--score-plugins``). A plugin is a class built as ``cls(config)`` with
the :class:`ScalerConfig`, with a ``name`` and

* ``filter(pod, node, state) -> str | None`` (:class:`FilterPlugin`: ``None`` fits, else a short
  reason without per-node figures), optionally ``filter_nodes(pod, positions, state)`` for many
  nodes at once from the :class:`NodeTable` (:class:`VectorFilterPlugin`: per-node
  :data:`Codes` over :data:`Positions`);
* or ``score(pod, node, state) -> float`` (:class:`ScorePlugin`: higher is better), optionally
  ``score_nodes`` (:class:`BatchScorePlugin`).

Plugins read :class:`NodeState` (the node record, its pods, requests, real usage and what this
evaluation moved onto it) and :class:`ClusterState` and never change them. Records:
:class:`Pod`, :class:`Node`, :class:`Resources` (CPU in millicores, memory in bytes).
Resource-portrait plugins also get the snapshot's 24-hour :class:`WorkloadProfile`\\ s
(``state.snapshot.workload_profiles``, keyed by :func:`workload_key`; :data:`HOURS` buckets by
:func:`hour_of_day`, UTC).

**Eviction metrics** (entry-point group ``scaler.eviction_metrics``): a zero-argument callable
returning an :class:`EvictionMetric` (crane's metric attributes: name, action priority,
sortable, evictable, quantified); it reads a :class:`PodUsage` and orders pods with the
comparators :func:`ordered_by`, :func:`class_and_priority`, :func:`usage` and
:func:`running_time`.

Examples: ``plugins/target_usage.py`` (a vector Filter), ``plugins/portrait.py`` (a Filter and a
batch Score on workload profiles), ``plugins/examples/`` (a Score and an eviction metric), and
``tests/third_party_plugin/`` (a separately installed distribution).
"""

from __future__ import annotations

from scaler.config import ScalerConfig
from scaler.eviction.metrics import EvictionMetric
from scaler.eviction.podinfo import PodUsage
from scaler.eviction.sort import class_and_priority, ordered_by, running_time, usage
from scaler.history.profiles import workload_key
from scaler.model.profiles import HOURS, WorkloadProfile, hour_of_day
from scaler.model.records import Node, Pod, Resources
from scaler.simulator.node_table import NodeTable
from scaler.simulator.state import (
    BatchScorePlugin,
    ClusterState,
    Codes,
    FilterPlugin,
    NodeState,
    Positions,
    ScorePlugin,
    VectorFilterPlugin,
)

__all__ = [
    "HOURS",
    "BatchScorePlugin",
    "ClusterState",
    "Codes",
    "EvictionMetric",
    "FilterPlugin",
    "Node",
    "NodeState",
    "NodeTable",
    "Pod",
    "PodUsage",
    "Positions",
    "Resources",
    "ScalerConfig",
    "ScorePlugin",
    "VectorFilterPlugin",
    "WorkloadProfile",
    "class_and_priority",
    "hour_of_day",
    "ordered_by",
    "running_time",
    "usage",
    "workload_key",
]
