"""Eviction metrics: what a waterline can be set on, how pods are sorted for it, and how much of
it evicting a pod releases.

Source: crane's ``pkg/ensurance/executor/metric.go`` (the ``metric`` struct and
``registerMetricMap``), ``cpu_usage.go`` and ``mem_usage.go`` (the registered metrics and their
released amounts) at HEAD 2b0ddae8, and the proposal (seed 002, "Definition of metric attribute").
Differences, on purpose:

* A metric says how much a pod *would* release (:attr:`EvictionMetric.usage_of`) instead of
  carrying an ``EvictFunc`` that both evicts and reports a release. The executor evicts through
  the one injected :class:`~scaler.eviction.executor.Evictor` and credits the release only after
  the eviction succeeded (crane defect (e): released counted even when the eviction fails).
* Registering a name twice is an error (crane's ``registerMetricMap`` silently overwrites).
* :meth:`MetricRegistry.highest_priority_evictable` breaks ties by name (crane scans a Go map with
  ``>=``, so equal priorities pick an arbitrary metric).
* Throttling is not implemented; its attributes are kept, reserved, and must stay ``False``.
* Third-party metrics come from the entry-point group ``scaler.eviction_metrics``
  (:func:`load_metric_plugins`), where crane needs a code change and ``init()`` registration.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint

from scaler.entrypoints import EntryPointError, entry_points_of, find, load
from scaler.errors import InputError
from scaler.eviction.podinfo import PodUsage, clean_quantity
from scaler.eviction.sort import (
    Comparator,
    PodSorter,
    UsageFn,
    class_and_priority,
    general_sorter,
    ordered_by,
    running_time,
    usage,
)
from scaler.model.records import NodeMetrics

__all__ = [
    "CPU_TOTAL_USAGE",
    "ENTRY_POINT_GROUP",
    "MAX_ACTION_PRIORITY",
    "MEMORY_TOTAL_USAGE",
    "EvictionConfigError",
    "EvictionMetric",
    "MetricRegistry",
    "cpu_total_usage",
    "default_registry",
    "load_metric_plugins",
    "memory_total_usage",
    "node_usage_from_metrics",
]

CPU_TOTAL_USAGE = "cpu_total_usage"
"""Name of the built-in CPU metric (crane ``types.MetricNameCpuTotalUsage``); unit millicores."""

MEMORY_TOTAL_USAGE = "memory_total_usage"
"""Name of the built-in memory metric (crane ``types.MetricNameMemoryTotalUsage``); unit bytes."""

MAX_ACTION_PRIORITY = 10
"""Highest :attr:`EvictionMetric.action_priority` (crane: "0 is the lowest and 10 is the highest")."""

ENTRY_POINT_GROUP = "scaler.eviction_metrics"
"""The entry-point group third-party eviction metrics register under."""


class EvictionConfigError(InputError, ValueError):
    """The eviction configuration cannot be used: a metric plugin is unknown, cannot be loaded,
    does not build an :class:`EvictionMetric`, or clashes with a registered name; or a waterline
    names a metric that is not registered or not evictable. The message names the culprit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictionMetric:
    """A metric the eviction framework can act on (crane ``executor/metric.go`` ``metric``).

    Attributes:
        name: the metric name waterlines are keyed by (crane ``WatermarkMetric``).
        action_priority: 0 (lowest) to 10 (highest). When precise eviction is impossible, the
            evictable waterline metric with the highest priority (ties: smallest name) picks the
            order in which every candidate pod is evicted; in precise mode metrics are worked on
            in descending priority. Crane gives incompressible metrics (memory) a higher one.
        usage_of: the quantity of this metric a pod uses, in the metric's unit, which is what
            evicting the pod releases; ``None`` when unknown. Negative values count as 0, NaN and
            infinities as unknown (:meth:`released_by`).
        sortable: whether the metric orders pods itself. ``False``: the general sorter
            (priority, QoS, newest first) is used.
        sort: the complete comparator for this metric (e.g.
            ``ordered_by(class_and_priority, usage(fn), running_time).compare``). ``None`` with
            ``sortable``: crane HEAD's per-metric order ``class_and_priority``, ``usage(self)``,
            ``running_time``.
        evictable: whether evicting pods lowers this metric. A waterline on a metric that is not
            evictable is a configuration error for the eviction executor.
        evict_quantified: whether :attr:`usage_of` is what eviction releases, so the executor can
            stop at the waterline. A waterline on an unquantified metric makes the executor evict
            every candidate pod (crane's fallback). Requires ``evictable``.
        node_usage_key: key of the node's usage of this metric in the ``node_usage`` mapping given
            to the executor; defaults to ``name``.
        unit: the metric's unit, for documentation and messages (``"millicores"``, ``"bytes"``).
        throttleable: reserved for throttling (crane ``Throttleable``); must be ``False``.
        throttle_quantified: reserved (crane ``ThrottleQuantified``); must be ``False``.

    Raises:
        ValueError: empty name, ``action_priority`` not an int in 0–10, ``evict_quantified``
            without ``evictable``, a reserved throttle attribute set, or ``usage_of`` / ``sort``
            not callable.
    """

    name: str
    action_priority: int
    usage_of: UsageFn
    sortable: bool = True
    sort: Comparator | None = None
    evictable: bool = True
    evict_quantified: bool = True
    node_usage_key: str = ""
    unit: str = ""
    throttleable: bool = False
    throttle_quantified: bool = False

    def __post_init__(self) -> None:
        """Validate the attributes and default ``node_usage_key`` to ``name``."""
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"eviction metric name must be a non-empty string, got {self.name!r}")
        prio = self.action_priority
        if isinstance(prio, bool) or not isinstance(prio, int) or not 0 <= prio <= MAX_ACTION_PRIORITY:
            raise ValueError(
                f"eviction metric {self.name!r}: action_priority must be an int in "
                f"0..{MAX_ACTION_PRIORITY}, got {prio!r}"
            )
        if self.evict_quantified and not self.evictable:
            raise ValueError(f"eviction metric {self.name!r}: evict_quantified requires evictable")
        if self.throttleable or self.throttle_quantified:
            raise ValueError(
                f"eviction metric {self.name!r}: throttleable/throttle_quantified are reserved; "
                "scaler does not throttle pods"
            )
        if not callable(self.usage_of):
            raise ValueError(f"eviction metric {self.name!r}: usage_of must be callable")
        if self.sort is not None and not callable(self.sort):
            raise ValueError(f"eviction metric {self.name!r}: sort must be callable or None")
        if not self.node_usage_key:
            object.__setattr__(self, "node_usage_key", self.name)

    def released_by(self, pod: PodUsage) -> float | None:
        """What evicting ``pod`` releases of this metric (its cleaned :attr:`usage_of`), in the
        metric's unit; ``None`` when unknown (it then counts as 0 towards a gap)."""
        return clean_quantity(self.usage_of(pod))

    @property
    def sorter(self) -> PodSorter:
        """The order pods are evicted in for this metric: :data:`general_sorter` when not
        ``sortable``; ``ordered_by(sort)`` when ``sort`` is given; else crane HEAD's
        ``ordered_by(class_and_priority, usage(self), running_time)``. Crane: ``SortFunc`` if
        ``Sortable``, else ``GeneralSorter`` (``evict.go``)."""
        if not self.sortable:
            return general_sorter
        if self.sort is not None:
            return ordered_by(self.sort)
        return ordered_by(class_and_priority, usage(self.usage_of), running_time)


