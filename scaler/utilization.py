"""Node utilization by real usage (default) or by requests (cluster-autoscaler's definition).

Usage-based (seed 004): ``cpu = NodeMetrics.cpu / allocatable.cpu``, ``memory`` likewise,
``value = max(cpu, memory)`` and ``resource`` names the larger. A node whose pods are all
DaemonSet or mirror pods is *empty* and has utilization 0 whatever the metrics say (seed 004, last
section, fixing CA's empty-node blind spot). A non-empty node whose NodeMetrics are missing or older
than ``--max-metrics-age`` has no usage-based utilization: it is never treated as idle.

Requests-based (CA ``simulator/utilization/info.go Calculate``): Σ pod requests / allocatable per
resource, with DaemonSet (and mirror) pods' requests removed from numerator and denominator when
``--ignore-daemonsets-utilization`` (``--ignore-mirror-pods-utilization``) is set. Long-terminating
pods are not counted, as in CA.

``--ignore-daemonsets-utilization`` in usage mode removes DaemonSet pods' *usage* (from
PodMetrics) from both the numerator and the denominator; the same for mirror pods.

**Pods not yet in the metrics.** A NodeMetrics reading covers the pods that ran during its
window (``timestamp - window`` to ``timestamp``); a pod that started after the window began,
for instance the replacement of a pod scaler has just evicted, is not (or only partly) in it.
Such a pod is added to its node's usage with :func:`pod_load` (``max(request, own PodMetrics)``
per resource) until a newer reading covers it. A pod whose usage is unknown (no request and no
PodMetrics for a resource) makes the node's usage unknown. This is koordinator's LoadAware
estimation of "assigned but not yet reported" pods (``pkg/scheduler/plugins/loadaware/
pod_assign_cache.go``: ``nodeInfo.addPod`` estimates a pod when it has no reported usage or was
assigned after ``updateTime - reportInterval``). Two differences: koordinator dates a pod by its
``PodScheduled`` condition and adds ``max(0, estimate - reported usage)``, with an estimate of
``max(request, limit)`` scaled by a factor; scaler dates it by ``status.startTime`` (else its
creation time) and adds the whole ``max(request, usage)``, which may count part of the pod's
usage twice, on the safe side.

**Usage is never below what the node's pods use.** The newest NodeMetrics reading is compared
with the sum of the newest PodMetrics of the node's counted pods in its window (a reading that
lacks some containers counts for what it reports). NodeMetrics include the node's system
daemons, so they are normally above that sum; a reading below it is raised by the difference
(added to the usage and the destination usage alike); a reading *far* below it
(:data:`NODE_METRICS_SHORTFALL_FRACTION` of the sum and :data:`NODE_METRICS_SHORTFALL_CPU_MILLICORES`
or :data:`NODE_METRICS_SHORTFALL_MEMORY_BYTES`) is not trusted: the node's usage is unknown
(``usage_unknown`` says why), so it is ``MetricsUnavailable`` and receives no pods.

**Destination usage.** A node that receives moved pods is judged by its worst recent usage:
``max(aggregate, newest reading)`` per resource, plus the pods not yet in the metrics
(:attr:`NodeUtilization.destination_cpu_millicores`). The aggregate (``--usage-aggregation``)
smooths a candidate's usage so that one spike does not restart its timer; it must not hide a
spike on a destination.

**GPU nodes** (cluster-autoscaler's ``GpuConfig`` path of ``simulator/utilization/info.go
Calculate``): a node with ``nvidia.com/gpu`` allocatable, or GKE's ``cloud.google.com/gke-accelerator``
label, is judged by its GPUs alone: ``gpu = Σ pod GPU requests / allocatable GPUs``
(``CalculateUtilizationOfResource``: DaemonSet and mirror pods removed from both sides when they are
ignored, long-terminating pods not counted), 0 while the node's GPUs are not allocatable yet (CA:
"this will guarantee we can still scale down a node with unready GPU"). Its CPU and memory
figures are still computed (shown, and used when the node receives pods) but do not decide
whether it is underutilized. ``gpu_usage`` is the real GPU usage from NVIDIA's DCGM exporter
(``DCGM_FI_DEV_GPU_UTIL`` through ``--history prometheus``: Σ of the node's GPUs' utilization /
100 / allocatable GPUs, :attr:`ClusterSnapshot.gpu_usage`), ``None`` when unknown.

**NotReady nodes.** A NotReady node has no fresh metrics. With ``--scale-down-unready-enabled``
a NotReady node whose usage is unknown is judged by its requests, as cluster-autoscaler judges
every node (``source = "requests (NotReady)"``); the controller deletes it after
``--scale-down-unready-time`` of being unneeded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

import msgspec

from scaler.config import ScalerConfig
from scaler.model.dra import Device, DraObjects, ResourceSlice
from scaler.model.records import Node, NodeMetrics, Pod, PodMetrics
from scaler.model.snapshot import ClusterSnapshot

__all__ = [
    "LABEL_GKE_ACCELERATOR",
    "NODE_METRICS_SHORTFALL_CPU_MILLICORES",
    "NODE_METRICS_SHORTFALL_FRACTION",
    "NODE_METRICS_SHORTFALL_MEMORY_BYTES",
    "POD_EVICTION_HEADROOM_SECONDS",
    "RESOURCE_GPU",
    "SOURCE_UNREADY",
    "DraUtilization",
    "MetricsStatus",
    "NodeUtilization",
    "PodFacts",
    "dra_utilization",
    "gpu_requests_fraction",
    "is_empty",
    "is_gpu_node",
    "is_long_terminating",
    "no_usage_words",
    "node_utilization",
    "partial_usage",
    "pod_facts",
    "pod_load",
    "pod_usage",
    "requests_fractions",
    "unknown_usage",
]

POD_EVICTION_HEADROOM_SECONDS = 30  # CA actuation/drain.go DefaultPodEvictionHeadroom
RESOURCE_GPU = "nvidia.com/gpu"
"""The extended resource of NVIDIA GPUs (CA ``utils/gpu.ResourceNvidiaGPU``)."""
LABEL_GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
"""GKE's GPU node label, the accelerator type (``nvidia-tesla-t4``); CA's GCE ``GPULabel``."""
SOURCE_UNREADY = "requests (NotReady)"
"""``NodeUtilization.source`` of a NotReady node judged by its requests (no usage known)."""


class MetricsStatus(StrEnum):
    """Freshness of a node's NodeMetrics at evaluation time."""

    OK = "ok"
    MISSING = "missing"
    STALE = "stale"


