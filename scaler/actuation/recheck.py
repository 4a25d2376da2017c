"""Re-check, on fresh state, that a tainted node can still go (CA ``deleteNodesAsync``).

Between tainting and draining the cluster moves on: pods are created, PDBs change, usage shifts.
Before evicting anything the actuator re-runs the drain rules with a fresh PDB view and, for a
node to drain, re-simulates the move of its pods (filters and TargetUsage) with the nodes being
deleted excluded as destinations. An "empty" node that gained movable pods is not emptied.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from scaler.config import ScalerConfig
from scaler.drain.pdb import RemainingPdbTracker
from scaler.drain.rules import DrainContext, DrainOptions, get_pods_to_move
from scaler.engine import counted_pods
from scaler.model.records import Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.registry import load_filters
from scaler.simulator.removal import RemovalSimulator
from scaler.simulator.state import ClusterState
from scaler.utilization import node_utilization

__all__ = ["RecheckResult", "recheck"]


@dataclass(frozen=True, slots=True)
class RecheckResult:
    """``reason`` is ``""`` when the node may be drained and deleted; ``pods`` are the pods to
    evict and ``daemonset_pods`` the DaemonSet pods on the node."""

    reason: str
    pods: tuple[Pod, ...] = ()
    daemonset_pods: tuple[Pod, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing stands in the way."""
        return not self.reason


def recheck(
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    node_name: str,
    *,
    expect_empty: bool,
    excluded: Collection[str] = (),
) -> RecheckResult:
    """Decide again whether ``node_name`` can be removed, on ``snapshot``.

    Args:
        snapshot: fresh cluster state.
        config: the controller's configuration.
        node_name: the tainted node.
        expect_empty: the plan said the node was empty; any movable pod now aborts.
        excluded: other nodes being deleted (never destinations).
    """
    node = snapshot.node_by_name.get(node_name)
    if node is None:
        return RecheckResult("node no longer exists")
    pods_by_node = counted_pods(snapshot, config)
    ctx = DrainContext(
        snapshot, DrainOptions.from_config(config), snapshot.now, RemainingPdbTracker(snapshot.pdbs)
    )
    to_move = get_pods_to_move(pods_by_node[node_name], ctx)
    if to_move.blocking is not None:
        b = to_move.blocking
        return RecheckResult(f"pod {b.pod.key} blocks the drain: {b.reason.value}")
    if to_move.on_completion_pods:
        return RecheckResult(f"pod {to_move.on_completion_pods[0].key} runs until completion")
    if expect_empty and to_move.pods:
        return RecheckResult(f"node is not empty: {len(to_move.pods)} pod(s) to move appeared")
    if to_move.pods:
        usage: dict[str, tuple[int, int]] = {}
        for n in snapshot.nodes:
            u = node_utilization(n, pods_by_node[n.name], snapshot, config)
            if u.usage_cpu_millicores is not None and u.usage_memory_bytes is not None:
                usage[n.name] = (u.usage_cpu_millicores, u.usage_memory_bytes)
        state = ClusterState(snapshot, pods_by_node, usage)
        for name in excluded:
            if name in state.nodes and name != node_name:
                state.set_flags(name, removed=True)
        destinations = [n.name for n in snapshot.nodes if n.name != node_name and n.name not in excluded]
        sim = RemovalSimulator(state, load_filters(config)).simulate(node_name, to_move.pods, [destinations])
        if sim.failure is not None:
            return RecheckResult(
                f"pod {sim.failure.pod.key} no longer fits elsewhere: {sim.failure.summary(2)}"
            )
    return RecheckResult("", to_move.pods, to_move.daemonset_pods)
