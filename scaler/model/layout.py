"""The snapshot's pod order and per-node grouping, built once and then updated by change.

Every snapshot holds its pods sorted by ``namespace/name`` and, per node, the pods bound to it
in that order (:class:`~scaler.model.snapshot.ClusterSnapshot`). Sorting and grouping 450,000
pods costs about 0.7 s, every loop. The watch cache knows which pods changed since its previous
loop, and between two loops few do: :meth:`PodLayout.update` re-sorts and regroups only those,
and shares everything else with the previous layout. The result is always the one
:meth:`PodLayout.build` would give for the same pods (a property test checks it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from itertools import chain

from scaler.model.records import Pod

__all__ = ["REBUILD_FRACTION", "PodLayout", "namespaced_key"]

REBUILD_FRACTION = 8
"""Past one changed pod in this many, :meth:`PodLayout.update` builds from scratch: one sort
is then cheaper than that many look-ups (the watch cache stops recording changes there)."""


def namespaced_key(pod: Pod) -> str:
    """Sort key ordering like ``(namespace, name)``: no name holds ``\\0``, which sorts before
    every other character, so the order is the tuple's. One string compares about three times
    faster than a tuple of two (0.11 s against 0.35 s for 150,000 pods)."""
    return f"{pod.namespace}\0{pod.name}"


@dataclass(frozen=True, slots=True)
class PodLayout:
    """Pods sorted by :func:`namespaced_key`, and grouped by ``spec.nodeName``.

    Attributes:
        pods: every pod, sorted.
        by_node: node name -> its pods in the same order, for every name a pod is bound to
            (``""`` holds the unbound ones), whether or not such a node exists. No empty tuple.
    """

    pods: tuple[Pod, ...]
    by_node: Mapping[str, tuple[Pod, ...]]

    @staticmethod
    def build(pods: Iterable[Pod]) -> PodLayout:
        """Sort and group ``pods`` (for :meth:`update`, their (namespace, name) must be unique,
        as a store's keys are)."""
        ordered = tuple(sorted(pods, key=namespaced_key))
        groups: dict[str, list[Pod]] = {}
        for p in ordered:
            group = groups.get(p.node_name)
            if group is None:
                groups[p.node_name] = [p]
            else:
                group.append(p)
        return PodLayout(ordered, {k: tuple(v) for k, v in groups.items()})

    def update(self, pods: Mapping[tuple[str, str], Pod], changed: Collection[tuple[str, str]]) -> PodLayout:
        """The layout of ``pods`` when it differs from this layout's pods only at the keys
        ``changed`` (added, replaced or deleted since this layout was made; a key may be in
        ``changed`` and unchanged). Everything else must be the same objects.

        Args:
            pods: (namespace, name) -> pod, all of them now.
            changed: the keys that may differ.

        Costs O(changed × log pods) look-ups plus copying the sorted tuple once; past one
        change in :data:`REBUILD_FRACTION` it is :meth:`build`.
        """
        if not changed:
            return self
        if len(changed) * REBUILD_FRACTION > len(self.pods):
            return PodLayout.build(pods.values())
        changed = changed if isinstance(changed, set | frozenset) else set(changed)
        old = self.pods
        gone: list[int] = []
        touched: set[str] = set()
        for ns, name in changed:
            k = f"{ns}\0{name}"
            i = bisect_left(old, k, key=namespaced_key)
            if i < len(old) and namespaced_key(old[i]) == k:
                gone.append(i)
                touched.add(old[i].node_name)
        gone.sort()
        kept = list(
            chain.from_iterable(old[a + 1 : b] for a, b in zip([-1, *gone], [*gone, len(old)], strict=True))
        )
        arrived = sorted((p for key in changed if (p := pods.get(key)) is not None), key=namespaced_key)
        # Each arrival's place among the kept pods (none of them shares its key), then one splice.
        cuts = [bisect_left(kept, namespaced_key(p), key=namespaced_key) for p in arrived]
        merged: list[Pod] = []
        start = 0
        for cut, p in zip(cuts, arrived, strict=True):
            merged.extend(kept[start:cut])
            merged.append(p)
            start = cut
        merged.extend(kept[start:])
        arrivals: dict[str, list[Pod]] = {}
        for p in arrived:
            arrivals.setdefault(p.node_name, []).append(p)
        by_node = dict(self.by_node)
        for node in touched | arrivals.keys():
            group = [p for p in by_node.get(node, ()) if (p.namespace, p.name) not in changed]
            group.extend(arrivals.get(node, ()))
            if group:
                group.sort(key=namespaced_key)
                by_node[node] = tuple(group)
            else:
                by_node.pop(node, None)
        return PodLayout(tuple(merged), by_node)
