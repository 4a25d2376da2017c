"""``scaler run``: the controller loop around the pure engine and planner.

Every ``--scan-interval``: read the cluster (watch caches plus one node-metrics and one
pod-metrics LIST), record usage (nodes, and the pods of the nodes that may become candidates),
evaluate with usage aggregated over the unneeded window, plan,
and — when leader, not stopping and not in ``--dry-run`` — start the removals. While the metrics
API does not answer, a loop only reports the outage (status, ``scaler_metrics_api_available``,
health) and starts nothing. Metrics report
every loop; the status ConfigMap is rewritten when its content changes (its ``time`` says when);
in dry-run, "would remove" events are emitted once per node.

On becoming leader it first recovers from a previous crash or leader: nodes carrying this
instance's ownership annotation, in a state it can account for (``tainted``, ``drained``), are
rolled back, unless their drain had finished (state ``drained``), in which case the node is taken
over (its replica annotation becomes this replica's, only if unchanged) and the deletion is
completed after the same verification; hot-node relief's ``scaler.io/hot`` taints this
instance left are removed. Every write passes the lease fence (:mod:`scaler.kube.leader`).

With ``--hot-node-relief`` each loop also plans the relief of the nodes hot for
``--hot-node-time`` (:func:`scaler.relief.plan_relief`, on the evaluation's own simulation state,
after this loop's removals, within the disruption budgets), starts it (soft taint, then the
evictions: :meth:`~scaler.actuation.actuator.Actuator.relieve`), and removes the taint of nodes
that have stayed under both waterlines for ``--hot-node-time``.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from scaler.actuation.actuator import Actuator, NodeOutcome
from scaler.actuation.interface import Actuation
from scaler.cloud.base import CloudProvider, ClusterWriter
from scaler.config import ScalerConfig
from scaler.engine import Evaluation, evaluate
from scaler.kube.client import ClusterUnreachable, MetricsUnavailable
from scaler.kube.leader import LeaseLost
from scaler.kube.writer import (
    ANNOTATION_HOT_OWNER,
    ANNOTATION_OWNER,
    ANNOTATION_REPLICA,
    ANNOTATION_STATE,
    LABEL_STATUS,
    STATE_DRAINED,
    STATE_TAINTED,
    TAINT_HOT,
    NotOwned,
    ObjectRef,
    WriteError,
)
from scaler.model.gcpause import no_cycle_collector
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_time
from scaler.observability import Metrics, node_status, status_document, status_label, status_yaml
from scaler.planner import (
    SIMULATED_UNREMOVABLE,
    Aggregation,
    GroupSize,
    PlannerState,
    ScaleDownPlan,
    UsageSample,
    cooled,
    plan,
    record_failures,
    record_pod_usage,
    record_reliefs,
    record_usage,
    relief_admission,
    relief_due,
    track_hot,
    with_aggregated_usage,
)
from scaler.prices import PriceTable, load_price_table
from scaler.reasons import NodeStatus, UnremovableReason
from scaler.relief import ReliefPlan, hot_nodes, plan_relief
from scaler.simulator.cache import EvaluationCache
from scaler.simulator.registry import Plugins, resolve_plugins
from scaler.usage_history import PodUsageHistory

__all__ = ["NO_STATUS", "Controller", "StatusSink", "WriterStatus"]

log = logging.getLogger(__name__)

_SIMULATED = frozenset(r.value for r in SIMULATED_UNREMOVABLE)

_K = TypeVar("_K")

NODE_STATUS_WRITES_PER_LOOP = 50
"""At most this many nodes' status annotations are written per loop (5 per second at the default
10 s scan interval: cluster-autoscaler's default ``--kube-client-qps``); nodes that are or may
soon be removed go first, the rest follow in later loops."""


class StatusSink(Protocol):
    """Where the controller publishes what it decided: the status ConfigMap and each node's
    ``scaler.io/scale-down-status`` annotation and label (the two methods of
    :class:`~scaler.cloud.base.ClusterWriter` of the same names). ``publishes`` ``False``: the
    controller builds nothing to publish (no document, no price look-up, no call)."""

    @property
    def publishes(self) -> bool: ...

    def write_config_map(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None: ...

    def set_node_status(self, name: str, annotation: str, label: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class WriterStatus:
    """The live :class:`StatusSink`: through the cluster writer (its fence, its retries)."""

    writer: ClusterWriter
    publishes: bool = True

    def write_config_map(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        """Create or replace the ConfigMap (see :meth:`ClusterWriter.write_config_map`)."""
        self.writer.write_config_map(namespace, name, data, annotations)

    def set_node_status(self, name: str, annotation: str, label: str) -> bool:
        """Write one node's status (see :meth:`ClusterWriter.set_node_status`)."""
        return self.writer.set_node_status(name, annotation, label)


