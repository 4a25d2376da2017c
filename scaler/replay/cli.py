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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.cmdline import ParagraphHelpFormatter, UsageError
from scaler.errors import InputError
from scaler.fanout import workers_phrase
from scaler.model.times import format_time
from scaler.replay.command import (
    add_input_flags,
    add_worker_flags,
    check_workers,
    input_spec,
    simulated_logs_silenced,
)
from scaler.replay.load import LoadedInputs, load_inputs

if TYPE_CHECKING:
    from rich.console import Console

    from scaler.replay.policies import Policy
    from scaler.replay.report import ReplayMeta
    from scaler.replay.simulate import PolicyResult, ReplayInput
    from scaler.replay.traces import Trace

__all__ = ["OUTPUT_FORMATS", "add_parser", "run"]

OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "html")
"""``-o`` of ``scaler replay``: kubectl's table, ``wide``, ``json`` and ``yaml``, plus ``html``."""


def _epilog() -> str:
    """The help's epilog: every built-in policy explained, then the inputs."""
    from scaler.replay.policies import DEFAULT_POLICIES, POLICY_HELP

    items = "\n".join(f"- {name}: {text}" for name, text in POLICY_HELP.items())
    return f"""\
policies (--policies, comma-separated; default {",".join(DEFAULT_POLICIES)}):
{items}
- NAME=--flag=value;--flag2=value: any flags of `scaler run`, plus --usage-window (the window usage \
is aggregated over; 0: the newest sample), --history-days and --scheduler-plugins (the simulated \
scheduler also runs the policy's filter and score plugins).

usage history: --prometheus-url URL (pod CPU and working set from Prometheus or Google Managed \
Prometheus over --from..--to, default the last 7 days; cached in --cache-dir), or --trace PATH \
with --snapshot DIR (the cluster the trace's pods run in; without it only the Bitbrains trace \
replays, over the bundled example, which the command names on stderr).

trace formats: Bitbrains GWA-T-12 (a .tar.gz or directory of <vm>.csv files; "Timestamp [ms]" holds \
Unix seconds), or a long CSV/Parquet with columns \
timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes (timestamp in Unix seconds or RFC 3339; \
a workload row gives each of its pods' usage).

The simulated controller's log lines are never printed: what it did, failed removals included, \
is in the report.
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``replay`` sub-command to ``subparsers`` (from ``add_subparsers``)."""
    p = subparsers.add_parser(
        "replay",
        help="what-if: replay a usage trace and compare scale-down policies side by side",
        description="Replay a usage trace over a simulated cluster and compare scale-down policies "
        "(node-hours, cost, evictions, overload risk), each on an identical replay driven by the live "
        "controller's code.",
        epilog=_epilog(),
        formatter_class=ParagraphHelpFormatter,
    )
    add_input_flags(p)
    p.add_argument(
        "--policies",
        action="append",
        metavar="LIST",
        help="comma-separated policies (default ca-requests,ca-usage,scaler,scaler-portrait; each "
        "explained below); repeatable",
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


def run(args: argparse.Namespace) -> int:
    """Execute ``scaler replay`` with parsed ``args``; returns the exit status.

    Raises:
        scaler.cmdline.UsageError: bad input (one line naming the bad value).
    """
    from rich.console import Console

    from scaler.config import load_config_file
    from scaler.replay.policies import DEFAULT_POLICIES, make_policy, parse_policies
    from scaler.replay.report import report_dict

    started = time.perf_counter()
    err = Console(stderr=True)
    interactive = not args.quiet and sys.stderr.isatty()

    def say(msg: str) -> None:
        if interactive:
            err.print(msg, highlight=False)

    if args.output == "html" and not args.out:
        raise UsageError("--output html needs --out FILE")
    check_workers(args.workers, args.ray_address)
    spec = input_spec(args)
    try:
        base = load_config_file(args.config) if args.config else {}
        policies = parse_policies(args.policies or [",".join(DEFAULT_POLICIES)], base)
        baseline_policy = make_policy(
            "none", {}, base, "no scale-down", ("--scale-down=false",), scale_down=False
        )
    except InputError as e:
        raise UsageError(str(e)) from None
    history = max((p.history_days * 86400.0 for p in policies if p.portrait), default=0.0)
    loaded = load_inputs(spec, history, say)
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
    except ImportError as e:  # a portrait policy without scaler.history
        raise UsageError(f"a policy needs a module that is not installed: {e}") from None
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
    keys = ("url", "metrics", "selector", "cpu_query", "memory_query", "from", "to", "step_seconds")
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
    """Run the policies (:func:`scaler.replay.simulate.run_policies`), their simulated
    controllers' log lines silenced, and, when ``console`` (a rich ``Console`` on a terminal) is
    given, one progress bar per policy: simulated time reached, steps per second, time left."""
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

    from scaler.replay.simulate import run_policies

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

    with simulated_logs_silenced():
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