class NodeUtilization(msgspec.Struct, frozen=True, gc=False):
    """Utilization of one node, fractions 0–1 (may exceed 1 for usage above allocatable).
    (A frozen record made for every node at every evaluation: a ``msgspec.Struct``, which is
    built many times faster than a frozen dataclass.)

    Attributes:
        cpu, memory, value: the chosen source's fractions; ``None`` when unknown (usage source
            and no fresh metrics on a non-empty node).
        resource: ``"cpu"`` or ``"memory"``, the dominant resource of ``value``.
        source: ``"usage"`` or ``"requests"``.
        request_cpu, request_memory, request_value: CA's requests-based fractions, always set,
            for side-by-side comparison.
        empty: every counted pod is a DaemonSet or mirror pod.
        metrics: freshness of the node's NodeMetrics.
        usage_cpu_millicores, usage_memory_bytes: the usage the node is judged by when fresh:
            its NodeMetrics (aggregated over the unneeded window in ``scaler run``) plus the pods
            not yet in them, raised to at least its pods' PodMetrics; ``None`` when unknown.
        metrics_age_seconds: ``now - NodeMetrics.timestamp``, ``None`` when missing.
        destination_cpu_millicores, destination_memory_bytes: the usage TargetUsage counts when
            the node receives moved pods: ``max(aggregate, newest reading)`` plus the pods not
            yet in the metrics; ``None`` when unknown.
        pods_not_in_metrics: pods that started after the newest NodeMetrics window began (their
            load is in the usage figures).
        usage_unknown: why the usage is unknown although the metrics are fresh (a pod not yet
            in the metrics with neither a request nor PodMetrics, or NodeMetrics far below the
            sum of the node's pods' PodMetrics), ``""`` otherwise.
        gpu: a GPU node's requested GPUs / allocatable GPUs (fraction 0-1,
            :func:`gpu_requests_fraction`); ``None`` for a node without GPUs.
        gpu_usage: a GPU node's real GPU usage (fraction 0-1, from DCGM), ``None`` when unknown
            or the node has no GPUs.
        gpus: a GPU node's allocatable GPUs (0 for a node without GPUs, or while they are not
            allocatable yet).
        dra: a node with devices of its own published by DRA drivers (ResourceSlices) and no
            ``nvidia.com/gpu`` allocatable: their utilization as cluster-autoscaler computes it
            (:func:`dra_utilization`); ``None`` for other nodes. Such a node is judged by it
            as a GPU node is by its GPUs (its ``gpu`` is then ``None``).
    """

    cpu: float | None
    memory: float | None
    value: float | None
    resource: str
    source: str
    request_cpu: float
    request_memory: float
    request_value: float
    empty: bool
    metrics: MetricsStatus
    usage_cpu_millicores: int | None
    usage_memory_bytes: int | None
    metrics_age_seconds: float | None
    destination_cpu_millicores: int | None = None
    destination_memory_bytes: int | None = None
    pods_not_in_metrics: int = 0
    usage_unknown: str = ""
    gpu: float | None = None
    gpu_usage: float | None = None
    gpus: int = 0
    dra: DraUtilization | None = None


