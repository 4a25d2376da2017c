"""Run the real cluster-autoscaler and scaler side by side on one loaded cluster.

The pieces come from the real-control-plane harness of the test suite (``tests/realk8s.py``:
:class:`ControlPlane`, :class:`MetricsServer`, :class:`ClusterAutoscaler`, :class:`ScalerProcess`);
this module puts them together:

* :func:`loaded_cluster` starts kube-apiserver and etcd alone (``CONTROL_PLANE_COMPONENTS=
  apiserver``: no controller-manager, no scheduler, so nothing reconciles the loaded objects and
  both autoscalers read exactly the snapshot's state), loads a snapshot with
  :mod:`benchmarks.peer.loader`, writes the kwok provider's ConfigMaps, and serves the
  snapshot's metrics through ``metrics.k8s.io`` (an APIService backed by the harness).
* :func:`ca_decisions` runs cluster-autoscaler until it completed its loops and reads the nodes
  it found unneeded from its ``--v=4`` log, with the reason it logged for the others;
  :func:`scaler_decisions` runs ``scaler dry-run`` against the same API server (a subprocess,
  while CA is still running) and reads its JSON report.
* :func:`loop_times` runs ``cluster-autoscaler`` and ``scaler run --dry-run`` at the same time
  and reads each one's loop durations from its own Prometheus metrics.

Both autoscalers run in their own processes; the API server, etcd and the metrics server in
others (the metrics server is a thread of this process).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.peer.loader import LoadReport, load
from benchmarks.peer.objects import load_plan, read_snapshot

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import realk8s  # type: ignore[import-not-found]  # noqa: E402  (tests/realk8s.py)

__all__ = [
    "CA_DECISION_FLAGS",
    "SCALER_CA_MODE",
    "Decisions",
    "Loaded",
    "LoopTimes",
    "ca_decisions",
    "cross_check",
    "loaded_cluster",
    "loop_times",
    "scaler_decisions",
    "scaler_version",
    "snapshot_name",
    "snapshot_objects",
    "unavailable",
]

CA_DECISION_FLAGS = (
    "--v=4", "--scan-interval=10s", "--scale-down-unneeded-time=1h",
    "--max-scale-down-parallelism=100000", "--scale-down-simulation-timeout=10m",
)  # fmt: skip
"""Flags of a decision run beyond :data:`realk8s.CA_FLAGS`: the log that names unneeded nodes,
nothing deleted within the run, and neither the unneeded-node search limit (2 ×
``--max-scale-down-parallelism`` in the first loop) nor the 30 s simulation budget cutting the
search short, so that CA's unneeded set is its whole answer, comparable with a full evaluation."""

ETCD_QUOTA_BYTES = 8 * 2**30
"""etcd's backend quota: 150,000 pods written twice (created, then their status) pass the
control-plane script's 2 GiB between two compactions."""

SCALER_CA_MODE = ("--utilization-source=requests", "--filter-plugins=")
"""scaler in cluster-autoscaler's mode: utilization by requests, no TargetUsage."""

_SIMULATING = re.compile(r"^Simulating node (\S+) removal")


