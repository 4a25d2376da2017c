"""What the replay's :class:`~scaler.replay.world.World` derives from its pods and nodes, kept
up to date by change instead of rebuilt from every pod after each eviction or placement.

A step of a 30,000-pod replay changes a few dozen pods (evictions, placements) between reads,
while rebuilding the snapshot's sorted pod layout, the usage slots of the bound pods and their
PodMetrics from scratch costs about 100 ms each time. :class:`TrackedDict` records which keys of
the world's ``pods`` and ``nodes`` changed (whoever changed them), and :class:`WorldIndex`
applies only those changes to what it keeps. Every answer is the one a full rebuild gives, in
the same order: pods follow the order of the world's ``pods`` dict (the order their usage slots
were made in), and where that no longer holds (a slot made for a pod already there, a bound pod
without a slot) the index falls back to full rebuilds. The one exception is the key order of the
bound pods' rows (:meth:`WorldIndex.bound_rows`), which readers look up by key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from scaler.model.layout import PodLayout
from scaler.model.records import Node, Pod, Resources
from scaler.model.revisions import RevisionCounter
from scaler.model.snapshot import ClusterSnapshot
from scaler.simulator.state import sum_requests

__all__ = ["PatchedRows", "TrackedDict", "WorldIndex"]

K = TypeVar("K")
V = TypeVar("V")
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
PodKey = tuple[str, str]


class PatchedRows(Mapping[PodKey, int]):
    """A mapping of pod keys to usage slots given as a base dict and a patch over it: a key the
    patch holds maps to the patch's slot, or is absent where the patch holds -1 (slots are never
    negative); any other key is as in the base. Neither is ever changed, so a new mapping with a
    few more changes copies the patch alone, not the base (:meth:`patched`)."""

    __slots__ = ("_base", "_len", "_patch")

    def __init__(self, base: dict[PodKey, int], patch: dict[PodKey, int]) -> None:
        self._base, self._patch = base, patch
        self._len = len(base) + sum((v >= 0) - (k in base) for k, v in patch.items())

    def patched(self, changes: Mapping[PodKey, int]) -> Mapping[PodKey, int]:
        """This mapping with ``changes`` (key → slot, -1: absent) applied; a plain dict once
        the patch would hold more than an eighth as many keys as the base (and more than 64)."""
        patch = {**self._patch, **changes}
        if len(patch) > max(64, len(self._base) // 8):
            merged = {k: v for k, v in self._base.items() if k not in patch}
            merged.update((k, v) for k, v in patch.items() if v >= 0)
            return merged
        return PatchedRows(self._base, patch)

    def __getitem__(self, key: PodKey) -> int:
        v = self._patch.get(key)
        if v is None:
            return self._base[key]
        if v < 0:
            raise KeyError(key)
        return v

    def get(self, key: PodKey, default: Any = None) -> Any:
        """The slot of ``key``, ``default`` when absent."""
        v = self._patch.get(key)
        if v is None:
            return self._base.get(key, default)
        return default if v < 0 else v

    def __contains__(self, key: object) -> bool:
        v = self._patch.get(key)  # type: ignore[call-overload]
        return key in self._base if v is None else v >= 0

    def __iter__(self) -> Iterator[PodKey]:
        patch = self._patch
        yield from (k for k in self._base if k not in patch)
        yield from (k for k, v in patch.items() if v >= 0)

    def __len__(self) -> int:
        return self._len


class TrackedDict(dict[K, V]):
    """A dict that records the keys set or deleted since its reader last took them
    (:meth:`take`), and the keys it gained, in the order they joined (a new key goes last in a
    dict's order; replacing a value keeps its place)."""

    __slots__ = ("_added", "_changed")

    def __init__(self, items: Iterable[tuple[K, V]] = ()) -> None:
        super().__init__(items)
        self._changed: set[K] = set(self)
        self._added: list[K] = list(self)

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self:
            self._added.append(key)
        super().__setitem__(key, value)
        self._changed.add(key)

    def __delitem__(self, key: K) -> None:
        super().__delitem__(key)
        self._changed.add(key)

    def pop(self, key: K, *default: Any) -> Any:
        """As :meth:`dict.pop`, recorded."""
        if key in self:
            self._changed.add(key)
        return super().pop(key, *default)

    def popitem(self) -> tuple[K, V]:
        """As :meth:`dict.popitem`, recorded."""
        key, value = super().popitem()
        self._changed.add(key)
        return key, value

    def setdefault(self, key: K, default: Any = None) -> Any:
        """As :meth:`dict.setdefault`, recorded."""
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        """As :meth:`dict.update`, recorded."""
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other: Any) -> TrackedDict[K, V]:  # type: ignore[override,misc]
        self.update(other)
        return self

    def clear(self) -> None:
        """As :meth:`dict.clear`, recorded."""
        self._changed.update(self)
        super().clear()

    def take(self) -> tuple[set[K], list[K]]:
        """The keys changed (set, replaced or deleted) and the keys added (in order) since the
        previous call; forgets them."""
        changed, added = self._changed, self._added
        self._changed, self._added = set(), []
        return changed, added


