"""Times and durations (scaler.model.times): RFC 3339, Unix seconds, Go durations."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scaler.model.times import (
    format_duration,
    format_micro_time,
    format_time,
    parse_duration_seconds,
    rfc3339_seconds,
    timestamp_seconds,
)

T0 = 1793800800.0  # 2026-11-04T14:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-04T14:00:00Z", T0),
        ("2026-11-04T16:00:00+02:00", T0),
        ("2026-11-04T14:00:00", T0),
        ("1793800800", T0),
        ("1793800800.5", T0 + 0.5),
    ],
)
def test_timestamp_seconds(text: str, expected: float) -> None:
    assert timestamp_seconds(text) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("text", ["", "noon", "nan", "inf", "2026-13-01T00:00:00Z"])
def test_timestamp_seconds_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        timestamp_seconds(text)


def test_rfc3339_rejects_unix_seconds() -> None:
    with pytest.raises(ValueError):
        rfc3339_seconds("1793800800")


@given(st.integers(min_value=0, max_value=253402300799), st.floats(min_value=0.0, max_value=0.999))
def test_format_time_round_trips_whole_seconds(seconds: int, fraction: float) -> None:
    text = format_time(seconds + fraction)
    assert text.endswith("Z") and len(text) == 20
    assert rfc3339_seconds(text) == seconds


def test_format_micro_time() -> None:
    assert format_micro_time(T0 + 0.25) == "2026-11-04T14:00:00.250000Z"
    assert rfc3339_seconds(format_micro_time(T0 + 0.25)) == T0 + 0.25


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("10m", 600.0),
        ("1h30m", 5400.0),
        ("1h30m15s", 5415.0),
        ("500ms", 0.5),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("1.s", 1.0),
        ("250us", 0.00025),
        ("250\u00b5s", 0.00025),
        ("250\u03bcs", 0.00025),
        ("100ns", 1e-7),
        ("2m0s", 120.0),
        ("0", 0.0),
        ("90", 90.0),
        ("2.5", 2.5),
        (" 10m ", 600.0),
    ],
)
def test_parse_duration_seconds(text: str, seconds: float) -> None:
    assert parse_duration_seconds(text) == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize(
    "text", ["", "m", "10x", "1h 30m", "1h30", "-1m", "s10", "nan", "inf", "-inf", "10mm"]
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"invalid duration {text!r}")):
        parse_duration_seconds(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (30, "30s"),
        (600, "10m0s"),
        (3600, "1h0m0s"),
        (5415, "1h30m15s"),
        (1.5, "1.5s"),
        (0.5, "500ms"),
    ],
)
def test_format_duration_as_go(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**7))
def test_format_duration_round_trips(seconds: int) -> None:
    assert parse_duration_seconds(format_duration(seconds)) == seconds