def scaler_version(python: str = "") -> str:
    """``<git commit>`` of the checkout whose ``scaler`` package ``python`` imports (with
    ``+changes`` when it has uncommitted changes), or ``unknown``."""
    where = subprocess.run(
        [python or sys.executable, "-P", "-c", "import pathlib, scaler; print(pathlib.Path(scaler.__file__).parent.parent)"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    root = where.stdout.strip()
    head = subprocess.run(
        ["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    )
    if where.returncode or head.returncode:
        return "unknown"
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "scaler", "plugins"],
                           capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    return head.stdout.strip() + ("+changes" if dirty else "")


def unavailable() -> str:
    """Why a side-by-side run cannot happen here (``""`` when it can)."""
    return str(realk8s.ca_unavailable())


@dataclass
class Loaded:
    """A started control plane holding a loaded snapshot.

    Attributes:
        cp: the :class:`realk8s.ControlPlane`.
        metrics: its :class:`realk8s.MetricsServer`, serving the snapshot's metrics.
        counts: objects per load wave; ``pools``: nodes per node pool.
        report: the load's :class:`~benchmarks.peer.loader.LoadReport`.
        workdir: where logs go.
    """

    cp: Any
    metrics: Any
    counts: dict[str, int]
    pools: dict[str, int]
    report: LoadReport
    workdir: Path
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig."""
        return Path(self.cp.admin_kubeconfig)


def snapshot_name(source: str) -> str:
    """How results name a snapshot source (see :func:`snapshot_objects`)."""
    if source.startswith("gen:"):
        return f"generated, {int(source[4:]):,} nodes"
    return Path(source).name


def snapshot_objects(source: str) -> Iterator[dict[str, Any]]:
    """The objects of a snapshot: ``source`` is a directory of ``kubectl get -o json`` files
    (relative to the checkout or absolute), or ``gen:N``, a cluster of N nodes from
    :func:`benchmarks.generate.generate`."""
    if source.startswith("gen:"):
        from benchmarks.generate import generate

        return generate(int(source[4:])).iter_objects()
    path = Path(source)
    return read_snapshot(path if path.is_absolute() else ROOT / path)


def _load(server: str, verify: Any, objects: Iterable[Mapping[str, Any]], concurrency: int) -> dict[str, Any]:
    """Plan and load ``objects``; what :func:`loaded_cluster` needs afterwards, as JSON."""
    plan = load_plan(objects, realk8s.iso(time.time()), kwok_namespace=realk8s.CA_NAMESPACE)
    report = load(server, verify, plan, concurrency)
    return {
        "counts": plan.counts(),
        "notes": dict(plan.notes),
        "pools": {p: len(nodes) for p, nodes in plan.pools.items()},
        "report": {**asdict(report), "missing_owners": dict(report.missing_owners)},
        "node_metrics": plan.node_metrics,
        "pod_metrics": plan.pod_metrics,
    }


@contextlib.contextmanager
def loaded_cluster(
    objects: str | Iterable[Mapping[str, Any]],
    workdir: Path,
    concurrency: int = 32,
    go_memory_limit_bytes: int | None = None,
) -> Iterator[Loaded]:
    """kube-apiserver and etcd with a snapshot loaded and its metrics served; stopped on exit,
    whatever happened.

    Args:
        objects: the snapshot's objects, or a source for :func:`snapshot_objects`; a source is
            loaded by a child process (``python -m benchmarks.peer.harness``), so that the
            memory the load takes (every object, twice) is given back before the autoscalers
            start.
        workdir: the control plane's state, logs.
        concurrency: requests in flight while loading.
        go_memory_limit_bytes: ``GOMEMLIMIT`` of etcd and kube-apiserver
            (:class:`realk8s.ControlPlane`); the autoscalers do not inherit it.

    Raises:
        benchmarks.peer.loader.LoadError: the API server refused an object.
        RuntimeError: the control plane did not start, or the loading child failed.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    cp = realk8s.ControlPlane(
        workdir / "control-plane",
        components="apiserver",
        etcd_quota_bytes=ETCD_QUOTA_BYTES,
        go_memory_limit_bytes=go_memory_limit_bytes,
    )
    metrics = None
    try:
        cp.start()
        if isinstance(objects, str):
            out = workdir / "loaded.json"
            cmd = [sys.executable, "-m", "benchmarks.peer.harness", objects, cp.server, str(cp.ca), str(cp.pki), str(out),
                   str(concurrency)]  # fmt: skip
            child = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            if child.returncode != 0:
                raise RuntimeError(f"loading {objects} failed: {child.stderr[-3000:]}")
            done = json.loads(out.read_bytes())
            out.unlink()
        else:
            done = _load(cp.server, cp.ssl_context(), objects, concurrency)
        rep = done["report"]
        report = LoadReport(rep["seconds"], rep["objects"], rep["requests"], rep["retries"],
                            Counter(rep["missing_owners"]))  # fmt: skip
        metrics = realk8s.MetricsServer(cp)
        metrics.serve_snapshot(done.pop("node_metrics"), done.pop("pod_metrics"))
        metrics.start()
        yield Loaded(cp, metrics, done["counts"], done["pools"], report, workdir, done["notes"])
    finally:
        if metrics is not None:
            metrics.stop()
        cp.stop()


@dataclass
class Decisions:
    """One autoscaler's answer on one cluster.

    Attributes:
        removable: nodes found unneeded (CA) or removable (scaler), sorted.
        reasons: node → why it stays (CA: the message it logged, where it logged one; scaler:
            ``Reason: detail``).
        simulated: nodes whose removal was simulated in the loop read.
        seconds: wall time of the evaluation read (CA: its ``main`` loop; scaler: the command).
    """

    removable: list[str]
    reasons: dict[str, str]
    simulated: int
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)


def _ca_status_candidates(text: str) -> int | None:
    """``clusterWide.scaleDown.candidates`` of CA's status ConfigMap (YAML since 1.30)."""
    import yaml

    try:
        doc = yaml.safe_load(text) or {}
        return int(doc["clusterWide"]["scaleDown"]["candidates"])
    except (yaml.YAMLError, KeyError, TypeError, ValueError):
        return None


def _ca_status_text(cp: Any) -> str:
    cm = cp.get("ConfigMap", "cluster-autoscaler-status", realk8s.CA_NAMESPACE)
    return str(((cm or {}).get("data") or {}).get("status") or "")


@contextlib.contextmanager
def running_ca(loaded: Loaded, args: Iterable[str], log: str = "cluster-autoscaler.log") -> Iterator[Any]:
    """A started :class:`realk8s.ClusterAutoscaler`, killed with SIGKILL on exit."""
    ca = realk8s.ClusterAutoscaler(loaded.kubeconfig, loaded.workdir / log, list(args)).start()
    try:
        yield ca
    finally:
        ca.kill()


def ca_decisions(ca: Any, cp: Any, loops: int = 2, timeout: float = 600.0) -> Decisions:
    """Wait for ``loops`` complete loops of a running CA (``--v=4``) on the control plane ``cp``
    and read the last one (and CA's status ConfigMap, into ``extra``)."""
    done = ca.wait_loops(loops, timeout)
    last = done[-1]
    simulated = sum(1 for line in last.lines if _SIMULATING.match(line))
    durations = realk8s.prometheus_samples(
        ca.metrics_text(), "cluster_autoscaler_function_duration_seconds_sum"
    )
    counts = realk8s.prometheus_samples(
        ca.metrics_text(), "cluster_autoscaler_function_duration_seconds_count"
    )
    main = 'function="main"'
    mean = durations.get(main, 0.0) / counts[main] if counts.get(main) else 0.0
    reasons: dict[str, str] = {}
    for loop in done:  # a node found unremovable is not re-simulated for 5 minutes: its reason is older
        reasons.update(loop.unremovable())
    reasons = {n: r for n, r in reasons.items() if n not in last.unneeded}
    status = _ca_status_text(cp)
    return Decisions(sorted(last.unneeded), reasons, simulated, mean,
                     {"statusConfigMap": status, "statusCandidates": _ca_status_candidates(status)})  # fmt: skip


def scaler_decisions(loaded: Loaded, args: Iterable[str] = (), python: str = "") -> Decisions:
    """``scaler dry-run -o json`` against the loaded cluster (a subprocess of ``python``, by
    default this interpreter).

    Raises:
        RuntimeError: the command failed (its stderr in the message).
    """
    cmd = [
        python or sys.executable,
        "-P",  # the interpreter's own scaler, not the one in the current directory
        "-m",
        "scaler.cli",
        "dry-run",
        "--kubeconfig",
        str(loaded.kubeconfig),
        "-o",
        "json",
        *args,
    ]
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    took = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed ({out.returncode}): {out.stderr[-2000:]}")
    doc = json.loads(out.stdout)
    nodes = doc["nodes"]
    removable = sorted(n["name"] for n in nodes if n["removable"])
    reasons = {
        n["name"]: f"{n['reason']}: {n.get('detail') or ''}".rstrip(": ") for n in nodes if not n["removable"]
    }
    simulated = sum(1 for n in nodes if n["reason"] in _SIMULATED_REASONS)
    freed = sum(_cpu_millicores(n) for n in nodes if n["removable"])
    per_node = {
        n["name"]: {"cpuMillicores": _cpu_millicores(n), "usage": (n.get("utilization") or {}).get("value")}
        for n in nodes
    }
    extra = {
        "freedCpuMillicores": freed,
        "reasonCounts": dict(Counter(n["reason"] for n in nodes)),
        "nodes": per_node,
    }
    return Decisions(removable, reasons, simulated, took, extra)


_SIMULATED_REASONS = frozenset({"NoReason", "NoPlaceToMovePods", "BlockedByPod", "BlockedByOnCompletionPod"})
"""scaler verdicts given after the drain rules ran on the node (CA logs ``Simulating node``
before its drain rules, so both count the same nodes)."""


_UNNEEDED_REASONS = frozenset({"NoReason", "NotUnneededLongEnough", "NotUnreadyLongEnough"})
"""Verdicts of nodes the loop found removable (the status ConfigMap names the timer still
running)."""


def _cpu_millicores(node: Mapping[str, Any]) -> int:
    return int((node.get("allocatable") or {}).get("cpuMillicores") or 0)


# -- cross-check of order effects -----------------------------------------------------------------

DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"


def _restrict(loaded: Loaded, keep: set[str]) -> list[str]:
    """Annotate every node outside ``keep`` ``scale-down-disabled`` (both autoscalers then
    simulate only ``keep``, and still move pods onto the others); returns the nodes annotated
    (those that did not carry the annotation already)."""
    done = []
    for node in loaded.cp.list("Node"):
        name = node["metadata"]["name"]
        if name in keep or (node["metadata"].get("annotations") or {}).get(DISABLED) == "true":
            continue
        loaded.cp.patch("Node", name, {"metadata": {"annotations": {DISABLED: "true"}}})
        done.append(name)
    return done


def _lift(loaded: Loaded, names: Iterable[str]) -> None:
    for name in names:
        loaded.cp.patch("Node", name, {"metadata": {"annotations": {DISABLED: None}}})


def cross_check(loaded: Loaded, ca_set: Iterable[str], our_set: Iterable[str], ca_args: Iterable[str],
                ca_timeout: float = 600.0, python: str = "") -> dict[str, Any]:  # fmt: skip
    """Whether each side's answer is also an answer under the other's rules: with only CA's
    unneeded nodes as candidates (every other node ``scale-down-disabled``, still a
    destination), ``scaler dry-run`` in CA's mode; with only scaler's removable nodes as
    candidates, a fresh cluster-autoscaler. When each finds the other's whole set removable,
    the two sets differ only by the order in which candidates were simulated (which nodes'
    pods took the destinations and the PDB budgets first). The annotations are removed again.

    CA may place a pod of a node it simulated first onto a later candidate, and then cannot
    move it again once its PDB is spent (kubernetes/autoscaler#7907); for each node of scaler's
    set CA rejects, ``caRejected`` gives CA's reason and, for a PDB reason, the node the pod
    it names really runs on.

    Returns ``{"scalerOnCaSet": [...], "caOnScalerSet": [...], "caRejected": {node: {"reason",
    "podNode"}}}`` (sorted node names).
    """
    annotated = _restrict(loaded, set(ca_set))
    try:
        scaler_on_ca = scaler_decisions(loaded, SCALER_CA_MODE, python).removable
    finally:
        _lift(loaded, annotated)
    annotated = _restrict(loaded, set(our_set))
    try:
        with running_ca(loaded, ca_args, "cluster-autoscaler-cross-check.log") as ca:
            ca_on_ours = ca_decisions(ca, loaded.cp, loops=2, timeout=ca_timeout)
    finally:
        _lift(loaded, annotated)
    rejected = {}
    for node in sorted(set(our_set) - set(ca_on_ours.removable)):
        reason = ca_on_ours.reasons.get(node, "")
        entry = {"reason": reason}
        m = _PDB_POD.search(reason)
        if m:  # which node the pod CA could not move really runs on
            pod = loaded.cp.get("Pod", m.group(2), m.group(1)) or {}
            entry["podNode"] = str((pod.get("spec") or {}).get("nodeName") or "")
        rejected[node] = entry
    return {"scalerOnCaSet": scaler_on_ca, "caOnScalerSet": ca_on_ours.removable, "caRejected": rejected}


_PDB_POD = re.compile(r"not enough pod disruption budget to move ([^/\s]+)/(\S+)")


# -- loop time ---------------------------------------------------------------------------------------


@dataclass
class LoopTimes:
    """Loop time of one autoscaler over a steady window, from its own metrics.

    Attributes:
        functions: function label → mean seconds per observation in the window.
        loops: ``main`` observations in the window.
        window_seconds: wall time of the window.
        cpu_seconds_per_loop: the process's user+system CPU in the window / loops.
        rss_peak_bytes: the process's peak resident size (``VmHWM``).
        simulated_per_loop: nodes whose removal was simulated, per loop of the window (CA: its
            ``Simulating node`` lines; scaler: verdicts after the drain rules, from its status
            ConfigMap at the end).
        candidates: what else was read about its candidates.
    """

    functions: dict[str, float]
    loops: int
    window_seconds: float
    cpu_seconds_per_loop: float
    rss_peak_bytes: int
    simulated_per_loop: float
    candidates: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """As a JSON-able dict."""
        return asdict(self)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_peak(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _durations(text: str, prefix: str) -> dict[str, tuple[float, float]]:
    sums = realk8s.prometheus_samples(text, f"{prefix}_function_duration_seconds_sum")
    counts = realk8s.prometheus_samples(text, f"{prefix}_function_duration_seconds_count")
    out = {}
    for labels, total in sums.items():
        m = re.search(r'function="([^"]*)"', labels)
        if m:
            out[m.group(1)] = (total, counts.get(labels, 0.0))
    return out


def _window(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    out = {}
    for name, (s1, c1) in after.items():
        s0, c0 = before.get(name, (0.0, 0.0))
        if c1 > c0:
            out[name] = (s1 - s0) / (c1 - c0)
    return out


def loop_times(loaded: Loaded, ca_args: Iterable[str], scaler_args: Iterable[str], *, warm_loops: int = 2,
               window_loops: int = 5, timeout: float = 3600.0, python: str = "") -> dict[str, Any]:  # fmt: skip
    """Run CA and ``scaler run --dry-run`` at the same time on the loaded cluster; once each has
    completed ``warm_loops`` loops, measure a window in which each completes at least
    ``window_loops`` more. Returns ``{"ca": LoopTimes, "scaler": LoopTimes, ...}`` as JSON.

    Raises:
        AssertionError: a process exited, or the loops did not come within ``timeout`` s.
    """
    # scaler binds its metrics port itself (port 0) and logs it: no port is picked ahead and raced for.
    scaler_cmd = ["--dry-run", "--cloud-provider=kubernetes", "--leader-elect=false", f"--namespace={realk8s.CA_NAMESPACE}",
                  "--address=127.0.0.1:0", *scaler_args]  # fmt: skip
    log = loaded.workdir / "scaler-run.log"
    with running_ca(loaded, ca_args, "cluster-autoscaler-loops.log") as ca, \
            realk8s.scaler_process(loaded.kubeconfig, scaler_cmd, log, python=python) as scaler:  # fmt: skip
        port = scaler.metrics_port()

        def texts() -> tuple[str, str]:
            try:
                s = httpx_get(f"http://127.0.0.1:{port}/metrics")
            except OSError:
                s = ""
            return ca.metrics_text(), s

        def main_count(text: str, prefix: str) -> float:
            return _durations(text, prefix).get("main", (0.0, 0.0))[1]

        def counts() -> tuple[float, float]:
            assert ca.alive(), f"cluster-autoscaler exited:\n{ca.output[-3000:]}"
            assert scaler.alive(), f"scaler exited:\n{scaler.output[-3000:]}"
            c, s = texts()
            return main_count(c, "cluster_autoscaler"), main_count(s, "scaler")

        deadline = time.monotonic() + timeout
        started = time.monotonic()
        realk8s.wait_for(lambda: min(counts()) >= warm_loops, timeout, "warm-up loops of both", poll=1.0)
        warm_seconds = time.monotonic() - started
        c0, s0 = texts()
        t0 = time.monotonic()
        cpu0 = (_cpu_seconds(ca.proc.pid), _cpu_seconds(scaler.proc.pid))
        ca_loops0 = len(ca.loops())
        base = (main_count(c0, "cluster_autoscaler"), main_count(s0, "scaler"))
        realk8s.wait_for(lambda: all(n - b >= window_loops for n, b in zip(counts(), base, strict=True)),
                         max(60.0, deadline - time.monotonic()), "the measurement window", poll=1.0)  # fmt: skip
        c1, s1 = texts()
        t1 = time.monotonic()
        cpu1 = (_cpu_seconds(ca.proc.pid), _cpu_seconds(scaler.proc.pid))
        rss = (_rss_peak(ca.proc.pid), _rss_peak(scaler.proc.pid))
        ca_window = ca.loops()[ca_loops0:]
        ca_sim = [sum(1 for line in lp.lines if _SIMULATING.match(line)) for lp in ca_window]
        ca_skipped = [
            line for lp in ca_window for line in lp.lines if "nodes skipped in scale down simulation" in line
        ]
        status = loaded.cp.get("ConfigMap", "scaler-status", realk8s.CA_NAMESPACE) or {}
    ca_f, sc_f = (
        _window(_durations(c0, "cluster_autoscaler"), _durations(c1, "cluster_autoscaler")),
        _window(_durations(s0, "scaler"), _durations(s1, "scaler")),
    )
    n_ca = main_count(c1, "cluster_autoscaler") - base[0]
    n_sc = main_count(s1, "scaler") - base[1]
    verdicts = _scaler_verdicts(status)
    ca_times = LoopTimes(
        ca_f, int(n_ca), t1 - t0, (cpu1[0] - cpu0[0]) / max(n_ca, 1), rss[0],
        sum(ca_sim) / len(ca_sim) if ca_sim else 0.0,
        {"unneededLastLoop": len(ca_window[-1].unneeded) if ca_window else 0,
         "skippedMessages": ca_skipped[-3:], "simulatedPerLoop": ca_sim},
    )  # fmt: skip
    sc_times = LoopTimes(
        sc_f, int(n_sc), t1 - t0, (cpu1[1] - cpu0[1]) / max(n_sc, 1), rss[1],
        float(sum(1 for r in verdicts.values() if r in _SIMULATED_REASONS or r in _UNNEEDED_REASONS)),
        {"reasons": dict(Counter(verdicts.values())), "unneeded": sum(1 for r in verdicts.values() if r in _UNNEEDED_REASONS)},
    )  # fmt: skip
    return {"ca": ca_times.to_json(), "scaler": sc_times.to_json(), "warmupSeconds": warm_seconds,
            "peakRssBytes": peak_rss(loaded)}  # fmt: skip


def peak_rss(loaded: Loaded) -> dict[str, int]:
    """Peak resident size (``VmHWM``) of the control plane's processes and of this harness
    process (its metrics server thread, and what the load left behind)."""
    out = {"harness": _rss_peak(os.getpid())}
    pids = Path(loaded.cp.state_dir) / "pids"
    for line in pids.read_text().splitlines() if pids.exists() else []:
        name, _, pid = line.partition(" ")
        with contextlib.suppress(OSError, ValueError):
            out[name] = _rss_peak(int(pid))
    return out


def httpx_get(url: str) -> str:
    """GET ``url`` (``""`` on HTTP errors)."""
    import httpx

    try:
        return httpx.get(url, timeout=30).text
    except httpx.HTTPError:
        return ""


def _scaler_verdicts(cm: Mapping[str, Any]) -> dict[str, str]:
    import yaml

    text = str(((cm or {}).get("data") or {}).get("status") or "")
    if not text:
        return {}
    doc = yaml.safe_load(text) or {}
    return {str(n["name"]): str(n["reason"]) for n in doc.get("nodes") or []}


def _child(argv: list[str]) -> int:
    """``python -m benchmarks.peer.harness SOURCE SERVER CA PKI OUT CONCURRENCY``: load a
    snapshot into the API server at SERVER as its admin and write what was loaded to OUT."""
    import ssl

    source, server, ca, pki, out, concurrency = argv
    verify = ssl.create_default_context(cafile=ca)
    verify.load_cert_chain(str(Path(pki) / "admin.crt"), str(Path(pki) / "admin.key"))
    Path(out).write_text(json.dumps(_load(server, verify, snapshot_objects(source), int(concurrency))))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
