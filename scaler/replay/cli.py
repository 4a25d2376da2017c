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

from scaler.cmdline import ParagraphHelpFormatter, UsageError, bundled_example, tune_extra_missing
from scaler.errors import InputError
from scaler.fanout import workers_phrase
from scaler.model.times import format_time, parse_duration_seconds, timestamp_seconds

if TYPE_CHECKING:
    from rich.console import Console

    from scaler.model.snapshot import ClusterSnapshot
    from scaler.replay.policies import Policy
    from scaler.replay.report import ReplayMeta
    from scaler.replay.simulate import PolicyResult, ReplayInput
    from scaler.replay.traces import Trace
    from scaler.replay.world import UsageTable

__all__ = [
    "OUTPUT_FORMATS",
    "LoadedInputs",
    "add_input_flags",
    "add_parser",
    "add_worker_flags",
    "check_range",
    "check_workers",
    "load_inputs",
    "run",
]

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
    add_input_flags(p)
    p.add_argument(
        "--policies",
        action="append",
        metavar="LIST",
        help="comma-separated policies (default ca-requests,seed,scaler,scaler-portrait); repeatable",
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
    add_worker_flags(p, "policies replayed in parallel", "--processes")
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


def add_input_flags(p: argparse.ArgumentParser) -> None:
    """Add the flags naming what is replayed (shared by ``scaler replay`` and ``scaler tune``):
    the snapshot, the usage history (a trace or Prometheus), the range, the step, the base
    configuration, the provisioning delay and the prices."""
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


def add_worker_flags(p: argparse.ArgumentParser, what: str, former: str | None = None) -> None:
    """Add ``--workers`` (with its ``former`` name, if any) and ``--ray-address``."""
    names = ["--workers"] if former is None else ["--workers", former]
    p.add_argument(
        *names,
        dest="workers",
        type=int,
        default=None,
        metavar="N",
        help=f"{what}: N CPUs of an embedded local Ray (default: the CPU count; 1 runs in this "
        "process without Ray)" + (f"; {former} is its former name" if former else ""),
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="run on an existing Ray cluster instead: auto, host:port of its head, or ray://host:10001",
    )


def check_workers(args: argparse.Namespace) -> None:
    """Reject ``--workers`` below 1 and ``--ray-address`` that does not answer.

    Raises:
        scaler.cmdline.UsageError: one line naming the value.
    """
    from scaler.fanout import RayUnavailable, check_address

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, got {args.workers}")
    if args.ray_address is not None:
        try:
            check_address(args.ray_address)
        except RayUnavailable as e:
            raise UsageError(str(e)) from None


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


@dataclass(frozen=True, slots=True)
class LoadedInputs:
    """What ``scaler replay`` and ``scaler tune`` read from their common flags."""

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


def _load_snapshot(args: argparse.Namespace) -> tuple[ClusterSnapshot, str, str]:
    """The snapshot of ``--snapshot`` (the bundled example without it and without
    ``--prometheus-url``) or of the live cluster: ``(snapshot, name, source)``; ``name`` is the
    directory's name for one ``--snapshot`` (which picks a shipped trace map), else ``""``.

    Raises:
        scaler.errors.InputError: a bad snapshot file.
    """
    from scaler.sources.files import load_snapshot

    if args.snapshot or not args.prometheus_url:
        paths = [Path(p) for p in (args.snapshot or [str(bundled_example())])]
        snapshot = load_snapshot([str(p) for p in paths], None)
        name = paths[0].resolve().name if len(paths) == 1 else ""
        return snapshot, name, ", ".join(str(p) for p in paths)
    snapshot, source = _live_cluster(args)
    return snapshot, "", source


def _match_pods(
    snapshot: ClusterSnapshot,
    trace: Trace,
    trace_map: Mapping[str, str],
    snapshot_name: str,
    start: float | None,
    step: float,
) -> tuple[Trace, dict[str, str], tuple[int, int, int]]:
    """The trace series of each pod: ``(trace, pod → series, (pods matched by pod, by
    workload, without a series))``. A Prometheus export matches by pod, then by workload (its
    trace gains the workload means); a trace file by ``trace_map``, the shipped map, then name."""
    from scaler.replay.inputs import map_pods, map_pods_by_pod_or_workload, with_workload_means

    running = sum(1 for p in snapshot.pods if not p.is_terminal)
    if trace.meta.get("source") == "prometheus":
        trace, workloads = with_workload_means(trace, snapshot)
        match = map_pods_by_pod_or_workload(
            snapshot, trace, workloads, start if start is not None else trace.span()[0], step
        )
        return trace, match.pod_series, (match.by_pod, match.by_workload, match.without_series)
    pod_series = map_pods(snapshot, trace, trace_map, snapshot_name)
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
    """Warn on stderr when ``--from``/``--to`` fall partly outside the ``used`` series, or when
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


def load_inputs(args: argparse.Namespace, history: float, say: Callable[[str], None]) -> LoadedInputs:
    """Read the snapshot (or live cluster), the trace (or the Prometheus export) and the prices
    named by the input flags (:func:`add_input_flags`), and build the replay grid over
    ``--from``/``--to`` with ``history`` seconds of past usage before it (workload profiles).
    Warnings (a range partly outside the trace, few pods following it) go to stderr.

    Raises:
        scaler.cmdline.UsageError: bad input (one line naming the bad value).
    """
    from scaler.prices import load_prices
    from scaler.replay.bundled import known_map
    from scaler.replay.inputs import ANNOTATION_SERIES, build_grid, load_trace_map, usage_table, with_history
    from scaler.replay.traces import load_trace

    if not args.trace and not args.prometheus_url:
        raise UsageError("no usage history: give --trace PATH or --prometheus-url URL")
    if args.trace and args.prometheus_url:
        raise UsageError("--trace and --prometheus-url exclude each other: give one")
    step = _seconds(args.step, "--step")
    if step <= 0:
        raise UsageError(f"--step must be positive, got {args.step!r}")
    provision_delay = _seconds(args.provision_delay, "--provision-delay")
    refresh = _seconds(getattr(args, "profile_refresh", "1h"), "--profile-refresh")
    start, end = _time(args.start, "--from"), _time(args.end, "--to")
    try:
        prices = load_prices(args.prices)
        snapshot, snapshot_name, snapshot_source = _load_snapshot(args)
        trace_path = args.trace
        if args.prometheus_url:
            start, end, trace_path = _prometheus_trace(args, start, end, step, say)
        trace_map = load_trace_map(args.trace_map) if args.trace_map else {}
        wanted = set(trace_map.values()) | set(known_map(snapshot_name).values())
        wanted |= {
            p.annotations[ANNOTATION_SERIES] for p in snapshot.pods if ANNOTATION_SERIES in p.annotations
        }
        say(f"reading trace {trace_path} …")
        trace = load_trace(trace_path, wanted=wanted or None)
        trace, pod_series, (by_pod, by_workload, without) = _match_pods(
            snapshot, trace, trace_map, snapshot_name, start, step
        )
        used = set(pod_series.values())
        _warn_coverage(trace, used, len(pod_series), len(snapshot.pods), start, end, step)
        grid = build_grid(trace, used, start, end, step)
        full, start_step = with_history(trace, used, grid, history)
        usage = usage_table(trace, used, full)
    except InputError as e:  # a config, policy, price, snapshot, trace or map file
        raise UsageError(str(e)) from None
    return LoadedInputs(
        snapshot=snapshot,
        snapshot_source=snapshot_source,
        trace=trace,
        trace_path=str(trace_path),
        pod_series=pod_series,
        used=used,
        grid=grid,
        usage=usage,
        start_step=start_step,
        step=step,
        provision_delay=provision_delay,
        refresh=refresh,
        prices=prices,
        by_pod=by_pod,
        by_workload=by_workload,
        without=without,
    )


def run(args: argparse.Namespace) -> int:
    """Execute ``scaler replay`` with parsed ``args``; returns the exit status.

    Raises:
        scaler.cmdline.UsageError: bad input (one line naming the bad value).
    """
    from rich.console import Console

    from scaler.config import load_config_file
    from scaler.replay.policies import DEFAULT_POLICIES, build_policy, parse_policies
    from scaler.replay.report import report_dict

    started = time.perf_counter()
    err = Console(stderr=True)
    interactive = not args.quiet and sys.stderr.isatty()

    def say(msg: str) -> None:
        if interactive:
            err.print(msg, highlight=False)

    if args.output == "html" and not args.out:
        raise UsageError("--output html needs --out FILE")
    check_workers(args)
    try:
        base = load_config_file(args.config) if args.config else {}
        policies = parse_policies(args.policies or [",".join(DEFAULT_POLICIES)], base)
        baseline_policy = build_policy("none", ["--scale-down=false"], base, "no scale-down")
    except InputError as e:
        raise UsageError(str(e)) from None
    history = max((p.history_days * 86400.0 for p in policies if p.portrait), default=0.0)
    loaded = load_inputs(args, history, say)
    _check_plugins(policies)
    processes = args.workers or os.cpu_count() or 1
    processes = max(1, min(processes, len(policies) + 1))
    inp = loaded.replay_input()
    say(
        f"replaying {len(loaded.grid)} steps ({len(loaded.pod_series)} of {len(loaded.snapshot.pods)} pods "
        f"following {len(loaded.used)} series) × {len(policies)} policies on "
        + (f"Ray at {args.ray_address} …" if args.ray_address else f"{workers_phrase(processes)} …")
    )

    from scaler.fanout import RayUnavailable

    try:
        results = _replay(
            inp, [*policies, baseline_policy], processes, args.ray_address, err if interactive else None
        )
    except ImportError as e:  # Ray without the tune extra; a portrait policy without scaler.history
        raise tune_extra_missing("replay", e) or UsageError(
            f"a policy needs a module that is not installed: {e}"
        ) from None
    except RayUnavailable as e:
        raise UsageError(str(e)) from None
    baseline = results.pop()
    meta = _replay_meta(loaded, processes, time.perf_counter() - started)
    report = report_dict(meta, results, baseline)
    _write_report(args, report, (time.perf_counter() - started, processes))
    return 0


def _replay_meta(loaded: LoadedInputs, processes: int, elapsed_seconds: float) -> ReplayMeta:
    """The report's description of the run: its inputs, grid (Unix seconds), worker processes
    and wall time (seconds)."""
    from scaler.history.export import scaler_version
    from scaler.replay.report import ReplayMeta

    trace, grid, step = loaded.trace, loaded.grid, loaded.step
    return ReplayMeta(
        snapshot=loaded.snapshot_source,
        trace=str(loaded.trace_path),
        trace_kind=trace.kind,
        series=len(loaded.used),
        pods=len(loaded.snapshot.pods),
        pods_following=len(loaded.pod_series),
        start=float(grid[0]),
        end=float(grid[-1] + step),
        step=step,
        steps=len(grid),
        provision_delay=loaded.provision_delay,
        processes=processes,
        elapsed_seconds=elapsed_seconds,
        skipped_rows=trace.skipped_rows,
        version=scaler_version(),
        pods_by_pod=loaded.by_pod,
        pods_by_workload=loaded.by_workload,
        pods_without_series=loaded.without,
        prometheus=_prometheus_meta(trace),
    )


def _check_plugins(policies: list[Policy]) -> None:
    """Load every policy's Filter and Score plugins, so that an unknown plugin name fails here,
    not in a worker an hour later.

    Raises:
        scaler.cmdline.UsageError: a plugin that does not load, naming the policy.
    """
    from scaler.simulator.registry import PluginError, load_filters, load_scorers

    for policy in policies:
        try:
            load_filters(policy.config)
            load_scorers(policy.config)
        except PluginError as e:
            raise UsageError(f"policy {policy.name!r}: {e}") from None


def _prometheus_meta(trace: Trace) -> dict[str, Any] | None:
    """The Prometheus query behind a trace exported from Prometheus (for the report), else ``None``."""
    if trace.meta.get("source") != "prometheus":
        return None
    keys = ("url", "selector", "cpu_query", "memory_query", "from", "to", "step_seconds")
    return {k: trace.meta.get(k, "") for k in keys}


def _write_report(args: argparse.Namespace, report: dict[str, Any], run_figures: tuple[float, int]) -> None:
    """Print or write the replay ``report`` in ``--output``'s format: a table on stdout, or the
    JSON, YAML or HTML text on stdout or into ``--out`` (then the table on stdout too).
    ``run_figures`` is ``(elapsed seconds, worker processes)``.

    Raises:
        scaler.cmdline.UsageError: the HTML cannot be rendered or ``--out`` cannot be written.
    """
    import yaml

    from scaler.replay.html import HtmlError, render_html
    from scaler.replay.report import print_table

    if args.output in ("table", "wide"):
        print_table(report, sys.stdout, args.output == "wide", run_figures)
        return
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


def _replay(
    inp: ReplayInput, policies: list[Policy], workers: int, address: str | None, console: Console | None
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
            return run_policies(inp, policies, workers=workers, address=address)
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

            return run_policies(inp, policies, workers=workers, address=address, progress=progress)
    finally:
        root.handlers = saved