@dataclass(frozen=True, slots=True)
class DraUtilization:
    """A node's DRA device utilization (cluster-autoscaler's ``simulator/dynamicresources/utils/
    utilization.go``).

    Attributes:
        value: the highest pool's utilization, fraction 0-1 (``HighestDynamicResourceUtilization``).
        resource: that pool, ``driver/pool``.
        pools: ``(driver, pool, utilization)`` of every pool of the node's own slices, sorted.
        error: why it cannot be computed (``""`` when it can): a pool whose newest generation
            lacks slices, a claim of the node's pods that is not allocated or not found.
    """

    value: float
    resource: str
    pools: tuple[tuple[str, str, float], ...] = ()
    error: str = ""


def is_long_terminating(pod: Pod, now: float) -> bool:
    """CA ``drain.IsPodLongTerminating``: deletion requested more than grace + 30 s ago."""
    return (
        pod.deletion_ts is not None
        and pod.deletion_ts + pod.termination_grace_seconds + (POD_EVICTION_HEADROOM_SECONDS) < now
    )


def is_empty(pods: Sequence[Pod]) -> bool:
    """True when every pod is a DaemonSet or mirror pod (CA ``pod_util.IsDaemonSetPod`` /
    ``IsMirrorPod``); a node with no pods at all is empty."""
    return all(p.is_daemonset or p.is_mirror for p in pods)


def _ignored(pod: Pod, config: ScalerConfig) -> bool:
    return (config.ignore_daemonsets_utilization and pod.is_daemonset) or (
        config.ignore_mirror_pods_utilization and pod.is_mirror
    )


