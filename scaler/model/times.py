"""Times and durations: the one place scaler parses and formats them.

* :func:`rfc3339_seconds`: an RFC 3339 timestamp (``2026-11-04T14:00:00Z``, an offset, or naive
  = UTC) as Unix seconds; what Kubernetes objects, metrics and Leases carry.
* :func:`timestamp_seconds`: Unix seconds or RFC 3339, what users type (``--now``, ``--from``)
  and what trace files hold.
* :func:`format_time` / :func:`format_micro_time`: Unix seconds as Kubernetes' ``Time``
  (seconds) and ``MicroTime`` (microseconds, a Lease's renew time).
* :func:`parse_duration_seconds`: a Go duration (``10m``, ``1h30m``, ``500ms``) or a number of
  seconds; :func:`format_duration` writes seconds as Go prints a ``time.Duration`` (``10m0s``).

Every parser raises :class:`ValueError` naming the bad text; callers turn it into their own
one-line error (an object field, a flag, a file line).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from functools import lru_cache

__all__ = [
    "format_duration",
    "format_micro_time",
    "format_time",
    "parse_duration_seconds",
    "rfc3339_seconds",
    "timestamp_seconds",
]


@lru_cache(maxsize=4096)
def rfc3339_seconds(text: str) -> float:
    """Unix seconds of an RFC 3339 timestamp (``Z`` or an offset; a naive time is UTC).

    Memoized: a metrics list repeats one timestamp thousands of times.

    Raises:
        ValueError: ``text`` is not a timestamp.
    """
    t = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return t.timestamp()


def timestamp_seconds(text: str) -> float:
    """Unix seconds from ``text``: a number of Unix seconds, or an RFC 3339 timestamp.

    Raises:
        ValueError: neither (including ``nan`` and infinities).
    """
    try:
        value = float(text)
    except ValueError:
        return rfc3339_seconds(text)
    if not math.isfinite(value):
        raise ValueError(f"not a time: {text!r}")
    return value


def format_time(ts: float) -> str:
    """Unix seconds as an RFC 3339 UTC timestamp to the second (``2026-11-22T08:30:00Z``, the
    layout Kubernetes writes; fractions are dropped). The inverse of :func:`rfc3339_seconds`
    for whole seconds."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(ts: float) -> str:
    """Unix seconds as a Kubernetes ``MicroTime`` (``2026-11-22T08:30:00.123456Z``)."""
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


@lru_cache(maxsize=1024)
def parse_duration_seconds(value: str) -> float:
    """Parse a Go-style duration (``30s``, ``2m``, ``1h30m``, ``500ms``) or a bare number of
    seconds into seconds (Go's ``time.ParseDuration`` units: ns, us/µs, ms, s, m, h).

    Raises:
        ValueError: the value is not a duration (message names it).
    """
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"invalid duration {value!r}")
        return seconds
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"invalid duration {value!r}")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def format_duration(seconds: float) -> str:
    """Seconds as Go's ``time.Duration.String()`` for whole seconds and above: ``10m0s``,
    ``1h0m0s``, ``30s``, ``0s``; fractions of a second as ``1.5s`` or ``500ms``."""
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    s = abs(seconds)
    if s < 1:
        ms = s * 1000
        return f"{sign}{ms:g}ms"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    sec_text = f"{sec:g}s"
    if h:
        return f"{sign}{int(h)}h{int(m)}m{sec_text}"
    if m:
        return f"{sign}{int(m)}m{sec_text}"
    return f"{sign}{sec_text}"
