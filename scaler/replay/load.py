"""What a replay reads, from a typed :class:`InputSpec`: the starting cluster, the usage history,
the grid of steps and the prices, shared by ``scaler replay`` and ``scaler tune``.

:func:`load_inputs` reads the snapshot (files, the live cluster, or the bundled example), the
trace (a file, or an export of Prometheus kept in a cache), matches pods to series
(:mod:`scaler.replay.inputs`) and builds the grid. It names the snapshot on stderr when the
command chose it (the bundled example, or the live cluster), warns on stderr when the range is
only partly covered by the trace or when few pods follow it, and refuses a trace of the user's
own (the long format) without ``--snapshot``: the bundled example follows the Bitbrains trace
it was built from, not the user's pods. Every bad input is a
:class:`scaler.cmdline.UsageError` (one line, exit status 2).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.cmdline import UsageError, bundled_example
from scaler.errors import InputError
from scaler.model.times import format_time

if TYPE_CHECKING:
    from scaler.model.snapshot import ClusterSnapshot
    from scaler.replay.simulate import ReplayInput
    from scaler.replay.traces import Trace
    from scaler.replay.world import UsageTable

__all__ = ["InputSpec", "LoadedInputs", "PrometheusSpec", "check_range", "load_inputs"]


@dataclass(frozen=True, slots=True)
class PrometheusSpec:
    """A usage history exported from Prometheus (or Google Managed Prometheus).

    Attributes:
        url: the query API's base URL (before ``/api/v1``).
        auth_file: a file holding a bearer token or one ``Header-Name: value`` line; ``""``: none.
        selector: label matchers added to both queries; ``""``: none.
        cache_dir: where exports are kept and reused; ``None``: ``$XDG_CACHE_HOME/scaler``.
        metrics: which series the endpoint holds: ``cadvisor``, ``gke-system`` or ``auto``.
        auth: how queries authenticate: ``auto``, ``google`` or ``none``.
        timeout: the deadline of each call, whole (a duration as given: seconds or Go).
    """

    url: str
    auth_file: str = ""
    selector: str = ""
    cache_dir: Path | None = None
    metrics: str = "auto"
    auth: str = "auto"
    timeout: str = "60s"


@dataclass(frozen=True, slots=True)
class InputSpec:
    """What to replay: the flags of :func:`scaler.replay.command.add_input_flags`, parsed.

    Attributes:
        snapshot: snapshot files or directories; empty: the live cluster with ``prometheus``,
            else the bundled example (then only with a Bitbrains trace).
        trace: the usage trace file or directory; ``None`` with ``prometheus``.
        prometheus: the history's Prometheus; ``None`` with ``trace``.
        kubeconfig, context: the live cluster's kubeconfig and context (``prometheus`` without
            ``snapshot``).
        trace_map: a ``namespace,pod,series`` CSV.
        start, end: the replay's range, Unix seconds (``end`` exclusive); ``None``: the trace's
            own (with ``prometheus``: the last 7 days, up to now).
        step: seconds between steps (controller loops).
        provision_delay: seconds from a scale-up request to the node joining.
        prices: a YAML price table merged over the bundled one; ``None``: the bundled one.
        profile_refresh: seconds between rebuilds of workload profiles (portrait policies).
        quiet: no progress bar while exporting from Prometheus, no note naming the snapshot.
    """

    snapshot: tuple[Path, ...] = ()
    trace: Path | None = None
    prometheus: PrometheusSpec | None = None
    kubeconfig: str | None = None
    context: str | None = None
    trace_map: Path | None = None
    start: float | None = None
    end: float | None = None
    step: float = 300.0
    provision_delay: float = 120.0
    prices: Path | None = None
    profile_refresh: float = 3600.0
    quiet: bool = False


@dataclass(frozen=True, slots=True)
class LoadedInputs:
    """What ``scaler replay`` and ``scaler tune`` read from an :class:`InputSpec`.

    Attributes:
        snapshot, snapshot_source: the starting cluster and how the report names it.
        trace, trace_path: the usage history and its file (a Prometheus export: the cached file).
        pod_series: ``namespace/name`` → series, for the pods that follow the trace.
        used: the series some pod follows.
        grid: the step times, Unix seconds (``usage.times[start_step:]``).
        usage: the used series on the grid, with the past before it that profiles read.
        start_step: the index of ``usage.times`` where the replay starts.
        step, provision_delay, refresh: seconds, as in :class:`InputSpec`.
        prices: machine type → USD per node-hour.
        by_pod, by_workload, without: pods matched to their own series, to their workload's,
            and pods without a series.
    """

    snapshot: ClusterSnapshot
    snapshot_source: str
    trace: Trace
    trace_path: str
    pod_series: Mapping[str, str]
    used: set[str]
    grid: Any
    usage: UsageTable
    start_step: int
    step: float
    provision_delay: float
    refresh: float
    prices: Mapping[str, float]
    by_pod: int
    by_workload: int
    without: int

    def replay_input(self) -> ReplayInput:
        """The :class:`~scaler.replay.simulate.ReplayInput` every policy or trial shares."""
        from scaler.replay.simulate import ReplayInput

        return ReplayInput(
            self.snapshot,
            self.usage,
            self.pod_series,
            self.step,
            self.provision_delay,
            self.prices,
            self.refresh,
            self.start_step,
        )


def check_range(first: float, last: float, start: float | None, end: float | None, step: float) -> str | None:
    """Compare the replay's ``--from``/``--to`` (Unix seconds, ``None`` when not given) with the
    trace's first and last sample of the series the pods follow.

    Returns a warning naming both ranges (RFC 3339) when the range is only partly covered
    (before the first sample usage holds the first one, after the last sample the last one;
    up to one ``step`` past the last sample is covered), else ``None``.

    Raises:
        scaler.cmdline.UsageError: the range and the trace do not overlap at all.
    """
    covers = f"the trace covers {format_time(first)} to {format_time(last)}"
    if start is not None and start > last:
        raise UsageError(f"--from {format_time(start)} is outside the trace: {covers}")
    if end is not None and end <= first:
        raise UsageError(f"--to {format_time(end)} is outside the trace: {covers}")
    lo = start if start is not None else first
    hi = end if end is not None else last
    gaps = []
    if lo < first:
        gaps.append(f"--from {format_time(lo)} is before its first sample")
    if hi > last + step:
        gaps.append(f"--to {format_time(hi)} is after its last sample")
    if not gaps:
        return None
    return f"{' and '.join(gaps)}: {covers}; outside it the nearest sample is held"


def _live_cluster(spec: InputSpec) -> tuple[ClusterSnapshot, str]:
    """The live cluster of the kubeconfig (or in-cluster config), read as ``scaler snapshot``
    reads it, and its label for the report.

    Raises:
        scaler.cmdline.UsageError: no cluster configured, or it cannot be read.
    """
    from scaler.sources.kube import (
        ClusterUnreachable,
        LiveSourceError,
        NoClusterConfig,
        load_live_snapshot,
        make_api_client,
    )

    try:
        api = make_api_client(spec.kubeconfig, spec.context)
        snapshot = load_live_snapshot(api, time.time())
    except NoClusterConfig as e:
        raise UsageError(
            f"--prometheus-url without --snapshot replays the live cluster, but none is configured ({e}): "
            "pass --snapshot DIR (from `scaler snapshot`) or --kubeconfig"
        ) from None
    except ClusterUnreachable as e:
        raise UsageError(f"cluster unreachable: {e}") from None
    except LiveSourceError as e:
        raise UsageError(str(e)) from None
    context = f" (context {spec.context})" if spec.context else ""
    return snapshot, f"live cluster{context}"


def _prometheus_trace(
    prom: PrometheusSpec, start: float | None, end: float | None, step: float, quiet: bool, say: Any
) -> tuple[float, float, str]:
    """Export ``prom``'s usage over ``start``..``end`` (default the last 7 days, aligned to
    ``step``) into the cache (reused when the same URL, selector, range and step were exported
    before); returns the range (Unix seconds) and the file.

    Raises:
        scaler.cmdline.UsageError: a bad range, a failure of the server, an unwritable cache.
    """
    import argparse

    from scaler.history.cli import export_to_file, prometheus_url
    from scaler.history.export import cache_path, default_cache_dir, now, read_metadata

    # `scaler history export`'s own functions read its flags' names.
    flags = argparse.Namespace(
        prometheus_url=prom.url,
        prometheus_auth_file=prom.auth_file,
        prometheus_selector=prom.selector,
        prometheus_metrics=prom.metrics,
        prometheus_auth=prom.auth,
        prometheus_timeout=prom.timeout,
        quiet=quiet,
    )
    prometheus_url(flags)  # refused with credentials in it, before anything is asked or written
    t = now()
    lo = math.ceil((start if start is not None else t - 7 * 86400.0) / step) * step
    hi = math.floor((end if end is not None else t) / step) * step
    if not hi > lo:
        raise UsageError(f"empty replay range: --from {format_time(lo)} is not before --to {format_time(hi)}")
    cache_dir = prom.cache_dir or default_cache_dir()
    path = cache_path(prom.url, prom.selector, lo, hi, step, cache_dir, prom.metrics)
    if read_metadata(path).get("source") == "prometheus":
        say(f"using the export of {prom.url} cached in {path}")
    else:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--cache-dir {cache_dir}: {e}") from None
        export_to_file(flags, lo, hi, step, path, f"--cache-dir {cache_dir}")
    # An export may end sooner than asked (GKE system metrics' newest minutes are not visible yet).
    last = float(read_metadata(path).get("to_seconds", hi))
    return lo, min(hi, last + step), str(path)


def _load_snapshot(spec: InputSpec) -> tuple[ClusterSnapshot, str, str]:
    """The snapshot of ``spec.snapshot`` (the bundled example without it and without
    Prometheus) or of the live cluster: ``(snapshot, name, source)``; ``name`` is the
    directory's name for one snapshot path (which picks a shipped trace map), else ``""``. A
    snapshot the command chose is named on stderr (unless ``spec.quiet``).

    Raises:
        scaler.errors.InputError: a bad snapshot file.
        scaler.cmdline.UsageError: a trace of the user's own without a snapshot; the live
            cluster cannot be read.
    """
    from scaler.replay.traces import trace_kind
    from scaler.sources.files import load_snapshot

    if spec.snapshot or spec.prometheus is None:
        if not spec.snapshot and spec.trace is not None and trace_kind(spec.trace) != "bitbrains":
            raise UsageError(
                f"--trace {spec.trace} needs --snapshot DIR, the cluster its pods run in (from `scaler "
                "snapshot`): without it only the Bitbrains trace replays, over the bundled example"
            )
        paths = list(spec.snapshot) or [bundled_example()]
        snapshot = load_snapshot(
            [str(p) for p in paths], None, warn=lambda line: sys.stderr.write(f"scaler: {line}\n")
        )
        if not spec.snapshot and not spec.quiet:
            sys.stderr.write(f"scaler: no --snapshot: replaying the bundled example {paths[0]}\n")
        name = paths[0].resolve().name if len(paths) == 1 else ""
        return snapshot, name, ", ".join(str(p) for p in paths)
    snapshot, source = _live_cluster(spec)
    if not spec.quiet:
        sys.stderr.write(
            f"scaler: no --snapshot: replaying the {source} with the history of {spec.prometheus.url}\n"
        )
    return snapshot, "", source


def _match_pods(
    snapshot: ClusterSnapshot,
    source: str,
    trace: Trace,
    trace_map: Mapping[str, str],
    snapshot_name: str,
    start: float | None,
    step: float,
) -> tuple[Trace, dict[str, str], tuple[int, int, int]]:
    """The trace series of each pod: ``(trace, pod → series, (pods matched by pod, by
    workload, without a series))``. A Prometheus export matches by pod, then by workload (its
    trace gains the workload means); a trace file by ``trace_map``, the shipped map, then name.
    ``source`` names the snapshot in errors."""
    from scaler.replay.inputs import map_pods, map_pods_by_pod_or_workload, with_workload_means

    running = sum(1 for p in snapshot.pods if not p.is_terminal)
    if trace.meta.get("source") == "prometheus":
        trace, workloads = with_workload_means(trace, snapshot)
        match = map_pods_by_pod_or_workload(
            snapshot, trace, workloads, start if start is not None else trace.span()[0], step, source
        )
        return trace, match.pod_series, (match.by_pod, match.by_workload, match.without_series)
    pod_series = map_pods(snapshot, trace, trace_map, snapshot_name, source)
    return trace, pod_series, (len(pod_series), 0, running - len(pod_series))


def _warn_coverage(
    trace: Trace,
    used: set[str],
    following: int,
    pods: int,
    start: float | None,
    end: float | None,
    step: float,
) -> None:
    """Warn on stderr when ``start``/``end`` fall partly outside the ``used`` series, or when
    fewer than half of the ``pods`` follow the trace (``following``)."""
    if used:
        warning = check_range(
            min(float(trace.series[s].times[0]) for s in used),
            max(float(trace.series[s].times[-1]) for s in used),
            start,
            end,
            step,
        )
        if warning:
            sys.stderr.write(f"scaler: warning: {warning}\n")
    if following * 2 < pods:
        sys.stderr.write(
            f"scaler: warning: {following} of {pods} pods follow the trace; the "
            f"other {pods - following} keep the usage of their PodMetrics all along\n"
        )


def load_inputs(spec: InputSpec, history: float, say: Callable[[str], None]) -> LoadedInputs:
    """Read the snapshot (or live cluster), the trace (or the Prometheus export) and the prices
    of ``spec``, and build the replay grid over ``spec.start``..``spec.end`` with ``history``
    seconds of past usage before it (workload profiles). ``say`` shows progress notes.

    Raises:
        scaler.cmdline.UsageError: bad input (one line naming the bad value).
    """
    from scaler.prices import load_prices
    from scaler.replay.bundled import known_map
    from scaler.replay.inputs import ANNOTATION_SERIES, build_grid, load_trace_map, usage_table, with_history
    from scaler.replay.traces import load_trace

    if spec.trace is None and spec.prometheus is None:
        raise UsageError("no usage history: give --trace PATH or --prometheus-url URL")
    if spec.trace is not None and spec.prometheus is not None:
        raise UsageError("--trace and --prometheus-url exclude each other: give one")
    if not spec.step > 0:
        raise UsageError(f"--step must be positive, got {spec.step:g} s")
    start, end, step = spec.start, spec.end, spec.step
    try:
        prices = load_prices(str(spec.prices) if spec.prices is not None else None)
        snapshot, snapshot_name, snapshot_source = _load_snapshot(spec)
        trace_path = str(spec.trace)
        if spec.prometheus is not None:
            start, end, trace_path = _prometheus_trace(spec.prometheus, start, end, step, spec.quiet, say)
        trace_map = load_trace_map(spec.trace_map) if spec.trace_map is not None else {}
        wanted = set(trace_map.values()) | set(known_map(snapshot_name).values())
        wanted |= {
            p.annotations[ANNOTATION_SERIES] for p in snapshot.pods if ANNOTATION_SERIES in p.annotations
        }
        say(f"reading trace {trace_path} …")
        trace = load_trace(trace_path, wanted=wanted or None)
        trace, pod_series, (by_pod, by_workload, without) = _match_pods(
            snapshot, snapshot_source, trace, trace_map, snapshot_name, start, step
        )
        used = set(pod_series.values())
        _warn_coverage(trace, used, len(pod_series), len(snapshot.pods), start, end, step)
        grid = build_grid(trace, used, start, end, step)
        full, start_step = with_history(trace, used, grid, history)
        usage = usage_table(trace, used, full)
    except InputError as e:  # a price, snapshot, trace or map file
        raise UsageError(str(e)) from None
    return LoadedInputs(
        snapshot=snapshot,
        snapshot_source=snapshot_source,
        trace=trace,
        trace_path=trace_path,
        pod_series=pod_series,
        used=used,
        grid=grid,
        usage=usage,
        start_step=start_step,
        step=step,
        provision_delay=spec.provision_delay,
        refresh=spec.profile_refresh,
        prices=prices,
        by_pod=by_pod,
        by_workload=by_workload,
        without=without,
    )
