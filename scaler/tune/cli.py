"""``scaler tune``: search the scale-down flags that save most without overload.

Wiring (in :mod:`scaler.cli`): ``add_parser(subparsers)`` adds the ``tune`` sub-command and
``run(args)`` executes it. Inputs are ``scaler replay``'s: the same flags
(:mod:`scaler.replay.command`) make a typed :class:`scaler.replay.load.InputSpec`, read by
:func:`scaler.replay.load.load_inputs`; the search is :func:`scaler.tune.search.run_search` on a
:class:`scaler.fanout.Pool`, the simulated controllers' log lines silenced; output is
:mod:`scaler.tune.frontier`'s table or JSON, or :mod:`scaler.tune.html`'s page, and ``--out DIR``
writes ``frontier.json``, ``report.html`` and ``recommended.yaml``.

Bad input (a bad space file, an unknown flag in it, an empty range, a Ray address that does
not answer, and every input error of ``scaler replay``) raises :class:`scaler.cmdline.UsageError`
with one line naming the value (exit status 2), before any replay runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaler.cmdline import HelpFormatter, UsageError

if TYPE_CHECKING:
    from scaler.replay.load import LoadedInputs
    from scaler.tune.search import Constraints
    from scaler.tune.space import Space

__all__ = ["add_parser", "run"]

_EPILOG = """\
objectives: node-hours saved against no scale-down (maximise), overload node-minutes added over
no scale-down (minimise), pods evicted (minimise); a trial adding more than --max-added-overload
node-minutes (default 0 when no constraint is given), or whose overload is above
--max-overload-ratio of no scale-down's, is infeasible. Trials are asked and told in generations
of --generation-size, so the same --seed gives the same trials and results whatever --workers or
--ray-address.

successive halving (default for windows over 3 days): every trial is replayed over the first day
(or a ninth of the window), the best third on node-hours saved and evictions over 3 days (or a
third of the window), and the best third of those over the whole window, where alone the
overload constraints are checked and the front is drawn; --no-halving replays every trial over
the whole window.

search space (--space FILE, YAML; default: the bundled space, printed by
--print-space), for example:
  scale-down-utilization-threshold: {low: 0.3, high: 0.8, step: 0.05}
  scale-down-unneeded-time: {low: 5m, high: 30m, step: 5m}
  usage-aggregation: {choices: [max, p95, ewma]}
  constraints: {max-overload-ratio: 0.5}
"""


class _EpilogAsWritten(HelpFormatter):
    """Help wrapped without splitting a token, paragraph by paragraph, except a paragraph laid
    out by hand (indented lines: the epilog's YAML example), printed as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out = []
        for paragraph in text.strip("\n").split("\n\n"):
            lines = paragraph.splitlines()
            if any(line.startswith(" ") for line in lines):  # laid out by hand: as written
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(super()._fill_text(paragraph, width, indent))
        return "\n\n".join(out)


def add_parser(subparsers: Any) -> None:
    """Add the ``tune`` sub-command to ``subparsers`` (from ``add_subparsers``)."""
    from scaler.replay.command import add_input_flags, add_worker_flags
    from scaler.tune.search import SAMPLERS

    p = subparsers.add_parser(
        "tune",
        help="search the scale-down flags that save most without overload, over replays of your history",
        description="Search scale-down flags with Optuna over replays of the usage history (the same "
        "inputs as scaler replay): every trial is one replay; the Pareto front of node-hours saved, "
        "added overload and evictions is printed, and --out writes the recommended configuration.",
        epilog=_EPILOG,
        formatter_class=_EpilogAsWritten,
    )
    add_input_flags(p)
    p.add_argument("--space", metavar="FILE", help="YAML search space (default: the bundled space)")
    p.add_argument("--print-space", action="store_true", help="print the bundled search space and exit")
    p.add_argument("--trials", type=int, default=None, metavar="N", help="trials to run (default 32)")
    p.add_argument(
        "--trials-from",
        metavar="FILE",
        help="replay the trials of an earlier frontier.json as they are, instead of sampling (with "
        "--no-halving: every one over the whole window); --trials defaults to their count",
    )
    p.add_argument("--seed", type=int, default=0, metavar="int", help="the sampler's seed (default 0)")
    p.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default="tpe",
        help="Optuna's multi-objective TPE (default; fits budgets of tens of trials) or NSGA-II "
        "(hundreds of trials and more)",
    )
    p.add_argument(
        "--generation-size",
        type=int,
        default=8,
        metavar="N",
        help="trials asked and replayed together before their results are told (default 8); "
        "set it to at least the CPUs of your Ray cluster",
    )
    p.add_argument(
        "--max-added-overload",
        type=float,
        default=None,
        metavar="NODE_MINUTES",
        help="constraint: overload node-minutes a trial may add over no scale-down (default 0 unless "
        "--max-overload-ratio is given)",
    )
    p.add_argument(
        "--max-overload-ratio",
        type=float,
        default=None,
        metavar="FRACTION",
        help="constraint: a trial's overload node-minutes as a fraction of no scale-down's (0.5: half "
        "of doing nothing's overload; hot-node relief can take overload off)",
    )
    p.add_argument(
        "--halving",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="successive halving: rank trials over shorter windows first and replay only the best third "
        "over the next (default); --no-halving replays every trial over the whole window",
    )
    add_worker_flags(p, "trials replayed in parallel")
    p.add_argument(
        "--output", "-o", choices=("table", "json", "html"), default="table", help="the front as a table, "
        "frontier.json on stdout, or the HTML page (needs --out)"
    )  # fmt: skip
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write frontier.json, report.html and recommended.yaml into DIR (created if missing)",
    )
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress on stderr (the simulated controllers' log lines are never printed)",
    )


