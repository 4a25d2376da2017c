"""What the metrics and the status document read of a loop's plan: a read-only view that
:class:`scaler.planner.ScaleDownPlan` satisfies, so observability sits below the planner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from scaler.reasons import NodeStatus, UnremovableReason

__all__ = ["PlanView"]


class PlanView(Protocol):
    """A loop's plan as observed: ``unneeded`` (node → Unix seconds it became unneeded),
    ``verdicts`` (node → status, reason, detail), ``cooldown`` (why deletions pause, ``""`` when
    they do not) and ``active_budgets`` (names of the disruption budgets active now)."""

    @property
    def unneeded(self) -> Mapping[str, float]: ...

    @property
    def verdicts(self) -> Mapping[str, tuple[NodeStatus, UnremovableReason, str]]: ...

    @property
    def cooldown(self) -> str: ...

    @property
    def active_budgets(self) -> tuple[str, ...]: ...
