"""Waterlines (thresholds per metric) and the gaps between a node's usage and them.

Source: crane's ``pkg/ensurance/executor/watermark.go`` at HEAD 2b0ddae8 (v1: ``waterline.go``,
commit e2d0b850) — ``Watermark`` (a min-heap of thresholds, ``PopSmallest``), ``Watermarks``,
``Gaps`` / ``GapToWaterLines``, ``calculateGaps`` (v1 ``buildGapToWaterLine``), ``GapsAllRemoved``,
``TargetGapsRemoved``, ``HasUsageMissedMetric`` — and the proposal (seed 002, "How to control
accurately according to the water level"). Differences, on purpose:

* Gaps are built only for metrics that **have** a waterline. Crane walks every *registered*
  evictable metric first, so a registered metric the collector does not report marks the gaps
  "usage missed" and disables precise eviction even when nobody set a waterline on it
  (crane defect (g)).
* A waterline on a metric that is not registered, or not evictable, is an
  :class:`~scaler.eviction.metrics.EvictionConfigError`. In crane the metric looks up as a zero
  ``metric`` (not quantified), which silently turns on "evict every pod".
* Thresholds and usage are floats compared exactly; crane compares ``resource.Quantity.Value()``,
  which rounds up to an integer (``"20m"`` → 1).
* "Usage missed" is ``math.inf`` (crane: ``math.MaxFloat64``), and :class:`Gaps` is immutable.
* Only the eviction direction exists (usage − waterline); throttle-down/up gaps are not built, so
  crane defect (a) (throttle-up gaps overwrite throttle-down ones) cannot occur, and the caller
  passes one usage value per metric, not time series (crane defect (d) read only ``series[0]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from scaler.eviction.metrics import EvictionConfigError, MetricRegistry
from scaler.eviction.podinfo import clean_quantity

__all__ = ["USAGE_MISSED", "Gaps", "Threshold", "Waterlines", "calculate_gaps"]

USAGE_MISSED = math.inf
"""The gap of a metric whose node usage is unknown (crane ``MissedCurrentUsage``)."""


@dataclass(frozen=True, slots=True)
class Threshold:
    """One waterline value for a metric, in the metric's unit, and where it came from (a policy
    or rule name; crane: one ``objectiveEnsurance.metricRule.value`` of a NodeQOS policy)."""

    value: float
    source: str = ""


class Waterlines:
    """Per metric, the thresholds set by several sources; the effective waterline of a metric is
    the **smallest** (crane ``Watermark`` min-heap, ``PopSmallest`` = ``wl[0]``). Immutable:
    :meth:`add` returns a new object.

    ``Waterlines({"cpu_total_usage": [1800, 1500], "memory_total_usage": 6 * 2**30})`` has two
    CPU thresholds (effective 1500 millicores) and one memory threshold.
    """

    __slots__ = ("_by_metric",)

    def __init__(self, thresholds: Mapping[str, float | Iterable[float]] | None = None) -> None:
        """Build from ``{metric: value or values}``; sources are left empty.

        Raises:
            ValueError: a value is negative, NaN or infinite, or a metric has no value.
        """
        self._by_metric: dict[str, tuple[Threshold, ...]] = {}
        for metric, values in (thresholds or {}).items():
            vals = [values] if isinstance(values, int | float) else list(values)
            if not vals:
                raise ValueError(f"waterline for {metric!r} has no value")
            for v in vals:
                self._by_metric = _with(self._by_metric, metric, Threshold(_check(metric, v)))

    def add(self, metric: str, value: float, source: str = "") -> Waterlines:
        """A copy with one more threshold ``value`` (metric unit) for ``metric`` from ``source``.

        Raises:
            ValueError: ``value`` is negative, NaN or infinite.
        """
        out = Waterlines()
        out._by_metric = _with(self._by_metric, metric, Threshold(_check(metric, value), source))
        return out

    def metrics(self) -> tuple[str, ...]:
        """The metrics that have at least one threshold, sorted."""
        return tuple(sorted(self._by_metric))

    def thresholds(self, metric: str) -> tuple[Threshold, ...]:
        """Every threshold of ``metric``, smallest first (``()`` when none)."""
        return self._by_metric.get(metric, ())

    def effective_threshold(self, metric: str) -> Threshold | None:
        """The smallest threshold of ``metric`` (the first source to set it on ties), or ``None``."""
        ts = self._by_metric.get(metric)
        return ts[0] if ts else None

    def effective(self, metric: str) -> float | None:
        """The effective waterline of ``metric``: the smallest of its thresholds, or ``None``."""
        t = self.effective_threshold(metric)
        return None if t is None else t.value

    def all_zero(self) -> bool:
        """True when there is at least one waterline and every effective waterline is 0 — the
        "bring usage to nothing" case, i.e. a drain."""
        return bool(self._by_metric) and all(ts[0].value == 0 for ts in self._by_metric.values())

    def __contains__(self, metric: object) -> bool:
        """Whether ``metric`` has a waterline."""
        return metric in self._by_metric

    def __iter__(self) -> Iterator[str]:
        """The metrics with a waterline, sorted."""
        return iter(self.metrics())

    def __len__(self) -> int:
        """How many metrics have a waterline."""
        return len(self._by_metric)

    def __eq__(self, other: object) -> bool:
        """Equal when both have the same thresholds (values and sources) per metric."""
        return isinstance(other, Waterlines) and self._by_metric == other._by_metric

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        """``Waterlines({metric: [values...]})``."""
        inner = {m: [t.value for t in ts] for m, ts in sorted(self._by_metric.items())}
        return f"Waterlines({inner!r})"


def _check(metric: str, value: float) -> float:
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"waterline for {metric!r} must be a finite number ≥ 0, got {value!r}")
    return v


def _with(
    current: dict[str, tuple[Threshold, ...]], metric: str, t: Threshold
) -> dict[str, tuple[Threshold, ...]]:
    out = dict(current)
    # sorted() is stable: among equal values the earlier source stays first
    out[metric] = tuple(sorted((*current.get(metric, ()), t), key=lambda x: x.value))
    return out


class Gaps(Mapping[str, float]):
    """How far each waterline metric's node usage is above its effective waterline, in the
    metric's unit: positive = that much must be released; ≤ 0 = nothing to do;
    :data:`USAGE_MISSED` (``inf``) = the usage is unknown. A read-only mapping by metric name;
    :meth:`minus` returns an updated copy. Crane ``Gaps`` / v1 ``GapToWaterLines``."""

    __slots__ = ("_gaps",)

    def __init__(self, gaps: Mapping[str, float] | None = None) -> None:
        """Wrap ``{metric: gap}`` (copied)."""
        self._gaps: dict[str, float] = {k: float(v) for k, v in sorted((gaps or {}).items())}

    def __getitem__(self, metric: str) -> float:
        """The gap of ``metric``.

        Raises:
            KeyError: ``metric`` has no gap (no waterline).
        """
        return self._gaps[metric]

    def __iter__(self) -> Iterator[str]:
        """Metric names, sorted."""
        return iter(self._gaps)

    def __len__(self) -> int:
        """How many metrics have a gap entry."""
        return len(self._gaps)

    def __repr__(self) -> str:
        """``Gaps({metric: gap})``."""
        return f"Gaps({self._gaps!r})"

    def target_gaps_removed(self, metric: str) -> bool:
        """True when ``metric`` has no gap entry or its gap is ≤ 0 (crane ``TargetGapsRemoved``)."""
        g = self._gaps.get(metric)
        return g is None or g <= 0

    def all_removed(self) -> bool:
        """True when no gap is positive (crane ``GapsAllRemoved``)."""
        return all(g <= 0 for g in self._gaps.values())

    def usage_missed(self) -> tuple[str, ...]:
        """The metrics whose node usage is unknown, sorted."""
        return tuple(m for m, g in self._gaps.items() if g == USAGE_MISSED)

    def has_usage_missed(self) -> bool:
        """True when some metric's node usage is unknown (crane ``HasUsageMissedMetric``)."""
        return bool(self.usage_missed())

    def minus(self, released: Mapping[str, float]) -> Gaps:
        """A copy with ``released[m]`` subtracted from the gap of every metric ``m`` present in
        both; other entries are unchanged, and a missed usage stays :data:`USAGE_MISSED`."""
        out = dict(self._gaps)
        for m, amount in released.items():
            if m in out and out[m] != USAGE_MISSED:
                out[m] -= amount
        return Gaps(out)


