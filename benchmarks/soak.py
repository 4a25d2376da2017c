"""Soak: two ``scaler run`` replicas on a real kube-apiserver for a long while, under faults.

``python -m benchmarks.soak --duration 30m --seed 1`` (``make soak``; ``--duration 2m`` for a
smoke run). Needs ``../shared/k8s`` and etcd, as the real-apiserver tests do.

A real control plane (``tests/realk8s.py``: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler; the test plays the kubelet and metrics-server) runs three busy nodes. Every
``--node-interval`` a new underused node joins with a two-pod Deployment under a PDB allowing
one disruption (the real scheduler puts the pods on the emptiest node, the new one); the two
replicas, each its own ServiceAccount bound to the base's RBAC, take such nodes away (drain
through the Eviction API, delete the Node). At seeded random times one fault of the matrix hits:

* ``pause-leader``: the replica holding the Lease is SIGSTOPped past its lease, then continued;
* ``etcd-freeze``: etcd is SIGSTOPped for 20 s;
* ``apiserver-restart``: kube-apiserver is stopped and started again;
* ``pdb-tighten``: a Deployment's PDB goes to maxUnavailable 0 for 30 s;
* ``node-deleted``: a node scaler is removing is deleted by someone else;
* ``binding-revoked``: the leader's ClusterRoleBinding is deleted for 10 s;
* ``tolerating-pod``: a pod tolerating every taint is bound to a node scaler is removing;
* ``metrics-glitch``: a node joins whose NodeMetrics say 1m CPU while its two pods' PodMetrics
  say 3 cores. It joins with scale-down disabled (``cluster-autoscaler.kubernetes.io/
  scale-down-disabled``), lifted once its pods run there and are in its metrics: before that it
  is an empty node, or one whose new pods count by their requests, and removable.

A replica that exits is started again a second later (as its Deployment would). At the end the
replicas are stopped and the invariants of ``tests/faultcheck.py`` are checked over the whole
audit log: pods only evicted, every node and pod write made by the Lease holder, nodes deleted
only tainted, cordoned and empty of workload pods, no node left tainted or cordoned, and no
glitched node tainted or cordoned while its pods ran there (once their Deployment is deleted it
is an empty node, rightly removed). Counts, the glitched nodes' verdicts and timelines, and the
violations are printed and written as JSON. ``--faults`` draws from a subset (``--faults
metrics-glitch --duration 3m`` to look at one case), ``--workdir`` keeps the replicas' logs.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))

import faultcheck  # type: ignore[import-not-found]  # noqa: E402  (tests/faultcheck.py)
import realk8s  # type: ignore[import-not-found]  # noqa: E402  (tests/realk8s.py)

NAMESPACE = "scaler-system"
APPS = "apps"
REPLICAS = ("scaler-a", "scaler-b")
GI, MI = 2**30, 2**20
BUSY_USAGE = (1000, int(9.6 * GI))  # utilization 0.6 of 4 cpu / 16 GiB
IDLE_USAGE = (120, GI)
LEASE_SECONDS = 15.0
METRICS_WINDOW_SECONDS = (
    5  # every NodeMetrics/PodMetrics window: pods older than this are in their node's reading
)
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
GLITCH_SHIELD_MAX_SECONDS = (
    90.0  # a glitched node's shield is lifted after this even if its pods never ran there
)
FAULTS = (
    "pause-leader", "etcd-freeze", "apiserver-restart", "pdb-tighten",
    "node-deleted", "binding-revoked", "tolerating-pod", "metrics-glitch",
)  # fmt: skip
FLAGS = [
    "--cloud-provider=kubernetes", "--scale-down-unneeded-time=0s", "--scan-interval=1s",
    "--node-delete-delay-after-taint=0s", "--scale-down-delay-after-add=0s",
    "--scale-down-delay-after-failure=5s", "--max-pod-eviction-time=30s",
    f"--namespace={NAMESPACE}", "--address=127.0.0.1:0", "--leader-elect=true",
]  # fmt: skip


def parse_duration(text: str) -> float:
    """``90s``, ``2m``, ``1h`` or plain seconds → seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    if text and text[-1] in units:
        return float(text[:-1]) * units[text[-1]]
    return float(text)


