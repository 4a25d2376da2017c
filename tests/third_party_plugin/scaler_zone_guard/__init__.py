"""``ProtectedNodes``: a Filter plugin written as a third party writes one.

Nodes labelled ``example.com/protected=true`` (a node pool kept for a latency-sensitive tenant,
say) never receive pods moved by a scale-down simulation. Everything it needs comes from
:mod:`scaler.plugin_api`.
"""

from __future__ import annotations

from scaler.plugin_api import ClusterState, NodeState, Pod, ScalerConfig

__all__ = ["PROTECTED_LABEL", "ProtectedNodes"]

PROTECTED_LABEL = "example.com/protected"


class ProtectedNodes:
    """Filter: refuse any destination whose label ``example.com/protected`` is ``"true"``."""

    name = "ProtectedNodes"

    def __init__(self, config: ScalerConfig) -> None:
        """Keep ``config`` (this plugin has no settings)."""
        self.config = config

    def filter(self, pod: Pod, node: NodeState, state: ClusterState) -> str | None:
        """``None`` for an unprotected node, else the reason ``"node is protected"``."""
        if node.node.labels.get(PROTECTED_LABEL) == "true":
            return "node is protected"
        return None
