"""Command line: ``scaler dry-run``, ``scaler why``, ``scaler status``, ``scaler run``,
``scaler replay``, ``scaler tune``, ``scaler history export``, ``scaler snapshot``, ``scaler schema``.

Every engine setting is a flag with cluster-autoscaler's name (generated from
:class:`~scaler.config.ScalerConfig`) and a key of the same name in the ``--config`` YAML file;
flags win over the file. Bad input of any kind prints one line ``scaler: error: …`` naming the
bad value on stderr and exits with status 2, before anything is done.
"""

from __future__ import annotations

import argparse
import difflib
import gc
import json
import logging
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, get_args, get_origin

from scaler.cmdline import HelpFormatter, UsageError, bundled_example
from scaler.config import (
    DRY_RUN_KEYS,
    DURATION_KEYS,
    FLAG_GROUPS,
    SETTINGS,
    ScalerConfig,
    flag_name,
    load_config_file,
)
from scaler.errors import EXIT_BAD_INPUT, InputError, one_line
from scaler.model.snapshot import ClusterSnapshot
from scaler.model.times import format_duration, timestamp_seconds

if TYPE_CHECKING:
    from scaler.prices import PriceTable
    from scaler.report.models import DryRunReport

__all__ = ["OUTPUT_FORMATS", "main", "unknown_argument"]

OUTPUT_FORMATS = ("table", "wide", "json", "yaml")
"""``-o`` of ``scaler dry-run``, as kubectl's: the default table, ``wide``, ``json``, ``yaml``."""


class _Parser(argparse.ArgumentParser):
    """Go-flag-like argparse: no abbreviated flags (``--scale-down-util`` is unknown, as in Go);
    errors raise :class:`UsageError` (one line, exit 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _shown_default(key: str, value: Any) -> str | None:
    """The default as ``--help`` shows it; ``None`` for an empty one (Go omits zero strings)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or None
    if key in DURATION_KEYS:
        return format_duration(float(value))
    if isinstance(value, str):
        return value or None
    return f"{value:g}" if isinstance(value, float) else str(value)


def _metavar(annotation: Any) -> str:
    """Go's flag type names: ``float``, ``int``, ``string``; ``list`` for comma-separated names."""
    if annotation is float:
        return "float"
    if annotation is int:
        return "int"
    if get_origin(annotation) is tuple:
        return "list"
    return "string"