def calculate_gaps(
    node_usage: Mapping[str, float | None],
    waterlines: Waterlines,
    registry: MetricRegistry,
    *,
    excess_fraction: float = 0.0,
) -> Gaps:
    """The gap of every metric that has a waterline:
    ``(1 + excess_fraction) × (usage − effective waterline)``.

    Args:
        node_usage: the node's current usage by each metric's ``node_usage_key`` (metric unit).
            A missing key, ``None``, NaN or infinity is "usage missed" (gap :data:`USAGE_MISSED`);
            a negative usage counts as 0 (as crane's ``maxUsed``).
        waterlines: thresholds per metric; the smallest of each applies.
        registry: the known metrics.
        excess_fraction: release this fraction more than the bare gap (crane
            ``executeExcessPercent``); 0 by default.

    Raises:
        EvictionConfigError: a waterline names a metric that is not registered or not evictable.
        ValueError: ``excess_fraction`` is negative, NaN or infinite.

    Crane ``calculateGaps`` (``watermark.go``), built only for waterline metrics (defect (g)).
    """
    if not math.isfinite(excess_fraction) or excess_fraction < 0:
        raise ValueError(f"excess_fraction must be a finite number ≥ 0, got {excess_fraction!r}")
    gaps: dict[str, float] = {}
    for name in waterlines.metrics():
        metric = registry.get(name)
        if metric is None:
            known = ", ".join(registry.names()) or "none"
            raise EvictionConfigError(f"waterline on unknown eviction metric {name!r}; known: {known}")
        if not metric.evictable:
            raise EvictionConfigError(f"waterline on eviction metric {name!r}, which is not evictable")
        used = clean_quantity(node_usage.get(metric.node_usage_key))
        wl = waterlines.effective(name)
        assert wl is not None  # every listed metric has a threshold
        gaps[name] = USAGE_MISSED if used is None else (1.0 + excess_fraction) * (used - wl)
    return Gaps(gaps)
