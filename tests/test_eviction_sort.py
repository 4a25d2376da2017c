"""Comparators and sorters of the eviction framework (crane HEAD semantics, deterministic)."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from builders import make_pod
from hypothesis import given, settings
from hypothesis import strategies as st

from scaler.eviction.metrics import cpu_total_usage, memory_total_usage
from scaler.eviction.podinfo import PodUsage
from scaler.eviction.sort import (
    Comparator,
    class_and_priority,
    general_sorter,
    ordered_by,
    running_time,
    usage,
)
from scaler.model.records import QoSClass

BE, BU, G = QoSClass.BEST_EFFORT, QoSClass.BURSTABLE, QoSClass.GUARANTEED


def pu(
    name: str,
    prio: int = 0,
    qos: QoSClass = BU,
    cpu: int | None = None,
    mem: int | None = None,
    start: float | None = None,
    namespace: str = "default",
    **extra: float,
) -> PodUsage:
    pod = make_pod(name, namespace=namespace, priority=prio, qos_class=qos, creation_ts=start)
    return PodUsage(pod=pod, cpu_millicores=cpu, memory_bytes=mem, start_ts=start, extra=extra)


def names(pods: list[PodUsage]) -> list[str]:
    return [p.pod.name for p in pods]


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def cpu_of(p: PodUsage) -> float | None:
    return None if p.cpu_millicores is None else float(p.cpu_millicores)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (pu("a", prio=0), pu("b", prio=10), -1),  # lower priority first
        (pu("a", prio=10), pu("b", prio=0), 1),
        (pu("a", prio=-5, qos=G), pu("b", prio=0, qos=BE), -1),  # priority beats QoS (HEAD order)
        (pu("a", qos=BE), pu("b", qos=BU), -1),  # BestEffort < Burstable < Guaranteed
        (pu("a", qos=BU), pu("b", qos=G), -1),
        (pu("a", qos=G), pu("b", qos=BE), 1),
        (pu("a", qos=G), pu("b", qos=G), 0),
        (pu("a", prio=3, qos=BE), pu("b", prio=3, qos=BE), 0),
    ],
)
def test_class_and_priority(a: PodUsage, b: PodUsage, expected: int) -> None:
    assert sign(class_and_priority(a, b)) == expected
    assert sign(class_and_priority(b, a)) == -expected


@pytest.mark.parametrize(
    ("ua", "ub", "expected"),
    [
        (500, 100, -1),  # highest usage first
        (100, 500, 1),
        (300, 300, 0),
        (0, None, -1),  # a measured pod (even at 0) before an unknown one
        (None, 0, 1),
        (None, None, 0),
        (float("nan"), 1, 1),  # NaN is unknown
        (-5, 0, 0),  # negative counts as 0
        (math.inf, 1, 1),  # infinite is unknown
    ],
)
def test_usage_comparator(ua: float | None, ub: float | None, expected: int) -> None:
    cmp = usage(lambda p: p.extra.get("x"))
    a = pu("a") if ua is None else pu("a", x=ua)
    b = pu("b") if ub is None else pu("b", x=ub)
    assert sign(cmp(a, b)) == expected
    assert sign(cmp(b, a)) == -expected


def test_usage_accepts_a_metric() -> None:
    cmp = usage(cpu_total_usage())
    assert cmp(pu("a", cpu=900), pu("b", cpu=100)) < 0
    assert cmp(pu("a", cpu=None), pu("b", cpu=100)) > 0


@pytest.mark.parametrize(
    ("sa", "sb", "expected"),
    [
        (200.0, 100.0, -1),  # newest (later start) first
        (100.0, 200.0, 1),
        (100.0, 100.0, 0),
        (None, 100.0, -1),  # unknown start first, as crane's nil StartTime
        (100.0, None, 1),
        (None, None, 0),
    ],
)
def test_running_time(sa: float | None, sb: float | None, expected: int) -> None:
    assert sign(running_time(pu("a", start=sa), pu("b", start=sb))) == expected


def test_general_sorter_order() -> None:
    pods = [
        pu("old-be", prio=0, qos=BE, start=10.0),
        pu("g-low", prio=0, qos=G, start=50.0),
        pu("high", prio=100, qos=BE, start=90.0),
        pu("new-be", prio=0, qos=BE, start=20.0),
        pu("unknown-start-be", prio=0, qos=BE),
        pu("neg", prio=-10, qos=G, start=1.0),
        pu("bu", prio=0, qos=BU, start=5.0),
    ]
    assert names(general_sorter(pods)) == [
        "neg",
        "unknown-start-be",
        "new-be",
        "old-be",
        "bu",
        "g-low",
        "high",
    ]


def test_cpu_metric_sorter_is_priority_then_usage_desc_then_running_time() -> None:
    pods = [
        pu("small-new", cpu=100, start=50.0),
        pu("big", cpu=900, start=10.0),
        pu("small-old", cpu=100, start=5.0),
        pu("unmeasured", cpu=None, start=60.0),
        pu("be-tiny", qos=BE, cpu=1, start=1.0),
        pu("high-prio-huge", prio=1000, qos=BE, cpu=5000, start=1.0),
    ]
    assert names(cpu_total_usage().sorter(pods)) == [
        "be-tiny",  # QoS before usage
        "big",  # then usage, highest first
        "small-new",  # equal usage: newest first
        "small-old",
        "unmeasured",  # unknown usage last within its class
        "high-prio-huge",  # priority before everything
    ]


def test_memory_metric_sorter_uses_memory() -> None:
    pods = [pu("a", cpu=900, mem=1), pu("b", cpu=1, mem=900), pu("c", cpu=5, mem=None)]
    assert names(memory_total_usage().sorter(pods)) == ["b", "a", "c"]
    assert names(cpu_total_usage().sorter(pods)) == ["a", "c", "b"]


def test_ordered_by_first_nonzero_comparator_wins() -> None:
    calls: list[str] = []

    def first(a: PodUsage, b: PodUsage) -> int:
        calls.append("first")
        return 0

    def second(a: PodUsage, b: PodUsage) -> int:
        calls.append("second")
        return -1 if a.pod.name == "z" else 1 if b.pod.name == "z" else 0

    def never(a: PodUsage, b: PodUsage) -> int:
        raise AssertionError("not reached when an earlier comparator decides")

    sorter = ordered_by(first, second)
    assert names(sorter([pu("a"), pu("z")])) == ["z", "a"]
    assert calls[:2] == ["first", "second"]
    decided = ordered_by(second, never)
    assert names(decided([pu("a"), pu("z")])) == ["z", "a"]


def test_ordered_by_ties_broken_by_key() -> None:
    pods = [pu("c"), pu("a", namespace="z"), pu("b"), pu("a")]
    # no comparator decides: namespace/name order
    assert [p.key for p in ordered_by()(pods)] == ["default/a", "default/b", "default/c", "z/a"]
    assert [p.key for p in ordered_by(class_and_priority)(list(reversed(pods)))] == [
        "default/a",
        "default/b",
        "default/c",
        "z/a",
    ]


def test_sorter_compare_composes() -> None:
    inner = ordered_by(usage(cpu_of))
    outer = ordered_by(class_and_priority, inner.compare)
    pods = [pu("a", cpu=1), pu("b", cpu=2), pu("c", prio=-1, cpu=0)]
    assert names(outer(pods)) == ["c", "b", "a"]
    assert inner.compare(pods[0], pods[0]) == 0


def test_sorter_does_not_mutate_input() -> None:
    pods = [pu("b"), pu("a")]
    out = general_sorter(pods)
    assert names(pods) == ["b", "a"] and names(out) == ["a", "b"]


pod_usage_strategy = st.builds(
    lambda i, prio, qos, cpu, start: pu(f"p{i}", prio=prio, qos=qos, cpu=cpu, start=start),
    st.integers(0, 10_000),
    st.integers(-2, 2),
    st.sampled_from([BE, BU, G]),
    st.one_of(st.none(), st.integers(0, 5)),
    st.one_of(st.none(), st.sampled_from([1.0, 2.0, 3.0])),
)
SORTERS: dict[str, Comparator] = {
    "general": general_sorter.compare,
    "cpu": cpu_total_usage().sorter.compare,
}


@settings(max_examples=200)
@given(
    pods=st.lists(pod_usage_strategy, max_size=25, unique_by=lambda p: p.key),
    seed=st.integers(),
    which=st.sampled_from(sorted(SORTERS)),
)
def test_sort_is_deterministic_under_shuffles(pods: list[PodUsage], seed: int, which: str) -> None:
    sorter = ordered_by(SORTERS[which])
    expected = sorter(pods)
    shuffled = list(pods)
    random.Random(seed).shuffle(shuffled)
    assert [p.key for p in sorter(shuffled)] == [p.key for p in expected]
    assert sorted(p.key for p in expected) == sorted(p.key for p in pods)
    # the result is ordered: no later pod should come strictly before an earlier one
    for a, b in itertools.pairwise(expected):
        assert sorter.compare(a, b) < 0


@given(pods=st.lists(pod_usage_strategy, min_size=2, max_size=12, unique_by=lambda p: p.key))
def test_cpu_sorter_respects_each_level(pods: list[PodUsage]) -> None:
    out = cpu_total_usage().sorter(pods)
    for a, b in itertools.pairwise(out):
        assert class_and_priority(a, b) <= 0
        if class_and_priority(a, b) == 0:
            assert usage(cpu_of)(a, b) <= 0
            if usage(cpu_of)(a, b) == 0:
                assert running_time(a, b) <= 0
