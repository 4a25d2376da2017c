"""Example Score plugin ``MostHeadroom``: prefer the destination left with the most real headroom.

This module is a template for third-party plugins. A score plugin is any class that

* is built as ``cls(config)`` with the :class:`~scaler.plugin_api.ScalerConfig`;
* has a ``name`` (str) attribute, the name users put in ``score-plugins``;
* has ``score(pod, node, state) -> float``: higher is better; the simulator sums the scores of
  all enabled score plugins for each feasible node and picks the best
  (:class:`~scaler.plugin_api.ScorePlugin`);
* is pure: it reads ``node`` (a :class:`~scaler.plugin_api.NodeState`) and ``state`` and
  never changes them;
* is registered under the ``scaler.plugins`` entry-point group, as this one is in scaler's
  ``pyproject.toml``: ``MostHeadroom = "plugins.examples.most_headroom:MostHeadroom"``.
"""

from __future__ import annotations

from scaler.plugin_api import ClusterState, NodeState, Pod, ScalerConfig

__all__ = ["MostHeadroom"]


class MostHeadroom:
    """Score = ``1 − max(cpu, memory)`` projected usage fraction of the node with the pod.

    Projected usage of a resource = (NodeMetrics usage + Σ loads already moved onto the node in
    this evaluation + the pod's load) / allocatable, a load being ``max(request, real usage)``
    (:meth:`~scaler.simulator.state.ClusterState.load`), with CPU in millicores and memory in
    bytes — the same quantity :class:`plugins.target_usage.TargetUsage` bounds. A score of 1.0
    is an idle node; it goes negative past full. A node with unknown usage (no fresh metrics)
    or zero allocatable CPU or memory scores 0.0. Combined with first fit, this spreads moved
    pods onto the least-loaded nodes instead of packing the first acceptable one.
    """

    name = "MostHeadroom"

    def __init__(self, config: ScalerConfig) -> None:
        """Keep ``config`` (this example reads no settings from it)."""
        self.config = config

    def score(self, pod: Pod, node: NodeState, state: ClusterState) -> float:
        """Return ``1 − max(projected cpu fraction, projected memory fraction)``, or 0.0 when
        the usage or the allocatable is unknown."""
        usage_cpu, usage_mem = node.usage_cpu_millicores, node.usage_memory_bytes
        alloc = node.node.allocatable
        if usage_cpu is None or usage_mem is None or alloc.cpu_millicores <= 0 or alloc.memory_bytes <= 0:
            return 0.0
        load_cpu, load_mem = state.load(pod)
        cpu = (usage_cpu + node.moved_cpu_millicores + load_cpu) / alloc.cpu_millicores
        mem = (usage_mem + node.moved_memory_bytes + load_mem) / alloc.memory_bytes
        return 1.0 - max(cpu, mem)
