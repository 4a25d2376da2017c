"""What the built-in Filter plugins (:mod:`scaler.simulator.filters`) share: their base class,
the taint and node-affinity matching kube-scheduler's helpers do (``v1helper``,
``nodeaffinity``), the reason interning of ``filter_nodes`` and the memoized label positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from scaler.config import ScalerConfig
from scaler.model.records import (
    LABEL_ZONE,
    LABEL_ZONE_BETA,
    Node,
    Pod,
    Taint,
    Toleration,
)
from scaler.simulator.state import ClusterState, Codes, NodeState, Positions

__all__ = [
    "TAINT_UNSCHEDULABLE",
    "BaseFilter",
    "node_matches_pod_node_affinity",
    "untolerated_taint",
]

TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
"""Taint key the scheduler treats as equivalent to ``spec.unschedulable`` (``v1.TaintNodeUnschedulable``)."""

LABEL_REGION = "topology.kubernetes.io/region"
"""A node's region: VolumeZone matches it against a PersistentVolume's region, and prices are per region."""
LABEL_REGION_BETA = "failure-domain.beta.kubernetes.io/region"
"""The deprecated region label, read where ``topology.kubernetes.io/region`` is absent."""
# VolumeZone's topologyLabels, in kube-scheduler's order (beta first), and beta → GA fallbacks.
_VOLUME_TOPOLOGY_LABELS = (LABEL_ZONE_BETA, LABEL_REGION_BETA, LABEL_ZONE, LABEL_REGION)
_TO_GA = {LABEL_ZONE_BETA: LABEL_ZONE, LABEL_REGION_BETA: LABEL_REGION}
_DO_NOT_SCHEDULE_EFFECTS = ("NoSchedule", "NoExecute")
_ANY_IP = "0.0.0.0"


class BaseFilter:
    """Common base of the built-in filters: keeps the configuration.

    Subclasses set the ``name`` class attribute (the kube-scheduler plugin name) and implement
    :meth:`filter`. Third-party plugins need not inherit from it; the protocol
    :class:`~scaler.simulator.state.FilterPlugin` is what the registry checks.
    """

    name: str = "BaseFilter"

    def __init__(self, config: ScalerConfig) -> None:
        """Store ``config`` (the built-in filters read no thresholds from it)."""
        self.config = config

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when ``pod`` fits on ``node``, else a short reason."""
        raise NotImplementedError


# ---- shared helpers -------------------------------------------------------------------------


def untolerated_taint(
    taints: Iterable[Taint],
    tolerations: Iterable[Toleration],
    effects: tuple[str, ...] = _DO_NOT_SCHEDULE_EFFECTS,
) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates, else ``None``.

    Mirrors ``v1helper.FindMatchingUntoleratedTaint`` with ``DoNotScheduleTaintsFilterFunc``
    (``NoSchedule`` and ``NoExecute``; ``PreferNoSchedule`` never blocks).
    """
    tols = tuple(tolerations)
    for t in taints:
        if t.effect in effects and not any(tol.tolerates(t) for tol in tols):
            return t
    return None


def node_matches_pod_node_affinity(pod: Pod, node: Node) -> bool:
    """True when ``node`` satisfies ``pod``'s ``nodeSelector`` and required node affinity.

    ``nodeSelector``: every pair must be a node label. Required affinity: ``None`` means no
    constraint; otherwise the terms are ORed and an empty list matches nothing
    (``nodeaffinity.GetRequiredNodeAffinity(pod).Match``).
    """
    labels = node.labels
    for k, v in pod.node_selector.items():
        if labels.get(k) != v:
            return False
    terms = pod.required_node_affinity
    if terms is None:
        return True
    return any(t.matches(node.name, labels) for t in terms)


def _fmt_taint(t: Taint) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


class _Reasons:
    """Interns reason strings into codes (1, 2, …) for ``filter_nodes`` results."""

    def __init__(self, fixed: Iterable[str] = ()) -> None:
        self.reasons: list[str] = list(fixed)
        self._code = {r: i + 1 for i, r in enumerate(self.reasons)}

    def code(self, reason: str) -> int:
        c = self._code.get(reason)
        if c is None:
            self.reasons.append(reason)
            c = self._code[reason] = len(self.reasons)
        return c


def _no_fail(nodes: Positions) -> tuple[Codes, tuple[str, ...]]:
    return np.zeros(len(nodes), dtype=np.int16), ()


def _label_positions(state: ClusterState, key: str) -> dict[str, Positions]:
    """Label value → positions of the nodes carrying label ``key`` with that value (memoized)."""

    def compute() -> dict[str, Positions]:
        out: dict[str, list[int]] = {}
        for ns in state.nodes.values():
            v = ns.node.labels.get(key)
            if v is not None:
                out.setdefault(v, []).append(ns.position)
        return {v: np.array(p, dtype=np.intp) for v, p in out.items()}

    return state.static(("label-positions", key), compute)


def _all_rows(state: ClusterState) -> Positions:
    """Every row of the state's node table, in order."""
    return state.static(("all-rows",), lambda: np.arange(len(state.names), dtype=np.intp))