def requests_fractions(
    node: Node, pods: Sequence[Pod], config: ScalerConfig, now: float
) -> tuple[float, float]:
    """CA's requests-based (cpu, memory) fractions for ``node`` carrying ``pods``.

    Raises:
        ZeroDivisionError: never; a zero denominator yields 0.0 (the caller rejects nodes with
            zero allocatable first, as CA's ``UnexpectedError``).
    """
    cpu_req = mem_req = cpu_skip = mem_skip = 0
    ignoring = config.ignore_daemonsets_utilization or config.ignore_mirror_pods_utilization
    for p in pods:  # the checks inline where they cannot apply: called for every pod of every node
        if p.deletion_ts is not None and is_long_terminating(p, now):
            continue
        r = p.requests
        if ignoring and _ignored(p, config):
            cpu_skip += r.cpu_millicores
            mem_skip += r.memory_bytes
            continue
        cpu_req += r.cpu_millicores
        mem_req += r.memory_bytes
    cpu_den = node.allocatable.cpu_millicores - cpu_skip
    mem_den = node.allocatable.memory_bytes - mem_skip
    return (cpu_req / cpu_den if cpu_den > 0 else 0.0, mem_req / mem_den if mem_den > 0 else 0.0)


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What a node's counted pods give its utilization besides usage (:func:`pod_facts`).

    Attributes:
        requests: :func:`requests_fractions` (cpu, memory), fractions 0-1; ``None`` when a pod
            is terminating (a long-terminating pod stops counting with the clock alone).
        empty: :func:`is_empty`.
        keys: ``(namespace, name)`` of every non-terminal pod, in order.
        newest_start: the latest ``status.startTime`` (else ``creationTimestamp``) of those
            pods, Unix seconds; ``-inf`` when none is known.
    """

    requests: tuple[float, float] | None
    empty: bool
    keys: tuple[tuple[str, str], ...]
    newest_start: float


def pod_facts(node: Node, pods: Sequence[Pod], config: ScalerConfig, now: float) -> PodFacts:
    """The :class:`PodFacts` of ``node`` carrying ``pods`` (counted pods) at ``now``: they hold
    for any other time while the same node and pods are judged (``requests`` aside, ``None``
    when a pod is terminating). The evaluation cache keeps them (:mod:`scaler.simulator.cache`)."""
    keys: list[tuple[str, str]] = []
    newest = -math.inf
    terminating = False
    for p in pods:  # one walk: called for every node whose pods changed
        terminating = terminating or p.deletion_ts is not None
        if p.is_terminal:
            continue
        keys.append((p.namespace, p.name))
        started = p.start_ts if p.start_ts is not None else p.creation_ts
        if started is not None and started > newest:
            newest = started
    requests = None if terminating else requests_fractions(node, pods, config, now)
    return PodFacts(requests, is_empty(pods), tuple(keys), newest)


def is_gpu_node(node: Node) -> bool:
    """True for a node with GPUs: ``nvidia.com/gpu`` allocatable, or GKE's
    ``cloud.google.com/gke-accelerator`` label (set before the device plugin reports the GPUs;
    CA's GCE provider reads the label, ``utils/gpu.GetNodeGPUFromCloudProvider``)."""
    return node.allocatable.extended.get(RESOURCE_GPU, 0) > 0 or LABEL_GKE_ACCELERATOR in node.labels


def gpu_requests_fraction(node: Node, pods: Sequence[Pod], config: ScalerConfig, now: float) -> float:
    """CA's GPU utilization of ``node`` carrying ``pods`` (``CalculateUtilizationOfResource`` for
    ``nvidia.com/gpu``): Σ pod GPU requests / allocatable GPUs, fraction 0-1, DaemonSet and
    mirror pods removed from numerator and denominator when ``--ignore-daemonsets-utilization``
    (``--ignore-mirror-pods-utilization``) is set, long-terminating pods not counted. 0 when
    the node has no allocatable GPU yet (CA returns 0 for an unready GPU so that the node can
    still be scaled down)."""
    allocatable = node.allocatable.extended.get(RESOURCE_GPU, 0)
    requested = skipped = 0
    for p in pods:
        gpus = p.requests.extended.get(RESOURCE_GPU, 0)
        if not gpus:
            continue
        if _ignored(p, config):
            skipped += gpus
        elif not is_long_terminating(p, now):
            requested += gpus
    denominator = allocatable - skipped
    return requested / denominator if allocatable > 0 and denominator > 0 else 0.0


def _dominant(cpu: float, memory: float) -> tuple[float, str]:
    # CA picks cpu only when strictly greater (``if cpu > mem``), memory otherwise.
    return (cpu, "cpu") if cpu > memory else (memory, "memory")


def pod_usage(pod: Pod, snapshot: ClusterSnapshot, config: ScalerConfig) -> tuple[int, int] | None:
    """The real usage of ``pod`` from its PodMetrics, ``(cpu millicores, memory bytes)``: per
    resource the larger of the (aggregated) reading and the newest one. ``None`` when the pod has
    no PodMetrics, only ones older than ``--max-metrics-age``, or only ones that lack a container
    it runs (dropped from the snapshot: :attr:`ClusterSnapshot.partial_pod_metrics`)."""
    m = snapshot.pod_metrics.get((pod.namespace, pod.name))
    if m is None or snapshot.now - m.timestamp > config.max_metrics_age:
        return None
    newest = snapshot.newest_pod_metrics.get((pod.namespace, pod.name))
    if newest is None:
        return m.cpu_millicores, m.memory_bytes
    return max(m.cpu_millicores, newest.cpu_millicores), max(m.memory_bytes, newest.memory_bytes)


def _fresh_partial(
    pod: Pod, snapshot: ClusterSnapshot, config: ScalerConfig
) -> tuple[PodMetrics, tuple[str, ...]] | None:
    """``pod``'s PodMetrics reading that lacks some containers it runs, with those containers
    (:attr:`ClusterSnapshot.partial_pod_metrics`), when it is not older than
    ``--max-metrics-age``; ``None`` otherwise."""
    partial = (
        snapshot.partial_pod_metrics.get((pod.namespace, pod.name)) if snapshot.partial_pod_metrics else None
    )
    if partial is None or snapshot.now - partial[0].timestamp > config.max_metrics_age:
        return None
    return partial


def partial_usage(
    pod: Pod, snapshot: ClusterSnapshot, config: ScalerConfig
) -> tuple[int | None, int | None] | None:
    """The usage of a pod whose fresh PodMetrics lack some containers it runs: per resource,
    what the reading reports plus each missing container's own request
    (:meth:`Pod.container_request`: CPU millicores, memory bytes); ``None`` for a resource that
    a missing container does not request (nobody measures it, nothing bounds it: unknown usage
    is never zero). A pod-level request does not stand for a container's own. ``None`` when the
    pod has no such reading."""
    partial = _fresh_partial(pod, snapshot, config)
    if partial is None:
        return None
    m, missing = partial
    cpu: int | None = m.cpu_millicores
    mem: int | None = m.memory_bytes
    for name in missing:
        c_cpu, c_mem = pod.container_request(name)
        cpu = cpu + c_cpu if cpu is not None and c_cpu > 0 else None
        mem = mem + c_mem if mem is not None and c_mem > 0 else None
    return cpu, mem


_NEW = " started after the newest NodeMetrics window began"


def unknown_usage(pod: Pod, snapshot: ClusterSnapshot, config: ScalerConfig, *, new: bool = False) -> str:
    """Why :func:`pod_load` cannot tell what ``pod`` adds to a node, in one clause naming the
    pod (and the container nobody measures); ``""`` when its load is known. ``new`` says the
    pod is one its node's metrics do not reflect yet.

    ``pod default/web: its PodMetrics lack container 'log', which has no memory request: its
    usage is unknown``, or ``pod default/be has neither a cpu request nor PodMetrics: its usage
    is unknown``."""
    cpu, mem = pod_load(pod, snapshot, config)
    if cpu is not None and mem is not None:
        return ""
    what = "cpu" if cpu is None else "memory"
    since = _NEW if new else ""
    partial = _fresh_partial(pod, snapshot, config)
    if partial is not None:
        for name in partial[1]:
            if pod.container_request(name)[0 if what == "cpu" else 1] <= 0:
                return (
                    f"pod {pod.key}{since}: its PodMetrics lack container {name!r}, which has no {what} "
                    "request: its usage is unknown"
                )
    lacks = no_usage_words(pod, snapshot)
    return f"pod {pod.key}{since + ' and' if new else ''} has neither a {what} request nor {lacks}: its usage is unknown"


def no_usage_words(pod: Pod, snapshot: ClusterSnapshot) -> str:
    """How a reason names what ``pod`` lacks besides a request: ``PodMetrics``, or, when its
    reading was dropped for lacking containers (:attr:`ClusterSnapshot.partial_pod_metrics`),
    ``PodMetrics covering all its containers (its PodMetrics lack container 'b')``."""
    partial = snapshot.partial_pod_metrics.get((pod.namespace, pod.name))
    if partial is None:
        return "PodMetrics"
    names = ", ".join(repr(c) for c in partial[1])
    return f"PodMetrics covering all its containers (its PodMetrics lack container {names})"


def pod_load(pod: Pod, snapshot: ClusterSnapshot, config: ScalerConfig) -> tuple[int | None, int | None]:
    """What ``pod`` adds to a node it runs on: per resource ``max(request, real usage)`` (CPU
    millicores, memory bytes), with the requests it is placed with
    (:attr:`~scaler.model.records.Pod.placement_requests`) and real usage from
    :func:`pod_usage`; when its reading lacks a container it runs, the usage of
    :func:`partial_usage` (the reading plus the missing containers' own requests; unknown when
    one of them has none); the request alone when the pod has no PodMetrics; ``None`` for a
    resource whose usage is unknown (unknown usage is never taken as zero, :func:`unknown_usage`
    says why). Used for pods moved by the simulation (TargetUsage's Σ term) and for pods not yet
    in their node's metrics."""
    r = pod.placement_requests
    u = pod_usage(pod, snapshot, config)
    if u is not None:
        return max(r.cpu_millicores, u[0]), max(r.memory_bytes, u[1])
    part = partial_usage(pod, snapshot, config) if snapshot.partial_pod_metrics else None
    if part is not None:
        return (
            None if part[0] is None else max(r.cpu_millicores, part[0]),
            None if part[1] is None else max(r.memory_bytes, part[1]),
        )
    return (r.cpu_millicores or None), (r.memory_bytes or None)


NODE_METRICS_SHORTFALL_FRACTION = 0.2
"""How far a node's NodeMetrics may fall below the sum of its pods' PodMetrics, as a fraction
of that sum, before they are not trusted (see :data:`NODE_METRICS_SHORTFALL_CPU_MILLICORES`)."""
NODE_METRICS_SHORTFALL_CPU_MILLICORES = 100
"""...and at least this many millicores of CPU below (memory:
:data:`NODE_METRICS_SHORTFALL_MEMORY_BYTES`). A node's NodeMetrics (its root cgroup, as the
kubelet reports it) include its system daemons, kubelet and container runtime, so they are
normally *above* the sum of its pods'; the two come from the same metrics-server scrape but
each CPU rate is taken over its own interval, which moves a bursty pod's reading by a few
percent. A reading 20% and 100m (or 100 MiB) below what the node's own pods report is not a
measurement of the node (a glitch, a restarted kubelet's counters)."""
NODE_METRICS_SHORTFALL_MEMORY_BYTES = 100 * 2**20
"""Memory counterpart of :data:`NODE_METRICS_SHORTFALL_CPU_MILLICORES`."""


@dataclass(frozen=True, slots=True)
class _PodsOfNode:
    """What a node's counted pods add to its NodeMetrics (:func:`_pods_of_node`): ``add_*`` and
    ``pending`` for the pods not yet in the metrics window, ``unknown`` naming one of them whose
    load is unknown; ``measured_*`` the summed newest PodMetrics of the others (CPU millicores,
    memory bytes)."""

    add_cpu: int
    add_mem: int
    pending: int
    unknown: str
    measured_cpu: int
    measured_mem: int


def _pods_of_node(
    pods: Sequence[Pod],
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    window_start: float,
    facts: PodFacts | None = None,
    measured: tuple[int, int] | None = None,
) -> _PodsOfNode:
    """Walk the node's counted ``pods`` (expendable ones already dropped) once: the pods that
    started after ``window_start`` are summed with :func:`pod_load` (the first whose load is
    unknown is named); the others' newest fresh PodMetrics are summed (a reading lacking some
    containers counts for what it reports: a lower bound), for the check that the node's
    NodeMetrics are not far below them. ``measured``, when the caller summed them already
    (:meth:`scaler.simulator.cache.EvaluationCache.pod_sums`), is that sum for all of
    ``facts.keys``."""
    cpu = mem = count = 0
    readings = snapshot.newest_pod_metrics or snapshot.pod_metrics  # never aggregates a pod
    partial = snapshot.partial_pod_metrics
    oldest = snapshot.now - config.max_metrics_age
    if facts is not None and facts.newest_start <= window_start:  # every pod is in the window
        summed = measured if measured is not None else _sum_readings(facts.keys, readings, partial, oldest)
        return _PodsOfNode(0, 0, 0, "", *summed)
    in_window: list[tuple[str, str]] = []
    for p in pods:
        if p.is_terminal:
            continue
        started = p.start_ts if p.start_ts is not None else p.creation_ts
        if started is None or started <= window_start:
            in_window.append((p.namespace, p.name))
            continue
        c, m = pod_load(p, snapshot, config)
        if c is None or m is None:
            unknown = unknown_usage(p, snapshot, config, new=True)
            return _PodsOfNode(0, 0, count, unknown, *_sum_readings(in_window, readings, partial, oldest))
        cpu, mem, count = cpu + c, mem + m, count + 1
    return _PodsOfNode(cpu, mem, count, "", *_sum_readings(in_window, readings, partial, oldest))


def _sum_readings(
    keys: Iterable[tuple[str, str]],
    readings: Mapping[tuple[str, str], PodMetrics],
    partial: Mapping[tuple[str, str], tuple[PodMetrics, tuple[str, ...]]],
    oldest: float,
) -> tuple[int, int]:
    """The summed CPU millicores and memory bytes of the pods ``keys``' PodMetrics taken at or
    after ``oldest`` (Unix seconds), a partial reading counting for what it reports."""
    cpu = mem = 0
    for key in keys:
        r = readings.get(key)
        if r is None and partial:
            r = partial.get(key, (None,))[0]
        if r is not None and r.timestamp >= oldest:
            cpu += r.cpu_millicores
            mem += r.memory_bytes
    return cpu, mem


def _far_below(node_value: int, pods_value: int, slack: int) -> bool:
    """True when a node's reading is far below its pods' sum (the module's shortfall constants)."""
    shortfall = pods_value - node_value
    return shortfall > slack and shortfall > NODE_METRICS_SHORTFALL_FRACTION * pods_value


def _gpu_figures(
    node: Node, pods: Sequence[Pod], snapshot: ClusterSnapshot, config: ScalerConfig
) -> tuple[float | None, float | None, int]:
    """A GPU node's GPU requests fraction, its real GPU usage fraction where known, and its
    GPU count; ``(None, None, 0)`` for a node without GPUs."""
    if not is_gpu_node(node):
        return None, None, 0
    if node.allocatable.extended.get(RESOURCE_GPU, 0) <= 0 and snapshot.dra.local_slices.get(node.name):
        return None, snapshot.gpu_usage.get(node.name), 0  # its GPUs come from a DRA driver
    gpu = gpu_requests_fraction(node, pods, config, snapshot.now)
    return gpu, snapshot.gpu_usage.get(node.name), node.allocatable.extended.get(RESOURCE_GPU, 0)


def _metrics_status(age: float | None, config: ScalerConfig) -> MetricsStatus:
    """Whether a node's metrics are there and fresh: ``age`` (seconds; ``None``: no NodeMetrics)
    against ``--max-metrics-age``."""
    if age is None:
        return MetricsStatus.MISSING
    if age > config.max_metrics_age:
        return MetricsStatus.STALE
    return MetricsStatus.OK


def _measured_usage(
    node: Node,
    m: NodeMetrics,
    pods: Sequence[Pod],
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    facts: PodFacts | None = None,
    measured: tuple[int, int] | None = None,
) -> tuple[int | None, int | None, int | None, int | None, int, str]:
    """``node``'s real usage from its fresh NodeMetrics ``m`` and its pods' PodMetrics:
    ``(usage cpu millicores, usage memory bytes, destination cpu, destination memory, pods
    pending in the metrics, why the usage is unknown)``; the four figures are ``None`` when it
    is unknown (a pod of unknown usage, or NodeMetrics far below the sum of its pods')."""
    usage_cpu = usage_mem = dest_cpu = dest_mem = None
    newest = snapshot.newest_node_metric(node.name) or m
    of = _pods_of_node(pods, snapshot, config, newest.timestamp - newest.window_seconds, facts, measured)
    pending, unknown = of.pending, of.unknown
    if not unknown and (
        _far_below(newest.cpu_millicores, of.measured_cpu, NODE_METRICS_SHORTFALL_CPU_MILLICORES)
        or _far_below(newest.memory_bytes, of.measured_mem, NODE_METRICS_SHORTFALL_MEMORY_BYTES)
    ):
        unknown = (
            f"NodeMetrics ({newest.cpu_millicores}m cpu, {newest.memory_bytes // 2**20}Mi memory) are far "
            f"below the sum of its pods' PodMetrics ({of.measured_cpu}m cpu, "
            f"{of.measured_mem // 2**20}Mi memory): the node's metrics are not trusted"
        )
    if not unknown:
        # Usage is never below what the node's pods use: a reading below its pods' sum (by
        # less than the shortfall above) is raised by the difference.
        lift_cpu = max(0, of.measured_cpu - newest.cpu_millicores)
        lift_mem = max(0, of.measured_mem - newest.memory_bytes)
        add_cpu, add_mem = of.add_cpu + lift_cpu, of.add_mem + lift_mem
        usage_cpu, usage_mem = m.cpu_millicores + add_cpu, m.memory_bytes + add_mem
        dest_cpu = max(m.cpu_millicores, newest.cpu_millicores) + add_cpu
        dest_mem = max(m.memory_bytes, newest.memory_bytes) + add_mem
    return usage_cpu, usage_mem, dest_cpu, dest_mem, pending, unknown


def _ignored_usage(pods: Sequence[Pod], snapshot: ClusterSnapshot, config: ScalerConfig) -> tuple[int, int]:
    """The PodMetrics usage (millicores, bytes) of the DaemonSet and mirror pods the utilization
    ignores (``--ignore-daemonsets-utilization``, ``--ignore-mirror-pods-utilization``)."""
    skip_cpu = skip_mem = 0
    if config.ignore_daemonsets_utilization or config.ignore_mirror_pods_utilization:
        for p in pods:
            if _ignored(p, config):
                pm = snapshot.pod_metrics.get((p.namespace, p.name))
                if pm is not None:
                    skip_cpu += pm.cpu_millicores
                    skip_mem += pm.memory_bytes
    return skip_cpu, skip_mem


def _dra_figures(
    node: Node, pods: Sequence[Pod], snapshot: ClusterSnapshot, gpus: int
) -> DraUtilization | None:
    """The node's DRA utilization when its devices come from a DRA driver (no GPU allocatable
    and ResourceSlices local to it), else ``None``."""
    if gpus <= 0 and snapshot.dra.local_slices.get(node.name):
        return dra_utilization(node, pods, snapshot.dra)
    return None


def node_utilization(
    node: Node,
    pods: Sequence[Pod],
    snapshot: ClusterSnapshot,
    config: ScalerConfig,
    facts: PodFacts | None = None,
    measured: tuple[int, int] | None = None,
) -> NodeUtilization:
    """Compute the utilization of ``node`` carrying ``pods`` (terminal and expendable pods
    already dropped by the caller) at ``snapshot.now``; ``facts`` (their :func:`pod_facts`)
    and ``measured`` (the sum of their newest fresh PodMetrics) when the caller kept them.

    Returns:
        A :class:`NodeUtilization`; usage fractions are ``None`` when the node is non-empty and
        its usage is unknown (metrics missing or stale, or a pod not yet in them of unknown
        usage), unless the node is NotReady and judged by its requests.
    """
    now = snapshot.now
    req_cpu, req_mem = (facts and facts.requests) or requests_fractions(node, pods, config, now)
    empty = facts.empty if facts is not None else is_empty(pods)
    req_value = max(req_cpu, req_mem)
    m = snapshot.node_metrics.get(node.name)
    age = None if m is None else now - m.timestamp
    status = _metrics_status(age, config)
    usage_cpu = usage_mem = dest_cpu = dest_mem = None
    pending, unknown = 0, ""
    if m is not None and status is MetricsStatus.OK:
        usage_cpu, usage_mem, dest_cpu, dest_mem, pending, unknown = _measured_usage(
            node, m, pods, snapshot, config, facts, measured
        )
    gpu, gpu_usage, gpus = _gpu_figures(node, pods, snapshot, config)

    def result(cpu: float | None, memory: float | None, source: str = "usage") -> NodeUtilization:
        # An empty node reports cpu as its resource, as seed 004's empty-node fix does.
        value, resource = (None, "cpu") if cpu is None or memory is None else _dominant(cpu, memory)
        if empty and source == "usage":
            resource = "cpu"
        return NodeUtilization(
            cpu, memory, value, resource, source, req_cpu, req_mem, req_value, empty, status,
            usage_cpu, usage_mem, age, dest_cpu, dest_mem, pending, unknown, gpu, gpu_usage, gpus,
            _dra_figures(node, pods, snapshot, gpus),
        )  # fmt: skip

    if config.utilization_source == "requests":
        # A fraction of zero allocatable is unknown, not 0 (the node is UnexpectedError anyway).
        return result(
            req_cpu if node.allocatable.cpu_millicores > 0 else None,
            req_mem if node.allocatable.memory_bytes > 0 else None,
            "requests",
        )
    if empty:
        return result(0.0, 0.0)
    if usage_cpu is None or usage_mem is None:
        if not node.ready and config.scale_down_unready_enabled:
            return result(req_cpu, req_mem, SOURCE_UNREADY)
        return result(None, None)
    skip_cpu, skip_mem = _ignored_usage(pods, snapshot, config)
    cpu_den = node.allocatable.cpu_millicores - skip_cpu
    mem_den = node.allocatable.memory_bytes - skip_mem
    # No allocatable left to divide by: the fraction is unknown (reported null), never 0.
    cpu = max(usage_cpu - skip_cpu, 0) / cpu_den if cpu_den > 0 else None
    mem = max(usage_mem - skip_mem, 0) / mem_den if mem_den > 0 else None
    return result(cpu, mem)


# -- devices of Dynamic Resource Allocation ---------------------------------------------------------


def _newest(slices: list[ResourceSlice]) -> tuple[list[ResourceSlice], str]:
    """``allCurrentGenSlices``: the slices of the newest generation; an error when fewer than
    the pool's ``resourceSliceCount`` are there."""
    gen = max(s.generation for s in slices)
    newest = [s for s in slices if s.generation == gen]
    want = newest[0].slice_count
    if len(newest) != want:
        return newest, f"newest generation: {gen}, slice count: {want} - found only {len(newest)} slices"
    return newest, ""


def _pool_utilization(devices: list[Device], taken: set[str], slices: list[ResourceSlice]) -> float:
    """``calculatePoolUtil``: atomic devices by count allocated; partitionable ones (those that
    consume shared counters) by the most used counter of each counter set, averaged over the
    partitionable devices (counted as the distinct counter sets they draw on); a mixed pool
    weighs the two by their device counts."""
    atomic = [d for d in devices if not d.consumes_counters]
    parts = [d for d in devices if d.consumes_counters]
    atomic_util = sum(1 for d in atomic if d.name in taken) / len(atomic) if atomic else 0.0
    allocated_parts = [d for d in parts if d.name in taken]
    if not allocated_parts:
        return atomic_util
    sets = {cc.name for d in parts for cc in d.consumes_counters}
    totals: dict[str, dict[str, Fraction]] = {}
    for s in slices:
        for c in s.shared_counters:
            for name, v in c.counters.items():
                totals.setdefault(c.name, {})[name] = totals.get(c.name, {}).get(name, Fraction(0)) + v
    used: dict[tuple[str, str], Fraction] = {}
    for d in allocated_parts:
        for cc in d.consumes_counters:
            for name, v in cc.counters.items():
                used[(cc.name, name)] = used.get((cc.name, name), Fraction(0)) + v
    part_util = 0.0
    for set_name, counters in totals.items():
        highest = max(
            (float(used.get((set_name, n), 0) / total) for n, total in counters.items() if total),
            default=0.0,
        )
        part_util += highest / len(sets)
    if not any(d.name in taken for d in atomic):
        return part_util
    weight = len(sets) / (len(sets) + len(atomic))
    return part_util * weight + atomic_util * (1 - weight)


def dra_utilization(node: Node, pods: Sequence[Pod], dra: DraObjects) -> DraUtilization:
    """Utilization of the devices of ``node``'s own ResourceSlices, allocated to the claims of
    ``pods`` (its counted pods), as cluster-autoscaler 1.34+ computes it
    (``CalculateDynamicResourceUtilization``, ``HighestDynamicResourceUtilization``): per driver
    and pool, allocated devices over all devices of the newest generation, admin-access
    allocations not counted, partitionable devices by their counters (:func:`_pool_utilization`);
    the node's value is its highest pool's. Fractions 0-1.

    Returns:
        The utilization; its ``error`` says why there is none (an incomplete pool, a claim of
        the pods not allocated or not found), as cluster-autoscaler's error.
    """
    taken: dict[tuple[str, str], set[str]] = {}
    seen: set[tuple[str, str]] = set()
    for p in pods:
        for pc in p.resource_claims:
            key = (p.namespace, pc.claim)
            if key in seen:
                continue
            seen.add(key)
            claim = dra.claims.get(key) if pc.claim else None
            if claim is None or claim.allocation is None:
                what = "not found" if claim is None else "not allocated"
                return DraUtilization(0.0, "", (), f"claim {p.namespace}/{pc.claim or pc.name} {what}")
            for d in claim.allocation.devices:
                if not d.admin_access:
                    taken.setdefault((d.driver, d.pool), set()).add(d.device)
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in dra.local_slices.get(node.name, ()):
        by_pool.setdefault((s.driver, s.pool), []).append(s)
    pools = []
    for (driver, pool), slices in sorted(by_pool.items()):
        newest, error = _newest(slices)
        if error:
            return DraUtilization(0.0, "", (), f"pool {pool!r} error: {error}")
        devices = [d for s in newest for d in s.devices]
        pools.append((driver, pool, _pool_utilization(devices, taken.get((driver, pool), set()), newest)))
    best = max(pools, key=lambda x: x[2], default=("", "", 0.0))
    return DraUtilization(best[2], f"{best[0]}/{best[1]}" if best[0] else "", tuple(pools))