def _check(args: argparse.Namespace) -> None:
    from scaler.replay.command import check_workers

    if args.trials is not None and args.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {args.trials}")
    if args.generation_size < 1:
        raise UsageError(f"--generation-size must be at least 1, got {args.generation_size}")
    if args.max_added_overload is not None and not args.max_added_overload >= 0:
        raise UsageError(f"--max-added-overload must be >= 0 node-minutes, got {args.max_added_overload}")
    if args.max_overload_ratio is not None and not args.max_overload_ratio >= 0:
        raise UsageError(f"--max-overload-ratio must be >= 0, got {args.max_overload_ratio}")
    if args.output == "html" and not args.out:
        raise UsageError("--output html needs --out DIR")
    check_workers(args.workers, args.ray_address)


def _fixed_trials(path: str | None, space: Space) -> list[dict[str, Any]]:
    """The parameters of the trials of ``--trials-from`` (a ``frontier.json``), in number order;
    ``[]`` without it.

    Raises:
        scaler.cmdline.UsageError: unreadable, not a frontier, no trials, or a flag the space
            does not search.
    """
    from scaler.tune.space import SpaceError

    if path is None:
        return []
    where = f"--trials-from {path}"
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{where}: cannot read: {getattr(e, 'strerror', None) or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: invalid JSON: {e.msg} at line {e.lineno}") from None
    trials = doc.get("trials") if isinstance(doc, dict) and doc.get("kind") == "TuneFrontier" else None
    if not isinstance(trials, list) or not trials:
        raise UsageError(f"{where}: not a frontier.json with trials (kind: TuneFrontier)")
    try:
        ordered = sorted(trials, key=lambda t: int(t["number"]))
        return [space.fixed(dict(t["flags"]), f"{where}: trial {t['number']}") for t in ordered]
    except SpaceError as e:
        raise UsageError(str(e)) from None
    except (KeyError, TypeError, ValueError):
        raise UsageError(f"{where}: a trial without a number or flags") from None


def _constraints(args: argparse.Namespace, space: Space) -> Constraints:
    """The constraints: the flags, else the space file's ``constraints``; with neither, at most 0
    added overload node-minutes."""
    from scaler.tune.search import Constraints

    added = args.max_added_overload
    ratio = args.max_overload_ratio
    if added is None and ratio is None:
        added = space.constraints.get("max-added-overload")
        ratio = space.constraints.get("max-overload-ratio")
    if added is None and ratio is None:
        added = 0.0
    return Constraints(added, ratio)


def _load_space(args: argparse.Namespace) -> tuple[Space, dict[str, Any]]:
    """The search space of ``--space`` and the base configuration of ``--config``, with every
    bound or choice of the space checked over the configuration (rejected here, not at trial 20).

    Raises:
        scaler.cmdline.UsageError: a bad space, configuration, or value of the space over it.
    """
    from scaler.config import ConfigError, load_config_file
    from scaler.replay.policies import PolicyError, make_policy
    from scaler.tune.space import SpaceError, load_space

    try:
        space = load_space(args.space)
        base = load_config_file(args.config) if args.config else {}
        make_policy("config", {}, base)
        for param in space.params:
            values = param.choices if param.kind == "choice" else (param.low, param.high)
            for v in values:
                make_policy("space", {param.flag: v}, base)
    except (SpaceError, ConfigError) as e:
        raise UsageError(str(e)) from None
    except PolicyError as e:
        raise UsageError(
            f"--space with --config: {e}".replace("policy 'space': ", "").replace("policy 'config': ", "")
        ) from None
    return space, base


def _inputs_doc(loaded: LoadedInputs) -> dict[str, Any]:
    """The frontier document's ``inputs``: version, snapshot, trace and grid (Unix seconds)."""
    from scaler.history.export import scaler_version

    return {
        "scalerVersion": scaler_version(),
        "snapshot": loaded.snapshot_source,
        "trace": loaded.trace_path,
        "from": float(loaded.grid[0]),
        "to": float(loaded.grid[-1] + loaded.step),
        "stepSeconds": loaded.step,
        "steps": len(loaded.grid),
    }


def run(args: argparse.Namespace) -> int:
    """Execute ``scaler tune`` with parsed ``args``; returns the exit status.

    Raises:
        scaler.cmdline.UsageError: bad input (one line naming the bad value).
    """
    from rich.console import Console

    from scaler.fanout import Pool, RayUnavailable, workers_phrase
    from scaler.replay.command import input_spec, simulated_logs_silenced
    from scaler.replay.load import load_inputs
    from scaler.replay.policies import PolicyError
    from scaler.tune.frontier import defaults_of, frontier_dict, print_front, recommended_yaml
    from scaler.tune.space import default_space_text

    if args.print_space:
        sys.stdout.write(default_space_text())
        return 0
    started = time.perf_counter()
    _check(args)
    err = Console(stderr=True)
    interactive = not args.quiet and sys.stderr.isatty()

    def say(msg: str) -> None:
        if interactive:
            err.print(msg, highlight=False)

    spec = input_spec(args)
    space, base = _load_space(args)
    fixed = _fixed_trials(args.trials_from, space)
    args.trials = args.trials or len(fixed) or 32
    constraints = _constraints(args, space)
    loaded = load_inputs(spec, 0.0, say)
    inp = loaded.replay_input()
    workers = args.workers or os.cpu_count() or 1
    where = f"Ray at {args.ray_address}" if args.ray_address else workers_phrase(workers)
    say(f"tuning over {len(loaded.grid)} steps: {args.trials} trials on {where} …")
    settings = {
        "sampler": args.sampler,
        "seed": args.seed,
        "trials": args.trials,
        "generationSize": args.generation_size,
        "maxAddedOverloadNodeMinutes": constraints.max_added_overload,
        "maxOverloadRatio": constraints.max_overload_ratio,
        "trialsFrom": args.trials_from,
    }
    try:
        with simulated_logs_silenced(), Pool(inp, workers, args.ray_address) as pool:
            search = _search(args, inp, space, base, constraints, fixed, pool, err if interactive else None)
    except RayUnavailable as e:
        raise UsageError(str(e)) from None
    except PolicyError as e:
        raise UsageError(str(e)) from None
    wall = time.perf_counter() - started
    inputs = _inputs_doc(loaded)
    run_info = {
        "workers": None if args.ray_address else workers,
        "rayAddress": args.ray_address,
        "elapsedSeconds": round(wall, 1),
        "trialNodes": [t.node for t in search.trials],
    }
    doc = frontier_dict(search, space, inputs, settings, run_info)
    defaults = defaults_of(space, base)
    if args.out:
        _write_out(Path(args.out), doc, defaults, recommended_yaml(doc, base))
    if args.output == "json":
        sys.stdout.write(json.dumps(doc, indent=1) + "\n")
    else:
        print_front(doc, defaults, sys.stdout, wall, where)
        if args.out and not args.quiet:
            sys.stderr.write(
                f"scaler tune: wrote frontier.json, report.html and recommended.yaml to {args.out}\n"
            )
    return 0


def _write_out(out: Path, doc: dict[str, Any], defaults: dict[str, Any], recommended: str | None) -> None:
    """Write the three files into ``out`` (recommended.yaml only when a trial is recommended).

    Raises:
        scaler.cmdline.UsageError: the directory cannot be written, or plotly is missing.
    """
    from scaler.tune.html import render_html

    try:
        page = render_html(doc, defaults)
    except ImportError:
        raise UsageError("report.html needs plotly: pip install 'scaler[replay]'") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "frontier.json").write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        (out / "report.html").write_text(page, encoding="utf-8")
        rec = out / "recommended.yaml"
        if recommended is not None:
            rec.write_text(recommended, encoding="utf-8")
        elif rec.exists():
            rec.unlink()
    except OSError as e:
        raise UsageError(f"--out {out}: {e.strerror or e}") from None


