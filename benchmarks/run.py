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
    sizes = Counter((n.node_group, n.zone) for n in snapshot.nodes if n.node_group)
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


def _time_parse(tmp: str, runs: int) -> tuple[list[float], int]:
    from scaler.sources.files import load_snapshot

    times = []
    n_pods = 0
    for _ in range(runs):
        gc.collect()
        t = time.perf_counter()
        snap = load_snapshot([tmp])
        times.append(time.perf_counter() - t)
        n_pods = len(snap.pods)
        del snap
    return times, n_pods


def _parse_stages(tmp: str) -> dict[str, float]:
    """One more parse, split: decoding the files (orjson), building the records, freeing the
    decoded JSON."""
    from scaler.model.gcpause import no_cycle_collector
    from scaler.model.snapshot import build_snapshot
    from scaler.sources.files import load_objects

    gc.collect()
    with no_cycle_collector():
        t0 = time.perf_counter()
        objects = load_objects([tmp])
        t1 = time.perf_counter()
        snap = build_snapshot(objects)
        t2 = time.perf_counter()
        del objects
        t3 = time.perf_counter()
    del snap
    return {"decode": t1 - t0, "build": t2 - t1, "free": t3 - t2}


def _work_parse(nodes: int, runs: int) -> dict[str, Any]:
    """Parse the snapshot files as ``kubectl get -o json`` prints them (four-space indent), then
    the same objects as ``scaler snapshot`` writes them (one-space indent)."""
    from benchmarks.generate import generate

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"scaler-bench-{nodes}-") as tmp:
        cluster = generate(nodes)
        formats = (("kubectl", 4), ("compact", 1))
        dirs = {label: Path(tmp) / label for label, _ in formats}
        all_sizes = {label: cluster.write(dirs[label], indent=indent) for label, indent in formats}
        del cluster
        gc.collect()
        os.sync()  # measure parsing, not the write-back of gigabytes of fresh files
        for label, indent in formats:
            for f in dirs[label].iterdir():  # and read from the page cache, as after any first read
                f.read_bytes()
            sizes = all_sizes[label]
            total = sum(sizes.values())
            times, n_pods = _time_parse(str(dirs[label]), runs)
            med = statistics.median(times)
            res: dict[str, Any] = {
                "indent": indent,
                "files_bytes": sizes,
                "total_bytes": total,
                "pods": n_pods,
                "parse_seconds": times,
                "parse_median": med,
                "mb_per_s": total / 1e6 / med,
            }
            if label == "kubectl":
                res["stages"] = _parse_stages(str(dirs[label]))
                out.update(res)
                out["peak_rss_bytes"] = _peak_rss_bytes()  # before the second format is parsed
            else:
                out["compact"] = res
    return out


def _work_live(nodes: int) -> dict[str, Any]:
    from benchmarks.live import measure_live

    return measure_live(nodes)


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


