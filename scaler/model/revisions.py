"""Revision numbers a snapshot source gives its snapshots: what changed since its previous one.

Every snapshot source (the live watch cache, snapshot files, the replay's world) numbers the
changes of the objects it holds with a :class:`RevisionCounter` and stamps each snapshot with
its :class:`Revisions`. The evaluation cache (:mod:`scaler.simulator.cache`) keys what it keeps
by those numbers, never by object identity: a kept answer is reused exactly while the numbers of
everything it read are the same.

What each number covers (a number changes whenever anything it covers changes; it may also
change when nothing did, which costs only a recomputation):

* ``nodes[name]``: the Node object of that name and every pod bound to it (``spec.nodeName``),
  its labels, requests, owners, annotations, phase, deletion: anything of the pod;
* ``pdbs``: the PodDisruptionBudgets (spec and status);
* ``workloads``: the workload controllers and the workload kinds listed;
* ``dra``: the objects of Dynamic Resource Allocation (ResourceSlices, ResourceClaims,
  ResourceClaimTemplates, DeviceClasses), wherever they are bound;
* ``structure``: all of the above, the pods bound to no node, the PersistentVolumes and their
  claims, and the Namespaces.

Usage (metrics), the clock and workload profiles are not numbered: a kept answer that reads
them is never reused across snapshots.

``source`` tells the counters apart: two snapshots compare their numbers only when they come
from the same counter (a new counter, or a relist that may have missed changes, is a new
source). A :class:`Revisions` describes the snapshot whose ``nodes`` and ``pods`` tuples it was
made for (:meth:`Revisions.describes`); a snapshot derived with other nodes or pods has none.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from scaler.model.records import Node, Pod


class ClusterSnapshot(Protocol):
    """What numbering reads of a :class:`scaler.model.snapshot.ClusterSnapshot` (which holds
    its :class:`Revisions`, so this module cannot import it)."""

    @property
    def nodes(self) -> tuple[Node, ...]: ...
    @property
    def pods(self) -> tuple[Pod, ...]: ...
    @property
    def node_by_name(self) -> Mapping[str, Node]: ...
    @property
    def pods_by_node(self) -> Mapping[str, Sequence[Pod]]: ...
    @property
    def pdbs(self) -> Any: ...
    @property
    def controllers(self) -> Any: ...
    @property
    def workload_kinds(self) -> Any: ...
    @property
    def pvs(self) -> Any: ...
    @property
    def pvcs(self) -> Any: ...
    @property
    def has_pvs(self) -> bool: ...
    @property
    def namespaces(self) -> Any: ...
    @property
    def dra(self) -> Any: ...


__all__ = ["RevisionCounter", "Revisions"]

_SOURCES = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Revisions:
    """The revision numbers of one snapshot (see the module doc).

    Attributes:
        source: the counter that numbered them.
        nodes: node name → the revision of that node and its pods.
        pdbs, workloads, structure: the revisions of the PDBs, the workload controllers, and
            of everything the evaluation reads but usage and the clock.
        dra: the revision of the Dynamic Resource Allocation objects.
        of_nodes, of_pods: the snapshot's ``nodes`` and ``pods`` tuples these numbers were
            made for (compared by identity in :meth:`describes`).
    """

    source: int
    nodes: Mapping[str, int]
    pdbs: int
    workloads: int
    structure: int
    dra: int = 0
    of_nodes: tuple[Node, ...] = field(default=(), compare=False, repr=False)
    of_pods: tuple[Pod, ...] = field(default=(), compare=False, repr=False)

    def describes(self, snapshot: ClusterSnapshot) -> bool:
        """Whether these numbers were made for ``snapshot``'s nodes and pods (a snapshot
        derived from it with other nodes or pods is not described by them)."""
        return snapshot.nodes is self.of_nodes and snapshot.pods is self.of_pods


class RevisionCounter:
    """Numbers the changes of one store of objects (see the module doc).

    A store calls :meth:`node_changed` for a node whose object or pods changed (for a pod moved
    from one node to another, both), :meth:`pdbs_changed`, :meth:`workloads_changed`,
    :meth:`dra_changed`, and
    :meth:`other_changed` for anything else the evaluation reads (unbound pods, volumes,
    namespaces); :meth:`restart` when it may have missed changes (a relist). :meth:`stamp`
    gives the numbers of a snapshot of the store as it is now.

    :meth:`follow` numbers the changes of a source that keeps no record of them (snapshot files,
    tests): it compares each snapshot with the previous one, node by node.
    """

    def __init__(self, controllers: Iterable[str] = (), dra_kinds: Iterable[str] = ()) -> None:
        self.controllers = frozenset(controllers)
        """The workload controller kinds (for :meth:`record`)."""
        self.dra_kinds = frozenset(dra_kinds)
        """The kinds of Dynamic Resource Allocation (for :meth:`record`)."""
        self.source = next(_SOURCES)
        self._clock = 0
        self._nodes: dict[str, int] = {}
        self._pdbs = self._workloads = self._structure = self._dra = 0
        self._previous: ClusterSnapshot | None = None

    def _tick(self) -> int:
        self._clock += 1
        self._structure = self._clock
        return self._clock

    def node_changed(self, name: str) -> None:
        """Node ``name``, or a pod bound to it, changed (or the node came or went)."""
        self._nodes[name] = self._tick()

    def nodes_changed(self, names: Iterable[str]) -> None:
        """:meth:`node_changed` for each of ``names``."""
        for name in names:
            self.node_changed(name)

    def pdbs_changed(self) -> None:
        """A PodDisruptionBudget changed, came or went."""
        self._pdbs = self._tick()

    def workloads_changed(self) -> None:
        """A workload controller changed, came or went, or the kinds listed changed."""
        self._workloads = self._tick()

    def dra_changed(self) -> None:
        """A Dynamic Resource Allocation object changed, came or went (a claim allocated or
        released, a node's ResourceSlices, a template, a DeviceClass)."""
        self._dra = self._tick()

    def other_changed(self) -> None:
        """Something else the evaluation reads changed (an unbound pod, a volume, a namespace)."""
        self._tick()

    def record(self, kind: str, before: object | None, after: object | None) -> None:
        """Number the change of one object of ``kind`` (a Kubernetes kind name) from ``before``
        to ``after`` (``None``: absent): a Pod is its node's change (both nodes' when it
        moved; an unbound pod is another change), a Node its own, a PodDisruptionBudget the
        PDBs', a workload controller kind (``controllers``) the workloads', a kind of Dynamic
        Resource Allocation (``dra_kinds``) the DRA objects'; any other kind is another change."""
        if kind == "Pod":
            names = {getattr(before, "node_name", ""), getattr(after, "node_name", "")}
            for name in names:
                if name:
                    self.node_changed(name)
                else:
                    self.other_changed()
        elif kind == "Node":
            name = str(getattr(after if after is not None else before, "name", ""))
            if name:
                self.node_changed(name)
            else:
                self.other_changed()
        elif kind == "PodDisruptionBudget":
            self.pdbs_changed()
        elif kind in self.controllers:
            self.workloads_changed()
        elif kind in self.dra_kinds:
            self.dra_changed()
        else:
            self.other_changed()

    def copy(self) -> RevisionCounter:
        """A counter with the same numbers (its own :meth:`stamp` then ignores later changes
        of this one)."""
        new = RevisionCounter.__new__(RevisionCounter)
        new.source, new._clock, new._nodes = self.source, self._clock, dict(self._nodes)
        new._pdbs, new._workloads, new._structure = self._pdbs, self._workloads, self._structure
        new._dra, new._previous = self._dra, None
        new.controllers, new.dra_kinds = self.controllers, self.dra_kinds
        return new

    def restart(self) -> None:
        """Changes may have been missed: number from a new source (nothing kept is reused)."""
        self.source = next(_SOURCES)
        self._previous = None

    def stamp(self, snapshot: ClusterSnapshot) -> Revisions:
        """The numbers of ``snapshot``, a snapshot of the store as it is now."""
        nodes = self._nodes
        return Revisions(
            self.source,
            {n.name: nodes.get(n.name, 0) for n in snapshot.nodes},
            self._pdbs,
            self._workloads,
            self._structure,
            self._dra,
            snapshot.nodes,
            snapshot.pods,
        )

    def follow(self, snapshot: ClusterSnapshot) -> Revisions:
        """Number ``snapshot`` by comparing it with the previous one given here (by equality:
        O(its objects)); the first one starts a new source."""
        prev = self._previous
        if prev is None:
            self.restart()
        else:
            before, now = prev.node_by_name, snapshot.node_by_name
            names = before.keys() | now.keys() | prev.pods_by_node.keys() | snapshot.pods_by_node.keys()
            for name in names - {""}:
                if before.get(name) != now.get(name) or prev.pods_by_node.get(
                    name
                ) != snapshot.pods_by_node.get(name):
                    self.node_changed(name)
            if prev.pdbs != snapshot.pdbs:
                self.pdbs_changed()
            if prev.controllers != snapshot.controllers or prev.workload_kinds != snapshot.workload_kinds:
                self.workloads_changed()
            if prev.dra != snapshot.dra:
                self.dra_changed()
            if (
                prev.pods_by_node.get("") != snapshot.pods_by_node.get("")
                or prev.pvs != snapshot.pvs
                or prev.pvcs != snapshot.pvcs
                or prev.has_pvs != snapshot.has_pvs
                or prev.namespaces != snapshot.namespaces
            ):
                self.other_changed()
        self._previous = snapshot
        return self.stamp(snapshot)
