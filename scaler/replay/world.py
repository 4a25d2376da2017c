"""The simulated cluster of a replay: nodes, pods, usage over time, a scheduler and a cloud.

The replay drives the **live controller** (:class:`scaler.controller.Controller`) against this
world instead of a real cluster. The world stands in for what the controller talks to:

* the cluster state it reads (:meth:`World.snapshot`, a :class:`ClusterSnapshot` at the replay
  clock with NodeMetrics computed from the trace);
* the Kubernetes writes of the actuator (:class:`~scaler.replay.sim_cluster.SimWriter`: taint
  and cordon, annotate, evict, list a node's pods, clean up);
* the cloud (:class:`~scaler.replay.sim_cluster.SimCloud`: node pools and their sizes;
  deletions checked against min sizes with :func:`scaler.cloud.base.check_min_size`, per zone
  too);
* kube-scheduler (:meth:`World.schedule_pending`) and a node-pool scale-up
  (:meth:`World.scale_up`).

The world is built in layers, one role each: the store of objects and the Kubernetes writes
(:mod:`~scaler.replay.world_store`), the usage model and the snapshots the controller reads
(:mod:`~scaler.replay.world_usage`), the scheduler (:mod:`~scaler.replay.world_scheduler`) and
the cloud's scale-up (:mod:`~scaler.replay.world_scaleup`), sharing one revision counter (the
store's :class:`~scaler.replay.world_index.WorldIndex`). :class:`World` adds the clock.

**Actuation time.** Everything the actuator does (taint, re-check, drain, delete) takes no
replay time: a removal chosen at step ``t`` is complete at ``t``. Evictions always succeed (the
drain rules have already charged PDB budgets; PDB status is the snapshot's throughout).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from scaler.config import ScalerConfig
from scaler.model.snapshot import ClusterSnapshot
from scaler.replay.kube_scheduler import kube_scheduler_choice
from scaler.replay.sim_records import (
    LABEL_INSTANCE_TYPE,
    PoolTemplate,
    StepStats,
    UsageTable,
    _lifetime_shifted,
    _unique_uids,
    pod_limits,
)
from scaler.replay.world_scaleup import ScaleUp
from scaler.replay.world_store import WorldSpec

__all__ = [  # the records and the scheduler's choice re-exported from where they live
    "LABEL_INSTANCE_TYPE",
    "PoolTemplate",
    "StepStats",
    "UsageTable",
    "World",
    "kube_scheduler_choice",
    "pod_limits",
]


class World(ScaleUp):
    """The replayed cluster.

    Args:
        snapshot: the starting cluster (its times are moved so that ``snapshot.now`` becomes
            ``usage.times[start_step]``).
        usage: the trace on the replay grid.
        pod_series: ``namespace/name`` → series name, for the pods that follow the trace.
        config: the policy's configuration (node-group limits, instance name).
        provision_delay: seconds from a scale-up request to the node joining.
        start_step: the grid index the replay starts at (earlier steps are history only).
        with_pod_metrics: also publish PodMetrics in snapshots (the replay always does: moved
            pods count ``max(request, usage)``, and ``--ignore-daemonsets-utilization`` reads
            them; without, every pod counts its requests).
        scheduler_plugins: the scheduler also runs the policy's Filter and Score plugins
            (:mod:`~scaler.replay.world_scheduler`).
        attach: applied to each snapshot the scheduler reads (the replay attaches workload
            profiles with it; settable later as the ``attach`` attribute); identity by default.

    Raises:
        scaler.simulator.registry.PluginError: with ``scheduler_plugins``, a plugin of the
            policy cannot be loaded.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        usage: UsageTable,
        pod_series: Mapping[str, str],
        config: ScalerConfig,
        *,
        provision_delay: float = 120.0,
        start_step: int = 0,
        with_pod_metrics: bool = False,
        scheduler_plugins: bool = False,
        attach: Callable[[ClusterSnapshot], ClusterSnapshot] | None = None,
    ) -> None:
        now = float(usage.times[start_step])
        start = _unique_uids(_lifetime_shifted(snapshot, now - snapshot.now))
        super().__init__(
            WorldSpec(
                start,
                config,
                start_step,
                usage,
                pod_series,
                with_pod_metrics=with_pod_metrics,
                scheduler_plugins=scheduler_plugins,
                attach=attach,
                provision_delay=provision_delay,
            )
        )

    # ---- the clock ----------------------------------------------------------------------------------
    def advance(self, step: int) -> None:
        """Move the clock to step ``step``: account pending time, bring up the nodes whose
        provisioning is done, and schedule pending pods."""
        t = float(self.usage.times[step])
        if self.pending:
            self.stats.pending_pod_seconds += len(self.pending) * (t - self.now)
        self.step, self.now = step, t
        ready = [p for p in self.provisioning if p[1] <= t]
        if ready:
            self.provisioning = [p for p in self.provisioning if p[1] > t]
            for _, ready_at, pool in sorted(ready, key=lambda p: (p[1], p[2])):
                self._add_node(pool, ready_at)
        self.schedule_pending()
