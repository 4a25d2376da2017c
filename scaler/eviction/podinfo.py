"""What the eviction framework knows about one candidate pod: the pod and its measured usage.

Source: crane's ``pkg/ensurance/executor/podinfo/pod_info.go`` (``PodContext``: key, QoS class,
priority, ``PodCPUUsage``, ``PodMemUsage``, ``StartTime``, ``Executed``) at HEAD 2b0ddae8, and the
proposal (seed 002, "Enrich the sorting strategy of pod"). Differences, on purpose:

* Units are scaler's: CPU in **millicores** (crane's ``PodCPUUsage`` is in cores and multiplied by
  1000 when it is released, ``cpu_usage.go``), memory in bytes, times in Unix seconds.
* The record is immutable. Crane marks ``Executed`` on the pod context inside the slice it sorts;
  here the executor keeps the set of attempted pods itself.
* ``None`` means "not measured", never zero: a pod without PodMetrics sorts after every measured
  pod and releases nothing towards a gap.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scaler.model.records import Pod, PodMetrics

__all__ = ["PodUsage", "clean_quantity", "pod_usages"]


@dataclass(frozen=True, slots=True)
class PodUsage:
    """A candidate pod with the usage the eviction framework sorts and counts by.

    Attributes:
        pod: the pod record.
        cpu_millicores: CPU usage from metrics.k8s.io PodMetrics (millicores), ``None`` when the
            pod has no metrics.
        memory_bytes: memory working set from PodMetrics (bytes), ``None`` when unknown.
        start_ts: when the pod started (Unix seconds), ``None`` when unknown. Crane reads
            ``status.startTime``; :func:`pod_usages` uses the pod's creation time, the closest
            field scaler's slim :class:`~scaler.model.records.Pod` keeps.
        extra: usage of user-defined metrics by name (each metric's own unit), read by the
            ``usage_of`` of plugin metrics (see :mod:`plugins.examples.eviction_metric`).
    """

    pod: Pod
    cpu_millicores: int | None = None
    memory_bytes: int | None = None
    start_ts: float | None = None
    extra: Mapping[str, float] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The pod's ``namespace/name``."""
        return self.pod.key


def clean_quantity(value: float | None) -> float | None:
    """Normalise a measured quantity: ``None``, NaN and ±infinity become ``None`` (unknown);
    a negative value becomes 0.0 (crane clamps node usage the same way, ``maxUsed`` starts at 0
    in ``watermark.go``); anything else is returned as a float."""
    if value is None:
        return None
    v = float(value)
    if not math.isfinite(v):
        return None
    return max(v, 0.0)


def pod_usages(
    pods: Iterable[Pod],
    pod_metrics: Mapping[tuple[str, str], PodMetrics],
    *,
    extra: Mapping[tuple[str, str], Mapping[str, float]] | None = None,
) -> list[PodUsage]:
    """Join pods with their metrics.k8s.io PodMetrics, in the order of ``pods``.

    Args:
        pods: the candidate pods.
        pod_metrics: PodMetrics by ``(namespace, name)``; a pod missing here gets
            ``cpu_millicores=None`` and ``memory_bytes=None`` (unknown, not zero).
        extra: optional user-metric usage by ``(namespace, name)``, copied into
            :attr:`PodUsage.extra`.

    Returns:
        One :class:`PodUsage` per pod; ``start_ts`` is the pod's creation time.
    """
    out: list[PodUsage] = []
    for pod in pods:
        ident = (pod.namespace, pod.name)
        m = pod_metrics.get(ident)
        out.append(
            PodUsage(
                pod=pod,
                cpu_millicores=m.cpu_millicores if m is not None else None,
                memory_bytes=m.memory_bytes if m is not None else None,
                start_ts=pod.creation_ts,
                extra=dict(extra.get(ident, {})) if extra is not None else {},
            )
        )
    return out
