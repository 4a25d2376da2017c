"""Replay benchmark: ``python -m benchmarks.replay`` (``make bench`` runs it after the others).

What a user waits for in ``scaler replay``: steps per second of one policy over generated
clusters (:func:`benchmarks.generate.generate`, 100, 1,000 and 5,000 nodes by default), each
application pod following the Bitbrains "Rnd" July 2013 series of the VM its usage shape was
drawn from (``Cluster.pod_series``), at 5-minute steps; beside it, the time of one full
``evaluate()`` of the same starting cluster (so steps per second against evaluations per second
shows what reuse between steps buys), and the peak RSS of the replaying process. A week is
2,016 steps and a month 8,640: ``--steps`` measures fewer steps from the start of the trace
and the week and month figures are then extrapolated from the time per step (said so in the
table). Every measure runs in a process of its own (the generator runs in this one and writes
the snapshot to a temporary directory first); medians of ``--runs``.

``--baseline REV`` also replays the bundled example (94 nodes, ``scaler``, ``seed`` and
``scaler-relief``) with the code of ``REV`` (``git archive`` into a temporary directory) and
with this tree, alternately in the same run, and logs the time per step of both (kept in
``replay-bench.json``, not in ``benchmarks.md``, which shows the current code only).

Results go to ``docs/replay-bench.json``, the section "Replay" of ``docs/benchmarks.md`` (kept
when ``python -m benchmarks`` rewrites it) and ``docs/replay-bench.png``. Needs the raw trace
``../shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "raw" / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
START = 1372636800.0  # 2013-07-01T00:00:00Z
STEP = 300.0
WEEK, MONTH = 2016, 8640
DEFAULT_STEPS = {100: 2016, 1000: 288, 5000: 288}  # a week, then a whole day: never less than a day
BUNDLED_POLICIES = ("scaler", "seed", "scaler-relief")


# ---- workers (a process each; they import scaler from PYTHONPATH, never benchmarks) ------------


def _first_module(*names: str) -> Any:
    """The first of ``names`` that is a module of the ``scaler`` package this process imported
    (the code under test, or an older revision's layout). A module found elsewhere (an editable
    install of another tree answers for names the package lacks) does not count.

    Raises:
        ModuleNotFoundError: none of them is in the package.
    """
    import importlib
    import importlib.util

    import scaler

    home = Path(scaler.__file__).resolve().parent
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and Path(spec.origin).resolve().is_relative_to(home):
            return importlib.import_module(name)
    raise ModuleNotFoundError(f"none of {', '.join(names)} in {home}")


def _input(snapshot_dir: str | None, series_file: str | None, steps: int) -> Any:
    from scaler.replay.bundled import known_map
    from scaler.replay.inputs import build_grid, map_pods, usage_table
    from scaler.replay.simulate import ReplayInput
    from scaler.replay.traces import load_trace
    from scaler.sources.files import load_snapshot

    # The baseline revision keeps prices under scaler/replay/ and the bundled example in scaler/usage.
    load_prices = _first_module("scaler.prices", "scaler.replay.prices").load_prices
    bundled_example = _first_module("scaler.cmdline", "scaler.usage").bundled_example
    path = Path(snapshot_dir) if snapshot_dir else Path(str(bundled_example()))
    snap = load_snapshot([str(path)], None)
    if series_file:
        wanted: dict[str, str] = json.loads(Path(series_file).read_text(encoding="utf-8"))
    else:
        wanted = known_map(path.name)
    trace = load_trace(str(TRACE), wanted=set(wanted.values()))
    pod_series = (
        {k: v for k, v in wanted.items() if v in trace.series}
        if series_file
        else map_pods(snap, trace, {}, path.name)
    )
    used = set(pod_series.values())
    grid = build_grid(trace, used, START, START + steps * STEP, STEP)
    return ReplayInput(
        snap, usage_table(trace, used, grid), pod_series, STEP, 120.0, load_prices(None), 3600.0, 0
    )


def _full_evaluation_seconds(inp: Any, runs: int) -> float:
    from scaler.config import ScalerConfig
    from scaler.engine import evaluate
    from scaler.replay.world import World

    cfg = ScalerConfig()
    world = World(inp.snapshot, inp.usage, inp.pod_series, cfg, with_pod_metrics=True)
    snap = world.snapshot()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        evaluate(snap, cfg)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


PHASES = (
    ("reading the world (the controller's view, the actuator's fresh views)", "replay/simulate.py", "source"),
    ("evaluation (engine.evaluate)", "scaler/engine.py", "evaluate"),
    ("re-check of each removal on a fresh view", "actuation/recheck.py", "recheck"),
    ("placing pending pods (the world's scheduler)", "replay/world_scheduler.py", "schedule_pending"),
    ("usage history", "scaler/usage_history.py", "record_pod_usage"),
    ("usage history", "scaler/usage_history.py", "record_usage"),
    ("usage history", "scaler/usage_history.py", "with_aggregated_usage"),
)
"""Where a step's time goes: (phase, file suffix, function); the functions do not call each
other, so their cumulative times add up; the rest (planning, drains, evictions, status) is
"everything else"."""


def _profiled(inp: Any, policy: Any) -> tuple[Any, dict[str, float]]:
    """``run_policy`` under cProfile: its result and the seconds of each phase of :data:`PHASES`
    (and ``total``, and ``everything else``)."""
    import cProfile
    import pstats

    from scaler.replay.simulate import run_policy

    prof = cProfile.Profile()
    t = time.perf_counter()
    r = prof.runcall(run_policy, inp, policy)
    total = time.perf_counter() - t
    stats: dict[Any, Any] = getattr(pstats.Stats(prof), "stats")  # noqa: B009 (untyped attribute)
    phases: dict[str, float] = {}
    for label, suffix, name in PHASES:
        cum = sum(v[3] for (f, _, fn), v in stats.items() if fn == name and f.endswith(suffix))
        phases[label] = phases.get(label, 0.0) + cum
    phases["everything else (planning, drains, evictions, status)"] = total - sum(phases.values())
    phases["total"] = total
    return r, phases


def _work(args: argparse.Namespace) -> dict[str, Any]:
    from scaler.replay.policies import parse_policies
    from scaler.replay.simulate import run_policy

    inp = _input(args.snapshot, args.series, args.steps)
    out: dict[str, Any] = {
        "steps": len(inp.usage.times),
        "nodes": len(inp.snapshot.nodes),
        "pods": len(inp.snapshot.pods),
    }
    out["pods_following"] = len(inp.pod_series)
    if args.evaluate:
        out["evaluate_seconds"] = _full_evaluation_seconds(inp, 3)
    per_policy = {}
    for name in args.policies.split(","):
        policy = parse_policies([name], {})[0]
        if args.profile:
            r, phases = _profiled(inp, policy)
            per_policy[name] = {"profile": phases, "removed": r.nodes_removed, "evicted": r.pods_evicted}
            continue
        t = time.perf_counter()
        r = run_policy(inp, policy)
        per_policy[name] = {
            "seconds": time.perf_counter() - t,
            "removed": r.nodes_removed,
            "evicted": r.pods_evicted,
        }
    out["policies"] = per_policy
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


# ---- the driver --------------------------------------------------------------------------------


def _log(msg: str) -> None:
    print(f"[replay-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _run(args: list[str], pythonpath: Path | None = None) -> dict[str, Any]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", *args]
    proc = subprocess.run(cmd, cwd=pythonpath or ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"replay-bench worker failed ({' '.join(args)}):\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _median_run(args: list[str], runs: int, pythonpath: Path | None = None) -> dict[str, Any]:
    results = [_run(args, pythonpath) for _ in range(runs)]
    best = dict(results[0])
    best["policies"] = {
        name: {
            **results[0]["policies"][name],
            "seconds": statistics.median(r["policies"][name]["seconds"] for r in results),
        }
        for name in results[0]["policies"]
    }
    best["peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in results)
    if "evaluate_seconds" in best:
        best["evaluate_seconds"] = statistics.median(r["evaluate_seconds"] for r in results)
    return best


def measure_sizes(
    sizes: list[int],
    steps: dict[int, int],
    policy: str,
    runs: int,
    profile: frozenset[int] | set[int] = frozenset(),
) -> list[dict[str, Any]]:
    """One replay of ``policy`` per generated size (medians of ``runs``); for the sizes in
    ``profile``, one more replay under cProfile, split into :data:`PHASES`."""
    from benchmarks.generate import generate

    rows = []
    for n in sizes:
        with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
            _log(f"{n} nodes: generating …")
            cluster = generate(n)
            cluster.write(Path(tmp) / "snap")
            series = Path(tmp) / "series.json"
            series.write_text(json.dumps(cluster.pod_series()), encoding="utf-8")
            del cluster
            k = steps.get(n, 48)
            _log(f"{n} nodes: {k} steps of {policy} × {runs} …")
            r = _median_run(
                [
                    "--snapshot",
                    f"{tmp}/snap",
                    "--series",
                    str(series),
                    "--steps",
                    str(k),
                    "--policies",
                    policy,
                    "--evaluate",
                ],
                runs,
            )
            if n in profile:
                _log(f"{n} nodes: {k} steps of {policy} under cProfile …")
                args = ["--snapshot", f"{tmp}/snap", "--series", str(series), "--steps", str(k)]
                p = _run([*args, "--policies", policy, "--profile"])
                r["profile"] = p["policies"][policy]["profile"]
        per_step = r["policies"][policy]["seconds"] / r["steps"]
        rows.append({**r, "policy": policy, "seconds_per_step": per_step})
        _log(
            f"{n} nodes: {per_step * 1000:.1f} ms/step, full evaluation {r['evaluate_seconds'] * 1000:.0f} ms"
        )
    return rows


def measure_baseline(rev: str, steps: int, runs: int) -> dict[str, Any]:
    """The bundled example with ``rev``'s code and this tree's, alternately, ``runs`` times."""
    with tempfile.TemporaryDirectory(prefix="replay-base-") as tmp:
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        args = ["--steps", str(steps), "--policies", ",".join(BUNDLED_POLICIES)]
        base, this = [], []
        for i in range(runs):
            _log(f"bundled example, {steps} steps, run {i + 1}/{runs}: {rev} …")
            base.append(_run(args, Path(tmp)))
            _log(f"bundled example, {steps} steps, run {i + 1}/{runs}: this tree …")
            this.append(_run(args))
    out: dict[str, Any] = {"rev": rev, "steps": steps, "policies": {}}
    for name in BUNDLED_POLICIES:
        b = statistics.median(r["policies"][name]["seconds"] for r in base) / steps
        t = statistics.median(r["policies"][name]["seconds"] for r in this) / steps
        out["policies"][name] = {"base_seconds_per_step": b, "seconds_per_step": t, "speedup": b / t}
        _log(f"{name}: {rev} {b * 1000:.1f} ms/step, this tree {t * 1000:.1f} ms/step ({b / t:.1f}×)")
    return out


def markdown(saved: dict[str, Any]) -> str:
    """The "Replay" section of ``docs/benchmarks.md`` from ``replay-bench.json``."""
    lines = [
        "## Replay",
        "",
        "`scaler replay` of one policy over generated clusters whose application pods follow the Bitbrains",
        '"Rnd" series of the VM their usage shape was drawn from, 5-minute steps from 2013-07-01'
        f" (`python -m benchmarks.replay`; {saved['machine']}). Week (2,016 steps) and month (8,640",
        "steps) are extrapolated from the time per step of the steps measured (by default a week at 100 nodes",
        "and a whole day, 288 steps, at 1,000 and 5,000: the first steps also pay, once, for building the",
        "world and the controller and for the first evaluation without anything kept). A full evaluation is one",
        "`evaluate()` of the starting cluster, as a live loop would run it. The first steps of a generated",
        "cluster are its busiest: a third of its nodes are underused, and each removal re-checks the node on a",
        "fresh view of the world and re-places its pods, so a measurement of the first steps overstates the time",
        "per step of a whole week or month. Between removals a step re-checks only what changed",
        "(`scaler.simulator.cache`).",
        "",
        "| nodes | pods | steps measured | time per step | steps/s | full evaluation | step / evaluation | week | month | peak RSS |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in saved["sizes"]:
        s = r["seconds_per_step"]
        lines.append(
            f"| {r['nodes']:,} | {r['pods']:,} | {r['steps']:,} | {s * 1000:,.1f} ms | {1 / s:,.2f} | "
            f"{r['evaluate_seconds'] * 1000:,.0f} ms | {s / r['evaluate_seconds']:.2f} | {s * WEEK / 60:,.1f} min | "
            f"{s * MONTH / 60:,.1f} min | {r['peak_rss_bytes'] / 2**30:.2f} GiB |"
        )
    lines += ["", "![replay time per step and full evaluation against cluster size](replay-bench.png)", ""]
    return "\n".join(lines + _profile_lines(saved))


def _profile_lines(saved: dict[str, Any]) -> list[str]:
    """The "where a step's time goes" table: each profiled size's phases, % of the profiled run."""
    rows = [r for r in saved["sizes"] if "profile" in r]
    if not rows:
        return []
    labels = [k for k in rows[0]["profile"] if k != "total"]
    lines = [
        "**Where a step's time goes.** One more replay of the same steps under cProfile (which slows",
        "it down; the shares are what counts): the share of each phase, and its time per step.",
        "",
        "| phase | " + " | ".join(f"{r['nodes']:,} nodes" for r in rows) + " |",
        "|---|" + "---|" * len(rows),
    ]
    for label in labels:
        cells = []
        for r in rows:
            p, steps = r["profile"], r["steps"]
            cells.append(f"{100 * p[label] / p['total']:.0f}% ({p[label] / steps * 1000:,.0f} ms)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, "", *WHAT_BOUNDS, ""]


WHAT_BOUNDS = (
    "What bounds a step on a large cluster: every loop simulates again the removal of every node",
    "it may remove (as cluster-autoscaler does: a node stays unneeded only while a simulation on the",
    "loop's state says so, and real usage moves every step), placing every pod of the node through the",
    "scheduler filters and TargetUsage. Before its drain each removal is checked once more on a fresh",
    "view, first by checking the planned destinations alone (a full simulation only when the plan no",
    "longer holds). What the replay keeps from step to step is what real usage cannot change, keyed by",
    "the revision numbers of what changed: failed checks decided by the pods, the PDBs and the",
    "cluster's shape alone, each node's drain-rule answers and pod facts, the index of the pods by",
    "label, and each node's row of the simulation state (its pods, their requests and anti-affinity",
    "terms), which a check takes over from the previous one when the node's pods did not change. A",
    "measure of a few steps also counts, once, the cycle collector's pass over the whole heap when",
    "the replay ends (it runs once a simulated day during a replay).",
)
"""The paragraph under the profile table (static: it explains the table's large phases)."""


def _plot(saved: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = saved["sizes"]
    nodes = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(nodes, [r["seconds_per_step"] * 1000 for r in rows], "o-", label="replay step")
    ax.plot(nodes, [r["evaluate_seconds"] * 1000 for r in rows], "s--", label="one full evaluation")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("ms")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _machine() -> str:
    import platform

    return f"{os.cpu_count()} CPU(s), Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.replay``."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000", help="node counts, comma-separated (0: none)")
    ap.add_argument(
        "--steps", help="steps measured per size, e.g. 100=2016,1000=288,5000=288 or one number for all"
    )
    ap.add_argument("--policy", default="scaler", help="the policy replayed over the generated clusters")
    ap.add_argument("--runs", type=int, default=3, help="runs per measure (median reported)")
    ap.add_argument(
        "--baseline", default="3c01bc1", help="revision to compare with on the bundled example ('' to skip)"
    )
    ap.add_argument(
        "--baseline-steps", type=int, default=288, help="steps of the bundled example (2016: a week)"
    )
    ap.add_argument("--baseline-runs", type=int, help="runs of the bundled comparison (default: --runs)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--snapshot", help=argparse.SUPPRESS)
    ap.add_argument("--series", help=argparse.SUPPRESS)
    ap.add_argument("--policies", default="scaler", help=argparse.SUPPRESS)
    ap.add_argument("--evaluate", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--profile-sizes",
        default="100,1000,5000",
        help="sizes also replayed under cProfile, for the table of where a step's time goes ('' for none)",
    )
    a = ap.parse_args(argv)
    if a.worker:
        a.steps = int(a.steps)
        print(json.dumps(_work(a)))
        return 0
    if not TRACE.exists():
        print(f"replay-bench: the trace {TRACE} is missing; nothing measured", file=sys.stderr)
        return 2
    sizes = [int(s) for s in a.sizes.split(",") if s.strip() and int(s) > 0]
    steps = dict(DEFAULT_STEPS)
    if a.steps:
        if "=" in a.steps:
            steps |= {int(k): int(v) for k, v in (p.split("=") for p in a.steps.split(","))}
        else:
            steps = {n: int(a.steps) for n in sizes}
    a.out.mkdir(parents=True, exist_ok=True)
    saved_path = a.out / "replay-bench.json"
    saved: dict[str, Any] = {
        "machine": _machine(),
        "sizes": measure_sizes(
            sizes, steps, a.policy, a.runs, {int(x) for x in a.profile_sizes.split(",") if x.strip()}
        )
        if sizes
        else [],
    }
    if a.baseline:
        saved["baseline"] = measure_baseline(a.baseline, a.baseline_steps, a.baseline_runs or a.runs)
    saved_path.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
    if saved["sizes"]:
        _plot(saved, a.out / "replay-bench.png")
    md = a.out / "benchmarks.md"
    text = md.read_text(encoding="utf-8") if md.exists() else "# Benchmarks\n"
    md.write_text(with_replay(text, a.out), encoding="utf-8")
    _log(f"wrote {saved_path} and {md}")
    return 0


def with_replay(text: str, out: Path) -> str:
    """``text`` (``benchmarks.md``) with its "Replay" section from ``replay-bench.json``
    (replaced when present, else appended); unchanged without the file."""
    saved = out / "replay-bench.json"
    if not saved.exists():
        return text
    head, sep, tail = text.partition("\n## Replay\n")
    rest = ""
    if sep:
        nxt = tail.find("\n## ")
        rest = tail[nxt:] if nxt >= 0 else ""
    return head.rstrip("\n") + "\n\n" + markdown(json.loads(saved.read_text(encoding="utf-8"))) + rest


if __name__ == "__main__":
    raise SystemExit(main())
