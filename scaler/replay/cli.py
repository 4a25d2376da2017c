"""``scaler replay``: compare scale-down policies over a usage trace, side by side.

Wiring (in :mod:`scaler.cli`): ``add_parser(subparsers)`` adds the ``replay`` sub-command and
``run(args)`` executes it. Bad input — an unknown policy or flag, a malformed trace row (named
by file and line), an unreadable snapshot, price or map file — raises
:class:`scaler.usage.UsageError` with a one-line message naming the bad value (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.model.times import format_time, parse_duration_seconds, timestamp_seconds
from scaler.usage import UsageError, bundled_example

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

trace formats: Bitbrains GWA-T-12 (a .tar.gz or directory of <vm>.csv files; "Timestamp [ms]" holds
Unix seconds), or a long CSV/Parquet with columns timestamp,namespace,pod_or_workload,cpu_cores,
memory_bytes (timestamp in Unix seconds or RFC 3339; a workload row gives each of its pods' usage).
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
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--snapshot",
        nargs="+",
        metavar="PATH",
        help="starting cluster: snapshot files or directories (default: the bundled example)",
    )
    p.add_argument(
        "--trace",
        required=True,
        metavar="PATH",
        help="usage trace: Bitbrains .tar.gz or directory, or a long-format .csv/.parquet",
    )
    p.add_argument(
        "--trace-map", metavar="FILE", help="CSV namespace,pod,series: which pod follows which trace series"
    )
    p.add_argument(
        "--from",
        dest="start",
        metavar="TIME",
        help="first step, trace time (RFC 3339 or Unix seconds; default: the trace's start)",
    )
    p.add_argument(
        "--to",
        dest="end",
        metavar="TIME",
        help="end of the replay, exclusive (default: the trace's last sample)",
    )
    p.add_argument("--step", default="5m", help="time between controller loops (default 5m0s)")
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
        "--processes", type=int, default=None, help="policies replayed in parallel (default: CPU count)"
    )
    p.add_argument(
        "--profile-refresh",
        default="1h",
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
        raise UsageError(f"{flag}: not an RFC 3339 time or Unix seconds: {value!r}") from None


def check_range(first: float, last: float, start: float | None, end: float | None, step: float) -> str | None:
    """Compare the replay's ``--from``/``--to`` (Unix seconds, ``None`` when not given) with the
    trace's first and last sample of the series the pods follow.

    Returns a warning naming both ranges (RFC 3339) when the range is only partly covered
    (before the first sample usage holds the first one, after the last sample the last one;
    up to one ``step`` past the last sample is covered), else ``None``.

    Raises:
        scaler.usage.UsageError: the range and the trace do not overlap at all.
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


