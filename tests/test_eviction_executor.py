"""The eviction executor: precise mode, the evict-all fallback, drains, failures and parallelism."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping

import pytest
from builders import GI, MI, make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.eviction.executor import EvictResult, ExecutionResult, drain, execute
from scaler.eviction.metrics import (
    CPU_TOTAL_USAGE,
    MEMORY_TOTAL_USAGE,
    EvictionConfigError,
    EvictionMetric,
    MetricRegistry,
    default_registry,
)
from scaler.eviction.podinfo import PodUsage
from scaler.eviction.sort import general_sorter
from scaler.eviction.waterline import Waterlines
from scaler.model.records import Pod, QoSClass

CPU, MEM = CPU_TOTAL_USAGE, MEMORY_TOTAL_USAGE


def pu(
    name: str,
    cpu: int | None = None,
    mem: int | None = None,
    prio: int = 0,
    qos: QoSClass = QoSClass.BURSTABLE,
    start: float | None = 100.0,
    **extra: float,
) -> PodUsage:
    pod = make_pod(name, priority=prio, qos_class=qos, creation_ts=start)
    return PodUsage(pod=pod, cpu_millicores=cpu, memory_bytes=mem, start_ts=start, extra=extra)


class FakeEvictor:
    """Records every call (thread-safe); fails the pods in ``fail`` with their message and raises
    for the pods in ``raise_for``; optionally sleeps a random time (seeded by ``seed``) to scramble completion order."""

    def __init__(
        self,
        fail: Mapping[str, str] | None = None,
        raise_for: Mapping[str, Exception] | None = None,
        jitter: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.fail = dict(fail or {})
        self.raise_for = dict(raise_for or {})
        self.jitter = jitter
        self._rng = random.Random(seed)  # seeded: a run's sleeps repeat
        self.calls: list[str] = []
        self.lock = threading.Lock()
        self.max_in_flight = 0
        self._in_flight = 0

    def __call__(self, pod: Pod) -> EvictResult:
        with self.lock:
            self.calls.append(pod.name)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if self.jitter:
                time.sleep(self._rng.uniform(0, self.jitter))
            if pod.name in self.raise_for:
                raise self.raise_for[pod.name]
            if pod.name in self.fail:
                return EvictResult(False, self.fail[pod.name])
            return EvictResult(True)
        finally:
            with self.lock:
                self._in_flight -= 1


def names(pods: tuple[Pod, ...]) -> list[str]:
    return [p.name for p in pods]


def failed_names(result: ExecutionResult) -> list[tuple[str, str]]:
    return [(p.name, err) for p, err in result.failed]


# --- precise mode -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "waterline", "expected"),
    [
        (1500.0, 1000, ["a"]),  # gap 500 closed by a (600)
        (1700.0, 1000, ["a", "b"]),  # gap 700: a (600) then b (250)
        (2100.0, 1000, ["a", "b", "c"]),  # gap 1100 > 600 + 250 + 200: everything, gap stays
        (1000.0, 1000, []),  # equal: nothing
        (800.0, 1000, []),  # below: nothing
        (1600.0, 1000, ["a"]),  # gap 600 exactly closed by a
    ],
)
def test_precise_evicts_exactly_enough_for_cpu(usage: float, waterline: float, expected: list[str]) -> None:
    pods = [pu("c", cpu=200), pu("a", cpu=600), pu("b", cpu=250)]
    ev = FakeEvictor()
    r = execute(pods, {CPU: usage}, Waterlines({CPU: waterline}), default_registry(), ev)
    assert r.mode == "precise"
    assert ev.calls == expected and names(r.evicted) == expected and names(r.order) == expected
    assert r.failed == ()
    released = float(sum(p.cpu_millicores or 0 for p in pods if p.pod.name in expected))
    assert r.released[CPU] == released
    assert r.remaining_gaps[CPU] == usage - waterline - released


def test_cross_metric_credit_closes_memory_gap() -> None:
    pods = [
        pu("a", cpu=600, mem=1 * GI),
        pu("b", cpu=10, mem=3 * GI),
        pu("c", cpu=5, mem=100 * MI),
    ]
    node = {CPU: 1500.0, MEM: float(9 * GI)}
    wl = Waterlines({CPU: 1000, MEM: 8 * GI})  # gaps: 500 m and 1 GiB
    ev = FakeEvictor()
    r = execute(pods, node, wl, default_registry(), ev)
    # a closes the CPU gap and, with its 1 GiB, the memory gap: b is not evicted
    assert ev.calls == ["a"]
    assert r.remaining_gaps[CPU] == -100.0 and r.remaining_gaps[MEM] == 0.0
    assert r.released == {CPU: 600.0, MEM: float(1 * GI)}


def test_memory_gap_worked_after_cpu_with_remaining_pods() -> None:
    pods = [
        pu("a", cpu=600, mem=100 * MI),
        pu("b", cpu=10, mem=3 * GI),
        pu("c", cpu=5, mem=2 * GI),
    ]
    node = {CPU: 1500.0, MEM: float(9 * GI)}
    wl = Waterlines({CPU: 1000, MEM: 7 * GI})  # gaps: 500 m and 2 GiB
    ev = FakeEvictor()
    r = execute(pods, node, wl, default_registry(), ev)
    # cpu first (equal priority, by name): a; then memory, sorted by memory: b (3 GiB) closes it
    assert ev.calls == ["a", "b"]
    assert r.remaining_gaps.all_removed()


def test_failed_eviction_releases_nothing_and_next_pod_is_tried() -> None:
    pods = [pu("a", cpu=300), pu("b", cpu=250), pu("c", cpu=200), pu("d", cpu=100)]
    ev = FakeEvictor(fail={"a": "429 Too Many Requests: disruption budget"})
    r = execute(pods, {CPU: 1400.0}, Waterlines({CPU: 1000}), default_registry(), ev)
    # gap 400: a fails (no credit), b (250) → 150, c (200) → closed; d untouched
    assert ev.calls == ["a", "b", "c"]
    assert names(r.evicted) == ["b", "c"]
    assert failed_names(r) == [("a", "429 Too Many Requests: disruption budget")]
    assert r.released[CPU] == 450.0 and r.remaining_gaps[CPU] == -50.0
    assert names(r.order) == ["a", "b", "c"]


def test_evictor_exception_becomes_a_failure() -> None:
    pods = [pu("a", cpu=300), pu("b", cpu=250)]
    ev = FakeEvictor(raise_for={"a": RuntimeError("connection reset")})
    r = execute(pods, {CPU: 1200.0}, Waterlines({CPU: 1000}), default_registry(), ev)
    assert failed_names(r) == [("a", "connection reset")]
    assert names(r.evicted) == ["b"]


def test_bad_evictor_answers_are_failures() -> None:
    def evictor(pod: Pod) -> EvictResult:
        if pod.name == "a":
            return EvictResult(False)
        if pod.name == "b":
            raise ValueError()
        return "yes"  # type: ignore[return-value]

    pods = [pu("a", cpu=3), pu("b", cpu=2), pu("c", cpu=1)]
    r = execute(pods, {CPU: 100.0}, Waterlines({CPU: 10}), default_registry(), evictor)
    assert failed_names(r) == [
        ("a", "eviction failed"),
        ("b", "ValueError"),
        ("c", "evictor returned 'yes', not an EvictResult"),
    ]
    assert r.evicted == () and r.released[CPU] == 0.0 and r.remaining_gaps[CPU] == 90.0


def test_gap_left_when_pods_run_out() -> None:
    pods = [pu("a", cpu=100), pu("u", cpu=None)]
    ev = FakeEvictor()
    r = execute(pods, {CPU: 2000.0}, Waterlines({CPU: 1000}), default_registry(), ev)
    # the unmeasured pod comes last and releases nothing
    assert ev.calls == ["a", "u"] and r.remaining_gaps[CPU] == 900.0 and r.mode == "precise"


def test_higher_action_priority_metric_goes_first() -> None:
    reg = default_registry()
    reg.register(EvictionMetric(name="disk", action_priority=9, usage_of=lambda p: p.extra.get("disk")))
    pods = [pu("cpu-hog", cpu=900, disk=1), pu("disk-hog", cpu=1, disk=100)]
    ev = FakeEvictor()
    r = execute(pods, {CPU: 1500.0, "disk": 150.0}, Waterlines({CPU: 1000, "disk": 100}), reg, ev)
    # disk (priority 9) first: disk-hog closes the disk gap; then cpu-hog for the cpu gap
    assert ev.calls == ["disk-hog", "cpu-hog"] and r.mode == "precise"


def test_excess_fraction() -> None:
    pods = [pu("a", cpu=500), pu("b", cpu=100)]
    ev = FakeEvictor()
    execute(pods, {CPU: 1500.0}, Waterlines({CPU: 1000}), default_registry(), ev, excess_fraction=0.1)
    assert ev.calls == ["a", "b"]  # gap 550 needs both


def test_no_waterlines_evicts_nothing() -> None:
    ev = FakeEvictor()
    r = execute([pu("a", cpu=1)], {CPU: 5000.0}, Waterlines(), default_registry(), ev)
    assert ev.calls == [] and r.mode == "precise" and len(r.remaining_gaps) == 0


# --- fallback: evict all ----------------------------------------------------------------------


def unquantified_registry() -> MetricRegistry:
    reg = default_registry()
    reg.register(
        EvictionMetric(
            name="psi",
            action_priority=9,
            usage_of=lambda p: p.extra.get("psi"),
            evict_quantified=False,
        )
    )
    return reg


def test_fallback_when_a_waterline_metric_is_not_quantified() -> None:
    pods = [pu("a", cpu=600, psi=1), pu("b", cpu=10, psi=50), pu("c", cpu=300, psi=20)]
    ev = FakeEvictor()
    r = execute(
        pods, {CPU: 2000.0, "psi": 80.0}, Waterlines({CPU: 1990, "psi": 10}), unquantified_registry(), ev
    )
    assert r.mode == "all"
    # everything, in the order of psi (priority 9 beats cpu's 5): highest psi first
    assert ev.calls == ["b", "c", "a"] and names(r.evicted) == ["b", "c", "a"]
    assert r.released[CPU] == 910.0 and "psi" not in r.released
    assert r.remaining_gaps["psi"] == 70.0  # not quantified: no credit


def test_fallback_when_usage_missed() -> None:
    pods = [pu("a", cpu=600, mem=1), pu("b", cpu=10, mem=9), pu("c", cpu=300, mem=5)]
    ev = FakeEvictor()
    r = execute(pods, {CPU: 1500.0}, Waterlines({CPU: 1000, MEM: 1}), default_registry(), ev)
    assert r.mode == "all"
    # equal priorities: cpu_total_usage wins the tie by name, so the cpu order is used
    assert ev.calls == ["a", "c", "b"]
    assert r.remaining_gaps[MEM] == float("inf")


def test_fallback_uses_memory_order_when_only_memory_has_a_waterline() -> None:
    pods = [pu("a", cpu=600, mem=1), pu("b", cpu=10, mem=9), pu("c", cpu=300, mem=5)]
    ev = FakeEvictor(fail={"c": "pdb"})
    r = execute(pods, {}, Waterlines({MEM: 1}), default_registry(), ev)
    assert r.mode == "all" and ev.calls == ["b", "c", "a"]
    assert failed_names(r) == [("c", "pdb")] and names(r.evicted) == ["b", "a"]


def test_unknown_waterline_metric_never_evicts() -> None:
    ev = FakeEvictor()
    with pytest.raises(EvictionConfigError, match="unknown eviction metric 'cpu'"):
        execute([pu("a", cpu=1)], {"cpu": 5.0}, Waterlines({"cpu": 1}), default_registry(), ev)
    assert ev.calls == []


def test_all_zero_waterlines_drain() -> None:
    pods = [pu("g", cpu=900, qos=QoSClass.GUARANTEED), pu("be", cpu=1, qos=QoSClass.BEST_EFFORT)]
    ev = FakeEvictor()
    r = execute(pods, {CPU: 0.0, MEM: 0.0}, Waterlines({CPU: 0, MEM: 0}), default_registry(), ev)
    # usage 0 = waterline 0 would be "no gap"; zero waterlines mean drain: everything, general order
    assert r.mode == "all" and ev.calls == ["be", "g"]


# --- drain ------------------------------------------------------------------------------------


def drain_pods() -> list[PodUsage]:
    return [
        pu("web-g", cpu=100, mem=GI, qos=QoSClass.GUARANTEED, start=10.0),
        pu("batch-be-old", cpu=50, qos=QoSClass.BEST_EFFORT, start=5.0),
        pu("batch-be-new", cpu=70, mem=2 * GI, qos=QoSClass.BEST_EFFORT, start=50.0),
        pu("critical", cpu=10, prio=2_000_000_000, start=1.0),
        pu("bu", cpu=None, start=30.0),
        pu("low", cpu=5, prio=-100, qos=QoSClass.GUARANTEED, start=20.0),
    ]


DRAIN_ORDER = ["low", "batch-be-new", "batch-be-old", "bu", "web-g", "critical"]


def test_drain_evicts_all_in_order() -> None:
    ev = FakeEvictor()
    r = drain(drain_pods(), default_registry(), ev)
    assert ev.calls == DRAIN_ORDER and names(r.evicted) == DRAIN_ORDER and names(r.order) == DRAIN_ORDER
    assert r.mode == "all" and r.failed == () and len(r.remaining_gaps) == 0
    assert r.released == {CPU: 235.0, MEM: float(3 * GI)}
    assert [p.pod.name for p in general_sorter(drain_pods())] == DRAIN_ORDER


@pytest.mark.parametrize("parallelism", [2, 3, 8, 64])
def test_parallel_drain_is_deterministic(parallelism: int) -> None:
    fail = {"bu": "403 forbidden", "web-g": "429 pdb"}
    for _ in range(3):
        ev = FakeEvictor(fail=fail, raise_for={"critical": TimeoutError("timed out")}, jitter=0.005)
        r = drain(drain_pods(), default_registry(), ev, parallelism=parallelism)
        assert sorted(ev.calls) == sorted(DRAIN_ORDER)  # every pod once
        assert names(r.order) == DRAIN_ORDER
        assert names(r.evicted) == ["low", "batch-be-new", "batch-be-old"]
        assert failed_names(r) == [("bu", "403 forbidden"), ("web-g", "429 pdb"), ("critical", "timed out")]
        assert 1 <= ev.max_in_flight <= parallelism
    sequential = drain(
        drain_pods(),
        default_registry(),
        FakeEvictor(fail=fail, raise_for={"critical": TimeoutError("timed out")}),
    )
    assert names(sequential.evicted) == names(r.evicted) and r.released == sequential.released


def test_parallel_drain_runs_concurrently() -> None:
    ev = FakeEvictor(jitter=0.02)
    drain(drain_pods(), default_registry(), ev, parallelism=6)
    assert ev.max_in_flight > 1


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_parallelism(bad: object) -> None:
    with pytest.raises(ValueError, match="parallelism"):
        drain(drain_pods(), default_registry(), FakeEvictor(), parallelism=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="parallelism"):
        execute([], {}, Waterlines(), default_registry(), FakeEvictor(), parallelism=bad)  # type: ignore[arg-type]


def test_duplicate_candidate_rejected() -> None:
    with pytest.raises(ValueError, match="default/a is a candidate twice"):
        drain([pu("a"), pu("a", cpu=5)], default_registry(), FakeEvictor())


# --- properties -------------------------------------------------------------------------------

cpu_pods = st.lists(
    st.builds(
        lambda i, cpu, prio, fails: (pu(f"p{i}", cpu=cpu, prio=prio), fails),
        st.integers(0, 999),
        st.one_of(st.none(), st.integers(0, 500)),
        st.integers(0, 2),
        st.booleans(),
    ),
    max_size=15,
    unique_by=lambda t: t[0].key,
)


@settings(max_examples=150, deadline=None)
@given(pods=cpu_pods, gap=st.integers(1, 3000))
def test_precise_sequential_is_minimal(pods: list[tuple[PodUsage, bool]], gap: int) -> None:
    usages = [p for p, _ in pods]
    fail = {p.pod.name: "nope" for p, f in pods if f}
    ev = FakeEvictor(fail=fail)
    r = execute(usages, {CPU: 1000.0 + gap}, Waterlines({CPU: 1000}), default_registry(), ev)
    assert r.mode == "precise"
    assert len(ev.calls) == len(set(ev.calls))  # nobody is tried twice
    cpu = {p.pod.name: float(p.cpu_millicores or 0) for p in usages}
    released = sum(cpu[p.name] for p in r.evicted)
    assert r.released[CPU] == released
    assert r.remaining_gaps[CPU] == gap - released
    # attempts follow the cpu sorter; every attempt but the last happened while the gap was open
    order = [p.pod.name for p in default_registry()[CPU].sorter(usages)]
    assert ev.calls == order[: len(ev.calls)]
    credited = 0.0
    for name in ev.calls:
        assert credited < gap
        if name not in fail:
            credited += cpu[name]
    assert credited >= gap or len(ev.calls) == len(usages)
    assert {p.name for p, _ in r.failed} == {n for n in ev.calls if n in fail}


@settings(max_examples=60, deadline=None)
@given(pods=cpu_pods, gap=st.integers(1, 3000), parallelism=st.integers(2, 5))
def test_precise_parallel_picks_the_same_pods_when_all_succeed(
    pods: list[tuple[PodUsage, bool]], gap: int, parallelism: int
) -> None:
    usages = [p for p, _ in pods]
    node, wl = {CPU: 1000.0 + gap}, Waterlines({CPU: 1000})
    seq = execute(usages, node, wl, default_registry(), FakeEvictor())
    par = execute(usages, node, wl, default_registry(), FakeEvictor(), parallelism=parallelism)
    assert names(par.evicted) == names(seq.evicted) and par.order == seq.order
    assert par.remaining_gaps == seq.remaining_gaps


@settings(max_examples=60, deadline=None)
@given(pods=cpu_pods, gap=st.integers(1, 3000), parallelism=st.integers(2, 5))
def test_precise_parallel_with_failures_still_accounts_exactly(
    pods: list[tuple[PodUsage, bool]], gap: int, parallelism: int
) -> None:
    usages = [p for p, _ in pods]
    fail = {p.pod.name: "nope" for p, f in pods if f}
    ev = FakeEvictor(fail=fail)
    r = execute(
        usages, {CPU: 1000.0 + gap}, Waterlines({CPU: 1000}), default_registry(), ev, parallelism=parallelism
    )
    assert sorted(ev.calls) == sorted(p.name for p in r.order)
    assert names(r.order) == [
        n for n in [p.pod.name for p in default_registry()[CPU].sorter(usages)] if n in ev.calls
    ]
    released = sum(float(p.cpu_millicores or 0) for p in usages if p.pod in r.evicted)
    assert r.released[CPU] == released and r.remaining_gaps[CPU] == gap - released
    assert r.remaining_gaps.target_gaps_removed(CPU) or len(r.order) == len(usages)
