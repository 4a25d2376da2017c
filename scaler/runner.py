"""Wire ``scaler run``: watch caches, cloud provider, writer, controller, leader election,
``/metrics`` and ``/healthz``, and graceful shutdown.

:class:`Runner` owns the parts and their threads so that tests can run several replicas in one
process against the loopback fakes; :func:`run_forever` adds signal handling for the real
process. On SIGTERM: stop the loop, start no new drain, let in-flight removals finish or roll
back (up to ``--max-graceful-termination-sec`` + 60 s), release the lease, exit.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from types import FrameType

from kubernetes.client import ApiClient

from scaler.cloud.base import CloudProvider
from scaler.config import ScalerConfig
from scaler.controller import Controller
from scaler.history.source import ProfileCache
from scaler.kube.leader import LeaderElector
from scaler.kube.writer import KubeWriter
from scaler.model.records import Node
from scaler.model.snapshot import ClusterSnapshot
from scaler.observability import HealthServer, Metrics
from scaler.sources.watch import WatchCache, snapshot_from_cache

__all__ = ["Runner", "run_forever"]

log = logging.getLogger(__name__)


class Runner:
    """One replica of ``scaler run``.

    Args:
        config: settings.
        api: Kubernetes client.
        cloud: the cloud provider (built by the caller: GKE or kubernetes).
        identity: this replica's name (Lease holder).
        dry_run: decide and report only.
        clock: Unix-seconds clock (tests pass a fake one).
        writer: the Kubernetes writer (default: one on ``api`` for ``--instance-name``).
        lease: leader-election timings ``(duration, renew deadline, retry period)`` in seconds.
        controller_factory: builds the :class:`Controller` (tests tune the actuator).
    """

    def __init__(
        self,
        config: ScalerConfig,
        api: ApiClient,
        cloud: CloudProvider,
        *,
        identity: str,
        dry_run: bool = False,
        clock: Callable[[], float] = time.time,
        writer: KubeWriter | None = None,
        lease: tuple[float, float, float] = (15.0, 10.0, 2.0),
        controller_factory: Callable[..., Controller] = Controller,
    ) -> None:
        self.config = config
        self.api = api
        self.cache = WatchCache(api)
        self.last_nodes: tuple[Node, ...] = ()
        self.profiles = ProfileCache()
        self.metrics = Metrics()
        self.writer = writer or KubeWriter(api, config.instance_name, clock=clock)
        self.stop_event = threading.Event()
        self.controller = controller_factory(
            config,
            self.snapshot,
            self.writer,
            cloud,
            self.metrics,
            dry_run=dry_run,
            identity=identity,
            clock=clock,
            source_problem=self.stale_kinds,
        )
        self.elector: LeaderElector | None = None
        if config.leader_elect:
            duration, deadline, period = lease
            self.elector = LeaderElector(
                api, config.namespace, config.instance_name, identity,
                lease_duration=duration, renew_deadline=deadline, retry_period=period,
            )  # fmt: skip
        self.health: HealthServer | None = None
        self._threads: list[threading.Thread] = []

    def snapshot(self, now: float) -> ClusterSnapshot:
        """Cluster state from the watch caches plus the two metrics LISTs, with workload
        profiles attached when ``--history`` is set (refreshed at most hourly)."""
        snap = snapshot_from_cache(self.cache, self.api, now)
        self.last_nodes = snap.nodes
        if self.config.history == "none":
            return snap
        return replace(snap, workload_profiles=self.profiles.get(self.config, snap, now))

    def stale_kinds(self) -> str:
        """Kinds whose watch keeps failing (their cached state may be stale), ``""`` if none."""
        return ", ".join(sorted(k for k, st in self.cache.stats.items() if st.consecutive_errors > 0))

    def _leading(self) -> None:
        self.controller.leader.set()
        self.metrics.is_leader.set(1)

    def _lost(self) -> None:
        # Like CA: a replica that loses the lease stops; its process restarts as a follower.
        self.controller.leader.clear()
        self.metrics.is_leader.set(0)
        self.stop_event.set()

    def start(self, sync_timeout: float = 60.0, serve: bool = True) -> Runner:
        """Start the caches, the health server, leader election and the loop (threads).

        Raises:
            scaler.sources.kube.LiveSourceError: the caches did not sync within ``sync_timeout``.
        """
        from scaler.sources.watch import CacheNotSynced

        self.cache.start()
        if not self.cache.wait_synced(sync_timeout):
            self.cache.stop()
            raise CacheNotSynced(f"watch caches not synced after {sync_timeout:.0f}s")
        if serve:
            self.health = HealthServer(self.config.address, self.metrics, self.controller.healthy).start()
        if self.elector is not None:
            t = threading.Thread(
                target=self.elector.run, args=(self._leading, self._lost), name="leader", daemon=True
            )
            self._threads.append(t)
            t.start()
        else:
            self._leading()
        loop = threading.Thread(target=self.controller.run, args=(self.stop_event,), name="loop", daemon=True)
        self._threads.append(loop)
        loop.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Graceful shutdown: no new drains; finish or roll back in-flight ones; release the
        lease; stop the caches and the health server."""
        self.stop_event.set()
        if timeout is None:
            timeout = self.config.max_graceful_termination_sec + 60.0
        self.controller.shutdown(timeout)
        if self.elector is not None:
            self.elector.stop()
        for t in self._threads:
            t.join(timeout=10)
        self.cache.stop()
        if self.health is not None:
            self.health.stop()


def run_forever(runner: Runner) -> int:
    """Run until SIGTERM/SIGINT (or lost leadership), then shut down gracefully. Returns 0."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        runner.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    runner.start()
    log.info("scaler run started (%s)", "dry-run" if runner.controller.dry_run else "active")
    while not runner.stop_event.wait(1.0):
        pass
    runner.stop()
    return 0
