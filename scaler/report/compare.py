"""Why scaler exists, computed on the snapshot at hand: cluster-autoscaler's rule side by side,
and what keeps underused nodes when requests, not usage, bind the cluster.

Each re-runs :func:`scaler.engine.evaluate` on a variant instead of estimating. The variants
need only the snapshot and the configuration, so they are two functions of their own, which
``scaler dry-run`` runs beside its own evaluation (:class:`scaler.forked.Forked`); the report
then sets them beside that evaluation:

* :func:`ca_rule_outcome` evaluates the same snapshot with cluster-autoscaler's settings
  (:data:`CA_REQUESTS_SETTINGS`: utilization by requests, no TargetUsage, no score plugins; the
  replay's ``ca-requests`` policy); :func:`compare_with_requests_rule` sets it beside scaler's.
* :func:`rightsized_outcome` ranks the workloads whose requests exceed their real usage the
  most, and evaluates the snapshot once more with every pod's cpu and memory requests set to the
  95th percentile (nearest rank) of its workload's per-pod usage in the snapshot;
  :func:`requests_bound` counts the nodes that are underused by real usage yet stay, and those of
  them removable only with right-sized requests: the nodes kept by requests.

Every variant is held by the disruption budgets, which :func:`scaler.engine.evaluate` applies
before its simulation, as the dry-run's own evaluation is, so the outcomes compare like for like.
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from msgspec.structs import replace as replace_struct

from scaler.config import ScalerConfig
from scaler.engine import Evaluation, NodeResult, evaluate
from scaler.forked import Forked
from scaler.history.profiles import workload_key
from scaler.model.gcpause import no_cycle_collector
from scaler.model.records import Pod, Resources
from scaler.model.snapshot import ClusterSnapshot
from scaler.reasons import NodeStatus
from scaler.report.models import (
    ComparisonModel,
    RemovalOutcomeModel,
    RequestsBoundModel,
    ResourceFigures,
    WorkloadRequestsModel,
)

__all__ = [
    "CA_REQUESTS_SETTINGS",
    "TOP_WORKLOADS",
    "RightsizedOutcome",
    "Variants",
    "WorkloadUsage",
    "ca_rule_outcome",
    "compare_with_requests_rule",
    "removal_outcome",
    "requests_bound",
    "rightsized_outcome",
    "rightsized_snapshot",
    "start_variants",
    "workload_usage",
]

CA_REQUESTS_SETTINGS: Mapping[str, str] = {
    "utilization-source": "requests",
    "filter-plugins": "",
    "score-plugins": "",
}
"""Flags that turn scaler's evaluation into cluster-autoscaler's scale-down rule (requests-based
utilization, kube-scheduler's filters only); the other flags stay as given."""

TOP_WORKLOADS = 5
"""Workloads listed in :class:`~scaler.report.models.RequestsBoundModel`."""


def removal_outcome(evaluation: Evaluation, rule: str, settings: Sequence[str] = ()) -> RemovalOutcomeModel:
    """What ``evaluation`` removes: counts, freed allocatable (millicores, bytes), node names in
    removal order. ``rule`` names it in the report; ``settings`` are the flags that define it."""
    removable = evaluation.removable()
    return RemovalOutcomeModel(
        rule=rule,
        settings=list(settings),
        removable=len(removable),
        removable_empty=sum(1 for r in removable if r.status is NodeStatus.REMOVABLE_EMPTY),
        removable_drain=sum(1 for r in removable if r.status is NodeStatus.REMOVABLE_DRAIN),
        pods_to_move=sum(len(r.moves) for r in removable),
        freed_cpu_millicores=sum(r.node.allocatable.cpu_millicores for r in removable),
        freed_memory_bytes=sum(r.node.allocatable.memory_bytes for r in removable),
        nodes=[r.node.name for r in removable],
    )


def ca_rule_outcome(snapshot: ClusterSnapshot, config: ScalerConfig) -> RemovalOutcomeModel:
    """What cluster-autoscaler's rule removes from ``snapshot``: :data:`CA_REQUESTS_SETTINGS`
    over ``config``, held by the budgets. The outcome's ``settings`` are the flags that differ
    from ``config``.

    Raises:
        scaler.simulator.registry.PluginError: as :func:`scaler.engine.evaluate`.
    """
    overrides = ScalerConfig.from_mapping(CA_REQUESTS_SETTINGS)
    keys = [k.replace("-", "_") for k in CA_REQUESTS_SETTINGS]
    ca_config = config.model_copy(update={k: getattr(overrides, k) for k in keys})
    changed = [
        f"--{k.replace('_', '-')}={v}"
        for k, v in zip(keys, CA_REQUESTS_SETTINGS.values(), strict=True)
        if getattr(ca_config, k) != getattr(config, k)
    ]
    return removal_outcome(evaluate(snapshot, ca_config), "cluster-autoscaler", changed)


def compare_with_requests_rule(ca_outcome: RemovalOutcomeModel, evaluation: Evaluation) -> ComparisonModel:
    """Cluster-autoscaler's outcome (:func:`ca_rule_outcome`) beside scaler's ``evaluation``."""
    ours = removal_outcome(evaluation, "scaler")
    return ComparisonModel(
        cluster_autoscaler=ca_outcome,
        scaler=ours,
        additional_nodes=ours.removable - ca_outcome.removable,
    )


@dataclass(frozen=True, slots=True)
class WorkloadUsage:
    """Requests and real usage of one workload's pods (sums), and its per-pod p95 usage.

    ``members`` are the pods' (namespace, name). CPU in millicores, memory in bytes. ``p95_*`` is the nearest-rank 95th percentile of the
    workload's per-pod usage; pods without PodMetrics count in ``pods`` and the requests only.
    """

    key: str
    pods: int
    members: tuple[tuple[str, str], ...]
    requested_cpu_millicores: int
    requested_memory_bytes: int
    used_cpu_millicores: int
    used_memory_bytes: int
    p95_cpu_millicores: int | None
    p95_memory_bytes: int | None


def _p95(values: Sequence[int]) -> int | None:
    """Nearest-rank 95th percentile: the smallest value with at least 95% of ``values`` at or
    below it (numpy's ``inverted_cdf``, without numpy's per-call overhead on a few values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(0.95 * len(ordered))) - 1]


def _counted(pod: Pod) -> bool:
    return bool(pod.node_name) and not pod.is_terminal and not pod.is_mirror


def workload_usage(snapshot: ClusterSnapshot) -> dict[str, WorkloadUsage]:
    """Per workload (:func:`scaler.history.profiles.workload_key`, e.g.
    ``"shop/Deployment/web"``) of the bound, non-terminal, non-mirror pods: summed requests and
    PodMetrics usage, and the per-pod p95 usage."""
    members: dict[str, list[Pod]] = {}
    for pod in snapshot.pods:
        if _counted(pod):
            key = workload_key(pod, snapshot)
            group = members.get(key)
            if group is None:
                members[key] = [pod]
            else:
                group.append(pod)
    pod_metrics = snapshot.pod_metrics
    out: dict[str, WorkloadUsage] = {}
    for key, group in members.items():  # one pass per workload
        req_cpu = req_mem = 0
        cpu: list[int] = []
        mem: list[int] = []
        for p in group:
            r = p.requests
            req_cpu += r.cpu_millicores
            req_mem += r.memory_bytes
            m = pod_metrics.get((p.namespace, p.name))
            if m is not None:
                cpu.append(m.cpu_millicores)
                mem.append(m.memory_bytes)
        out[key] = WorkloadUsage(
            key=key,
            pods=len(group),
            members=tuple([(p.namespace, p.name) for p in group]),
            requested_cpu_millicores=req_cpu,
            requested_memory_bytes=req_mem,
            used_cpu_millicores=sum(cpu),
            used_memory_bytes=sum(mem),
            p95_cpu_millicores=_p95(cpu),
            p95_memory_bytes=_p95(mem),
        )
    return out


def rightsized_snapshot(snapshot: ClusterSnapshot, usage: Mapping[str, WorkloadUsage]) -> ClusterSnapshot:
    """``snapshot`` with the cpu and memory requests of every pod of a workload in ``usage``
    (:func:`workload_usage` of this ``snapshot``, whose members are the counted pods only) set
    to the workload's p95 per-pod usage (up or down: requests that *match* usage). Pods of a
    workload without PodMetrics, mirror and terminal pods keep their requests."""
    target: dict[tuple[str, str], tuple[int, int]] = {}
    for w in usage.values():
        if w.p95_cpu_millicores is not None and w.p95_memory_bytes is not None:
            target.update(dict.fromkeys(w.members, (w.p95_cpu_millicores, w.p95_memory_bytes)))
    changed: dict[int, Pod] = {}  # id() of the old record -> its right-sized copy
    for pod in snapshot.pods:
        new = target.get((pod.namespace, pod.name))
        if new is None:  # members are counted pods only (workload_usage)
            continue
        r = pod.requests
        changed[id(pod)] = replace_struct(
            pod, requests=Resources(new[0], new[1], r.ephemeral_storage_bytes, r.pods, r.extended)
        )
    get = changed.get
    return replace(
        snapshot,
        pods=tuple([get(id(p), p) for p in snapshot.pods]),
        pods_by_node={
            name: tuple([get(id(p), p) for p in pods]) for name, pods in snapshot.pods_by_node.items()
        },
    )


def _underused(result: NodeResult, config: ScalerConfig) -> bool:
    """Kept although its real usage is at or below its pool's utilization threshold (a GPU node
    is judged by its GPUs, not by this threshold: never counted here)."""
    u = result.utilization
    if u.gpu is not None or u.dra is not None:
        return False
    threshold = config.for_pool(result.node.node_group).scale_down_utilization_threshold
    return not result.removable and not u.empty and u.value is not None and u.value <= threshold


def _excess_share(w: WorkloadUsage, cpu_total: int, memory_total: int) -> float:
    """Requests above usage as the larger share of the cluster's allocatable cpu or memory."""
    cpu = (w.requested_cpu_millicores - w.used_cpu_millicores) / cpu_total if cpu_total else 0.0
    mem = (w.requested_memory_bytes - w.used_memory_bytes) / memory_total if memory_total else 0.0
    return max(cpu, mem)


