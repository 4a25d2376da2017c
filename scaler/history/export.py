"""``scaler history export``: pod usage from Prometheus into the replay's long format (Parquet).

Two range queries (:data:`~scaler.history.prometheus.CPU_QUERY`, CPU cores as
``rate(container_cpu_usage_seconds_total[5m])``, and
:data:`~scaler.history.prometheus.MEMORY_QUERY`, working-set bytes, each summed by namespace and
pod) are run over ``[start, end]`` at ``step``, in chunks that stay under Prometheus's limit of
11,000 points per series (``query_range`` refuses more), each chunk retried with tenacity when
the failure is transient (unreachable, timed out, HTTP 429 or 5xx). The two answers are joined
by namespace, pod and instant into the long format :mod:`scaler.replay.traces` reads:
``timestamp`` (UTC), ``namespace``, ``pod_or_workload`` (the pod), ``cpu_cores``,
``memory_bytes``; an instant where one of the two queries has no point for the pod (a pod's
first instant has a working set but no rate yet) is left out. Rows are sorted by namespace, pod
and time, so the same answers give the same file.

The Parquet file's key-value metadata names where it came from (:data:`META_PREFIX` keys):
the URL, both queries, the selector, the range and step (RFC 3339 and seconds), the scaler
version and how many rows were left out.

Times (:func:`parse_time`): RFC 3339, Unix seconds, ``now``, or relative to now: ``-14d``,
``now-6h``, ``-1h30m`` (units ``w``, ``d``, ``h``, ``m``, ``s``).

Errors (:class:`~scaler.history.prometheus.HistoryError`, one line naming the URL or the query):
the server's own (unreachable, HTTP error, a query error), a query that returns no series at
all, and a window where the series exist but hold no sample.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from tenacity import Retrying

from scaler.history.http import DEFAULT_DEADLINE_SECONDS, retrying
from scaler.history.prometheus import (
    _MAX_POINTS,
    CPU_QUERY,
    MEMORY_QUERY,
    HistoryError,
    PrometheusClient,
    _chunks,
)
from scaler.model.times import format_time, timestamp_seconds
from scaler.specs import redact_url

__all__ = [
    "META_PREFIX",
    "UsageExport",
    "cache_path",
    "export_usage",
    "parse_span",
    "parse_time",
    "queries",
    "read_metadata",
    "scaler_version",
    "write_parquet",
]

META_PREFIX = "scaler."
"""Prefix of the keys scaler writes into an export's Parquet metadata."""

Progress = Callable[[int, int], None]
"""``progress(chunks done, chunks in all)``."""

_SPAN_PART = re.compile(r"(\d+(?:\.\d*)?)(w|d|h|ms|m|s)")
_SPAN_UNITS = {"w": 604800.0, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}


