"""What ``scaler replay`` and ``scaler tune`` share as commands: the flags naming what is
replayed and where the replays run, the typed :class:`~scaler.replay.load.InputSpec` those flags
make, and the rule that a replay's simulated controller never writes to the user's terminal.

Bad values (a duration, a time, a worker count, a Ray address that does not answer) raise
:class:`scaler.cmdline.UsageError` with one line naming the flag and the value.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from scaler.cmdline import UsageError
from scaler.model.times import parse_duration_seconds, timestamp_seconds
from scaler.replay.load import InputSpec, PrometheusSpec

__all__ = ["add_input_flags", "add_worker_flags", "check_workers", "input_spec", "simulated_logs_silenced"]


def add_input_flags(p: argparse.ArgumentParser) -> None:
    """Add the flags naming what is replayed: the snapshot, the usage history (a trace or
    Prometheus), the range, the step, the base configuration, the provisioning delay and the
    prices (:func:`input_spec` reads them)."""
    p.add_argument(
        "--snapshot",
        nargs="+",
        metavar="PATH",
        help="starting cluster: snapshot files or directories (from scaler snapshot); needed with a "
        "--trace of your own (default: the live cluster with --prometheus-url, the bundled example "
        "with the Bitbrains trace)",
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


def check_workers(workers: int | None, ray_address: str | None) -> None:
    """Reject ``--workers`` below 1 and a ``--ray-address`` that does not answer.

    Raises:
        scaler.cmdline.UsageError: one line naming the value.
    """
    from scaler.fanout import RayUnavailable, check_address

    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, got {workers}")
    if ray_address is not None:
        try:
            check_address(ray_address)
        except RayUnavailable as e:
            raise UsageError(str(e)) from None


def _seconds(value: str, flag: str) -> float:
    """A duration flag's value in seconds.

    Raises:
        UsageError: not a duration, or negative.
    """
    try:
        v = parse_duration_seconds(value)
    except ValueError:
        raise UsageError(f"{flag}: not a duration: {value!r}") from None
    if v < 0:
        raise UsageError(f"{flag}: must not be negative: {value!r}")
    return v


def _time(value: str | None, flag: str) -> float | None:
    """A time flag's value in Unix seconds (``None`` when not given).

    Raises:
        UsageError: not an RFC 3339 time, Unix seconds or a time relative to now.
    """
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


def input_spec(args: argparse.Namespace) -> InputSpec:
    """The :class:`~scaler.replay.load.InputSpec` of the flags of :func:`add_input_flags` (and
    ``--profile-refresh`` and ``--quiet`` where the command has them).

    Raises:
        UsageError: a bad duration or time (one line naming the flag and the value).
    """
    step = _seconds(args.step, "--step")
    if step <= 0:
        raise UsageError(f"--step must be positive, got {args.step!r}")
    prometheus = None
    if args.prometheus_url:
        prometheus = PrometheusSpec(
            url=args.prometheus_url,
            auth_file=args.prometheus_auth_file,
            selector=args.prometheus_selector,
            cache_dir=Path(args.cache_dir) if args.cache_dir else None,
            metrics=args.prometheus_metrics,
            auth=args.prometheus_auth,
            timeout=args.prometheus_timeout,
        )
    return InputSpec(
        snapshot=tuple(Path(p) for p in args.snapshot or ()),
        trace=Path(args.trace) if args.trace else None,
        prometheus=prometheus,
        kubeconfig=args.kubeconfig,
        context=args.context,
        trace_map=Path(args.trace_map) if args.trace_map else None,
        start=_time(args.start, "--from"),
        end=_time(args.end, "--to"),
        step=step,
        provision_delay=_seconds(args.provision_delay, "--provision-delay"),
        prices=Path(args.prices) if args.prices else None,
        profile_refresh=_seconds(getattr(args, "profile_refresh", "1h"), "--profile-refresh"),
        quiet=bool(getattr(args, "quiet", False)),
    )


@contextlib.contextmanager
def simulated_logs_silenced() -> Iterator[None]:
    """While replays run: no log record reaches the terminal. Every record then comes from a
    simulated controller (its actuator, its plugins), in this process or handed back from a Ray
    worker (:mod:`scaler.fanout`), and describes the simulation, not the user's cluster; what it
    did is in the report (removals, failed removals, evictions, events). The root logger's
    handlers are swapped for a :class:`logging.NullHandler` (which also keeps Python's
    last-resort handler off stderr) and restored after."""
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [logging.NullHandler()]
    try:
        yield
    finally:
        root.handlers = saved
