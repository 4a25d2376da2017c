"""Wire ``scaler run``: watch caches, cloud provider, writer, controller, leader election,
``/metrics`` and ``/healthz``, and graceful shutdown.

:class:`Runner` owns the parts and their threads so that tests can run several replicas in one
process against the loopback fakes; :func:`run_forever` adds signal handling for the real
process. On SIGTERM: stop the loop, start no new drain, let in-flight removals finish or roll
back (up to ``--max-graceful-termination-sec`` + 60 s), release the lease, exit.

Every write of a replica passes the lease fence (:meth:`scaler.kube.leader.LeaderElector.check`).
A replica that loses the lease (a renewal failing for the renew deadline, another holder seen,
or a fence check that finds its last renewal too old, e.g. after the process was paused) makes
no further write, not even a rollback, and exits with status 1 so that its Deployment restarts
it clean, as cluster-autoscaler does (``OnStoppedLeading``: ``klog.Fatalf``).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from types import FrameType

from kubernetes.client import ApiClient

from scaler.cloud.base import CloudProvider
from scaler.config import ScalerConfig
from scaler.controller import Controller
from scaler.errors import InputError, ScalerError
from scaler.history.refresh import HistoryRefresher
from scaler.kube.client import READ_CALLS
from scaler.kube.leader import LeaderElector
from scaler.kube.writer import KubeWriter, ObjectRef
from scaler.limits import GroupLimits
from scaler.model.records import Node
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.unreadable import Unreadable
from scaler.observability import HealthServer, Metrics
from scaler.simulator.registry import Plugins
from scaler.sources.watch import WatchCache, snapshot_from_cache

__all__ = ["Runner", "StartupError", "build_runner", "default_identity", "run_forever"]

log = logging.getLogger(__name__)


class StartupError(InputError):
    """``scaler run`` cannot start: a permission is missing, the cluster or the cloud cannot be
    read, the caches did not sync. The message is one line naming what; exit status 2."""


def default_identity() -> str:
    """The leader-election identity: ``POD_NAME`` (else the hostname) plus ``_`` and a random
    UUID, as client-go's callers do (CA: ``os.Hostname() + "_" + uuid.NewUUID()``), so two
    processes on one host, or a restarted container of one pod, never share an identity."""
    import socket
    import uuid

    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4()}"


SYNC_TIMEOUT_SECONDS = 600.0
"""How long ``scaler run`` waits at start for every watch cache's first LIST (seconds). The
LISTs are paginated (500 items a page, each page a quorum read from etcd): beside the real
cluster-autoscaler on a 5,000-node cluster of 150,000 pods, on a loaded 2-core API server, the
pod LIST took about 0.6 s a page, 62 s in all, and the former 60 s limit failed a start. Ten
minutes, as cluster-autoscaler's ``--max-inactivity`` default; an unreachable or forbidden API
is reported before this wait (SelfSubjectAccessReviews)."""


def build_runner(
    config: ScalerConfig,
    api: ApiClient,
    *,
    dry_run: bool,
    identity: str | None = None,
    sync_timeout: float = SYNC_TIMEOUT_SECONDS,
    plugins: Plugins | None = None,
) -> Runner:
    """Everything ``scaler run`` does before its loop, in order (``plugins``: the plugins the
    caller resolved at start; ``None``: resolved from ``config``):

    1. check with SelfSubjectAccessReviews that every Kubernetes call the controller and its
       cloud provider will make is allowed (with ``dry_run``: the dry-run's calls only; a kind
       the source may skip, PVs and PVCs, only warns);
    2. start the watch caches (one LIST per kind, then WATCH) and wait until they are synced;
    3. build the cloud provider, its ``--nodes`` limits resolved against the cached nodes (the
       same LIST: nothing is listed twice);
    4. check the cloud permissions where the provider can (GKE: ``projects.testIamPermissions``).

    The returned runner repeats 1 and 4 on becoming leader.

    Raises:
        StartupError: a permission is missing (naming the verb and resource, or the IAM
            permission), the cluster or the cloud could not be read, the caches did not sync.
    """
    from scaler.limits import node_group_limits

    def kube_problem() -> str:
        return _kube_permission_problem(config, api, dry_run)

    try:
        problem = kube_problem()
    except ScalerError as e:
        raise StartupError(str(e)) from None
    if problem:
        raise StartupError(problem)
    # SCALER_WATCH_TIMEOUT_SECONDS: each WATCH's timeoutSeconds (default 300), for tests that need
    # watches to end and resume soon (a resourceVersion compacted meanwhile: 410); unset in production.
    cache = WatchCache(api, watch_timeout_seconds=int(os.environ.get("SCALER_WATCH_TIMEOUT_SECONDS") or 300))
    cache.start()
    runner: Runner | None = None
    try:
        if not cache.wait_synced(sync_timeout):
            stale = ", ".join(sorted(k for k, st in cache.stats.items() if not st.lists and not st.skipped))
            raise StartupError(f"watch caches not synced after {sync_timeout:.0f}s ({stale})")
        nodes = cache.records().values("Node")
        limits = node_group_limits(config, nodes)
        cloud = _provider(config, api, limits, lambda: runner.last_nodes if runner is not None else ())
        problem = cloud.missing_permissions(dry_run)
        if problem:
            raise StartupError(problem)
        _check_names(config, cloud, nodes)
    except StartupError:
        cache.stop()
        raise
    except ScalerError as e:
        cache.stop()
        raise StartupError(str(e)) from None
    except Exception as e:  # metadata server unreachable and no --gke-* flags
        cache.stop()
        raise StartupError(f"cloud provider {config.cloud_provider}: {e}") from None

    def permission_check() -> str:
        return kube_problem() or cloud.missing_permissions(dry_run)

    runner = Runner(
        config, api, cloud, identity=identity or default_identity(), dry_run=dry_run, cache=cache,
        permission_check=permission_check, plugins=plugins,
    )  # fmt: skip
    return runner


def _kube_permission_problem(config: ScalerConfig, api: ApiClient, dry_run: bool) -> str:
    """Why ``scaler run`` (``dry_run``: ``--dry-run``) cannot start for lack of Kubernetes
    permissions (SelfSubjectAccessReviews of every call the controller and its cloud provider
    make), ``""`` when it can. A refused kind the source may skip (PVs, PVCs) only warns."""
    from scaler.cloud.kubernetes import KubernetesProvider
    from scaler.kube.permissions import missing_permissions, required_permissions

    provider_calls = KubernetesProvider.kube_calls
    if config.cloud_provider == "gke":
        from scaler.cloud.gke import GKEProvider

        provider_calls = GKEProvider.kube_calls
    missing = missing_permissions(api, required_permissions(config, provider_calls, dry_run))
    optional = [p.display for p in missing if p.call.optional]
    if optional:  # kinds the source skips when refused (PVs, PVCs): say so, go on
        log.warning(
            "no permission to %s: those kinds are skipped until they become readable", "; ".join(optional)
        )
    required = [p.display for p in missing if not p.call.optional]
    if not required:
        return ""
    mode = " --dry-run" if dry_run else ""
    return (
        f"missing Kubernetes permission(s) for scaler run{mode}: {'; '.join(required)} "
        "(SelfSubjectAccessReview; grant them as deploy/ does)"
    )


def _check_names(config: ScalerConfig, cloud: CloudProvider, nodes: list[Node]) -> None:
    """Start-up check of the pool, MIG and machine-type names of ``config``
    (:mod:`scaler.names`). With the GKE provider the node pools and MIGs the GKE API lists are
    authoritative (a pool scaled to zero is still listed): a name matching none of them is a
    :class:`StartupError`. Where only nodes tell the pools (``--cloud-provider=kubernetes``), and
    for machine types, a pool or type may have no node for a while: a warning, and the start
    goes on. Never checked again in the loop.

    The node pools are read only when the configuration names one; when they cannot be read
    (a transient GKE API failure) the check is skipped with a warning: the loop reports such
    failures itself, and a start must not fail on them.

    Raises:
        StartupError: a pool or MIG name matches nothing the GKE API lists (names the closest).
    """
    from scaler.cloud.base import CloudError
    from scaler.names import ClusterNames, cluster_names, unmatched_machine_types, unmatched_names

    from_nodes = cluster_names(nodes)
    named = bool(config.nodes or config.node_pools or any(b.node_pools for b in config.budgets))
    if cloud.name == "gke" and named:
        try:
            groups = cloud.node_groups()
        except CloudError as e:
            log.warning("node pool names not checked: the node pools could not be read (%s)", e)
            groups = None
        known = ClusterNames(
            (g.id for g in groups or ()),
            (m.name for g in groups or () for m in g.migs),
            from_nodes.machine_types,
        )
        problems = unmatched_names(config, known, "the cluster (GKE API)") if groups is not None else []
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise StartupError(problems[0] + more)
    else:
        for line in unmatched_names(config, from_nodes, "the cluster's nodes"):
            log.warning("%s; going on (a pool without nodes has no name to match)", line)
    for line in unmatched_machine_types(config, from_nodes, "the cluster's nodes"):
        log.warning("%s; going on", line)


def _provider(
    config: ScalerConfig,
    api: ApiClient,
    limits: GroupLimits,
    nodes: Callable[[], Iterable[Node]],
) -> CloudProvider:
    """The cloud provider ``--cloud-provider`` names. ``nodes``: the nodes of the last loop (the
    ``kubernetes`` provider counts group sizes from them instead of listing nodes)."""
    if config.cloud_provider == "gke":
        from scaler.cloud.gke import GKEProvider, make_clients, make_projects_client

        # SCALER_GCE_API_ENDPOINT points the Google clients at an emulator (tests); unset in
        # production: Google's endpoints with Workload Identity credentials.
        endpoint = os.environ.get("SCALER_GCE_API_ENDPOINT") or None
        container, compute = make_clients(endpoint)
        return GKEProvider.from_environment(
            config.gke_project or None, config.gke_location or None, config.gke_cluster or None,
            limits=limits, container_client=container, compute_clients=compute,
            projects_client=make_projects_client(endpoint),
        )  # fmt: skip
    from scaler.cloud.kubernetes import KubernetesProvider

    return KubernetesProvider(api, limits, node_source=nodes)


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
        lease: leader-election timings ``(duration, renew deadline, retry period)`` in seconds
            (default: ``--leader-elect-lease-duration``, ``--leader-elect-renew-deadline``,
            ``--leader-elect-retry-period`` from ``config``).
        controller_factory: builds the :class:`Controller` (tests tune the actuator).
        cache: the watch cache, possibly already started and synced (default: a new one on
            ``api``, started by :meth:`start`).
        permission_check: run on becoming leader (with leader election): ``""`` when every
            permission the replica needs is granted, else what is missing; then the replica
            does not act, stops, and :attr:`fatal` says why.
        plugins: the simulation's plugins, resolved once (``None``: the controller resolves
            them from ``config``).
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
        lease: tuple[float, float, float] | None = None,
        controller_factory: Callable[..., Controller] = Controller,
        cache: WatchCache | None = None,
        permission_check: Callable[[], str] | None = None,
        plugins: Plugins | None = None,
    ) -> None:
        self.config = config
        self.api = api
        self.cache = cache or WatchCache(api)
        self.permission_check = permission_check
        self.fatal = ""
        """Why the replica stopped on its own (a permission missing on becoming leader), else ``""``."""
        self.last_nodes: tuple[Node, ...] = ()
        self.metrics = Metrics()
        self.history = (
            HistoryRefresher(config, self.metrics, clock=clock) if config.history != "none" else None
        )
        """Workload profiles and GPU usage, refreshed in the background (``None`` without
        ``--history``)."""
        self.elector: LeaderElector | None = None
        if config.leader_elect:
            duration, deadline, period = lease or (
                config.leader_elect_lease_duration,
                config.leader_elect_renew_deadline,
                config.leader_elect_retry_period,
            )
            self.elector = LeaderElector(
                api, config.namespace, config.instance_name, identity,
                lease_duration=duration, renew_deadline=deadline, retry_period=period,
            )  # fmt: skip
        fence = self.elector.check if self.elector is not None else None
        self.writer = writer or KubeWriter(
            api, config.instance_name, clock=clock, replica=identity, fence=fence, hold=self.stale_kinds
        )
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
            node_groups=self.node_groups,
            plugins=plugins,
            fence=fence,
        )
        if self.history is not None:
            self.controller.history_status = self.history.status
        self.health: HealthServer | None = None
        self._threads: list[threading.Thread] = []
        self._loop: threading.Thread | None = None  # the control loop's thread, once started
        self._unreadable_seen: dict[tuple[str, str, str], str] = {}  # object -> message logged
        self._unreadable_announced: dict[tuple[str, str, str], str] = {}  # object -> message of its Event

    def snapshot(self, now: float) -> ClusterSnapshot:
        """Cluster state from the watch caches plus the two metrics LISTs, with what the
        background history knows attached when ``--history`` is set (workload profiles, the
        GPU nodes' real GPU usage while fresh: :meth:`HistoryRefresher.attach`). Never waits
        for Prometheus."""
        snap = snapshot_from_cache(self.cache, self.api, now)
        self._report_unreadable(self.cache.unreadable())
        self.last_nodes = snap.nodes
        if self.history is None:
            return snap
        return self.history.attach(snap, now)

    def node_groups(self) -> dict[str, str]:
        """Node name → node-pool label of every cached Node (no metrics needed)."""
        nodes: list[Node] = self.cache.records().values("Node")
        return {n.name: n.node_group for n in nodes}

    def stale_kinds(self) -> str:
        """The kinds whose cached objects may be stale now (:meth:`WatchCache.stale_kinds`: a
        watch failed, a 410, a relist under way), with why and for how long, ``""`` if none.
        While it says anything the controller starts no scale-down and its actuator lets no
        taint, eviction or delete go out."""
        return "; ".join(f"{kind} {why}" for kind, why in sorted(self.cache.stale_kinds().items()))

    def _report_unreadable(self, unreadable: list[Unreadable]) -> None:
        """Say what the cache could not read: ``scaler_unreadable_objects{kind}``, one warning per
        object (again when its problem changes), and, once this replica leads, one Warning
        Event ``UnreadableObject`` on the object itself."""
        current = {(u.kind, u.namespace, u.name): u for u in unreadable}
        counts = Counter(u.kind for u in unreadable)
        for kind in {c.kind for c in READ_CALLS} | set(counts):
            self.metrics.unreadable_objects.labels(kind).set(counts.get(kind, 0))
        for key in [k for k in self._unreadable_seen if k not in current]:
            log.info("%s %s can be read again, or is gone", key[0], "/".join(p for p in key[1:] if p))
            self._unreadable_seen.pop(key)
            self._unreadable_announced.pop(key, None)
        leading = self.controller.leader.is_set()
        for key, u in current.items():
            if self._unreadable_seen.get(key) != u.message:
                self._unreadable_seen[key] = u.message
                log.warning("%s cannot be read, left out (the nodes it concerns are neither removed nor "
                            "placed on): %s", u.display, u.message)  # fmt: skip
            if leading and self._unreadable_announced.get(key) != u.message:
                self._unreadable_announced[key] = u.message
                version = next((c.api_version for c in READ_CALLS if c.kind == u.kind), "v1")
                self.writer.event(
                    ObjectRef(u.kind, u.name, u.namespace, u.uid, version), "Warning", "UnreadableObject",
                    f"scaler cannot read this object; the nodes it concerns are neither removed nor placed on: {u.message}",
                )  # fmt: skip

    def _leading(self) -> None:
        if self.elector is not None and self.permission_check is not None:
            # Permissions may have changed while this replica followed: check before acting.
            try:
                problem = self.permission_check()
            except Exception as e:  # the check could not be made: the start-up one passed
                log.warning("permission check on becoming leader failed (%s); going on", e)
                problem = ""
            if problem:
                log.error("%s; not acting, stopping", problem)
                self.fatal = problem
                self.stop_event.set()
                return
        self.controller.leader.set()
        self.metrics.is_leader.set(1)

    @property
    def lost_lease(self) -> bool:
        """True once this replica led and lost the lease (it stops; the process exits 1)."""
        return self.elector is not None and self.elector.lost

    def _lost(self) -> None:
        # Like CA: a replica that loses the lease stops; its process exits and restarts clean.
        self.controller.leader.clear()
        self.metrics.is_leader.set(0)
        self.stop_event.set()

    def start(self, sync_timeout: float = SYNC_TIMEOUT_SECONDS, serve: bool = True) -> Runner:
        """Start the caches, the health server, leader election and the loop (threads).

        Raises:
            scaler.sources.kube.LiveSourceError: the caches did not sync within ``sync_timeout``.
        """
        from scaler.sources.watch import CacheNotSynced

        if not self.cache.running:
            self.cache.start()
        if not self.cache.wait_synced(sync_timeout):
            self.cache.stop()
            raise CacheNotSynced(f"watch caches not synced after {sync_timeout:.0f}s")
        if serve:
            self.health = HealthServer(self.config.address, self.metrics, self.controller.healthy).start()
            host = self.config.address.rpartition(":")[0] or "0.0.0.0"
            log.info("serving /metrics and /healthz on %s:%d", host, self.health.port)
        if self.elector is not None:
            t = threading.Thread(
                target=self.elector.run, args=(self._leading, self._lost), name="leader", daemon=True
            )
            self._threads.append(t)
            t.start()
        else:
            self._leading()
        if self.history is not None:
            for cache in self.history.CACHES:
                t = threading.Thread(
                    target=self.history.run,
                    args=(self.stop_event, cache),
                    name=f"history-{cache}",
                    daemon=True,
                )
                self._threads.append(t)
                t.start()
        loop = threading.Thread(target=self.controller.run, args=(self.stop_event,), name="loop", daemon=True)
        self._threads.append(loop)
        self._loop = loop
        loop.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Graceful shutdown: no new drains; finish or roll back in-flight ones; release the
        lease; stop the caches and the health server."""
        self.stop_event.set()
        if timeout is None:
            timeout = self.config.max_graceful_termination_sec + 60.0
        # The loop ends its iteration first (starting no new drain): a node it tainted just now is
        # handed to the actuator, whose shutdown then rolls it back while the lease is still held.
        self.controller.stopping.set()
        if self._loop is not None and self._loop is not threading.current_thread():
            self._loop.join(timeout)
        self.controller.shutdown(timeout)
        if self.elector is not None:
            self.elector.stop()
        for t in self._threads:
            t.join(timeout=10)
        self.cache.stop()
        if self.health is not None:
            self.health.stop()


def _dump_stacks(signum: int, frame: FrameType | None) -> None:
    """Write every thread's stack to stderr, most recent call last. A Python-level handler: it
    runs in the main thread holding the interpreter lock, so it reads the other threads' frames
    safely (``faulthandler``'s all-thread dump reads them from C without it, and crashed the
    process here once in six tries)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    parts = [f"signal {signum}: stacks of {len(names)} thread(s)\n"]
    for ident, top in sys._current_frames().items():
        parts.append(f"Thread {names.get(ident, '?')} ({ident}), most recent call last:\n")
        parts.extend(traceback.format_stack(top))
    sys.stderr.write("".join(parts))
    sys.stderr.flush()


def run_forever(runner: Runner) -> int:
    """Run until SIGTERM/SIGINT (or lost leadership, or a permission missing on becoming
    leader: :attr:`Runner.fatal`), then shut down gracefully. Returns 0, 2 when fatal, 1 when
    the lease was lost (no write after the loss; the Deployment restarts the replica).
    SIGUSR1 writes every thread's stack to stderr and goes on (:func:`_dump_stacks`)."""

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("signal %d: shutting down", signum)
        runner.stop_event.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if hasattr(signal, "SIGUSR1"):  # kill -USR1: every thread's stack on stderr (a hang's where)
        signal.signal(signal.SIGUSR1, _dump_stacks)
    runner.start()
    log.info("scaler run started (%s)", "dry-run" if runner.controller.dry_run else "active")
    while not runner.stop_event.wait(1.0):
        pass
    runner.stop()
    if runner.lost_lease:
        log.error(
            "lost the lease: exiting 1 so that this replica restarts clean (no write was made after the loss)"
        )
        return 1
    return 2 if runner.fatal else 0