def run(args: argparse.Namespace) -> int:
    """Execute ``scaler replay`` with parsed ``args``; returns the exit status.

    Raises:
        scaler.usage.UsageError: bad input (one line naming the bad value).
    """
    import yaml
    from rich.console import Console

    from scaler.config import ConfigError, load_config_file
    from scaler.model.snapshot import SnapshotError
    from scaler.replay.bundled import known_map
    from scaler.replay.html import HtmlError, render_html
    from scaler.replay.inputs import (
        ANNOTATION_SERIES,
        MappingError,
        build_grid,
        load_trace_map,
        map_pods,
        usage_table,
        with_history,
    )
    from scaler.replay.policies import DEFAULT_POLICIES, PolicyError, build_policy, parse_policies
    from scaler.replay.prices import PriceError, load_prices
    from scaler.replay.report import ReplayMeta, print_table, report_dict
    from scaler.replay.simulate import ReplayInput
    from scaler.replay.traces import TraceError, load_trace
    from scaler.simulator.registry import PluginError, load_filters, load_scorers
    from scaler.sources.files import load_snapshot

    started = time.perf_counter()
    err = Console(stderr=True)
    interactive = not args.quiet and sys.stderr.isatty()

    def say(msg: str) -> None:
        if interactive:
            err.print(msg, highlight=False)

    if args.output == "html" and not args.out:
        raise UsageError("--output html needs --out FILE")
    if args.processes is not None and args.processes < 1:
        raise UsageError(f"--processes must be at least 1, got {args.processes}")
    step = _seconds(args.step, "--step")
    if step <= 0:
        raise UsageError(f"--step must be positive, got {args.step!r}")
    provision_delay = _seconds(args.provision_delay, "--provision-delay")
    refresh = _seconds(args.profile_refresh, "--profile-refresh")
    start, end = _time(args.start, "--from"), _time(args.end, "--to")
    try:
        base = load_config_file(args.config) if args.config else {}
        policies = parse_policies(args.policies or [",".join(DEFAULT_POLICIES)], base)
        baseline_policy = build_policy("none", ["--scale-down=false"], base, "no scale-down")
        prices = load_prices(args.prices)
        paths = [Path(p) for p in (args.snapshot or [str(bundled_example())])]
        snapshot = load_snapshot([str(p) for p in paths], None)
        snapshot_name = paths[0].resolve().name if len(paths) == 1 else ""
        trace_map = load_trace_map(args.trace_map) if args.trace_map else {}
        wanted = set(trace_map.values()) | set(known_map(snapshot_name).values())
        wanted |= {
            p.annotations[ANNOTATION_SERIES] for p in snapshot.pods if ANNOTATION_SERIES in p.annotations
        }
        say(f"reading trace {args.trace} …")
        trace = load_trace(args.trace, wanted=wanted or None)
        pod_series = map_pods(snapshot, trace, trace_map, snapshot_name)
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
        grid = build_grid(trace, used, start, end, step)
        history = max((p.history_days * 86400.0 for p in policies if p.portrait), default=0.0)
        full, start_step = with_history(trace, used, grid, history)
        usage = usage_table(trace, used, full)
    except (ConfigError, PolicyError, PriceError, SnapshotError, TraceError, MappingError) as e:
        raise UsageError(str(e)) from None
    for policy in policies:  # an unknown plugin name fails here, not in a worker an hour later
        try:
            load_filters(policy.config)
            load_scorers(policy.config)
        except PluginError as e:
            raise UsageError(f"policy {policy.name!r}: {e}") from None
    processes = args.processes or os.cpu_count() or 1
    processes = max(1, min(processes, len(policies) + 1))
    inp = ReplayInput(snapshot, usage, pod_series, step, provision_delay, prices, refresh, start_step)
    say(
        f"replaying {len(grid)} steps ({len(pod_series)} of {len(snapshot.pods)} pods following "
        f"{len(used)} series) × {len(policies)} policies on {processes} process(es) …"
    )

    try:
        results = _replay(inp, [*policies, baseline_policy], processes, err if interactive else None)
    except ImportError as e:  # a portrait policy without scaler.history
        raise UsageError(f"a policy needs a module that is not installed: {e}") from None
    baseline = results.pop()
    meta = ReplayMeta(
        snapshot=", ".join(str(p) for p in paths),
        trace=str(args.trace),
        trace_kind=trace.kind,
        series=len(used),
        pods=len(snapshot.pods),
        pods_following=len(pod_series),
        start=float(grid[0]),
        end=float(grid[-1] + step),
        step=step,
        steps=len(grid),
        provision_delay=provision_delay,
        processes=processes,
        elapsed_seconds=time.perf_counter() - started,
        skipped_rows=trace.skipped_rows,
    )
    report = report_dict(meta, results, baseline)
    wide = args.output == "wide"
    if args.output in ("table", "wide"):
        print_table(report, sys.stdout, wide)
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
        print_table(report, sys.stdout)
        say(f"wrote {args.out}")
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
        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} steps/s")

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
                p.name: bars.add_task(p.name, total=steps, simulated="") for p in policies
            }

            def progress(name: str, done: int, total: int, now: float) -> None:
                bars.update(tasks[name], completed=done, total=total, simulated=format_time(now))

            return run_policies(inp, policies, processes=processes, progress=progress)
    finally:
        root.handlers = saved
