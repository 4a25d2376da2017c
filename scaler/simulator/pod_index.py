"""The counted pods of a snapshot indexed by namespace, by label pair and by UID, per node.

The filters that read other pods (``PodTopologySpread``, ``InterPodAffinity``) look pods up by
a selector's first ``matchLabels`` pair within a namespace, never by scanning the cluster.
Indexing 150,000 pods costs about 0.1 s, and every simulation state of every evaluation (and
of every re-check) would pay it; between two evaluations only the nodes whose pods changed
differ. :class:`PodIndex` holds the index of one set of nodes' pods and is **updated node by
node** (:meth:`PodIndex.set_node`, :meth:`PodIndex.remove_node`): the evaluation cache
(:mod:`scaler.simulator.cache`) keeps one and updates the nodes whose revision changed; a
:class:`~scaler.simulator.state.ClusterState` reads it as the pods it starts with and keeps
its own moves beside it (it never changes the index).

Keys are node names, not table rows: a state resolves a name to its row.

A state given no index (one evaluation without a cache, as ``scaler dry-run`` runs it) reads a
:class:`LazyPodIndex` instead: the same answers, each kind built on its first question (the
pods by namespace, by UID, by one label key), since such a state asks about a few label keys
and indexing every label of every pod would cost more than the evaluation's placements.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from scaler.model.records import Pod

__all__ = ["LabelKey", "LazyPodIndex", "PodIndex"]

K = TypeVar("K", bound=Hashable)
LabelKey = tuple[str, str, str]
"""``(namespace, label key, label value)``."""


class PodIndex:
    """Pods by ``(namespace, label key, label value)``, by namespace and by UID, each grouped
    by the node they are on (every counted pod of the nodes given).

    Build one with :meth:`of` or :meth:`set_node` per node; answers follow the last update.
    """

    __slots__ = ("_by_label", "_by_namespace", "_by_uid", "_pods", "version")

    def __init__(self) -> None:
        self.version = 0
        """Changes at every update (a reader that took the index at one version must not read
        it at another)."""
        self._pods: dict[str, Sequence[Pod]] = {}
        self._by_label: dict[LabelKey, dict[str, list[Pod]]] = {}
        self._by_namespace: dict[str, dict[str, list[Pod]]] = {}
        self._by_uid: dict[str, dict[str, list[Pod]]] = {}

    @classmethod
    def of(cls, pods_by_node: Mapping[str, Sequence[Pod]]) -> PodIndex:
        """The index of ``pods_by_node`` (node name → its counted pods)."""
        index = cls()
        for name, pods in pods_by_node.items():
            index.set_node(name, pods)
        return index

    def pods_of(self, name: str) -> Sequence[Pod] | None:
        """The pods indexed for node ``name`` (the very sequence given), ``None`` if none was."""
        return self._pods.get(name)

    def follow(self, pods_by_node: Mapping[str, Sequence[Pod]]) -> None:
        """Make the index that of ``pods_by_node``: nodes whose sequence is not the very one
        indexed are indexed again, nodes absent are forgotten (O(the nodes that changed))."""
        for name in [n for n in self._pods if n not in pods_by_node]:
            self.remove_node(name)
        indexed = self._pods
        for name, pods in pods_by_node.items():
            if indexed.get(name) is not pods:
                self.set_node(name, pods)

    def set_node(self, name: str, pods: Sequence[Pod]) -> None:
        """Index ``pods`` as node ``name``'s pods (replacing what it held).

        Only the difference is indexed when the node held pods before: the pods no longer
        there (by identity) are dropped and the new ones added, so a node that gained one pod
        costs one pod's keys, not all of its pods'. A node's pods are then listed in no
        particular order (every reader counts them)."""
        old = self._pods.get(name)
        self.version += 1
        self._pods[name] = pods
        if old is None:
            for p in pods:
                self._add_pod(name, p)
            return
        before = {id(p) for p in old}
        after = {id(p) for p in pods}
        if len(before) != len(old) or len(after) != len(pods):  # a pod listed twice: index it all again
            for p in old:
                self._drop_pod(name, p)
            for p in pods:
                self._add_pod(name, p)
            return
        for p in old:
            if id(p) not in after:
                self._drop_pod(name, p)
        for p in pods:
            if id(p) not in before:
                self._add_pod(name, p)

    def remove_node(self, name: str) -> None:
        """Forget node ``name``'s pods."""
        pods = self._pods.pop(name, None)
        if pods is None:
            return
        self.version += 1
        for p in pods:
            for index, key in self._keys(p):
                _drop(index, key, name)

    def _keys(self, p: Pod) -> Iterator[tuple[dict[Any, dict[str, list[Pod]]], Hashable]]:
        """Each index ``p`` is listed in, with its key there."""
        yield self._by_namespace, p.namespace
        yield self._by_uid, p.uid
        ns = p.namespace
        for k, v in p.labels.items():
            yield self._by_label, (ns, k, v)

    def _add_pod(self, name: str, p: Pod) -> None:
        for index, key in self._keys(p):
            _add(index, key, name, p)

    def _drop_pod(self, name: str, p: Pod) -> None:
        for index, key in self._keys(p):
            _drop_one(index, key, name, p)

    def __len__(self) -> int:
        """The number of nodes indexed."""
        return len(self._pods)

    def with_label(self, namespace: str, key: str = "", value: str = "") -> Mapping[str, list[Pod]]:
        """Node name → its pods in ``namespace`` carrying label ``key=value`` (every pod of the
        namespace when ``key`` is empty). Read it, never change it."""
        if not key:
            return self._by_namespace.get(namespace, _EMPTY)
        return self._by_label.get((namespace, key, value), _EMPTY)

    def with_uid(self, uid: str) -> Mapping[str, list[Pod]]:
        """Node name → its pods with UID ``uid`` (normally one pod in all)."""
        return self._by_uid.get(uid, _EMPTY)

    def namespaces(self) -> Iterator[str]:
        """Every namespace with an indexed pod."""
        return iter(self._by_namespace)


