"""The live actuator and controller, driven over a replay through their public seams only.

The replay builds the live :class:`~scaler.actuation.actuator.Actuator` with an in-place
dispatcher (each removal, rollback and relief runs to completion in the loop's thread, one node
after the other, so a replay is deterministic), waits that take no replay time, no watcher
thread, and one eviction in flight per node. After each removal and each relief the world's
scheduler places the evicted pods' replacements before the next node. Every step of a removal
(taint, re-check, drain, DaemonSet eviction, verify, delete, roll back) is the live code. The
controller itself runs unchanged, with :data:`~scaler.controller.NO_STATUS` as its status sink (a
replay writes no status ConfigMap and no node status).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from scaler.actuation.actuator import Actuator, NodeOutcome
from scaler.cloud.base import CloudProvider, ClusterWriter
from scaler.config import ScalerConfig
from scaler.model.snapshot import ClusterSnapshot
from scaler.observability import Metrics
from scaler.simulator.registry import Plugins

__all__ = ["ReplayActuation", "Scheduler"]


class Scheduler(Protocol):
    """The replayed cluster's scheduler: places every pending pod it can, now."""

    def schedule_pending(self) -> Any: ...


def _no_wait(seconds: float) -> None:
    """Replay time does not pass while a removal runs."""


class ReplayActuation:
    """Builds the replay's actuator (:meth:`build`, the controller's ``actuator_factory``) and
    keeps what the replay reports of it: every :class:`NodeOutcome` (:attr:`outcomes`) and the
    number of evictions by hot-node relief (:attr:`relief_evictions`).

    Args:
        world: the replayed cluster's scheduler (:class:`scaler.replay.world.World`).
    """

    def __init__(self, world: Scheduler) -> None:
        self.world = world
        self.outcomes: list[NodeOutcome] = []
        self.relief_evictions = 0
        self.actuator: Actuator | None = None

    def dispatch(self, kind: str, node: str, work: Callable[[], None]) -> None:
        """The replay's :class:`~scaler.actuation.actuator.Dispatcher`: run ``work`` at once;
        after a removal or a relief, let the world's scheduler place the pending pods."""
        if kind == "relieve" and self.actuator is not None:
            self.relief_evictions += len(self.actuator.relieving[node].evictions)
        work()
        if kind != "rollback":
            self.world.schedule_pending()

    def build(
        self,
        config: ScalerConfig,
        writer: ClusterWriter,
        cloud: CloudProvider,
        fresh_snapshot: Callable[[], ClusterSnapshot],
        metrics: Metrics,
        on_done: Callable[[NodeOutcome], None],
        *,
        clock: Callable[[], float],
        plugins: Plugins | None = None,
    ) -> Actuator:
        """The live :class:`Actuator` with the replay's dispatcher, no waits, no node watcher and
        one eviction at a time; its outcomes are recorded here, then passed to ``on_done``."""

        def record(outcome: NodeOutcome) -> None:
            self.outcomes.append(outcome)
            on_done(outcome)

        self.actuator = Actuator(
            config,
            writer,
            cloud,
            fresh_snapshot,
            metrics,
            record,
            clock=clock,
            eviction_parallelism=1,
            pod_poll_seconds=0.0,
            plugins=plugins,
            node_poll_seconds=0.0,  # no watcher thread: the world changes only between removals
            dispatcher=self.dispatch,
            sleep=_no_wait,
        )
        return self.actuator
