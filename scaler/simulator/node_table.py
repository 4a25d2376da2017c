"""The numbers of every node of a simulation state as NumPy columns (:class:`NodeTable`), so that
filters answer for many nodes at once (:class:`~scaler.simulator.state.VectorFilterPlugin`).

A :class:`~scaler.simulator.state.ClusterState` builds one table and keeps it in step with its
node states (:meth:`NodeTable.sync` after every change of a node)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from scaler.model.records import TAINT_TO_BE_DELETED, Node, Pod, Resources
from scaler.model.snapshot import SnapshotError

__all__ = ["NodeRow", "NodeTable"]


class NodeRow(Protocol):
    """What the table reads of one node's state (:class:`~scaler.simulator.state.NodeState`)."""

    @property
    def name(self) -> str: ...
    @property
    def node(self) -> Node: ...
    @property
    def pods(self) -> Sequence[Pod]: ...
    @property
    def requested(self) -> Resources: ...
    @property
    def position(self) -> int: ...
    @property
    def ghost(self) -> bool: ...
    @property
    def removed(self) -> bool: ...
    @property
    def moved_cpu_millicores(self) -> int: ...
    @property
    def moved_memory_bytes(self) -> int: ...
    @property
    def usage_cpu_millicores(self) -> int | None: ...
    @property
    def usage_memory_bytes(self) -> int | None: ...


class NodeTable:
    """The numbers of every node as NumPy columns, one row per node of a
    :class:`~scaler.simulator.state.ClusterState`
    (row = :attr:`~scaler.simulator.state.NodeState.position`). CPU in millicores, memory and
    storage in bytes.

    Static columns: ``alloc_cpu``, ``alloc_mem``, ``alloc_eph``, ``alloc_pods``, ``usage_cpu``,
    ``usage_mem`` (0 where unknown), ``has_usage``, ``to_be_deleted`` (carries the
    ``ToBeDeletedByClusterAutoscaler`` taint), ``cordoned``. Columns kept in step with the node
    states by the state's mutations: ``req_cpu``, ``req_mem``, ``req_eph``,
    ``pod_count`` (``len(NodeState.pods)``), the room they leave (``free_cpu``, ``free_mem``,
    ``free_eph``: allocatable minus requests; ``free_pods``: allocatable pods minus
    ``pod_count``), ``moved_cpu``, ``moved_mem``, ``ghost``, ``removed``.
    Extended resources are not tabled (filters read them from the node states).
    """

    def __init__(self, states: Sequence[NodeRow]) -> None:
        def col(values: Iterable[int], what: str = "") -> npt.NDArray[np.int64]:
            items = list(values)
            try:
                return np.fromiter(items, dtype=np.int64, count=len(states))
            except OverflowError:
                raise _overflow(states, items, what) from None

        def flag(values: Iterable[bool]) -> npt.NDArray[np.bool_]:
            return np.fromiter(values, dtype=np.bool_, count=len(states))

        alloc = [s.node.allocatable for s in states]
        self.alloc_cpu = col(a.cpu_millicores for a in alloc)
        self.alloc_mem = col(a.memory_bytes for a in alloc)
        self.alloc_eph = col(a.ephemeral_storage_bytes for a in alloc)
        self.alloc_pods = col(a.pods for a in alloc)
        self.req_cpu = col(
            (s.requested.cpu_millicores for s in states), "cpu requests of its pods (millicores)"
        )
        self.req_mem = col((s.requested.memory_bytes for s in states), "memory requests of its pods (bytes)")
        self.req_eph = col(
            (s.requested.ephemeral_storage_bytes for s in states),
            "ephemeral-storage requests of its pods (bytes)",
        )
        self.pod_count = col(len(s.pods) for s in states)
        # Both terms lie in [0, 2**63): their difference fits int64.
        self.free_cpu = self.alloc_cpu - self.req_cpu
        self.free_mem = self.alloc_mem - self.req_mem
        self.free_eph = self.alloc_eph - self.req_eph
        self.free_pods = self.alloc_pods - self.pod_count
        self.moved_cpu = col(s.moved_cpu_millicores for s in states)
        self.moved_mem = col(s.moved_memory_bytes for s in states)
        self.has_usage = flag(
            s.usage_cpu_millicores is not None and s.usage_memory_bytes is not None for s in states
        )
        self.usage_cpu = col((s.usage_cpu_millicores or 0 for s in states), "cpu usage (millicores)")
        self.usage_mem = col((s.usage_memory_bytes or 0 for s in states), "memory usage (bytes)")
        self.ghost = flag(s.ghost for s in states)
        self.removed = flag(s.removed for s in states)
        self.to_be_deleted = flag(any(t.key == TAINT_TO_BE_DELETED for t in s.node.taints) for s in states)
        self.cordoned = flag(s.node.unschedulable for s in states)
        columns = (
            self.alloc_cpu,
            self.alloc_mem,
            self.usage_cpu,
            self.usage_mem,
            self.moved_cpu,
            self.moved_mem,
        )
        self.magnitude = max((int(np.abs(c).max()) for c in columns if len(c)), default=0)
        """At least the largest ``abs`` of any value ever in the cpu and memory allocatable, usage
        and moved columns (it never decreases): lets arithmetic on them check int64 overflow
        without a pass over the arrays."""

    def sync(self, ns: NodeRow) -> None:
        """Copy the mutable numbers of ``ns`` into its row."""
        i = ns.position
        r = ns.requested
        self.req_cpu[i] = r.cpu_millicores
        self.req_mem[i] = r.memory_bytes
        self.req_eph[i] = r.ephemeral_storage_bytes
        self.pod_count[i] = len(ns.pods)
        a = ns.node.allocatable
        self.free_cpu[i] = a.cpu_millicores - r.cpu_millicores
        self.free_mem[i] = a.memory_bytes - r.memory_bytes
        self.free_eph[i] = a.ephemeral_storage_bytes - r.ephemeral_storage_bytes
        self.free_pods[i] = a.pods - len(ns.pods)
        self.moved_cpu[i] = ns.moved_cpu_millicores
        self.moved_mem[i] = ns.moved_memory_bytes
        self.magnitude = max(self.magnitude, abs(ns.moved_cpu_millicores), abs(ns.moved_memory_bytes))
        self.ghost[i] = ns.ghost
        self.removed[i] = ns.removed


def _overflow(states: Sequence[NodeRow], values: list[int], what: str) -> SnapshotError:
    """The one-line error for a node whose ``what`` does not fit int64: only a sum can (its
    pods' requests, or its usage plus the pods not yet in its metrics), every single quantity
    being bounded when it is parsed (:data:`scaler.model.quantity.MAX_QUANTITY`)."""
    for s, v in zip(states, values, strict=True):
        if not -(2**63) <= v < 2**63:
            return SnapshotError(f"Node {s.name}: the {what or 'value'} sum to {v}, more than 2^63-1")
    return SnapshotError(f"a node's {what or 'value'} sum to more than 2^63-1")
