"""``python -m benchmarks.tune``: how fast ``scaler tune`` searches, with 1 and with 2 workers.

Two configurations, each run with ``--workers 1`` and ``--workers 2`` (an embedded Ray with
two CPUs), the whole command timed as the user waits for it (start, trace loading, Ray's
start, every replay, the output), in fresh processes:

* ``example``: the bundled ``bitbrains-gke-night-lowreq`` snapshot with the Bitbrains trace
  over one week (``--from 2013-07-08 --to 2013-07-15``), 32 trials;
* ``1k-nodes``: a 1,000-node cluster of :mod:`benchmarks.generate` over one day of the same
  trace (its first 2,000 pods follow Bitbrains VMs 1-500 through ``--trace-map``; the others
  keep their PodMetrics usage), 32 trials.

Reported per run: wall seconds, trials per minute, and for 2 workers the speed-up over 1 and
the efficiency (speed-up / 2). The target is a speed-up of at least 1.8. The two runs of a
configuration must give the same frontier (checked). ``--trials``, ``--days`` and
``--configs`` make smaller runs; results go to ``docs/tune-bench.json`` and
``docs/tune-bench.md``. Needs ``../shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz``.
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
    snapshot: Path, days: float, trials: int, workers: int, out: Path, trace_map: Path | None = None
) -> dict[str, Any]:
    end = START + dt.timedelta(days=days)
    extra = ["--trace-map", str(trace_map)] if trace_map is not None else []
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


def _markdown(results: list[dict[str, Any]], note: str) -> str:
    lines = [
        "# `scaler tune` benchmark",
        "",
        "Whole `scaler tune` commands (start, trace loading, Ray's start, every replay, output), seed 1,",
        "1 worker (in the process) and 2 workers (an embedded Ray with 2 CPUs). Target: 2 workers give",
        "at least 1.8x the trials per minute of 1.",
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
    if note:
        lines += ["", note]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tune", description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--days", type=float, default=7.0, help="days of the example configuration (default 7)")
    ap.add_argument(
        "--days-1k", type=float, default=1.0, help="days of the 1,000-node configuration (default 1)"
    )
    ap.add_argument("--configs", default="example,1k-nodes", help="comma-separated: example, 1k-nodes")
    ap.add_argument("--out", type=Path, default=ROOT / "docs")
    ap.add_argument("--note", default="", help="a line for the report (what else ran on the machine)")
    args = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"benchmarks.tune: skipped: {TRACE} is absent (needs ../shared)")
        return 0
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in args.configs.split(","):
            if name == "example":
                results.append(_config(name, EXAMPLE, args.days, args.trials, tmp))
            elif name == "1k-nodes":
                from benchmarks.generate import generate

                snap = tmp / "snapshot-1k"
                generate(1000).write(snap)
                tmap = _trace_map(snap, tmp / "trace-map.csv")
                results.append(_config(name, snap, args.days_1k, args.trials, tmp, tmap))
            else:
                raise SystemExit(f"--configs: unknown configuration {name!r}")
    machine = f"{os.cpu_count()} CPUs"
    doc = {"machine": machine, "note": args.note, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tune-bench.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "tune-bench.md").write_text(_markdown(results, args.note))
    print(_markdown(results, args.note))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
