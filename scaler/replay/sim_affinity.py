"""kube-scheduler's ``InterPodAffinity`` filter for every candidate node at once, as the replay's
scheduler (:meth:`scaler.replay.world.World.schedule_pending`) asks it.

:class:`~scaler.simulator.filters.InterPodAffinity` judges one node at a time, scanning the pods
of the node's topology domains for each of them; the world's scheduler asks it about every node
for every pending pod (about 700 nodes × 600 pods a day at 1,000 nodes). :class:`AntiAffinity`
gives the same verdicts for all candidates of a pod at once: it lists the topology domains
that refuse the pod, then looks up each candidate's domain. It keeps the state's pods with
required anti-affinity terms, indexed by each term's first ``matchLabels`` pair (a term selects
only pods carrying that pair), and follows the pods the scheduler places. It answers for pods
without required affinity terms, and whose own anti-affinity terms select pods by a
``matchLabels`` pair in listed namespaces; for any other pod it declines (``None``) and the
filter judges node by node.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from scaler.model.records import Pod, PodAffinityTerm
from scaler.simulator.state import ClusterState, NodeState

__all__ = ["AntiAffinity"]

Holder = tuple[NodeState, Pod, PodAffinityTerm]


class AntiAffinity:
    """The required anti-affinity terms of the pods in ``state`` (built on first use), and the
    nodes they, and a pod's own terms, refuse.

    Args:
        state: the scheduler's state; only :meth:`placed` may add pods to it after this.
    """

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._by_pair: dict[tuple[str, str], list[Holder]] | None = None
        self._loose: list[Holder] = []  # terms with a selector but no matchLabels

    def _build(self) -> dict[tuple[str, str], list[Holder]]:
        if self._by_pair is None:
            self._by_pair = {}
            for ns in self.state.nodes.values():
                for p in ns.pods:
                    if p.required_anti_affinity:
                        self._add(ns, p)
        return self._by_pair

    def _add(self, ns: NodeState, pod: Pod) -> None:
        assert self._by_pair is not None
        for t in pod.required_anti_affinity:
            selector = t.label_selector
            if selector is None:  # selects nothing
                continue
            if selector.match_labels:
                pair = next(iter(selector.match_labels.items()))
                self._by_pair.setdefault(pair, []).append((ns, pod, t))
            else:
                self._loose.append((ns, pod, t))

    def placed(self, pod: Pod, node_name: str) -> None:
        """``pod`` was placed on ``node_name`` in the state."""
        if self._by_pair is not None and pod.required_anti_affinity:
            self._add(self.state.nodes[node_name], pod)

    def refused(self, pod: Pod, positions: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_] | None:
        """Per node at table ``positions``: whether ``InterPodAffinity`` refuses ``pod`` there
        (an existing pod's anti-affinity term selecting it in the node's domain, or one of its
        own terms selecting a pod there); ``None`` for a pod this does not judge (see the
        module doc)."""
        if pod.required_affinity:
            return None
        state = self.state
        ns_labels: Mapping[str, Mapping[str, str]] | None = state.static(
            "namespace-labels", lambda: state.snapshot.namespace_labels
        )
        refusing: dict[str, set[str]] = {}  # topology key -> domains (label values) refusing
        # The pod's own anti-affinity: a selected pod on a live node of the domain.
        for t in pod.required_anti_affinity:
            selector = t.label_selector
            if selector is None:
                continue
            if t.all_namespaces or t.namespace_selector is not None or not selector.match_labels:
                return None
            k, v = next(iter(selector.match_labels.items()))
            for namespace in dict.fromkeys(t.namespaces or (pod.namespace,)):
                for ns, p in state.pods_with_label(namespace, k, v):
                    if ns.removed or ns.ghost or p.uid == pod.uid:
                        continue
                    domain = ns.node.labels.get(t.topology_key)
                    if domain is not None and t.selects(pod.namespace, p, ns_labels):
                        refusing.setdefault(t.topology_key, set()).add(domain)
        # Existing pods' anti-affinity terms selecting the pod (their keys as the filter knows them).
        by_pair = self._build()
        keys = state.anti_affinity_keys
        holders = list(self._loose)
        for pair in pod.labels.items():
            holders.extend(by_pair.get(pair, ()))
        for ns, p, t in holders:
            key = t.topology_key
            if ns.removed or ns.ghost or p.uid == pod.uid or key not in keys:
                continue
            domain = ns.node.labels.get(key)
            if domain is not None and t.selects(p.namespace, pod, ns_labels):
                refusing.setdefault(key, set()).add(domain)
        out = np.zeros(len(positions), dtype=np.bool_)
        if refusing:
            nodes, names = state.nodes, state.names
            for j, i in enumerate(positions.tolist()):
                labels = nodes[names[i]].node.labels
                out[j] = any(labels.get(key) in domains for key, domains in refusing.items())
        return out
