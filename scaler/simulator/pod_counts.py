"""Pods matching a selector, counted per node and kept up to date through simulated moves.

``PodTopologySpread`` counts, per topology domain, the pods its constraint's selector matches;
``InterPodAffinity`` asks whether a domain holds a pod one of its terms selects. Recounting
those pods at every call (the pods of the selector's first label pair, on every node) made a
placement cost what the cluster holds. A :class:`PodCounts` counts them once per
:class:`~scaler.simulator.state.ClusterState`, per table row, and is told of every move and
every revert by the state (it is a :class:`~scaler.simulator.state.PodTracker`), so a call
costs one pass over the rows in NumPy, and between moves not even that (its ``revision``
says when it changed).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable

import numpy as np
import numpy.typing as npt

from scaler.model.records import LabelSelector, Pod
from scaler.simulator.state import ClusterState

__all__ = ["PodCounts", "first_pair", "pod_counts", "selector_key"]


class PodCounts:
    """Per table row of a state, how many pods counted there ``predicate`` accepts.

    Args:
        state: the state (its pods as they are now).
        predicate: which pods count; it must accept only pods carrying ``pair`` when one is
            given, and only pods of ``namespaces`` when they are given.
        pair: a ``(label key, value)`` every counted pod carries (the state tells the counter
            only of those pods' moves), or ``None``.
        namespaces: the namespaces the counted pods are in (``None``: any).

    Attributes:
        counts: per row, the pods counted (int64; read it, never change it).
        revision: changes whenever ``counts`` does.
    """

    __slots__ = ("counts", "pairs", "predicate", "revision")

    def __init__(
        self,
        state: ClusterState,
        predicate: Callable[[Pod], bool],
        pair: tuple[str, str] | None,
        namespaces: Iterable[str] | None,
    ) -> None:
        self.predicate = predicate
        self.pairs: tuple[tuple[str, str], ...] | None = (pair,) if pair is not None else None
        self.revision = 0
        counts = np.zeros(len(state.names), dtype=np.int64)
        k, v = pair if pair is not None else ("", "")
        for namespace in state.namespaces() if namespaces is None else dict.fromkeys(namespaces):
            for ns, p in state.pods_with_label(namespace, k, v):
                if predicate(p):
                    counts[ns.position] += 1
        self.counts = counts

    def moved(self, pod: Pod, row: int, delta: int) -> None:
        """Count ``pod`` in (``delta`` 1) or out (-1) of ``row`` when it matches."""
        if self.predicate(pod):
            self.counts[row] += delta
            self.revision += 1

    def without_uid(self, state: ClusterState, uid: str) -> npt.NDArray[np.int64]:
        """:attr:`counts` less the pods with UID ``uid`` that it counts (a pod is never counted
        against itself); :attr:`counts` itself when there is none."""
        own = [ns.position for ns, p in state.pods_with_uid(uid) if self.predicate(p)]
        if not own:
            return self.counts
        out = self.counts.copy()
        for row in own:
            out[row] -= 1
        return out


def pod_counts(
    state: ClusterState,
    key: Hashable,
    predicate: Callable[[Pod], bool],
    pair: tuple[str, str] | None,
    namespaces: Iterable[str] | None,
) -> PodCounts:
    """The :class:`PodCounts` of ``state`` kept under ``key`` (one per distinct predicate: the
    key must name everything the predicate reads), made on first use."""
    counter = state.tracker(("PodCounts", key), lambda st: PodCounts(st, predicate, pair, namespaces))
    assert isinstance(counter, PodCounts)
    return counter


def selector_key(selector: LabelSelector | None) -> Hashable:
    """A hashable value equal for equal selectors (``None`` for a null selector)."""
    if selector is None:
        return None
    return (tuple(sorted(selector.match_labels.items())), selector.match_expressions)


def first_pair(selector: LabelSelector | None) -> tuple[str, str] | None:
    """The selector's first ``matchLabels`` pair, which every pod it matches carries."""
    if selector is None or not selector.match_labels:
        return None
    return next(iter(selector.match_labels.items()))
