"""``scaler replay``: compare scale-down policies over a usage trace, side by side.

Wiring (in :mod:`scaler.cli`): ``add_parser(subparsers)`` adds the ``replay`` sub-command and
``run(args)`` executes it. Bad input — an unknown policy or flag, a malformed trace row (named
by file and line), an unreadable snapshot, price or map file — raises
:class:`scaler.cmdline.UsageError` with a one-line message naming the bad value (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.cmdline import ParagraphHelpFormatter, UsageError, bundled_example
from scaler.errors import InputError
from scaler.model.times import format_time, parse_duration_seconds, timestamp_seconds

if TYPE_CHECKING:
    from rich.console import Console

    from scaler.replay.policies import Policy
    from scaler.replay.simulate import PolicyResult, ReplayInput

__all__ = ["OUTPUT_FORMATS", "add_parser", "check_range", "run"]

OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "html")
"""``-o`` of ``scaler replay``: kubectl's table, ``wide``, ``json`` and ``yaml``, plus ``html``."""

_EPILOG = """\
policies: ca-requests (requests, threshold 0.5, no TargetUsage), seed (real usage, instantaneous,
TargetUsage 0.45/0.75), scaler (defaults: p95 over the unneeded window), scaler-portrait (scaler +
resource-portrait plugins fed by the replay's own past), none (no scale-down), or
NAME=--flag=value;--flag2=value with any flags of `scaler run` plus --usage-window, --history-days
and --scheduler-plugins (the simulated scheduler also runs the policy's filter and score plugins).

usage history: --prometheus-url URL (pod CPU and working set from Prometheus or Google Managed
Prometheus over --from..--to, default the last 7 days; cached in --cache-dir), or --trace PATH.

trace formats: Bitbrains GWA-T-12 (a .tar.gz or directory of <vm>.csv files; "Timestamp [ms]" holds
Unix seconds), or a long CSV/Parquet with columns
timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes (timestamp in Unix seconds or RFC 3339;
a workload row gives each of its pods' usage).
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``replay`` sub-command to ``subparsers`` (from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "replay",
        help="what-if: replay a usage trace and compare scale-down policies side by side",
        description="Replay a usage trace over a simulated cluster and compare scale-down policies "
        "(node-hours, cost, evictions, overload risk), each on an identical replay driven by the live "
        "controller's code.",
        epilog=_EPILOG,
        formatter_class=ParagraphHelpFormatter,
    )
    _add_input_flags(p)
    _add_run_flags(p)


def _add_input_flags(p: argparse.ArgumentParser) -> None:
    """What is replayed: the starting cluster, the usage (trace or Prometheus), the pod map."""
    p.add_argument(
        "--snapshot",
        nargs="+",
        metavar="PATH",
        help="starting cluster: snapshot files or directories (default: the bundled example)",
    )
    p.add_argument(
        "--trace",
        metavar="PATH",
        help="usage trace: Bitbrains .tar.gz or directory, or a long-format .csv/.parquet "
        "(or --prometheus-url)",
    )
    from scaler.history.cli import add_prometheus_flags

    add_prometheus_flags(p, required=False)
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="with --prometheus-url: where the export is kept and reused (default $XDG_CACHE_HOME/scaler)",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="with --prometheus-url and no --snapshot: kubeconfig of the cluster",
    )
    p.add_argument("--context", metavar="NAME", help="kubeconfig context")
    p.add_argument(
        "--trace-map", metavar="FILE", help="CSV namespace,pod,series: which pod follows which trace series"
    )


def _add_run_flags(p: argparse.ArgumentParser) -> None:
    """How it is replayed and reported: the range, the step, the policies, the output."""
    p.add_argument(
        "--from",
        dest="start",
        metavar="TIME",
        help="first step, trace time (RFC 3339, Unix seconds, or relative to now: -14d, now-6h; "
        "default: the trace's start, or -7d with --prometheus-url)",
    )
    p.add_argument(
        "--to",
        dest="end",
        metavar="TIME",
        help="end of the replay, exclusive (default: the trace's last sample, or now with --prometheus-url)",
    )
    p.add_argument(
        "--step", default="5m", metavar="duration", help="time between controller loops (default 5m0s)"
    )
    p.add_argument(
        "--policies",
        action="append",
        metavar="LIST",
        help="comma-separated policies (default ca-requests,seed,scaler,scaler-portrait); repeatable",
    )
    p.add_argument(
        "--config", metavar="FILE", help="YAML of scaler flags applied to every policy (policy flags win)"
    )
    p.add_argument(
        "--provision-delay",
        default="2m",
        metavar="duration",
        help="scale-up: time from pods pending to the new node joining (default 2m0s)",
    )
    p.add_argument(
        "--prices", metavar="FILE", help="YAML machine-type: USD/hour, merged over the bundled table"
    )
    p.add_argument(
        "--output",
        "-o",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table (fits 80 columns), wide (adds node-hours, nodes added, absolute overload, "
        "descriptions), json, yaml, or html (a self-contained page; needs --out)",
    )
    p.add_argument("--out", metavar="FILE", help="write the json/yaml/html report here (html needs it)")
    p.add_argument(
        "--processes",
        type=int,
        default=None,
        metavar="int",
        help="policies replayed in parallel (default: CPU count)",
    )
    p.add_argument(
        "--profile-refresh",
        default="1h",
        metavar="duration",
        help="portrait policies: rebuild workload profiles this often (default 1h0m0s)",
    )
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress on stderr (there is none when stderr is not a terminal)",
    )


def _seconds(value: str, flag: str) -> float:

    try:
        v = parse_duration_seconds(value)
    except ValueError:
        raise UsageError(f"{flag}: not a duration: {value!r}") from None
    if v < 0:
        raise UsageError(f"{flag}: must not be negative: {value!r}")
    return v


def _time(value: str | None, flag: str) -> float | None:

    if value is None:
        return None
    try:
        return timestamp_seconds(value)
    except ValueError:
        pass
    from scaler.history.export import now, parse_time

    try:
        return parse_time(value, now())
    except ValueError:
        raise UsageError(
            f"{flag}: not an RFC 3339 time, Unix seconds or a time relative to now (-14d): {value!r}"
        ) from None


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


def _live_cluster(args: argparse.Namespace) -> tuple[Any, str]:
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
        api = make_api_client(args.kubeconfig, args.context)
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
    context = f" (context {args.context})" if args.context else ""
    return snapshot, f"live cluster{context}"


def _prometheus_trace(
    args: argparse.Namespace, start: float | None, end: float | None, step: float, say: Any
) -> tuple[float, float, str]:
    """Export ``--prometheus-url``'s usage over ``--from``/``--to`` (default the last 7 days,
    aligned to ``step``) into the cache (reused when the same URL, selector, range and step
    were exported before); returns the range (Unix seconds) and the file.

    Raises:
        scaler.cmdline.UsageError: a bad range, a failure of the server, an unwritable cache.
    """
    import math

    from scaler.history.cli import export_to_file
    from scaler.history.export import cache_path, default_cache_dir, now, read_metadata

    t = now()
    lo = math.ceil((start if start is not None else t - 7 * 86400.0) / step) * step
    hi = math.floor((end if end is not None else t) / step) * step
    if not hi > lo:
        raise UsageError(f"empty replay range: --from {format_time(lo)} is not before --to {format_time(hi)}")
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    path = cache_path(args.prometheus_url, args.prometheus_selector, lo, hi, step, cache_dir)
    if read_metadata(path).get("source") == "prometheus":
        say(f"using the export of {args.prometheus_url} cached in {path}")
        return lo, hi, str(path)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--cache-dir {cache_dir}: {e}") from None
    export_to_file(args, lo, hi, step, path, f"--cache-dir {cache_dir}")
    return lo, hi, str(path)


def run(args: argparse.Namespace) -> int:
    """Execute ``scaler replay`` with parsed ``args``; returns the exit status.

    Raises:
        scaler.cmdline.UsageError: bad input (one line naming the bad value).
    """
    from rich.console import Console

    from scaler.replay.report import report_dict
    from scaler.replay.simulate import ReplayInput
    from scaler.simulator.registry import PluginError, load_filters, load_scorers

    started = time.perf_counter()
    err = Console(stderr=True)
    interactive = not args.quiet and sys.stderr.isatty()

    def say(msg: str) -> None:
        if interactive:
            err.print(msg, highlight=False)

    step, provision_delay, refresh, start, end = _check_flags(args)
    try:
        inputs = _prepare(args, start, end, step, say)
    except InputError as e:
        raise UsageError(str(e)) from None
    for policy in inputs.policies:  # an unknown plugin name fails here, not in a worker an hour later
        try:
            load_filters(policy.config)
            load_scorers(policy.config)
        except PluginError as e:
            raise UsageError(f"policy {policy.name!r}: {e}") from None
    processes = args.processes or os.cpu_count() or 1
    processes = max(1, min(processes, len(inputs.policies) + 1))
    inp = ReplayInput(
        inputs.snapshot,
        inputs.usage,
        inputs.pod_series,
        step,
        provision_delay,
        inputs.prices,
        refresh,
        inputs.start_step,
    )
    say(
        f"replaying {len(inputs.grid)} steps ({len(inputs.pod_series)} of {len(inputs.snapshot.pods)} pods following "
        f"{len(inputs.used)} series) × {len(inputs.policies)} policies on {processes} process(es) …"
    )

    try:
        results = _replay(inp, [*inputs.policies, inputs.baseline], processes, err if interactive else None)
    except ImportError as e:  # a portrait policy without scaler.history
        raise UsageError(f"a policy needs a module that is not installed: {e}") from None
    baseline = results.pop()
    meta = _meta(inputs, step, provision_delay, processes, started)
    report = report_dict(meta, results, baseline)
    run_figures = (time.perf_counter() - started, processes)
    return _output(args, report, run_figures)


def _meta(inputs: _Inputs, step: float, provision_delay: float, processes: int, started: float) -> Any:
    """The report's :class:`~scaler.replay.report.ReplayMeta`: what was replayed, how, how long
    (``started``: ``time.perf_counter()`` at the start of the command)."""
    from scaler.history.export import scaler_version
    from scaler.replay.report import ReplayMeta

    prometheus = None
    if inputs.trace.meta.get("source") == "prometheus":
        keys = ("url", "selector", "cpu_query", "memory_query", "from", "to", "step_seconds")
        prometheus = {k: inputs.trace.meta.get(k, "") for k in keys}
    meta = ReplayMeta(
        snapshot=inputs.snapshot_source,
        trace=str(inputs.trace_path),
        trace_kind=inputs.trace.kind,
        series=len(inputs.used),
        pods=len(inputs.snapshot.pods),
        pods_following=len(inputs.pod_series),
        start=float(inputs.grid[0]),
        end=float(inputs.grid[-1] + step),
        step=step,
        steps=len(inputs.grid),
        provision_delay=provision_delay,
        processes=processes,
        elapsed_seconds=time.perf_counter() - started,
        skipped_rows=inputs.trace.skipped_rows,
        version=scaler_version(),
        pods_by_pod=inputs.by_pod,
        pods_by_workload=inputs.by_workload,
        pods_without_series=inputs.without,
        prometheus=prometheus,
    )
    return meta


def _check_flags(args: argparse.Namespace) -> tuple[float, float, float, float | None, float | None]:
    """The flags checked before anything is read: ``(step, provision delay, profile refresh,
    from, to)`` in seconds (``from``/``to`` Unix seconds, ``None`` when not given).

    Raises:
        scaler.cmdline.UsageError: a bad flag or combination of flags.
    """
    if args.output == "html" and not args.out:
        raise UsageError("--output html needs --out FILE")
    if args.processes is not None and args.processes < 1:
        raise UsageError(f"--processes must be at least 1, got {args.processes}")
    if not args.trace and not args.prometheus_url:
        raise UsageError("no usage history: give --trace PATH or --prometheus-url URL")
    if args.trace and args.prometheus_url:
        raise UsageError("--trace and --prometheus-url exclude each other: give one")
    step = _seconds(args.step, "--step")
    if step <= 0:
        raise UsageError(f"--step must be positive, got {args.step!r}")
    provision_delay = _seconds(args.provision_delay, "--provision-delay")
    refresh = _seconds(args.profile_refresh, "--profile-refresh")
    start, end = _time(args.start, "--from"), _time(args.end, "--to")
    return step, provision_delay, refresh, start, end


@dataclass(frozen=True)
class _Inputs:
    """What a replay reads before it runs: the policies, prices, the starting cluster, the trace,
    which pod follows which series, the step grid and the usage table."""

    policies: list[Any]
    baseline: Any
    prices: Any
    snapshot: Any
    snapshot_source: str
    trace: Any
    trace_path: str
    pod_series: dict[str, str]
    by_pod: int
    by_workload: int
    without: int
    used: set[str]
    grid: Any
    usage: Any
    start_step: int


def _wanted_series(snapshot: Any, trace_map: Mapping[str, str], snapshot_name: str) -> set[str]:
    """The trace series some pod follows: by ``--trace-map``, by the bundled map of a bundled
    snapshot, or by a pod's series annotation (only those are read from the trace)."""
    from scaler.replay.bundled import known_map
    from scaler.replay.inputs import ANNOTATION_SERIES

    wanted = set(trace_map.values()) | set(known_map(snapshot_name).values())
    wanted |= {p.annotations[ANNOTATION_SERIES] for p in snapshot.pods if ANNOTATION_SERIES in p.annotations}
    return wanted