def _cpu_usage(pod: PodUsage) -> float | None:
    return None if pod.cpu_millicores is None else float(pod.cpu_millicores)


def _memory_usage(pod: PodUsage) -> float | None:
    return None if pod.memory_bytes is None else float(pod.memory_bytes)


def cpu_total_usage() -> EvictionMetric:
    """The built-in ``cpu_total_usage`` metric: node CPU usage in **millicores**; a pod releases
    its PodMetrics CPU usage. Priority 5, evictable and quantified; sorted by priority/QoS, CPU
    usage descending, newest first. Crane ``cpu_usage.go`` (``releaseCPUUsage`` for Evict:
    ``PodCPUUsage × 1000``) and ``sort/cpu_usage_sort.go`` without the elastic-CPU comparators."""
    return EvictionMetric(
        name=CPU_TOTAL_USAGE,
        action_priority=5,
        usage_of=_cpu_usage,
        sort=ordered_by(class_and_priority, usage(_cpu_usage), running_time).compare,
        unit="millicores",
    )


def memory_total_usage() -> EvictionMetric:
    """The built-in ``memory_total_usage`` metric: node memory usage in **bytes**; a pod releases
    its PodMetrics working set. Priority 5, evictable and quantified; sorted by priority/QoS,
    memory usage descending, newest first. Crane ``mem_usage.go`` and ``sort/mem_usage_sort.go``."""
    return EvictionMetric(
        name=MEMORY_TOTAL_USAGE,
        action_priority=5,
        usage_of=_memory_usage,
        sort=ordered_by(class_and_priority, usage(_memory_usage), running_time).compare,
        unit="bytes",
    )