def _search(
    args: argparse.Namespace,
    inp: Any,
    space: Any,
    base: dict[str, Any],
    constraints: Constraints,
    fixed: list[dict[str, Any]],
    pool: Any,
    console: Any,
) -> Any:
    """Run the search, with a progress bar over the trials' replays on ``console`` (a terminal)
    when given: replays done, replays running, the best saving so far within the constraints,
    time left."""
    from scaler.tune.search import run_search

    kwargs = {
        "trials": args.trials,
        "seed": args.seed,
        "sampler": args.sampler,
        "generation_size": args.generation_size,
        "constraints": constraints,
        "halving": args.halving,
        "fixed": fixed,
    }
    if console is None:
        return run_search(inp, space, base, pool, **kwargs)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("trials' replays"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TextColumn("{task.fields[running]} running"),
        TextColumn("{task.fields[best]}"),
        TimeRemainingColumn(),
        console=console,
    ) as bars:
        task = bars.add_task("trials", total=args.trials, running=0, best="")

        def on_trial(done: int, total: int, running: int, best: float | None) -> None:
            shown = "" if best is None else f"best {best:.1f}% saved"
            bars.update(task, completed=done, total=total, running=running, best=shown)

        return run_search(inp, space, base, pool, on_trial=on_trial, **kwargs)