def _markdown(
    machine: dict[str, str], results: list[dict[str, Any]], runs: int, live: dict[str, Any] | None = None
) -> str:
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
            f"| parse of the snapshot files as `kubectl get -o json` prints them (4-space indent; median, "
            f"{len(p['parse_seconds'])} runs) | {_fmt_s(p['parse_median'])} "
            f"for {p['total_bytes'] / 1e6:,.0f} MB = **{p['mb_per_s']:.0f} MB/s** | "
            + (
                f"≥ {PARSE_TARGET_MBS:g} MB/s: {_verdict(p['mb_per_s'] >= PARSE_TARGET_MBS)}"
                if n >= 4000
                else "—"
            )
            + " |",
        ]
        if p.get("compact"):
            c = p["compact"]
            out.append(
                f"| parse of the same objects, 1-space indent (`scaler snapshot` layout; median, "
                f"{len(c['parse_seconds'])} runs) | {_fmt_s(c['parse_median'])} for "
                f"{c['total_bytes'] / 1e6:,.0f} MB = {c['mb_per_s']:.0f} MB/s | — |"
            )
        if p.get("stages"):
            st = p["stages"]
            out.append(
                f"| parse stages (one more run, kubectl layout): decode (orjson) / build records / free JSON | "
                f"{st['decode']:.2f} s / {st['build']:.2f} s / {st['free']:.2f} s | — |"
            )
        out += [
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
    if five is not None:
        p = five["parse"]
        objects = p["pods"] * 2 + five["evaluate"]["nodes"] * 2 + five["evaluate"]["pdbs"]
        met = p["mb_per_s"] >= PARSE_TARGET_MBS
        out += [
            "## Parsing",
            "",
            "The target is judged on what `kubectl get -o json` prints: Go's `json.MarshalIndent` with four",
            "spaces, List items nested two levels deep. The benchmark writes the files that way; the same",
            "objects written with a one-space indent (as `scaler snapshot` writes them, about half the",
            "bytes) are parsed too, and reported on their own line: fewer bytes for the same work, so",
            "fewer MB/s.",
            "",
            f"At {five['evaluate']['nodes']:,} nodes parsing runs at {p['mb_per_s']:.0f} MB/s of kubectl JSON"
            + (f" ({p['compact']['mb_per_s']:.0f} MB/s of the one-space layout)" if p.get("compact") else "")
            + f", {'meeting' if met else 'under'} the {PARSE_TARGET_MBS:g} MB/s target: about "
            f"{objects / p['parse_median']:,.0f} objects/s (pods, pod metrics, nodes, node metrics, PDBs), "
            f"{p['parse_median'] / max(objects, 1) * 1e6:.0f} µs per object.",
        ]
        if p.get("stages"):
            st = p["stages"]
            out += [
                f"Of one parse, decoding the JSON (orjson, from the file's bytes) takes {st['decode']:.1f} s, building "
                f"the records {st['build']:.1f} s and freeing the decoded JSON {st['free']:.1f} s.",
            ]
        out += [
            "Record building validates every field so that a malformed object is named in the error; the",
            "usual shapes take fast paths (`scaler/model/parse.py`: direct dict lookups, string-only",
            "maps checked in C by `str.join`, pod requests memoized on a cheap key of their string",
            "quantities) and anything unusual falls back to the general path, which gives the same",
            "records and the same errors. Quantities, timestamps and whole resource blocks are",
            "memoized (replicas repeat them), integer quantities skip `Fraction`, List items are used",
            "as decoded rather than copied, and the cycle collector is paused while millions of",
            "acyclic objects are created, the records then handed to the oldest generation at once.",
            "The cost is paid once per full load of a snapshot (files or a full LIST), not by the",
            "evaluation, whose figures above start from the records.",
        ]
        big = results[-1]
        if big is not five:
            bp = big["parse"]
            out += [
                "",
                f"At {big['evaluate']['nodes']:,} nodes the files ({bp['total_bytes'] / 1e9:.1f} GB) are each "
                f"decoded whole before any record is built, so the parse process peaks at "
                f"{bp['peak_rss_bytes'] / GiB:.1f} GiB and runs at {bp['mb_per_s']:.0f} MB/s; decoding",
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
    out += _live_markdown(live)
    return "\n".join(out)


def _live_markdown(live: dict[str, Any] | None) -> list[str]:
    out = ["## Live requests per loop", ""]
    if not live:
        return [*out, "Not measured in this run (`--live-nodes 0`).", ""]
    fed, listed, lease = live["node_source"], live["node_list"], live["lease"]

    def reqs(d: dict[str, Any]) -> str:
        return ", ".join(f"`{k}` ×{v}" for k, v in d["requests"].items())

    steady = sorted(set(fed["requests_per_loop"]))
    out += [
        f"Against the loopback test API server (`tests/fakes/kube_api.py`, real HTTP) holding the generated "
        f"{live['nodes']:,}-node cluster, a controller built as `scaler run` builds it (watch caches "
        f"of {live['watched_kinds']} kinds, the `kubernetes` cloud provider, leader, not dry-run; "
        "`benchmarks/live.py`):",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| requests per steady-state loop ({len(fed['requests_per_loop'])} loops) | "
        f"**{' / '.join(map(str, fed['requests_per_loop']))}**: {reqs(fed)} | 2: "
        f"{_verdict(steady == [2])} |",
        f"| same, provider LISTing the nodes on each refresh ({len(listed['requests_per_loop'])} loops) | "
        f"{' / '.join(map(str, listed['requests_per_loop']))}: {reqs(listed)} | — |",
        f"| loops before the steady state (requests each) | {' / '.join(map(str, live['settling_loops']))} | — |",
        f"| lease renewals (leader election, apart from the loop; lease {lease['lease_duration']:g} s, "
        f"renew deadline {lease['renew_deadline']:g} s, retry {lease['retry_period']:g} s) | "
        f"{lease['renewals_per_second']:.2f} renewals/s = {lease['requests_per_second']:.2f} requests/s "
        f"({lease['renewals']} renewals in {lease['seconds']:.0f} s: "
        + ", ".join(f"{k} ×{v}" for k, v in lease["methods"].items())
        + ") | — |",
        "",
        "In the steady state a loop makes the two metrics LISTs and nothing else: nodes, pods, PDBs,",
        "workloads, PVs and PVCs come from the open watches (re-opened every "
        f"{live['watch_timeout_seconds']} s per kind by the server's timeout, relisted only on 410 Gone), and",
        "the status ConfigMap is written only when its content changes (the settling loops above: the",
        "first loop recovers and writes it, then it is rewritten while the plan's content settles). The",
        "`kubernetes` cloud provider takes the node-pool sizes from the nodes of the snapshot the loop",
        "has just built (`KubernetesProvider(node_source=...)`); constructed without `node_source` it",
        "LISTs the nodes on every refresh, one request per 500 nodes, as the second row shows. The GKE",
        "provider reads its sizes from the GCE API, not the Kubernetes API. Leader election renews the",
        "Lease every retry period with a GET and a PUT, on its own thread, whatever the loop does.",
        "",
    ]
    return out


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
    ap.add_argument(
        "--live-nodes", type=int, default=1000, help="cluster size of the live request count (0: skip it)"
    )
    ap.add_argument("--worker", choices=("evaluate", "parse", "live"), help=argparse.SUPPRESS)
    ap.add_argument("--nodes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        if a.worker == "evaluate":
            res = _work_evaluate(a.nodes, a.runs, a.profile)
        elif a.worker == "parse":
            res = _work_parse(a.nodes, a.runs)
        else:
            res = _work_live(a.nodes)
        print(json.dumps(res))
        return 0
    if a.render:
        saved = json.loads((a.out / "benchmarks.json").read_text(encoding="utf-8"))
        (a.out / "benchmarks.md").write_text(
            _markdown(saved["machine"], saved["results"], saved["runs"], saved.get("live")),
            encoding="utf-8",
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
    live = None
    if a.live_nodes:
        print(f"[bench] {a.live_nodes} nodes: live requests per loop …", file=sys.stderr, flush=True)
        live = _run_worker("live", a.live_nodes, 1)
        print(
            f"[bench] live: requests per loop {live['node_source']['requests_per_loop']}, lease renewals "
            f"{live['lease']['renewals_per_second']:.2f}/s",
            file=sys.stderr,
            flush=True,
        )
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "benchmarks.json").write_text(
        json.dumps({"machine": machine, "runs": a.runs, "results": results, "live": live}, indent=1) + "\n",
        encoding="utf-8",
    )
    (a.out / "benchmarks.md").write_text(_markdown(machine, results, a.runs, live), encoding="utf-8")
    _plot(results, a.out / "benchmarks.png")
    print(f"[bench] wrote {a.out / 'benchmarks.md'} and {a.out / 'benchmarks.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
