"""``scaler history export``: pod usage from Prometheus into the replay's long format (Parquet),
streamed: a month of a large cluster is never held whole.

The source (:mod:`scaler.history.usage_metrics`: cAdvisor, GKE system metrics, or ``auto``)
gives two range queries, per-pod CPU (cores, the 5-minute rate of a CPU-seconds counter) and
memory (bytes: cAdvisor's working set, GKE's non-evictable used bytes), each summed by namespace
and pod. They run window by window over ``[start, end]`` at ``step``
(:class:`~scaler.history.prometheus.Windows`: each window at most 11,000 instants, a day, and
about :data:`~scaler.history.prometheus.POINTS_PER_ANSWER` points once the series count is
known, so that no answer grows with the cluster; GKE system metrics' 60 s sampling needs a step
of at least 60 s), each call retried with tenacity when the failure is transient (unreachable,
HTTP 429 or 5xx, waiting what ``Retry-After`` asks: Cloud Monitoring's quota errors). With GKE
system metrics the range ends :data:`~scaler.history.usage_metrics.GKE_LATENESS_SECONDS` before
now at the latest: newer points are not visible yet, and a half-written last instant would look
like pods that vanished.

Each window's two answers are joined by pod and instant and written at once as the next part of
the file (Parquet row groups of at least :data:`ROW_GROUP_ROWS` rows), in the long format
:mod:`scaler.replay.traces` reads: ``timestamp`` (UTC), ``namespace``, ``pod_or_workload`` (the
pod), ``cpu_cores``, ``memory_bytes``. An instant where one of the two queries has no point for
the pod (a pod's first instant has a working set but no rate yet) is left out. Within a row group
rows are sorted by namespace, pod and time; row groups follow time. The same answers give the
same file. Memory: one window's answers and one row group, whatever the range.

The Parquet file's key-value metadata names where it came from (:data:`META_PREFIX` keys):
the source, the URL (redacted), both queries, the selector, the range and step (RFC 3339 and
seconds), the scaler version, the pods, rows and the rows left out. The file is written beside
its destination and renamed when complete: a failed export leaves nothing.

Times (:func:`parse_time`): RFC 3339, Unix seconds, ``now``, or relative to now: ``-14d``,
``now-6h``, ``-1h30m`` (units ``w``, ``d``, ``h``, ``m``, ``s``).

Errors (:class:`~scaler.history.prometheus.HistoryError`, one line naming the URL or the query):
the server's own (unreachable, too slow, too large, HTTP error, a query error, an answer that
fails validation), a query that returns no series at all, and a window where the series exist
but hold no sample.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from scaler.history.http import DEFAULT_DEADLINE_SECONDS, retrying
from scaler.history.prometheus import (
    _MAX_POINTS,
    POINTS_PER_ANSWER,
    HistoryError,
    PrometheusClient,
    RangeSeries,
    Windows,
)
from scaler.history.usage_metrics import UsageMetrics, choose
from scaler.model.times import format_duration, format_time, timestamp_seconds
from scaler.specs import redact_url

__all__ = [
    "META_PREFIX",
    "ROW_GROUP_ROWS",
    "UsageExport",
    "cache_path",
    "export_usage",
    "parse_span",
    "parse_time",
    "read_metadata",
    "scaler_version",
]

META_PREFIX = "scaler."
"""Prefix of the keys scaler writes into an export's Parquet metadata."""

ROW_GROUP_ROWS = 1 << 20
"""Windows are gathered into row groups of at least this many rows (a Parquet reader's unit)."""

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