class MetricRegistry:
    """The eviction metrics known to one executor, by name (crane's package-global ``metricMap``,
    here an ordinary object so tests and controllers do not share state)."""

    __slots__ = ("_metrics",)

    def __init__(self, metrics: Iterable[EvictionMetric] = ()) -> None:
        """Start with ``metrics`` registered in order.

        Raises:
            ValueError: two of them share a name.
        """
        self._metrics: dict[str, EvictionMetric] = {}
        for m in metrics:
            self.register(m)

    def register(self, metric: EvictionMetric) -> None:
        """Add ``metric``.

        Raises:
            TypeError: ``metric`` is not an :class:`EvictionMetric`.
            ValueError: a metric with that name is already registered.
        """
        if not isinstance(metric, EvictionMetric):
            raise TypeError(f"not an EvictionMetric: {metric!r}")
        if metric.name in self._metrics:
            raise ValueError(f"eviction metric {metric.name!r} is already registered")
        self._metrics[metric.name] = metric

    def get(self, name: str) -> EvictionMetric | None:
        """The metric called ``name``, or ``None``."""
        return self._metrics.get(name)

    def __getitem__(self, name: str) -> EvictionMetric:
        """The metric called ``name``.

        Raises:
            KeyError: no such metric.
        """
        return self._metrics[name]

    def __contains__(self, name: object) -> bool:
        """Whether a metric called ``name`` is registered."""
        return name in self._metrics

    def __iter__(self) -> Iterator[EvictionMetric]:
        """The metrics, by name."""
        return iter([self._metrics[n] for n in sorted(self._metrics)])

    def __len__(self) -> int:
        """How many metrics are registered."""
        return len(self._metrics)

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._metrics))

    def copy(self) -> MetricRegistry:
        """An independent registry with the same metrics."""
        return MetricRegistry(self)

    def evictable(self) -> tuple[EvictionMetric, ...]:
        """The evictable metrics, highest ``action_priority`` first, then by name
        (crane ``GetEvictAbleMetricName``, in a deterministic order)."""
        return tuple(
            sorted(
                (m for m in self._metrics.values() if m.evictable),
                key=lambda m: (-m.action_priority, m.name),
            )
        )

    def highest_priority_evictable(self, among: Iterable[str] | None = None) -> EvictionMetric | None:
        """The evictable metric with the highest ``action_priority``, ties broken by the smallest
        name, or ``None`` when there is none.

        Args:
            among: restrict the choice to these names (the executor passes the metrics that have
                a waterline, as crane's ``Watermarks.GetHighestPriorityEvictableMetric``); names
                that are not registered are ignored.
        """
        allowed = None if among is None else set(among)
        for m in self.evictable():
            if allowed is None or m.name in allowed:
                return m
        return None