class Soak:
    """The cluster, the two replicas (restarted when they exit) and the fault injector."""

    def __init__(
        self, cp: Any, kubelet: Any, metrics: Any, tmp: Path, rng: random.Random, log: Callable[[str], None]
    ) -> None:
        self.cp, self.kubelet, self.metrics, self.tmp, self.rng, self.say = (
            cp,
            kubelet,
            metrics,
            tmp,
            rng,
            log,
        )
        self.kubeconfigs: dict[str, Path] = {}
        self.procs: dict[str, Any] = {}
        self.exits: Counter[str] = Counter()
        self.faults: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.added = 0
        self.glitched: dict[str, str] = {}  # glitched node -> the app whose pods run on it
        self.glitch_verdicts: dict[str, str] = {}  # glitched node -> its verdict once its pods were measured
        self.later: list[
            tuple[float, Callable[[], bool]]
        ] = []  # (not before, action; False: try again in 1 s)
        self.t0 = time.monotonic()

    # -- set-up and replicas ------------------------------------------------------------------------
    def setup(self) -> None:
        self.cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS}}])
        for sa in REPLICAS:
            self.cp.apply(realk8s.deploy_rbac("base", sa))
            self.kubeconfigs[sa] = self.cp.service_account_kubeconfig(
                sa, NAMESPACE, self.tmp / f"{sa}.kubeconfig", 7 * 86400
            )
        busy = []
        for i in range(3):
            name = f"busy-{i}"
            self.cp.add_node(name)
            self.metrics.node_usage[name] = BUSY_USAGE
            busy.append(name)
        self.cp.place(
            lambda: self.cp.deployment("backend", APPS, 3, cpu_millicores=500, memory_bytes=GI),
            APPS,
            "backend",
            3,
            on=busy,
        )

    def start_replica(self, sa: str) -> None:
        proc = realk8s.ScalerProcess(self.kubeconfigs[sa], FLAGS, self.tmp / f"{sa}.log").start()
        self.procs[sa] = proc

    def supervise(self) -> None:
        """Start again a replica that exited, as its Deployment would."""
        for sa, proc in list(self.procs.items()):
            if not proc.alive():
                self.exits[f"{sa} exit {proc.proc.returncode}"] += 1
                self.say(f"{sa} exited {proc.proc.returncode}; starting it again")
                self.start_replica(sa)

    def leader(self) -> str:
        """The ServiceAccount name that last wrote the Lease, ``""`` when none."""
        found = [u for _, u in faultcheck.holders(self.cp.audit(0)) if u]
        return found[-1].rsplit(":", 1)[-1] if found else ""

    # -- the workload --------------------------------------------------------------------------------
    def add_underused(self, hot: bool = False) -> str:
        self.added += 1
        name = f"{'glitch' if hot else 'idle'}-{self.added}"
        app = f"web-{self.added}"
        self.metrics.node_usage[name] = (1, 512 * MI) if hot else IDLE_USAGE
        if hot:
            # The glitch is a node whose NodeMetrics say 1m CPU while its pods' PodMetrics say 3
            # cores. Until its pods run there and are in its metrics it is an empty node (or one
            # whose new pods count by their requests), rightly removable with the soak's zero
            # unneeded time: it joins with scale-down disabled, lifted once its pods are measured.
            self.metrics.app_usage[app] = (1500, 256 * MI)
            self.glitched[name] = app
            self.cp.add_node(name, annotations={SCALE_DOWN_DISABLED: "true"})
            joined = time.monotonic()
            self.later.append((joined + 5, lambda: self.lift_shield(name, app, joined)))
        else:
            self.cp.add_node(name)
        # The scheduler prefers the new node (a preferred affinity; the simulation ignores it).
        affinity = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [name]}
                            ]
                        },
                    }
                ]
            }
        }
        self.cp.create({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": APPS},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}}, "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"affinity": affinity, "terminationGracePeriodSeconds": 5, "containers": [
                    {"name": "app", "image": "registry.k8s.io/pause:3.9",
                     "resources": {"requests": {"cpu": "100m", "memory": str(256 * MI)}}}]}}},
        })  # fmt: skip
        self.cp.pdb(app, APPS, app, max_unavailable=1)
        self.kubelet.hold(APPS, app, seconds=3.0)
        # Workloads older than the last five go (bounding the pods on the busy nodes).
        old = self.added - 6
        if old > 0:
            for kind, version in (("Deployment", "apps/v1"), ("PodDisruptionBudget", "policy/v1")):
                self.cp.delete(kind, f"web-{old}", APPS, version)
        return name

    def lift_shield(self, node: str, app: str, joined: float) -> bool:
        """Enable scale-down on glitched ``node`` once ``app``'s two pods run there and are in
        its metrics (Running, Ready, started more than a metrics window ago), or after
        :data:`GLITCH_SHIELD_MAX_SECONDS`; then read its verdict a few scans later. ``False``:
        not yet."""
        pods = [p for p in self.cp.pods(APPS, app) if (p.get("spec") or {}).get("nodeName") == node]
        measured = [
            p for p in pods
            if realk8s.pod_ready(p) and p["status"].get("startTime")
            and time.time() - realk8s._rfc3339(p["status"]["startTime"]) > METRICS_WINDOW_SECONDS + 2
        ]  # fmt: skip
        if len(measured) < 2 and time.monotonic() - joined < GLITCH_SHIELD_MAX_SECONDS:
            return False
        if self.cp.patch("Node", node, {"metadata": {"annotations": {SCALE_DOWN_DISABLED: None}}}) is None:
            self.say(f"glitched node {node}: gone before its shield was lifted")
            return True
        self.say(f"glitched node {node}: scale-down enabled ({len(measured)} hot pod(s) measured there)")
        if len(measured) == 2:
            self.later.append((time.monotonic() + 8, lambda: self.read_verdict(node)))
        return True

    def read_verdict(self, node: str) -> bool:
        """Record glitched ``node``'s verdict (its ``scale-down-status`` reason)."""
        obj = self.cp.get("Node", node)
        annotations = (obj or {}).get("metadata", {}).get("annotations") or {}
        verdict = json.loads(annotations.get(faultcheck.STATUS_ANNOTATION) or "{}")
        self.glitch_verdicts[node] = str(verdict.get("reason") or ("gone" if obj is None else "-"))
        return True

    def run_due(self) -> None:
        """Run the deferred actions that are due; those answering ``False`` again in a second."""
        now = time.monotonic()
        due = [a for a in self.later if a[0] <= now]
        self.later = [a for a in self.later if a[0] > now]
        for _, action in due:
            try:
                done = action()
            except Exception as e:  # the API server restarting or frozen (a fault): again later
                self.say(f"deferred action failed ({e}); again in 1 s")
                done = False
            if not done:
                self.later.append((now + 1.0, action))

    def removing(self) -> list[str]:
        """Nodes carrying scaler's taint now."""
        out = []
        for node in self.cp.list("Node"):
            if any(t["key"] == faultcheck.TAINT for t in node["spec"].get("taints") or []):
                out.append(node["metadata"]["name"])
        return out

    def wait(self, seconds: float, until: float) -> None:
        end = min(time.monotonic() + seconds, until)
        while time.monotonic() < end:
            self.supervise()
            self.run_due()
            time.sleep(min(1.0, max(0.0, end - time.monotonic())))

    # -- faults --------------------------------------------------------------------------------------
    def inject(self, fault: str, until: float) -> None:
        self.say(f"fault {fault}")
        if fault == "pause-leader":
            sa = self.leader()
            proc = self.procs.get(sa)
            if proc is None or not proc.alive():
                self.skipped[fault] += 1
                return
            proc.proc.send_signal(signal.SIGSTOP)
            try:
                time.sleep(LEASE_SECONDS + 8)
            finally:
                proc.proc.send_signal(signal.SIGCONT)
        elif fault == "etcd-freeze":
            self.cp.pause("etcd")
            try:
                time.sleep(20)
            finally:
                self.cp.resume("etcd")
        elif fault == "apiserver-restart":
            down = self.cp.restart_apiserver()
            self.say(f"kube-apiserver down {down:.1f}s")
        elif fault == "pdb-tighten":
            pdbs = self.cp.list("PodDisruptionBudget", APPS, "policy/v1")
            if not pdbs:
                self.skipped[fault] += 1
                return
            name = self.rng.choice(sorted(p["metadata"]["name"] for p in pdbs))
            path = f"/apis/policy/v1/namespaces/{APPS}/poddisruptionbudgets/{name}"
            self.cp.request(
                "PATCH", path, {"spec": {"maxUnavailable": 0}}, content_type="application/merge-patch+json"
            )
            self.wait(30, until + 60)
            self.cp.request(
                "PATCH", path, {"spec": {"maxUnavailable": 1}}, content_type="application/merge-patch+json"
            )
        elif fault == "node-deleted":
            targets = self.removing()
            if not targets:
                self.skipped[fault] += 1
                return
            self.cp.delete("Node", self.rng.choice(targets))
        elif fault == "binding-revoked":
            sa = self.leader() or REPLICAS[0]
            self.cp.delete("ClusterRoleBinding", sa, api_version="rbac.authorization.k8s.io/v1")
            try:
                self.wait(10, until + 60)
            finally:
                self.cp.apply(realk8s.deploy_rbac("base", sa))
        elif fault == "tolerating-pod":
            targets = self.removing()
            if not targets:
                self.skipped[fault] += 1
                return
            node = self.rng.choice(targets)
            name = f"sticky-{self.added}-{self.faults[fault]}"
            self.cp.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": APPS},
                            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}}, "template": {
                                "metadata": {"labels": {"app": name}},
                                "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                                         "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}}}})  # fmt: skip
            self.wait(30, until + 60)
            self.cp.delete("Deployment", name, APPS, "apps/v1")
        elif fault == "metrics-glitch":
            self.add_underused(hot=True)
        self.faults[fault] += 1


