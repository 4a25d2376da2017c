"""``scaler history export``: pod usage history from Prometheus into a Parquet file that
``scaler replay --trace`` reads (:mod:`scaler.history.export`).

Wiring (in :mod:`scaler.cli`): :func:`add_parser` adds the ``history`` command and its
``export`` sub-command, :func:`run` executes it. Bad input and every failure of the server is
a :class:`scaler.cmdline.UsageError`: one line naming the bad value, the URL or the query (exit
status 2), and no file is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.cmdline import UsageError

if TYPE_CHECKING:
    from scaler.history.export import UsageExport

__all__ = [
    "add_parser",
    "add_prometheus_flags",
    "export_to_file",
    "progress_bar",
    "prometheus_timeout",
    "prometheus_url",
    "resolve_window",
    "run",
]


def add_prometheus_flags(p: argparse.ArgumentParser, *, required: bool) -> None:
    """The flags of a Prometheus export: URL, source, auth, selector, deadline (shared by
    ``scaler history export``, ``scaler replay --prometheus-url`` and ``scaler tune``)."""
    p.add_argument(
        "--prometheus-url",
        required=required,
        metavar="URL",
        help="Prometheus base URL (before /api/v1), or Cloud Monitoring's (GKE system metrics, Google Managed "
        "Prometheus) https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus; "
        "no credentials in it",
    )
    p.add_argument(
        "--prometheus-metrics",
        choices=("cadvisor", "gke-system", "auto"),
        default="auto",
        help="which usage history the endpoint holds: cadvisor (container_cpu_usage_seconds_total, "
        "container_memory_working_set_bytes), gke-system (GKE system metrics in Cloud Monitoring: "
        "kubernetes_io:container_cpu_core_usage_time, kubernetes_io:container_memory_used_bytes non-evictable), "
        "or auto: the one with series for the selector, said on stderr (default auto)",
    )
    p.add_argument(
        "--prometheus-auth",
        choices=("auto", "google", "none"),
        default="auto",
        help="auto: --prometheus-auth-file when given, else Google Application Default Credentials for "
        "monitoring.googleapis.com, else none; google: Application Default Credentials for any URL "
        "(default auto)",
    )
    p.add_argument(
        "--prometheus-auth-file",
        metavar="FILE",
        default="",
        help="a bearer token or one 'Header-Name: value' line, for a Prometheus of your own",
    )
    p.add_argument(
        "--prometheus-selector",
        metavar="MATCHERS",
        default="",
        help='label matchers added to both queries, in either label set: cluster="prod" or cluster_name="prod"',
    )
    p.add_argument(
        "--prometheus-timeout",
        metavar="duration",
        default="60s",
        help="deadline of each query, whole: connect, wait and read the answer (default 1m0s)",
    )


def add_parser(subparsers: Any) -> None:
    """Add ``history`` (with ``export``) to ``subparsers`` (from ``add_subparsers``)."""
    from scaler.history.usage_metrics import CADVISOR, GKE_SYSTEM

    history = subparsers.add_parser(
        "history", help="usage history: export it from Prometheus for scaler replay"
    )
    # The same parser class as ``history`` (scaler's: one-line errors, exit 2).
    sub = history.add_subparsers(
        dest="history_command", metavar="export", required=True, parser_class=type(history)
    )
    p = sub.add_parser(
        "export",
        help="pod CPU and working-set memory from Prometheus or GKE system metrics into a Parquet file for "
        "scaler replay",
        description=f"Run two query_range queries, window by window: with cAdvisor's series {CADVISOR.cpu_query()} "
        f"and {CADVISOR.memory_query()}, with GKE system metrics {GKE_SYSTEM.cpu_query()} and "
        f"{GKE_SYSTEM.memory_query()} (--prometheus-selector's matchers added to both), over --from..--to, "
        "and stream them into the long format scaler replay --trace reads.",
    )
    add_prometheus_flags(p, required=True)
    p.add_argument(
        "--from",
        dest="start",
        required=True,
        metavar="TIME",
        help="start: RFC 3339, Unix seconds, or relative to now (-14d, now-6h)",
    )
    p.add_argument("--to", dest="end", default="now", metavar="TIME", help="end, included (default now)")
    p.add_argument("--step", default="5m", metavar="duration", help="time between samples (default 5m0s)")
    p.add_argument("--out", required=True, metavar="FILE", help="the Parquet file to write")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress and no summary on stderr")


def resolve_window(start: str, end: str, step: str) -> tuple[float, float, float]:
    """``--from``, ``--to`` and ``--step`` as Unix seconds and seconds.

    Raises:
        scaler.cmdline.UsageError: a value does not parse or the range is empty (names it).
    """
    from scaler.history.export import now, parse_span, parse_time

    try:
        step_s = parse_span(step)
    except ValueError:
        raise UsageError(f"--step: not a duration: {step!r}") from None
    if not step_s > 0:
        raise UsageError(f"--step must be positive, got {step!r}")
    t = now()
    out = []
    for flag, value in (("--from", start), ("--to", end)):
        try:
            out.append(parse_time(value, t))
        except ValueError as e:
            raise UsageError(f"{flag}: {e}") from None
    if not out[1] > out[0]:
        raise UsageError(f"--to {end!r} is not after --from {start!r}")
    return out[0], out[1], step_s


def prometheus_url(args: argparse.Namespace) -> str:
    """``--prometheus-url``, checked before anything is asked or written: no credentials in it
    (:func:`scaler.specs.prometheus_url_problem`; the message shows it redacted).

    Raises:
        scaler.cmdline.UsageError: the URL is refused.
    """
    from scaler.specs import prometheus_url_problem

    url = str(args.prometheus_url or "")
    problem = prometheus_url_problem(url)
    if problem:
        raise UsageError(problem)
    return url


def prometheus_timeout(args: argparse.Namespace) -> float:
    """``--prometheus-timeout`` in seconds.

    Raises:
        scaler.cmdline.UsageError: not a positive duration (names it).
    """
    from scaler.history.export import parse_span

    value = getattr(args, "prometheus_timeout", "60s")
    try:
        seconds = parse_span(value)
    except ValueError:
        raise UsageError(f"--prometheus-timeout: not a duration: {value!r}") from None
    if not seconds > 0:
        raise UsageError(f"--prometheus-timeout must be positive, got {value!r}")
    return seconds


@contextmanager
def progress_bar(quiet: bool, what: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal and not ``quiet``: yields
    ``progress(done, total)`` (queries done), or ``None`` when there is no bar."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TextColumn("queries"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bars:
        task = bars.add_task(what, total=None)

        def update(done: int, total: int) -> None:
            bars.update(task, completed=done, total=total)

        yield update


def export_to_file(
    args: argparse.Namespace, start: float, end: float, step: float, out: Path, where: str
) -> UsageExport:
    """Export the pods' usage from ``args.prometheus_url`` over ``[start, end]`` (epoch seconds)
    every ``step`` seconds into the Parquet file ``out``, with a progress bar on a terminal
    unless ``args.quiet``. ``where`` names the destination in errors.

    Raises:
        UsageError: Prometheus failed (the message names the URL or the query), or ``out``
            cannot be written.
    """
    from scaler.history.export import export_usage
    from scaler.history.prometheus import HistoryError

    url = prometheus_url(args)
    try:
        with progress_bar(args.quiet, f"exporting from {url}") as progress:
            export = export_usage(
                url,
                start,
                end,
                step,
                out=out,
                auth_file=args.prometheus_auth_file,
                auth=getattr(args, "prometheus_auth", "auto"),
                selector=args.prometheus_selector,
                metrics=getattr(args, "prometheus_metrics", "auto"),
                deadline=prometheus_timeout(args),
                progress=progress,
                say=None if args.quiet else _say,
            )
    except HistoryError as e:
        raise UsageError(str(e).replace(str(out), where) if str(out) in str(e) else str(e)) from None
    return export


def _say(line: str) -> None:
    sys.stderr.write(f"scaler: {line}\n")


def run(args: argparse.Namespace) -> int:
    """Execute ``scaler history export``; returns the exit status.

    Raises:
        scaler.cmdline.UsageError: bad input or a failure of the server (one line).
    """

    from scaler.model.times import format_duration, format_time

    start, end, step = resolve_window(args.start, args.end, args.step)
    out = Path(args.out)
    if out.is_dir():
        raise UsageError(f"--out {args.out}: is a directory")
    export = export_to_file(args, start, end, step, out, f"--out {args.out}")
    if not args.quiet:
        sys.stderr.write(
            f"wrote {export.rows:,} samples of {export.pods:,} pods, {format_time(export.start)} to "
            f"{format_time(export.end)} every {format_duration(step)}, to {out}\n"
        )
    return 0
