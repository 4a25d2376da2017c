"""The ``DynamicResources`` filter: may a pod with resource claims go to a node?

kube-scheduler's ``DynamicResources`` plugin (``pkg/scheduler/framework/plugins/
dynamicresources``), which cluster-autoscaler runs in its simulations with DRA on: a claim that
is allocated must be reachable from the node (its allocation's node selector), the claims that
are not must get devices there from the structured allocator, seeing the devices taken by every
pod placed before in the simulation (:class:`~scaler.simulator.dra_state.DraState`, which the
state keeps in step with moves and reverts). Reasons are the scheduler's: ``cannot allocate
all claims``, ``resourceclaim not available on the node``, ``resourceclaim in use``; a claim
scaler cannot decide refuses every node and names the claim.

A pod without claims costs one attribute read: it passes every node.
"""

from __future__ import annotations

from scaler.model.records import Pod
from scaler.simulator.filter_base import BaseFilter, _no_fail
from scaler.simulator.state import ClusterState, Codes, Mask, NodeState, Positions

__all__ = ["DynamicResources"]


class DynamicResources(BaseFilter):
    """kube-scheduler ``DynamicResources`` (``Filter``) over the simulation's claims and devices
    (see the module doc)."""

    name = "DynamicResources"

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """Return ``None`` when the pod's claims can be used on the node, else the reason."""
        if not pod.resource_claims:
            return None
        return state.dra.fits(pod, node.node)

    def fit_mask(self, pod: Pod, state: ClusterState) -> Mask | bool | None:
        """``True`` (every row) for a pod without claims; ``None`` otherwise (node by node)."""
        return None if pod.resource_claims else True

    def filter_nodes(
        self, pod: Pod, nodes: Positions, state: ClusterState
    ) -> tuple[Codes, tuple[str, ...]] | None:
        """All nodes fit a pod without claims; a pod with claims is checked node by node."""
        if not pod.resource_claims:
            return _no_fail(nodes)
        return None