def _add_config_flags(parser: argparse.ArgumentParser, keys: Collection[str] | None = None) -> None:
    """One flag per :class:`~scaler.config.ScalerConfig` field (in ``keys`` when given), grouped
    as :data:`~scaler.config.FLAG_GROUPS`: its type as metavar (``duration``, ``float``,
    ``true|false``), the choices of a ``Literal`` field, and the default (Go durations)."""
    defaults = ScalerConfig()
    fields = ScalerConfig.model_fields
    for title, texts in FLAG_GROUPS.items():
        shown = [k for k in texts if keys is None or k in keys]
        if not shown:
            continue
        group = parser.add_argument_group(title)
        for key in shown:
            flag = flag_name(key)
            if flag is None:
                continue  # node-pools: a map, config file only
            annotation = fields[key].annotation
            default = _shown_default(key, getattr(defaults, key))
            help_text = texts[key] + (f" (default {default})" if default is not None else "")
            kwargs: dict[str, Any] = {"dest": key, "default": argparse.SUPPRESS, "help": help_text}
            if annotation is bool:
                kwargs.update(nargs="?", const="true", metavar="true|false")
            elif bool in get_args(annotation):  # bool | Literal["auto"]
                kwargs.update(nargs="?", const="true", metavar="true|false|auto")
            elif key in ("nodes", "budgets"):  # repeatable
                kwargs.update(action="append", metavar=SETTINGS[key].metavar)
            elif get_origin(annotation) is Literal:
                kwargs.update(choices=get_args(annotation))
            else:
                kwargs.update(
                    metavar="duration"
                    if key in DURATION_KEYS
                    else SETTINGS[key].metavar or _metavar(annotation)
                )
            group.add_argument(flag, **kwargs)
    # Other spellings of a flag (CA's own "distruption"), accepted but not shown.
    for key, s in SETTINGS.items():
        hidden = [f"--{a}" for a in s.aliases if f"--{a}" != flag_name(key)]
        if hidden and flag_name(key) and (keys is None or key in keys):
            parser.add_argument(*hidden, dest=key, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _add_source_flags(parser: argparse.ArgumentParser, offline: bool) -> None:
    g = parser.add_argument_group("Cluster state")
    if offline:
        g.add_argument(
            "--snapshot",
            nargs="+",
            metavar="PATH",
            help="snapshot files or directories (kubectl get -o json|yaml output); without it, the "
            "cluster of the kubeconfig or in-cluster config, or the bundled example when none is configured",
        )
        g.add_argument(
            "--now",
            metavar="TIME",
            help="evaluation time (RFC 3339 or Unix seconds); default: the snapshot's "
            "metrics timestamp, or the clock in live mode",
        )
    g.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    g.add_argument("--context", metavar="NAME", help="kubeconfig context")


def _add_cloud_flags(parser: argparse.ArgumentParser) -> None:
    """``scaler dry-run``'s cloud flags: with ``--cloud-provider gke`` the dry-run reads the node
    pools' size limits from the GKE API, as ``scaler run`` does (:func:`_cloud_limits`)."""
    g = parser.add_argument_group("Node-pool limits from the cloud")
    g.add_argument(
        "--cloud-provider",
        dest="cloud_provider",
        choices=("gke", "kubernetes"),
        default=argparse.SUPPRESS,
        help="gke: read every node pool's and MIG's size limits from the GKE API, as scaler run does "
        "(needs GKE credentials: gcloud auth application-default login, with container.clusters.get and "
        "compute.instanceGroupManagers.get). Not given (a config file's cloud-provider key, read by scaler run, "
        "does not count), or kubernetes: limits come only from --nodes and the config file's node-pools (min 0 "
        "otherwise).",
    )
    for key, what in (("gke_project", "GCP project"), ("gke_location", "location (region or zone)"),
                      ("gke_cluster", "name")):  # fmt: skip
        g.add_argument(
            flag_name(key) or "",
            dest=key,
            metavar="NAME",
            default=argparse.SUPPRESS,
            help=f"with --cloud-provider gke: the cluster's {what} (default: from a kubeconfig context "
            "named gke_PROJECT_LOCATION_CLUSTER, as gcloud writes it, else the GKE metadata server)",
        )


def build_parser() -> argparse.ArgumentParser:
    """The ``scaler`` argument parser (one line of error and exit 2 on bad flags)."""
    parser = _Parser(prog="scaler", description="Usage-based scale-down for Kubernetes on GKE.")
    parser.add_argument("--version", action="version", version=f"scaler {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    dry = sub.add_parser("dry-run", help="report which nodes could be removed and why the others stay")
    _add_source_flags(dry, offline=True)
    dry.add_argument("--config", metavar="FILE", help="YAML file with flag-named keys (flags win)")
    dry.add_argument(
        "--output",
        "-o",
        choices=OUTPUT_FORMATS,
        default="table",
        help="table (fits 80 columns), wide (adds requests, group, zone, pods to move and the full "
        "reason), json or yaml (the versioned report, see `scaler schema`)",
    )
    _add_config_flags(dry, DRY_RUN_KEYS)
    _add_cloud_flags(dry)
    why = sub.add_parser(
        "why", help="one node's verdict, its reason, what blocks it and what would change it"
    )
    why.add_argument("node", metavar="NODE", help="the node's name")
    _add_source_flags(why, offline=True)
    why.add_argument("--config", metavar="FILE", help="YAML file with flag-named keys (flags win)")
    why.add_argument("--output", "-o", choices=("text", "json", "yaml"), default="text",
                     help="text (default), json or yaml")  # fmt: skip
    _add_config_flags(why, DRY_RUN_KEYS)
    _add_cloud_flags(why)
    status = sub.add_parser(
        "status", help="the status of a running `scaler run`: its ConfigMap and node verdicts"
    )
    _add_source_flags(status, offline=False)
    status.add_argument("--namespace", "-n", metavar="string", default=ScalerConfig().namespace,
                        help=f"scaler's namespace (default {ScalerConfig().namespace})")  # fmt: skip
    status.add_argument("--status-config-map-name", metavar="string", default=ScalerConfig().status_config_map_name,
                        help=f"the status ConfigMap (default {ScalerConfig().status_config_map_name})")  # fmt: skip
    status.add_argument("--output", "-o", choices=("table", "wide", "json", "yaml"), default="table",
                        help="table (default), wide (adds cost and detail), json or yaml")  # fmt: skip
    run = sub.add_parser("run", help="the controller: remove unneeded nodes (leader-elected)")
    _add_source_flags(run, offline=False)
    run.add_argument("--config", metavar="FILE", help="YAML file with flag-named keys (flags win)")
    run.add_argument("--dry-run", action="store_true",
                     help="run the full loop, timers included, but only log, count and emit events")  # fmt: skip
    _add_config_flags(run)
    snap = sub.add_parser("snapshot", help="save the live cluster state as snapshot files")
    _add_source_flags(snap, offline=False)
    snap.add_argument("--out", required=True, metavar="DIR", help="output directory (must be new or empty)")
    snap.add_argument("--overwrite", action="store_true", help="replace files in a non-empty --out")
    snap.add_argument("--raw", action="store_true",
                      help="keep what is stripped by default: env[].value of every container, metadata.managedFields "
                           "and the kubectl.kubernetes.io/last-applied-configuration annotation")  # fmt: skip
    from scaler.replay.cli import add_parser as add_replay_parser

    add_replay_parser(sub)
    from scaler.tune.cli import add_parser as add_tune_parser

    add_tune_parser(sub)
    from scaler.history.cli import add_parser as add_history_parser

    add_history_parser(sub)
    sub.add_parser("schema", help="print the JSON Schema of the dry-run report")
    return parser


def _version() -> str:
    """scaler's version: :data:`scaler.__version__`, the one source the wheel's metadata is
    built from (pyproject ``[tool.setuptools.dynamic]``)."""
    from scaler import __version__

    return __version__


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The sub-command parsers of ``parser`` by name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """The long flags ``parser`` shows in its help."""
    return [
        o
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        for o in a.option_strings
        if o.startswith("--")
    ]


def unknown_argument(parser: argparse.ArgumentParser, command: str | None, extras: Sequence[str]) -> str:
    """The one-line error for arguments ``parser`` (``command``'s parser) did not take: the first
    unknown flag with the closest known one, as CA's Go flags would be asked for (a flag that
    starts the same way first, else :func:`difflib.get_close_matches`), or the stray value."""
    commands = _commands(parser)
    sub = commands.get(command or "", parser)
    flag = next((e for e in extras if e.startswith("-")), None)
    if flag is None:
        return f"unexpected argument {extras[0]!r}"
    name = flag.split("=", 1)[0]
    known = _flags(sub)
    message = f"unknown flag {name}"
    run = commands.get("run")
    if command == "dry-run" and run is not None and name in _flags(run):
        return f"{message}: it only affects `scaler run`, not a dry-run"
    starting = [k for k in known if k.startswith(name)]
    close = (
        starting
        if len(starting) == 1
        else difflib.get_close_matches(name, starting or known, n=1, cutoff=0.6)
    )
    return f"{message} (did you mean {close[0]}?)" if close else message


def _cloud_provider_given(args: argparse.Namespace) -> bool:
    """Whether ``--cloud-provider`` was given on the command line: a dry-run reads the cloud only
    when asked so. A ``--config`` file's ``cloud-provider`` key does not count: every config
    file rendered from the defaults holds ``cloud-provider: gke`` for ``scaler run``."""
    return "cloud_provider" in vars(args)


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
    from scaler.prices import PriceError, load_price_table

    try:
        return load_price_table(config.prices or None)
    except PriceError as e:
        raise UsageError(f"--prices: {e}") from None


_LATEST_NOW = 253402300799.0
"""9999-12-31T23:59:59Z in Unix seconds: the last time an RFC 3339 timestamp can write."""


def _parse_now(text: str) -> float:
    """``--now``: Unix seconds from RFC 3339 or a number, between 1970-01-01 and 9999-12-31.

    Raises:
        UsageError: not a time, or outside that range (the report writes times in RFC 3339).
    """
    try:
        now = timestamp_seconds(text)
    except ValueError:
        raise UsageError(f"--now: not an RFC 3339 time or Unix seconds: {text!r}") from None
    if not 0 <= now <= _LATEST_NOW:
        raise UsageError(f"--now: {text!r} is outside 1970-01-01T00:00:00Z .. 9999-12-31T23:59:59Z")
    return now


def _live_snapshot(args: argparse.Namespace, now: float | None) -> tuple[ClusterSnapshot, str]:
    from scaler.sources.kube import load_live_snapshot, make_api_client

    api = make_api_client(args.kubeconfig, args.context)
    return load_live_snapshot(api, time.time() if now is None else now), "live cluster"


def _warn(line: str) -> None:
    """One warning line on stderr."""
    sys.stderr.write(f"scaler: {line}\n")


def _load_state(args: argparse.Namespace) -> tuple[ClusterSnapshot, str]:
    """The snapshot to evaluate and where it came from: ``--snapshot``, else the cluster of the
    kubeconfig or in-cluster config (an error, exit 2, when it cannot be reached), else, when no
    cluster is configured anywhere, the bundled example (said on stderr)."""
    from scaler.sources.files import load_snapshot

    now = _parse_now(args.now) if args.now else None
    if args.snapshot:
        return load_snapshot(args.snapshot, now, warn=_warn), ", ".join(args.snapshot)
    from scaler.sources.kube import (  # the Kubernetes client: only when reading a live cluster
        ClusterUnreachable,
        LiveSourceError,
        NoClusterConfig,
    )

    try:
        return _live_snapshot(args, now)
    except NoClusterConfig as e:
        example = bundled_example()
        sys.stderr.write(
            f"scaler: no --snapshot and no cluster configured ({e}); using the bundled example {example}\n"
        )
        return load_snapshot([example], now), f"bundled example {example.name}"
    except ClusterUnreachable as e:
        raise UsageError(f"cluster unreachable: {e}") from None
    except LiveSourceError as e:
        raise UsageError(str(e)) from None


def absent_kinds(snapshot: ClusterSnapshot) -> list[str]:
    """What a snapshot does not hold, each with what its absence changes: PodDisruptionBudgets,
    workload controllers, PodMetrics, Namespaces (a cluster has them all, so none of a kind
    means the kind was not saved)."""
    out = []
    if not snapshot.pdbs:
        out.append("no PodDisruptionBudgets (no PDB was considered: kubectl get pdb -A -o json)")
    if not snapshot.has_workloads:
        out.append(
            "no workload controllers (pods' owners and replica counts were not checked: "
            "kubectl get rs,rc,sts,ds,jobs,deploy -A -o json)"
        )
    if not snapshot.pod_metrics:
        out.append(
            "no PodMetrics (moved pods count their requests, and the requests-vs-usage summary is "
            "left out: kubectl get --raw /apis/metrics.k8s.io/v1beta1/pods)"
        )
    selectors = (
        t.namespace_selector is not None
        for p in snapshot.pods
        for t in (*p.required_affinity, *p.required_anti_affinity)
    )
    if not snapshot.namespaces and any(selectors):
        out.append(
            "no Namespaces (a pod's namespaceSelector affinity finds no destination: kubectl get ns -o json)"
        )
    return out


def _check_input(config: ScalerConfig, snapshot: ClusterSnapshot, from_files: bool) -> str:
    """Refuse input a dry-run would silently misjudge, and say what it lacks (*Incomplete input*
    in docs/getting-started/dry-run.md): no NodeMetrics with ``--utilization-source=usage`` and a pool, MIG or
    machine-type name matching nothing are errors (:class:`UsageError`, exit 2); the kinds
    absent from snapshot files are returned as one warning line (``""`` when none is), for
    stderr once the evaluation has run."""
    from scaler.names import cluster_names, unmatched_machine_types, unmatched_names

    if config.utilization_source == "usage" and snapshot.nodes and not snapshot.node_metrics:
        raise UsageError(
            "no NodeMetrics in the input: with --utilization-source=usage no node's usage is known; "
            "add them (kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes > node-metrics.json; "
            "metrics-server must run) or judge by requests with --utilization-source=requests"
        )
    where = "the snapshot" if from_files else "the cluster"
    known = cluster_names(snapshot.nodes)
    problems = unmatched_names(config, known, where) + unmatched_machine_types(config, known, where)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(problems[0] + more)
    absent = absent_kinds(snapshot) if from_files else []
    return f"scaler: warning: the snapshot holds {'; '.join(absent)}\n" if absent else ""


def _gke_cluster_from_context(args: argparse.Namespace) -> tuple[str, str, str] | None:
    """``(project, location, cluster)`` from the kubeconfig context the dry-run reads (``--context``,
    else the current one) when gcloud named it ``gke_PROJECT_LOCATION_CLUSTER``; ``None`` otherwise
    (no kubeconfig, another name)."""
    try:
        from kubernetes import config as kube_config

        contexts, current = kube_config.list_kube_config_contexts(args.kubeconfig)  # type: ignore[no-untyped-call]
    except Exception:  # no kubeconfig at all: in-cluster, or the metadata server will say
        return None
    name = args.context or (current or {}).get("name", "")
    if not any(c.get("name") == name for c in contexts or ()):
        return None
    parts = str(name).split("_")
    if len(parts) != 4 or parts[0] != "gke" or not all(parts[1:]):
        return None
    return parts[1], parts[2], parts[3]


def _cloud_limits(
    args: argparse.Namespace, config: ScalerConfig, snapshot: ClusterSnapshot
) -> tuple[ScalerConfig, str]:
    """``config`` with the size limits of every MIG the GKE API lists for the cluster as
    ``--nodes`` entries naming the MIG, for ``scaler dry-run --cloud-provider gke``: the limits
    the GKE provider gives each MIG in ``scaler run`` (:func:`scaler.cloud.gke.zone_limits`:
    ``minNodeCount``/``maxNodeCount`` per zone, the target size of a pool without autoscaling).
    Pools named by a ``--nodes`` entry or with ``min-size``/``max-size`` in ``node-pools``, and
    MIGs named by a ``--nodes`` entry, keep those (explicit settings win, as in ``scaler run``).
    A pool's whole-pool minimum (``totalMinNodeCount``) is not a per-MIG limit: ``scaler run``
    applies it when it plans deletions, the dry-run does not.

    The cluster is ``--gke-project``/``--gke-location``/``--gke-cluster``, else the kubeconfig
    context's ``gke_PROJECT_LOCATION_CLUSTER`` name, else the metadata server. The Google
    clients use Application Default Credentials (``$SCALER_GCE_API_ENDPOINT`` points them at an
    emulator, for tests). Returns the new config and the cluster's name.

    Raises:
        UsageError: the cluster cannot be told, no credentials, or the GKE API refused or failed.
    """
    import os

    from scaler.cloud.gke import GKEProvider, make_clients
    from scaler.cloud.metadata import MetadataUnavailable
    from scaler.config import NodeGroupSpec
    from scaler.eligibility import node_group_limits

    project, location, cluster = config.gke_project, config.gke_location, config.gke_cluster
    if not (project and location and cluster):
        named = _gke_cluster_from_context(args)
        if named is not None:
            project, location, cluster = project or named[0], location or named[1], cluster or named[2]
    limits = node_group_limits(config, snapshot.nodes)
    try:
        endpoint = os.environ.get("SCALER_GCE_API_ENDPOINT") or None
        container, compute = make_clients(endpoint)
        provider = GKEProvider.from_environment(
            project or None, location or None, cluster or None,
            limits=limits, container_client=container, compute_clients=compute, max_attempts=2,
        )  # fmt: skip
        groups = provider.node_groups()
    except MetadataUnavailable as e:
        raise UsageError(
            f"--cloud-provider gke: which cluster? give --gke-project, --gke-location and --gke-cluster ({e})"
        ) from None
    except Exception as e:  # CloudError, or no Application Default Credentials
        raise UsageError(
            f"--cloud-provider gke: cannot read the node pools of {cluster or '?'}: {e}"
        ) from None
    explicit_pools = {s.name for s in config.nodes} | {
        name for name, p in config.node_pools.items() if p.min_size is not None or p.max_size is not None
    }
    added = [
        NodeGroupSpec(min_size=m.min_size, max_size=max(m.max_size, m.min_size), name=m.name)
        for g in groups
        if g.id not in explicit_pools
        for m in g.migs
        if m.name not in explicit_pools
    ]
    return config.model_copy(update={"nodes": (*config.nodes, *added)}), provider.cluster


def _dry_run(args: argparse.Namespace) -> int:
    from scaler.report.build import report_json, report_yaml
    from scaler.report.table import print_table

    report, warning = _report(args)
    sys.stderr.write(warning)
    if args.output == "json":
        sys.stdout.write(report_json(report) + "\n")
    elif args.output == "yaml":
        sys.stdout.write(report_yaml(report))
    else:
        print_table(report, sys.stdout, wide=args.output == "wide")
    return 0


def _why(args: argparse.Namespace) -> int:
    """``scaler why NODE``: the dry-run of the same input, reduced to one node's answer."""
    import yaml

    from scaler.why import answer, answer_lines, find_node

    report, warning = _report(args)
    node = find_node(report, args.node)
    if node is None:
        raise UsageError(f"node {args.node!r} not found in {report.source} ({len(report.nodes)} nodes)")
    sys.stderr.write(warning)
    if args.output == "json":
        sys.stdout.write(json.dumps(answer(node), indent=2) + "\n")
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(answer(node), sort_keys=False))
    else:
        sys.stdout.write("\n".join(answer_lines(node)) + "\n")
    return 0


def _status(args: argparse.Namespace) -> int:
    """``scaler status``: the status ConfigMap and node verdicts of a running ``scaler run``."""
    import yaml

    from scaler.sources.kube import ClusterUnreachable, NoClusterConfig, make_api_client
    from scaler.status import StatusError, read_status, status_lines, status_object

    try:
        api = make_api_client(args.kubeconfig, args.context)
        view = read_status(api, args.namespace, args.status_config_map_name)
    except (ClusterUnreachable, NoClusterConfig, StatusError) as e:
        raise UsageError(str(e)) from None
    if args.output == "json":
        sys.stdout.write(json.dumps(status_object(view), indent=2) + "\n")
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(status_object(view), sort_keys=False))
    else:
        sys.stdout.write("\n".join(status_lines(view, wide=args.output == "wide")) + "\n")
    return 0