def _taint_groups(state: ClusterState) -> dict[tuple[Taint, ...], list[int]]:
    """Table rows grouped by the node's taints (memoized per state)."""

    def groups() -> dict[tuple[Taint, ...], list[int]]:
        out: dict[tuple[Taint, ...], list[int]] = {}
        for ns in state.nodes.values():
            out.setdefault(ns.node.taints, []).append(ns.position)
        return out

    return state.static(("taint-groups",), groups)


def _taint_codes(pod: Pod, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
    """``TaintToleration``'s codes and reasons for every table node (the first untolerated
    ``NoSchedule``/``NoExecute`` taint of each), memoized per set of tolerations."""

    def compute() -> tuple[Codes, tuple[str, ...]]:
        codes = np.zeros(len(state.names), dtype=np.int16)
        interned = _Reasons()
        for taints, positions in _taint_groups(state).items():
            t = untolerated_taint(taints, pod.tolerations)
            if t is not None:
                codes[positions] = interned.code(f"untolerated taint {_fmt_taint(t)}")
        return codes, tuple(interned.reasons)

    return state.static(("TaintToleration", pod.tolerations), compute)


def _affinity_codes(pod: Pod, state: ClusterState) -> Codes:
    """``NodeAffinity``'s code for every table node (0 matches, 1 not:
    :func:`node_matches_pod_node_affinity`), memoized per distinct node selector and required
    affinity; ``nodeSelector`` pairs through the label index."""
    key = ("NodeAffinity", tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)

    def compute() -> Codes:
        ok = np.ones(len(state.names), dtype=np.bool_)
        for k, v in pod.node_selector.items():
            match = np.zeros(len(state.names), dtype=np.bool_)
            match[_label_positions(state, k).get(v, np.zeros(0, dtype=np.intp))] = True
            ok &= match
        terms = pod.required_node_affinity
        if terms is not None:
            names = state.names
            for i in np.flatnonzero(ok).tolist():
                node = state.nodes[names[i]].node
                ok[i] = any(t.matches(node.name, node.labels) for t in terms)
        return np.where(ok, 0, 1).astype(np.int16)

    return state.static(key, compute)


def _namespace_labels(state: ClusterState) -> Mapping[str, Mapping[str, str]] | None:
    """The namespaces' labels (``None`` when the snapshot lists no Namespace), computed once."""
    return state.static("namespace-labels", lambda: state.snapshot.namespace_labels)


def _domain_ids(state: ClusterState, key: str) -> tuple[npt.NDArray[np.intp], list[str]]:
    """Per node, the id of its value of label ``key`` (-1 without it), and the values by id."""

    def compute() -> tuple[npt.NDArray[np.intp], list[str]]:
        ids = np.full(len(state.names), -1, dtype=np.intp)
        values: list[str] = []
        for v, positions in _label_positions(state, key).items():
            ids[positions] = len(values)
            values.append(v)
        return ids, values

    return state.static(("domain-ids", key), compute)
