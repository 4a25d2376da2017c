"""``python -m benchmarks.tune``: how fast ``scaler tune`` searches: with 1 and with 2 workers,
and by successive halving against the same trials replayed over the whole window.

**Successive halving** (``--configs halving``, the default): 32 trials over a week of a
generated cluster (``--halving-nodes``, default 1,000; 0: the bundled night-lowreq example)
with ``--workers 2``, timed as the user waits for it (target: at most 2 hours for 1,000 nodes
on 2 cores); then ``scaler tune --no-halving --trials-from`` its ``frontier.json``: the same
trials, each replayed over the whole week. Reported: the wall time of both, the rungs, and
whether both end on the same recommended trial, or on one whose saving is within 0.5 points
(of the baseline's node-hours) of the other's, both measured over the whole window.

**Workers** (``--configs example,1k-nodes``): each run with ``--workers 1`` and ``--workers 2``
(an embedded Ray with two CPUs), the whole command timed as the user waits for it (start, trace
loading, Ray's start, every replay, the output), in fresh processes, without halving:

* ``example``: the bundled ``bitbrains-gke-night-lowreq`` snapshot with the Bitbrains trace
  over one week (``--from 2013-07-08 --to 2013-07-15``), 32 trials;
* ``1k-nodes``: a 1,000-node cluster of :mod:`benchmarks.generate` over one day of the same
  trace (its first 2,000 pods follow Bitbrains VMs 1-500 through ``--trace-map``; the others
  keep their PodMetrics usage), 32 trials.

Reported per run: wall seconds, trials per minute, and for 2 workers the speed-up over 1 and
the efficiency (speed-up / 2). The target is a speed-up of at least 1.8. The two runs of a
configuration must give the same frontier (checked).

``--halving-from DIR`` takes the halving search from an earlier run's output (its
``frontier.json``, whose ``run.elapsedSeconds`` is reported as the halving wall time) and runs
only the whole-window half: the two halves of a 1,000-node week take about 1 and 2 hours.

``--trials``, ``--days``, ``--halving-days``, ``--halving-nodes`` and ``--configs`` make smaller
runs; results go to ``docs/tune-bench.json`` and ``docs/tune-bench.md`` (a configuration not
run keeps its earlier results). Needs ``../shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "data" / "raw" / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
EXAMPLE = ROOT / "scaler" / "examples" / "bitbrains-gke-night-lowreq"
START = dt.datetime(2013, 7, 8, tzinfo=dt.UTC)


def _trace_map(snapshot: Path, out: Path, series: int = 500) -> Path:
    """``--trace-map`` for a generated cluster: its first pods (file order) follow Bitbrains VMs
    1..``series`` in turn, so that their usage changes over the replay."""
    pods = json.loads((snapshot / "pods.json").read_text())["items"]
    rows = ["namespace,pod,series"]
    for i, p in enumerate(pods[: series * 4]):
        rows.append(f"{p['metadata']['namespace']},{p['metadata']['name']},{i % series + 1}")
    out.write_text("\n".join(rows) + "\n")
    return out


def _tune(
    snapshot: Path,
    days: float,
    trials: int,
    workers: int,
    out: Path,
    trace_map: Path | None = None,
    flags: tuple[str, ...] = ("--no-halving",),
) -> dict[str, Any]:
    end = START + dt.timedelta(days=days)
    extra = ["--trace-map", str(trace_map)] if trace_map is not None else []
    extra += flags
    cmd = [
        sys.executable, "-m", "scaler.cli", "tune", "--snapshot", str(snapshot), "--trace", str(TRACE), *extra,
        "--from", START.isoformat(), "--to", end.isoformat(), "--trials", str(trials), "--seed", "1",
        "--workers", str(workers), "--out", str(out), "-q",
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"scaler tune failed ({proc.returncode}): {proc.stderr.strip()}")
    doc = json.loads((out / "frontier.json").read_text())
    return {
        "workers": workers,
        "wallSeconds": round(wall, 1),
        "trialsPerMinute": round(trials / wall * 60.0, 2),
        "frontier": {k: v for k, v in doc.items() if k != "run"},
    }


def agreement(halved: dict[str, Any], whole: dict[str, Any]) -> dict[str, Any]:
    """Whether a search by successive halving (``halved``, a ``frontier.json``) and the same
    trials replayed over the whole window (``whole``) end on the same recommendation: the same
    trial, or trials whose savings over the whole window differ by at most 0.5 points."""
    a, b = halved["recommended"], whole["recommended"]
    saved = {t["number"]: t["savedPercent"] for t in whole["trials"]}
    gap = None if a is None or b is None else round(saved[b] - saved[a], 2)
    same = a == b or (gap is not None and gap <= 0.5)
    return {"recommendedWithHalving": a, "recommendedWithout": b, "gapPoints": gap, "agree": same}


def _halved_from(out: Path) -> dict[str, Any]:
    """The result of an earlier halving search written to ``out`` (see ``--halving-from``)."""
    doc = json.loads((out / "frontier.json").read_text())
    return {
        "wallSeconds": doc["run"]["elapsedSeconds"],
        "frontier": {k: v for k, v in doc.items() if k != "run"},
    }


def _halving(
    name: str,
    snapshot: Path,
    days: float,
    trials: int,
    tmp: Path,
    trace_map: Path | None,
    halved_out: Path | None = None,
) -> dict[str, Any]:
    """The halving search with 2 workers (or the one written to ``halved_out``), then its trials
    without halving (see the module doc)."""
    if halved_out is None:
        print(
            f"benchmarks.tune: {name}: {trials} trials over {days:g} days by successive halving …", flush=True
        )
        halved_out = tmp / f"{name}-halving"
        halved = _tune(snapshot, days, trials, 2, halved_out, trace_map, ())
    else:
        halved = _halved_from(halved_out)
    print(f"benchmarks.tune: {name}: the same trials over the whole window …", flush=True)
    again = ("--no-halving", "--trials-from", str(halved_out / "frontier.json"))
    whole = _tune(snapshot, days, trials, 2, tmp / f"{name}-whole", trace_map, again)
    rungs = halved["frontier"]["search"]["halving"]
    return {
        "name": name,
        "snapshot": str(snapshot.relative_to(ROOT)) if snapshot.is_relative_to(ROOT) else snapshot.name,
        "days": days,
        "trials": trials,
        "halvingWallSeconds": halved["wallSeconds"],
        "wholeWallSeconds": whole["wallSeconds"],
        "rungs": None
        if rungs is None
        else [{"steps": r["steps"], "trials": r["trials"]} for r in rungs["rungs"]],
        **agreement(halved["frontier"], whole["frontier"]),
    }


def _config(
    name: str, snapshot: Path, days: float, trials: int, tmp: Path, trace_map: Path | None = None
) -> dict[str, Any]:
    runs = []
    for workers in (1, 2):
        print(
            f"benchmarks.tune: {name}: {trials} trials over {days:g} day(s), {workers} worker(s) …",
            flush=True,
        )
        runs.append(_tune(snapshot, days, trials, workers, tmp / f"{name}-{workers}", trace_map))
    one, two = runs
    speedup = two["trialsPerMinute"] / one["trialsPerMinute"]
    same = one.pop("frontier") == two.pop("frontier")
    return {
        "name": name,
        "snapshot": str(snapshot.relative_to(ROOT)) if snapshot.is_relative_to(ROOT) else snapshot.name,
        "days": days,
        "trials": trials,
        "runs": runs,
        "speedup": round(speedup, 2),
        "efficiency": round(speedup / 2.0, 2),
        "sameFrontier": same,
    }


def _markdown(results: list[dict[str, Any]], halving: list[dict[str, Any]], notes: dict[str, str]) -> str:
    lines = [
        "# `scaler tune` benchmark",
        "",
        "## Successive halving",
        "",
        "`scaler tune` by successive halving with 2 workers (seed 1), timed as the user waits for it, then",
        "the same trials each replayed over the whole window (`--no-halving --trials-from`). Target: 32",
        "trials over a week of a 1,000-node cluster within 2 hours on 2 cores, and both ending on the same",
        "recommended trial, or on one within 0.5 points of saved node-hours.",
        "",
        "| configuration | trials | days | rungs (steps: trials) | wall s | wall s without halving | recommended | without | gap (points) | agree |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for h in halving:
        rungs = ", ".join(f"{r['steps']}: {r['trials']}" for r in h["rungs"] or [])
        lines.append(
            f"| {h['name']} | {h['trials']} | {h['days']:g} | {rungs or 'none'} | {h['halvingWallSeconds']:,.1f} | "
            f"{h['wholeWallSeconds']:,.1f} | {h['recommendedWithHalving']} | {h['recommendedWithout']} | "
            f"{'' if h['gapPoints'] is None else h['gapPoints']} | {'yes' if h['agree'] else 'NO'} |"
        )
    if notes.get("halving"):
        lines += ["", notes["halving"]]
    lines += [
        "",
        "## Workers",
        "",
        "Whole `scaler tune --no-halving` commands (start, trace loading, Ray's start, every replay, output),",
        "seed 1, 1 worker (in the process) and 2 workers (an embedded Ray with 2 CPUs). Target: 2 workers",
        "give at least 1.8x the trials per minute of 1.",
        "",
        "| configuration | trials | days | workers | wall s | trials/min | speed-up | efficiency | same frontier |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        for run in r["runs"]:
            two = run["workers"] == 2
            lines.append(
                f"| {r['name']} | {r['trials']} | {r['days']:g} | {run['workers']} | {run['wallSeconds']:,.1f} | "
                f"{run['trialsPerMinute']:.2f} | {r['speedup'] if two else ''} | {r['efficiency'] if two else ''} | "
                f"{'yes' if r['sameFrontier'] else 'NO'} |"
            )
    if notes.get("workers"):
        lines += ["", notes["workers"]]
    return "\n".join(lines) + "\n"


def _generated(nodes: int, tmp: Path) -> tuple[Path, Path]:
    """A generated cluster of ``nodes`` nodes and its trace map (see :func:`_trace_map`)."""
    from benchmarks.generate import generate

    snap = tmp / f"snapshot-{nodes}"
    if not snap.exists():
        generate(nodes).write(snap)
    return snap, _trace_map(snap, tmp / f"trace-map-{nodes}.csv")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune", description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--days", type=float, default=7.0, help="days of the example configuration (default 7)")
    ap.add_argument(
        "--days-1k", type=float, default=1.0, help="days of the 1,000-node configuration (default 1)"
    )
    ap.add_argument(
        "--halving-days", type=float, default=7.0, help="days of the halving configuration (default 7)"
    )
    ap.add_argument(
        "--halving-nodes",
        type=int,
        default=1000,
        help="nodes of the halving configuration's generated cluster (default 1000; 0: the bundled example)",
    )
    ap.add_argument(
        "--configs", default="halving", help="comma-separated: halving, example, 1k-nodes (default halving)"
    )
    ap.add_argument(
        "--halving-from",
        type=Path,
        default=None,
        help="an earlier halving search's output directory: run only the whole-window half",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    ap.add_argument("--note", default="", help="a line for the report (what else ran on the machine)")
    args = ap.parse_args(argv)
    if args.halving_from is not None:
        try:
            _halved_from(args.halving_from)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            why = f"{type(e).__name__}: {e}" if not isinstance(e, OSError) else e.strerror
            print(
                f"benchmarks.tune: --halving-from {args.halving_from}: not the output of a scaler tune ({why})",
                file=sys.stderr,
            )
            return 2
    if not TRACE.exists():
        print(f"benchmarks.tune: skipped: {TRACE} is absent (needs ../shared)")
        return 0
    saved_path = args.out / "tune-bench.json"
    saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
    results = {r["name"]: r for r in saved.get("results", [])}
    halving = {r["name"]: r for r in saved.get("halving", [])}
    notes = saved.get("notes") or {"workers": saved.get("note", "")}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in args.configs.split(","):
            if name == "halving":
                if args.halving_nodes:
                    snap, tmap = _generated(args.halving_nodes, tmp)
                    label = f"halving-{args.halving_nodes}-nodes"
                    halving[label] = _halving(
                        label, snap, args.halving_days, args.trials, tmp, tmap, args.halving_from
                    )
                else:
                    halving["halving-example"] = _halving(
                        "halving-example",
                        EXAMPLE,
                        args.halving_days,
                        args.trials,
                        tmp,
                        None,
                        args.halving_from,
                    )
                notes["halving"] = args.note or notes.get("halving", "")
            elif name == "example":
                results[name] = _config(name, EXAMPLE, args.days, args.trials, tmp)
                notes["workers"] = args.note or notes.get("workers", "")
            elif name == "1k-nodes":
                snap, tmap = _generated(1000, tmp)
                results[name] = _config(name, snap, args.days_1k, args.trials, tmp, tmap)
                notes["workers"] = args.note or notes.get("workers", "")
            else:
                raise SystemExit(f"--configs: unknown configuration {name!r}")
    machine = f"{os.cpu_count()} CPUs"
    doc = {
        "machine": machine,
        "notes": notes,
        "halving": list(halving.values()),
        "results": list(results.values()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    saved_path.write_text(json.dumps(doc, indent=1) + "\n")
    text = _markdown(list(results.values()), list(halving.values()), notes)
    (args.out / "tune-bench.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