def _report(args: argparse.Namespace) -> tuple[DryRunReport, str]:
    """The dry-run report of ``args`` (snapshot files, the live cluster or the bundled example)
    and the warning line about what snapshot files lack (``""`` when nothing)."""
    from scaler.engine import evaluate
    from scaler.report.build import build_report
    from scaler.report.compare import start_variants

    config = _config(args)
    prices = _prices(config)
    snapshot, source = _load_state(args)
    if config.cloud_provider == "gke" and _cloud_provider_given(args):
        config, cluster = _cloud_limits(args, config, snapshot)
        source += f"; node-pool limits from GKE cluster {cluster}"
    elif unused := [
        f"--{k.replace('_', '-')}" for k in ("gke_project", "gke_location", "gke_cluster") if k in vars(args)
    ]:
        raise UsageError(
            f"{unused[0]} is read only with --cloud-provider gke (the node-pool limits from GKE)"
        )
    gc.freeze()  # the snapshot lives until exit: keep the cycle collector off its million records
    warning = _check_input(config, snapshot, bool(args.snapshot))
    if config.history != "none":
        from dataclasses import replace

        from scaler.history.prometheus import HistoryError
        from scaler.history.source import load_gpu_usage, load_profiles

        try:
            snapshot = replace(
                snapshot,
                workload_profiles=load_profiles(config, snapshot, snapshot.now),
                gpu_usage=load_gpu_usage(config, snapshot, snapshot.now),
                gpu_usage_unknown="judged by GPU requests: no GPU usage series for this node",
            )
        except HistoryError as e:
            raise UsageError(str(e)) from None
    # Cluster-autoscaler's rule and right-sized requests, evaluated beside scaler's own evaluation.
    variants = start_variants(snapshot, config)
    evaluation = evaluate(snapshot, config)  # the disruption budgets active at its time included
    relief = None
    if config.hot_node_relief:  # every hot node, as if hot for --hot-node-time; after the removals
        from scaler.planner import relief_admission
        from scaler.relief import plan_relief

        admit = relief_admission(evaluation)
        relief = plan_relief(evaluation, [n.name for n in snapshot.nodes], admit=admit)
    return build_report(evaluation, snapshot, source, prices, variants=variants, relief=relief), warning


