"""From a snapshot and a trace to a replay: which pod follows which series, and the step grid.

**Which pod follows which series**, first match wins:

1. the pod's annotation ``scaler.io/replay-series: <series>``;
2. ``--trace-map FILE``: a CSV with the header ``namespace,pod,series``;
3. for a Bitbrains trace and a snapshot built from it by the project (the bundled
   ``bitbrains-gke-day1``, the test snapshots ``bitbrains-gke-night`` and
   ``bitbrains-gke-night-lowreq``, recognised by directory name), the shipped map
   (:mod:`scaler.replay.bundled`: each trace pod to the VM it was built from);
4. for the long format, the series ``namespace/pod-name``, else ``namespace/workload``, where the
   workload is the pod's top-level owner (a ReplicaSet's Deployment, a Job's CronJob, else its
   controller): a workload's series gives the usage of *each* of its pods.

Pods that follow no series keep their snapshot usage (their PodMetrics). A replay where no pod
follows any series is refused.

**The grid.** Steps run from ``--from`` (default: the first sample of the series in use) every
``--step`` while before ``--to`` (default: the last such sample, included). The snapshot is moved
in time so that its "now" is the first step: nodes and pods keep their ages. When a policy
builds workload profiles, the grid also reaches back over the trace before ``--from`` (up to its
``--history-days``): those steps are not replayed, only read as the past.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scaler.errors import InputError
from scaler.model.records import Pod
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_time
from scaler.replay.bundled import known_map
from scaler.replay.sim_records import UsageTable, _workload_name
from scaler.replay.traces import Series, Trace, TraceError, resample

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "ANNOTATION_SERIES",
    "MappingError",
    "PodMatch",
    "build_grid",
    "load_trace_map",
    "map_pods",
    "map_pods_by_pod_or_workload",
    "usage_table",
    "with_history",
    "with_workload_means",
]

ANNOTATION_SERIES = "scaler.io/replay-series"
"""Pod annotation naming the trace series the pod follows."""


class MappingError(InputError, ValueError):
    """The pod → series mapping is unusable; the message says why (and names the file/line)."""


def load_trace_map(path: str | Path) -> dict[str, str]:
    """Read a ``namespace,pod,series`` CSV into ``namespace/pod`` → series.

    Raises:
        MappingError: unreadable file, missing columns or an incomplete row (names file and line).
    """
    p = Path(path)
    try:
        with p.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            cols = [c.strip() for c in reader.fieldnames or []]
            if not {"namespace", "pod", "series"} <= set(cols):
                raise MappingError(f"{p}:1: the header must name namespace,pod,series")
            out: dict[str, str] = {}
            for row in reader:
                r = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
                if not any(r.values()):
                    continue
                if not (r.get("namespace") and r.get("pod") and r.get("series")):
                    raise MappingError(f"{p}:{reader.line_num}: namespace, pod and series must all be set")
                out[f"{r['namespace']}/{r['pod']}"] = r["series"]
    except (OSError, UnicodeDecodeError) as e:
        raise MappingError(f"{p}: cannot read: {e}") from None
    except csv.Error as e:
        raise MappingError(f"{p}: malformed CSV: {e}") from None
    return out


def map_pods(
    snapshot: ClusterSnapshot,
    trace: Trace,
    trace_map: Mapping[str, str] | None = None,
    snapshot_name: str = "",
    snapshot_source: str = "",
) -> dict[str, str]:
    """``namespace/name`` → series name for every pod of ``snapshot`` that follows ``trace``
    (rules in the module doc). ``snapshot_name`` is the snapshot directory's name (shipped maps
    apply to the snapshots of :data:`scaler.replay.bundled.KNOWN_SNAPSHOTS`);
    ``snapshot_source`` names the snapshot in the error (its files).

    Raises:
        MappingError: no pod follows any series of the trace.
    """
    series = trace.series
    bundled = known_map(snapshot_name) if trace.kind == "bitbrains" else {}
    out: dict[str, str] = {}
    for pod in snapshot.pods:
        if pod.is_terminal:
            continue
        found = _series_for(pod, snapshot, trace, trace_map or {}, bundled)
        if found is not None and found in series:
            out[pod.key] = found
    if not out:
        hint = (
            "annotate pods with scaler.io/replay-series or pass --trace-map"
            if trace.kind == "bitbrains"
            else "name pods or workloads as namespace,pod_or_workload in the trace"
        )
        which = _snapshot_named(snapshot_source or snapshot_name)
        raise MappingError(f"no pod of {which} follows a series of the trace {trace.source}: {hint}")
    return out


def _snapshot_named(source: str) -> str:
    return f"the snapshot {source}" if source else "the snapshot"


def _series_for(
    pod: Pod,
    snapshot: ClusterSnapshot,
    trace: Trace,
    trace_map: Mapping[str, str],
    bundled: Mapping[str, str],
) -> str | None:
    named = pod.annotations.get(ANNOTATION_SERIES)
    if named:
        return named
    if pod.key in trace_map:
        return trace_map[pod.key]
    if pod.key in bundled:
        return bundled[pod.key]
    if trace.kind != "long":
        return None
    if pod.key in trace.series:
        return pod.key
    workload = _workload_name(pod, snapshot)
    if workload is not None and f"{pod.namespace}/{workload}" in trace.series:
        return f"{pod.namespace}/{workload}"
    return None


def build_grid(
    trace: Trace, used: set[str], start: float | None, end: float | None, step: float
) -> FloatArray:
    """The replay's step times.

    Raises:
        TraceError: ``step`` is not positive, or the range is empty.
    """
    if not step > 0:
        raise TraceError(f"--step must be positive, got {step}")
    firsts = [float(trace.series[s].times[0]) for s in used]
    lasts = [float(trace.series[s].times[-1]) for s in used]
    lo = start if start is not None else min(firsts)
    hi = end if end is not None else max(lasts) + 1e-6
    if not hi > lo:
        raise TraceError(f"empty replay range: --from {format_time(lo)} is not before --to {format_time(hi)}")
    n = int(np.ceil((hi - lo) / step))
    return lo + step * np.arange(max(n, 1), dtype=np.float64)


def usage_table(trace: Trace, used: set[str], grid: FloatArray) -> UsageTable:
    """The series in ``used`` resampled onto ``grid`` (a trace on a regular grid: its columns,
    without a copy where it can, :meth:`~scaler.replay.trace_grid.GridUsage.usage_table`)."""
    if trace.grid is not None:
        table: UsageTable | None = trace.grid.usage_table(used, grid)
        if table is not None:
            return table
    names = tuple(sorted(used))
    cpu = np.empty((len(names), len(grid)), dtype=np.float64)
    mem = np.empty((len(names), len(grid)), dtype=np.float64)
    for i, name in enumerate(names):
        cpu[i], mem[i] = resample(trace.series[name], grid)
    first = np.asarray([float(trace.series[n].times[0]) for n in names], dtype=np.float64)
    return UsageTable(grid, names, cpu, mem, first)


def with_history(trace: Trace, used: set[str], grid: FloatArray, seconds: float) -> tuple[FloatArray, int]:
    """``grid`` extended backwards, at the same step, over up to ``seconds`` of the trace before
    it (not before the trace's first sample of ``used``), and the index where ``grid`` starts."""
    if seconds <= 0 or len(grid) < 2:
        return grid, 0
    step = float(grid[1] - grid[0])
    earliest = min(float(trace.series[s].times[0]) for s in used)
    n = int(np.floor((float(grid[0]) - max(earliest, float(grid[0]) - seconds)) / step))
    if n <= 0:
        return grid, 0
    past = float(grid[0]) - step * np.arange(n, 0, -1, dtype=np.float64)
    return np.concatenate([past, grid]), n


def with_workload_means(trace: Trace, snapshot: ClusterSnapshot) -> tuple[Trace, frozenset[str]]:
    """``trace`` (series named ``namespace/pod``, as :mod:`scaler.history.export` writes them)
    plus one series per workload, ``namespace/workload``: at each time, the mean of the series
    of its pods that have a sample then (the usage of one of its pods). A pod of a series
    resolves to its workload by :func:`scaler.history.prometheus.pod_workload_resolver`: by its
    record when the snapshot holds it, else by its name and the workloads the snapshot knows
    (pods replaced during the window). Returns the trace and the names of the added series (a
    workload whose name is already a series is left as it is)."""
    from scaler.history.prometheus import pod_workload_resolver

    resolve = pod_workload_resolver(snapshot)
    groups: dict[str, list[Series]] = {}
    for name, s in trace.series.items():
        ns, _, pod = name.partition("/")
        key = resolve(ns, pod)
        if key is None or len(s.times) == 0:
            continue
        wns, _kind, workload = key.split("/", 2)
        groups.setdefault(f"{wns}/{workload}", []).append(s)
    series = dict(trace.series)
    added = set()
    for workload, members in sorted(groups.items()):
        if workload in series:
            continue
        t = np.concatenate([m.times for m in members])
        times, inverse = np.unique(t, return_inverse=True)
        count = np.bincount(inverse).astype(np.float64)
        cpu = np.bincount(inverse, weights=np.concatenate([m.cpu_millicores for m in members])) / count
        mem = np.bincount(inverse, weights=np.concatenate([m.memory_bytes for m in members])) / count
        series[workload] = Series(times, cpu, mem)
        added.add(workload)
    return replace(trace, series=series), frozenset(added)


@dataclass(frozen=True, slots=True)
class PodMatch:
    """Which pod follows which series, and how each was matched.

    Attributes:
        pod_series: ``namespace/name`` → series name, for the pods that follow one.
        by_pod: pods matched by their own series (namespace and pod name, or the annotation).
        by_workload: pods matched by their workload's mean series.
        without_series: running pods with no series (they keep their PodMetrics).
    """

    pod_series: dict[str, str]
    by_pod: int
    by_workload: int
    without_series: int


def map_pods_by_pod_or_workload(
    snapshot: ClusterSnapshot,
    trace: Trace,
    workload_series: frozenset[str],
    start: float,
    step: float,
    snapshot_source: str = "",
) -> PodMatch:
    """Map the pods of ``snapshot`` onto a trace of per-pod series with workload means
    (:func:`with_workload_means`): the annotation ``scaler.io/replay-series`` first; then the
    pod's own series ``namespace/pod`` when it has a sample by ``start + step`` (Unix s); else
    its workload's mean, when there is one (the pod replaced another during the window, as a
    Deployment's pods do); else its own series when it has one. ``snapshot_source`` names the
    snapshot in the error.

    Raises:
        MappingError: no pod follows any series of the trace.
    """
    out: dict[str, str] = {}
    by_pod = by_workload = without = 0
    for pod in snapshot.pods:
        if pod.is_terminal:
            continue
        named = pod.annotations.get(ANNOTATION_SERIES)
        if named and named in trace.series:
            out[pod.key] = named
            by_pod += 1
            continue
        own = trace.series.get(pod.key)
        name = _workload_name(pod, snapshot)
        workload = f"{pod.namespace}/{name}" if name is not None else None
        if workload not in workload_series:
            workload = None
        if own is not None and (workload is None or float(own.times[0]) <= start + step):
            out[pod.key] = pod.key
            by_pod += 1
        elif workload is not None:
            out[pod.key] = workload
            by_workload += 1
        else:
            without += 1
    if not out:
        raise MappingError(
            f"no pod of {_snapshot_named(snapshot_source)} follows a series of {trace.source}: its series name "
            "other pods (namespace/pod); is the snapshot of the cluster the series come from?"
        )
    return PodMatch(out, by_pod, by_workload, without)