def default_registry() -> MetricRegistry:
    """A new registry with the built-in metrics :func:`cpu_total_usage` and
    :func:`memory_total_usage` (crane HEAD also registers the percent variants
    ``cpu_total_utilization`` / ``memory_total_utilization``; scaler's waterlines are absolute)."""
    return MetricRegistry([cpu_total_usage(), memory_total_usage()])


def node_usage_from_metrics(node_metrics: NodeMetrics | None) -> dict[str, float | None]:
    """The node usage of the built-in metrics from a metrics.k8s.io NodeMetrics:
    ``{"cpu_total_usage": millicores, "memory_total_usage": bytes}``, both ``None`` when the node
    has no metrics (the executor then cannot evict precisely; "usage missed")."""
    if node_metrics is None:
        return {CPU_TOTAL_USAGE: None, MEMORY_TOTAL_USAGE: None}
    return {
        CPU_TOTAL_USAGE: float(node_metrics.cpu_millicores),
        MEMORY_TOTAL_USAGE: float(node_metrics.memory_bytes),
    }


def _entry_points() -> dict[str, EntryPoint]:
    try:
        return entry_points_of(ENTRY_POINT_GROUP, "eviction metric plugin")
    except EntryPointError as e:
        raise EvictionConfigError(str(e)) from e


def _build(ep: EntryPoint) -> EvictionMetric:
    """Load an entry point and build its metric.

    The target may be an :class:`EvictionMetric` instance, or a zero-argument callable (function
    or class) returning one.

    Raises:
        EvictionConfigError: the import or the call fails, or no EvictionMetric comes out.
    """
    where = f"eviction metric plugin {ep.name!r} ({ep.value!r})"
    try:
        obj = load(ep, "eviction metric plugin")
    except EntryPointError as e:
        raise EvictionConfigError(str(e)) from e
    if isinstance(obj, EvictionMetric):
        return obj
    if not callable(obj):
        raise EvictionConfigError(f"{where} is neither an EvictionMetric nor callable")
    try:
        metric = obj()
    except Exception as e:
        raise EvictionConfigError(f"cannot create {where}: {e}") from e
    if not isinstance(metric, EvictionMetric):
        raise EvictionConfigError(f"{where} returned {type(metric).__name__}, not an EvictionMetric")
    return metric


def load_metric_plugins(registry: MetricRegistry, names: Iterable[str] | None = None) -> tuple[str, ...]:
    """Register the user metrics found under the entry-point group ``scaler.eviction_metrics``.

    A distribution adds one in its ``pyproject.toml``::

        [project.entry-points."scaler.eviction_metrics"]
        MyMetric = "my_package.metrics:my_metric"   # zero-arg callable -> EvictionMetric

    Args:
        registry: the registry to add to; it is changed only when every plugin loads (all or
            nothing).
        names: entry-point names to load; ``None`` loads every registered one, by name.

    Returns:
        The names of the metrics added, in entry-point name order (or the order of ``names``).

    Raises:
        EvictionConfigError: a name is unknown (the message lists the available ones), an entry
            point cannot be loaded or built, it does not produce an :class:`EvictionMetric`, or
            its metric name is already registered or produced twice.
    """
    eps = _entry_points()
    if names is None:
        wanted = sorted(eps)
    else:
        wanted = list(dict.fromkeys(names))
        for n in wanted:
            try:
                find(ENTRY_POINT_GROUP, n, "eviction metric plugin")
            except EntryPointError as e:
                raise EvictionConfigError(str(e)) from e
    built: list[EvictionMetric] = []
    seen: dict[str, str] = {}
    for n in wanted:
        metric = _build(eps[n])
        if metric.name in registry or metric.name in seen:
            other = seen.get(metric.name, "the registry")
            raise EvictionConfigError(
                f"eviction metric plugin {n!r} defines metric {metric.name!r}, already defined by {other}"
            )
        seen[metric.name] = f"plugin {n!r}"
        built.append(metric)
    for metric in built:
        registry.register(metric)
    return tuple(m.name for m in built)
