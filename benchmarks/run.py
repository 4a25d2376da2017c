"""``python -m benchmarks``: time and memory of one full evaluation at 1k, 5k and 15k nodes.

For each size, two fresh subprocesses (so that each peak RSS is that size's alone):

* **evaluate**: generate the cluster in memory (:mod:`benchmarks.generate`), build the
  :class:`~scaler.model.snapshot.ClusterSnapshot`, then run :func:`scaler.engine.evaluate`
  ``--runs`` times with the default configuration (TargetUsage on, no time budget, no candidate
  limit) and check that every candidate got a verdict from the candidate loop. Reports the median
  and the spread, the snapshot's resident size and the process's peak RSS (``ru_maxrss``).
* **parse**: write the snapshot files (kubectl ``List`` JSON, one item per line) to a temporary
  directory, then time :func:`scaler.sources.files.load_snapshot` on them ``--runs`` times:
  median seconds, total size, MB/s, peak RSS.

The results go to ``docs/benchmarks.md`` (a table per size, the machine, a profile of the
largest evaluation), ``docs/benchmarks.json`` and the plot ``docs/benchmarks.png``.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SIZES = (1000, 5000, 15000)
TARGETS = {  # nodes -> (evaluation seconds, peak RSS GiB); parsing ≥ 100 MB/s at 5k
    5000: (2.0, 1.5),
    15000: (8.0, 4.0),
}
PARSE_TARGET_MBS = 100.0
GiB = 2**30

# Verdicts that only the candidate loop gives (the node was a candidate and was looked at).
_LOOP_REASONS = {
    "NoReason",
    "DestinationForMovedPods",
    "NodeGroupMinSizeReached",
    "BlockedByPod",
    "NoPlaceToMovePods",
    "BlockedByOnCompletionPod",
}


def _rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ---- workers (run in a subprocess each) --------------------------------------------------


def _work_evaluate(nodes: int, runs: int, profile: bool) -> dict[str, Any]:
    from benchmarks.generate import generate
    from scaler.config import ScalerConfig
    from scaler.eligibility import check_eligibility, node_group_limits
    from scaler.engine import counted_pods, evaluate
    from scaler.utilization import node_utilization

    rss0 = _rss_bytes()
    t0 = time.perf_counter()
    cluster = generate(nodes)
    stats = cluster.stats()
    snapshot = cluster.snapshot()
    build_s = time.perf_counter() - t0
    del cluster
    gc.collect()
    rss_snapshot = _rss_bytes() - rss0
    config = ScalerConfig()

    # Candidates, as the engine finds them, to check that each one got a verdict.
    from collections import Counter

    pods_by_node = counted_pods(snapshot, config)
    sizes = Counter(n.node_group for n in snapshot.nodes if n.node_group)
    limits = node_group_limits(config, snapshot.nodes)
    candidates = {
        n.name
        for n in snapshot.nodes
        if check_eligibility(
            n,
            node_utilization(n, pods_by_node[n.name], snapshot, config),
            snapshot.now,
            config,
            sizes,
            (),
            limits,
        )
        is None
    }

    times = []
    result: Any = None
    for _ in range(runs):
        gc.collect()
        t = time.perf_counter()
        result = evaluate(snapshot, config)
        times.append(time.perf_counter() - t)
    assert result is not None
    assert len(result.nodes) == len(snapshot.nodes)
    looked_at = {r.node.name for r in result.nodes if r.reason.value in _LOOP_REASONS}
    missing = candidates - looked_at
    assert not missing, f"candidates without a verdict: {sorted(missing)[:5]}"
    reasons = Counter(r.reason.value for r in result.nodes)
    simulated = sum(
        1
        for r in result.nodes
        if r.node.name in candidates
        and r.reason.value in ("NoReason", "NoPlaceToMovePods", "BlockedByOnCompletionPod")
    )
    out: dict[str, Any] = {
        "nodes": len(snapshot.nodes),
        "pods": len(snapshot.pods),
        "pdbs": len(snapshot.pdbs),
        "generated": stats,
        "build_seconds": build_s,
        "evaluate_seconds": times,
        "evaluate_median": statistics.median(times),
        "candidates": len(candidates),
        "simulated": simulated,
        "removable": sum(1 for r in result.nodes if r.removable),
        "pods_to_move": sum(len(r.moves) for r in result.nodes),
        "reasons": dict(reasons.most_common()),
        "snapshot_rss_bytes": rss_snapshot,
        "peak_rss_bytes": _peak_rss_bytes(),
    }
    if profile:
        prof = cProfile.Profile()
        prof.enable()
        evaluate(snapshot, config)
        prof.disable()
        buf = io.StringIO()
        st = pstats.Stats(prof, stream=buf)
        st.sort_stats("tottime").print_stats(14)
        out["profile"] = _trim_profile(buf.getvalue())
    return out


def _trim_profile(text: str) -> str:
    lines = [ln.rstrip() for ln in text.splitlines()]
    start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
    root = str(ROOT) + "/"
    return "\n".join(ln.replace(root, "") for ln in lines[start:] if ln.strip())


def _work_parse(nodes: int, runs: int) -> dict[str, Any]:
    from benchmarks.generate import generate
    from scaler.sources.files import load_snapshot

    with tempfile.TemporaryDirectory(prefix=f"scaler-bench-{nodes}-") as tmp:
        cluster = generate(nodes)
        sizes = cluster.write(Path(tmp))
        del cluster
        gc.collect()
        rss0 = _rss_bytes()
        total = sum(sizes.values())
        times = []
        n_pods = 0
        for _ in range(runs):
            gc.collect()
            t = time.perf_counter()
            snap = load_snapshot([tmp])
            times.append(time.perf_counter() - t)
            n_pods = len(snap.pods)
            del snap
        med = statistics.median(times)
        return {
            "files_bytes": sizes,
            "total_bytes": total,
            "pods": n_pods,
            "parse_seconds": times,
            "parse_median": med,
            "mb_per_s": total / 1e6 / med,
            "rss_before_bytes": rss0,
            "peak_rss_bytes": _peak_rss_bytes(),
        }


# ---- orchestration ------------------------------------------------------------------------


def _machine() -> dict[str, str]:
    model = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            kb = int(f.readline().split()[1])
            mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    import numpy

    return {
        "nproc": str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()),
        "cpu": model,
        "memory": mem,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "numpy": numpy.__version__,
        "os": f"{platform.system()} {platform.release()}",
    }


def _run_worker(kind: str, nodes: int, runs: int, profile: bool = False) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.run",
        "--worker",
        kind,
        "--nodes",
        str(nodes),
        "--runs",
        str(runs),
    ]
    if profile:
        cmd.append("--profile")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} worker for {nodes} nodes failed:\n{proc.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _fmt_s(x: float) -> str:
    return f"{x:.2f} s" if x >= 0.1 else f"{x * 1000:.0f} ms"


def _verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def _markdown(machine: dict[str, str], results: list[dict[str, Any]], runs: int) -> str:
    out = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m benchmarks`); do not edit by hand. Clusters come from",
        "`benchmarks/generate.py` (fixed seed; pod sizes and usage shapes from the Bitbrains trace, node",
        "shapes and DaemonSets from GKE figures; constraints at the rates of `benchmarks.generate.RATES`).",
        "Each size runs in fresh processes; times are medians of "
        f"{runs} runs in one process, with the default configuration (TargetUsage on, every candidate",
        "simulated: no time budget, no candidate limit).",
        "",
        "**Machine**: "
        + f"`nproc` = {machine['nproc']}, CPU {machine['cpu']}, {machine['memory']} RAM, "
        + f"{machine['python']}, NumPy {machine['numpy']}, {machine['os']}.",
        "",
    ]
    for r in results:
        e, p = r["evaluate"], r["parse"]
        n = e["nodes"]
        target = TARGETS.get(round(n / 1000.0) * 1000)
        gen = e["generated"]
        out += [
            f"## {n:,} nodes, {e['pods']:,} pods",
            "",
            "| measure | value | target |",
            "|---|---|---|",
            f"| full evaluation (median, {len(e['evaluate_seconds'])} runs) | {_fmt_s(e['evaluate_median'])} "
            f"(min {_fmt_s(min(e['evaluate_seconds']))}, max {_fmt_s(max(e['evaluate_seconds']))}) | "
            + (f"≤ {target[0]:g} s: {_verdict(e['evaluate_median'] <= target[0])}" if target else "—")
            + " |",
            f"| peak RSS, evaluation process (snapshot built in memory + evaluations) | "
            f"{e['peak_rss_bytes'] / GiB:.2f} GiB | "
            + (f"≤ {target[1]:g} GiB: {_verdict(e['peak_rss_bytes'] / GiB <= target[1])}" if target else "—")
            + " |",
            f"| resident size of the snapshot records | {e['snapshot_rss_bytes'] / GiB:.2f} GiB | — |",
            f"| parse of the snapshot files (median, {len(p['parse_seconds'])} runs) | {_fmt_s(p['parse_median'])} "
            f"for {p['total_bytes'] / 1e6:,.0f} MB = **{p['mb_per_s']:.0f} MB/s** | "
            + (
                f"≥ {PARSE_TARGET_MBS:g} MB/s: {_verdict(p['mb_per_s'] >= PARSE_TARGET_MBS)}"
                if n >= 4000
                else "—"
            )
            + " |",
            f"| peak RSS, parse process | {p['peak_rss_bytes'] / GiB:.2f} GiB | — |",
            f"| candidates / simulated / removable / pods to move | {e['candidates']:,} / {e['simulated']:,} / "
            f"{e['removable']:,} / {e['pods_to_move']:,} | every candidate has a verdict: yes |",
            "",
            "Files: " + ", ".join(f"`{k}` {v / 1e6:,.1f} MB" for k, v in p["files_bytes"].items()) + ".",
            "",
            "Cluster: "
            + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in gen.items() if k not in ("nodes", "pods"))
            + ".",
            "",
            "Verdicts: " + ", ".join(f"{k} {v:,}" for k, v in e["reasons"].items()) + ".",
            "",
        ]
    five = next((r for r in results if 4000 <= r["evaluate"]["nodes"] <= 6000), None)
    if five is not None and five["parse"]["mb_per_s"] < PARSE_TARGET_MBS:
        p = five["parse"]
        objects = p["pods"] * 2 + five["evaluate"]["nodes"] * 2 + five["evaluate"]["pdbs"]
        out += [
            "## Parsing below target",
            "",
            f"Parsing runs at {p['mb_per_s']:.0f} MB/s, under the {PARSE_TARGET_MBS:g} MB/s target: about "
            f"{objects / p['parse_median']:,.0f} objects/s (pods, pod metrics, nodes, node metrics, PDBs), "
            f"{p['parse_median'] / max(objects, 1) * 1e6:.0f} µs per object. JSON decoding (orjson) is a",
            "small part of it; most of the time is building the records in Python: per pod, the",
            "effective requests (containers, init containers, sidecars, overhead, pod-level resources)",
            "and the QoS class, tolerations, affinity terms, spread constraints, volumes, host ports and",
            "owner, each field validated so that a malformed object is named in the error. Quantities,",
            "timestamps and whole resource blocks are memoized (replicas repeat them), integer",
            "quantities skip `Fraction`, and the cycle collector is paused while millions of acyclic",
            "objects are created. Going further means skipping validation or moving record building",
            "out of Python. The cost is paid once per full load of a snapshot (files or a full LIST),",
            "not by the evaluation, whose figures above start from the records.",
        ]
        big = results[-1]
        if big is not five:
            bp = big["parse"]
            out += [
                "",
                f"At {big['evaluate']['nodes']:,} nodes the files ({bp['total_bytes'] / 1e9:.1f} GB) are each "
                f"decoded whole before any record is built, so the parse process peaks at "
                f"{bp['peak_rss_bytes'] / GiB:.1f} GiB and slows to {bp['mb_per_s']:.0f} MB/s; decoding",
                "the items of a List one at a time would bound that memory to the text plus the records.",
            ]
        out.append("")
    out += [
        "## Time and memory against cluster size",
        "",
        "![evaluation time, parse time and peak RSS against cluster size](benchmarks.png)",
        "",
    ]
    prof = next(
        (r["evaluate"].get("profile") for r in reversed(results) if r["evaluate"].get("profile")), None
    )
    if prof:
        n = next(r["evaluate"]["nodes"] for r in reversed(results) if r["evaluate"].get("profile"))
        out += [
            f"## Where the time goes ({n:,} nodes, cProfile, by own time)",
            "",
            "```",
            prof,
            "```",
            "",
        ]
    out += [
        "## Live requests per loop",
        "",
        "Live requests per loop: pending the controller (issue 3). Item 2(d) of issue 5 (the requests",
        "the controller makes per steady-state loop against the loopback test API server) is measured",
        "once the controller exists.",
        "",
    ]
    return "\n".join(out)


def _plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pods = [r["evaluate"]["pods"] / 1000 for r in results]
    ev = [r["evaluate"]["evaluate_median"] for r in results]
    parse = [r["parse"]["parse_median"] for r in results]
    rss = [r["evaluate"]["peak_rss_bytes"] / GiB for r in results]
    prss = [r["parse"]["peak_rss_bytes"] / GiB for r in results]
    labels = [f"{r['evaluate']['nodes'] / 1000:g}k nodes" for r in results]
    fig, (a1, a3, a2) = plt.subplots(1, 3, figsize=(14, 4.2))
    a1.plot(pods, ev, "o-", label="full evaluation (median)")
    if len(pods) > 1:
        k = ev[-1] / pods[-1]
        a1.plot([0, pods[-1]], [0, k * pods[-1]], ":", color="grey", label="linear through the largest")
    a1.set_title("Full evaluation")
    a3.plot(pods, parse, "s--", color="tab:orange", label="parse snapshot files (median)")
    a3.set_title("Parse of the snapshot files")
    a2.plot(pods, rss, "o-", label="evaluation process")
    a2.plot(pods, prss, "s--", label="parse process")
    a2.set_ylabel("peak RSS (GiB)")
    a2.set_title("Peak memory")
    for ax in (a1, a3, a2):
        ax.set_xlabel("pods (thousands)")
        if ax is not a2:
            ax.set_ylabel("seconds")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
        for x, lab in zip(pods, labels, strict=True):
            ax.annotate(
                lab, (x, 0), textcoords="offset points", xytext=(0, 4), ha="center", fontsize=7, color="grey"
            )
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks``."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="node counts, comma-separated")
    ap.add_argument("--runs", type=int, default=3, help="runs per measure (median reported)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.md/.png/.json go")
    ap.add_argument("--no-profile", action="store_true", help="skip the profile of the largest size")
    ap.add_argument(
        "--render", action="store_true", help="only rewrite benchmarks.md/.png from the saved benchmarks.json"
    )
    ap.add_argument("--worker", choices=("evaluate", "parse"), help=argparse.SUPPRESS)
    ap.add_argument("--nodes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        res = (
            _work_evaluate(a.nodes, a.runs, a.profile)
            if a.worker == "evaluate"
            else _work_parse(a.nodes, a.runs)
        )
        print(json.dumps(res))
        return 0
    if a.render:
        saved = json.loads((a.out / "benchmarks.json").read_text(encoding="utf-8"))
        (a.out / "benchmarks.md").write_text(
            _markdown(saved["machine"], saved["results"], saved["runs"]), encoding="utf-8"
        )
        _plot(saved["results"], a.out / "benchmarks.png")
        return 0
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    machine = _machine()
    results = []
    for i, n in enumerate(sizes):
        profile = not a.no_profile and i == len(sizes) - 1
        print(
            f"[bench] {n} nodes: evaluate ×{a.runs}{' + profile' if profile else ''} …",
            file=sys.stderr,
            flush=True,
        )
        ev = _run_worker("evaluate", n, a.runs, profile)
        print(
            f"[bench] {n} nodes: evaluate median {ev['evaluate_median']:.2f}s, peak RSS "
            f"{ev['peak_rss_bytes'] / GiB:.2f} GiB; parse ×{a.runs} …",
            file=sys.stderr,
            flush=True,
        )
        pa = _run_worker("parse", n, a.runs)
        print(
            f"[bench] {n} nodes: parse median {pa['parse_median']:.2f}s = {pa['mb_per_s']:.0f} MB/s, "
            f"peak RSS {pa['peak_rss_bytes'] / GiB:.2f} GiB",
            file=sys.stderr,
            flush=True,
        )
        results.append({"evaluate": ev, "parse": pa})
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "benchmarks.json").write_text(
        json.dumps({"machine": machine, "runs": a.runs, "results": results}, indent=1) + "\n",
        encoding="utf-8",
    )
    (a.out / "benchmarks.md").write_text(_markdown(machine, results, a.runs), encoding="utf-8")
    _plot(results, a.out / "benchmarks.png")
    print(f"[bench] wrote {a.out / 'benchmarks.md'} and {a.out / 'benchmarks.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
