"""What the controller needs of an actuator: the seam between deciding and acting.

CA's ``core/scaledown`` splits the two the same way (its ``Planner`` and ``Actuator``
interfaces). The live :class:`scaler.actuation.actuator.Actuator` satisfies :class:`Actuation`;
the replay drives that same class with an in-place dispatcher and replay time
(:mod:`scaler.replay.actuation`), so a what-if run acts through exactly the live code.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scaler.actuation.actuator import NodeOutcome
    from scaler.model.records import Node
    from scaler.planner import ScaleDownPlan
    from scaler.relief import NodeRelief, ReliefPlan

__all__ = ["Actuation"]


class Actuation(Protocol):
    """The members of an actuator the controller uses, and nothing else.

    ``start`` taints a plan's nodes and starts their removal (returns the synchronous failures),
    ``relieve`` starts the reliefs of a relief plan (returns the nodes whose relief started),
    ``complete_deletion`` finishes a drained node's deletion after a restart, ``stop`` starts
    nothing more and waits up to ``timeout`` seconds. ``in_flight`` (node → node group),
    ``drains`` (nodes being drained), ``relieving`` (node → its relief) and ``rollbacks`` (node →
    the last error of its rollback) are what is under way now.
    """

    @property
    def in_flight(self) -> Mapping[str, str]: ...

    @property
    def drains(self) -> Collection[str]: ...

    @property
    def relieving(self) -> Mapping[str, NodeRelief]: ...

    @property
    def rollbacks(self) -> Mapping[str, str]: ...

    def start(self, plan: ScaleDownPlan) -> list[NodeOutcome]: ...

    def relieve(self, plan: ReliefPlan) -> list[str]: ...

    def complete_deletion(self, node: Node) -> NodeOutcome: ...

    def stop(self, timeout: float | None = None) -> None: ...