def glitch_timeline(rec: Any, node: str, app: str) -> list[str]:
    """What happened on glitched ``node`` in resourceVersion order: its taint and cordon changes
    and the binding and deletion of ``app``'s pods (the hot ones) and of other workload pods."""
    rows: list[tuple[int, str]] = []
    last = (False, False)
    for s in rec.nodes.get(node, []):
        now = (s.tainted, s.cordoned)
        if now != last or s.event in ("ADDED", "DELETED", "VANISHED"):
            rows.append((s.rv, f"node {s.event.lower()} tainted={s.tainted} cordoned={s.cordoned}"))
        last = now
    for life in rec.pods.values():
        if life.node != node or not life.workload:
            continue
        hot = "hot " if life.name.startswith(f"{APPS}/{app}-") else ""
        rows.append((life.bound_rv, f"{hot}pod {life.name} bound"))
        if life.deleted_rv is not None:
            rows.append((life.deleted_rv, f"{hot}pod {life.name} deleted"))
    return [f"rv {rv}: {text}" for rv, text in sorted(rows)]


def glitch_violations(rec: Any, glitched: dict[str, str]) -> list[str]:
    """A glitched node tainted or cordoned while one of its hot pods (the app whose PodMetrics
    say 1.5 cores each) was bound to it: its NodeMetrics (1m CPU) were taken for its usage. Once
    its pods are gone (their Deployment deleted) it is an empty node, rightly removed."""
    out = []
    for node, app in glitched.items():
        hot = [
            life for life in rec.pods.values() if life.node == node and life.name.startswith(f"{APPS}/{app}-")
        ]
        for s in rec.nodes.get(node, []):
            if not (s.tainted or s.cordoned) or s.event in ("DELETED", "VANISHED"):
                continue
            bound = [
                h.name for h in hot if h.bound_rv <= s.rv and (h.deleted_rv is None or h.deleted_rv > s.rv)
            ]
            if bound:
                what = "tainted" if s.tainted else "cordoned"
                out.append(
                    f"glitched node {node} (NodeMetrics 1m CPU, its pods 3 cores) was {what} at resourceVersion "
                    f"{s.rv} while its pod(s) {', '.join(sorted(bound))} ran there"
                )
                break
    return out