def parse_span(text: str) -> float:
    """A duration in seconds: ``14d``, ``2w``, ``1d12h``, ``90m``, ``1h30m``, ``45s``.

    Raises:
        ValueError: not a duration (the message names it).
    """
    s = text.strip()
    parts = _SPAN_PART.findall(s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise ValueError(f"invalid duration {text!r}")
    return sum(float(n) * _SPAN_UNITS[u] for n, u in parts)


def parse_time(text: str, now: float) -> float:
    """Unix seconds of ``text``: RFC 3339, Unix seconds, ``now``, or ``-DURATION`` /
    ``now-DURATION`` before ``now`` (Unix seconds; :func:`parse_span` units).

    Raises:
        ValueError: none of these (the message names the value).
    """
    s = text.strip()
    rel = s[3:] if s.startswith("now") else s
    if s == "now":
        return now
    if rel.startswith("-") and not _is_number(rel):
        try:
            return now - parse_span(rel[1:])
        except ValueError:
            pass
    elif rel != s and rel.startswith("+"):
        try:
            return now + parse_span(rel[1:])
        except ValueError:
            pass
    try:
        return timestamp_seconds(s)
    except ValueError:
        raise ValueError(
            f"not an RFC 3339 time, Unix seconds, now or -DURATION (e.g. -14d): {text!r}"
        ) from None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def queries(selector: str = "") -> tuple[str, str]:
    """The CPU (cores) and memory (bytes) PromQL, with ``selector`` (``cluster="prod"``) added
    to both selectors."""
    extra = f",{selector.strip().strip(',')}" if selector.strip() else ""
    return CPU_QUERY.format(extra=extra), MEMORY_QUERY.format(extra=extra)


@dataclass(frozen=True, slots=True)
class UsageExport:
    """An export: the Arrow table in the long format and where it came from.

    Attributes:
        table: ``pyarrow.Table`` with ``timestamp`` (timestamp[ms, UTC]), ``namespace``,
            ``pod_or_workload``, ``cpu_cores`` (cores), ``memory_bytes`` (bytes).
        url, selector, cpu_query, memory_query: the server and what was asked.
        start, end, step: the evaluation instants (Unix seconds; ``end`` included).
        pods: distinct (namespace, pod) in ``table``.
        dropped: pod-instants with only one of CPU and memory, left out.
    """

    table: Any
    url: str
    selector: str
    cpu_query: str
    memory_query: str
    start: float
    end: float
    step: float
    pods: int
    dropped: int

    def metadata(self) -> dict[str, str]:
        """The file's key-value metadata (keys start with :data:`META_PREFIX`)."""
        return {
            f"{META_PREFIX}source": "prometheus",
            f"{META_PREFIX}url": redact_url(self.url),
            f"{META_PREFIX}selector": self.selector,
            f"{META_PREFIX}cpu_query": self.cpu_query,
            f"{META_PREFIX}memory_query": self.memory_query,
            f"{META_PREFIX}from": format_time(self.start),
            f"{META_PREFIX}to": format_time(self.end),
            f"{META_PREFIX}from_seconds": repr(self.start),
            f"{META_PREFIX}to_seconds": repr(self.end),
            f"{META_PREFIX}step_seconds": repr(self.step),
            f"{META_PREFIX}pods": str(self.pods),
            f"{META_PREFIX}rows": str(self.table.num_rows),
            f"{META_PREFIX}dropped_rows": str(self.dropped),
            f"{META_PREFIX}version": scaler_version(),
        }


def _fetch(
    client: PrometheusClient,
    query: str,
    windows: list[tuple[float, float]],
    step: float,
    names: dict[tuple[str, str], int],
    retrying: Retrying,
    tick: Callable[[], None],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Run ``query`` over each window; returns (pod index, time s, value) arrays (validated by
    :meth:`PrometheusClient.query_range`: on the window's grid, finite, >= 0). ``names`` maps
    (namespace, pod) to its index and grows."""
    idx: list[npt.NDArray[np.int64]] = []
    ts: list[npt.NDArray[np.float64]] = []
    vs: list[npt.NDArray[np.float64]] = []
    for lo, hi in windows:
        result = retrying(client.query_range, query, lo, hi, step)
        for labels, times, values in result:
            pod = labels.get("pod", "")
            if not pod or len(times) == 0:
                continue
            i = names.setdefault((labels.get("namespace", ""), pod), len(names))
            ts.append(times)
            vs.append(values)
            idx.append(np.full(len(times), i, dtype=np.int64))
        tick()
    if not idx:
        empty = np.empty(0, dtype=np.float64)
        return np.empty(0, dtype=np.int64), empty, empty
    return np.concatenate(idx), np.concatenate(ts), np.concatenate(vs)


def _no_data(client: PrometheusClient, query: str, metric: str, start: float, end: float) -> HistoryError:
    """The error for a query without a point in the window: a window without samples when the
    metric has series outside it, else an empty result."""
    where = client.where
    window = f"from {format_time(start)} to {format_time(end)}"
    try:
        exists = client.series_exist(metric)
    except HistoryError:
        exists = False
    if exists:
        return HistoryError(
            f"{where}: no samples {window} for {query} (its series exist outside that window)"
        )
    return HistoryError(
        f"{where}: empty result for {query} ({window}): no such series; check --prometheus-selector "
        "and that the kubelet's cAdvisor metrics are scraped"
    )


def _joined_table(
    names: Mapping[tuple[str, str], int],
    lo: float,
    hi: float,
    step: float,
    cpu: tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]],
    memory: tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any]],
) -> tuple[Any, npt.NDArray[np.int64], int]:
    """Join the CPU and memory samples (pod index, Unix seconds, value) by pod and instant
    (``lo + k·step``) into the long-format Arrow table, sorted by namespace, pod and time.
    Returns the table, each row's pod rank and how many samples had no partner (dropped)."""
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    ci, ct, cv = cpu
    mi, mt, mv = memory
    # Join by (pod, instant): instants are lo + k·step.
    per = round((hi - lo) / step) + 1
    csteps = np.rint((ct - lo) / step).astype(np.int64)
    msteps = np.rint((mt - lo) / step).astype(np.int64)
    for k in (csteps, msteps):  # validated at the edge; checked again where a slip would mix pods
        if len(k) and (int(k.min()) < 0 or int(k.max()) >= per):
            raise HistoryError("history export: a sample outside the exported window (internal check)")
    ckey = ci * per + csteps
    mkey = mi * per + msteps
    both, cpos, mpos = np.intersect1d(ckey, mkey, assume_unique=True, return_indices=True)
    dropped = len(ckey) + len(mkey) - 2 * len(both)
    # Sort by namespace, pod, time: rank the pods by name.
    ordered = sorted(names)
    rank = np.empty(len(names), dtype=np.int64)
    for r, key in enumerate(ordered):
        rank[names[key]] = r
    pod_idx = both // per
    order = np.lexsort((both % per, rank[pod_idx]))
    pod_rank = rank[pod_idx][order]
    instants = lo + (both % per)[order].astype(np.float64) * step
    ns_values = sorted({ns for ns, _ in ordered})
    ns_index = {ns: i for i, ns in enumerate(ns_values)}
    ns_of_rank = np.asarray([ns_index[ns] for ns, _ in ordered], dtype=np.int32)
    table = pa.table(
        {
            "timestamp": pa.array(np.rint(instants * 1000.0).astype(np.int64), pa.timestamp("ms", tz="UTC")),
            "namespace": pa.DictionaryArray.from_arrays(
                pa.array(ns_of_rank[pod_rank], pa.int32()), pa.array(ns_values, pa.string())
            ),
            "pod_or_workload": pa.DictionaryArray.from_arrays(
                pa.array(pod_rank.astype(np.int32), pa.int32()),
                pa.array([p for _, p in ordered], pa.string()),
            ),
            "cpu_cores": pa.array(cv[cpos][order], pa.float64()),
            "memory_bytes": pa.array(mv[mpos][order], pa.float64()),
        }
    )
    return table, pod_rank, dropped


def export_usage(
    url: str,
    start: float,
    end: float,
    step: float = 300.0,
    *,
    auth_file: str = "",
    selector: str = "",
    deadline: float = DEFAULT_DEADLINE_SECONDS,
    max_points: int = _MAX_POINTS,
    attempts: int = 4,
    retry_wait: float = 0.5,
    progress: Progress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> UsageExport:
    """Per-pod CPU and memory from Prometheus over ``[start, end]`` (Unix seconds, instants
    aligned to multiples of ``step`` seconds inside it), in the long format (see the module
    doc). Each query runs in chunks of at most ``max_points`` instants; a transient failure is
    retried up to ``attempts`` times in all, waiting ``retry_wait`` seconds, doubled each time.
    ``progress(done, total)`` is called after each chunk.

    Raises:
        HistoryError: a bad range or step, a failure of the server (after the retries), or a
            query without any point in the window (one line, naming the URL and the query).
    """

    if not (step > 0 and math.isfinite(step)):
        raise HistoryError(f"--step must be positive, got {step!r}")
    lo = math.ceil(start / step) * step
    hi = math.floor(end / step) * step
    if not hi >= lo:
        raise HistoryError(
            f"empty range: --from {format_time(start)} is not before --to {format_time(end)} "
            f"at a step of {step:g} s"
        )
    if max_points < 2:
        raise HistoryError(f"points per query must be at least 2, got {max_points}")
    cpu_query, memory_query = queries(selector)
    extra = f",{selector.strip().strip(',')}" if selector.strip() else ""
    windows = list(_chunks(lo, hi, step, max_points))
    total, done = 2 * len(windows), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    retry = retrying(attempts, retry_wait)
    if progress is not None:
        progress(0, total)
    names: dict[tuple[str, str], int] = {}
    with PrometheusClient(url, auth_file=auth_file, deadline=deadline, transport=transport) as client:
        ci, ct, cv = _fetch(client, cpu_query, windows, step, names, retry, tick)
        if len(ci) == 0:
            raise _no_data(
                client, cpu_query, f'container_cpu_usage_seconds_total{{container!=""{extra}}}', lo, hi
            )
        mi, mt, mv = _fetch(client, memory_query, windows, step, names, retry, tick)
        if len(mi) == 0:
            raise _no_data(
                client, memory_query, f'container_memory_working_set_bytes{{container!=""{extra}}}', lo, hi
            )
    table, pod_rank, dropped = _joined_table(names, lo, hi, step, (ci, ct, cv), (mi, mt, mv))
    if table.num_rows == 0:
        raise HistoryError(
            f"prometheus at {redact_url(url.rstrip('/'))}: no pod has both CPU and memory samples from "
            f"{format_time(lo)} to {format_time(hi)} ({cpu_query}; {memory_query})"
        )
    pods = len(np.unique(pod_rank))
    return UsageExport(table, url.rstrip("/"), selector, cpu_query, memory_query, lo, hi, step, pods, dropped)


def write_parquet(export: UsageExport, path: str | Path) -> Path:
    """Write ``export`` to ``path`` as Parquet with its metadata, atomically (a temporary file
    beside it, then renamed). Returns the path.

    Raises:
        OSError: the file cannot be written.
    """
    import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

    p = Path(path)
    meta = {k.encode(): v.encode() for k, v in export.metadata().items()}
    table = export.table.replace_schema_metadata({**(export.table.schema.metadata or {}), **meta})
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, p)
    finally:
        if tmp.exists():
            tmp.unlink()
    return p


def read_metadata(path: str | Path) -> dict[str, str]:
    """The :data:`META_PREFIX` keys of a Parquet file's metadata, prefix removed (empty when the
    file has none or cannot be read)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return {}
    try:
        raw = pq.read_schema(path).metadata or {}
    except Exception:
        return {}
    out = {}
    for k, v in raw.items():
        key = k.decode("utf-8", "replace")
        if key.startswith(META_PREFIX):
            out[key[len(META_PREFIX) :]] = v.decode("utf-8", "replace")
    return out


def cache_path(url: str, selector: str, start: float, end: float, step: float, cache_dir: str | Path) -> Path:
    """Where ``scaler replay --prometheus-url`` keeps the export of these inputs:
    ``cache_dir/prometheus-<hash>.parquet``, the hash of the URL, selector, range and step."""
    digest = hashlib.sha256(repr((url.rstrip("/"), selector.strip(), start, end, step)).encode()).hexdigest()
    return Path(cache_dir) / f"prometheus-{digest[:20]}.parquet"


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/scaler`` (default ``~/.cache/scaler``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scaler"


def scaler_version() -> str:
    """scaler's version (:data:`scaler.__version__`, its single source)."""
    from scaler import __version__

    return __version__


def now() -> float:
    """The wall clock, Unix seconds (relative times count from it)."""
    return time.time()
