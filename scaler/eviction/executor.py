"""The eviction executor: evict candidate pods until the node is back under its waterlines.

Source: crane's ``pkg/ensurance/executor/evict.go`` (``EvictExecutor.Avoid``, ``evictPods``) and
``cpu_usage.go`` / ``mem_usage.go`` (``EvictFunc``, released amounts) at HEAD 2b0ddae8, and the
proposal (seed 002, "Precise operation of pod based on water level", "Executor phase"). The core is
pure: the one side effect, evicting a pod through the Kubernetes Eviction API, is the injected
:class:`Evictor`.

Differences from crane, on purpose:

* A pod's release is credited only after its eviction **succeeded** (crane defect (e) computes
  ``released`` before the asynchronous eviction, so a failed eviction still closes the gap).
* Evicting a pod credits **every** gap it has usage for — its CPU and its memory — (crane
  decrements only the gap of the metric being worked on, so a memory gap already closed by CPU
  evictions causes more evictions).
* Errors are returned in :attr:`ExecutionResult.failed`, one entry per pod, in a deterministic
  order; an exception raised by a live evictor becomes an entry too (crane defect (f) appends
  errors inside the goroutine to a slice that has already been returned: they are lost, and
  racy). A simulated evictor's exception (``record_errors=False``) propagates: it is a bug.
* Metrics are worked on in descending ``action_priority`` then name; the fallback evicts in the
  order of a sorter (crane iterates a Go map, and its fallback ``evictPods`` uses whatever order
  the pod slice happens to be in).
* The fallback's metric is chosen deterministically (ties by name).
* Evictions can run in parallel (``parallelism``) without changing which pods are chosen when all
  succeed, nor the order results are reported in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol

from scaler.eviction.metrics import EvictionMetric, MetricRegistry
from scaler.eviction.podinfo import PodUsage
from scaler.eviction.sort import PodSorter, general_sorter
from scaler.eviction.waterline import Gaps, Waterlines, calculate_gaps
from scaler.model.records import Pod

__all__ = ["EvictResult", "Evictor", "ExecutionMode", "ExecutionResult", "drain", "execute"]

ExecutionMode = Literal["precise", "all"]
"""``"precise"``: evicted just enough to close the gaps; ``"all"``: every candidate was tried."""


@dataclass(frozen=True, slots=True)
class EvictResult:
    """The outcome of one eviction: ``ok``, or the ``error`` (e.g. ``"429: disruption budget"``)."""

    ok: bool
    error: str | None = None


class Evictor(Protocol):
    """Evicts one pod (the live controller posts a policy/v1 Eviction). Must be safe to call from
    several threads when ``parallelism > 1``. It may raise; the exception is recorded as a
    failure of that pod, never dropped (or propagated, when the caller asks the executor not to
    record errors: a simulated evictor)."""

    def __call__(self, pod: Pod) -> EvictResult:
        """Evict ``pod`` and report whether the API accepted it."""
        ...


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """What an execution did.

    Attributes:
        evicted: pods evicted successfully, in :attr:`order`.
        failed: ``(pod, error)`` for every eviction that failed or raised, in :attr:`order`.
        released: per registered evict-quantified metric, the sum of what the evicted pods
            released (metric unit; pods with unknown usage count 0).
        remaining_gaps: the gaps after the successful evictions were credited (empty for
            :func:`drain`; ``inf`` stays ``inf``).
        mode: ``"precise"`` or ``"all"``.
        order: every pod an eviction was attempted for, in attempt order.
    """

    evicted: tuple[Pod, ...]
    failed: tuple[tuple[Pod, str], ...]
    released: dict[str, float]
    remaining_gaps: Gaps
    mode: ExecutionMode
    order: tuple[Pod, ...]


def _attempt(evictor: Evictor, pod: Pod, record_errors: bool = True) -> EvictResult:
    """Call ``evictor`` and turn a malformed answer, and with ``record_errors`` an exception,
    into a failed result (without it the exception propagates)."""
    if not record_errors:
        result = evictor(pod)
    else:
        try:
            result = evictor(pod)
        except Exception as e:
            return EvictResult(False, str(e) or type(e).__name__)
    if not isinstance(result, EvictResult):
        return EvictResult(False, f"evictor returned {result!r}, not an EvictResult")
    if not result.ok and not result.error:
        return EvictResult(False, "eviction failed")
    return result


def _run(
    pods: Sequence[PodUsage], evictor: Evictor, parallelism: int, record_errors: bool = True
) -> list[EvictResult]:
    """Evict ``pods`` (up to ``parallelism`` at a time); results in the order of ``pods``."""
    if parallelism <= 1 or len(pods) <= 1:
        return [_attempt(evictor, pu.pod, record_errors) for pu in pods]
    with ThreadPoolExecutor(max_workers=min(parallelism, len(pods))) as pool:
        return list(pool.map(lambda pu: _attempt(evictor, pu.pod, record_errors), pods))


class _Ledger:
    """Accumulates attempts, in order, and the releases of successful evictions."""

    def __init__(self, quantified: Sequence[EvictionMetric], gaps: Gaps) -> None:
        self.quantified = quantified
        self.gaps = gaps
        self.released: dict[str, float] = {m.name: 0.0 for m in quantified}
        self.order: list[Pod] = []
        self.evicted: list[Pod] = []
        self.failed: list[tuple[Pod, str]] = []
        self.attempted: set[str] = set()

    def record(self, pods: Sequence[PodUsage], results: Sequence[EvictResult]) -> None:
        for pu, res in zip(pods, results, strict=True):
            self.attempted.add(pu.key)
            self.order.append(pu.pod)
            if not res.ok:
                self.failed.append((pu.pod, res.error or "eviction failed"))
                continue
            self.evicted.append(pu.pod)
            credit: dict[str, float] = {}
            for m in self.quantified:
                amount = m.released_by(pu)
                if amount is not None:
                    credit[m.name] = amount
                    self.released[m.name] += amount
            self.gaps = self.gaps.minus(credit)

    def result(self, mode: ExecutionMode) -> ExecutionResult:
        return ExecutionResult(
            evicted=tuple(self.evicted),
            failed=tuple(self.failed),
            released=dict(self.released),
            remaining_gaps=self.gaps,
            mode=mode,
            order=tuple(self.order),
        )


def _check(pods: Sequence[PodUsage], parallelism: int) -> None:
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an int ≥ 1, got {parallelism!r}")
    seen: set[str] = set()
    for pu in pods:
        if pu.key in seen:
            raise ValueError(f"pod {pu.key} is a candidate twice")
        seen.add(pu.key)


def _quantified(registry: MetricRegistry) -> list[EvictionMetric]:
    return [m for m in registry if m.evict_quantified]


def _evict_all(
    pods: Sequence[PodUsage],
    sorter: PodSorter,
    ledger: _Ledger,
    evictor: Evictor,
    parallelism: int,
    record_errors: bool = True,
) -> ExecutionResult:
    ordered = sorter(pods)
    ledger.record(ordered, _run(ordered, evictor, parallelism, record_errors))
    return ledger.result("all")


def execute(
    pods: Sequence[PodUsage],
    node_usage: Mapping[str, float | None],
    waterlines: Waterlines,
    registry: MetricRegistry,
    evictor: Evictor,
    *,
    parallelism: int = 1,
    excess_fraction: float = 0.0,
    record_errors: bool = True,
) -> ExecutionResult:
    """Evict candidate ``pods`` until every waterline metric is at or below its waterline.

    1. Gaps are computed for the metrics that have a waterline (:func:`calculate_gaps`).
    2. If every effective waterline is 0, this is a drain: every pod is evicted, in
       :data:`~scaler.eviction.sort.general_sorter` order (as :func:`drain`).
    3. If a waterline metric is not ``evict_quantified``, or a gap is "usage missed", precise
       eviction is impossible: every candidate pod is evicted (mode ``"all"``) in the order of the
       sorter of the waterline metric with the highest ``action_priority`` (ties: smallest name).
    4. Otherwise (mode ``"precise"``), for each metric with a positive gap, highest
       ``action_priority`` first then by name: sort the pods with the metric's sorter and, while
       its gap is positive, evict the next pod not yet attempted. Only a successful eviction
       releases anything, and it releases the pod's usage from *every* metric's gap. A failed pod
       is reported and not retried; the next one is tried. Stops when the gap closes or no pod is
       left (the gap then stays positive in :attr:`ExecutionResult.remaining_gaps`).

    With ``parallelism`` > 1, precise mode evicts in waves: the shortest run of next pods whose
    releases would close the gap if they all succeed, at most ``parallelism`` of them; results are
    applied in sort order. When every eviction succeeds it picks exactly the pods ``parallelism=1``
    picks.

    Args:
        pods: the candidates, already filtered (e.g. by drain rules); each pod at most once.
        node_usage: the node's usage by metric ``node_usage_key`` (metric unit; see
            :func:`~scaler.eviction.metrics.node_usage_from_metrics`).
        waterlines: thresholds per metric; the smallest of each applies.
        registry: the known metrics.
        evictor: evicts one pod.
        parallelism: at most this many evictions in flight (≥ 1).
        excess_fraction: release this fraction more than each gap (crane ``executeExcessPercent``).
        record_errors: ``True`` (a live evictor): an exception raised by the evictor becomes an
            entry of ``failed``. ``False`` (a simulated evictor, such as hot-node relief's): it
            propagates, since it is a bug in the simulation, not a refused eviction, and must
            not read as "nothing to evict".

    Raises:
        EvictionConfigError: a waterline names a metric that is not registered or not evictable.
        ValueError: ``parallelism`` < 1, a bad ``excess_fraction``, or a pod listed twice.
        Exceptions raised by a metric's ``usage_of`` propagate (before any eviction when sorting).
        The evictor's own exceptions propagate only without ``record_errors``.
    """
    _check(pods, parallelism)
    gaps = calculate_gaps(node_usage, waterlines, registry, excess_fraction=excess_fraction)
    ledger = _Ledger(_quantified(registry), gaps)
    if waterlines.all_zero():
        return _evict_all(pods, general_sorter, ledger, evictor, parallelism, record_errors)
    metrics = [registry[m] for m in waterlines.metrics()]
    if any(not m.evict_quantified for m in metrics) or gaps.has_usage_missed():
        top = registry.highest_priority_evictable(among=waterlines.metrics())
        sorter = top.sorter if top is not None else general_sorter
        return _evict_all(pods, sorter, ledger, evictor, parallelism, record_errors)

    for metric in sorted(metrics, key=lambda m: (-m.action_priority, m.name)):
        if ledger.gaps.target_gaps_removed(metric.name):
            continue
        queue = [pu for pu in metric.sorter(pods) if pu.key not in ledger.attempted]
        i = 0
        while i < len(queue) and not ledger.gaps.target_gaps_removed(metric.name):
            need = ledger.gaps[metric.name]
            wave: list[PodUsage] = []
            while i < len(queue) and len(wave) < parallelism and need > 0:
                pu = queue[i]
                i += 1
                wave.append(pu)
                need -= metric.released_by(pu) or 0.0
            ledger.record(wave, _run(wave, evictor, parallelism, record_errors))
    return ledger.result("precise")


def drain(
    pods: Iterable[PodUsage],
    registry: MetricRegistry,
    evictor: Evictor,
    parallelism: int = 1,
) -> ExecutionResult:
    """Evict every pod (a node drain: every waterline is 0), lowest value first — the
    :data:`~scaler.eviction.sort.general_sorter` order: lower priority, then lower QoS class, then
    newest. With ``parallelism`` > 1 evictions run on a thread pool; ``evicted``, ``failed`` and
    ``order`` are still in sort order. Mode ``"all"``; ``remaining_gaps`` is empty; ``released``
    sums the evicted pods' usage per registered evict-quantified metric.

    Args:
        pods: the movable pods (drain rules already applied by the caller); each at most once.
        registry: the known metrics (for ``released``).
        evictor: evicts one pod; its exceptions become entries of ``failed``.
        parallelism: at most this many evictions in flight (≥ 1).

    Raises:
        ValueError: ``parallelism`` < 1 or a pod listed twice.
    """
    candidates = list(pods)
    _check(candidates, parallelism)
    return _evict_all(
        candidates, general_sorter, _Ledger(_quantified(registry), Gaps()), evictor, parallelism
    )