def _prepare(
    args: argparse.Namespace, start: float | None, end: float | None, step: float, say: Callable[[str], None]
) -> _Inputs:
    """Read the config, policies, prices, snapshot (files, the bundled example, or the live
    cluster), the trace (file or Prometheus export) and map the pods to its series.

    Raises:
        scaler.errors.InputError: bad input of any kind (one line naming the bad value).
    """
    from scaler.config import load_config_file
    from scaler.prices import load_prices
    from scaler.replay.inputs import (
        build_grid,
        load_trace_map,
        map_pods,
        map_pods_by_pod_or_workload,
        usage_table,
        with_history,
        with_workload_means,
    )
    from scaler.replay.policies import DEFAULT_POLICIES, build_policy, parse_policies
    from scaler.replay.traces import load_trace
    from scaler.sources.files import load_snapshot

    base = load_config_file(args.config) if args.config else {}
    policies = parse_policies(args.policies or [",".join(DEFAULT_POLICIES)], base)
    baseline_policy = build_policy("none", ["--scale-down=false"], base, "no scale-down")
    prices = load_prices(args.prices)
    if args.snapshot or not args.prometheus_url:
        paths = [Path(p) for p in (args.snapshot or [str(bundled_example())])]
        snapshot = load_snapshot([str(p) for p in paths], None)
        snapshot_name = paths[0].resolve().name if len(paths) == 1 else ""
        snapshot_source = ", ".join(str(p) for p in paths)
    else:
        snapshot, snapshot_source = _live_cluster(args)
        snapshot_name = ""
    trace_path = args.trace
    if args.prometheus_url:
        start, end, trace_path = _prometheus_trace(args, start, end, step, say)
    trace_map = load_trace_map(args.trace_map) if args.trace_map else {}
    wanted = _wanted_series(snapshot, trace_map, snapshot_name)
    say(f"reading trace {trace_path} …")
    trace = load_trace(trace_path, wanted=wanted or None)
    running = sum(1 for p in snapshot.pods if not p.is_terminal)
    if trace.meta.get("source") == "prometheus":
        trace, workloads = with_workload_means(trace, snapshot)
        match = map_pods_by_pod_or_workload(
            snapshot, trace, workloads, start if start is not None else trace.span()[0], step
        )
        pod_series = match.pod_series
        by_pod, by_workload, without = match.by_pod, match.by_workload, match.without_series
    else:
        pod_series = map_pods(snapshot, trace, trace_map, snapshot_name)
        by_pod, by_workload, without = len(pod_series), 0, running - len(pod_series)
    used = set(pod_series.values())
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
    if len(pod_series) * 2 < len(snapshot.pods):
        sys.stderr.write(
            f"scaler: warning: {len(pod_series)} of {len(snapshot.pods)} pods follow the trace; the "
            f"other {len(snapshot.pods) - len(pod_series)} keep the usage of their PodMetrics all along\n"
        )
    grid = build_grid(trace, used, start, end, step)
    history = max((p.history_days * 86400.0 for p in policies if p.portrait), default=0.0)
    full, start_step = with_history(trace, used, grid, history)
    usage = usage_table(trace, used, full)
    return _Inputs(
        policies, baseline_policy, prices, snapshot, snapshot_source, trace, trace_path, pod_series,
        by_pod, by_workload, without, used, grid, usage, start_step,
    )  # fmt: skip


