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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from scaler.config import ScalerConfig
from scaler.model.records import Node, Pod
from scaler.model.snapshot import ClusterSnapshot

__all__ = [
    "POD_EVICTION_HEADROOM_SECONDS",
    "MetricsStatus",
    "NodeUtilization",
    "is_empty",
    "is_long_terminating",
    "node_utilization",
    "requests_fractions",
]

POD_EVICTION_HEADROOM_SECONDS = 30  # CA actuation/drain.go DefaultPodEvictionHeadroom


class MetricsStatus(StrEnum):
    """Freshness of a node's NodeMetrics at evaluation time."""

    OK = "ok"
    MISSING = "missing"
    STALE = "stale"


@dataclass(frozen=True, slots=True)
class NodeUtilization:
    """Utilization of one node, fractions 0–1 (may exceed 1 for usage above allocatable).

    Attributes:
        cpu, memory, value: the chosen source's fractions; ``None`` when unknown (usage source
            and no fresh metrics on a non-empty node).
        resource: ``"cpu"`` or ``"memory"``, the dominant resource of ``value``.
        source: ``"usage"`` or ``"requests"``.
        request_cpu, request_memory, request_value: CA's requests-based fractions, always set,
            for side-by-side comparison.
        empty: every counted pod is a DaemonSet or mirror pod.
        metrics: freshness of the node's NodeMetrics.
        usage_cpu_millicores, usage_memory_bytes: the raw NodeMetrics usage when fresh.
        metrics_age_seconds: ``now - NodeMetrics.timestamp``, ``None`` when missing.
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
    for p in pods:
        if is_long_terminating(p, now):
            continue
        if _ignored(p, config):
            cpu_skip += p.requests.cpu_millicores
            mem_skip += p.requests.memory_bytes
            continue
        cpu_req += p.requests.cpu_millicores
        mem_req += p.requests.memory_bytes
    cpu_den = node.allocatable.cpu_millicores - cpu_skip
    mem_den = node.allocatable.memory_bytes - mem_skip
    return (cpu_req / cpu_den if cpu_den > 0 else 0.0, mem_req / mem_den if mem_den > 0 else 0.0)


def _dominant(cpu: float, memory: float) -> tuple[float, str]:
    # CA picks cpu only when strictly greater (``if cpu > mem``), memory otherwise.
    return (cpu, "cpu") if cpu > memory else (memory, "memory")


def node_utilization(
    node: Node, pods: Sequence[Pod], snapshot: ClusterSnapshot, config: ScalerConfig
) -> NodeUtilization:
    """Compute the utilization of ``node`` carrying ``pods`` (terminal and expendable pods
    already dropped by the caller) at ``snapshot.now``.

    Returns:
        A :class:`NodeUtilization`; usage fractions are ``None`` when the node is non-empty and
        its metrics are missing or stale.
    """
    now = snapshot.now
    req_cpu, req_mem = requests_fractions(node, pods, config, now)
    req_value = max(req_cpu, req_mem)
    empty = is_empty(pods)
    m = snapshot.node_metrics.get(node.name)
    age = None if m is None else now - m.timestamp
    if m is None:
        status = MetricsStatus.MISSING
    elif age is not None and age > config.max_metrics_age:
        status = MetricsStatus.STALE
    else:
        status = MetricsStatus.OK
    usage_cpu = m.cpu_millicores if m is not None and status is MetricsStatus.OK else None
    usage_mem = m.memory_bytes if m is not None and status is MetricsStatus.OK else None

    def result(cpu: float | None, memory: float | None, source: str = "usage") -> NodeUtilization:
        # An empty node reports cpu as its resource, as seed 004's empty-node fix does.
        value, resource = (None, "cpu") if cpu is None or memory is None else _dominant(cpu, memory)
        if empty and source == "usage":
            resource = "cpu"
        return NodeUtilization(
            cpu,
            memory,
            value,
            resource,
            source,
            req_cpu,
            req_mem,
            req_value,
            empty,
            status,
            usage_cpu,
            usage_mem,
            age,
        )

    if config.utilization_source == "requests":
        return result(req_cpu, req_mem, "requests")
    if empty:
        return result(0.0, 0.0)
    if usage_cpu is None or usage_mem is None:
        return result(None, None)
    skip_cpu = skip_mem = 0
    if config.ignore_daemonsets_utilization or config.ignore_mirror_pods_utilization:
        for p in pods:
            if _ignored(p, config):
                pm = snapshot.pod_metrics.get((p.namespace, p.name))
                if pm is not None:
                    skip_cpu += pm.cpu_millicores
                    skip_mem += pm.memory_bytes
    cpu_den = node.allocatable.cpu_millicores - skip_cpu
    mem_den = node.allocatable.memory_bytes - skip_mem
    cpu = max(usage_cpu - skip_cpu, 0) / cpu_den if cpu_den > 0 else 0.0
    mem = max(usage_mem - skip_mem, 0) / mem_den if mem_den > 0 else 0.0
    return result(cpu, mem)
