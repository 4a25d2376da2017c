"""Mutable working state of one simulation, with cheap checkpoint and revert.

:class:`ClusterState` is built from a :class:`~scaler.model.snapshot.ClusterSnapshot` at the start
of an evaluation and lives only inside it: the evaluation as a whole stays a pure function of
the snapshot and the clock. It plays the role of CA's delta ClusterSnapshot
(``simulator/clustersnapshot``): pods move between :class:`NodeState`\\ s, every change is
journaled, and :meth:`ClusterState.revert` undoes a failed node-removal simulation while a
successful one is simply kept (CA's ``Commit``).

Plugins see nodes through :class:`NodeState` and never mutate it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from scaler.model.records import Node, Pod, Resources
from scaler.model.snapshot import ClusterSnapshot

__all__ = ["ClusterState", "FilterPlugin", "NodeState", "ScorePlugin"]


@dataclass(slots=True)
class NodeState:
    """One node during simulation.

    Attributes:
        node: the node record (labels, taints, allocatable).
        pods: pods currently counted on the node (non-terminal, non-expendable), including pods
            moved here by earlier simulations of this evaluation.
        requested: sum of ``pods``' requests (millicores, bytes, pod count, extended).
        usage_cpu_millicores, usage_memory_bytes: real usage from NodeMetrics, ``None`` when the
            node has no fresh metrics.
        moved_cpu_millicores, moved_memory_bytes: Σ requests of pods moved onto this node in
            this evaluation (TargetUsage's cumulative term).
        ghost: the node is the one being simulated for removal: no pods, not a destination,
            but still a topology domain (CA's "tainted ghost", ``simulator/cluster.go``).
        removed: removal committed earlier in this evaluation: neither destination nor domain.
    """

    node: Node
    pods: list[Pod] = field(default_factory=list)
    requested: Resources = field(default_factory=Resources)
    usage_cpu_millicores: int | None = None
    usage_memory_bytes: int | None = None
    moved_cpu_millicores: int = 0
    moved_memory_bytes: int = 0
    ghost: bool = False
    removed: bool = False

    @property
    def name(self) -> str:
        """The node name."""
        return self.node.name

    @property
    def host_ports(self) -> Iterator[tuple[str, str, int]]:
        """(protocol, hostIP, port) of every host port in use on the node."""
        for p in self.pods:
            yield from p.host_ports


@runtime_checkable
class FilterPlugin(Protocol):
    """A scheduler-like Filter: may ``pod`` go to ``node``?

    Implementations are built with the :class:`~scaler.config.ScalerConfig` (``cls(config)``),
    are registered under the entry-point group ``scaler.plugins``, and must be pure: they read
    ``node`` and ``state`` and never change them.
    """

    name: str

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the pod fits, or a short reason why it does not.

        Reasons should hold no per-node figures (``"Insufficient cpu"``, not ``"cpu 3.2/4"``):
        the simulator counts refusing nodes per reason for the report."""
        ...


@runtime_checkable
class ScorePlugin(Protocol):
    """A scheduler-like Score: how good is ``node`` for ``pod`` among feasible nodes?

    Scores are floats, higher is better; the simulator sums the scores of all enabled score
    plugins and takes the best node (ties: the default destination order).
    """

    name: str

    def score(self, pod: Pod, node: NodeState, state: ClusterState) -> float:
        """Return the node's score for the pod."""
        ...


class ClusterState:
    """All nodes' :class:`NodeState` plus the snapshot they came from, with an undo journal.

    Args:
        snapshot: the evaluation's snapshot (PVs, PVCs, controllers are read from it).
        pods_by_node: the pods to count on each node (the caller drops terminal and expendable
            pods); defaults to ``snapshot.pods_by_node`` minus terminal pods.
        usage: real usage per node, ``(cpu millicores, memory bytes)``; nodes absent have
            unknown usage.
    """

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        pods_by_node: dict[str, list[Pod]] | None = None,
        usage: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.nodes: dict[str, NodeState] = {}
        self._journal: list[Callable[[], None]] = []
        self._domain_index: dict[str, dict[str, list[str]]] = {}
        usage = usage or {}
        for node in snapshot.nodes:
            pods = (
                list(pods_by_node.get(node.name, ()))
                if pods_by_node is not None
                else [p for p in snapshot.pods_by_node.get(node.name, ()) if not p.is_terminal]
            )
            requested = Resources()
            for p in pods:
                requested = requested + p.requests
            u = usage.get(node.name)
            self.nodes[node.name] = NodeState(
                node=node,
                pods=pods,
                requested=requested,
                usage_cpu_millicores=u[0] if u else None,
                usage_memory_bytes=u[1] if u else None,
            )

    # ---- queries -------------------------------------------------------------------------
    def live_nodes(self) -> Iterator[NodeState]:
        """Nodes that still exist in the simulation (not removed), ghosts included."""
        return (n for n in self.nodes.values() if not n.removed)

    def domains(self, topology_key: str) -> dict[str, list[str]]:
        """Topology domain value → names of nodes carrying label ``topology_key`` (cached)."""
        idx = self._domain_index.get(topology_key)
        if idx is None:
            idx = {}
            for n in self.nodes.values():
                v = n.node.labels.get(topology_key)
                if v is not None:
                    idx.setdefault(v, []).append(n.name)
            self._domain_index[topology_key] = idx
        return idx

    def pods_in_domain(self, topology_key: str, value: str) -> Iterator[Pod]:
        """Pods on live, non-ghost nodes whose label ``topology_key`` equals ``value``."""
        for name in self.domains(topology_key).get(value, ()):
            ns = self.nodes[name]
            if not ns.removed and not ns.ghost:
                yield from ns.pods

    # ---- mutations (journaled) ----------------------------------------------------------
    def checkpoint(self) -> int:
        """A mark to :meth:`revert` to."""
        return len(self._journal)

    def revert(self, mark: int) -> None:
        """Undo every change made since ``mark`` (CA's ``Revert``)."""
        while len(self._journal) > mark:
            self._journal.pop()()

    def commit(self) -> None:
        """Keep every change so far and forget how to undo it (CA's ``Commit``)."""
        self._journal.clear()

    def unschedule(self, pod: Pod, node_name: str) -> None:
        """Take ``pod`` off ``node_name``."""
        ns = self.nodes[node_name]
        idx = next(i for i, p in enumerate(ns.pods) if p.uid == pod.uid)
        ns.pods.pop(idx)
        old = ns.requested
        ns.requested = old - pod.requests

        def undo() -> None:
            ns.pods.insert(idx, pod)
            ns.requested = old

        self._journal.append(undo)

    def place(self, pod: Pod, node_name: str) -> None:
        """Put ``pod`` on ``node_name`` as a moved pod (adds to TargetUsage's Σ term)."""
        ns = self.nodes[node_name]
        ns.pods.append(pod)
        old = (ns.requested, ns.moved_cpu_millicores, ns.moved_memory_bytes)
        ns.requested = old[0] + pod.requests
        ns.moved_cpu_millicores += pod.requests.cpu_millicores
        ns.moved_memory_bytes += pod.requests.memory_bytes

        def undo() -> None:
            ns.pods.pop()
            ns.requested, ns.moved_cpu_millicores, ns.moved_memory_bytes = old

        self._journal.append(undo)

    def set_flags(self, node_name: str, *, ghost: bool | None = None, removed: bool | None = None) -> None:
        """Mark a node as the ghost under simulation and/or as removed."""
        ns = self.nodes[node_name]
        old = (ns.ghost, ns.removed)
        if ghost is not None:
            ns.ghost = ghost
        if removed is not None:
            ns.removed = removed

        def undo() -> None:
            ns.ghost, ns.removed = old

        self._journal.append(undo)

    def unschedule_all(self, pods: Iterable[Pod], node_name: str) -> None:
        """Take every pod in ``pods`` off ``node_name``."""
        for p in pods:
            self.unschedule(p, node_name)