def _output(args: argparse.Namespace, report: dict[str, Any], run_figures: tuple[float, int]) -> int:
    """Print or write ``report`` as ``--output`` and ``--out`` say; returns the exit status 0.

    Raises:
        scaler.cmdline.UsageError: html without plotly, or ``--out`` cannot be written.
    """
    import yaml

    from scaler.replay.html import HtmlError, render_html
    from scaler.replay.report import print_table

    wide = args.output == "wide"
    if args.output in ("table", "wide"):
        print_table(report, sys.stdout, wide, run_figures)
        return 0
    if args.output == "json":
        text = json.dumps(report, separators=(",", ":")) + "\n"
    elif args.output == "yaml":
        text = yaml.safe_dump(report, sort_keys=False)
    else:
        try:
            text = render_html(report)
        except HtmlError as e:
            raise UsageError(str(e)) from None
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--out {args.out}: {e}") from None
        print_table(report, sys.stdout, run=run_figures)
        if not args.quiet:
            sys.stderr.write(f"scaler replay: wrote the {args.output} report to {args.out}\n")
    else:
        sys.stdout.write(text)
    return 0


def _replay(
    inp: ReplayInput, policies: list[Policy], processes: int, console: Console | None
) -> list[PolicyResult]:
    """Run the policies (:func:`scaler.replay.simulate.run_policies`) with log lines that name the
    policy and the simulated time on stderr and, when ``console`` (a rich ``Console`` on a
    terminal) is given, one progress bar per policy: simulated time reached, steps per second,
    time left."""
    import logging

    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        Task,
        TaskID,
        TextColumn,
        TimeRemainingColumn,
    )
    from rich.text import Text

    from scaler.replay.simulate import ReplayLogContext, run_policies

    class StepRate(ProgressColumn):
        # Steps per wall second between the first and the latest report received here, once
        # they are half a second apart: a worker's reports can arrive in one burst (a short
        # policy's whole run), and a rate over that burst would be meaningless. A policy that
        # finished within such a burst shows its steps over the time since the replay started.
        def render(self, task: Task) -> Text:
            rate = task.fields.get("rate")
            if rate is None and task.finished and task.elapsed:
                rate = task.completed / task.elapsed
            return Text("" if rate is None else f"{rate:,.0f} steps/s")

    class StderrHandler(logging.Handler):
        # sys.stderr at each record: while the bars are live, rich's proxy prints above them.
        def emit(self, record: logging.LogRecord) -> None:
            try:
                sys.stderr.write(self.format(record) + "\n")
            except Exception:
                self.handleError(record)

    handler = StderrHandler(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(ReplayLogContext())
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [handler]
    try:
        if console is None:
            return run_policies(inp, policies, processes=processes)
        steps = len(inp.usage.times) - inp.start_step
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=20),
            TextColumn("{task.fields[simulated]}"),
            StepRate(),
            TimeRemainingColumn(),
            console=console,
        ) as bars:
            tasks: dict[str, TaskID] = {
                p.name: bars.add_task(p.name, total=steps, simulated="", rate=None) for p in policies
            }
            first: dict[str, tuple[float, int]] = {}

            def progress(name: str, done: int, total: int, now: float) -> None:
                t = time.monotonic()
                t0, done0 = first.setdefault(name, (t, done))
                rate = (done - done0) / (t - t0) if t - t0 >= 0.5 else None
                bars.update(tasks[name], completed=done, total=total, simulated=format_time(now), rate=rate)

            return run_policies(inp, policies, processes=processes, progress=progress)
    finally:
        root.handlers = saved
