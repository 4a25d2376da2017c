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

Speed (the placement's fast path, :class:`Prefilter`): for each pod, every filter that can
answer for the whole node table at once (``fit_mask``, e.g. resource fit from the table's
request columns and TargetUsage from its usage and moved columns) is asked once, the others
that can answer for many nodes (``filter_nodes``) once per tier on the nodes left, and the
rest node by node, in round-robin order, only until one node passes; since a node must pass
every filter, their order changes no answer. So a placement costs a few array operations over
the table, whatever the number of nodes examined. Only when a pod fits nowhere are the
refusals counted, filter by filter in the configured order over every destination, so the
reasons and their order are those of a node-by-node scan. A tier is best passed as a
:class:`Tier`, which carries its nodes' table positions; any other sequence of names is
looked up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
import numpy.typing as npt

from scaler.model.records import Pod
from scaler.simulator.state import ClusterState, Codes, FilterPlugin, Mask, NodeState, Positions, ScorePlugin

__all__ = [
    "STRUCTURAL_FILTERS",
    "Passing",
    "PlacementFailure",
    "Prefilter",
    "RemovalResult",
    "RemovalSimulator",
    "StructuralRefusal",
    "Tier",
    "placement_order",
    "score_totals",
]

STRUCTURAL_FILTERS = frozenset(
    {"NodeUnschedulable", "NodeResourcesFit", "TaintToleration", "NodeAffinity", "NodePorts", "VolumeZone"}
)
"""The built-in filters whose answer depends on the cluster's structure alone (nodes, their
allocatable, labels and taints, the pods bound to them and their requests, ports and volumes),
never on usage or time. :func:`scaler.simulator.registry.load_filters` runs them first."""


class Tier(Sequence[str]):
    """A tier of destinations: node names in order, with their rows in the state's node table.

    ``Tier.of(state, names)`` looks the names up once; :meth:`without` drops one node in
    O(len) array time, without looking names up again.
    """

    __slots__ = ("_index", "_names", "_skip", "positions")

    def __init__(self, names: Sequence[str], positions: Positions, skip: int = -1) -> None:
        self._names = names
        self._skip = skip
        self._index: dict[str, int] | None = None  # name -> index in _names, built on first use
        self.positions = positions

    @classmethod
    def of(cls, state: ClusterState, names: Sequence[str]) -> Tier:
        """The tier of ``names`` in ``state`` (``KeyError`` for an unknown name)."""
        names = list(names)
        return cls(names, state.positions(names))

    def without(self, name: str) -> Tier:
        """This tier minus node ``name`` (unchanged when absent)."""
        if self._skip >= 0:
            return Tier(list(self), self.positions).without(name)
        if self._index is None:
            self._index = {n: i for i, n in enumerate(self._names)}
        i = self._index.get(name)
        if i is None:
            return self
        pos = self.positions
        return Tier(self._names, np.concatenate((pos[:i], pos[i + 1 :])), i)

    def __len__(self) -> int:
        return len(self.positions)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("tier index out of range")
        return self._names[i + 1 if 0 <= self._skip <= i else i]


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


@dataclass(frozen=True, slots=True)
class StructuralRefusal:
    """How every live node refused one pod by a :data:`STRUCTURAL_FILTERS` filter
    (:meth:`RemovalSimulator.structural_refusal`).

    Attributes:
        codes: per row of the state's node table, the index in ``labels`` of the node's first
            failing filter's reason, ``-1`` for the rows that were not live destinations.
        labels: the reasons, worded as a placement failure words them.
    """

    codes: npt.NDArray[np.int32]
    labels: tuple[str, ...]


class Passing:
    """The rows of a state where a pod may go, as far as the filters could answer for every
    row at once (:class:`Prefilter`), and the filters left to ask."""

    __slots__ = ("_mask", "_pod", "_scalar", "_state", "_vector")

    def __init__(
        self,
        pod: Pod,
        state: ClusterState,
        mask: Mask,
        vector: list[FilterPlugin],
        scalar: list[FilterPlugin],
    ) -> None:
        self._pod, self._state, self._mask = pod, state, mask
        self._vector, self._scalar = vector, scalar

    def among(self, rows: Positions) -> tuple[npt.NDArray[np.intp], list[FilterPlugin]]:
        """Indexes into ``rows`` (ascending) of the rows every filter with ``fit_mask`` or
        ``filter_nodes`` passes, and the filters still to run node by node (``filter``) on
        them."""
        idx = np.flatnonzero(self._mask[rows])
        scalar = self._scalar
        for f in self._vector:
            if len(idx) == 0:
                break
            res = f.filter_nodes(self._pod, rows[idx], self._state)  # type: ignore[attr-defined]
            if res is None:
                scalar = [*scalar, f]
            else:
                idx = idx[res[0] == 0]
        return idx, scalar

    @property
    def by_mask(self) -> bool:
        """Whether every filter answered for every row at once (no filter is left to ask)."""
        return not self._vector and not self._scalar

    def first(self, rows: Positions, start: int) -> int:
        """With :attr:`by_mask`: the index into ``rows`` of the first passing row in
        round-robin order from index ``start`` (``0 <= start < len(rows)``), ``-1`` when
        none passes. The answer of :meth:`among`'s first index at or after ``start``, else
        its first."""
        passing = self._mask[rows]
        if start:
            k = int(passing[start:].argmax())  # the first True (argmax stops there), or 0
            if passing[start + k]:
                return start + k
        k = int(passing.argmax())
        return k if passing[k] else -1

    def rows(self, rows: Positions) -> Positions:
        """The rows of ``rows`` that every filter passes, in order."""
        idx, scalar = self.among(rows)
        if scalar and len(idx):
            state, pod, names = self._state, self._pod, self._state.names
            keep = [
                j
                for j in idx.tolist()
                if all(f.filter(pod, state.nodes[names[int(rows[j])]], state) is None for f in scalar)
            ]
            idx = np.asarray(keep, dtype=np.intp)
        return rows[idx]


class Prefilter:
    """Asks a list of filters where a pod may go: those with ``fit_mask`` for every row of the
    state at once (one call each per pod), those with ``filter_nodes`` for the rows left, the
    others node by node. Every answer is the one of running each filter's ``filter`` on each
    node (their order changes no answer: a node must pass them all). A ghost or a removed node
    is never a destination."""

    def __init__(self, filters: Sequence[FilterPlugin]) -> None:
        self._filters = [
            (f, getattr(f, "fit_mask", None), callable(getattr(f, "filter_nodes", None))) for f in filters
        ]

    def of(self, pod: Pod, state: ClusterState) -> Passing:
        """Where ``pod`` may go in ``state`` now."""
        t = state.table
        live: Mask = state.per_flags(("Prefilter.live",), lambda: ~(t.ghost | t.removed))
        mask: Mask | None = None  # a new array once a filter gave one; ``live`` is never changed
        vector: list[FilterPlugin] = []
        scalar: list[FilterPlugin] = []
        for f, fit, has_vector in self._filters:
            m = fit(pod, state) if fit is not None else None
            if m is None:
                (vector if has_vector else scalar).append(f)
            elif m is not True:
                if mask is None:
                    mask = live & m
                else:
                    mask &= m
        return Passing(pod, state, live if mask is None else mask, vector, scalar)


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
        self._vector = [f for f in self.filters if callable(getattr(f, "filter_nodes", None))]
        self._prefilter = Prefilter(self.filters)

    @staticmethod
    def _label(f: FilterPlugin, reason: str) -> str:
        return f"{f.name}: {reason}" if not reason.startswith(f.name) else reason

    def _first_failure(self, pod: Pod, node: NodeState) -> str | None:
        for f in self.filters:
            reason = f.filter(pod, node, self.state)
            if reason is not None:
                return self._label(f, reason)
        return None

    def _positions(self, tier: Sequence[str]) -> Positions:
        return tier.positions if isinstance(tier, Tier) else self.state.positions(tier)

    def _count_refusals(self, pod: Pod, tiers: list[Positions], reasons: Counter[str]) -> None:
        """Count, per reason, the live destinations refusing ``pod`` (each node under its first
        failing filter), in the order a node-by-node scan would first meet each reason."""
        state = self.state
        t = state.table
        counts: dict[str, int] = {}
        first: dict[str, int] = {}
        base = 0
        for ti, pos in enumerate(tiers):
            n = len(pos)
            if n == 0:
                continue
            start = self._offsets.get(ti, 0) % n
            order = np.concatenate((pos[start:], pos[:start]))
            rank = np.arange(base, base + n)
            alive = ~(t.ghost[order] | t.removed[order])
            remaining, rank = order[alive], rank[alive]
            for f in self.filters:
                if len(remaining) == 0:
                    break
                res = f.filter_nodes(pod, remaining, state) if f in self._vector else None  # type: ignore[attr-defined]
                codes, texts = res if res is not None else _each(f, pod, remaining, state)
                failed = codes != 0
                if failed.any():
                    for code in np.unique(codes[failed]).tolist():
                        hit = codes == code
                        label = self._label(f, texts[code - 1])
                        counts[label] = counts.get(label, 0) + int(hit.sum())
                        r = int(rank[hit][0])
                        first[label] = min(first.get(label, r), r)
                    remaining, rank = remaining[~failed], rank[~failed]
            base += n
        for label in sorted(counts, key=first.__getitem__):
            reasons[label] += counts[label]

    def structural_refusal(self, node_name: str, pods: Sequence[Pod], pod: Pod) -> StructuralRefusal | None:
        """Whether every live node but ``node_name`` refuses ``pod`` by a structural filter.

        The state is taken as :meth:`simulate` takes it before placing its first pod
        (``node_name`` a ghost, ``pods`` unscheduled from it) and given back unchanged. Each
        node is judged by the configured filters in order, as :meth:`_count_refusals` judges it,
        but only over the leading filters of :data:`STRUCTURAL_FILTERS`: a node that passes
        them all (the next filters may read usage) makes the answer ``None``.

        Returns:
            The refusal of every live node, or ``None``.
        """
        lead = 0
        for f in self.filters:
            if f.name not in STRUCTURAL_FILTERS or type(f).__module__ != "scaler.simulator.filters":
                break
            lead += 1
        state = self.state
        mark = state.checkpoint()
        state.set_flags(node_name, ghost=True)
        state.unschedule_all(pods, node_name)
        try:
            t = state.table
            rows = np.arange(len(state.names), dtype=np.intp)
            remaining = rows[~(t.ghost[rows] | t.removed[rows])]
            codes = np.full(len(rows), -1, dtype=np.int32)
            labels: dict[str, int] = {}
            for f in self.filters[:lead]:
                if len(remaining) == 0:
                    break
                res = f.filter_nodes(pod, remaining, state) if f in self._vector else None  # type: ignore[attr-defined]
                found, texts = res if res is not None else _each(f, pod, remaining, state)
                failed = found != 0
                for code in np.unique(found[failed]).tolist():
                    label = labels.setdefault(self._label(f, texts[code - 1]), len(labels))
                    codes[remaining[found == code]] = label
                remaining = remaining[~failed]
            if len(remaining):
                return None
            return StructuralRefusal(codes, tuple(labels))
        finally:
            state.revert(mark)

    def refusals_from(
        self, refusal: StructuralRefusal, tiers: Sequence[Sequence[str]]
    ) -> Counter[str] | None:
        """The refusal counts :meth:`_count_refusals` would find for the pod of ``refusal``
        over ``tiers`` now (per reason, in the order a node-by-node scan from each tier's
        round-robin position meets them), read from ``refusal``; ``None`` when a live node of
        ``tiers`` has no reason there. Exact while the structure, the live nodes and their
        requests are those ``refusal`` was taken on."""
        t = self.state.table
        if len(refusal.labels) == 1:  # one reason: the scan's order cannot change the answer
            total = 0
            all_live = not (t.ghost.any() or t.removed.any())
            for tier in tiers:
                pos = self._positions(tier)
                alive = pos if all_live else pos[~(t.ghost[pos] | t.removed[pos])]
                if len(alive) and refusal.codes[alive].min() < 0:
                    return None
                total += len(alive)
            return Counter({refusal.labels[0]: total}) if total else Counter()
        scan = []
        for ti, tier in enumerate(tiers):
            pos = self._positions(tier)
            n = len(pos)
            if n == 0:
                continue
            start = self._offsets.get(ti, 0) % n
            order = np.concatenate((pos[start:], pos[:start])) if start else pos
            scan.append(order[~(t.ghost[order] | t.removed[order])])
        found = refusal.codes[np.concatenate(scan)] if scan else refusal.codes[:0]
        reasons: Counter[str] = Counter()
        n = len(found)
        if n == 0:
            return reasons
        if found.min() < 0:
            return None
        labels = refusal.labels
        counts = np.bincount(found, minlength=len(labels)).tolist()
        first = np.full(len(labels), n, dtype=np.intp)
        np.minimum.at(first, found, np.arange(n))  # where the scan first meets each code
        for _, code in sorted((at, code) for code, at in enumerate(first.tolist()) if at < n):
            reasons[labels[code]] += counts[code]
        return reasons

    def _find_destination(
        self, pod: Pod, tiers: Sequence[Sequence[str]], reasons: Counter[str]
    ) -> str | None:
        state = self.state
        positions = [self._positions(tier) for tier in tiers]
        passing = self._prefilter.of(pod, state)
        for t, pos in enumerate(positions):
            n = len(pos)
            if n == 0:
                continue
            start = self._offsets.get(t, 0) % n
            if not self.scorers and passing.by_mask:  # the first in round-robin order from start
                j = passing.first(pos, start)
                if j < 0:
                    continue
                self._offsets[t] = j + 1
                return state.names[int(pos[j])]
            idx, scalar = passing.among(pos)  # indexes into pos, ascending
            if len(idx) == 0:
                continue
            cut = int(np.searchsorted(idx, start))
            if not scalar and not self.scorers:  # the first in round-robin order from start
                j = int(idx[cut] if cut < len(idx) else idx[0])
                self._offsets[t] = j + 1
                return state.names[int(pos[j])]
            feasible: list[tuple[int, int]] = []
            for j in (*idx[cut:].tolist(), *idx[:cut].tolist()):
                row = int(pos[j])
                if scalar:
                    ns = state.nodes[state.names[row]]
                    if not all(f.filter(pod, ns, state) is None for f in scalar):
                        continue
                if not self.scorers:
                    self._offsets[t] = j + 1
                    return state.names[row]
                feasible.append((j, row))
            if feasible:
                nodes = [state.nodes[state.names[i]] for _, i in feasible]
                totals = score_totals(self.scorers, pod, nodes, state)
                k = max(range(len(nodes)), key=totals.__getitem__)  # first max: round-robin tie-break
                best_idx, best = feasible[k]
                self._offsets[t] = best_idx + 1
                return state.names[best]
        self._count_refusals(pod, positions, reasons)
        return None

    def rotation(self) -> dict[int, int]:
        """Where each tier's round-robin search starts next (tier index → position in the
        tier): taken before a trial simulation and given back to :meth:`restore_rotation`
        after it, so that the trial leaves no trace on later placements."""
        return dict(self._offsets)

    def restore_rotation(self, saved: dict[int, int]) -> None:
        """Set the round-robin positions back to ``saved`` (from :meth:`rotation`)."""
        self._offsets = dict(saved)

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
            placed = self._place_or_revert(pod, node_name, tiers, mark)
            if isinstance(placed, RemovalResult):
                return placed
            moves.append((pod, placed))
        if keep:
            state.set_flags(node_name, ghost=False, removed=True)
            state.commit()
        else:
            state.revert(mark)
        return RemovalResult(node_name, tuple(moves))

    def move(self, pod: Pod, node_name: str, tiers: Sequence[Sequence[str]]) -> RemovalResult:
        """Simulate moving one ``pod`` off ``node_name`` (which stays, and is no destination
        unless listed in ``tiers``) to the first fitting node of ``tiers``, as :meth:`simulate`
        places each pod of a removed node. The move is kept (committed) on success; on failure
        nothing of it remains.

        Returns:
            A :class:`RemovalResult` of ``node_name`` whose ``moves`` holds the one move, or
            whose ``failure`` says why the pod fits nowhere.
        """
        state = self.state
        mark = state.checkpoint()
        state.unschedule(pod, node_name)
        placed = self._place_or_revert(pod, node_name, tiers, mark)
        if isinstance(placed, RemovalResult):
            return placed
        state.commit()
        return RemovalResult(node_name, ((pod, placed),))

    def _place_or_revert(
        self, pod: Pod, node_name: str, tiers: Sequence[Sequence[str]], mark: int
    ) -> str | RemovalResult:
        """Place ``pod`` (taken off ``node_name``) on the first fitting node of ``tiers`` and
        return that node's name; when none fits, revert the state to ``mark`` and return the
        failed :class:`RemovalResult` of ``node_name``."""
        reasons: Counter[str] = Counter()
        dest = self._find_destination(pod, tiers, reasons)
        if dest is None:
            self.state.revert(mark)
            return RemovalResult(node_name, (), PlacementFailure(pod, reasons))
        self.state.place(pod, dest)
        return dest


def score_totals(
    scorers: Sequence[ScorePlugin], pod: Pod, nodes: Sequence[NodeState], state: ClusterState
) -> list[float]:
    """The sum of every Score plugin's score for each of ``nodes`` (same order, higher is
    better): :meth:`~scaler.simulator.state.BatchScorePlugin.score_nodes` where a plugin has
    it (normalised scores need every candidate at once), else ``score`` node by node."""
    totals = [0.0] * len(nodes)
    for s in scorers:
        batch = getattr(s, "score_nodes", None)
        values = batch(pod, nodes, state) if batch is not None else [s.score(pod, n, state) for n in nodes]
        totals = [a + b for a, b in zip(totals, values, strict=True)]
    return totals


def _each(f: FilterPlugin, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
    """A filter without ``filter_nodes``, run node by node into codes and reasons."""
    codes = np.zeros(len(nodes), dtype=np.int16)
    texts: list[str] = []
    code: dict[str, int] = {}
    names = state.names
    for j, i in enumerate(nodes.tolist()):
        why = f.filter(pod, state.nodes[names[i]], state)
        if why is not None:
            c = code.get(why)
            if c is None:
                texts.append(why)
                c = code[why] = len(texts)
            codes[j] = c
    return codes, tuple(texts)