@dataclass(frozen=True, slots=True)
class UsageExport:
    """A written export: where it came from and what it holds.

    Attributes:
        path: the Parquet file.
        url, selector, cpu_query, memory_query: the server (URL redacted) and what was asked.
        metrics: the source read (``cadvisor`` or ``gke-system``).
        start, end, step: the evaluation instants (Unix seconds; ``end`` included).
        rows: samples written (pod-instants).
        pods: distinct (namespace, pod) written.
        dropped: pod-instants with only one of CPU and memory, left out.
        row_groups: Parquet row groups written.
    """

    path: Path
    url: str
    selector: str
    cpu_query: str
    memory_query: str
    metrics: str
    start: float
    end: float
    step: float
    rows: int
    pods: int
    dropped: int
    row_groups: int

    def metadata(self) -> dict[str, str]:
        """The file's key-value metadata (keys start with :data:`META_PREFIX`)."""
        return {
            f"{META_PREFIX}source": "prometheus",
            f"{META_PREFIX}metrics": self.metrics,
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
            f"{META_PREFIX}rows": str(self.rows),
            f"{META_PREFIX}dropped_rows": str(self.dropped),
            f"{META_PREFIX}version": scaler_version(),
        }


_SCHEMA_FIELDS = ("timestamp", "namespace", "pod_or_workload", "cpu_cores", "memory_bytes")


def _window_table(
    cpu: list[RangeSeries],
    memory: list[RangeSeries],
    lo: float,
    hi: float,
    step: float,
    metrics: UsageMetrics,
) -> tuple[Any, set[tuple[str, str]], int, int, int]:
    """One window's answers joined by pod and instant (``lo + k·step``) into long-format rows,
    sorted by namespace, pod and time. Returns the Arrow table, its pods, the rows left out
    (one resource only), and the points of each query."""
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    names: dict[tuple[str, str], int] = {}
    per = round((hi - lo) / step) + 1

    def columns(answer: list[RangeSeries]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], int]:
        keys: list[npt.NDArray[np.int64]] = []
        values: list[npt.NDArray[np.float64]] = []
        points = 0
        for labels, times, vals in answer:
            pod = metrics.pod_of(labels)
            if not pod[1] or len(times) == 0:
                continue
            i = names.setdefault(pod, len(names))
            k = np.rint((times - lo) / step).astype(np.int64)
            if int(k.min()) < 0 or int(k.max()) >= per:  # validated at the edge; a slip here would mix pods
                raise HistoryError("history export: a sample outside its window (internal check)")
            keys.append(i * per + k)
            values.append(vals)
            points += len(times)
        if not keys:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64), 0
        key = np.concatenate(keys)
        val = np.concatenate(values)
        if len(np.unique(key)) != len(key):  # two series of one pod (labels the sum did not merge)
            order = np.argsort(key, kind="stable")
            key, val = key[order], val[order]
            uniq, first = np.unique(key, return_index=True)
            val, key = np.add.reduceat(val, first), uniq
        return key, val, points

    ckey, cval, cpoints = columns(cpu)
    mkey, mval, mpoints = columns(memory)
    both, cpos, mpos = np.intersect1d(ckey, mkey, assume_unique=True, return_indices=True)
    dropped = len(ckey) + len(mkey) - 2 * len(both)
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
            "cpu_cores": pa.array(cval[cpos][order], pa.float64()),
            "memory_bytes": pa.array(mval[mpos][order], pa.float64()),
        }
    )
    kept = {ordered[int(r)] for r in np.unique(pod_rank)}
    return table, kept, dropped, cpoints, mpoints


def _no_data(
    client: PrometheusClient, query: str, selector: str, metrics: UsageMetrics, start: float, end: float
) -> HistoryError:
    """The error for a query without a point in the window: a window without samples when the
    metric has series outside it, else an empty result."""
    where = client.where
    window = f"from {format_time(start)} to {format_time(end)}"
    try:
        exists = client.series_exist(selector)
    except HistoryError:
        exists = False
    if exists:
        return HistoryError(
            f"{where}: no samples {window} for {query} (its series exist outside that window)"
        )
    return HistoryError(f"{where}: empty result for {query} ({window}): no such series; {metrics.hint}")


