"""Simulate removing one node: re-place its movable pods on other nodes through the filters.

Follows CA's ``simulator/cluster.go SimulateNodeRemoval`` and
``simulator/scheduling/hinting_simulator.go``: the node becomes a pod-less "ghost" (still a
topology domain, never a destination); its pods are placed highest priority first; the first pod
that fits nowhere ends the simulation (``breakOnFailure``) and every change is reverted. A
successful simulation is kept, so later candidates see the moved pods and the removed node is no
longer a destination. Within one priority, larger requests are placed first (see
:func:`placement_order`).

Destination choice: destinations come in *tiers* (the engine passes non-candidate nodes first,
then candidates least likely to be removed). Within a tier the first node passing every filter
wins, starting just after the node chosen last time in that tier (CA's ``lastIndexOrderMapping``
round-robin, which spreads moved pods). With Score plugins enabled, every feasible node of the
first tier that has one is scored and the best wins (ties keep the round-robin order).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from scaler.model.records import Pod
from scaler.simulator.state import ClusterState, FilterPlugin, NodeState, ScorePlugin

__all__ = ["PlacementFailure", "RemovalResult", "RemovalSimulator", "placement_order"]


def placement_order(pod: Pod) -> tuple[int, int, int, str]:
    """Sort key of the pods of one node: highest priority first (CA's hinting simulator), then
    largest CPU and memory request first (first-fit decreasing: big pods claim the room they
    need before small ones fragment it, and an impossible node fails on its first pod), then
    ``namespace/name`` for determinism."""
    return (-pod.priority, -pod.requests.cpu_millicores, -pod.requests.memory_bytes, pod.key)


@dataclass(frozen=True, slots=True)
class PlacementFailure:
    """The pod that fit nowhere and, per filter reason, how many nodes refused it for it."""

    pod: Pod
    reasons: Counter[str] = field(default_factory=Counter)

    def summary(self, limit: int = 3) -> str:
        """``"TargetUsage: cpu usage above target (41 nodes), Insufficient cpu (2 nodes)"``."""
        parts = [f"{r} ({n} node{'s' if n != 1 else ''})" for r, n in self.reasons.most_common(limit)]
        return ", ".join(parts) if parts else "no destination nodes"


@dataclass(frozen=True, slots=True)
class RemovalResult:
    """Outcome of one node-removal simulation: ``moves`` pairs each pod with its destination."""

    node: str
    moves: tuple[tuple[Pod, str], ...] = ()
    failure: PlacementFailure | None = None

    @property
    def success(self) -> bool:
        """True when every pod found a destination."""
        return self.failure is None


class RemovalSimulator:
    """Re-places pods of nodes under removal on a :class:`ClusterState`.

    Args:
        state: the evaluation's working state (mutated: successful removals are kept).
        filters: Filter plugins, cheapest first; a node must pass all of them.
        scorers: Score plugins; empty means first fit.
    """

    def __init__(
        self, state: ClusterState, filters: Sequence[FilterPlugin], scorers: Sequence[ScorePlugin] = ()
    ) -> None:
        self.state = state
        self.filters = tuple(filters)
        self.scorers = tuple(scorers)
        self._offsets: dict[int, int] = {}

    def _first_failure(self, pod: Pod, node: NodeState) -> str | None:
        for f in self.filters:
            reason = f.filter(pod, node, self.state)
            if reason is not None:
                return f"{f.name}: {reason}" if not reason.startswith(f.name) else reason
        return None

    def _find_destination(
        self, pod: Pod, tiers: Sequence[Sequence[str]], reasons: Counter[str]
    ) -> str | None:
        for t, tier in enumerate(tiers):
            n = len(tier)
            if n == 0:
                continue
            start = self._offsets.get(t, 0) % n
            feasible: list[tuple[int, str]] = []
            for i in range(n):
                idx = (start + i) % n
                name = tier[idx]
                ns = self.state.nodes[name]
                if ns.removed or ns.ghost:
                    continue
                why = self._first_failure(pod, ns)
                if why is not None:
                    reasons[why] += 1
                    continue
                if not self.scorers:
                    self._offsets[t] = idx + 1
                    return name
                feasible.append((idx, name))
            if feasible:
                best_idx, best = max(
                    feasible,
                    key=lambda c: sum(s.score(pod, self.state.nodes[c[1]], self.state) for s in self.scorers),
                )
                self._offsets[t] = best_idx + 1
                return best
        return None

    def simulate(
        self, node_name: str, pods: Sequence[Pod], tiers: Sequence[Sequence[str]], keep: bool = True
    ) -> RemovalResult:
        """Simulate removing ``node_name`` by moving ``pods`` (its movable pods) to ``tiers``.

        Args:
            node_name: the node to remove.
            pods: the pods to re-place (from the drain rules), any order.
            tiers: destination node names, most preferred tier first.
            keep: on success keep the moves and mark the node removed; ``False`` reverts even a
                successful simulation (used for nodes that cannot be removed yet).

        Returns:
            A :class:`RemovalResult`; on failure nothing of the simulation remains in the state.
        """
        state = self.state
        mark = state.checkpoint()
        state.set_flags(node_name, ghost=True)
        state.unschedule_all(pods, node_name)
        ordered = sorted(pods, key=placement_order)
        moves: list[tuple[Pod, str]] = []
        for pod in ordered:
            reasons: Counter[str] = Counter()
            dest = self._find_destination(pod, tiers, reasons)
            if dest is None:
                state.revert(mark)
                return RemovalResult(node_name, (), PlacementFailure(pod, reasons))
            state.place(pod, dest)
            moves.append((pod, dest))
        if keep:
            state.set_flags(node_name, ghost=False, removed=True)
            state.commit()
        else:
            state.revert(mark)
        return RemovalResult(node_name, tuple(moves))
