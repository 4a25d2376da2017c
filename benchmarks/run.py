"""``python -m benchmarks``: what a user waits for, at 1k, 5k and 15k nodes.

For each size, fresh processes (so that each peak RSS is that measure's alone):

* **dry-run**: write the generated cluster's snapshot files as ``kubectl get -o json`` prints them
  (four-space indent) to a temporary directory, then, ``--runs`` times and interleaved:
  (a) ``scaler dry-run --snapshot DIR -o json`` as a subprocess, end to end (wall time from start
  to exit, peak RSS of that process); (b) the floor, in a subprocess of its own: msgspec decoding
  the same ``pods.json`` into the Structs of the fields scaler reads
  (:data:`scaler.model.wire.PodW`), read as the loader reads it; (c) the ratio of the medians.
* **loop**: (d) the steady ``scaler run`` loop against the loopback fake API server in another
  process (:mod:`benchmarks.loop`, :mod:`benchmarks.fake_api`): wall and CPU time per loop, API
  requests per loop.
* **evaluate**: generate the cluster in memory (:mod:`benchmarks.generate`), build the
  :class:`~scaler.model.snapshot.ClusterSnapshot`, then run :func:`scaler.engine.evaluate`
  ``--runs`` times with the default configuration (TargetUsage on, no time budget, no candidate
  limit) and check that every candidate got a verdict from the candidate loop.

The results go to ``docs/benchmarks.md``, ``docs/benchmarks.json`` and the plot
``docs/benchmarks.png``.
"""

from __future__ import annotations

import argparse
import compileall
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import re
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
TARGETS = {  # nodes -> (evaluation seconds, peak RSS GiB of the evaluation process)
    5000: (2.0, 1.5),
    15000: (8.0, 4.0),
}
DRY_RUN_TARGETS = {  # nodes -> (dry-run / floor, dry-run peak RSS GiB)
    5000: (3.0, 3.0),
    15000: (None, 8.0),
}
LOOP_TARGETS = {5000: 2.5, 15000: 7.0}  # nodes -> steady loop seconds
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
    from scaler.eligibility import check_eligibility
    from scaler.engine import counted_pods, evaluate
    from scaler.limits import node_group_limits
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
    limits = node_group_limits(config, snapshot.nodes)
    sizes = Counter(limits.group_key(n) for n in snapshot.nodes if n.node_group)
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


def _work_floor(path: str) -> dict[str, Any]:
    """(b) msgspec decoding ``path`` (a pods.json) into the Structs scaler reads, in one call."""
    import msgspec

    from scaler.model import wire
    from scaler.sources.files import _read

    pod_list = msgspec.defstruct("PodListW", [("items", list[wire.PodW])], gc=False)
    t, c = time.perf_counter(), time.process_time()
    doc: Any = msgspec.json.Decoder(pod_list).decode(_read(Path(path)))
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "pods": len(doc.items),
        "peak_rss_bytes": _peak_rss_bytes(),
    }


