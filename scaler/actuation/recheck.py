"""Re-check, on fresh state, that a tainted node can still go (CA ``deleteNodesAsync``).

Between tainting and draining the cluster moves on: pods are created, PDBs change, usage shifts.
Before evicting anything the actuator asks again the question the evaluation asked, on a fresh
snapshot: the drain rules with a fresh PDB view, then the move of the node's pods through the
same filters, scorers and usage accounting, the other nodes being deleted excluded as
destinations. A refusal is worded as the evaluation words it. An "empty" node that gained
movable pods is not emptied.

**The plan first.** Given the evaluation's planned moves, the re-check first validates them on
the fresh state (:func:`scaler.simulator.cluster.validate_node_removal`, as Karpenter validates a
disruption command before acting: ``kubernetes-sigs/karpenter``,
``pkg/controllers/disruption/validation.go``): the same drain rules and loads, then each pod,
in placement order, through every filter on its planned destination, whose usage alone is
computed. When the plan holds, that placement is the proof the node can go; when it does not
(a pod appeared or left, a destination is gone or refuses now), the node is checked in full
(:func:`scaler.simulator.cluster.simulate_node_removal` over every other node), as without a
plan. Either way no pod is evicted unless every pod to move has a destination that passes
every filter on the fresh state.

The node's own usage is not judged again against the threshold (CA's recheck does not either),
with one exception: a node whose usage has become unknown although its metrics are fresh (its
NodeMetrics far below the sum of its pods' PodMetrics, or a new pod of unknown usage:
:attr:`~scaler.utilization.NodeUtilization.usage_unknown`) is refused as ``MetricsUnavailable``,
as the evaluation refuses it. A node can be chosen while its new pods are not yet in the
metrics (they count by their requests) and be found busy by their PodMetrics a scan later.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from scaler.config import ScalerConfig
from scaler.model.records import Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import UnremovableReason
from scaler.simulator.cache import EvaluationCache
from scaler.simulator.cluster import (
    NodeRemoval,
    RemovalContext,
    simulate_node_removal,
    validate_node_removal,
)
from scaler.simulator.registry import load_filters, load_scorers
from scaler.simulator.removal import Tier
from scaler.simulator.state import FilterPlugin, ScorePlugin

__all__ = ["RecheckResult", "recheck"]


@dataclass(frozen=True, slots=True)
class RecheckResult:
    """``reason`` is ``""`` when the node may be drained and deleted; ``pods`` are the pods to
    evict and ``daemonset_pods`` the DaemonSet pods on the node."""

    reason: str
    pods: tuple[Pod, ...] = ()
    daemonset_pods: tuple[Pod, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing stands in the way."""
        return not self.reason


def recheck(
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    node_name: str,
    *,
    expect_empty: bool,
    excluded: Collection[str] = (),
    filters: Sequence[FilterPlugin] | None = None,
    scorers: Sequence[ScorePlugin] | None = None,
    cache: EvaluationCache | None = None,
    plan: Sequence[tuple[Pod, str]] | None = None,
) -> RecheckResult:
    """Decide again whether ``node_name`` can be removed, on ``snapshot``.

    Args:
        snapshot: fresh cluster state.
        config: the controller's configuration.
        node_name: the tainted node.
        expect_empty: the plan said the node was empty; any movable pod now aborts.
        excluded: other nodes being deleted (never destinations).
        filters, scorers: the plugins the evaluation uses (``None`` loads them from ``config``).
        cache: what the previous re-checks kept (:mod:`scaler.simulator.cache`: per-node
            facts, the simulation state's rows); the answer is the same without. One re-check
            at a time per cache.
        plan: the evaluation's moves of the node's pods (pod, destination), validated first
            (see the module doc); ``None``: the node is checked in full.

    Returns:
        A :class:`RecheckResult`; a refusal reads ``"<UnremovableReason>: <detail>"`` with the
        evaluation's own detail (e.g. ``"BlockedByPod: pod default/web-0: NotEnoughPdb"``).

    Raises:
        scaler.simulator.registry.PluginError: ``filters``/``scorers`` are ``None`` and a
            configured plugin cannot be loaded.
    """
    if snapshot.node_by_name.get(node_name) is None:
        return RecheckResult("node no longer exists")
    if node_name in snapshot.unreadable:
        return RecheckResult(f"{UnremovableReason.UnreadableObject.value}: {snapshot.unreadable[node_name]}")
    filters = load_filters(config) if filters is None else filters
    scorers = load_scorers(config) if scorers is None else scorers
    removal: NodeRemoval | None = None
    ctx: RemovalContext | None = None
    if plan is not None:
        only = {node_name, *(dest for _, dest in plan)}
        ctx = RemovalContext(snapshot, config, filters, scorers, cache, only=only)
        refused = _unknown_usage(ctx, node_name)
        if refused is not None:
            return refused
        _exclude(ctx, node_name, excluded)
        removal = validate_node_removal(ctx, node_name, plan, {*excluded, *snapshot.unreadable})
    if removal is None:
        ctx = RemovalContext(snapshot, config, filters, scorers, cache)
        refused = _unknown_usage(ctx, node_name)
        if refused is not None:
            return refused
        _exclude(ctx, node_name, excluded)
        destinations = [
            n.name
            for n in snapshot.nodes
            if n.name != node_name and n.name not in excluded and n.name not in snapshot.unreadable
        ]
        removal = simulate_node_removal(ctx, node_name, [Tier.of(ctx.state, destinations)], commit=False)
    if not removal.removable:
        return RecheckResult(f"{removal.reason.value}: {removal.detail}")
    if expect_empty and removal.pods:
        return RecheckResult(f"node is not empty: {len(removal.pods)} pod(s) to move appeared")
    return RecheckResult("", removal.pods, removal.daemonset_pods)


def _unknown_usage(ctx: RemovalContext, node_name: str) -> RecheckResult | None:
    """The refusal of a node whose usage became unknown although its metrics are fresh, as
    eligibility judges it (:mod:`scaler.eligibility`: GPU nodes and requests mode aside)."""
    util = ctx.utils.get(node_name)
    if util is not None and util.value is None and util.usage_unknown and util.gpu is None:
        return RecheckResult(f"{UnremovableReason.MetricsUnavailable.value}: {util.usage_unknown}")
    return None


def _exclude(ctx: RemovalContext, node_name: str, excluded: Collection[str]) -> None:
    """Mark the other nodes being deleted removed in ``ctx``: never destinations."""
    for name in excluded:
        if name in ctx.state.nodes and name != node_name:
            ctx.state.set_flags(name, removed=True)