@dataclass(frozen=True, slots=True)
class RightsizedOutcome:
    """:func:`rightsized_outcome`: the ``workloads`` requesting most above their usage (ranked),
    and the nodes ``removable`` (in removal order) once every workload requests its p95 usage."""

    workloads: tuple[WorkloadUsage, ...]
    removable: tuple[str, ...]


def rightsized_outcome(
    snapshot: ClusterSnapshot, config: ScalerConfig, top: int = TOP_WORKLOADS
) -> RightsizedOutcome:
    """Rank the ``top`` workloads whose requests exceed their usage by the largest share of the
    cluster's allocatable cpu or memory, and evaluate ``snapshot`` with right-sized requests
    (:func:`rightsized_snapshot`), held by the budgets.

    Raises:
        scaler.simulator.registry.PluginError: as :func:`scaler.engine.evaluate`.
    """
    with no_cycle_collector():  # allocation-heavy and cycle-free, as the evaluation itself
        usage = workload_usage(snapshot)
        cpu_total = sum(n.allocatable.cpu_millicores for n in snapshot.nodes)
        memory_total = sum(n.allocatable.memory_bytes for n in snapshot.nodes)
        ranked = sorted(
            (w for w in usage.values() if _excess_share(w, cpu_total, memory_total) > 0),
            key=lambda w: (-_excess_share(w, cpu_total, memory_total), w.key),
        )[:top]
        rightsized = evaluate(rightsized_snapshot(snapshot, usage), config)
        return RightsizedOutcome(tuple(ranked), tuple(r.node.name for r in rightsized.removable()))