def run(
    duration: float,
    seed: int,
    node_interval: float,
    fault_interval: float,
    out: Path | None,
    faults: tuple[str, ...] = FAULTS,
    workdir: Path | None = None,
) -> int:
    """The soak; returns 0 when no invariant broke, 1 otherwise. ``faults``: the faults drawn
    from; ``workdir``: where the control plane's state and the replicas' logs go (kept), else
    a temporary directory."""
    problem = realk8s.unavailable()
    if problem:
        print(f"soak: {problem}", file=sys.stderr)
        return 2
    rng = random.Random(seed)
    started = time.monotonic()

    def say(text: str) -> None:
        print(f"[{time.monotonic() - started:7.1f}s] {text}", flush=True)

    with tempfile.TemporaryDirectory(prefix="scaler-soak-") as tmpdir:
        tmp = Path(tmpdir) if workdir is None else workdir
        tmp.mkdir(parents=True, exist_ok=True)
        with realk8s.running_cluster(tmp / "control-plane") as (cp, kubelet, metrics):
            metrics.window_seconds = METRICS_WINDOW_SECONDS
            soak = Soak(cp, kubelet, metrics, tmp, rng, say)
            soak.setup()
            since = cp.audit_offset()
            with faultcheck.ClusterRecorder(cp) as rec:
                try:
                    for sa in REPLICAS:
                        soak.start_replica(sa)
                    until = time.monotonic() + duration
                    next_node = time.monotonic()
                    next_fault = time.monotonic() + rng.expovariate(1.0 / fault_interval)
                    while time.monotonic() < until:
                        now = time.monotonic()
                        if now >= next_node:
                            say(f"node {soak.add_underused()} joins")
                            next_node = now + node_interval
                        if now >= next_fault:
                            soak.inject(rng.choice(faults), until)
                            next_fault = time.monotonic() + rng.expovariate(1.0 / fault_interval)
                        soak.wait(min(next_node, next_fault) - time.monotonic(), until)
                    say("settling: waiting until no node is being removed")
                    settle_end = time.monotonic() + 180
                    while time.monotonic() < settle_end and soak.removing():
                        soak.wait(2, settle_end)
                    for proc in soak.procs.values():
                        if proc.alive():
                            code = proc.terminate(120)
                            soak.exits[f"final exit {code}"] += 1
                finally:  # whatever happened (Ctrl-C included), no replica outlives the soak
                    for proc in soak.procs.values():
                        proc.kill()
            events = cp.audit(since)
            users = [realk8s.sa_user(sa, NAMESPACE) for sa in REPLICAS]
            report = faultcheck.violations(events, users, rec, lease_duration=LEASE_SECONDS)
            problems = list(report.violations) + faultcheck.leftovers(cp)
            glitches = {node: glitch_timeline(rec, node, app) for node, app in soak.glitched.items()}
            problems += glitch_violations(rec, soak.glitched)
            deleted = sum(
                1
                for e in events
                if e.user in users and e.resource == "nodes" and e.verb == "delete" and e.code == 200
            )
            verdicts = {}
            for node in cp.list("Node"):
                annotations = node["metadata"].get("annotations") or {}
                verdict = json.loads(annotations.get(faultcheck.STATUS_ANNOTATION) or "{}")
                verdicts[node["metadata"]["name"]] = (
                    f"{verdict.get('reason', '-')}: {verdict.get('detail', '')}"
                )
            result = {
                "duration_seconds": round(time.monotonic() - started, 1),
                "seed": seed,
                "nodes_added": soak.added,
                "nodes_deleted_by_scaler": deleted,
                "faults": dict(soak.faults),
                "faults_skipped": dict(soak.skipped),
                "replica_exits": dict(soak.exits),
                "counts": dict(report.counts),
                "violations": problems,
                "nodes_left": verdicts,
                "glitched_nodes": glitches,
                "glitched_verdicts": dict(Counter(soak.glitch_verdicts.values())),
                "glitched_removed_after_their_pods_left": sum(1 for n in soak.glitched if rec.deletions(n)),
            }
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if out is not None:
        out.write_text(text + "\n")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration", default="30m", help="how long faults are injected (90s, 2m, 1h; default 30m)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the fault times and choices (default 1)")
    parser.add_argument("--node-interval", default="20s", help="a new underused node every (default 20s)")
    parser.add_argument("--fault-interval", default="60s", help="mean time between faults (default 60s)")
    parser.add_argument("--out", type=Path, default=None, help="write the result as JSON here too")
    parser.add_argument(
        "--faults",
        default=",".join(FAULTS),
        help=f"comma-separated faults to draw from (default all: {','.join(FAULTS)})",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the control plane's state and the replicas' logs here",
    )
    args = parser.parse_args(argv)
    faults = tuple(f.strip() for f in args.faults.split(",") if f.strip())
    bad = [f for f in faults if f not in FAULTS]
    if bad or not faults:
        print(
            f"soak: error: unknown fault {bad[0] if bad else repr(args.faults)} (known: {', '.join(FAULTS)})",
            file=sys.stderr,
        )
        return 2
    try:
        duration = parse_duration(args.duration)
        node_interval = parse_duration(args.node_interval)
        fault_interval = parse_duration(args.fault_interval)
    except ValueError as e:
        print(f"soak: error: bad duration: {e}", file=sys.stderr)
        return 2
    return run(duration, args.seed, node_interval, fault_interval, args.out, faults, args.workdir)


if __name__ == "__main__":
    raise SystemExit(main())
