"""The replay world's scheduler: where pending pods go, as kube-scheduler places them.

**Scheduler model** (kube-scheduler, by requests). Evicted pods of a controller are replaced at
once by a pod of the same name and usage series (created at the eviction time, requesting what
its spec requests: a replacement carries no in-place resize status); bare pods and
DaemonSet or mirror pods are not replaced. Pending pods are placed highest priority first, then
largest request first, each on the node that passes scaler's built-in filters (NodeUnschedulable,
NodeResourcesFit, TaintToleration, NodeAffinity, NodePorts, VolumeZone, InterPodAffinity,
PodTopologySpread — TargetUsage and other plugins are *not* scheduler filters) with the highest
score of kube-scheduler's default profile's two scores that differ between such nodes here
(:func:`kube_scheduler_choice`): ``TaintToleration`` (weight 3: the count of ``PreferNoSchedule``
taints the pod does not tolerate, normalised over the feasible nodes and reversed, 0-100, so a
soft-tainted node, e.g. a hot node under relief, scores lowest) plus ``NodeResourcesFit`` with
``LeastAllocated`` (weight 1: mean over CPU and memory of free / allocatable after placing the
pod, 0-100); ties by node name. The weights are kube-scheduler v1.28's
(``pkg/scheduler/apis/config/v1/default_plugins.go``). A pod that fits nowhere stays pending. A placed pod starts
(``status.startTime``) at the step it is placed: until the next step's metrics it is one of its
node's pods not yet in the metrics, as a replacement is live.

With ``scheduler_plugins`` (the replay-only policy flag ``--scheduler-plugins``), the scheduler
also runs the policy's own Filter plugins (``--filter-plugins``, e.g. TargetUsage,
PodFitsResourceOnPortrait) after the built-in ones, and, when the policy names Score plugins,
takes the node with the highest sum of their scores instead of ``LeastAllocated`` (ties by node
name). The plugins' filters are a preference: a pod that no node accepts under them is placed by
the built-in filters alone (left pending, it would ask for new nodes that TargetUsage still
refuses when its request exceeds the target, and never run). It models a cluster whose scheduler
runs the same plugins as scaler, as seed 001's scheduler does (or crane's and koordinator's
load-aware schedulers). Snapshots seen by the scheduler carry the
same workload profiles as the controller's (``attach``). Scale-up still matches pods to pools by
the built-in filters alone.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from msgspec.structs import replace as replace_pod

from scaler.config import ScalerConfig
from scaler.model.records import Pod
from scaler.replay import sim_dra
from scaler.replay.kube_scheduler import kube_scheduler_choice
from scaler.replay.world_store import WorldSpec
from scaler.replay.world_usage import UsageModel
from scaler.simulator.pod_index import PodIndex
from scaler.simulator.registry import load_filters, load_scorers
from scaler.simulator.removal import Prefilter, placement_order, score_totals
from scaler.simulator.state import ClusterState, FilterPlugin, ScorePlugin

__all__ = ["WorldScheduler"]


class WorldScheduler(UsageModel):
    """The usage model (:class:`~scaler.replay.world_usage.UsageModel`) with a scheduler for its
    pending pods.

    Args:
        spec: what the world is built from (the scheduler reads ``config``,
            ``scheduler_plugins``, with which it also runs the policy's Filter and Score plugins
            (see the module doc), and ``attach``, applied to each snapshot it reads and settable
            later as the ``attach`` attribute).

    Raises:
        scaler.simulator.registry.PluginError: with ``scheduler_plugins``, a plugin of the
            policy cannot be loaded.
    """

    def __init__(self, spec: WorldSpec) -> None:
        super().__init__(spec)
        config, scheduler_plugins = spec.config, spec.scheduler_plugins
        self.attach = spec.attach
        self._sched_filters: list[FilterPlugin] = load_filters(ScalerConfig(filter_plugins=()))
        self._place_filters = load_filters(config) if scheduler_plugins else self._sched_filters
        self._place_scorers: list[ScorePlugin] = load_scorers(config) if scheduler_plugins else []
        self._pod_index = PodIndex()  # the scheduler's pods indexed, updated node by node
        self._sched_pass = Prefilter(self._sched_filters)
        self._place_pass = Prefilter(self._place_filters) if scheduler_plugins else self._sched_pass
        self._state: ClusterState | None = None  # the last state, whose rows the next one takes over

    def _feasible(
        self, pod: Pod, state: ClusterState, positions: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.intp]:
        """The nodes at ``positions`` where ``pod`` may go: by the policy's filters, else (none
        passing) by the built-in ones alone."""
        found = self._place_pass.of(pod, state).rows(positions)
        if len(found) == 0 and self._place_filters is not self._sched_filters:
            found = self._sched_pass.of(pod, state).rows(positions)
        return found

    def schedule_pending(self) -> None:
        """Place pending pods as kube-scheduler would, by requests (see the module doc)."""
        if not self.pending or not self.nodes:
            return
        snap = self.snapshot()
        usage = {n: (m.cpu_millicores, m.memory_bytes) for n, m in snap.node_metrics.items()}
        pod_load = None
        if self._place_filters is not self._sched_filters:  # a load-aware scheduler (TargetUsage)
            used = self.pod_usage()

            def pod_load(p: Pod) -> tuple[int, int]:
                u = used.get(p.uid, (0.0, 0.0))
                return max(p.requests.cpu_millicores, int(u[0])), max(p.requests.memory_bytes, int(u[1]))

        counted = self._index.counted_pods(snap)  # skips the terminal pods' scan when none
        if counted is not None:
            self._pod_index.follow({n.name: counted.get(n.name, ()) for n in snap.nodes})
        prior, self._state = self._state, None
        state = ClusterState(
            self.attach(snap) if self.attach is not None else snap,
            pods_by_node=counted,
            usage=usage,
            pod_load=pod_load,
            requested=None if counted is None else self._index.requested(snap.pods_by_node),
            index=self._pod_index if counted is not None else None,
            prior=prior,
            reusable=True,
        )
        self._state = state
        positions = np.arange(len(state.names), dtype=np.intp)
        placed = False
        for pod in sorted((self.pods[u] for u in self.pending), key=placement_order):
            feasible = self._feasible(pod, state, positions)
            if len(feasible) == 0:
                continue
            if self._place_scorers:
                best = self._best_by_plugins(pod, state, feasible)
            else:
                best = kube_scheduler_choice(pod, state, feasible)
            dest = state.names[best]
            state.place(pod, dest)
            state.commit()
            self.pods[pod.uid] = replace_pod(pod, node_name=dest, start_ts=self.now)
            del self.pending[pod.uid]
            placed = True
            if pod.resource_claims:
                self.dra = sim_dra.allocated(self.dra, state.dra, [pod])
        if placed:
            self.touch()

    def _best_by_plugins(self, pod: Pod, state: ClusterState, feasible: npt.NDArray[np.intp]) -> int:
        """The feasible node with the highest sum of the policy's Score plugins (first maximum)."""
        nodes = [state.nodes[state.names[int(i)]] for i in feasible]
        totals = score_totals(self._place_scorers, pod, nodes, state)
        return int(feasible[max(range(len(nodes)), key=totals.__getitem__)])