def requests_bound(rightsized: RightsizedOutcome, evaluation: Evaluation) -> RequestsBoundModel:
    """What keeps nodes that real usage would let go, from scaler's ``evaluation`` and the
    right-sized variant (:func:`rightsized_outcome`): see the module doc.

    ``underusedNodes`` are the nodes kept although their real usage (the dominant resource) is
    at or below their pool's ``--scale-down-utilization-threshold``; ``keptByRequests`` those of
    them removable with right-sized requests; ``workloads`` the ranked workloads.
    """
    config = evaluation.config
    underused = [r for r in evaluation.nodes if _underused(r, config)]
    before = {r.node.name for r in evaluation.nodes if r.removable}
    gained = [name for name in rightsized.removable if name not in before]
    underused_names = {r.node.name for r in underused}
    reasons: dict[str, int] = defaultdict(int)
    for r in underused:
        reasons[r.reason.value] += 1
    return RequestsBoundModel(
        threshold=config.scale_down_utilization_threshold,
        underused_nodes=len(underused),
        underused_by_reason=dict(sorted(reasons.items())),
        kept_by_requests=sum(1 for n in gained if n in underused_names),
        workloads=[_workload_model(w) for w in rightsized.workloads],
        removable_if_rightsized=len(rightsized.removable),
        nodes_if_rightsized=gained,
    )


def _workload_model(w: WorkloadUsage) -> WorkloadRequestsModel:
    namespace, kind, name = w.key.split("/", 2)
    return WorkloadRequestsModel(
        namespace=namespace,
        kind=kind,
        name=name,
        pods=w.pods,
        requested=ResourceFigures(
            cpu_millicores=w.requested_cpu_millicores, memory_bytes=w.requested_memory_bytes
        ),
        used=ResourceFigures(cpu_millicores=w.used_cpu_millicores, memory_bytes=w.used_memory_bytes),
        p95_per_pod=ResourceFigures(cpu_millicores=w.p95_cpu_millicores, memory_bytes=w.p95_memory_bytes),
    )


@dataclass(frozen=True, slots=True)
class Variants:
    """Both variant evaluations of one snapshot, under way (:func:`start_variants`)."""

    ca_rule: Forked[RemovalOutcomeModel]
    rightsized: Forked[RightsizedOutcome]


def start_variants(snapshot: ClusterSnapshot, config: ScalerConfig, *, parallel: bool = True) -> Variants:
    """Start :func:`rightsized_outcome` of ``snapshot`` in a forked child when ``parallel`` and the
    machine allows it (:class:`scaler.forked.Forked`), so that it runs while the caller makes its
    own evaluation; :func:`ca_rule_outcome` too when there are more than two CPUs, else the
    caller computes it after its own evaluation (on two CPUs, three CPU-bound processes finish
    later than two: the right-sized variant, the longest, would get two thirds of a CPU). The
    values come with ``.result()``."""
    many_cpus = (os.cpu_count() or 1) > 2
    return Variants(
        Forked(partial(ca_rule_outcome, snapshot, config), parallel=parallel and many_cpus),
        Forked(partial(rightsized_outcome, snapshot, config), parallel=parallel),
    )
