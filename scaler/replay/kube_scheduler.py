"""The node kube-scheduler's default profile would pick for a pod, among feasible nodes.

The replay's scheduler (:meth:`scaler.replay.world.World.schedule_pending`) places pods by
requests on the nodes that pass the filters, and takes the node this module scores highest.
Source: kube-scheduler v1.28 (``pkg/scheduler/apis/config/v1/default_plugins.go``, plugins
``tainttoleration`` and ``noderesources`` ``LeastAllocated``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scaler.model.records import Pod, Taint
from scaler.simulator.state import ClusterState

__all__ = ["TAINT_TOLERATION_WEIGHT", "kube_scheduler_choice"]

TAINT_TOLERATION_WEIGHT = 3
"""kube-scheduler v1.28's default weight of the ``TaintToleration`` score (``NodeResourcesFit``'s is 1)."""


def kube_scheduler_choice(pod: Pod, state: ClusterState, feasible: npt.NDArray[np.intp]) -> int:
    """The table position, among ``feasible`` (positions of nodes that pass the filters,
    ascending, that is in name order), of the node kube-scheduler's default profile would pick
    for ``pod``, by its two scores that differ between nodes here:

    * ``TaintToleration`` (``pkg/scheduler/framework/plugins/tainttoleration``): the number of
      ``PreferNoSchedule`` taints of the node the pod does not tolerate, normalised with
      ``DefaultNormalizeScore(100, reverse=true)`` (no such taint anywhere: 100 for every node;
      else ``100 - 100 × count // max count``), weight 3;
    * ``NodeResourcesFit`` with the ``LeastAllocated`` strategy: the mean over CPU and memory of
      ``(allocatable - requested - pod request) / allocatable`` × 100, weight 1.

    The first maximum wins (nodes are in name order). Raises ``ValueError`` on an empty
    ``feasible``."""
    t = state.table
    r = pod.requests
    cpu_free = (t.free_cpu[feasible] - r.cpu_millicores) / np.maximum(t.alloc_cpu[feasible], 1)
    mem_free = (t.free_mem[feasible] - r.memory_bytes) / np.maximum(t.alloc_mem[feasible], 1)
    score = (cpu_free + mem_free) / 2 * 100
    counts = np.zeros(len(feasible), dtype=np.int64)
    for row, taints in _soft_taints(state).items():  # the few nodes with PreferNoSchedule taints
        j = int(np.searchsorted(feasible, row))
        if j < len(feasible) and feasible[j] == row:
            counts[j] = sum(1 for taint in taints if not any(tol.tolerates(taint) for tol in pod.tolerations))
    most = int(counts.max()) if len(counts) else 0
    taint_score = np.full(len(feasible), 100, dtype=np.int64) if most == 0 else 100 - counts * 100 // most
    score = score + TAINT_TOLERATION_WEIGHT * taint_score
    return int(feasible[int(np.argmax(score))])


def _soft_taints(state: ClusterState) -> dict[int, tuple[Taint, ...]]:
    """Table row → the node's ``PreferNoSchedule`` taints, for the nodes that have any
    (memoized per state)."""

    def compute() -> dict[int, tuple[Taint, ...]]:
        out: dict[int, tuple[Taint, ...]] = {}
        for ns in state.nodes.values():
            soft = tuple(t for t in ns.node.taints if t.effect == "PreferNoSchedule")
            if soft:
                out[ns.position] = soft
        return out

    return state.static(("kube-scheduler", "PreferNoSchedule"), compute)
