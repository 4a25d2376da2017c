"""``python -m benchmarks.peer``: scaler beside the real cluster-autoscaler on a real API server.

Two commands (and ``render``, which only rewrites the section from the results file); each
loads its clusters into a fresh kube-apiserver (:mod:`benchmarks.peer.harness`),
records its results in ``docs/peer.json`` and rewrites the side-by-side section of
``docs/benchmarks.md`` from that file:

* ``decisions [SNAPSHOT ...]`` (default: the bundled real-trace snapshots, and a generated
  200-node cluster with every constraint of :mod:`benchmarks.generate`). With
  cluster-autoscaler 1.30.7 running on the cluster (``--v=4``, nothing deleted, no search
  limit), ``scaler dry-run`` runs twice against the same API server: in CA's mode
  (``--utilization-source=requests --filter-plugins=``) and with its defaults (usage,
  TargetUsage). CA's unneeded nodes (its last complete loop) are compared with both; every
  difference is listed with both sides' reasons and a cause.
* ``loops --nodes 1000,5000``: a generated cluster (:func:`benchmarks.generate.generate`, about
  30 pods per node) per size; cluster-autoscaler (CA's defaults, ``--v=4`` as its Helm chart
  runs it) and ``scaler run --dry-run`` (scaler's defaults, every candidate re-simulated every
  loop: ``--unremovable-node-recheck-timeout=0s``; no node status writes) run at the same time;
  each one's loop time
  comes from its own ``function_duration_seconds`` metrics over a window of steady loops.

A snapshot argument is a directory of ``kubectl get -o json`` files or ``gen:N`` (a generated
cluster of N nodes). Needs ``../shared/k8s`` and ``../shared/ca`` beside the checkout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks.peer import harness

__all__ = ["classify", "main", "markdown"]

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SNAPSHOTS = (
    "scaler/examples/bitbrains-gke-day1",
    "tests/data/snapshots/bitbrains-gke-night",
    "scaler/examples/bitbrains-gke-night-lowreq",
    "gen:200",
)
RESULTS = ROOT / "docs" / "peer.json"
BENCH_MD = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- peer:begin (python -m benchmarks.peer) -->", "<!-- peer:end -->"
LOOP_CA_ARGS = ("--v=4", "--scale-down-unneeded-time=1h")
"""CA's defaults otherwise (10 s scan interval, 30 s simulation budget, unneeded-node limit
from ``--max-scale-down-parallelism`` 10); nothing becomes deletable within a run."""
LOOP_SCALER_ARGS = ("--unremovable-node-recheck-timeout=0s", "--write-node-status=false")
"""scaler's defaults otherwise (usage, TargetUsage, 10 s scan interval). Neither writes nodes
in the loop: scaler's per-node status annotation (50 nodes a loop until every node carries
its verdict: 100 loops at 5,000 nodes) is off, as CA's soft taints are (:data:`realk8s.CA_FLAGS`)."""

LOOP_GO_MEMORY_LIMIT = 10 * 2**30
"""``GOMEMLIMIT`` of the API server and etcd in a loop-time run: at 1,000 nodes kube-apiserver
peaked at 2.6 GiB with Go's default collector (the heap grows to twice its live size between
collections); five times that beside etcd, both autoscalers and the load would not fit a
24 GiB machine shared with other work. A soft limit on the control plane only: the autoscalers
run with Go's and Python's defaults."""


def _machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "loadavg": list(os.getloadavg()),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _others(workdir: Path) -> list[str]:
    """The busiest other processes right now (command, CPU % over its life, RSS), to say what
    else ran: this run's own processes (the benchmark, and those whose command line names
    ``workdir``: API server, etcd, both autoscalers) left out."""
    out = subprocess.run(
        ["ps", "-eo", "pcpu,rss,comm,args", "--sort=-pcpu"], capture_output=True, text=True, check=False
    )
    rows = []
    for line in out.stdout.splitlines()[1:12]:
        parts = line.split(None, 3)
        if (
            len(parts) == 4
            and float(parts[0]) >= 5.0
            and str(workdir) not in parts[3]
            and "benchmarks.peer" not in parts[3]
        ):
            rows.append(
                f"{parts[2]} {float(parts[0]):.0f}% cpu {int(parts[1]) // 1024} MiB: {parts[3][:120]}"
            )
    return rows