def _subprocess(cmd: list[str]) -> tuple[float, int, str, float]:
    """Run ``cmd``; (wall seconds, its peak RSS in bytes, stdout's last line, its CPU seconds:
    user + system). Raises on failure."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.read()[-4000:].decode()}")
        out.seek(0)
        out.seek(max(0, os.fstat(out.fileno()).st_size - 65536))
        lines = out.read().decode(errors="replace").strip().splitlines()
    return wall, usage.ru_maxrss * 1024, lines[-1] if lines else "", usage.ru_utime + usage.ru_stime


def _work_dry_run(nodes: int, runs: int) -> dict[str, Any]:
    """(a), (b), (c): the end-to-end dry-run and its floor, interleaved, ``runs`` times each."""
    from benchmarks.generate import generate

    scaler_cli = str(Path(sys.executable).parent / "scaler")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"scaler-bench-{nodes}-") as tmp:
        cluster = generate(nodes)
        out["files_bytes"] = cluster.write(Path(tmp), indent=4)
        out["total_bytes"] = sum(out["files_bytes"].values())
        del cluster
        gc.collect()
        os.sync()  # measure the work, not the write-back of gigabytes of fresh files
        for f in Path(tmp).iterdir():  # and read from the page cache, as after any first read
            with f.open("rb") as fh:
                while fh.read(1 << 24):
                    pass
        walls, rss, floors, floor_rss, floor_inner, cpus, floor_cpus = [], [], [], [], [], [], []
        for _ in range(runs):
            wall, peak, _last, cpu = _subprocess([scaler_cli, "dry-run", "--snapshot", tmp, "-o", "json"])
            walls.append(wall)
            rss.append(peak)
            cpus.append(cpu)
            fwall, _, last, _cpu = _subprocess(
                [sys.executable, "-m", "benchmarks.run", "--worker", "floor", "--path", f"{tmp}/pods.json"]
            )
            floor = json.loads(last)
            floors.append(floor["seconds"])
            floor_cpus.append(floor["cpu_seconds"])
            floor_rss.append(floor["peak_rss_bytes"])
            floor_inner.append(fwall)
        out.update(
            {
                "dry_run_seconds": walls,
                "dry_run_median": statistics.median(walls),
                "dry_run_peak_rss_bytes": max(rss),
                "floor_seconds": floors,
                "floor_median": statistics.median(floors),
                "floor_process_seconds": floor_inner,
                "dry_run_cpu_seconds": cpus,
                "floor_cpu_seconds": floor_cpus,
                "floor_peak_rss_bytes": max(floor_rss),
                "pods": floor["pods"],
            }
        )
        out["ratio"] = out["dry_run_median"] / out["floor_median"]
        out["cpu_ratio"] = statistics.median(cpus) / statistics.median(floor_cpus)
    return out


def _work_loop(nodes: int, runs: int) -> dict[str, Any]:
    from benchmarks.loop import measure_loop

    return measure_loop(nodes, runs)


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


def _median_span(xs: list[float]) -> str:
    return f"{_fmt_s(statistics.median(xs))} (min {_fmt_s(min(xs))}, max {_fmt_s(max(xs))})"


def _target(ok: bool | None, text: str) -> str:
    return "—" if ok is None else f"{text}: {_verdict(ok)}"


def _with_peer(text: str, out: Path) -> str:
    """``text`` followed by the side-by-side section that ``python -m benchmarks.peer`` renders
    from ``peer.json`` and the replay section of ``python -m benchmarks.replay`` from
    ``replay-bench.json`` (both kept when this command rewrites ``benchmarks.md``)."""
    from benchmarks.replay import with_replay

    peer = out / "peer.json"
    if not peer.exists():
        return with_replay(text, out)
    from benchmarks.peer.run import markdown

    text = text.rstrip("\n") + "\n\n" + markdown(json.loads(peer.read_text(encoding="utf-8")))
    return with_replay(text, out)


def _markdown(
    machine: dict[str, str],
    results: list[dict[str, Any]],
    runs: int,
    live: dict[str, Any] | None = None,
    note: str = "",
) -> str:
    out = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`python -m benchmarks`); do not edit by hand. Clusters come from",
        "`benchmarks/generate.py` (fixed seed; pod sizes and usage shapes from the Bitbrains trace, node",
        "shapes and DaemonSets from GKE figures; constraints at the rates of `benchmarks.generate.RATES`).",
        f"Every measure runs in fresh processes; times are medians of {runs} runs with the default",
        "configuration (TargetUsage on, every candidate simulated: no time budget, no candidate limit).",
        "",
        "**Machine**: "
        + f"`nproc` = {machine['nproc']}, CPU {machine['cpu']}, {machine['memory']} RAM, "
        + f"{machine['python']}, NumPy {machine['numpy']}, {machine['os']}.",
        "",
    ]
    if note:
        out += [note, ""]
    out += [
        "## What a user waits for",
        "",
        "| nodes / pods | (a) `scaler dry-run --snapshot DIR -o json` | peak RSS (a) | (b) floor: msgspec, `pods.json` "
        "into Structs | (c) a / b | (d) steady `scaler run` loop: wall / CPU | requests per loop | evaluation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        e, d, lp = r["evaluate"], r.get("dry_run"), r.get("loop")
        row = [f"{e['nodes']:,} / {e['pods']:,}"]
        if d:
            row += [
                _fmt_s(d["dry_run_median"]),
                f"{d['dry_run_peak_rss_bytes'] / GiB:.2f} GiB",
                f"{_fmt_s(d['floor_median'])}, {d['floor_peak_rss_bytes'] / GiB:.2f} GiB",
                f"**{d['ratio']:.2f}×**",
            ]
        else:
            row += ["—"] * 4
        if lp:
            row += [
                f"{_fmt_s(lp['loop_median'])} / {_fmt_s(lp['loop_cpu_median'])}",
                " / ".join(map(str, lp["requests_per_loop"])),
            ]
        else:
            row += ["not measured", "—"]
        row.append(_fmt_s(e["evaluate_median"]))
        out.append("| " + " | ".join(row) + " |")
    out += [
        "",
        "(a) is the whole command in its own process, from start to exit: interpreter start, reading",
        "and decoding the six files into records, the evaluation, the JSON report. (b), the floor, is",
        "what decoding alone costs: msgspec decoding the same `pods.json` (the bulk of the bytes) in one",
        "call into Structs holding only the fields scaler reads (`scaler.model.wire.PodW`), read the",
        "way the loader reads it; it is run in its own process right after each (a). (c) is the ratio of",
        "the medians. (d) is `Controller.run_once` of a controller built as `scaler run` builds it",
        "(watch caches warm, both metrics LISTs decoded, usage recorded and aggregated, evaluation,",
        "plan, status) against the loopback fake API server running in another process",
        "(`benchmarks/loop.py`, `benchmarks/fake_api.py`); CPU is this process's, all threads. Before",
        "the timed loops every node and sampled pod is given a whole default unneeded window of usage",
        "history (40 samples: 600 s at metrics-server's 15 s), as after ten minutes of running.",
        "",
    ]
    for r in results:
        e, d, lp = r["evaluate"], r.get("dry_run"), r.get("loop")
        n = e["nodes"]
        size = round(n / 1000.0) * 1000
        target = TARGETS.get(size)
        dtarget = DRY_RUN_TARGETS.get(size)
        ltarget = LOOP_TARGETS.get(size)
        gen = e["generated"]
        out += [f"## {n:,} nodes, {e['pods']:,} pods", "", "| measure | value | target |", "|---|---|---|"]
        if d:
            out += [
                f"| (a) `scaler dry-run --snapshot DIR -o json`, end to end ({len(d['dry_run_seconds'])} runs) | "
                f"{_median_span(d['dry_run_seconds'])} | — |",
                f"| peak RSS of (a) | {d['dry_run_peak_rss_bytes'] / GiB:.2f} GiB | "
                + _target(
                    None if dtarget is None else d["dry_run_peak_rss_bytes"] / GiB <= dtarget[1],
                    f"≤ {dtarget[1]:g} GiB" if dtarget else "",
                )
                + " |",
                f"| (b) floor: msgspec decoding `pods.json` ({d['files_bytes']['pods.json'] / 1e6:,.0f} MB) into "
                f"Structs ({len(d['floor_seconds'])} runs) | {_median_span(d['floor_seconds'])}; peak RSS "
                f"{d['floor_peak_rss_bytes'] / GiB:.2f} GiB | — |",
                f"| (c) a / b | **{d['ratio']:.2f}×** | "
                + _target(
                    None if not dtarget or dtarget[0] is None else d["ratio"] <= dtarget[0],
                    f"≤ {dtarget[0]:g}×" if dtarget and dtarget[0] else "",
                )
                + " |",
            ]
            if "cpu_ratio" in d:
                out.append(
                    f"| the same in CPU time (user + system): (a) {_fmt_s(statistics.median(d['dry_run_cpu_seconds']))}, "
                    f"(b) {_fmt_s(statistics.median(d['floor_cpu_seconds']))} | {d['cpu_ratio']:.2f}× | — |"
                )
        if lp:
            out += [
                f"| (d) steady `scaler run` loop, wall ({len(lp['loop_seconds'])} loops) | "
                f"{_median_span(lp['loop_seconds'])} | "
                + _target(None if ltarget is None else lp["loop_median"] <= ltarget, f"≤ {ltarget or 0:g} s")
                + " |",
                f"| (d) CPU time of the scaler process per loop | {_median_span(lp['loop_cpu_seconds'])} | — |",
                f"| (d) API requests per loop | {' / '.join(map(str, lp['requests_per_loop']))}: "
                + ", ".join(
                    f"`{m}`"
                    for m in sorted({re.sub(r"/nodes/[^/?]+", "/nodes/{name}", m) for m in lp["requests"]})
                )
                + f" | 2: {_verdict(set(lp['requests_per_loop']) == {2})} |",
                f"| watch caches: first LIST of every kind (sync) | {_fmt_s(lp['cache_sync_seconds'])} | — |",
            ]
            if "history_samples" in lp:
                out.append(
                    f"| (d) usage history when the timed loops start | {lp['history_samples']} samples for every node "
                    f"and for each of {lp['sampled_pods']:,} sampled pods | — |"
                )
        out += [
            f"| full evaluation (median, {len(e['evaluate_seconds'])} runs) | {_median_span(e['evaluate_seconds'])} | "
            + _target(
                None if target is None else e["evaluate_median"] <= target[0],
                f"≤ {target[0]:g} s" if target else "",
            )
            + " |",
            f"| peak RSS, evaluation process (snapshot built in memory + evaluations) | "
            f"{e['peak_rss_bytes'] / GiB:.2f} GiB | "
            + _target(
                None if target is None else e["peak_rss_bytes"] / GiB <= target[1],
                f"≤ {target[1]:g} GiB" if target else "",
            )
            + " |",
            f"| resident size of the snapshot records | {e['snapshot_rss_bytes'] / GiB:.2f} GiB | — |",
            f"| candidates / simulated / removable / pods to move | {e['candidates']:,} / {e['simulated']:,} / "
            f"{e['removable']:,} / {e['pods_to_move']:,} | every candidate has a verdict: yes |",
            "",
        ]
        if d:
            out += [
                "Files (kubectl layout, four-space indent): "
                + ", ".join(f"`{k}` {v / 1e6:,.1f} MB" for k, v in d["files_bytes"].items())
                + ".",
                "",
            ]
        out += [
            "Cluster: "
            + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in gen.items() if k not in ("nodes", "pods"))
            + ".",
            "",
            "Verdicts: " + ", ".join(f"{k} {v:,}" for k, v in e["reasons"].items()) + ".",
            "",
        ]
    out += [
        "## How the input is read",
        "",
        "Snapshot files, LIST pages, WATCH events and both metrics LISTs are decoded by msgspec straight",
        "into typed Structs holding only the fields scaler reads (`scaler/model/wire.py`; everything",
        "else, `managedFields`, env, probes, most of `status`, is skipped without being built), in one",
        "pass per file or page, then turned into records (`scaler/model/parse.py`) and released: no",
        "tree of dicts is ever built, and a file's bytes are freed before its records are made.",
        "Replicas share their requests, constraints and tolerations, so those are computed once per",
        "distinct encoding. The live watch cache stores the records themselves: a steady loop copies",
        "and parses nothing from it, and decodes only the two metrics LISTs. It also keeps the pods",
        "sorted and grouped by node from one loop to the next (`scaler/model/layout.py`), re-sorting",
        "only the pods that changed, and a pod's usage history is aggregated only when the loop reads",
        "that pod (`AggregatedPodMetrics` in `scaler/planner.py`).",
        "",
        "## Time and memory against cluster size",
        "",
        "![dry-run, floor, loop and evaluation time; peak RSS](benchmarks.png)",
        "",
    ]
    prof = next(
        (r["evaluate"].get("profile") for r in reversed(results) if r["evaluate"].get("profile")), None
    )
    if prof:
        n = next(r["evaluate"]["nodes"] for r in reversed(results) if r["evaluate"].get("profile"))
        out += [
            f"## Where the evaluation's time goes ({n:,} nodes, cProfile, by own time)",
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

    def series(key: str, field: str, scale: float = 1.0) -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for r in results:
            if r.get(key) and field in r[key]:
                xs.append(r["evaluate"]["pods"] / 1000)
                ys.append(r[key][field] / scale)
        return xs, ys

    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.4))
    a1.plot(*series("dry_run", "dry_run_median"), "o-", label="(a) dry-run, end to end")
    a1.plot(*series("dry_run", "floor_median"), "s--", label="(b) floor: msgspec, pods.json")
    a1.plot(*series("loop", "loop_median"), "^-", label="(d) steady loop (wall)")
    a1.plot(*series("evaluate", "evaluate_median"), "v:", label="evaluation")
    a1.set_title("Time")
    a1.set_ylabel("seconds")
    a2.plot(*series("dry_run", "ratio"), "o-", color="tab:purple", label="(c) dry-run / floor")
    a2.axhline(3.0, color="grey", linestyle=":", label="target at 5k: 3×")
    a2.set_title("Dry-run against its floor")
    a2.set_ylabel("ratio")
    a3.plot(*series("dry_run", "dry_run_peak_rss_bytes", GiB), "o-", label="(a) dry-run")
    a3.plot(*series("dry_run", "floor_peak_rss_bytes", GiB), "s--", label="(b) floor")
    a3.plot(*series("evaluate", "peak_rss_bytes", GiB), "v:", label="evaluation process")
    a3.set_title("Peak memory")
    a3.set_ylabel("peak RSS (GiB)")
    for ax in (a1, a2, a3):
        ax.set_xlabel("pods (thousands)")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _log(text: str) -> None:
    print(f"[bench] {text}", file=sys.stderr, flush=True)


def _measure_size(n: int, runs: int, profile: bool, loop: bool) -> dict[str, Any]:
    _log(f"{n} nodes: evaluate ×{runs}{' + profile' if profile else ''} …")
    ev = _run_worker("evaluate", n, runs, profile)
    _log(f"{n} nodes: evaluate median {ev['evaluate_median']:.2f}s; dry-run and floor ×{runs} …")
    dr = _run_worker("dry-run", n, runs)
    _log(
        f"{n} nodes: dry-run median {dr['dry_run_median']:.2f}s (peak RSS {dr['dry_run_peak_rss_bytes'] / GiB:.2f}"
        f" GiB), floor {dr['floor_median']:.2f}s, ratio {dr['ratio']:.2f}"
    )
    out = {"evaluate": ev, "dry_run": dr}
    if loop:
        _log(f"{n} nodes: steady loop ×{runs} …")
        out["loop"] = lp = _run_worker("loop", n, runs)
        _log(f"{n} nodes: loop median {lp['loop_median']:.2f}s wall, {lp['loop_cpu_median']:.2f}s CPU")
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks``."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="node counts, comma-separated")
    ap.add_argument("--loop-sizes", help="sizes at which to time the steady loop (default: every size)")
    ap.add_argument("--runs", type=int, default=3, help="runs per measure (median reported)")
    ap.add_argument("--out", type=Path, default=ROOT / "docs", help="where benchmarks.md/.png/.json go")
    ap.add_argument("--no-profile", action="store_true", help="skip the profile of the largest size")
    ap.add_argument(
        "--merge", action="store_true", help="keep the saved results of sizes not measured in this run"
    )
    ap.add_argument("--note", default="", help="a line for benchmarks.md (what else ran on the machine)")
    ap.add_argument(
        "--render", action="store_true", help="only rewrite benchmarks.md/.png from the saved benchmarks.json"
    )
    ap.add_argument(
        "--live-nodes", type=int, default=1000, help="cluster size of the live request count (0: skip it)"
    )
    ap.add_argument(
        "--worker", choices=("evaluate", "dry-run", "floor", "loop", "live"), help=argparse.SUPPRESS
    )
    ap.add_argument("--nodes", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        workers = {
            "evaluate": lambda: _work_evaluate(a.nodes, a.runs, a.profile),
            "dry-run": lambda: _work_dry_run(a.nodes, a.runs),
            "floor": lambda: _work_floor(a.path),
            "loop": lambda: _work_loop(a.nodes, a.runs),
            "live": lambda: _work_live(a.nodes),
        }
        print(json.dumps(workers[a.worker]()))
        return 0
    saved_path = a.out / "benchmarks.json"
    saved = json.loads(saved_path.read_text(encoding="utf-8")) if saved_path.exists() else {}
    if a.render:
        (a.out / "benchmarks.md").write_text(
            _with_peer(
                _markdown(
                    saved["machine"],
                    saved["results"],
                    saved["runs"],
                    saved.get("live"),
                    saved.get("note", ""),
                ),
                a.out,
            ),
            encoding="utf-8",
        )
        _plot(saved["results"], a.out / "benchmarks.png")
        return 0
    # Byte-code as an installed package has it (pip compiles on install): without it, and with
    # PYTHONDONTWRITEBYTECODE set, every measured process would compile scaler first (about 2 s).
    for package in ("scaler", "plugins", "benchmarks"):
        compileall.compile_dir(ROOT / package, quiet=1)
    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    loop_sizes = (
        set(sizes) if a.loop_sizes is None else {int(s) for s in a.loop_sizes.split(",") if s.strip()}
    )
    machine = _machine()
    results = [
        r
        for r in (saved.get("results") or [])
        if a.merge and r["evaluate"]["nodes"] not in sizes and "dry_run" in r
    ]
    for i, n in enumerate(sizes):
        profile = not a.no_profile and i == len(sizes) - 1
        results.append(_measure_size(n, a.runs, profile, n in loop_sizes))
    results.sort(key=lambda r: r["evaluate"]["nodes"])
    live = saved.get("live") if a.merge else None
    if a.live_nodes and not (a.merge and live):
        _log(f"{a.live_nodes} nodes: live requests per loop …")
        live = _run_worker("live", a.live_nodes, 1)
        _log(f"live: requests per loop {live['node_source']['requests_per_loop']}")
    note = a.note or (saved.get("note", "") if a.merge else "")
    a.out.mkdir(parents=True, exist_ok=True)
    saved_path.write_text(
        json.dumps(
            {"machine": machine, "runs": a.runs, "results": results, "live": live, "note": note}, indent=1
        )
        + "\n",
        encoding="utf-8",
    )
    (a.out / "benchmarks.md").write_text(
        _with_peer(_markdown(machine, results, a.runs, live, note), a.out), encoding="utf-8"
    )
    _plot(results, a.out / "benchmarks.png")
    _log(f"wrote {a.out / 'benchmarks.md'} and {a.out / 'benchmarks.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