def _snapshot(args: argparse.Namespace) -> int:
    from scaler.kube.client import ClusterUnreachable, LiveSourceError, make_api_client
    from scaler.sources.kube import fetch_objects
    from scaler.sources.writer import write_snapshot

    try:
        api = make_api_client(args.kubeconfig, args.context)
        objects = fetch_objects(api)
    except (ClusterUnreachable, LiveSourceError) as e:
        raise UsageError(f"cannot read the cluster: {e}") from None
    try:
        paths = write_snapshot(objects, Path(args.out), overwrite=args.overwrite, raw=args.raw)
    except (ValueError, OSError) as e:
        raise UsageError(str(e)) from None
    sys.stderr.write(f"wrote {len(paths)} files to {args.out}\n")
    return 0


def _run(args: argparse.Namespace) -> int:
    from scaler.kube.client import ClusterUnreachable, make_api_client
    from scaler.observability import configure_logging
    from scaler.runner import StartupError, build_runner, run_forever
    from scaler.simulator.registry import resolve_plugins

    config = _config(args)
    # Plugin names are resolved once, here, before anything else: a typo exits 2 at start.
    plugins = resolve_plugins(config)
    _prices(config)  # a bad --prices file is an error now, not in the first loop
    configure_logging(config.log_format)
    try:
        api = make_api_client(args.kubeconfig, args.context)
    except ClusterUnreachable as e:
        raise UsageError(f"cluster unreachable: {e}") from None
    try:
        runner = build_runner(config, api, dry_run=args.dry_run, plugins=plugins)
    except StartupError as e:
        raise UsageError(str(e)) from None
    code = run_forever(runner)
    if runner.fatal:
        raise UsageError(runner.fatal)
    return code


