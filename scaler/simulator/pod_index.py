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
from typing import TypeVar

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
        """Index ``pods`` as node ``name``'s pods (replacing what it held)."""
        if name in self._pods:
            self.remove_node(name)
        self.version += 1
        self._pods[name] = pods
        for p in pods:
            _add(self._by_namespace, p.namespace, name, p)
            _add(self._by_uid, p.uid, name, p)
            ns = p.namespace
            for k, v in p.labels.items():
                _add(self._by_label, (ns, k, v), name, p)

    def remove_node(self, name: str) -> None:
        """Forget node ``name``'s pods."""
        pods = self._pods.pop(name, None)
        if pods is None:
            return
        self.version += 1
        for p in pods:
            _drop(self._by_namespace, p.namespace, name)
            _drop(self._by_uid, p.uid, name)
            ns = p.namespace
            for k, v in p.labels.items():
                _drop(self._by_label, (ns, k, v), name)

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
    the order of ``pods_by_node``, as :meth:`PodIndex.of` lists them."""

    __slots__ = ("_by_key", "_by_namespace", "_by_uid", "_pods")

    version = 0
    """Never changes (:class:`PodIndex` counts updates; this index has none)."""

    def __init__(self, pods_by_node: Mapping[str, Sequence[Pod]]) -> None:
        self._pods = pods_by_node
        self._by_namespace: dict[str, dict[str, list[Pod]]] | None = None
        self._by_uid: dict[str, dict[str, list[Pod]]] | None = None
        self._by_key: dict[str, dict[tuple[str, str], dict[str, list[Pod]]]] = {}

    def __len__(self) -> int:
        """The number of nodes indexed."""
        return len(self._pods)

    def with_label(self, namespace: str, key: str = "", value: str = "") -> Mapping[str, list[Pod]]:
        """As :meth:`PodIndex.with_label`."""
        if not key:
            return self._namespaces().get(namespace, _EMPTY)
        by_value = self._by_key.get(key)
        if by_value is None:
            by_value = self._by_key[key] = {}
            for name, pods in self._pods.items():
                for p in pods:
                    v = p.labels.get(key)
                    if v is not None:
                        _add(by_value, (p.namespace, v), name, p)
        return by_value.get((namespace, value), _EMPTY)

    def with_uid(self, uid: str) -> Mapping[str, list[Pod]]:
        """As :meth:`PodIndex.with_uid`."""
        if self._by_uid is None:
            self._by_uid = {}
            for name, pods in self._pods.items():
                for p in pods:
                    _add(self._by_uid, p.uid, name, p)
        return self._by_uid.get(uid, _EMPTY)

    def namespaces(self) -> Iterator[str]:
        """Every namespace with an indexed pod."""
        return iter(self._namespaces())

    def _namespaces(self) -> dict[str, dict[str, list[Pod]]]:
        if self._by_namespace is None:
            self._by_namespace = {}
            for name, pods in self._pods.items():
                for p in pods:
                    _add(self._by_namespace, p.namespace, name, p)
        return self._by_namespace


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


def _drop(index: dict[K, dict[str, list[Pod]]], key: K, name: str) -> None:
    by_node = index.get(key)
    if by_node is not None and by_node.pop(name, None) is not None and not by_node:
        del index[key]