class _RowGroups:
    """The export's Parquet writer: tables gathered into row groups of at least
    :data:`ROW_GROUP_ROWS` rows, written to a temporary file beside ``path`` and renamed onto
    it by :meth:`finish`; :meth:`close` removes whatever is left of an unfinished file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self.groups = self.rows = 0
        self._pending: list[Any] = []
        self._writer: Any = None

    def add(self, table: Any) -> None:
        """Queue ``table``'s rows (if any); write a row group once enough are queued."""
        if not table.num_rows:
            return
        self.rows += table.num_rows
        self._pending.append(table)
        if sum(t.num_rows for t in self._pending) >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

        if not self._pending:
            return
        table = pa.concat_tables(self._pending)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.tmp, table.schema)
        self._writer.write_table(table, row_group_size=max(table.num_rows, 1))
        self.groups += 1
        self._pending = []

    def finish(self, metadata: dict[str, str]) -> None:
        """Write what is queued and ``metadata``, close, and rename onto the destination."""
        self._flush()
        self._writer.add_key_value_metadata(metadata)
        self._writer.close()
        self._writer = None
        os.replace(self.tmp, self.path)

    def close(self) -> None:
        """Close and remove an unfinished file (nothing after :meth:`finish`)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self.tmp.exists():
            self.tmp.unlink()


def _aligned(start: float, end: float, step: float, max_points: int) -> tuple[float, float]:
    """The first and last instants ``k·step`` of ``[start, end]``.

    Raises:
        HistoryError: a bad step or point count, or no instant in the range.
    """
    if not (step > 0 and math.isfinite(step)):
        raise HistoryError(f"--step must be positive, got {step!r}")
    if max_points < 2:
        raise HistoryError(f"points per query must be at least 2, got {max_points}")
    lo, hi = math.ceil(start / step) * step, math.floor(end / step) * step
    if not hi >= lo:
        raise HistoryError(
            f"empty range: --from {format_time(start)} is not before --to {format_time(end)} at a step of {step:g} s"
        )
    return lo, hi


def _visible_end(
    source: UsageMetrics, lo: float, hi: float, step: float, now: float, where: str, said: list[str]
) -> float:
    """``hi``, or the last instant whose points ``source`` shows by ``now`` (its lateness; a line
    for ``said`` then says so).

    Raises:
        HistoryError: a step finer than the source's sampling, or nothing visible yet.
    """
    if source.sampling_seconds and step < source.sampling_seconds:
        raise HistoryError(
            f"--step {format_duration(step)} is finer than {source.title}' sampling "
            f"({format_duration(source.sampling_seconds)})"
        )
    if not source.lateness_seconds:
        return hi
    visible = math.floor((now - source.lateness_seconds) / step) * step
    if hi <= visible:
        return hi
    if visible < lo:
        raise HistoryError(
            f"{where}: {source.title} from {format_time(lo)} are not visible yet "
            f"(points appear up to {format_duration(source.lateness_seconds)} after they are taken)"
        )
    said.append(f"--to moved back to {format_time(visible)}: newer {source.title} points are not visible yet")
    return visible


def _check_points(
    client: PrometheusClient,
    source: UsageMetrics,
    selector: str,
    lo: float,
    hi: float,
    cpu_points: int,
    memory_points: int,
    rows: int,
) -> None:
    """Refuse an export without CPU points, without memory points, or without a pod that has both.

    Raises:
        HistoryError: one line naming the server and the query (see :func:`_no_data`).
    """
    cpu_query, memory_query = source.cpu_query(selector), source.memory_query(selector)
    if cpu_points == 0:
        raise _no_data(client, cpu_query, source.cpu_selector(selector), source, lo, hi)
    if memory_points == 0:
        raise _no_data(client, memory_query, source.memory_selector(selector), source, lo, hi)
    if rows == 0:
        raise HistoryError(
            f"{client.where}: no pod has both CPU and memory samples from "
            f"{format_time(lo)} to {format_time(hi)} ({cpu_query}; {memory_query})"
        )


def export_usage(
    url: str,
    start: float,
    end: float,
    step: float = 300.0,
    *,
    out: str | Path,
    auth_file: str = "",
    auth: str = "auto",
    selector: str = "",
    metrics: str = "auto",
    deadline: float = DEFAULT_DEADLINE_SECONDS,
    max_points: int = _MAX_POINTS,
    points: int = POINTS_PER_ANSWER,
    attempts: int = 4,
    retry_wait: float = 0.5,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.time,
) -> UsageExport:
    """Export per-pod CPU and memory from ``url`` over ``[start, end]`` (Unix seconds, instants
    aligned to multiples of ``step`` seconds inside it) into the Parquet file ``out``, streamed
    (see the module doc). ``metrics`` is ``cadvisor``, ``gke-system`` or ``auto`` (``say`` is told,
    once the file is complete, which one ``auto`` took, and when the range's end moved back for
    GKE's lateness). A transient failure is retried up to ``attempts`` times in all, waiting
    ``retry_wait`` seconds, doubled each time (or what ``Retry-After`` asks).
    ``progress(done, total)`` is called after each query (``total`` estimated from the window
    size).

    Raises:
        HistoryError: a bad range or step, a failure of the server (after the retries), a query
            without any point in the window (one line, naming the URL and the query), or ``out``
            cannot be written (its ``OSError`` message).
    """
    lo, hi = _aligned(start, end, step, max_points)
    retry = retrying(attempts, retry_wait)
    path = Path(out)
    with PrometheusClient(
        url, auth_file=auth_file, auth=auth, deadline=deadline, transport=transport
    ) as client:
        source, why = retry(choose, client, metrics, selector, lo, hi)
        said: list[str] = [f"history source: {why}"] if metrics == "auto" else []
        hi = _visible_end(source, lo, hi, step, clock(), client.where, said)
        cpu_query, memory_query = source.cpu_query(selector), source.memory_query(selector)
        windows = Windows(lo, hi, step, max_points, points)
        done = dropped = cpu_points = memory_points = 0
        pods: set[tuple[str, str]] = set()
        out_file = _RowGroups(path)
        try:
            if progress is not None:
                progress(0, 2 * windows.left())
            for wlo, whi in windows:
                cpu = retry(client.query_range, cpu_query, wlo, whi, step)
                if progress is not None:
                    progress(done + 1, done + 2 + 2 * windows.left())
                memory = retry(client.query_range, memory_query, wlo, whi, step)
                windows.saw(max(len(cpu), len(memory)))
                done += 2
                table, kept, left_out, cp, mp = _window_table(cpu, memory, wlo, whi, step, source)
                cpu_points, memory_points, dropped = cpu_points + cp, memory_points + mp, dropped + left_out
                pods |= kept
                out_file.add(table)
                if progress is not None:
                    progress(done, done + 2 * windows.left())
            _check_points(client, source, selector, lo, hi, cpu_points, memory_points, out_file.rows)
            export = UsageExport(
                path, url.rstrip("/"), selector, cpu_query, memory_query, source.name, lo, hi, step,
                out_file.rows, len(pods), dropped, 0,
            )  # fmt: skip
            out_file.finish(export.metadata())
            export = replace(export, row_groups=out_file.groups)
        except OSError as e:
            raise HistoryError(f"{path}: cannot write: {' '.join(str(e).split())}") from None
        finally:
            out_file.close()
    if say is not None:  # once the export is complete: a failure is one line
        for line in said:
            say(line)
    return export


def read_metadata(path: str | Path) -> dict[str, str]:
    """The :data:`META_PREFIX` keys of a Parquet file's key-value metadata (the file's own and
    its Arrow schema's), prefix removed (empty when the file has none or cannot be read)."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return {}
    try:
        pf = pq.ParquetFile(path)
        raw = {**(pf.schema_arrow.metadata or {}), **(pf.metadata.metadata or {})}
    except Exception:
        return {}
    out = {}
    for k, v in raw.items():
        key = k.decode("utf-8", "replace")
        if key.startswith(META_PREFIX):
            out[key[len(META_PREFIX) :]] = v.decode("utf-8", "replace")
    return out


def cache_path(
    url: str,
    selector: str,
    start: float,
    end: float,
    step: float,
    cache_dir: str | Path,
    metrics: str = "auto",
) -> Path:
    """Where ``scaler replay --prometheus-url`` keeps the export of these inputs:
    ``cache_dir/prometheus-<hash>.parquet``, the hash of the URL, selector, range, step and
    ``--prometheus-metrics``."""
    key = (url.rstrip("/"), selector.strip(), start, end, step) + ((metrics,) if metrics != "auto" else ())
    digest = hashlib.sha256(repr(key).encode()).hexdigest()
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