_EMPTY: Mapping[str, list[Pod]] = {}


class LazyPodIndex:
    """The answers of :class:`PodIndex` for fixed ``pods_by_node`` (node name → its counted
    pods), each index built when first asked: by namespace, by UID, and by label key (one pass
    over the pods per key asked). The pods of a node are listed in their order and the nodes in
    the order of ``pods_by_node``, as :meth:`PodIndex.of` lists them.

    It keeps node names only (per namespace, per label pair, per UID) and picks each answer's
    pods from those nodes' lists when asked: a few hundred containers instead of a few for every
    pod, which the cycle collector would walk once the evaluation holding them ends."""

    __slots__ = ("_by_key", "_namespace_nodes", "_pods", "_uid_more", "_uid_node")

    version = 0
    """Never changes (:class:`PodIndex` counts updates; this index has none)."""

    def __init__(self, pods_by_node: Mapping[str, Sequence[Pod]]) -> None:
        self._pods = pods_by_node
        self._namespace_nodes: dict[str, list[str]] | None = None
        self._uid_node: dict[str, str] | None = None  # the first node holding the UID
        self._uid_more: dict[str, list[str]] = {}  # the other nodes holding it (a UID may repeat)
        self._by_key: dict[str, dict[tuple[str, str], list[str]]] = {}

    def __len__(self) -> int:
        """The number of nodes indexed."""
        return len(self._pods)

    def with_label(self, namespace: str, key: str = "", value: str = "") -> Mapping[str, list[Pod]]:
        """As :meth:`PodIndex.with_label` (a new mapping each time)."""
        if not key:
            names = self._namespaces().get(namespace)
            return {n: [p for p in self._pods[n] if p.namespace == namespace] for n in names or ()}
        by_value = self._by_key.get(key)
        if by_value is None:
            by_value = self._by_key[key] = {}
            for name, pods in self._pods.items():
                for p in pods:
                    v = p.labels.get(key)
                    if v is not None:
                        _note(by_value, (p.namespace, v), name)
        return {
            n: [p for p in self._pods[n] if p.namespace == namespace and p.labels.get(key) == value]
            for n in by_value.get((namespace, value), ())
        }

    def with_uid(self, uid: str) -> Mapping[str, list[Pod]]:
        """As :meth:`PodIndex.with_uid` (a new mapping each time)."""
        if self._uid_node is None:
            first: dict[str, str] = {}
            for name, pods in self._pods.items():
                for p in pods:
                    was = first.setdefault(p.uid, name)
                    if was != name:
                        _note(self._uid_more, p.uid, name)
            self._uid_node = first
        node = self._uid_node.get(uid)
        if node is None:
            return _EMPTY
        return {n: [p for p in self._pods[n] if p.uid == uid] for n in (node, *self._uid_more.get(uid, ()))}

    def namespaces(self) -> Iterator[str]:
        """Every namespace with an indexed pod."""
        return iter(self._namespaces())

    def _namespaces(self) -> dict[str, list[str]]:
        if self._namespace_nodes is None:
            self._namespace_nodes = {}
            for name, pods in self._pods.items():
                for p in pods:
                    _note(self._namespace_nodes, p.namespace, name)
        return self._namespace_nodes


def _note(index: dict[K, list[str]], key: K, name: str) -> None:
    """Add node ``name`` to ``index[key]`` unless it is its last (nodes come one by one)."""
    names = index.get(key)
    if names is None:
        index[key] = [name]
    elif names[-1] != name:
        names.append(name)


def _add(index: dict[K, dict[str, list[Pod]]], key: K, name: str, pod: Pod) -> None:
    by_node = index.get(key)
    if by_node is None:
        index[key] = {name: [pod]}
        return
    pods = by_node.get(name)
    if pods is None:
        by_node[name] = [pod]
    else:
        pods.append(pod)


def _drop_one(index: dict[K, dict[str, list[Pod]]], key: K, name: str, pod: Pod) -> None:
    """Take ``pod`` (this very object) out of ``index[key][name]``, and the emptied entries."""
    by_node = index[key]
    pods = by_node[name]
    for i, q in enumerate(pods):
        if q is pod:
            del pods[i]
            break
    if not pods:
        del by_node[name]
        if not by_node:
            del index[key]


def _drop(index: dict[K, dict[str, list[Pod]]], key: K, name: str) -> None:
    by_node = index.get(key)
    if by_node is not None and by_node.pop(name, None) is not None and not by_node:
        del index[key]