# -- decisions ----------------------------------------------------------------------------------------


def _without_dirs(process: str) -> str:
    """A process line of :func:`_others` with the directories of its absolute paths dropped
    (``/home/x/.venv/bin/python`` → ``python``): the machine's layout says nothing to a reader."""
    return re.sub(r"(?<!\S)/\S*/", "", process)


def order_only(ca_set: set[str], our_set: set[str], cross: Mapping[str, Any]) -> bool:
    """Whether a cross-check (:func:`benchmarks.peer.harness.cross_check`) shows the two sets
    differ only by order: scaler finds all of CA's set removable, and CA all of scaler's,
    except nodes it refused for a PDB spent by a pod that does not run on them (a pod CA's
    own simulation had moved there from a node of the set it removed first)."""
    if set(cross["scalerOnCaSet"]) != ca_set:
        return False
    for node in our_set - set(cross["caOnScalerSet"]):
        rejected = (cross.get("caRejected") or {}).get(node) or {}
        if not rejected.get("podNode") or rejected["podNode"] == node:
            return False
    return True


def classify(
    ca: Mapping[str, Any], ours: Mapping[str, Any], cross: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """Every node one side removes and the other keeps, with both reasons and, when ``cross``
    (:func:`benchmarks.peer.harness.cross_check`) is given, a cause: ``order`` when
    :func:`order_only` holds (the sets differ only by which candidates each simulated first:
    CA in its node lister's order with empty and previously unneeded nodes first, scaler by
    ascending utilization; whose pods took the destinations' room and the PDB budgets),
    ``unexplained`` otherwise."""
    out = []
    ca_set, our_set = set(ca["removable"]), set(ours["removable"])
    order = cross is not None and order_only(ca_set, our_set, cross)
    for node in sorted(ca_set ^ our_set):
        entry = {
            "node": node,
            "ca": "unneeded" if node in ca_set else ca["reasons"].get(node, "(no reason logged)"),
            "scaler": "removable" if node in our_set else ours["reasons"].get(node, ""),
        }
        if cross is not None:
            entry["cause"] = "order" if order else "unexplained"
        out.append(entry)
    return out


def run_decisions(sources: list[str], workdir: Path, python: str = "") -> dict[str, Any]:
    """Load each snapshot, run CA and both scaler dry-runs, compare (see the module docstring)."""
    results: dict[str, Any] = {}
    for i, source in enumerate(sources):
        name = harness.snapshot_name(source)
        print(f"[{name}] loading ...", file=sys.stderr)
        with harness.loaded_cluster(source, workdir / f"decisions-{i}") as loaded:
            print(
                f"[{name}] loaded in {loaded.report.seconds['total']:.1f}s; cluster-autoscaler ...",
                file=sys.stderr,
            )
            with harness.running_ca(loaded, harness.CA_DECISION_FLAGS) as ca:
                ca_dec = harness.ca_decisions(ca, loaded.cp, loops=2)
                ca_mode = harness.scaler_decisions(loaded, harness.SCALER_CA_MODE, python)
                defaults = harness.scaler_decisions(loaded, (), python)
                # CA's answer once more, after scaler's: stable from loop to loop?
                again = harness.ca_decisions(ca, loaded.cp, loops=3)
            entry: dict[str, Any] = {
                "source": source,
                "scalerCommit": harness.scaler_version(python),
                "nodes": loaded.counts.get("nodes", 0),
                "pods": loaded.counts.get("pods", 0),
                "pools": loaded.pools,
                "loadSeconds": loaded.report.seconds,
                "loadRequests": loaded.report.requests,
                "ca": vars(ca_dec),
                "caStable": again.removable == ca_dec.removable,
                "scalerCaMode": vars(ca_mode),
                "scalerDefaults": vars(defaults),
            }
            if ca_dec.removable != ca_mode.removable:
                print(f"[{name}] the sets differ: cross-check ...", file=sys.stderr)
                entry["crossCheck"] = harness.cross_check(
                    loaded, ca_dec.removable, ca_mode.removable, harness.CA_DECISION_FLAGS, python=python
                )
            entry["parity"] = classify(entry["ca"], entry["scalerCaMode"], entry.get("crossCheck") or {
                "scalerOnCaSet": ca_dec.removable, "caOnScalerSet": ca_mode.removable})  # fmt: skip
            entry["usageVsCa"] = classify(entry["ca"], entry["scalerDefaults"])
            results[name] = entry
            print(f"[{name}] CA {len(ca_dec.removable)}, scaler CA mode {len(ca_mode.removable)}, "
                  f"scaler {len(defaults.removable)}", file=sys.stderr)  # fmt: skip
    return results


# -- loop times ---------------------------------------------------------------------------------------


def run_loops(sizes: list[int], workdir: Path, window_loops: int, python: str = "") -> dict[str, Any]:
    """Load a generated cluster per size and measure both loops at the same time."""
    results: dict[str, Any] = {}
    for nodes in sizes:
        name = harness.snapshot_name(f"gen:{nodes}")
        others_before = _others(workdir)
        print(f"[{name}] loading ...", file=sys.stderr)
        with harness.loaded_cluster(
            f"gen:{nodes}", workdir / f"loops-{nodes}", go_memory_limit_bytes=LOOP_GO_MEMORY_LIMIT
        ) as loaded:
            print(f"[{name}] loaded in {loaded.report.seconds['total']:.0f}s "
                  f"({loaded.report.requests:,} requests); measuring ...", file=sys.stderr)  # fmt: skip
            times = harness.loop_times(
                loaded, LOOP_CA_ARGS, LOOP_SCALER_ARGS, window_loops=window_loops, python=python
            )
            results[str(nodes)] = {
                "nodes": loaded.counts.get("nodes", 0),
                "pods": loaded.counts.get("pods", 0),
                "loadSeconds": loaded.report.seconds,
                "loadRequests": loaded.report.requests,
                "scalerCommit": harness.scaler_version(python),
                "caArgs": list(LOOP_CA_ARGS),
                "scalerArgs": list(LOOP_SCALER_ARGS),
                "controlPlaneGoMemLimitBytes": LOOP_GO_MEMORY_LIMIT,
                "othersBefore": others_before,
                "othersAfter": _others(workdir),
                "machine": _machine(),
                **times,
            }
        ca_main = results[str(nodes)]["ca"]["functions"].get("main", 0.0)
        sc_main = results[str(nodes)]["scaler"]["functions"].get("main", 0.0)
        print(f"[{name}] CA main {ca_main:.2f}s, scaler main {sc_main:.2f}s", file=sys.stderr)
    return results


# -- report -------------------------------------------------------------------------------------------


def _names(nodes: list[str]) -> str:
    """The nodes named (up to three), else how many (each is listed under the table)."""
    if not nodes:
        return "—"
    return ", ".join(f"`{n}`" for n in nodes) if len(nodes) <= 3 else f"{len(nodes)} nodes (below)"


def _removed(nodes: set[str], entry: Mapping[str, Any]) -> str:
    """``N (X vCPU, busiest Y%)`` for a set of removed nodes, from scaler's per-node figures."""
    per_node = (entry["scalerDefaults"].get("extra") or {}).get("nodes") or {}
    vcpu = sum((per_node.get(n) or {}).get("cpuMillicores") or 0 for n in nodes) / 1000
    usage = [u for n in nodes if (u := (per_node.get(n) or {}).get("usage")) is not None]
    busiest = f", busiest {max(usage):.0%}" if usage else ""
    return f"{len(nodes)} ({vcpu:.1f} vCPU{busiest})"


def _secs(v: float) -> str:
    return f"{v:.2f} s" if v < 10 else f"{v:.1f} s"


def markdown(results: Mapping[str, Any]) -> str:
    """The side-by-side section of ``docs/benchmarks.md`` from ``docs/peer.json``."""
    lines = [
        BEGIN,
        "## Side by side with the real cluster-autoscaler",
        "",
        "Generated by `python -m benchmarks.peer decisions` and `python -m benchmarks.peer loops "
        "--nodes 1000,5000` (`benchmarks/peer/`); results in `docs/peer.json`. Each cluster is loaded "
        "into a real kube-apiserver v1.28.4 with etcd (`../shared/k8s`, no controller-manager or "
        "scheduler, so the objects stay as loaded) with kwok-shaped nodes, its workloads, PDBs and "
        "bound Running pods, and its metrics served through `metrics.k8s.io`. cluster-autoscaler "
        "1.30.7 (`../shared/ca`, kwok provider) and scaler then run against it at the same time.",
        "",
    ]
    dec = results.get("decisions") or {}
    if dec:
        lines += [
            "### Decisions: scaler in CA's mode against CA",
            "",
            "CA: its last complete loop at `--v=4` (nodes logged `is unneeded since`), with the "
            "unneeded-node limit and the simulation budget lifted (`--max-scale-down-parallelism=100000 "
            "--scale-down-simulation-timeout=10m`) and nothing deleted (`--scale-down-unneeded-time=1h`). "
            "scaler: `scaler dry-run --kubeconfig … --utilization-source=requests --filter-plugins=` "
            "against the same API server while CA runs.",
            "",
            "| cluster | nodes / pods | load | CA unneeded | scaler (CA mode) removable | same nodes | each finds the other's set removable | differences |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, e in dec.items():
            diffs = e["parity"]
            if len(diffs) <= 3:
                causes = ", ".join(f"{d['cause']}: `{d['node']}` ({'CA' if d['ca'] == 'unneeded' else 'scaler'} removes it)"
                                   for d in diffs) or "none"  # fmt: skip
            else:
                by_cause = Counter(d["cause"] for d in diffs)
                causes = f"{len(diffs)} nodes (below): " + ", ".join(
                    f"{c} {n}" for c, n in sorted(by_cause.items())
                )
            same = len(set(e["ca"]["removable"]) & set(e["scalerCaMode"]["removable"]))
            cross = e.get("crossCheck")
            if cross is None:
                checked = "— (same sets)"
            else:
                ca_set, ours = set(e["ca"]["removable"]), set(e["scalerCaMode"]["removable"])
                ok_ours = set(cross["scalerOnCaSet"]) == ca_set
                missed = sorted(ours - set(cross["caOnScalerSet"]))
                rejected = cross.get("caRejected") or {}
                twice = [n for n in missed if rejected.get(n, {}).get("podNode") not in (None, "", n)]
                ca_says = "yes" if not missed else f"{len(ours) - len(missed)} of {len(ours)}"
                if twice:
                    ca_says += f" ({len(twice)} refused for a PDB spent by a pod CA had moved onto them)"
                checked = f"scaler on CA's: {'yes' if ok_ours else 'no'}; CA on scaler's: {ca_says}"
            lines.append(
                f"| {name} | {e['nodes']} / {e['pods']:,} | {_secs(e['loadSeconds']['total'])} | "
                f"{len(e['ca']['removable'])} | {len(e['scalerCaMode']['removable'])} | {same} | {checked} | {causes} |"
            )
        lines += [
            "",
            "Where the two sets differ, each side is run once more with only the other's set as "
            "candidates (every other node annotated `cluster-autoscaler.kubernetes.io/scale-down-disabled`, "
            "still a destination; CA restarted). When each then finds the other's whole set removable, the "
            "difference is the order in which candidates were simulated (`order`): CA takes them in its node "
            "lister's order (empty and previously unneeded nodes first), scaler by ascending utilization, and "
            "whichever node goes first takes the destinations' room and the PDB budgets. CA also places pods "
            "onto candidates it simulates later; when such a node's turn comes, the pod moved onto it must move "
            "again and its PDB, already charged, refuses (kubernetes/autoscaler#7907). scaler places moved pods "
            "on non-candidates first and never removes a node that received pods (`DestinationForMovedPods`).",
        ]
        lines += ["", "Each difference, with what each side said about the node:", ""]
        any_diff = False
        for name, e in dec.items():
            for d in e["parity"]:
                any_diff = True
                lines.append(f"- {name}, `{d['node']}` ({d['cause']}): CA: {d['ca']}; scaler: {d['scaler']}.")
        if not any_diff:
            lines.append("- none.")
        lines += [
            "",
            "### What each removes: CA beside scaler's defaults (usage, TargetUsage)",
            "",
            "The same clusters and the same CA loop; scaler: `scaler dry-run --kubeconfig …` with its "
            "defaults. vCPU: the removed nodes' allocatable CPU; busiest: the highest real utilization "
            "(max of cpu and memory usage / allocatable, from the served NodeMetrics) among the removed nodes.",
            "",
            "| cluster | CA removes | scaler removes | both | only CA | only scaler |",
            "|---|---|---|---|---|---|",
        ]
        for name, e in dec.items():
            ca_set, ours = set(e["ca"]["removable"]), set(e["scalerDefaults"]["removable"])
            lines.append(
                f"| {name} | {_removed(ca_set, e)} | {_removed(ours, e)} | {len(ca_set & ours)} | "
                f"{_names(sorted(ca_set - ours))} | {_names(sorted(ours - ca_set))} |"
            )
        lines += ["", "Why scaler keeps the nodes CA removes, and removes the nodes CA keeps:", ""]
        for name, e in dec.items():
            for d in e["usageVsCa"]:
                lines.append(f"- {name}, `{d['node']}`: CA: {d['ca']}; scaler: {d['scaler']}.")
        lines.append("")
    loops = results.get("loops") or {}
    if loops:
        lines += [
            "### Loop time at 1,000 and 5,000 nodes",
            "",
            "Generated clusters (`benchmarks.generate`, about 30 pods per node). cluster-autoscaler with its "
            f"defaults and `{' '.join(LOOP_CA_ARGS)}` (`--v=4` as its Helm chart runs it; nothing becomes "
            "deletable within the run) and `scaler run --dry-run` with its defaults and "
            f"`{' '.join(LOOP_SCALER_ARGS)}` (every candidate re-simulated every loop, with usage; no per-node status writes, as CA writes no soft taints here) run at "
            "the same time on the same API server. Loop times are each one's own "
            "`function_duration_seconds` (`cluster_autoscaler_…` and `scaler_…`, sum/count over the same "
            "window of steady loops, after two warm-up loops each); CPU per loop from `/proc`. CA 1.30 searches "
            "for unneeded nodes in `findUnneeded`; its `scaleDown` times only the deletion step (nothing to delete "
            "here). Simulated: CA's `Simulating node … removal` log lines per loop; scaler's verdicts given after "
            "the drain rules ran on the node, from its status ConfigMap.",
            "",
            "| nodes / pods | load | CA `main` | CA `scaleDown` | CA `findUnneeded` | scaler `main` | scaler / CA | CPU per loop CA / scaler | peak RSS CA / scaler | simulated per loop CA / scaler |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _size, e in sorted(loops.items(), key=lambda kv: int(kv[0])):
            ca, sc = e["ca"], e["scaler"]
            ca_main, sc_main = ca["functions"].get("main", 0.0), sc["functions"].get("main", 0.0)
            ratio = f"{sc_main / ca_main:.2f}×" if ca_main else "—"
            lines.append(
                f"| {e['nodes']:,} / {e['pods']:,} | {e['loadSeconds']['total'] / 60:.1f} min | {_secs(ca_main)} | "
                f"{_secs(ca['functions'].get('scaleDown', 0.0))} | {_secs(ca['functions'].get('findUnneeded', 0.0))} | "
                f"{_secs(sc_main)} | {ratio} | {ca['cpu_seconds_per_loop']:.2f} s / {sc['cpu_seconds_per_loop']:.2f} s | "
                f"{ca['rss_peak_bytes'] / 2**20:,.0f} / {sc['rss_peak_bytes'] / 2**20:,.0f} MiB | "
                f"{ca['simulated_per_loop']:.0f} / {sc['simulated_per_loop']:.0f} |"
            )
        lines.append("")
        for size, e in sorted(loops.items(), key=lambda kv: int(kv[0])):
            rss = e.get("peakRssBytes") or {}
            gib = ", ".join(f"{k} {v / 2**30:.1f} GiB" for k, v in sorted(rss.items()))
            load = e["loadSeconds"]["total"]
            limit = e.get("controlPlaneGoMemLimitBytes")
            if limit:
                gib += f" (kube-apiserver and etcd with `GOMEMLIMIT` {limit / 2**30:.0f} GiB)"
            lines.append(f"- {int(size):,} nodes: loaded in {load / 60:.1f} min ({e['loadRequests']:,} requests, "
                         f"{e['loadRequests'] / load:.0f} a second; pods {e['loadSeconds'].get('pods', 0) / 60:.1f} min); "
                         f"window of {e['ca']['loops']} CA loops and {e['scaler']['loops']} scaler loops "
                         f"({e['ca']['window_seconds']:.0f} s); peak RSS {gib or 'not recorded'}; machine "
                         f"{e['machine']['nproc']} cores, load average {e['machine']['loadavg'][0]:.1f} at the end; "
                         f"also running: {'; '.join(map(_without_dirs, e['othersAfter'])) or 'nothing busy'}.")  # fmt: skip
        lines.append("")
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_section(results: Mapping[str, Any], path: Path = BENCH_MD) -> None:
    """Replace (or append) the side-by-side section of ``path``."""
    text = path.read_text() if path.exists() else ""
    section = markdown(results)
    if BEGIN in text and END in text:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END + "\n")
        text = head + section + tail
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peer", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("decisions", help="CA's unneeded nodes beside scaler's removable nodes")
    d.add_argument("snapshots", nargs="*", default=list(DEFAULT_SNAPSHOTS))
    lp = sub.add_parser("loops", help="loop time of both at the same time on generated clusters")
    lp.add_argument("--nodes", default="1000,5000")
    lp.add_argument("--window-loops", type=int, default=5)
    r = sub.add_parser("render", help="only rewrite the docs/benchmarks.md section from the results file")
    r.add_argument("--results", type=Path, default=RESULTS)
    r.add_argument("--markdown", type=Path, default=BENCH_MD)
    for p in (d, lp):
        p.add_argument("--results", type=Path, default=RESULTS)
        p.add_argument(
            "--scaler-python", default="", help="the interpreter whose scaler runs (default: this one)"
        )
        p.add_argument("--markdown", type=Path, default=BENCH_MD)
        p.add_argument(
            "--workdir", type=Path, default=None, help="keep logs and state here (default: a temporary dir)"
        )
    args = ap.parse_args(argv)
    if args.command == "render":
        write_section(json.loads(args.results.read_text()), args.markdown)
        return 0
    why = harness.unavailable()
    if why:
        print(f"benchmarks.peer: cannot run: {why}", file=sys.stderr)
        return 2
    results = json.loads(args.results.read_text()) if args.results.exists() else {}
    with tempfile.TemporaryDirectory(prefix="peer-") as tmp:
        workdir = args.workdir or Path(tmp)
        start = time.monotonic()
        if args.command == "decisions":
            results.setdefault("decisions", {}).update(
                run_decisions(args.snapshots, workdir, args.scaler_python)
            )
        else:
            sizes = [int(s) for s in args.nodes.split(",") if s]
            results.setdefault("loops", {}).update(
                run_loops(sizes, workdir, args.window_loops, args.scaler_python)
            )
        print(f"done in {time.monotonic() - start:.0f}s", file=sys.stderr)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    write_section(results, args.markdown)
    return 0
