"""Waterlines (smallest threshold wins) and gaps (usage − waterline) of the eviction framework."""

from __future__ import annotations

import math
from typing import Any

import pytest

from scaler.eviction.metrics import (
    CPU_TOTAL_USAGE,
    MEMORY_TOTAL_USAGE,
    EvictionConfigError,
    EvictionMetric,
    default_registry,
)
from scaler.eviction.waterline import USAGE_MISSED, Gaps, Threshold, Waterlines, calculate_gaps

CPU, MEM = CPU_TOTAL_USAGE, MEMORY_TOTAL_USAGE


def test_smallest_threshold_wins_over_several_sources() -> None:
    wl = (
        Waterlines()
        .add(CPU, 1800, "policy-a")
        .add(CPU, 1500, "policy-b")
        .add(CPU, 1700, "policy-c")
        .add(MEM, 8e9, "policy-a")
    )
    assert wl.effective(CPU) == 1500
    assert wl.effective_threshold(CPU) == Threshold(1500, "policy-b")
    assert [t.value for t in wl.thresholds(CPU)] == [1500, 1700, 1800]
    assert wl.effective(MEM) == 8e9
    assert wl.effective("disk") is None and wl.thresholds("disk") == ()
    assert wl.metrics() == (CPU, MEM) and list(wl) == [CPU, MEM] and len(wl) == 2 and CPU in wl


def test_equal_thresholds_keep_first_source() -> None:
    wl = Waterlines().add(CPU, 1000, "first").add(CPU, 1000, "second")
    assert wl.effective_threshold(CPU) == Threshold(1000, "first")


def test_add_is_immutable() -> None:
    base = Waterlines({CPU: 1000})
    lower = base.add(CPU, 500)
    assert base.effective(CPU) == 1000 and lower.effective(CPU) == 500
    assert base != lower and base == Waterlines({CPU: [1000]})


def test_constructor_takes_values_or_lists() -> None:
    wl = Waterlines({CPU: [900, 300, 600], MEM: 5})
    assert wl.effective(CPU) == 300 and wl.effective(MEM) == 5
    assert repr(wl) == "Waterlines({'cpu_total_usage': [300.0, 600.0, 900.0], 'memory_total_usage': [5.0]})"


@pytest.mark.parametrize("bad", [-1, math.nan, math.inf])
def test_bad_threshold(bad: float) -> None:
    with pytest.raises(ValueError, match="finite number ≥ 0"):
        Waterlines({CPU: bad})
    with pytest.raises(ValueError, match="finite number ≥ 0"):
        Waterlines().add(CPU, bad)


def test_empty_threshold_list() -> None:
    with pytest.raises(ValueError, match="has no value"):
        Waterlines({CPU: []})


@pytest.mark.parametrize(
    ("thresholds", "expected"),
    [({CPU: 0, MEM: 0}, True), ({CPU: [0, 5]}, True), ({CPU: 0, MEM: 1}, False), ({}, False)],
)
def test_all_zero(thresholds: dict[str, Any], expected: bool) -> None:
    assert Waterlines(thresholds).all_zero() is expected


@pytest.mark.parametrize(
    ("usage", "waterline", "excess", "gap"),
    [
        (1500.0, 1000, 0.0, 500.0),  # above: release 500 m
        (800.0, 1000, 0.0, -200.0),  # below: nothing to do
        (1000.0, 1000, 0.0, 0.0),  # equal: nothing to do
        (1500.0, 1000, 0.1, 550.0),  # (1 + excess) × (usage − waterline)
        (None, 1000, 0.0, USAGE_MISSED),  # unknown usage
        (math.nan, 1000, 0.0, USAGE_MISSED),
        (-50.0, 0, 0.0, 0.0),  # negative usage counts as 0
    ],
)
def test_gap_values(usage: float | None, waterline: float, excess: float, gap: float) -> None:
    gaps = calculate_gaps(
        {CPU: usage}, Waterlines({CPU: waterline}), default_registry(), excess_fraction=excess
    )
    assert gaps[CPU] == pytest.approx(gap)


