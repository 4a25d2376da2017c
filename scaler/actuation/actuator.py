"""Remove the nodes a plan chose: taint and cordon, re-check, drain, verify, delete — or roll back.

Follows CA ``core/scaledown/actuation`` (``actuator.go startDeletion``, ``deleteNodesAsync``,
``group_deletion_scheduler.go``, ``drain.go``), with scaler's safety rules:

1. **Taint** every chosen node synchronously (``ToBeDeletedByClusterAutoscaler=<ts>:NoSchedule``,
   cordon, ownership annotation). If any taint fails, the ones already applied are cleaned and
   the loop reports a synchronous failure (``--scale-down-delay-after-failure`` starts).
2. Per node, in its own thread: wait ``--node-delete-delay-after-taint``; **re-check** on fresh
   state (:mod:`scaler.actuation.recheck`); **drain** through the precise eviction framework
   (every waterline 0: every movable pod, lowest value first), each eviction retried up to
   ``--max-pod-eviction-time``; **wait** until the pods are gone (at most grace + 30 s); mark
   the node ``drained``. A drain stops at once when its node is deleted by someone else (the
   node is read every ``node_poll_seconds`` while it drains).
3. **Verify** with a fresh read that the node is still tainted and cordoned by this replica, in
   state ``drained``, and with a fresh LIST that no non-DaemonSet, non-mirror pod is bound to
   it; only then evict its DaemonSet pods, best effort, when the flags (or the pod's
   ``enable-ds-eviction`` annotation) say so (a DaemonSet pod is not lost for a node that
   stays); then **delete** through the cloud provider, with the resourceVersion verified as
   precondition where the provider can (the Node object's delete: a node changed since is
   verified again, up to three times). The provider is told the other deletions of the node's
   group (and zone) under way here that it has not been handed yet; the ones it runs it counts
   itself (pending, then in its target size), so each deletion counts once against the minimum. Expendable pods (priority below
   ``--expendable-pods-priority-cutoff``) are ignored here as everywhere else: they are never
   evicted and go down with the node, as in CA.
4. **Any failure or exception** before the deletion: the outcome is recorded at once (Warning
   event ``ScaleDownFailed``; the controller starts ``--scale-down-delay-after-failure`` and
   keeps the node out of the candidates for ``--unremovable-node-recheck-timeout``:
   :class:`NodeOutcome`), then the taint is removed and the node uncordoned (unless it was
   cordoned before), retried with exponential backoff until it succeeds or the node is gone;
   meanwhile the node is in :attr:`Actuator.rollbacks` (status ConfigMap ``rollbacksPending``,
   ``scaler_rollbacks_pending``). Only this replica's own marks are removed.

**Fencing.** Every write goes through the writer's fence and the cloud delete through
``fence`` (:meth:`scaler.kube.leader.LeaderElector.check`): once this replica does not hold
the lease, a removal stops where it is, without any further write, not even a rollback (the
new leader's recovery owns its nodes), and the process exits.

**A stale view holds.** While ``hold`` says the cluster view may be stale (a watched kind being
relisted: :meth:`scaler.sources.watch.WatchCache.stale_kinds`), no re-check and no delete
starts: the removal waits for a fresh view, at most :data:`FRESH_VIEW_WAIT_SECONDS`, then fails
and rolls back; a delete that waited verifies the node again. Evictions are held by the
writer's own ``hold`` (retried until ``--max-pod-eviction-time``).

**The taint is the removal's.** A drain stops at once, no further eviction, when its node
loses the ``ToBeDeletedByClusterAutoscaler`` taint (read every ``node_poll_seconds`` while it
drains): someone else removed it, typically a cluster-autoscaler starting beside scaler (at
start-up it removes that taint from every node of its node groups, scaler's drains included).
The removal fails with that reason and the node is rolled back (uncordoned): nothing is
deleted, and the node is tried again after ``--unremovable-node-recheck-timeout``. Verify
refuses such a node too, whenever the taint went.

On stop (SIGTERM) no new node is started; a node not yet drained is rolled back at once (an
eviction being retried stops retrying), a drained one is deleted.

**Hot-node relief** (:meth:`Actuator.relieve`): for each relief of a
:class:`~scaler.relief.ReliefPlan`, put the soft taint ``scaler.io/hot=<unix ts>:PreferNoSchedule``
on the node synchronously (the replacements of the evicted pods then score it low in
kube-scheduler's ``TaintToleration``), emit ``HotNodeRelief`` on the node, then evict exactly the
planned pods, in the plan's order, through the Eviction API in the node's own thread (each
eviction retried as in a drain, a ``HotNodeRelief`` event on each pod). One relief per node at a
time; a node whose taint fails is not relieved. The taint stays: the controller removes it once
the node has cooled (a restart removes it too).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from scaler.actuation.recheck import recheck
from scaler.budgets import disruption_reason
from scaler.cloud.base import CloudError, CloudProvider, ClusterWriter, NodeChanged
from scaler.config import ScalerConfig
from scaler.eviction.executor import drain
from scaler.eviction.metrics import MetricRegistry, default_registry
from scaler.eviction.podinfo import pod_usages
from scaler.kube.leader import LeaseLost
from scaler.kube.writer import STATE_DRAINED, TAINT_HOT, NotOwned, ObjectRef, WriteError
from scaler.model.decode import parse_pod
from scaler.model.parse import ObjectError
from scaler.model.records import TAINT_TO_BE_DELETED, Node, Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.observability import Metrics
from scaler.planner import ScaleDownPlan
from scaler.reasons import NodeStatus
from scaler.relief import NodeRelief, ReliefPlan
from scaler.simulator.cache import EvaluationCache
from scaler.simulator.registry import Plugins, resolve_plugins

__all__ = ["ANNOTATION_ENABLE_DS_EVICTION", "Actuator", "Dispatcher", "NodeOutcome", "in_threads", "inline"]

log = logging.getLogger(__name__)

ANNOTATION_ENABLE_DS_EVICTION = "cluster-autoscaler.kubernetes.io/enable-ds-eviction"
"""On a DaemonSet pod, ``"true"`` or ``"false"``: whether it is evicted before its node is
deleted, over ``--daemonset-eviction-for-empty-nodes``/``--daemonset-eviction-for-occupied-nodes``."""
POD_EVICTION_HEADROOM_SECONDS = 30.0  # CA DefaultPodEvictionHeadroom
ROLLBACK_BACKOFF_SECONDS = (1.0, 60.0)
"""A failed rollback is retried after 1 s, then twice as long each time, at most 60 s apart."""
DELETE_VERIFY_ATTEMPTS = 3
"""How many times the delete step verifies a node again when it changed in between."""
FRESH_VIEW_WAIT_SECONDS = 120.0
"""How long a removal waits for a fresh cluster view (``hold`` says nothing) before its re-check
or its delete; past it the removal fails and rolls back. A relist of the pods of a 5,000-node
cluster takes about a minute on a busy API server."""
FRESH_VIEW_POLL_SECONDS = 1.0
"""How often a removal waiting for a fresh cluster view asks ``hold`` again (seconds)."""
TAINT_REMOVED = (
    f"the {TAINT_TO_BE_DELETED} taint was removed by someone else (a cluster-autoscaler removes every such "
    "taint when it starts); no further eviction, the node is rolled back"
)
"""Why a drain stops when its node loses the taint (the event's and the node's reason)."""


class Dispatcher(Protocol):
    """How the actuator runs one unit of work: a node's removal (``kind`` ``"remove"``), its
    rollback (``"rollback"``) or a hot node's relief (``"relieve"``).

    A dispatcher either returns a thread, not started yet, that will run ``work`` (the actuator
    registers it and starts it under its lock, so :meth:`Actuator.stop` joins every started
    one), or runs ``work`` itself and returns ``None`` once it is done. The live controller runs
    each in its own thread (:func:`in_threads`); the replay runs them in place, on replay time
    (:func:`inline`, then its own scheduling).
    """

    def __call__(self, kind: str, node: str, work: Callable[[], None]) -> threading.Thread | None: ...


def in_threads(kind: str, node: str, work: Callable[[], None]) -> threading.Thread:
    """The live :class:`Dispatcher`: a daemon thread named ``<kind>-<node>`` (not started)."""
    return threading.Thread(target=work, name=f"{kind}-{node}", daemon=True)


def inline(kind: str, node: str, work: Callable[[], None]) -> None:
    """A :class:`Dispatcher` that runs ``work`` in the caller, at once."""
    work()


class _Abort(Exception):
    """A step refused to go on; the message says why (it becomes the event message)."""


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """How one node's removal ended. ``step`` names where it failed (``taint``, ``recheck``,
    ``drain``, ``verify``, ``delete``, ``stopping``, ``lease``: stopped without further write
    because the lease was lost; an unexpected exception: its type's name), ``""`` on success;
    ``message`` says what went wrong, without the step's name; ``time`` is when it ended (Unix
    seconds; 0 when unknown)."""

    node: str
    ok: bool
    step: str = ""
    message: str = ""
    time: float = 0.0


def refused_by_pdb(error: str) -> bool:
    """Whether a failed eviction's ``error`` is the Eviction API refusing it for a
    PodDisruptionBudget: HTTP 429 with the API server's "disruption budget" message
    (``pkg/registry/core/pod/storage/eviction.go``), not a 429 of API priority and fairness."""
    return "HTTP 429" in error and "disruption budget" in error


def _workload_pods(objs: Sequence[dict[str, object]], expendable_cutoff: int) -> list[str]:
    """Names of pods that must not be on a node being deleted: anything but DaemonSet, mirror,
    finished and expendable pods (:meth:`Pod.is_expendable` at ``expendable_cutoff``, which CA neither moves
    nor waits for: they go down with the node). An unparsable pod counts (when in doubt, don't
    act)."""
    out = []
    for obj in objs:
        try:
            pod = parse_pod(obj)
        except ObjectError:
            out.append(str(obj.get("metadata")))
            continue
        if not (pod.is_daemonset or pod.is_mirror or pod.is_terminal or pod.is_expendable(expendable_cutoff)):
            out.append(pod.key)
    return out


class Actuator:
    """Carries out scale-down plans.

    Args:
        config: the controller's configuration.
        writer: Kubernetes writes.
        cloud: deletes the VMs (or Node objects).
        fresh_snapshot: reads fresh cluster state (used for the re-check).
        metrics: Prometheus metrics.
        on_done: called with each :class:`NodeOutcome` (from the node's thread).
        registry: eviction metrics (default cpu and memory usage).
        clock, sleep: time functions; ``sleep`` may return early when stopping.
        eviction_parallelism: evictions in flight per node.
        pod_poll_seconds: how often pod disappearance is checked (CA: 5 s).
        plugins: the plugins of the re-check, the evaluation's own, fresh instances each
            re-check (``None``: resolved from ``config`` once, here).
        fence: raises :class:`~scaler.kube.leader.LeaseLost` when this replica must not write;
            called before the cloud delete and before a rollback (the writer calls its own
            before every Kubernetes write). Default: none (a single replica).
        rollback_backoff: first and longest wait between rollback attempts (seconds).
        node_poll_seconds: how often a draining node's existence is checked (0: not checked).
        dispatcher: runs each removal, rollback and relief (default: a thread each,
            :func:`in_threads`).
        sleep: the waits of a removal (after the taint, between pod checks); default: a wait
            that returns early when stopping.
        hold: why the cluster view may be stale now, ``""`` when it is not (the controller's
            ``source_problem``); re-checks and deletes wait while it says anything (see the
            module docstring). Default: never stale (the replay).

    Raises:
        scaler.simulator.registry.PluginError: a configured plugin cannot be loaded.
    """

    def __init__(
        self,
        config: ScalerConfig,
        writer: ClusterWriter,
        cloud: CloudProvider,
        fresh_snapshot: Callable[[], ClusterSnapshot],
        metrics: Metrics,
        on_done: Callable[[NodeOutcome], None],
        *,
        registry: MetricRegistry | None = None,
        clock: Callable[[], float] = time.time,
        eviction_parallelism: int = 10,
        pod_poll_seconds: float = 5.0,
        plugins: Plugins | None = None,
        fence: Callable[[], None] | None = None,
        rollback_backoff: tuple[float, float] = ROLLBACK_BACKOFF_SECONDS,
        node_poll_seconds: float = 1.0,
        dispatcher: Dispatcher = in_threads,
        sleep: Callable[[float], object] | None = None,
        hold: Callable[[], str] | None = None,
    ) -> None:
        self.config = config
        self.hold: Callable[[], str] = hold or (lambda: "")
        self.writer = writer
        self.cloud = cloud
        self.fresh_snapshot = fresh_snapshot
        self._cache = EvaluationCache()  # what one re-check keeps for the next
        # The re-checks share that cache, whose state serves one check at a time: in live mode
        # each removal runs in its own thread, so their re-checks take turns.
        self._recheck_lock = threading.Lock()
        self.metrics = metrics
        self.on_done = on_done
        self.registry = registry or default_registry()
        self.clock = clock
        self.eviction_parallelism = eviction_parallelism
        self.pod_poll_seconds = pod_poll_seconds
        self.plugins = resolve_plugins(config) if plugins is None else plugins
        self.fence: Callable[[], None] = fence or (lambda: None)
        self.rollback_backoff = rollback_backoff
        self.node_poll_seconds = node_poll_seconds
        self.dispatcher = dispatcher
        self.rollbacks: dict[str, str] = {}
        """Nodes whose removal failed and whose rollback has not succeeded yet → its last error."""
        self.lease_lost = threading.Event()
        """Set once a step met :class:`~scaler.kube.leader.LeaseLost`: nothing more is written."""
        self._lock = threading.Lock()
        self._halts: set[threading.Event] = set()  # one per drain under way
        self._stopping = threading.Event()
        self.sleep: Callable[[float], object] = sleep if sleep is not None else self._stopping.wait
        self._threads: dict[str, threading.Thread] = {}
        self._relief_threads: dict[str, threading.Thread] = {}
        self.in_flight: dict[str, str] = {}
        self._zones: dict[str, str] = {}  # node in flight -> its zone
        # Nodes in flight whose cloud delete has been called: counted by the provider (its own
        # pending deletions, then its target size), so never again as in flight elsewhere.
        self._deleting: set[str] = set()
        self.drains: set[str] = set()
        self.relieving: dict[str, NodeRelief] = {}
        """Nodes whose relief is under way (taint put, evictions running)."""
        self.relief_evictor = writer.evictor(
            config.max_pod_eviction_time,
            config.max_graceful_termination_sec,
            stop=self._stopping,
            reason="HotNodeRelief",
        )

    # ---- public ---------------------------------------------------------------------------------
    def start(self, plan: ScaleDownPlan) -> list[NodeOutcome]:
        """Taint the plan's nodes and start their removal in background threads.

        Returns the synchronous failures (all nodes of the plan when a taint failed), empty when
        every node was tainted and its removal started.
        """
        if self._stopping.is_set():
            return []
        chosen = [(r, r.status is NodeStatus.REMOVABLE_DRAIN) for r in plan.to_delete]
        tainted: list[str] = []
        for r, _ in chosen:
            name = r.node.name
            try:
                self.writer.mark_to_be_deleted(name, self.clock())
            except LeaseLost:
                self.lease_lost.set()  # the new leader's recovery owns the nodes tainted so far
                raise
            except WriteError as e:
                for t in tainted:
                    self._dispatch_rollback(t)
                msg = f"failed to mark the node as toBeDeleted/unschedulable: {e}"
                self.writer.event(ObjectRef("Node", name, uid=r.node.uid), "Warning", "ScaleDownFailed", msg)
                self.metrics.failed_scale_downs.labels("taint").inc()
                return [NodeOutcome(x.node.name, False, "taint", msg, self.clock()) for x, _ in chosen]
            tainted.append(name)
            self.writer.event(ObjectRef("Node", name, uid=r.node.uid), "Normal", "ScaleDown",
                              "marked the node as toBeDeleted/unschedulable")  # fmt: skip
        with self._lock:
            for r, is_drain in chosen:
                self.in_flight[r.node.name] = r.node.node_group
                self._zones[r.node.name] = r.node.zone
                if is_drain:
                    self.drains.add(r.node.name)
        for r, is_drain in chosen:
            self._dispatch(r.node, is_drain, disruption_reason(not is_drain, r.node.ready), r.moves)
        return []

    def _dispatch_rollback(self, name: str) -> None:
        """Roll node ``name`` back in its own thread, retried until done (:meth:`_roll_back`)."""
        with self._lock:
            self.rollbacks[name] = "not rolled back yet"
        self.metrics.rollbacks_pending.set(len(self.rollbacks))
        self._run(self._threads, f"rollback/{name}", "rollback", name, lambda: self._roll_back(name))

    def _dispatch(self, node: Node, is_drain: bool, reason: str, plan: tuple[tuple[Pod, str], ...]) -> None:
        """Run one tainted node's removal through the dispatcher (live: in its own thread);
        ``plan`` is the evaluation's moves of its pods, validated first by the re-check."""
        self._run(
            self._threads, node.name, "remove", node.name, lambda: self._remove(node, is_drain, reason, plan)
        )

    def _run(
        self, registry: dict[str, threading.Thread], key: str, kind: str, node: str, work: Callable[[], None]
    ) -> None:
        """Hand ``work`` to the dispatcher; a thread it returns is registered in ``registry``
        under ``key`` and started under the lock: stop() never joins an unstarted thread."""
        worker = self.dispatcher(kind, node, work)
        if worker is None:
            return
        with self._lock:
            registry[key] = worker
            worker.start()

    def relieve(self, plan: ReliefPlan) -> list[str]:
        """Start the reliefs of ``plan`` that evict something: taint each node (synchronously),
        then evict its planned pods in its own thread. A node already being relieved or removed
        is skipped; a node whose taint fails is not relieved (Warning ``HotNodeRelief``).

        Returns:
            The nodes whose relief started.
        """
        started: list[str] = []
        if self._stopping.is_set():
            return started
        for r in plan.planned():
            name = r.node.name
            with self._lock:
                if name in self.relieving or name in self.in_flight:
                    continue
            ref = ObjectRef("Node", name, uid=r.node.uid)
            try:
                self.writer.mark_hot(name, self.clock())
            except WriteError as e:
                log.warning("relief of hot node %s not started: %s", name, e)
                self.writer.event(ref, "Warning", "HotNodeRelief", f"failed to taint the hot node: {e}")
                self.metrics.errors.labels("relief").inc()
                continue
            h = r.hot
            self.writer.event(ref, "Normal", "HotNodeRelief",
                              f"cpu {h.cpu:.0%}, memory {h.memory:.0%} of allocatable: tainted {TAINT_HOT}; {r.detail}")  # fmt: skip
            log.info("relieving hot node %s: %s", name, r.detail)
            with self._lock:
                self.relieving[name] = r
            self._dispatch_relief(r)
            started.append(name)
        return started

    def _dispatch_relief(self, relief: NodeRelief) -> None:
        """Run one relief's evictions through the dispatcher (live: in the node's own thread)."""
        name = relief.node.name
        self._run(self._relief_threads, name, "relieve", name, lambda: self._relieve(relief))

    def _relieve(self, relief: NodeRelief) -> None:
        name = relief.node.name
        try:
            for pod, _ in relief.evictions:
                if self._stopping.is_set():
                    break
                result = self.relief_evictor(pod)
                self.metrics.relief_evictions.labels("succeeded" if result.ok else "failed").inc()
                if not result.ok:
                    log.warning("relief of hot node %s: %s", name, result.error)
        except LeaseLost as e:
            self.lease_lost.set()
            log.warning("relief of hot node %s stopped, no further write: %s", name, e)
        except Exception:  # the loop must survive; the taint goes when the node cools
            self.metrics.errors.labels("relief").inc()
            log.exception("relief of hot node %s failed", name)
        finally:
            with self._lock:
                self.relieving.pop(name, None)
                self._relief_threads.pop(name, None)

    def complete_deletion(self, node: Node) -> NodeOutcome:
        """Finish removing a node whose drain had completed before a restart: verify it holds
        no workload pod, then delete it (rolled back otherwise). Runs synchronously."""
        with self._lock:
            self.in_flight[node.name] = node.node_group
            self._zones[node.name] = node.zone
        return self._finish(node, disruption_reason(False, node.ready), lambda: self._verify_and_delete(node))

    def stop(self, timeout: float | None = None) -> None:
        """Start no new removal; let running ones finish or roll back; wait up to ``timeout``.

        The workers are read under the lock they are registered and started under, so every
        one seen has started; the reading is repeated until no new worker appears (one the
        loop dispatched meanwhile sees the stop and rolls back)."""
        self._stopping.set()
        with self._lock:
            for halt in self._halts:
                halt.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        joined: set[threading.Thread] = set()
        while True:
            with self._lock:
                workers = [
                    t for t in (*self._threads.values(), *self._relief_threads.values()) if t not in joined
                ]
            if not workers:
                return
            for t in workers:
                t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                joined.add(t)

    def idle(self) -> bool:
        """True when no removal, no rollback and no relief is under way."""
        with self._lock:
            return not self.in_flight and not self.relieving and not self.rollbacks

    # ---- one node -------------------------------------------------------------------------------
    def _wait_fresh(self, step: str, node: str) -> None:
        """Return once ``hold`` says the cluster view is fresh; wait for it (polling every
        :data:`FRESH_VIEW_POLL_SECONDS`) at most :data:`FRESH_VIEW_WAIT_SECONDS`.

        Raises:
            _Abort: still stale after that (``step: …``), or scaler is stopping.
        """
        why = self.hold()
        if not why:
            return
        log.info("%s of node %s waits for a fresh cluster view: %s", step, node, why)
        polls = max(1, round(FRESH_VIEW_WAIT_SECONDS / FRESH_VIEW_POLL_SECONDS))
        for _ in range(polls):
            if self._stopping.is_set():
                raise _Abort(f"stopping: scaler is shutting down while the cluster view is stale ({why})")
            self.sleep(FRESH_VIEW_POLL_SECONDS)
            why = self.hold()
            if not why:
                return
        raise _Abort(f"{step}: the cluster view stayed stale for {FRESH_VIEW_WAIT_SECONDS:.0f}s ({why})")

    def _remove(self, node: Node, is_drain: bool, reason: str, plan: tuple[tuple[Pod, str], ...]) -> None:
        def steps() -> None:
            self.sleep(self.config.node_delete_delay_after_taint)
            if self._stopping.is_set():
                raise _Abort("stopping: scaler is shutting down")
            self._wait_fresh("recheck", node.name)
            with self._lock:
                others = {n for n in self.in_flight if n != node.name}
            filters, scorers = self.plugins.build()
            with self._recheck_lock:
                check = recheck(
                    self.fresh_snapshot(),
                    self.config,
                    node.name,
                    expect_empty=not is_drain,
                    excluded=others,
                    filters=filters,
                    scorers=scorers,
                    cache=self._cache,
                    plan=plan,
                )
            if not check.ok:
                raise _Abort(f"recheck: {check.reason}")
            if check.pods:
                self._drain(node.name, check.pods)
            self.writer.set_state(node.name, STATE_DRAINED)
            self._verify_and_delete(node, check.daemonset_pods, occupied=bool(check.pods))

        self._finish(node, reason, steps)

    def _finish(self, node: Node, reason: str, steps: Callable[[], None]) -> NodeOutcome:
        """Run ``steps``; whatever they raise is caught and recorded. On failure the outcome is
        recorded first, then the node is rolled back, retried until done (in this thread);
        after a lost lease nothing more is written."""
        rollback = False
        try:
            steps()
        except LeaseLost as e:
            self.lease_lost.set()
            log.warning("scale-down of node %s stopped, no further write (its marks are left to the "
                        "new leader's recovery): %s", node.name, e)  # fmt: skip
            outcome = NodeOutcome(node.name, False, "lease", str(e), self.clock())
        except Exception as e:  # _Abort, WriteError, CloudError, and any bug: recorded, rolled back
            message = str(e) or type(e).__name__
            if isinstance(e, _Abort):  # "step: detail"
                step, _, detail = message.partition(": ")
                log.warning("scale-down of node %s failed (%s); rolling back", node.name, message)
            else:
                step, detail = type(e).__name__, message
                log.warning("scale-down of node %s failed; rolling back", node.name, exc_info=True)
            outcome = NodeOutcome(node.name, False, step, detail, self.clock())
            rollback = True
            try:
                what = (
                    "failed to drain and delete node"
                    if node.name in self.drains
                    else "failed to delete empty node"
                )
                self.metrics.failed_scale_downs.labels(step if isinstance(e, _Abort) else "error").inc()
                self.writer.event(ObjectRef("Node", node.name, uid=node.uid), "Warning", "ScaleDownFailed",
                                  f"{what}: {message}")  # fmt: skip
            except Exception:  # the rollback must still happen
                log.exception("recording the failed scale-down of node %s failed", node.name)
        else:
            self.metrics.scaled_down_nodes.labels(reason).inc()
            self.metrics.last_activity.labels("scaleDown").set(self.clock())
            self.writer.event(ObjectRef("Node", node.name, uid=node.uid), "Normal", "ScaleDown",
                              "node removed by scaler")  # fmt: skip
            outcome = NodeOutcome(node.name, True, time=self.clock())
        with self._lock:
            self.in_flight.pop(node.name, None)
            self._zones.pop(node.name, None)
            self._deleting.discard(node.name)
            self.drains.discard(node.name)
            if rollback:
                self.rollbacks[node.name] = "not rolled back yet"
        if rollback:
            self.metrics.rollbacks_pending.set(len(self.rollbacks))
        try:
            self.on_done(outcome)
        finally:
            if rollback:
                self._roll_back(node.name)
            with self._lock:
                self._threads.pop(node.name, None)
        return outcome

    def _drain(self, name: str, pods: Sequence[Pod]) -> None:
        """Evict ``pods`` and wait until they are gone, while a watcher thread reads the node
        every ``node_poll_seconds``: once it is deleted (by someone else), loses its
        ``ToBeDeletedByClusterAutoscaler`` taint (:data:`TAINT_REMOVED`), or scaler stops, no
        further eviction is attempted and the wait ends."""
        if self._stopping.is_set():
            raise _Abort("stopping: scaler is shutting down before the drain")
        halt = threading.Event()  # set: the node is gone or untainted, or scaler stops (stop() sets it too)
        gone = threading.Event()
        untainted = threading.Event()
        with self._lock:
            self._halts.add(halt)
        if self._stopping.is_set():
            halt.set()

        def watch() -> None:
            while not halt.is_set():
                try:
                    current = self.writer.get_node(name)
                    if current is None:
                        gone.set()
                        halt.set()
                        log.warning("node %s was deleted by someone else during its drain; stopping it", name)
                        return
                    taints = (current.get("spec") or {}).get("taints") or []
                    if not any(t.get("key") == TAINT_TO_BE_DELETED for t in taints):
                        untainted.set()
                        halt.set()
                        log.warning("node %s: %s", name, TAINT_REMOVED)
                        return
                except Exception as e:  # a failed read is not a deleted node
                    log.debug("reading node %s during its drain failed: %s", name, e)
                halt.wait(self.node_poll_seconds)

        if self.node_poll_seconds > 0:
            threading.Thread(target=watch, name=f"watch-{name}", daemon=True).start()
        try:
            evictor = self.writer.evictor(
                self.config.max_pod_eviction_time, self.config.max_graceful_termination_sec, stop=halt
            )
            snap = self.fresh_snapshot()
            result = drain(
                pod_usages(pods, snap.pod_metrics), self.registry, evictor, self.eviction_parallelism
            )
            self.metrics.evicted_pods.labels("succeeded").inc(len(result.evicted))
            self.metrics.evicted_pods.labels("failed").inc(
                len([f for f in result.failed if "not attempted" not in f[1]])
            )
            self.metrics.evictions_refused_by_pdb.inc(len([f for f in result.failed if refused_by_pdb(f[1])]))
            if result.failed:
                self.fence()  # an eviction refused by the fence: LeaseLost, and nothing more is written
            if gone.is_set():
                raise _Abort("drain: the node was deleted by someone else during the drain")
            if untainted.is_set():
                raise _Abort(f"drain: {TAINT_REMOVED}")
            if self._stopping.is_set():
                raise _Abort("stopping: scaler is shutting down during the drain")
            if result.failed:
                pod, error = result.failed[0]
                raise _Abort(f"drain: {len(result.failed)} eviction(s) failed, first {pod.key}: {error}")
            self._wait_gone(pods, halt, gone)
            if untainted.is_set():
                raise _Abort(f"drain: {TAINT_REMOVED}")
        finally:
            halt.set()  # ends the watcher
            with self._lock:
                self._halts.discard(halt)

    def _wait_gone(
        self,
        pods: Sequence[Pod],
        halt: threading.Event | None = None,
        node_gone: threading.Event | None = None,
    ) -> None:
        grace = max(
            (min(p.termination_grace_seconds, self.config.max_graceful_termination_sec) for p in pods),
            default=0,
        )
        deadline = self.clock() + grace + POD_EVICTION_HEADROOM_SECONDS
        waiting = list(pods)
        while True:
            if node_gone is not None and node_gone.is_set():
                raise _Abort("drain: the node was deleted by someone else during the drain")
            if halt is not None and halt.is_set() and not self._stopping.is_set():
                return  # the node lost its taint: the caller says so
            waiting = [p for p in waiting if not self.writer.pod_gone(p)]
            if not waiting:
                return
            if self._stopping.is_set():
                raise _Abort(f"stopping: scaler is shutting down; {len(waiting)} evicted pod(s) not gone yet")
            if self.clock() >= deadline:
                raise _Abort(f"drain: {len(waiting)} pod(s) remaining after timeout, first {waiting[0].key}")
            if halt is not None:
                halt.wait(self.pod_poll_seconds)
            else:
                self.sleep(self.pod_poll_seconds)

    def _evict_daemonsets(self, pods: Sequence[Pod], occupied: bool) -> None:
        """Best effort, as CA: errors are logged, never fail the node."""
        default = (
            self.config.daemonset_eviction_for_occupied_nodes
            if occupied
            else self.config.daemonset_eviction_for_empty_nodes
        )
        for pod in pods:
            flag = pod.annotations.get(ANNOTATION_ENABLE_DS_EVICTION)
            if flag == "true" or (flag != "false" and default):
                ok, status, msg = self.writer.evict_once(pod, min(pod.termination_grace_seconds,
                                                                   self.config.max_graceful_termination_sec))  # fmt: skip
                if not ok:
                    log.info("DaemonSet pod %s not evicted (HTTP %s: %s); ignored", pod.key, status, msg)

    def _verify_and_delete(
        self, node: Node, daemonset_pods: Sequence[Pod] = (), occupied: bool = False
    ) -> None:
        """Verify the node is still this replica's (tainted, cordoned, drained) and holds no
        workload pod; then evict its DaemonSet pods (best effort) and delete it at the verified
        resourceVersion. A node changed in between is verified again (at most
        :data:`DELETE_VERIFY_ATTEMPTS` times)."""
        daemonsets_done = False
        last: NodeChanged | None = None
        for _ in range(DELETE_VERIFY_ATTEMPTS):
            while True:  # verified on a fresh view, and still fresh once verified
                self._wait_fresh("delete", node.name)
                try:
                    version = self.writer.verify_marked(node.name, STATE_DRAINED)
                except NotOwned as e:
                    raise _Abort(f"verify: {e}") from None
                remaining = _workload_pods(
                    self.writer.pods_on_node(node.name), self.config.expendable_pods_priority_cutoff
                )
                if remaining:
                    raise _Abort(
                        f"verify: {len(remaining)} non-DaemonSet pod(s) still on the node, first {remaining[0]}"
                    )
                if not daemonsets_done:
                    daemonsets_done = True
                    self._evict_daemonsets(daemonset_pods, occupied)
                self.fence()
                if not self.hold():
                    break
            with self._lock:
                # The deletions under way elsewhere: in flight here, and not yet handed to the
                # provider (those it counts itself, as pending, then in its target size).
                others = [n for n, g in self.in_flight.items()
                          if g == node.node_group and n != node.name and n not in self._deleting]  # fmt: skip
                in_zone = sum(1 for n in others if self._zones.get(n) == node.zone)
                self._deleting.add(node.name)
            try:
                try:
                    self.cloud.delete_nodes(
                        node.node_group, [replace(node, resource_version=version)], in_flight=len(others),
                        zone_in_flight={node.zone: in_zone},
                    )  # fmt: skip
                except BaseException:
                    with self._lock:
                        self._deleting.discard(node.name)
                    raise
                return  # stays in _deleting (the provider's target size counts it) until _finish
            except NodeChanged as e:
                last = e
                log.info("node %s changed after it was verified (%s); verifying again", node.name, e)
            except CloudError as e:
                raise _Abort(f"delete: {e}") from None
        raise _Abort(f"delete: {last}")

    def _roll_back(self, name: str) -> None:
        """Undo this replica's marks on node ``name``, retried with exponential backoff
        (:attr:`rollback_backoff`) until it succeeds or the node is gone; meanwhile the node is
        in :attr:`rollbacks` with the last error. Stops without writing once the lease is lost,
        and after a last attempt once scaler stops (a restart's recovery rolls it back)."""
        wait, longest = self.rollback_backoff
        try:
            while True:
                try:
                    self.fence()
                    self.writer.clean_to_be_deleted(name)
                    return
                except LeaseLost as e:
                    self.lease_lost.set()
                    log.warning("rollback of node %s not made: %s", name, e)
                    return
                except Exception as e:  # WriteError, a connection error, anything: retried
                    error = str(e) or type(e).__name__
                    with self._lock:
                        self.rollbacks[name] = error
                    self.metrics.errors.labels("rollback").inc()
                    if self._stopping.is_set():
                        log.error("rollback of node %s failed (%s); scaler is stopping: the next "
                                  "leader's recovery rolls it back", name, error)  # fmt: skip
                        return
                    log.error("rollback of node %s failed (%s); retrying in %.0fs", name, error, wait)
                self._stopping.wait(wait)
                wait = min(wait * 2, longest)
        finally:
            with self._lock:
                self.rollbacks.pop(name, None)
                self._threads.pop(f"rollback/{name}", None)
            self.metrics.rollbacks_pending.set(len(self.rollbacks))
