"""PodDisruptionBudget accounting during scale-down simulation.

:class:`RemainingPdbTracker` is cluster-autoscaler's ``basicRemainingPdbTracker``
(``core/scaledown/pdb/basic.go``, interface in ``core/scaledown/pdb/pdb.go``): it starts from each
PDB's ``status.disruptionsAllowed`` and counts down as the simulation removes pods, so later
nodes see what earlier (committed) removals left. Copy it per candidate node and keep the copy
only when the node's removal is committed — or, cheaper for many nodes, take a
:meth:`~RemainingPdbTracker.checkpoint` and :meth:`~RemainingPdbTracker.revert` to it when the
removal is not committed.

PDBs are indexed by namespace and by their selector's first ``matchLabels`` pair, so finding the
PDBs of a pod looks only at the PDBs that could match it.
"""

from __future__ import annotations

from collections.abc import Iterable

from scaler.model.records import Pod, PodDisruptionBudget

__all__ = ["PdbKey", "RemainingPdbTracker"]

PdbKey = tuple[str, str]
"""``(namespace, name)`` of a PDB: the identity the tracker counts under."""


def _key(pdb: PodDisruptionBudget) -> PdbKey:
    return (pdb.namespace, pdb.name)


class RemainingPdbTracker:
    """Remaining disruption allowance of every PDB, counted in pods.

    A PDB is identified by ``(namespace, name)``; if ``pdbs`` holds the same identity twice, the
    later record replaces the earlier one (as :func:`scaler.model.snapshot.build_snapshot` does).
    Matching is :meth:`PodDisruptionBudget.matches` (same namespace, selector matches the pod's
    labels; a null selector matches nothing, an empty one everything in the namespace), as in
    CA's ``basicRemainingPdbTracker.MatchingPdbs``.

    The PDB records handed out by :meth:`matching` and :meth:`blocking_pdb` are the records
    passed in, unchanged: their ``disruptions_allowed`` is the *initial* allowance. Use
    :meth:`remaining` for the current one.

    Source: ``core/scaledown/pdb/basic.go``.
    """

    __slots__ = ("_by_label", "_by_namespace", "_journal", "_order", "_pdbs", "_remaining")

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        """Start tracking ``pdbs`` with their ``disruptions_allowed`` as the remaining allowance."""
        by_key: dict[PdbKey, PodDisruptionBudget] = {}
        for pdb in pdbs:
            by_key[_key(pdb)] = pdb
        self._pdbs: dict[PdbKey, PodDisruptionBudget] = by_key
        self._remaining: dict[PdbKey, int] = {k: p.disruptions_allowed for k, p in by_key.items()}
        self._journal: list[tuple[PdbKey, int]] = []
        # Index: PDBs whose selector has matchLabels, under their first pair; the others (only
        # matchExpressions, or empty) by namespace. A null selector matches nothing.
        self._order: dict[PdbKey, int] = {k: i for i, k in enumerate(by_key)}
        by_label: dict[tuple[str, str, str], list[PodDisruptionBudget]] = {}
        by_ns: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in by_key.values():
            if pdb.selector is None:
                continue
            if pdb.selector.match_labels:
                k, v = next(iter(pdb.selector.match_labels.items()))
                by_label.setdefault((pdb.namespace, k, v), []).append(pdb)
            else:
                by_ns.setdefault(pdb.namespace, []).append(pdb)
        self._by_label: dict[tuple[str, str, str], tuple[PodDisruptionBudget, ...]] = {
            k: tuple(v) for k, v in by_label.items()
        }
        self._by_namespace: dict[str, tuple[PodDisruptionBudget, ...]] = {
            ns: tuple(v) for ns, v in by_ns.items()
        }

    def copy(self) -> RemainingPdbTracker:
        """An independent tracker with the same PDBs and current allowances.

        Removing pods from the copy never changes this tracker, and vice versa. O(number of
        PDBs); the PDB records and the indexes are shared (they are immutable).
        """
        new = RemainingPdbTracker.__new__(RemainingPdbTracker)
        new._pdbs = self._pdbs
        new._order = self._order
        new._by_label = self._by_label
        new._by_namespace = self._by_namespace
        new._remaining = dict(self._remaining)
        new._journal = []
        return new

    def checkpoint(self) -> int:
        """A mark to :meth:`revert` to: every allowance change after it can be undone."""
        return len(self._journal)

    def revert(self, mark: int) -> None:
        """Restore the allowances as they were at ``mark``."""
        journal, remaining = self._journal, self._remaining
        while len(journal) > mark:
            key, old = journal.pop()
            remaining[key] = old

    def commit(self) -> None:
        """Keep every change so far and forget how to undo it."""
        self._journal.clear()

    @property
    def pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        """All tracked PDB records (initial values), in input order (CA's ``GetPdbs``)."""
        return tuple(self._pdbs.values())

    def matching(self, pod: Pod) -> list[PodDisruptionBudget]:
        """The tracked PDBs that cover ``pod`` (CA's ``MatchingPdbs``), in input order.

        Every matching PDB is returned, whatever its remaining allowance.
        """
        ns = pod.namespace
        found = [pdb for pdb in self._by_namespace.get(ns, ()) if pdb.matches(pod)]
        by_label = self._by_label
        for k, v in pod.labels.items():
            for pdb in by_label.get((ns, k, v), ()):
                if pdb.matches(pod):
                    found.append(pdb)
        if len(found) > 1:
            order = self._order
            found.sort(key=lambda p: order[_key(p)])
        return found

    def blocking_pdb(self, pod: Pod) -> PodDisruptionBudget | None:
        """The first PDB covering ``pod`` whose remaining allowance is below 1, else ``None``.

        This is the check of CA's PDB drainability rule (``simulator/drainability/rules/pdb``)
        against the *remaining* allowances.
        """
        for pdb in self.matching(pod):
            if self._remaining[_key(pdb)] < 1:
                return pdb
        return None

    def remove_pods(self, pods: Iterable[Pod]) -> None:
        """Record the eviction of ``pods``: each pod takes 1 from every PDB that covers it.

        Allowances may go negative (CA does the same); nothing is checked here, call
        :meth:`blocking_pdb` first. Source: ``basicRemainingPdbTracker.RemovePods``.
        """
        remaining, journal = self._remaining, self._journal
        for pod in pods:
            for pdb in self.matching(pod):
                key = _key(pdb)
                journal.append((key, remaining[key]))
                remaining[key] -= 1

    def remaining_of(self, key: PdbKey) -> int | None:
        """The remaining allowance of the PDB ``(namespace, name)``, ``None`` if not tracked."""
        return self._remaining.get(key)

    def remaining(self, pdb: PodDisruptionBudget) -> int:
        """The remaining allowance of ``pdb`` in pods (may be negative).

        Raises:
            KeyError: ``pdb`` (by namespace and name) is not tracked.
        """
        try:
            return self._remaining[_key(pdb)]
        except KeyError:
            raise KeyError(f"PDB {pdb.namespace}/{pdb.name} is not tracked") from None

    def __repr__(self) -> str:
        inner = ", ".join(f"{ns}/{n}={v}" for (ns, n), v in self._remaining.items())
        return f"RemainingPdbTracker({inner})"
