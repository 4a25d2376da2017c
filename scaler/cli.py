"""Command line: ``scaler dry-run``, ``scaler run``, ``scaler replay``, ``scaler snapshot``, ``scaler schema``.

Every engine setting is a flag with cluster-autoscaler's name (generated from
:class:`~scaler.config.ScalerConfig`) and a key of the same name in the ``--config`` YAML file;
flags win over the file. Bad input of any kind prints one line ``scaler: error: …`` naming the
bad value on stderr and exits with status 2, before anything is done.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console

from scaler.config import DRY_RUN_GROUPS, FLAG_GROUPS, ConfigError, ScalerConfig, flag_name, load_config_file
from scaler.model.snapshot import ClusterSnapshot, SnapshotError
from scaler.model.times import timestamp_seconds
from scaler.usage import EXIT_BAD_INPUT, UsageError, bundled_example

if TYPE_CHECKING:
    from scaler.replay.prices import PriceTable

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _add_config_flags(parser: argparse.ArgumentParser, groups: tuple[str, ...] | None = None) -> None:
    defaults = ScalerConfig()
    for title, keys in FLAG_GROUPS.items():
        if groups is not None and title not in groups:
            continue
        group = parser.add_argument_group(title)
        for key, text in keys.items():
            flag = flag_name(key)
            if flag is None:
                continue  # node-pools: a map, config file only
            default = getattr(defaults, key)
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            if isinstance(default, bool):
                group.add_argument(
                    flag, dest=key, nargs="?", const="true", metavar="true|false",
                    default=argparse.SUPPRESS, help=f"{text} (default {str(default).lower()})",
                )  # fmt: skip
            elif key == "nodes":
                group.add_argument(
                    flag,
                    dest=key,
                    action="append",
                    metavar="MIN:MAX:POOL",
                    default=argparse.SUPPRESS,
                    help=text,
                )
            elif key == "budgets":
                group.add_argument(
                    flag, dest=key, action="append", metavar="BUDGET", default=argparse.SUPPRESS, help=text
                )
            else:
                group.add_argument(
                    flag, dest=key, default=argparse.SUPPRESS, help=f"{text} (default {shown})"
                )
    # CA's own spelling of this flag.
    parser.add_argument(
        "--blocking-system-pod-distruption-timeout",
        dest="blocking_system_pod_disruption_timeout",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


def _add_source_flags(parser: argparse.ArgumentParser, offline: bool) -> None:
    g = parser.add_argument_group("Cluster state")
    if offline:
        g.add_argument(
            "--snapshot",
            nargs="+",
            metavar="PATH",
            help="snapshot files or directories (kubectl get -o json|yaml output); "
            "without it, the live cluster, else the bundled example",
        )
        g.add_argument(
            "--now",
            help="evaluation time (RFC 3339 or Unix seconds); default: the snapshot's "
            "metrics timestamp, or the clock in live mode",
        )
    g.add_argument("--kubeconfig", help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, in-cluster)")
    g.add_argument("--context", help="kubeconfig context")


def build_parser() -> argparse.ArgumentParser:
    """The ``scaler`` argument parser (one line of error and exit 2 on bad flags)."""
    parser = _Parser(prog="scaler", description="Usage-based scale-down for Kubernetes on GKE.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    dry = sub.add_parser("dry-run", help="report which nodes could be removed and why the others stay")
    _add_source_flags(dry, offline=True)
    dry.add_argument("--config", help="YAML file with flag-named keys (flags win)")
    dry.add_argument("--output", "-o", choices=("table", "json"), default="table", help="report format")
    _add_config_flags(dry, DRY_RUN_GROUPS)
    run = sub.add_parser("run", help="the controller: remove unneeded nodes (leader-elected)")
    _add_source_flags(run, offline=False)
    run.add_argument("--config", help="YAML file with flag-named keys (flags win)")
    run.add_argument("--dry-run", action="store_true",
                     help="run the full loop, timers included, but only log, count and emit events")  # fmt: skip
    _add_config_flags(run)
    snap = sub.add_parser("snapshot", help="save the live cluster state as snapshot files")
    _add_source_flags(snap, offline=False)
    snap.add_argument("--out", required=True, help="output directory (must be new or empty)")
    snap.add_argument("--overwrite", action="store_true", help="replace files in a non-empty --out")
    from scaler.replay.cli import add_parser as add_replay_parser

    add_replay_parser(sub)
    sub.add_parser("schema", help="print the JSON Schema of the dry-run report")
    return parser


def _config(args: argparse.Namespace) -> ScalerConfig:
    values: dict[str, Any] = {}
    if getattr(args, "config", None):
        values.update(load_config_file(args.config))
    known = set(ScalerConfig.model_fields)
    for key, value in vars(args).items():
        if key in known:
            values[key] = value
    return ScalerConfig.from_mapping(values)


def _prices(config: ScalerConfig) -> PriceTable:
    from scaler.replay.prices import PriceError, load_price_table

    try:
        return load_price_table(config.prices or None)
    except PriceError as e:
        raise UsageError(f"--prices: {e}") from None


def _parse_now(text: str) -> float:
    try:
        return timestamp_seconds(text)
    except ValueError:
        raise UsageError(f"--now: not an RFC 3339 time or Unix seconds: {text!r}") from None


def _live_snapshot(args: argparse.Namespace, now: float | None) -> tuple[ClusterSnapshot, str]:
    from scaler.sources.kube import load_live_snapshot, make_api_client

    api = make_api_client(args.kubeconfig, args.context)
    return load_live_snapshot(api, time.time() if now is None else now), "live cluster"


def _load_state(args: argparse.Namespace, err: Console) -> tuple[ClusterSnapshot, str]:
    from scaler.sources.files import load_snapshot

    now = _parse_now(args.now) if args.now else None
    if args.snapshot:
        return load_snapshot(args.snapshot, now), ", ".join(args.snapshot)
    from scaler.sources.kube import ClusterUnreachable, LiveSourceError  # the client: only when live

    try:
        return _live_snapshot(args, now)
    except ClusterUnreachable as e:
        if args.kubeconfig or args.context:
            raise UsageError(f"cluster unreachable: {e}") from None
        example = bundled_example()
        err.print(
            f"scaler: no --snapshot and no reachable cluster ({e}); using the bundled example {example}"
        )
        return load_snapshot([example], now), f"bundled example {example.name}"
    except LiveSourceError as e:
        raise UsageError(str(e)) from None


def _dry_run(args: argparse.Namespace) -> int:
    from scaler.engine import evaluate
    from scaler.planner import hold_by_budgets
    from scaler.report.build import build_report, print_table, report_json

    config = _config(args)
    prices = _prices(config)
    err = Console(stderr=True)
    snapshot, source = _load_state(args, err)
    gc.freeze()  # the snapshot lives until exit: keep the cycle collector off its million records
    if config.history != "none":
        from dataclasses import replace

        from scaler.history.prometheus import HistoryError
        from scaler.history.source import load_profiles

        try:
            snapshot = replace(snapshot, workload_profiles=load_profiles(config, snapshot, snapshot.now))
        except HistoryError as e:
            raise UsageError(str(e)) from None
    evaluation = hold_by_budgets(evaluate(snapshot, config))
    report = build_report(evaluation, snapshot, source, prices)
    if args.output == "json":
        sys.stdout.write(report_json(report) + "\n")
    else:
        out = Console(width=None if sys.stdout.isatty() else 200)
        print_table(report, out)
    return 0


def _snapshot(args: argparse.Namespace) -> int:
    from scaler.sources.kube import ClusterUnreachable, LiveSourceError, fetch_objects, make_api_client
    from scaler.sources.writer import write_snapshot

    try:
        api = make_api_client(args.kubeconfig, args.context)
        objects = fetch_objects(api)
    except (ClusterUnreachable, LiveSourceError) as e:
        raise UsageError(f"cannot read the cluster: {e}") from None
    try:
        paths = write_snapshot(objects, Path(args.out), overwrite=args.overwrite)
    except (ValueError, OSError) as e:
        raise UsageError(str(e)) from None
    Console(stderr=True).print(f"wrote {len(paths)} files to {args.out}")
    return 0


def _run(args: argparse.Namespace) -> int:
    import os
    import socket

    from scaler.cloud.base import CloudError, CloudProvider
    from scaler.eligibility import node_group_limits
    from scaler.model.decode import parse_node
    from scaler.model.parse import ObjectError
    from scaler.model.records import Node
    from scaler.observability import configure_logging
    from scaler.runner import Runner, run_forever
    from scaler.sources.kube import ClusterUnreachable, LiveSourceError, make_api_client

    config = _config(args)
    _prices(config)  # a bad --prices file is an error now, not in the first loop
    configure_logging(config.log_format)
    try:
        api = make_api_client(args.kubeconfig, args.context)
    except ClusterUnreachable as e:
        raise UsageError(f"cluster unreachable: {e}") from None
    identity = os.environ.get("POD_NAME") or socket.gethostname()
    runner: Runner | None = None

    def runner_nodes() -> tuple[Node, ...]:
        return runner.last_nodes if runner is not None else ()

    cloud: CloudProvider
    try:
        from scaler.sources.kube import fetch_objects

        nodes = [parse_node(o) for o in fetch_objects(api) if o.get("kind") == "Node"]
        limits = node_group_limits(config, nodes)
        if config.cloud_provider == "gke":
            from scaler.cloud.gke import GKEProvider, make_clients

            # SCALER_GCE_API_ENDPOINT points the Google clients at an emulator (tests); unset in
            # production: Google's endpoints with Workload Identity credentials.
            container, compute = make_clients(os.environ.get("SCALER_GCE_API_ENDPOINT") or None)
            cloud = GKEProvider.from_environment(
                config.gke_project or None,
                config.gke_location or None,
                config.gke_cluster or None,
                limits=limits,
                container_client=container,
                compute_clients=compute,
            )
        else:
            from scaler.cloud.kubernetes import KubernetesProvider

            # Node counts come from the nodes the loop already read (no extra LIST per loop).
            cloud = KubernetesProvider(api, limits, node_source=lambda: runner_nodes())
    except (ClusterUnreachable, LiveSourceError, CloudError, ObjectError) as e:
        raise UsageError(str(e)) from None
    except Exception as e:  # metadata server unreachable and no --gke-* flags
        raise UsageError(f"cloud provider {config.cloud_provider}: {e}") from None
    runner = Runner(config, api, cloud, identity=identity, dry_run=args.dry_run)
    return run_forever(runner)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``scaler`` console script; returns the exit status."""
    from scaler.simulator.registry import PluginError

    try:
        args = build_parser().parse_args(argv)
        if args.command == "dry-run":
            return _dry_run(args)
        if args.command == "snapshot":
            return _snapshot(args)
        if args.command == "run":
            return _run(args)
        if args.command == "replay":
            from scaler.replay.cli import run as run_replay

            return run_replay(args)
        from scaler.report.models import DryRunReport

        sys.stdout.write(json.dumps(DryRunReport.model_json_schema(by_alias=True), indent=2) + "\n")
        return 0
    except (UsageError, ConfigError, SnapshotError, PluginError) as e:
        sys.stderr.write(f"scaler: error: {' '.join(str(e).split())}\n")
        return EXIT_BAD_INPUT


def _entry() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