_TIME_FLAGS = ("--from", "--to")


def _join_relative_times(argv: Sequence[str]) -> list[str]:
    """``--from -14d`` as ``--from=-14d``: argparse would take a value that starts with ``-``
    and is not a plain number for a flag."""
    out: list[str] = []
    skip = False
    for i, a in enumerate(argv):
        if skip:
            skip = False
            continue
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if a in _TIME_FLAGS and nxt.startswith("-") and nxt[1:2].isdigit():
            out.append(f"{a}={nxt}")
            skip = True
        else:
            out.append(a)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``scaler`` console script; returns the exit status.

    Any :class:`scaler.errors.InputError` (a flag, a config key, a file, an API answer) ends as
    one line on stderr and :data:`EXIT_BAD_INPUT`."""
    # The API client's connection pool retries a refused connection three times and logs each
    # retry as a warning; the failure itself is reported once, as an error or in the loop's log.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        parser = build_parser()
        args, extras = parser.parse_known_args(_join_relative_times(sys.argv[1:] if argv is None else argv))
        if extras:
            raise UsageError(unknown_argument(parser, getattr(args, "command", None), extras))
        if args.command == "dry-run":
            return _dry_run(args)
        if args.command == "why":
            return _why(args)
        if args.command == "status":
            return _status(args)
        if args.command == "snapshot":
            return _snapshot(args)
        if args.command == "run":
            return _run(args)
        if args.command == "replay":
            from scaler.replay.cli import run as run_replay

            return run_replay(args)
        if args.command == "tune":
            from scaler.tune.cli import run as run_tune

            return run_tune(args)
        if args.command == "history":
            from scaler.history.cli import run as run_history

            return run_history(args)
        from scaler.report.models import DryRunReport

        sys.stdout.write(json.dumps(DryRunReport.model_json_schema(by_alias=True), indent=2) + "\n")
        return 0
    except InputError as e:
        sys.stderr.write(f"scaler: error: {one_line(e)}\n")
        return EXIT_BAD_INPUT


def _entry() -> NoReturn:
    sys.exit(main())


if __name__ == "__main__":
    _entry()
