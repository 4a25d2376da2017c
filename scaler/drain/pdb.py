"""PodDisruptionBudget accounting during scale-down simulation.

:class:`RemainingPdbTracker` is cluster-autoscaler's ``basicRemainingPdbTracker``
(``core/scaledown/pdb/basic.go``, interface in ``core/scaledown/pdb/pdb.go``): it starts from each
PDB's ``status.disruptionsAllowed`` and counts down as the simulation removes pods, so later
nodes see what earlier (committed) removals left. Copy it per candidate node and keep the copy
only when the node's removal is committed.
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

    __slots__ = ("_by_namespace", "_pdbs", "_remaining")

    def __init__(self, pdbs: Iterable[PodDisruptionBudget]) -> None:
        """Start tracking ``pdbs`` with their ``disruptions_allowed`` as the remaining allowance."""
        by_key: dict[PdbKey, PodDisruptionBudget] = {}
        for pdb in pdbs:
            by_key[_key(pdb)] = pdb
        self._pdbs: dict[PdbKey, PodDisruptionBudget] = by_key
        self._remaining: dict[PdbKey, int] = {k: p.disruptions_allowed for k, p in by_key.items()}
        by_ns: dict[str, list[PodDisruptionBudget]] = {}
        for pdb in by_key.values():
            by_ns.setdefault(pdb.namespace, []).append(pdb)
        self._by_namespace: dict[str, tuple[PodDisruptionBudget, ...]] = {
            ns: tuple(v) for ns, v in by_ns.items()
        }

    def copy(self) -> RemainingPdbTracker:
        """An independent tracker with the same PDBs and current allowances.

        Removing pods from the copy never changes this tracker, and vice versa. O(number of
        PDBs); the PDB records and the namespace index are shared (they are immutable).
        """
        new = RemainingPdbTracker.__new__(RemainingPdbTracker)
        new._pdbs = self._pdbs
        new._by_namespace = self._by_namespace
        new._remaining = dict(self._remaining)
        return new

    @property
    def pdbs(self) -> tuple[PodDisruptionBudget, ...]:
        """All tracked PDB records (initial values), in input order (CA's ``GetPdbs``)."""
        return tuple(self._pdbs.values())

    def matching(self, pod: Pod) -> list[PodDisruptionBudget]:
        """The tracked PDBs that cover ``pod`` (CA's ``MatchingPdbs``), in input order.

        Every matching PDB is returned, whatever its remaining allowance.
        """
        return [pdb for pdb in self._by_namespace.get(pod.namespace, ()) if pdb.matches(pod)]

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
        for pod in pods:
            for pdb in self.matching(pod):
                self._remaining[_key(pdb)] -= 1

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