@dataclass(frozen=True, slots=True)
class _NoStatus:
    publishes: bool = False

    def write_config_map(
        self, namespace: str, name: str, data: Mapping[str, str], annotations: Mapping[str, str]
    ) -> None:
        return None

    def set_node_status(self, name: str, annotation: str, label: str) -> bool:
        return False


NO_STATUS: StatusSink = _NoStatus()
"""A :class:`StatusSink` that publishes nothing (the replay writes no status)."""


class Controller:
    """One scaler replica's control loop.

    Args:
        config: settings.
        snapshot_source: reads the cluster at a given time (watch caches + metrics LISTs).
        writer: Kubernetes writes.
        cloud: the cloud provider.
        metrics: Prometheus metrics.
        dry_run: decide and report, but never taint, evict or delete.
        identity: this replica's name (status and logs).
        clock: Unix-seconds clock.
        actuator_factory: builds the actuator, an :class:`~scaler.actuation.interface.Actuation`
            (default :class:`Actuator`; tests tune its timings, the replay runs it in place).
        source_problem: says why the cluster view may be stale (``""`` when it is not), e.g. a
            kind being relisted after a failed watch; while it says anything no scale-down is
            started, and the actuator (its ``hold``) lets no taint, eviction or delete go out.
        node_groups: node name → node group of the cluster's nodes now, without metrics (the
            watch cache); during a metrics outage every one of them is reported
            ``MetricsUnavailable`` (default: the nodes of the last successful loop).
        plugins: the simulation's plugins, resolved from their names once for the life of the
            controller and shared by the evaluation and the actuator's re-check, fresh instances
            each evaluation (``None``: resolved from ``config`` here).
        fence: given to the actuator (see :class:`Actuator`); ``None``: none.
        status_sink: where the status ConfigMap and the nodes' status annotations and labels
            go (:class:`StatusSink`); ``None``: through ``writer``. :data:`NO_STATUS` publishes
            neither (the replay).

    Raises:
        scaler.simulator.registry.PluginError: a configured plugin cannot be loaded.
    """

    def __init__(
        self,
        config: ScalerConfig,
        snapshot_source: Callable[[float], ClusterSnapshot],
        writer: ClusterWriter,
        cloud: CloudProvider,
        metrics: Metrics,
        *,
        dry_run: bool = False,
        identity: str = "scaler",
        clock: Callable[[], float] = time.time,
        actuator_factory: Callable[..., Actuation] = Actuator,
        source_problem: Callable[[], str] | None = None,
        node_groups: Callable[[], Mapping[str, str]] | None = None,
        plugins: Plugins | None = None,
        fence: Callable[[], None] | None = None,
        status_sink: StatusSink | None = None,
    ) -> None:
        self.config = config
        self.status_sink: StatusSink = status_sink if status_sink is not None else WriterStatus(writer)
        self.plugins = resolve_plugins(config) if plugins is None else plugins
        self.snapshot_source = snapshot_source
        self.writer = writer
        self.cloud = cloud
        self.metrics = metrics
        self.dry_run = dry_run
        self.identity = identity
        self.clock = clock
        self.source_problem = source_problem
        self.node_groups = node_groups
        self.state = PlannerState()
        self.leader = threading.Event()
        self.stopping = threading.Event()
        self.last_loop_end = clock()
        self.last_plan: ScaleDownPlan | None = None
        self.last_relief: ReliefPlan | None = None
        """The relief planned by the last loop (``None`` without ``--hot-node-relief``)."""
        self._hot: list[str] = []  # nodes above a hot-node waterline in the last loop
        self._announced: set[str] = set()
        self._outcomes: list[NodeOutcome] = []
        self._outcome_lock = threading.Lock()
        self._recovered = False
        self._last_status: dict[str, object] | None = None
        self._sampled_nodes: set[str] | None = None  # None: every pod (before the first evaluation)
        self._groups: dict[str, str] = {}  # node -> node group, as of the last snapshot
        self.metrics_unavailable_since: float | None = None
        """When the current metrics API outage began (Unix seconds), ``None`` when there is none."""
        self._node_labels: dict[str, str] = {}  # node -> status label last written
        self.node_status_writes_per_loop = NODE_STATUS_WRITES_PER_LOOP
        self._prices: PriceTable | None = None
        self.cache = EvaluationCache()
        """What one loop's evaluation keeps for the next (:mod:`scaler.simulator.cache`), keyed
        by the revisions the snapshot source gives; it changes no decision, only its cost."""
        self.history_status: Callable[[float], Mapping[str, object]] | None = None
        """The background history's state for the status ConfigMap's ``history`` section
        (``scaler run`` with ``--history``), ``None``: no such section."""
        self.actuator = actuator_factory(
            config,
            writer,
            cloud,
            lambda: snapshot_source(clock()),
            metrics,
            self._record_outcome,
            clock=clock,
            plugins=self.plugins,
            **({"fence": fence} if fence is not None else {}),
            **({"hold": source_problem} if source_problem is not None else {}),
        )

    # ---- outcomes from actuator threads -------------------------------------------------------------
    def _record_outcome(self, outcome: NodeOutcome) -> None:
        with self._outcome_lock:
            self._outcomes.append(outcome)

    def _apply_outcomes(self, now: float, outcomes: list[NodeOutcome] | None = None) -> None:
        """Fold finished removals into the planner state: a removed node's timer goes; a failed
        one starts the failure cooldown and keeps its node out for the recheck timeout."""
        if outcomes is None:
            with self._outcome_lock:
                outcomes, self._outcomes = self._outcomes, []
        if not outcomes:
            return
        since = dict(self.state.unneeded_since)
        for o in outcomes:
            since.pop(o.node, None)
        self.state = record_failures(
            replace(self.state, unneeded_since=since),
            [(o.node, o.time or now, f"{o.step or 'error'}: {o.message}") for o in outcomes if not o.ok],
            self.config.unremovable_node_recheck_timeout,
        )

    # ---- health -----------------------------------------------------------------------------------
    def healthy(self) -> bool:
        """False once no loop finished within ``--max-inactivity``."""
        return self.clock() - self.last_loop_end < self.config.max_inactivity

    # ---- crash recovery ---------------------------------------------------------------------------
    def recover(self, snapshot: ClusterSnapshot) -> None:
        """Roll back, or complete, removals a previous run of this instance left behind, and
        remove the ``scaler.io/hot`` taints it left (whatever ``--hot-node-relief`` is now)."""
        for node in snapshot.nodes:
            if node.annotations.get(ANNOTATION_HOT_OWNER) == self.config.instance_name:
                log.info("removing the %s taint a previous run left on node %s", TAINT_HOT, node.name)
                try:
                    self.writer.clean_hot(node.name)
                except WriteError as e:
                    log.warning("%s taint of node %s not removed: %s", TAINT_HOT, node.name, e)
            if node.annotations.get(ANNOTATION_OWNER) != self.config.instance_name:
                continue
            replica = node.annotations.get(ANNOTATION_REPLICA, "")
            state = node.annotations.get(ANNOTATION_STATE)
            if state not in (STATE_TAINTED, STATE_DRAINED):
                log.warning("node %s carries this instance's marks in an unknown state %r; left as it is",
                            node.name, state)  # fmt: skip
                continue
            if state == STATE_DRAINED:
                try:
                    self.writer.adopt(node.name, replica)
                except NotOwned as e:
                    log.info("drained node %s not taken over: %s", node.name, e)
                    continue
                log.info("completing the deletion of drained node %s", node.name)
                self.actuator.complete_deletion(node)
                continue
            log.info("rolling back node %s left tainted by %s", node.name, replica or "a previous run")
            self.writer.clean_to_be_deleted(node.name, replica)
            self.writer.event(ObjectRef("Node", node.name, uid=node.uid), "Normal", "ScaleDownRolledBack",
                              "scale-down interrupted by a restart; taint removed and node uncordoned")  # fmt: skip

    def trim_usage_history(self, now: float, window: float) -> None:
        """Keep only the usage samples (nodes and pods) of the last ``window`` seconds before
        ``now`` (Unix seconds; ``window`` 0: none, the next loop then aggregates its newest
        sample alone). The replay's policies with a usage window shorter than
        ``--scale-down-unneeded-time`` use it before each loop."""
        state = self.state
        if not state.usage_history and not state.pod_usage_history:
            return
        horizon = now - window

        def trim(history: Mapping[_K, tuple[UsageSample, ...]]) -> dict[_K, tuple[UsageSample, ...]]:
            kept = {
                k: tuple(s for s in samples if s.timestamp >= horizon and window > 0)
                for k, samples in history.items()
            }
            return {k: s for k, s in kept.items() if s}

        pods = state.pod_usage_history
        if isinstance(pods, PodUsageHistory):  # kept as arrays: trimmed in place
            pods.trim(horizon if window > 0 else math.inf)
        else:
            pods = trim(pods)
        self.state = replace(state, usage_history=trim(state.usage_history), pod_usage_history=pods)

    # ---- the loop ---------------------------------------------------------------------------------
    def run_once(self) -> ScaleDownPlan:
        """One loop: read, evaluate, plan, act (leader only), report. Returns the plan.

        The cycle collector is paused for the loop (:mod:`scaler.model.gcpause`): the loop
        allocates a snapshot's worth of acyclic records, whose survivors would otherwise set off
        a full collection over the whole heap every few loops (about a second at 150,000 pods);
        it runs between loops instead, while the watch threads wait."""
        with no_cycle_collector():
            return self._run_once()

    def _run_once(self) -> ScaleDownPlan:
        start = time.monotonic()
        now = self.clock()
        try:
            snapshot = self.snapshot_source(now)
        except MetricsUnavailable as e:
            return self._metrics_outage(now, str(e), start)
        self._metrics_back(now)
        stale = self.source_problem() if self.source_problem is not None else ""
        if stale:
            # When in doubt, don't act: a stale view could hide new pods on a node.
            self.metrics.errors.labels("stale_cache").inc()
            log.warning("cluster view may be stale (%s); no scale-down started this loop", stale)
        acting = self.leader.is_set() and not self.stopping.is_set() and not self.dry_run and not stale
        if acting and not self._recovered:
            self.recover(snapshot)
            self._recovered = True
            snapshot = self.snapshot_source(now)
        self._apply_outcomes(now)
        cfg = self.config
        pools = {p: cfg.for_pool(p) for p in cfg.node_pools}
        windows = {p: c.scale_down_unneeded_time for p, c in pools.items()}
        history = record_usage(self.state.usage_history, snapshot, cfg.scale_down_unneeded_time, windows)
        pod_history = record_pod_usage(
            self.state.pod_usage_history, snapshot, cfg.scale_down_unneeded_time, self._sampled_nodes, windows
        )
        in_flight = dict(self.actuator.in_flight)
        self.state = replace(
            self.state,
            usage_history=history,
            pod_usage_history=pod_history,
            in_flight=in_flight,
            in_flight_drains=frozenset(self.actuator.drains),
        )
        methods = {p: Aggregation(c.usage_aggregation) for p, c in pools.items()}
        aggregated = with_aggregated_usage(
            snapshot, history, Aggregation(cfg.usage_aggregation), methods, pod_history=pod_history
        )
        filters, scorers = self.plugins.build()
        evaluation = evaluate(
            aggregated,
            cfg,
            filters=filters,
            scorers=scorers,
            recently_unremovable=self.state.recently_unremovable(now),
            disrupted={*in_flight, *self.actuator.relieving},
            cache=self.cache,
        )
        # Pods whose usage history the next loops keep: those of the nodes that may be candidates
        # (and of the hot nodes, whose pods relief may evict by that usage).
        self._sampled_nodes = {
            r.node.name for r in evaluation.nodes if r.reason is not UnremovableReason.NotUnderutilized
        }
        hot = hot_nodes(evaluation) if cfg.hot_node_relief else {}
        self._sampled_nodes |= set(hot)
        sizes = self._group_sizes()
        last_scale_up = max((n.creation_ts for n in snapshot.nodes), default=None)
        decision, self.state = plan(
            evaluation, self.state, sizes, last_scale_up=last_scale_up, deleting=in_flight
        )
        self.metrics.observe_plan(decision, [b.name for b in cfg.budgets])
        acting = acting and self._still_fresh()
        if acting and decision.to_delete:
            failures = self.actuator.start(decision)
            if failures:
                self._apply_outcomes(now, failures)
            else:
                self.state = replace(self.state, last_delete=now)
        elif self.dry_run and self.leader.is_set():
            self._announce(decision)
        if cfg.hot_node_relief:
            self._relieve(evaluation, decision, snapshot, in_flight, acting)
        self._groups = {n.name: n.node_group for n in snapshot.nodes}
        self._write_status(decision, snapshot)
        self._write_node_statuses(decision, snapshot)
        return self._loop_done(decision, start)

    def _still_fresh(self) -> bool:
        """Whether the cluster view is still fresh now, after the evaluation (``source_problem``
        again: a kind may have gone stale meanwhile); when it is not, no scale-down or relief
        starts this loop, with a warning and ``scaler_errors_total{type="stale_cache"}``."""
        stale = self.source_problem() if self.source_problem is not None else ""
        if stale:
            self.metrics.errors.labels("stale_cache").inc()
            log.warning("cluster view became stale (%s); no scale-down started this loop", stale)
        return not stale

    def _group_sizes(self) -> dict[str, GroupSize]:
        """Every node group's sizes as the cloud tells them now (refreshed): the group's, each
        zone's and each MIG's minimum, maximum and target, in nodes."""
        self.cloud.refresh()
        return {
            g.id: GroupSize(
                g.min_size,
                g.max_size,
                g.target_size,
                {z.zone: GroupSize(z.min_size, z.max_size, z.target_size) for z in g.zone_groups},
                {m.base_name: GroupSize(m.min_size, m.max_size, m.target_size) for m in g.migs},
            )
            for g in self.cloud.node_groups()
        }

    def _relieve(
        self,
        evaluation: Evaluation,
        decision: ScaleDownPlan,
        snapshot: ClusterSnapshot,
        deleting: Mapping[str, str],
        acting: bool,
    ) -> None:
        """Hot-node relief for this loop: track the hot and cool timers, plan the relief of the
        nodes hot for ``--hot-node-time`` (within the disruption budgets, after this loop's
        removals), start it, and untaint the nodes that have cooled. Without ``acting`` it only
        plans and reports."""
        cfg, now = self.config, evaluation.now
        hot = hot_nodes(evaluation)
        self._hot = sorted(hot)
        self.metrics.hot_nodes.set(len(hot))
        known = {
            r.node.name
            for r in evaluation.nodes
            if r.utilization.usage_cpu_millicores is not None and r.utilization.usage_memory_bytes is not None
        }
        tainted = {
            n.name
            for n in snapshot.nodes
            if n.annotations.get(ANNOTATION_HOT_OWNER) == cfg.instance_name and any(t.key == TAINT_HOT for t in n.taints)
        }  # fmt: skip
        self.state = track_hot(self.state, hot, known, tainted, now)
        relieving = set(self.actuator.relieving)
        excluded = dict.fromkeys(relieving, "a relief of this node is under way")
        excluded |= dict.fromkeys(deleting, "being removed")
        excluded |= dict.fromkeys(
            (r.node.name for r in decision.to_delete), "being removed: chosen in this loop"
        )
        admit = relief_admission(evaluation)  # counts what the evaluation's budgets counted
        relief = plan_relief(
            evaluation, relief_due(self.state, now, cfg.hot_node_time), admit=admit, excluded=excluded
        )
        self.last_relief = relief
        if not acting:
            if self.dry_run and self.leader.is_set():
                for r in relief.planned():
                    log.info("[dry-run] would relieve hot node %s: %s", r.node.name, r.detail)
            return
        started = self.actuator.relieve(relief)
        self.state = record_reliefs(self.state, started)
        for name in cooled(self.state, now, cfg.hot_node_time):
            if name in relieving or name in started:
                continue
            node = snapshot.node_by_name.get(name)
            try:
                self.writer.clean_hot(name)
            except WriteError as e:
                self.metrics.errors.labels("relief").inc()
                log.warning("%s taint of node %s not removed: %s", TAINT_HOT, name, e)
                continue
            self.state = replace(
                self.state, cool_since={n: t for n, t in self.state.cool_since.items() if n != name}
            )
            self.writer.event(ObjectRef("Node", name, uid=node.uid if node else ""), "Normal", "HotNodeRelief",
                              f"under the hot-node waterlines for {cfg.hot_node_time:g}s: {TAINT_HOT} taint removed")  # fmt: skip

    def _loop_done(self, decision: ScaleDownPlan, start: float) -> ScaleDownPlan:
        self.last_plan = decision
        self.last_loop_end = self.clock()
        self.metrics.duration.labels("main").observe(time.monotonic() - start)
        self.metrics.last_activity.labels("main").set(self.last_loop_end)
        return decision

    # ---- metrics outages ----------------------------------------------------------------------------
    def _metrics_outage(self, now: float, why: str, start: float) -> ScaleDownPlan:
        """A loop while ``metrics.k8s.io`` does not answer: nothing is evaluated or started, the
        unneeded timers restart (usage was not observed meanwhile), every node known from the
        last loop is ``MetricsUnavailable``; status, metrics and health stay current. One
        warning when the outage starts (and one when it ends: :meth:`_metrics_back`)."""
        if self.metrics_unavailable_since is None:
            self.metrics_unavailable_since = now
            log.warning("metrics API unavailable, no scale-down until it answers again: %s", why)
        since = format_time(self.metrics_unavailable_since)
        self.metrics.metrics_api_available.set(0)
        self.metrics.errors.labels("metrics_unavailable").inc()
        if self.node_groups is not None:
            self._groups = dict(self.node_groups())
        self._apply_outcomes(now)
        self.state = replace(self.state, unneeded_since={}, in_flight=dict(self.actuator.in_flight))
        detail = f"metrics.k8s.io unavailable since {since}"
        decision = ScaleDownPlan(
            now, (), (), {},
            {n: (NodeStatus.UNREMOVABLE, UnremovableReason.MetricsUnavailable, detail) for n in self._groups},
            cooldown=detail,
        )  # fmt: skip
        self.metrics.observe_plan(decision)
        self._write_status(decision, None, {"status": "Unavailable", "since": since, "message": why})
        return self._loop_done(decision, start)

    def _metrics_back(self, now: float) -> None:
        self.metrics.metrics_api_available.set(1)
        if self.metrics_unavailable_since is not None:
            log.warning(
                "metrics API available again after %.0fs unavailable; unneeded timers restart now",
                now - self.metrics_unavailable_since,
            )
            self.metrics_unavailable_since = None

    def _announce(self, decision: ScaleDownPlan) -> None:
        """Dry-run: one event per node each time it becomes deletable."""
        chosen = {r.node.name: r for r in decision.to_delete}
        for name, r in chosen.items():
            if name not in self._announced:
                what = f"drain {len(r.moves)} pod(s) and delete" if r.moves else "delete empty node"
                log.info("[dry-run] would %s %s", what, name)
                self.writer.event(ObjectRef("Node", name, uid=r.node.uid), "Normal", "ScaleDownDryRun",
                                  f"[dry-run] would {what}")  # fmt: skip
        self._announced = set(chosen) | (self._announced & set(decision.unneeded))

    @property
    def prices(self) -> PriceTable:
        """The price table (``--prices`` over the bundled one), read on first use.

        Raises:
            scaler.prices.PriceError: the ``--prices`` file is bad (``scaler run``
                checks it before starting).
        """
        if self._prices is None:
            self._prices = load_price_table(self.config.prices or None)
        return self._prices

    def _relief_status(self, snapshot: ClusterSnapshot | None) -> dict[str, object] | None:
        """The status ConfigMap's ``hotNodeRelief`` (``None`` without ``--hot-node-relief``): the
        nodes above a waterline in the last loop with since when, and the nodes carrying this
        instance's ``scaler.io/hot`` taint (hot or cooling) and being relieved."""
        if not self.config.hot_node_relief:
            return None
        nodes = snapshot.nodes if snapshot is not None else ()
        tainted = sorted(
            n.name
            for n in nodes
            if n.annotations.get(ANNOTATION_HOT_OWNER) == self.config.instance_name
            and any(t.key == TAINT_HOT for t in n.taints)
        )
        since = self.state.hot_since
        return {
            "hotNodes": [
                {"name": n, "hotSince": format_time(since[n]) if n in since else None} for n in self._hot
            ],
            "taintedNodes": tainted,
            "reliefsInProgress": sorted(self.actuator.relieving),
        }

    def _write_status(
        self,
        decision: ScaleDownPlan,
        snapshot: ClusterSnapshot | None,
        metrics_api: dict[str, str] | None = None,
    ) -> None:
        """The status ConfigMap (leader only), when its content changed. ``snapshot`` ``None``:
        a loop without one (a metrics outage): the node groups of the last one, no costs."""
        if not self.leader.is_set() or not self.status_sink.publishes:
            return
        nodes = snapshot.nodes if snapshot is not None else ()
        priced = {n.name: self.prices.node_price(n) for n in nodes if n.name in decision.unneeded}
        costs = {name: p.monthly_usd for name, p in priced.items()}
        if snapshot is not None:
            self.metrics.unneeded_monthly_cost.set(sum(c for c in costs.values() if c is not None))
        price_source = ", ".join(self.prices.attribution(p.origin for p in priced.values()))
        doc = status_document(
            decision, self._groups, self.actuator.in_flight, leader=self.identity, dry_run=self.dry_run, costs=costs,
            price_source=price_source,
            metrics_api=metrics_api or {"status": "Available"}, relief=self._relief_status(snapshot),
            rollbacks=dict(self.actuator.rollbacks),
            history=self.history_status(decision.now) if self.history_status is not None else None,
        )  # fmt: skip
        if doc == self._last_status:
            return  # unchanged: no API call (a steady loop makes only the two metrics LISTs)
        text = status_yaml(doc, decision.now)
        try:
            self.status_sink.write_config_map(
                self.config.namespace, self.config.status_config_map_name, {"status": text},
                {"scaler.io/last-updated": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(decision.now))},
            )  # fmt: skip
            self._last_status = doc
        except Exception as e:  # status is best effort
            self.metrics.errors.labels("status").inc()
            log.warning("status ConfigMap not written: %s", e)

    def _write_node_statuses(self, decision: ScaleDownPlan, snapshot: ClusterSnapshot) -> None:
        """Leader only, with ``--write-node-status`` (``auto``: not in dry-run): write each node's verdict
        as its ``scaler.io/scale-down-status`` annotation and label when its status or reason
        changed. What is on the node is known from the watch cache (its label) and from this
        replica's own writes, so a steady cluster costs no request, and a restart rewrites
        nothing that is still true. ``RecentlyUnremovable`` does not replace the reason the last
        simulation wrote (``NoPlaceToMovePods``, ``BlockedByPod``): the node was not re-checked,
        so that reason still holds, and the label does not flip every
        ``--unremovable-node-recheck-timeout``. At most :data:`NODE_STATUS_WRITES_PER_LOOP` per
        loop."""
        if (
            not self.leader.is_set()
            or not self.status_sink.publishes
            or not self.config.writes_node_status(self.dry_run)
        ):
            return
        present = {n.name: n for n in snapshot.nodes}
        self._node_labels = {k: v for k, v in self._node_labels.items() if k in present}
        changed = []
        for name, (status, reason, _) in decision.verdicts.items():
            node = present.get(name)
            if node is None:
                continue
            current = self._node_labels.get(name, node.labels.get(LABEL_STATUS))
            if reason is UnremovableReason.RecentlyUnremovable and current in _SIMULATED:
                continue  # not re-simulated yet: the reason the last simulation found still holds
            if current != status_label(status, reason):
                soon = name in decision.unneeded or status is not NodeStatus.UNREMOVABLE
                changed.append((not soon, name))
        since = format_time(decision.now)
        for _, name in sorted(changed)[: self.node_status_writes_per_loop]:
            label, annotation = node_status(*decision.verdicts[name], since)
            try:
                if self.status_sink.set_node_status(name, annotation, label):
                    self._node_labels[name] = label
            except WriteError as e:  # best effort, as the status ConfigMap; retried next loop
                self.metrics.errors.labels("node_status").inc()
                log.warning("node status not written: %s", e)
                return

    def run(self, stop: threading.Event) -> None:
        """Loop every ``--scan-interval`` until ``stop`` is set; errors are logged and counted,
        and the loop goes on (``/healthz`` turns red if it stalls). An unreachable API server is
        one warning line a loop (``scaler_errors_total{type="unreachable"}``), other errors a
        traceback (``type="loop"``)."""
        while not stop.is_set():
            try:
                self.run_once()
            except LeaseLost as e:  # the elector's callback stops the replica; nothing more is written
                log.warning("control loop stopped writing: %s", e)
            except ClusterUnreachable as e:  # an outage, not a bug: one line, no traceback
                self.metrics.errors.labels("unreachable").inc()
                log.warning("control loop skipped: %s", e)
            except Exception:
                self.metrics.errors.labels("loop").inc()
                log.exception("control loop failed")
            stop.wait(self.config.scan_interval)

    def shutdown(self, timeout: float | None = None) -> None:
        """SIGTERM: start no new drains; finish or roll back the ones in flight."""
        self.stopping.set()
        self.actuator.stop(timeout)