class WorldIndex:
    """The world's pods by usage slot and its snapshot structure, updated by change.

    Args:
        pods: the world's pods by uid (its dict order is the order every answer follows).
        nodes: the world's nodes by name.
        slot_of: pod uid → usage slot (the world adds slots as it adds pods; a slot is made
            after its pod joins ``pods``, so slots rise in the dict's order).
    """

    def __init__(
        self,
        pods: TrackedDict[str, Pod],
        nodes: TrackedDict[str, Node],
        slot_of: Mapping[str, int],
        revisions: RevisionCounter | None = None,
    ):
        self._pods = pods
        self._nodes = nodes
        self._slot_of = slot_of
        self.revisions = revisions if revisions is not None else RevisionCounter()
        """Numbers the changes of the pods and nodes (:mod:`scaler.model.revisions`); the
        snapshots of :meth:`structure` carry its numbers."""
        self._uid_node: dict[str, str] = {}  # pod uid -> the node it was bound to when last seen
        self.exact = True
        """False once slots no longer follow the dict's order: every answer is then rebuilt."""
        self._unique = True  # every (namespace, name) belongs to one pod: the layout can be updated
        self._last_slot = -1  # the slot of the pod last added to the dict's order
        self._pod_rev = 0
        self._node_rev = 0
        # Per usage slot: node id of its pod when bound, not terminal (-1 otherwise); bound at all;
        # its pod's (namespace, name).
        self._slot_node = np.full(0, -1, dtype=np.int64)
        self._slot_bound = np.zeros(0, dtype=np.bool_)
        self._slot_host = np.full(0, -1, dtype=np.int64)  # node id of its pod when bound at all
        self._slot_uid: list[str] = []
        self._slot_key: list[PodKey | None] = []
        self._rows: tuple[int, Mapping[PodKey, int]] | None = None  # bound pods' keys -> slots
        self._rows_changes: set[PodKey] = set()  # keys whose pod changed since the rows were made
        self._key_slot: dict[PodKey, int] = {}  # every key ever seen -> its latest slot
        self.rows_token: object = object()
        """The same object while every pod key keeps its usage slot (a new one when a key
        moves to another slot): the ``layout`` of the world's PodMetricsColumns."""
        self._node_id: dict[str, int] = {}
        # The layout: pods by (namespace, name), and the keys changed since the layout was made.
        self._uid_key: dict[str, PodKey] = {}
        self._key_uid: dict[PodKey, str] = {}
        self._by_key: dict[PodKey, Pod] = {}
        self._sums: dict[str, tuple[tuple[Pod, ...], Resources]] = {}
        self._layout_changes: set[PodKey] = set()
        self._layout: tuple[int, PodLayout] | None = None
        self._names: tuple[int, list[str], IntArray] | None = None
        self._structure: tuple[tuple[int, int], ClusterSnapshot, bool] | None = None

    # ---- following changes -------------------------------------------------------------------
    def slot_added(self, uid: str, replaced: bool) -> None:
        """A usage slot was made for ``uid``; ``replaced``: ``uid`` had one already (its pod
        then keeps its place in the dict while its slot is the newest)."""
        if replaced:
            self.exact = False

    def sync(self) -> None:
        """Apply the changes of ``pods`` and ``nodes`` since the previous call."""
        changed, added = self._pods.take()
        if changed or added:
            self._pod_rev += 1
            for uid in added:
                s = self._slot_of.get(uid)
                if s is not None:
                    if s <= self._last_slot:
                        self.exact = False
                    self._last_slot = s
            n = len(self._slot_key)
            want = max(len(self._slot_of), n)
            if want > n:
                self._grow(want)
            for uid in changed:
                self._count(uid)
                self._update(uid)
        changed_nodes, added_nodes = self._nodes.take()
        if changed_nodes or added_nodes:
            self._node_rev += 1
            self.revisions.nodes_changed(changed_nodes)
            self.revisions.nodes_changed(added_nodes)

    def holds(self, key: PodKey) -> bool:
        """Whether a pod of the world is named ``key`` (namespace, name) now."""
        self.sync()
        return key in self._key_uid

    def _count(self, uid: str) -> None:
        """Number the change of pod ``uid``: the node it left and the node it is on now."""
        pod = self._pods.get(uid)
        now = pod.node_name if pod is not None else ""
        before = self._uid_node.pop(uid, "")
        if now:
            self._uid_node[uid] = now
        for name in {before, now}:
            if name:
                self.revisions.node_changed(name)
            else:
                self.revisions.other_changed()

    def _grow(self, size: int) -> None:
        extra = size - len(self._slot_key)
        self._slot_node = np.concatenate([self._slot_node, np.full(extra, -1, dtype=np.int64)])
        self._slot_bound = np.concatenate([self._slot_bound, np.zeros(extra, dtype=np.bool_)])
        self._slot_host = np.concatenate([self._slot_host, np.full(extra, -1, dtype=np.int64)])
        self._slot_uid.extend([""] * extra)
        self._slot_key.extend([None] * extra)

    def _update(self, uid: str) -> None:
        pod = self._pods.get(uid)
        old = self._uid_key.pop(uid, None)
        if old is not None:
            self._layout_changes.add(old)
            self._rows_changes.add(old)
            if self._key_uid.get(old) == uid:
                del self._key_uid[old]
                del self._by_key[old]
        key: PodKey | None = None
        if pod is not None:
            key = (pod.namespace, pod.name)
            self._uid_key[uid] = key
            self._layout_changes.add(key)
            self._rows_changes.add(key)
            if self._key_uid.get(key, uid) != uid:
                self._unique = False
            self._key_uid[key] = uid
            self._by_key[key] = pod
        s = self._slot_of.get(uid)
        if key is not None and s is not None and self._key_slot.setdefault(key, s) != s:
            self._key_slot[key] = s
            self.rows_token = object()
        if s is None:
            if pod is not None and pod.node_name:
                self.exact = False  # a bound pod without usage: as the full rebuild does, fail there
            return
        if s >= len(self._slot_key):
            self._grow(s + 1)
        if pod is None:
            self._slot_node[s], self._slot_host[s], self._slot_bound[s], self._slot_key[s] = (
                -1,
                -1,
                False,
                None,
            )
            return
        node = pod.node_name
        self._slot_bound[s] = bool(node)
        self._slot_key[s] = key
        self._slot_uid[s] = uid
        nid = -1
        if node:
            nid = self._node_id.get(node, -1)
            if nid < 0:
                nid = self._node_id[node] = len(self._node_id)
        self._slot_host[s] = nid
        self._slot_node[s] = -1 if pod.is_terminal else nid

    # ---- answers -------------------------------------------------------------------------------
    def node_revision(self) -> int:
        """A number that changes whenever a node is set or deleted."""
        self.sync()
        return self._node_rev

    def _sorted_names(self) -> tuple[list[str], IntArray]:
        """Node names sorted, and per node id its index among them (-1: no such node)."""
        key = self._node_rev * 1_000_003 + len(self._node_id)
        if self._names is None or self._names[0] != key:
            names = sorted(self._nodes)
            rank = np.full(len(self._node_id) + 1, -1, dtype=np.int64)
            for i, name in enumerate(names):
                nid = self._node_id.get(name)
                if nid is not None:
                    rank[nid] = i
            self._names = (key, names, rank)
        return self._names[1], self._names[2]

    def placement(self) -> tuple[IntArray, IntArray, list[str]]:
        """(slot of each pod bound to an existing node and not terminal, that node's index in
        the sorted node names, the sorted node names), pods in the dict's order."""
        self.sync()
        names, rank = self._sorted_names()
        if not self.exact:
            index = {n: i for i, n in enumerate(names)}
            slots, where = [], []
            for p in self._pods.values():
                i = index.get(p.node_name)
                if i is not None and not p.is_terminal:
                    slots.append(self._slot_of[p.uid])
                    where.append(i)
            return np.asarray(slots, dtype=np.int64), np.asarray(where, dtype=np.int64), names
        ids = self._slot_node
        candidates = np.flatnonzero(ids >= 0)
        at = rank[ids[candidates]]
        keep = at >= 0
        return candidates[keep].astype(np.int64), at[keep].astype(np.int64), names

    def pods_on(self, name: str) -> list[Pod] | None:
        """The pods bound to node ``name`` in the dict's order; ``None`` when the index cannot
        tell (not :attr:`exact`)."""
        self.sync()
        if not self.exact:
            return None
        nid = self._node_id.get(name)
        if nid is None:
            return []
        return [self._pods[u] for u in _pick(self._slot_uid, np.flatnonzero(self._slot_host == nid).tolist())]

    def bound(self) -> tuple[list[PodKey], IntArray]:
        """``(namespace, name)`` of every pod bound to a node (existing or not), in the dict's
        order, and its usage slot."""
        self.sync()
        if not self.exact:
            pods = [p for p in self._pods.values() if p.node_name]
            slots = np.asarray([self._slot_of[p.uid] for p in pods], dtype=np.int64)
            return [(p.namespace, p.name) for p in pods], slots
        slots = np.flatnonzero(self._slot_bound).astype(np.int64)
        return _pick(self._slot_key, slots.tolist()), slots  # type: ignore[arg-type]

    def bound_rows(self) -> Mapping[PodKey, int]:
        """``(namespace, name)`` → usage slot of every pod bound to a node (existing or not):
        the same mapping object while no pod changed (a :class:`PodMetricsColumns` layout). A
        new one each time pods changed: the previous one with the changes applied (pods unbound
        or gone dropped, pods bound or moved to another slot set) as a :class:`PatchedRows`,
        else, when many pods changed, a dict made from every bound pod in slot order. The order
        of its keys is not part of the answer: readers look pods up by key."""
        self.sync()
        if self._rows is not None and self._rows[0] == self._pod_rev and self.exact:
            return self._rows[1]
        changes, self._rows_changes = self._rows_changes, set()
        made = self._patched_rows(changes) if self._rows is not None and self.exact and self._unique else None
        if made is None:
            keys, slots = self.bound()
            made = dict(zip(keys, slots.tolist(), strict=True))
        self._rows = (self._pod_rev, made)
        return made

    def _patched_rows(self, changes: set[PodKey]) -> Mapping[PodKey, int] | None:
        """The last :meth:`bound_rows` with the pods of ``changes`` (keys) as they are now;
        ``None`` when more than an eighth of the pods changed, and more than 64 (a rebuild is as
        quick)."""
        assert self._rows is not None
        _, old = self._rows
        if len(changes) > max(64, len(old) // 8):
            return None
        patch: dict[PodKey, int] = {}  # key -> its slot now, -1: no longer bound
        for key in sorted(changes):  # sorted: the same mapping, iterated alike, on every run
            uid = self._key_uid.get(key)
            slot = self._slot_of.get(uid, -1) if uid is not None else -1
            bound = (
                0 <= slot < len(self._slot_key)
                and bool(self._slot_bound[slot])
                and self._slot_key[slot] == key
            )
            was = old.get(key)
            if bound and was != slot:
                patch[key] = slot
            elif not bound and was is not None:
                patch[key] = -1
        if not patch:
            return old
        if isinstance(old, PatchedRows):
            return old.patched(patch)
        return PatchedRows(cast("dict[PodKey, int]", old), patch)

    def layout(self) -> PodLayout:
        """The pods sorted and grouped as a snapshot holds them (:class:`PodLayout`)."""
        self.sync()
        if self._layout is None or self._layout[0] != self._pod_rev:
            if self._layout is not None and self._unique:
                layout = self._layout[1].update(self._by_key, self._layout_changes)
            else:
                layout = PodLayout.build(self._pods.values())
            self._layout_changes = set()
            self._layout = (self._pod_rev, layout)
        return self._layout[1]

    def structure(self, base: ClusterSnapshot) -> ClusterSnapshot:
        """``base`` with the world's nodes and pods (indexes included; ``now`` is the one of
        the call that built it): the same object while no pod or node changed."""
        layout = self.layout()
        rev = (self._pod_rev, self._node_rev)
        if self._structure is None or self._structure[0] != rev:
            fresh = ClusterSnapshot.create(base.now, self._nodes.values(), layout)
            snap = replace(
                base,
                nodes=fresh.nodes,
                pods=fresh.pods,
                pods_by_node=fresh.pods_by_node,
                node_by_name=fresh.node_by_name,
                revisions=self.revisions.stamp(fresh),
            )
            if self.exact:  # a bound pod is terminal where it has no node id
                terminal = bool(np.any(self._slot_bound & (self._slot_node < 0)))
            else:
                terminal = any(p.is_terminal for p in layout.pods if p.node_name)
            self._structure = (rev, snap, terminal)
        return self._structure[1]

    def requested(self, pods_by_node: Mapping[str, tuple[Pod, ...]]) -> dict[str, Resources]:
        """Each node's sum of its ``pods_by_node`` pods' requests, kept per node while its pods
        tuple is the same object (the layout keeps a node's tuple while its pods stay)."""
        old, kept = self._sums, {}
        for name, pods in pods_by_node.items():
            entry = old.get(name)
            kept[name] = entry if entry is not None and entry[0] is pods else (pods, sum_requests(pods))
        self._sums = kept
        return {name: entry[1] for name, entry in kept.items()}

    def counted_pods(self, snap: ClusterSnapshot) -> dict[str, list[Pod]] | None:
        """``snap.pods_by_node`` when ``snap`` has the pods of the latest :meth:`structure` and
        none of its bound pods is terminal: then it is the ``pods_by_node`` a
        :class:`~scaler.simulator.state.ClusterState` counts by default (the lists it copies
        from it are the same); ``None`` otherwise."""
        s = self._structure
        if s is None or s[2] or s[1].pods_by_node is not snap.pods_by_node:
            return None
        return cast("dict[str, list[Pod]]", snap.pods_by_node)


def _pick(items: Sequence[V], at: list[int]) -> list[V]:
    """``[items[i] for i in at]``, in C."""
    if len(at) < 2:
        return [items[i] for i in at]
    return list(itemgetter(*at)(items))