def test_gap_uses_smallest_waterline() -> None:
    gaps = calculate_gaps({CPU: 2000.0}, Waterlines({CPU: [1800, 1200]}), default_registry())
    assert gaps[CPU] == 800.0


def test_missing_usage_key_is_usage_missed() -> None:
    gaps = calculate_gaps({}, Waterlines({CPU: 1000}), default_registry())
    assert gaps[CPU] == USAGE_MISSED and gaps.has_usage_missed() and gaps.usage_missed() == (CPU,)


def test_metric_without_waterline_has_no_gap() -> None:
    # crane defect (g): memory is registered but has no waterline and no usage; it must neither
    # get a gap nor mark the gaps "usage missed"
    gaps = calculate_gaps({CPU: 1500.0}, Waterlines({CPU: 1000}), default_registry())
    assert dict(gaps) == {CPU: 500.0}
    assert MEM not in gaps and gaps.target_gaps_removed(MEM) and not gaps.has_usage_missed()


def test_node_usage_key_is_used() -> None:
    reg = default_registry()
    reg.register(EvictionMetric(name="disk", action_priority=3, usage_of=lambda p: None, node_usage_key="fs"))
    gaps = calculate_gaps({"fs": 10.0, "disk": 99.0}, Waterlines({"disk": 4}), reg)
    assert gaps["disk"] == 6.0


def test_unknown_waterline_metric_is_a_config_error() -> None:
    with pytest.raises(
        EvictionConfigError, match="unknown eviction metric 'cpu_usage'; known: cpu_total_usage"
    ):
        calculate_gaps({}, Waterlines({"cpu_usage": 1}), default_registry())


def test_not_evictable_waterline_metric_is_a_config_error() -> None:
    reg = default_registry()
    reg.register(
        EvictionMetric(
            name="load", action_priority=1, usage_of=lambda p: None, evictable=False, evict_quantified=False
        )
    )
    with pytest.raises(EvictionConfigError, match="'load', which is not evictable"):
        calculate_gaps({"load": 5.0}, Waterlines({"load": 1}), reg)


@pytest.mark.parametrize("excess", [-0.1, math.nan, math.inf])
def test_bad_excess(excess: float) -> None:
    with pytest.raises(ValueError, match="excess_fraction"):
        calculate_gaps({CPU: 1.0}, Waterlines({CPU: 0}), default_registry(), excess_fraction=excess)


@pytest.mark.parametrize(
    ("gaps", "metric", "removed"),
    [
        ({CPU: 10.0}, CPU, False),
        ({CPU: 0.0}, CPU, True),
        ({CPU: -5.0}, CPU, True),
        ({CPU: 10.0}, MEM, True),  # absent
        ({CPU: USAGE_MISSED}, CPU, False),
    ],
)
def test_target_gaps_removed(gaps: dict[str, float], metric: str, removed: bool) -> None:
    assert Gaps(gaps).target_gaps_removed(metric) is removed


@pytest.mark.parametrize(
    ("gaps", "all_removed", "missed"),
    [
        ({}, True, False),
        ({CPU: -1.0, MEM: 0.0}, True, False),
        ({CPU: -1.0, MEM: 0.5}, False, False),
        ({CPU: USAGE_MISSED, MEM: -1.0}, False, True),
    ],
)
def test_gaps_predicates(gaps: dict[str, float], all_removed: bool, missed: bool) -> None:
    g = Gaps(gaps)
    assert g.all_removed() is all_removed and g.has_usage_missed() is missed


def test_gaps_minus_is_immutable_and_keeps_missed() -> None:
    g = Gaps({CPU: 500.0, MEM: USAGE_MISSED})
    after = g.minus({CPU: 200.0, MEM: 1e9, "disk": 5.0})
    assert dict(g) == {CPU: 500.0, MEM: USAGE_MISSED}
    assert dict(after) == {CPU: 300.0, MEM: USAGE_MISSED}
    assert "disk" not in after
    assert list(after) == [CPU, MEM] and len(after) == 2
    with pytest.raises(KeyError):
        after["disk"]
