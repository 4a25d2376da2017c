"""The built-in Filter plugins that read other pods: ``InterPodAffinity`` and
``PodTopologySpread`` (kube-scheduler's plugins of the same names; see
:mod:`scaler.simulator.filters` for the others and what every filter keeps).

Both count pods by selector. The pods a selector can match are counted once per simulation
state, per node, and followed through every move and revert (:mod:`scaler.simulator.pod_counts`;
the anti-affinity terms of the pods in the state by :meth:`ClusterState.holders`), so a call
for every node at once (``filter_nodes``) costs a pass over the nodes in NumPy, not a scan of
their pods. ``filter`` judges one node with the same counts (``PodTopologySpread``) or by
reading the pods of the node's domains (``InterPodAffinity``); both give, node by node, the
same verdict and reason (``tests/test_spread_vector.py``, ``tests/test_filters.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping

import numpy as np
import numpy.typing as npt

from scaler.model.records import (
    TAINT_TO_BE_DELETED,
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinityTerm,
    Taint,
    TopologySpreadConstraint,
)
from scaler.simulator.filter_base import (
    BaseFilter,
    _affinity_codes,
    _domain_ids,
    _label_positions,
    _namespace_labels,
    _no_fail,
    _Reasons,
    _taint_codes,
    node_matches_pod_node_affinity,
    untolerated_taint,
)
from scaler.simulator.pod_counts import PodCounts, first_pair, pod_counts, selector_key
from scaler.simulator.state import ClusterState, Codes, Mask, NodeState, Positions

__all__ = ["InterPodAffinity", "PodTopologySpread"]

# ---- InterPodAffinity -------------------------------------------------------------------------


def _matches_all_terms(
    terms: tuple[PodAffinityTerm, ...],
    owner_namespace: str,
    pod: Pod,
    namespace_labels: Mapping[str, Mapping[str, str]] | None,
) -> bool:
    """``podMatchesAllAffinityTerms``: ``pod`` is selected by every (affinity) term (false for
    no terms); a namespace selector with unknown namespace labels selects nothing."""
    return bool(terms) and all(
        t.selects(owner_namespace, pod, namespace_labels, unknown=False) for t in terms
    )


class InterPodAffinity(BaseFilter):
    """kube-scheduler ``InterPodAffinity`` (``interpodaffinity/filtering.go``), required terms only.

    Three checks, on pods of live, non-ghost nodes (the incoming pod itself, by UID, excluded):

    1. existing pods' anti-affinity (symmetry): a pod P with a term T that selects the incoming
       pod, on a node whose ``T.topologyKey`` value equals the candidate's, rejects the candidate;
    2. the incoming pod's anti-affinity: for each term whose topology key the candidate carries,
       no pod in the candidate's domain may be selected by the term (nodes without the label pass);
    3. the incoming pod's affinity: the candidate must carry every term's topology key and, for
       each term, its domain must hold a pod matching *all* the terms (the scheduler counts only
       pods that match every term). Special case, as in the scheduler: if no such pod exists
       anywhere (on a node carrying any of the keys) and the incoming pod matches all its own
       terms, the first pod of a self-affine group may go anywhere that has the keys.

    Pods are looked up at each call through the state's indexes (topology domains, pods by
    label), which follow every simulated move. A term's ``namespaceSelector`` is matched against
    the labels of the snapshot's Namespaces (:meth:`PodAffinityTerm.selects`); when the snapshot
    lists none, a selector is taken to select every namespace for anti-affinity and none for
    affinity, the side that refuses more destinations.
    """

    name = "InterPodAffinity"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when placing the pod on the node breaks no required (anti-)affinity."""
        labels = node.node.labels
        ns_labels = _namespace_labels(state)
        # 1. Existing pods' required anti-affinity towards the incoming pod: only pods on nodes
        # of the candidate's domain, for each topology key any anti-affinity term uses.
        holders = state.anti_affinity_pods  # nodes holding a pod with anti-affinity terms
        for key in state.anti_affinity_keys:
            v = labels.get(key)
            if v is None:
                continue
            for name in state.domains(key).get(v, ()):
                if name not in holders:
                    continue
                other = state.nodes[name]
                if other.removed or other.ghost:
                    continue
                for p in other.pods:
                    if not p.required_anti_affinity or p.uid == pod.uid:
                        continue
                    for t in p.required_anti_affinity:
                        if t.topology_key == key and t.selects(p.namespace, pod, ns_labels):
                            return "node didn't satisfy existing pods anti-affinity rules"
        # 2. The incoming pod's required anti-affinity.
        for t in pod.required_anti_affinity:
            v = labels.get(t.topology_key)
            if v is None:
                continue
            for p in state.pods_in_domain(t.topology_key, v):
                if p.uid != pod.uid and t.selects(pod.namespace, p, ns_labels):
                    return "node didn't match pod anti-affinity rules"
        # 3. The incoming pod's required affinity.
        terms = pod.required_affinity
        if terms:
            for t in terms:
                if t.topology_key not in labels:
                    return f"node didn't match pod affinity rules (no label {t.topology_key})"
            satisfied = all(
                any(
                    p.uid != pod.uid and _matches_all_terms(terms, pod.namespace, p, ns_labels)
                    for p in state.pods_in_domain(t.topology_key, labels[t.topology_key])
                )
                for t in terms
            )
            if not satisfied:
                if _matches_all_terms(terms, pod.namespace, pod, ns_labels) and not self._any_affinity_match(
                    pod, state
                ):
                    return None
                return "node didn't match pod affinity rules"
        return None

    @staticmethod
    def _any_affinity_match(pod: Pod, state: ClusterState) -> bool:
        """True when the scheduler's ``affinityCounts`` would be non-empty: some pod matching all
        of ``pod``'s affinity terms sits on a live, non-ghost node carrying one of their keys."""
        terms = pod.required_affinity
        keys = {t.topology_key for t in terms}
        ns_labels = _namespace_labels(state)
        for other in state.nodes.values():
            if other.removed or other.ghost or not any(k in other.node.labels for k in keys):
                continue
            for p in other.pods:
                if p.uid != pod.uid and _matches_all_terms(terms, pod.namespace, p, ns_labels):
                    return True
        return False

    _REASONS = (
        "node didn't satisfy existing pods anti-affinity rules",
        "node didn't match pod anti-affinity rules",
        "node didn't match pod affinity rules",
    )

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes``, all at once: the domains
        each check refuses are found from the pods counted per node (followed through moves),
        then each node's code is a lookup of its domain. A node's code is that of the first
        failing check in :meth:`filter`'s order."""
        if not (pod.required_affinity or pod.required_anti_affinity) and not _selecting_holders(pod, state):
            return _no_fail(nodes)
        codes, reasons = self._codes(pod, state)
        return codes[nodes], reasons

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask | bool:
        """Per table row, whether :meth:`filter` passes ``pod`` there (``True``: everywhere)."""
        if not (pod.required_affinity or pod.required_anti_affinity) and not _selecting_holders(pod, state):
            return True
        passes: Mask = self._codes(pod, state)[0] == 0
        return passes

    def _codes(self, pod: Pod, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """Every table row's code (0 fits) and the reasons."""
        t = state.table
        live = ~(t.ghost | t.removed)
        codes = np.zeros(len(state.names), dtype=np.int16)
        reasons = _Reasons(self._REASONS)
        ns_labels = _namespace_labels(state)
        # Assigned from the last check to the first, so that the first failing check wins.
        terms = pod.required_affinity
        if terms:
            self._affinity_codes(pod, terms, state, live, codes, reasons)
        for term in pod.required_anti_affinity:
            counter = _term_counts(state, pod.namespace, term, ns_labels)
            if counter is not None:
                refused = _domains_holding(
                    state, term.topology_key, counter.without_uid(state, pod.uid), live
                )
                codes[refused] = 2
        for key, domains in _refused_by_holders(pod, state, ns_labels).items():
            positions = _label_positions(state, key)
            for value in domains:
                rows = positions.get(value)
                if rows is not None:
                    codes[rows] = 1
        return codes, tuple(reasons.reasons)

    @staticmethod
    def _affinity_codes(
        pod: Pod,
        terms: tuple[PodAffinityTerm, ...],
        state: ClusterState,
        live: Mask,
        codes: Codes,
        reasons: _Reasons,
    ) -> None:
        """Check 3 into ``codes``: a missing topology key (the first term's that the node lacks),
        else no pod matching every term in one of the node's domains (unless no such pod is on
        any live node carrying a key and the pod matches all its terms itself)."""
        counter = _all_terms_counts(state, pod.namespace, terms, _namespace_labels(state))
        per_node = (
            counter.without_uid(state, pod.uid) if counter is not None else np.zeros(len(codes), np.int64)
        )
        held = np.where(live, per_node, 0)
        satisfied = np.ones(len(codes), dtype=np.bool_)
        has_any_key = np.zeros(len(codes), dtype=np.bool_)
        for term in terms:
            ids, values = _domain_ids(state, term.topology_key)
            has = ids >= 0
            has_any_key |= has
            in_domain = np.bincount(ids[has], weights=held[has], minlength=len(values)) > 0
            satisfied &= has & in_domain[np.where(has, ids, 0)] if len(values) else np.zeros_like(has)
        if not satisfied.all():
            exempt = _matches_all_terms(terms, pod.namespace, pod, _namespace_labels(state)) and not bool(
                np.any(has_any_key & (held > 0))
            )
            if not exempt:
                codes[~satisfied] = 3
        for term in reversed(terms):  # the first term whose key a node lacks names it
            lacks = _domain_ids(state, term.topology_key)[0] < 0
            if lacks.any():
                codes[lacks] = reasons.code(
                    f"node didn't match pod affinity rules (no label {term.topology_key})"
                )


def _rows_with(state: ClusterState, keys: tuple[str, ...]) -> Mask:
    """Per table row, whether the node carries every label of ``keys``."""
    ok = np.ones(len(state.names), dtype=np.bool_)
    for k in keys:
        ok &= _domain_ids(state, k)[0] >= 0
    return ok


def _selecting_holders(pod: Pod, state: ClusterState) -> bool:
    """Whether some pod in the state holds an anti-affinity term that may select ``pod``."""
    return next(state.holders(pod), None) is not None


def _refused_by_holders(
    pod: Pod, state: ClusterState, ns_labels: Mapping[str, Mapping[str, str]] | None
) -> dict[str, set[str]]:
    """Check 1: topology key → the domains (label values) where a pod on a live, non-ghost node
    holds a required anti-affinity term selecting ``pod``."""
    refusing: dict[str, set[str]] = {}
    nodes = state.nodes
    for holder, term, name in state.holders(pod):
        ns = nodes[name]
        if ns.removed or ns.ghost or holder.uid == pod.uid:
            continue
        key = term.topology_key
        domain = ns.node.labels.get(key)
        if domain is not None and term.selects(holder.namespace, pod, ns_labels):
            refusing.setdefault(key, set()).add(domain)
    return refusing


def _domains_holding(
    state: ClusterState, key: str, per_node: npt.NDArray[np.int64], live: Mask
) -> npt.NDArray[np.bool_]:
    """Per table row: whether the row's domain of ``key`` holds a counted pod on a live node."""
    ids, values = _domain_ids(state, key)
    has = ids >= 0
    if not len(values):
        return np.zeros(len(ids), dtype=np.bool_)
    if state.static(("one-node-domains", key), lambda: len(values) == int(np.count_nonzero(has))):
        return has & live & (per_node > 0)  # each domain is one node (e.g. the hostname)
    held = np.bincount(ids[has & live], weights=per_node[has & live], minlength=len(values)) > 0
    return has & held[np.where(has, ids, 0)]


def _term_counts(
    state: ClusterState,
    namespace: str,
    term: PodAffinityTerm,
    ns_labels: Mapping[str, Mapping[str, str]] | None,
) -> PodCounts | None:
    """Per table row, the pods ``term`` (an anti-affinity term of a pod of ``namespace``)
    selects; ``None`` for a term that selects nothing."""
    selector = term.label_selector
    if selector is None:
        return None

    def selected(p: Pod) -> bool:
        return term.selects(namespace, p, ns_labels)

    key = ("anti-affinity", namespace, _term_key(term))
    return pod_counts(state, key, selected, first_pair(selector), _term_namespaces(term, namespace))


def _all_terms_counts(
    state: ClusterState,
    namespace: str,
    terms: tuple[PodAffinityTerm, ...],
    ns_labels: Mapping[str, Mapping[str, str]] | None,
) -> PodCounts | None:
    """Per table row, the pods every one of ``terms`` (affinity terms of a pod of
    ``namespace``) selects; ``None`` when a term selects nothing."""
    if any(t.label_selector is None for t in terms):
        return None

    def selected(p: Pod) -> bool:
        return _matches_all_terms(terms, namespace, p, ns_labels)

    key = ("affinity", namespace, tuple(_term_key(t) for t in terms))
    first = terms[0]
    return pod_counts(
        state, key, selected, first_pair(first.label_selector), _term_namespaces(first, namespace)
    )


def _term_key(term: PodAffinityTerm) -> Hashable:
    return (
        selector_key(term.label_selector),
        term.topology_key,
        term.namespaces,
        term.all_namespaces,
        selector_key(term.namespace_selector),
    )


def _term_namespaces(term: PodAffinityTerm, owner: str) -> tuple[str, ...] | None:
    """The namespaces whose pods ``term`` may select (``None``: any)."""
    if term.all_namespaces or term.namespace_selector is not None:
        return None
    return term.namespaces or (owner,)


# ---- PodTopologySpread ------------------------------------------------------------------------


def _spread_selector(c: TopologySpreadConstraint, pod: Pod) -> LabelSelector | None:
    """The constraint's selector with ``matchLabelKeys`` merged in as ``key In (pod's value)``
    requirements (keys the pod lacks are skipped). ``None`` selects nothing, except that, as in
    ``mergeLabelSetWithSelector``, a null selector plus match-label keys becomes those keys."""
    extra = tuple(
        LabelSelectorRequirement(k, "In", (pod.labels[k],)) for k in c.match_label_keys if k in pod.labels
    )
    if not extra:
        return c.label_selector
    if c.label_selector is None:
        return LabelSelector({}, extra)
    return LabelSelector(c.label_selector.match_labels, c.label_selector.match_expressions + extra)


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    return selector is not None and selector.matches(labels)


def _spread_counts(state: ClusterState, namespace: str, selector: LabelSelector | None) -> PodCounts:
    """Per table row, the pods of ``namespace`` that ``selector`` matches and that are not
    terminating (``PodTopologySpread`` counts them), followed through moves."""

    def counted(p: Pod) -> bool:
        return (
            selector is not None
            and p.namespace == namespace
            and p.deletion_ts is None
            and selector.matches(p.labels)
        )

    key = ("spread", namespace, selector_key(selector))
    return pod_counts(state, key, counted, first_pair(selector), (namespace,))


def _hard_constraints(pod: Pod) -> list[TopologySpreadConstraint]:
    """The pod's ``whenUnsatisfiable: DoNotSchedule`` constraints, in order."""
    return [c for c in pod.topology_spread if c.when_unsatisfiable == "DoNotSchedule"]


def _missing_label(c: TopologySpreadConstraint) -> str:
    return f"node didn't match pod topology spread constraints (missing label {c.topology_key})"


def _too_skewed(c: TopologySpreadConstraint) -> str:
    return f"node didn't match pod topology spread constraints ({c.topology_key}, maxSkew {c.max_skew})"


class PodTopologySpread(BaseFilter):
    """kube-scheduler ``PodTopologySpread`` (``podtopologyspread/filtering.go``, ``common.go``).

    Only constraints with ``whenUnsatisfiable: DoNotSchedule`` filter. For each of them:

    * eligible nodes carry the topology keys of *all* those constraints, are not removed, and —
      per the node inclusion policies — match the pod's node selector/affinity
      (``nodeAffinityPolicy: Honor``, the default) and have no untolerated
      ``NoSchedule``/``NoExecute`` taint (``nodeTaintsPolicy: Honor``; default ``Ignore``);
    * the ghost stays an eligible domain with zero pods (CA's "tainted ghost",
      ``simulator/cluster.go``): under ``nodeTaintsPolicy: Honor`` it is treated as carrying
      ``ToBeDeletedByClusterAutoscaler:NoSchedule``, as CA's ghost copy does;
    * per domain, count pods in the pod's namespace matched by the selector (``matchLabelKeys``
      merged in), terminating pods excluded;
    * ``skew = count(candidate's domain) + (1 if the pod matches its own selector) − min``, where
      ``min`` is the smallest count over eligible domains, or 0 when there are fewer domains than
      ``minDomains`` (default 1); reject when ``skew > maxSkew``.

    A candidate lacking a constraint's topology key is rejected.
    """

    name = "PodTopologySpread"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when placing the pod keeps every hard spread constraint's skew.

        The missing-label check runs over all constraints first, then the skew checks in
        constraint order; the first failure is returned. Counts come from :meth:`_skew_base`,
        shared with :meth:`filter_nodes`."""
        constraints = _hard_constraints(pod)
        if not constraints:
            return None
        labels = node.node.labels
        for c in constraints:
            if c.topology_key not in labels:
                return _missing_label(c)
        keys = tuple(c.topology_key for c in constraints)
        for c in constraints:
            ids, values, counts, offset = self._skew_base(c, pod, keys, state)
            if node.position >= 0:
                here = int(ids[node.position])
            else:
                value = labels[c.topology_key]
                here = values.index(value) if value in values else -1
            skew = (int(counts[here]) if here >= 0 else 0) + offset
            if skew > c.max_skew:
                return _too_skewed(c)
        return None

    def filter_nodes(self, pod: Pod, nodes: Positions, state: ClusterState) -> tuple[Codes, tuple[str, ...]]:
        """:meth:`filter` for the nodes at table positions ``nodes``, all at once: per hard
        constraint the matching-pod counts per domain are computed once (:meth:`_skew_base`),
        then each node's skew is an array lookup. A node's code is that of the first failing
        check in :meth:`filter`'s order (missing labels over all constraints, then skews)."""
        constraints = _hard_constraints(pod)
        if not constraints:
            return _no_fail(nodes)
        reasons = _Reasons()
        codes = np.zeros(len(nodes), dtype=np.int16)
        for c in constraints:
            missing = (codes == 0) & (_domain_ids(state, c.topology_key)[0][nodes] < 0)
            if missing.any():
                codes[missing] = reasons.code(_missing_label(c))
        keys = tuple(c.topology_key for c in constraints)
        for c in constraints:
            open_ = codes == 0
            if not open_.any():
                break
            ids, _, counts, offset = self._skew_base(c, pod, keys, state)
            here = ids[nodes[open_]]  # every open node carries the key: ids >= 0
            skewed = counts[here] + offset > c.max_skew
            if skewed.any():
                codes[np.flatnonzero(open_)[skewed]] = reasons.code(_too_skewed(c))
        return codes, tuple(reasons.reasons)

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask | bool:
        """Per table row, whether :meth:`filter` passes ``pod`` there (``True``: everywhere)."""
        constraints = _hard_constraints(pod)
        if not constraints:
            return True
        keys = tuple(c.topology_key for c in constraints)
        passes = state.static(("PodTopologySpread.keys", keys), lambda: _rows_with(state, keys))
        for c in constraints:
            passes = passes & self._skew_mask(c, pod, keys, state)
        return passes

    def _skew_mask(
        self, c: TopologySpreadConstraint, pod: Pod, keys: tuple[str, ...], state: ClusterState
    ) -> Mask:
        """Per table row, whether the row's skew for ``c`` stays within ``maxSkew`` (rows
        without the key: ``False``); kept with the counts while they and the offset are the same."""
        ids, _, counts, offset, masks = self._skew(c, pod, keys, state)
        mask = masks.get((offset, c.max_skew)) if masks is not None else None
        if mask is None:
            within = counts + offset <= c.max_skew
            has = ids >= 0
            mask = has & within[np.where(has, ids, 0)] if len(within) else np.zeros(len(ids), dtype=np.bool_)
            if masks is not None:
                masks[(offset, c.max_skew)] = mask
        return mask

    def _skew_base(
        self, c: TopologySpreadConstraint, pod: Pod, keys: tuple[str, ...], state: ClusterState
    ) -> tuple[npt.NDArray[np.intp], list[str], npt.NDArray[np.intp], int]:
        """What the skew of ``c`` on any candidate node depends on (the pod and the state, not
        the candidate): per node its domain id (-1 without the key) and the values by id (as
        :func:`_domain_ids`), the matching pods per domain id (pods in the pod's namespace
        selected by ``c``'s selector, on eligible non-ghost nodes, neither terminating nor the
        pod itself), and ``offset`` = (1 if the pod matches its own selector) − the global
        minimum, so that a node's skew is ``counts[id] + offset`` (``offset`` alone for a value
        no table node carries)."""
        return self._skew(c, pod, keys, state)[:4]

    def _skew(
        self, c: TopologySpreadConstraint, pod: Pod, keys: tuple[str, ...], state: ClusterState
    ) -> tuple[
        npt.NDArray[np.intp], list[str], npt.NDArray[np.intp], int, dict[tuple[int, int], Mask] | None
    ]:
        """:meth:`_skew_base`, and the masks kept with its counts (``None`` when the counts are
        the pod's own, not kept). The matching pods are counted per node once per state and
        followed through moves (:func:`_spread_counts`); the per-domain sums are kept until they
        or the nodes' flags change."""
        selector = _spread_selector(c, pod)
        eligible, domains = self._eligible(c, pod, keys, state)
        ids, values = _domain_ids(state, c.topology_key)
        counter = _spread_counts(state, pod.namespace, selector)
        per_node = counter.without_uid(state, pod.uid)
        memo_key = (
            "PodTopologySpread.counts",
            id(eligible),
            c.topology_key,
            pod.namespace,
            selector_key(selector),
        )
        memo: dict[Hashable, tuple[int, npt.NDArray[np.intp], dict[tuple[int, int], Mask]]] = state.per_flags(
            ("PodTopologySpread.memo",), dict
        )
        kept = memo.get(memo_key) if per_node is counter.counts else None
        masks: dict[tuple[int, int], Mask] | None
        if kept is not None and kept[0] == counter.revision:
            _, counts, masks = kept
        else:
            m = eligible & ~state.table.ghost
            counts = np.bincount(ids[m], weights=per_node[m], minlength=len(values)).astype(np.intp)
            masks = None
            if per_node is counter.counts:
                masks = {}
                memo[memo_key] = (counter.revision, counts, masks)
        min_domains = c.min_domains if c.min_domains is not None else 1
        # The smallest count over eligible domains; 0 with fewer domains than minDomains.
        global_min = 0 if len(domains) < max(min_domains, 1) else int(counts[domains].min())
        self_match = 1 if _selects(selector, pod.labels) else 0
        return ids, values, counts, self_match - global_min, masks

    def _eligible(
        self, c: TopologySpreadConstraint, pod: Pod, keys: tuple[str, ...], state: ClusterState
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
        """Which nodes count for ``c`` (carry every key, not removed, pass the inclusion
        policies; the ghost with its ``ToBeDeleted`` taint), and the ids of the domains they
        form (sorted, distinct). Depends on the pod only through its node affinity and
        tolerations, and on the state only through the ghost/removed flags: memoized per flag
        change."""
        honor_affinity = c.node_affinity_policy == "Honor"
        honor_taints = c.node_taints_policy == "Honor"
        key = (
            "PodTopologySpread",
            c.topology_key,
            keys,
            (tuple(sorted(pod.node_selector.items())), pod.required_node_affinity)
            if honor_affinity
            else None,
            pod.tolerations if honor_taints else None,
        )

        def static() -> npt.NDArray[np.bool_]:
            ok = np.ones(len(state.names), dtype=np.bool_)
            for k in keys:
                ok &= _domain_ids(state, k)[0] >= 0
            if honor_affinity:  # shared with NodeAffinity's verdicts for the same pod
                ok &= _affinity_codes(pod, state) == 0
            if honor_taints:  # shared with TaintToleration's verdicts for the same pod
                ok &= _taint_codes(pod, state)[0] == 0
            return ok

        def current() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.intp]]:
            ok = state.static(key, static) & ~state.table.removed
            for i in np.flatnonzero(state.table.ghost).tolist():
                if ok[i]:
                    ok[i] = self._included(c, pod, state.nodes[state.names[i]])
            ids, values = _domain_ids(state, c.topology_key)
            present = np.zeros(len(values), dtype=np.bool_)
            present[ids[ok]] = True  # every eligible node carries the key: ids >= 0
            return ok, np.flatnonzero(present)  # the distinct ids, sorted (np.unique sorts: slower)

        return state.per_flags(key, current)

    @staticmethod
    def _included(c: TopologySpreadConstraint, pod: Pod, ns: NodeState) -> bool:
        """``matchNodeInclusionPolicies`` for one node."""
        if c.node_affinity_policy == "Honor" and not node_matches_pod_node_affinity(pod, ns.node):
            return False
        if c.node_taints_policy == "Honor":
            taints: tuple[Taint, ...] = ns.node.taints
            if ns.ghost:
                taints = (*taints, Taint(TAINT_TO_BE_DELETED, "", "NoSchedule"))
            if untolerated_taint(taints, pod.tolerations) is not None:
                return False
        return True
