"""Pod comparators and sorters: which candidate pod is evicted first.

Source: crane's ``pkg/ensurance/executor/sort/{sort.go, general_sort.go, cpu_usage_sort.go,
mem_usage_sort.go}`` at HEAD 2b0ddae8 (comparator semantics changed in 01ea2e7f) and the proposal
(seed 002, "Enrich the sorting strategy of pod"). A :data:`Comparator` returns a negative number
when its first pod is to be evicted **before** the second, positive when after, 0 when it cannot
tell; :func:`ordered_by` asks each comparator in turn and the first non-zero answer wins.

We follow crane's HEAD order, not v1's: lower priority first, then QoS class, then the metric's
usage **descending** (v1 sorted CPU usage ascending, which evicts the pods that free the least
first), then newest first. Differences from crane, on purpose:

* The sort is stable and ends with the pod key (then uid), so the order never depends on the
  input order (crane uses Go's unstable ``sort.Sort``; equal pods come out in any order).
* Usage is compared exactly. Crane's ``utils.CmpFloat`` treats values within 1e-9 as equal, which
  is not transitive and can make a sort inconsistent.
* A pod whose usage is unknown sorts **after** every measured pod (crane has no "unknown" and
  reads a missing usage as 0).
* Crane's elastic-CPU comparators (``UseElasticCPU``, ``CompareElasticCPU``, the ``gocrane.io/cpu``
  extended resource) have no GKE counterpart and are left out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cmp_to_key
from typing import Protocol

from scaler.eviction.podinfo import PodUsage, clean_quantity
from scaler.model.records import QoSClass

__all__ = [
    "Comparator",
    "PodSorter",
    "UsageFn",
    "UsageSource",
    "class_and_priority",
    "general_sorter",
    "ordered_by",
    "running_time",
    "usage",
]

Comparator = Callable[[PodUsage, PodUsage], int]
"""``cmp(a, b)``: negative ⇒ ``a`` is evicted earlier, positive ⇒ later, 0 ⇒ undecided."""

UsageFn = Callable[[PodUsage], float | None]
"""The quantity of a metric a pod uses (and would release if evicted), ``None`` when unknown."""


class UsageSource(Protocol):
    """Anything with a ``usage_of`` function, e.g. an
    :class:`~scaler.eviction.metrics.EvictionMetric`."""

    @property
    def usage_of(self) -> UsageFn:
        """The metric's per-pod usage function."""
        ...


_QOS_RANK = {QoSClass.BEST_EFFORT: 0, QoSClass.BURSTABLE: 1, QoSClass.GUARANTEED: 2}


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def class_and_priority(a: PodUsage, b: PodUsage) -> int:
    """Lower pod priority first; within a priority, QoS class BestEffort < Burstable < Guaranteed.

    Crane HEAD ``ComparePriority`` then ``ComparePodQOSClass`` (``sort/sort.go``); v1's
    ``classAndPriority`` compared QoS first, HEAD (and scaler) compares priority first.
    """
    by_priority = _sign(a.pod.priority - b.pod.priority)
    if by_priority:
        return by_priority
    return _sign(_QOS_RANK[a.pod.qos_class] - _QOS_RANK[b.pod.qos_class])


def usage(source: UsageFn | UsageSource) -> Comparator:
    """A comparator by a metric's usage, **highest first**; a pod with unknown usage (``None``,
    NaN, infinite) sorts after every measured pod; negative values count as 0.

    ``source`` is the metric (anything with ``usage_of``) or the usage function itself. Crane HEAD
    ``CompareCPUUsage`` / ``CompareMemUsage`` (``sort/cpu_usage_sort.go``, ``mem_usage_sort.go``),
    compared exactly instead of with a 1e-9 tolerance.
    """
    fn: UsageFn = source if callable(source) else source.usage_of

    def compare(a: PodUsage, b: PodUsage) -> int:
        """Highest usage first; unknown usage last."""
        ua, ub = clean_quantity(fn(a)), clean_quantity(fn(b))
        if ua is None or ub is None:
            return (ua is None) - (ub is None)
        return _sign(ub - ua)

    return compare


def running_time(a: PodUsage, b: PodUsage) -> int:
    """Newest pod first (largest ``start_ts``); a pod whose start is unknown sorts **first**.

    Crane ``CompareRunningTime`` (``sort/sort.go``): ``metav1.Time.Before`` and ``Equal`` make a
    nil ``StartTime`` sort before every known one; the pod that has run longest is evicted last.
    """
    sa, sb = a.start_ts, b.start_ts
    if sa is None or sb is None:
        return (sb is None) - (sa is None)
    return _sign(sb - sa)


def _by_key(a: PodUsage, b: PodUsage) -> int:
    """Final tie-break: pod key, then uid (so equal pods have one order whatever the input)."""
    ka, kb = (a.pod.key, a.pod.uid), (b.pod.key, b.pod.uid)
    return (ka > kb) - (ka < kb)


@dataclass(frozen=True, slots=True)
class PodSorter:
    """A stable sort over :class:`PodUsage` lists by ``comparators`` in turn, ties broken by pod
    key then uid. Build one with :func:`ordered_by`; call it with pods to get a new sorted list.
    Crane's ``orderedBy(...).Sort`` (``sort/sort.go``), which sorts in place and unstably."""

    comparators: tuple[Comparator, ...]

    def compare(self, a: PodUsage, b: PodUsage) -> int:
        """The composite comparator (including the key tie-break); usable as the ``sort`` of an
        :class:`~scaler.eviction.metrics.EvictionMetric` or inside another :func:`ordered_by`."""
        for cmp in self.comparators:
            r = cmp(a, b)
            if r:
                return r
        return _by_key(a, b)

    def __call__(self, pods: Iterable[PodUsage]) -> list[PodUsage]:
        """Return ``pods`` sorted, first evicted first (the input is not changed)."""
        return sorted(pods, key=cmp_to_key(self.compare))


def ordered_by(*comparators: Comparator) -> PodSorter:
    """A :class:`PodSorter` that asks ``comparators`` in order; the first non-zero answer decides,
    and pods that every comparator finds equal are ordered by key (then uid)."""
    return PodSorter(tuple(comparators))


general_sorter: PodSorter = ordered_by(class_and_priority, running_time)
"""The order when a metric has no sort of its own: priority, QoS, newest first (crane HEAD
``GeneralSorter``, ``sort/general_sort.go``)."""
