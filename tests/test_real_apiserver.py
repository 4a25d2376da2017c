"""`scaler run` against a real kube-apiserver v1.28.4 (with kube-controller-manager and
kube-scheduler), as its own ServiceAccount with the RBAC rendered from ``deploy/``.

One control plane (``../shared/k8s``, see :mod:`realk8s`) serves the whole module; each test
starts from a cluster without nodes or workloads. The test plays the kubelet (pods bound to a
node become Running and Ready; pods being deleted disappear) and serves ``metrics.k8s.io``
through an APIService. ReplicaSets replace evicted pods, the scheduler places them, the
disruption controller keeps PDB status and the Eviction API enforces PDBs: all real.

Every test checks, from the API server's audit log, that the ServiceAccount's requests were
never denied and that pods were only removed through ``pods/eviction``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultcheck import ClusterRecorder, NodeState, holders, leftovers, stale_windows, violations
from realk8s import (
    CA_NAMESPACE,
    GI,
    MI,
    AuditEvent,
    ClusterAutoscaler,
    ControlPlane,
    Kubelet,
    MetricsServer,
    ScalerProcess,
    Throttle,
    ca_unavailable,
    running_cluster,
    sa_user,
    scaler_process,
    unavailable,
)
from realk8s import (
    deploy_rbac as rbac,
)
from waiting import holds_for, wait_for

from benchmarks.peer.objects import ANNOTATION_KWOK_GROUP, ANNOTATION_KWOK_MANAGED, kwok_config_maps
from scaler.kube.writer import (
    ANNOTATION_OWNER,
    ANNOTATION_REPLICA,
    ANNOTATION_STATE,
    ANNOTATION_STATUS,
    LABEL_STATUS,
)
from scaler.model.records import TAINT_TO_BE_DELETED
from scaler.sources.watch import WATCHED_CALLS

pytestmark = pytest.mark.skipif(bool(unavailable()), reason=unavailable() or "available")

NAMESPACE = "scaler-system"  # the deploy/ manifests' namespace
APPS = "apps"  # the test workloads' namespace
SA = "scaler"
SA_USER = f"system:serviceaccount:{NAMESPACE}:{SA}"
BUSY_USAGE = (1000, int(9.6 * GI))  # 25% cpu, 60% memory of 4 cpu / 16 GiB: utilization 0.6
IDLE_USAGE = (120, GI)  # utilization 0.06
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

SHORT_LEASE_SECONDS = 8.0
SHORT_LEASE = [
    f"--leader-elect-lease-duration={SHORT_LEASE_SECONDS:g}s", "--leader-elect-renew-deadline=5s",
    "--leader-elect-retry-period=1s",
]  # fmt: skip
"""Leader-election timings of the cases that wait for a lease to run out (a paused leader, a
frozen etcd): 8 s instead of 15 s. A write checked by the fence still has 3 s (lease duration
minus renew deadline) to reach the API server; the other cases keep the defaults, so that a
kube-apiserver restart stays shorter than the renew deadline."""

FAST = [
    "--cloud-provider=kubernetes", "--scale-down-unneeded-time=0s", "--scan-interval=1s",
    "--node-delete-delay-after-taint=0s", "--scale-down-delay-after-add=0s", f"--namespace={NAMESPACE}",
    "--address=127.0.0.1:0",  # a free port the process picks itself (ScalerProcess.metrics_port)
]  # fmt: skip


@dataclass
class World:
    """The shared control plane, its kubelet and metrics server, and per-ServiceAccount
    kubeconfigs; :meth:`reset` empties the cluster between tests."""

    cp: ControlPlane
    kubelet: Kubelet
    metrics: MetricsServer
    tmp: Path
    kubeconfigs: dict[str, Path]
    since: int = 0  # audit log offset at the start of the current test

    def reset(self) -> None:
        self.kubelet.release_holds()
        self.metrics.node_usage.clear()
        self.metrics.app_usage.clear()
        self.metrics.fail_status = None
        self.metrics.window_seconds = 30
        for kind, version in (("Deployment", "apps/v1"), ("ReplicaSet", "apps/v1"), ("DaemonSet", "apps/v1"),
                              ("PodDisruptionBudget", "policy/v1")):  # fmt: skip
            self.cp.delete_all(kind, APPS, version)
        self.cp.delete_all("Pod", APPS, grace=0)
        wait_for(lambda: not self.cp.pods(APPS), 30, "the previous test's pods to go")
        self.cp.delete_all("Node")
        self.cp.delete("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1")
        self.cp.delete("ConfigMap", "scaler-status", NAMESPACE)
        self.since = self.cp.audit_offset()

    def node(self, name: str, usage: tuple[int, int]) -> str:
        self.cp.add_node(name)
        self.metrics.node_usage[name] = usage
        return name

    def busy_nodes(self, prefix: str, count: int = 2) -> list[str]:
        """``count`` nodes at utilization 0.6, each running one ``backend`` pod."""
        names = [self.node(f"{prefix}-busy-{i}", BUSY_USAGE) for i in range(count)]
        self.cp.place(lambda: self.cp.deployment("backend", APPS, count, cpu_millicores=500, memory_bytes=GI),
                      APPS, "backend", count, on=names)  # fmt: skip
        return names

    def audit(self, user: str = SA_USER) -> list[AuditEvent]:
        return self.cp.audit(self.since, user)

    def scaler(
        self, *args: str, sa: str = SA, log: str = "scaler.log", env: dict[str, str] | None = None
    ) -> Any:
        return scaler_process(self.kubeconfigs[sa], [*FAST, *args], self.tmp / log, env)

    def events_for(self, node: str, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.cp.events(reason) if e["involvedObject"].get("name") == node]


@contextlib.contextmanager
def new_world(tmp: Path, apiserver_args: tuple[str, ...] = ()) -> Iterator[World]:
    """A control plane (kube-apiserver with ``apiserver_args``) with the test namespace, the
    ServiceAccounts bound to ``deploy/``'s RBAC and their kubeconfigs."""
    with running_cluster(tmp / "control-plane", apiserver_args) as (cp, kubelet, metrics):
        cp.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": APPS}}])
        cp.apply(rbac("base", SA))  # --cloud-provider=kubernetes deletes Node objects: the base's RBAC
        cp.apply(rbac("overlays/gke", "scaler-gke"))
        cp.apply(rbac("overlays/dry-run", "scaler-dry-run"))
        for replica in ("scaler-a", "scaler-b"):  # the fault matrix's two replicas
            cp.apply(rbac("base", replica))
        kubeconfigs = {
            name: cp.service_account_kubeconfig(name, NAMESPACE, tmp / f"{name}.kubeconfig")
            for name in (SA, "scaler-gke", "scaler-dry-run", "scaler-a", "scaler-b")
        }
        yield World(cp, kubelet, metrics, tmp, kubeconfigs)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with new_world(tmp_path_factory.mktemp("real-apiserver")) as w:
        yield w


@pytest.fixture(scope="module")
def uncached_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A second control plane whose kube-apiserver serves WATCHes from etcd (no watch cache): a
    watch resumed from a resourceVersion that an etcd compaction removed gets ``410 Expired``."""
    with new_world(tmp_path_factory.mktemp("real-apiserver-uncached"), ("--watch-cache=false",)) as w:
        yield w


@pytest.fixture
def w(world: World) -> Iterator[World]:
    world.reset()
    with ClusterRecorder(world.cp) as rec:
        yield world
    assert not world.kubelet.errors, world.kubelet.errors
    assert_audit_clean(world.audit())
    # The fault matrix's invariants hold in every test (faultcheck): fenced writes where the
    # ServiceAccount ran with leader election, safe node deletes, nothing left behind.
    users = [f"system:serviceaccount:{NAMESPACE}:{sa}" for sa in (SA, "scaler-gke", "scaler-dry-run")]
    report = violations(world.cp.audit(world.since), users, rec, leased=None)
    assert not report.violations and not leftovers(world.cp), (report.violations, leftovers(world.cp))


def assert_audit_clean(events: list[AuditEvent]) -> None:
    """No request of the ServiceAccount was denied; no pod was removed except by eviction."""
    denied = [e.display for e in events if e.code in (401, 403)]
    assert denied == [], f"requests denied: {denied}"
    deleted = [e.display for e in events if e.resource == "pods" and e.verb in ("delete", "deletecollection")]
    assert deleted == [], f"pods deleted, not evicted: {deleted}"


def tainted(cp: ControlPlane, name: str) -> bool:
    node = cp.get("Node", name)
    return node is not None and any(t["key"] == TAINT_TO_BE_DELETED for t in node["spec"].get("taints") or [])


def untouched(cp: ControlPlane, name: str) -> bool:
    """The node exists, without scaler's taint, cordon or removal annotations (its status
    annotation, the verdict, may be there)."""
    node = cp.get("Node", name)
    if node is None:
        return False
    annotations = node["metadata"].get("annotations") or {}
    return (
        not tainted(cp, name)
        and not node["spec"].get("unschedulable")
        and not any(k.startswith("scaler.io/") and k != ANNOTATION_STATUS for k in annotations)
    )


def evictions(events: list[AuditEvent], pod: str | None = None) -> list[AuditEvent]:
    return [e for e in events if e.subresource == "eviction" and (pod is None or e.name == pod)]


def stuck_drain(w: World, prefix: str) -> tuple[list[str], str, list[str]]:
    """Two busy nodes and an underused one running two ``stuck`` pods under a PDB allowing one
    disruption; replacement ``stuck`` pods never become Ready, so after the first eviction the
    PDB refuses (429) for good. Returns (busy nodes, the underused node, its stuck pods)."""
    busy = w.busy_nodes(prefix)
    under = w.node(f"{prefix}-under", IDLE_USAGE)
    w.cp.place(lambda: w.cp.deployment("stuck", APPS, 2), APPS, "stuck", 2, on=[under])
    w.cp.pdb("stuck", APPS, "stuck", max_unavailable=1)
    wait_for(lambda: w.cp.pdb_allows("stuck", APPS) == 1, 30, "PDB stuck to allow 1")
    w.kubelet.hold(APPS, "stuck")
    pods = [p["metadata"]["name"] for p in w.cp.pods(APPS, "stuck")]
    return busy, under, pods


# -- point 1: the live controller on a real API server --------------------------------------------


def test_empty_and_underused_nodes_removed_429_retried_and_kinds_listed_once(w: World) -> None:
    """An empty node and an underused one go (Node objects deleted); the underused node's two
    ``web`` pods are evicted under a PDB allowing one disruption: the second eviction answers
    429 until the first replacement is Ready, and is retried. Start-up LISTs each kind once."""
    busy = w.busy_nodes("rm")
    under = w.node("rm-under", IDLE_USAGE)
    empty = w.node("rm-empty", (50, 512 * MI))
    w.cp.place(lambda: w.cp.deployment("web", APPS, 2), APPS, "web", 2, on=[under])
    w.cp.pdb("web", APPS, "web", max_unavailable=1)
    wait_for(lambda: w.cp.pdb_allows("web", APPS) == 1, 30, "PDB web to allow 1")
    w.kubelet.hold(APPS, "web", seconds=3.0)  # replacements pass their readiness probe after 3 s
    web_pods = {p["metadata"]["name"] for p in w.cp.pods(APPS, "web")}
    with w.scaler() as proc:
        wait_for(lambda: w.cp.get("Node", empty) is None, 60, "the empty node to be deleted")
        wait_for(lambda: w.cp.get("Node", under) is None, 90, "the underused node to be deleted")
        assert proc.terminate(30) == 0, proc.output
    for name in busy:
        assert untouched(w.cp, name), f"busy node {name} was touched"
        # The verdict on the node, patched by the ServiceAccount (nodes patch), once per change.
        meta = (w.cp.get("Node", name) or {})["metadata"]
        verdict = json.loads(meta["annotations"][ANNOTATION_STATUS])
        assert verdict["status"] == "unremovable" and meta["labels"][LABEL_STATUS] == verdict["reason"], meta
    wait_for(lambda: len(w.cp.ready_pods(APPS, "web")) == 2, 10, "2 web pods Ready")
    ready = w.cp.ready_pods(APPS, "web")
    assert {p["spec"]["nodeName"] for p in ready} <= set(busy)
    events = w.audit()
    evicted = evictions(events)
    assert {e.name for e in evicted if e.code == 201} == web_pods, [e.display for e in evicted]
    refused = [e for e in evicted if e.code == 429]
    assert refused, f"the second eviction should have met the PDB (429): {[e.display for e in evicted]}"
    assert all(any(e.name == r.name and e.code == 201 and e.time >= r.time for e in evicted) for r in refused)
    patched = Counter(
        e.name for e in events if e.resource == "nodes" and e.verb == "patch" and e.name in busy
    )
    assert set(patched) == set(busy) and max(patched.values()) == 1, (
        f"one status patch per busy node: {patched}"
    )
    deleted_nodes = sorted(
        e.name for e in events if e.resource == "nodes" and e.verb == "delete" and e.code == 200
    )
    assert deleted_nodes == sorted([empty, under])
    # Start-up lists every kind once: node-group sizing and the watch caches share the LIST.
    lists = Counter(
        (e.group, e.resource) for e in events
        if e.verb == "list" and e.group != "metrics.k8s.io" and "fieldSelector" not in e.uri
    )  # fmt: skip
    assert lists == Counter({(c.group, c.resource): 1 for c in WATCHED_CALLS}), lists


def test_pdb_that_never_allows_rolls_the_node_back(w: World) -> None:
    busy, under, pods = stuck_drain(w, "never")
    with w.scaler("--max-pod-eviction-time=5s") as proc:
        wait_for(lambda: w.events_for(under, "ScaleDownFailed"), 60, "the failed scale-down")
        wait_for(lambda: untouched(w.cp, under), 20, "the node rolled back")
        assert proc.terminate(30) == 0, proc.output
    failed = w.events_for(under, "ScaleDownFailed")
    assert len(failed) == 1 and "429" in failed[0]["message"], failed
    remaining = [
        p["metadata"]["name"] for p in w.cp.pods(APPS, "stuck") if p["spec"].get("nodeName") == under
    ]
    assert len(remaining) == 1 and remaining[0] in pods, "one pod evicted, the other refused by the PDB"
    refused = [e for e in evictions(w.audit(), remaining[0])]
    assert refused and all(e.code == 429 for e in refused), [e.display for e in refused]
    assert all(untouched(w.cp, n) for n in busy)


def test_kill_9_mid_drain_then_restart_rolls_back(w: World) -> None:
    _, under, _ = stuck_drain(w, "kill")
    with w.scaler("--max-pod-eviction-time=120s", "--leader-elect=false") as proc:
        wait_for(
            lambda: any(e.code == 429 for e in evictions(w.audit())),
            60,
            "a refused eviction (drain in flight)",
        )
        proc.kill()
    node = w.cp.get("Node", under)
    assert node is not None and node["spec"].get("unschedulable") and tainted(w.cp, under)
    assert (node["metadata"].get("annotations") or {}).get(ANNOTATION_OWNER) == "scaler"
    with w.scaler("--max-pod-eviction-time=120s", "--leader-elect=false", log="restart.log") as proc:
        wait_for(lambda: untouched(w.cp, under), 30, "the restart to roll the node back")
        # The Event is posted after the node's patch (Controller.recover): wait for it too.
        wait_for(lambda: w.events_for(under, "ScaleDownRolledBack"), 10, "the ScaleDownRolledBack event")
        assert proc.terminate(30) == 0, proc.output
    assert w.cp.get("Node", under) is not None


def test_sigterm_mid_drain_rolls_back_releases_the_lease_and_exits(w: World) -> None:
    _, under, _ = stuck_drain(w, "term")
    with w.scaler("--max-pod-eviction-time=120s") as proc:
        wait_for(
            lambda: any(e.code == 429 for e in evictions(w.audit())),
            60,
            "a refused eviction (drain in flight)",
        )
        # The drain it interrupts would last --max-pod-eviction-time (120 s): an exit within the
        # (liveness) bound shows it did not wait for the drain.
        assert proc.terminate(30) == 0, proc.output
    assert untouched(w.cp, under)
    lease = w.cp.get("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1")
    assert lease is not None and not lease["spec"].get("holderIdentity"), "lease released"


def metrics_text(port: int) -> str:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError:
        return ""


def test_two_replicas_on_one_host_elect_one_leader_and_fail_over(w: World) -> None:
    """Two processes on one host, without POD_NAME: each holds its own identity (hostname plus
    a random suffix, as client-go), exactly one leads, and the other takes over on SIGTERM."""
    w.busy_nodes("ha", count=1)
    procs = [
        ScalerProcess(w.kubeconfigs[SA], [*FAST, "--leader-elect=true"],
                      w.tmp / f"replica-{i}.log").start()
        for i in range(2)
    ]  # fmt: skip
    try:
        ports = [p.metrics_port() for p in procs]
        wait_for(
            lambda: all("scaler_is_leader" in metrics_text(p) for p in ports), 60, "both replicas serving"
        )
        lease = wait_for(lambda: (w.cp.get("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1") or {})
                         .get("spec", {}).get("holderIdentity") and w.cp.get("Lease", "scaler", NAMESPACE,
                                                                             "coordination.k8s.io/v1"), 30, "a leader")  # fmt: skip
        taken = time.monotonic()
        holder = lease["spec"]["holderIdentity"]
        assert re.fullmatch(re.escape(socket.gethostname()) + r"_[0-9a-f-]{36}", holder), holder

        def leading() -> list[int]:
            return [i for i, p in enumerate(ports) if "scaler_is_leader 1.0" in metrics_text(p)]

        wait_for(lambda: len(leading()) == 1, 30, "one replica leading")
        holds_for(lambda: len(leading()) == 1, taken + 3 - time.monotonic(),
                  "exactly one replica leading until 3 s after the lease was taken (past the 2 s retry period)",
                  poll=0.25)  # fmt: skip
        leader = leading()[0]
        follower = 1 - leader
        assert procs[leader].terminate(30) == 0, procs[leader].output
        wait_for(lambda: "scaler_is_leader 1.0" in metrics_text(ports[follower]), 30, "fail-over")
        lease = w.cp.get("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1")
        assert lease is not None and lease["spec"]["holderIdentity"] not in ("", holder)
        # The new leader acts: a new empty node goes.
        empty = w.node("ha-empty", (50, 512 * MI))
        wait_for(lambda: w.cp.get("Node", empty) is None, 60, "the new leader to delete the empty node")
        assert procs[follower].terminate(30) == 0, procs[follower].output
    finally:
        for p in procs:
            p.kill()


# -- point 2: permissions checked before acting ------------------------------------------------------


def test_gke_rbac_with_the_kubernetes_provider_exits_2_naming_nodes_delete(w: World) -> None:
    """The gke overlay's ClusterRole has no ``nodes delete`` (GKE removes Node objects itself);
    run with ``--cloud-provider kubernetes`` it would drain a node and then fail to delete it.
    The start-up check refuses instead, before any taint or eviction."""
    w.busy_nodes("perm")
    under = w.node("perm-under", IDLE_USAGE)
    w.cp.place(lambda: w.cp.deployment("web", APPS, 2), APPS, "web", 2, on=[under])
    with w.scaler(sa="scaler-gke") as proc:
        code = proc.wait(60)
        out = proc.output
    assert code == 2, out
    errors = [line for line in out.splitlines() if line.startswith("scaler: error:")]
    assert len(errors) == 1 and "delete nodes" in errors[0], out
    assert "Traceback" not in out
    gke_user = f"system:serviceaccount:{NAMESPACE}:scaler-gke"
    acted = [e.display for e in w.audit(gke_user) if e.verb not in ("create", "get", "list", "watch")
             or e.subresource == "eviction" or (e.verb == "create" and e.resource != "selfsubjectaccessreviews")]  # fmt: skip
    assert acted == [], acted
    assert untouched(w.cp, under)
    assert_audit_clean(w.audit(gke_user))


def test_dry_run_rbac_passes_the_check_only_with_dry_run(w: World) -> None:
    """The dry-run overlay's ServiceAccount runs ``scaler run --dry-run``, which writes nothing to
    any node or pod (its verdicts go to the status ConfigMap); without --dry-run, or with
    --write-node-status=true, the start-up check refuses, naming what is missing."""
    w.busy_nodes("dry", count=1)
    user = f"system:serviceaccount:{NAMESPACE}:scaler-dry-run"
    with w.scaler("--dry-run", sa="scaler-dry-run", log="dry.log") as proc:
        proc.wait_output("scaler run started")
        wait_for(lambda: "mode: dry-run" in status_text(w.cp) and "dry-busy-0" in status_text(w.cp), 60,
                 "the dry-run's verdicts in the status ConfigMap")  # fmt: skip
        assert proc.terminate(30) == 0, proc.output
    writes = [e.display for e in w.audit(user) if e.resource in ("nodes", "pods") and e.verb in WRITE_VERBS]
    assert writes == [], f"the dry-run wrote to nodes or pods: {writes}"
    with w.scaler("--dry-run", "--write-node-status=true", sa="scaler-dry-run", log="dry-status.log") as proc:
        code = proc.wait(60)
        out = proc.output
    assert code == 2 and "patch nodes" in out, out
    with w.scaler(sa="scaler-dry-run", log="dry-active.log") as proc:
        code = proc.wait(60)
        out = proc.output
    assert code == 2, out
    assert "get nodes" in out and "create pods/eviction" in out and "delete nodes" in out, out
    assert_audit_clean(w.audit(f"system:serviceaccount:{NAMESPACE}:scaler-dry-run"))


# -- point 3: a failed removal cools down, whatever step failed -----------------------------------


def test_failed_drain_cools_down_and_the_node_is_not_retried(w: World) -> None:
    """A pod covered by two PDBs cannot be evicted (the Eviction API answers 500: more than one
    PodDisruptionBudget), although each PDB allows a disruption, so the plan picks its node and
    the drain fails for good. The failure starts --scale-down-delay-after-failure (an empty node
    that appears meanwhile waits) and the node is not tainted again before
    --unremovable-node-recheck-timeout; today's main re-taints it every loop."""
    busy = w.busy_nodes("cool")
    under = w.node("cool-under", IDLE_USAGE)
    w.cp.place(lambda: w.cp.deployment("twin", APPS, 1), APPS, "twin", 1, on=[under])
    w.cp.pdb("twin-a", APPS, "twin", max_unavailable=1)
    w.cp.pdb("twin-b", APPS, "twin", max_unavailable=1)
    wait_for(
        lambda: w.cp.pdb_allows("twin-a", APPS) == 1 and w.cp.pdb_allows("twin-b", APPS) == 1, 30, "PDBs"
    )
    args = [
        "--max-pod-eviction-time=1s",
        "--scale-down-delay-after-failure=12s",
        "--unremovable-node-recheck-timeout=5m",
    ]
    with w.scaler(*args) as proc:
        failed = wait_for(lambda: w.events_for(under, "ScaleDownFailed"), 60, "the failed drain")
        assert "500" in failed[0]["message"], failed
        wait_for(lambda: untouched(w.cp, under), 20, "the rollback")
        rolled_back = time.monotonic()
        empty = w.node("cool-empty", (50, 512 * MI))
        wait_for(
            lambda: "scale-down-delay-after-failure" in status_text(w.cp), 10, "the cooldown in the status"
        )
        assert "RecentlyUnremovable" in status_text(w.cp)
        holds_for(lambda: w.cp.get("Node", empty) is not None, rolled_back + 6 - time.monotonic(),
                  "the empty node kept through the cooldown's first 6 s (of 12)", poll=0.25)  # fmt: skip
        wait_for(lambda: w.cp.get("Node", empty) is None, 30, "the empty node, after the cooldown")
        holds_for(lambda: untouched(w.cp, under), 2,
                  "the failed node left alone after the cooldown (two more 1 s loops)", poll=0.25)  # fmt: skip
        assert proc.terminate(30) == 0, proc.output
    taints = [e for e in w.events_for(under, "ScaleDown") if "marked the node" in e["message"]]
    assert len(taints) == 1, f"the failed node was tainted {len(taints)} times"
    assert len(w.events_for(under, "ScaleDownFailed")) == 1
    assert all(untouched(w.cp, n) for n in busy)


def status_text(cp: ControlPlane) -> str:
    cm = cp.get("ConfigMap", "scaler-status", NAMESPACE)
    return str(((cm or {}).get("data") or {}).get("status") or "")


# -- point 4: a metrics outage is a state -----------------------------------------------------------


def test_metrics_outage_is_a_state_reported_once_healthy_and_acting_on_nothing(w: World) -> None:
    """metrics.k8s.io answers 503 (its APIService's backend is down): one warning, /healthz
    stays green past --max-inactivity, the status ConfigMap and scaler_metrics_api_available say
    so, nothing is removed; when metrics return, one more warning and scale-down resumes."""
    w.busy_nodes("out", count=1)
    empty = w.node("out-empty", (50, 512 * MI))
    w.metrics.fail_status = 503
    args = ["--scan-interval=0.5s", "--max-inactivity=2s", "--scale-down-unneeded-time=3s"]
    with w.scaler(*args) as proc:
        port = proc.metrics_port()
        wait_for(lambda: "Unavailable" in status_text(w.cp), 60, "the outage in the status ConfigMap")

        def healthy_and_idle() -> bool:
            return (httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
                    and w.cp.get("Node", empty) is not None and untouched(w.cp, empty))  # fmt: skip

        holds_for(healthy_and_idle, 4, "/healthz green and the empty node kept, for twice --max-inactivity",
                  poll=0.25)  # fmt: skip
        assert "scaler_metrics_api_available 0.0" in metrics_text(port)
        assert "MetricsUnavailable" in status_text(w.cp)
        w.metrics.fail_status = None
        wait_for(lambda: "scaler_metrics_api_available 1.0" in metrics_text(port), 20, "metrics back")
        wait_for(lambda: w.cp.get("Node", empty) is None, 30, "scale-down to resume")
        assert proc.terminate(30) == 0, proc.output
        out = proc.output
    assert "Traceback" not in out, out[-3000:]
    warnings = [line for line in out.splitlines() if " WARNING " in line and "metrics API" in line]
    assert len(warnings) == 2, warnings
    assert "unavailable" in warnings[0] and "503" in warnings[0] and "available again" in warnings[1]


# -- hot-node relief: the real kube-scheduler honours the soft taint ---------------------------------


def test_a_relieved_pods_replacement_avoids_the_soft_tainted_hot_node(w: World) -> None:
    """``hot`` uses 90% of its cpu, mostly through ``hog``; by requests it is the emptiest node,
    so the real kube-scheduler puts new pods there (a probe shows it). scaler taints it
    ``scaler.io/hot:PreferNoSchedule`` and evicts ``hog``; the ReplicaSet's replacement, placed
    by the real kube-scheduler (TaintToleration score, weight 3), lands on another node."""
    hot = w.node("relief-hot", (3600, 4 * GI))
    cool = [w.node(f"relief-cool-{i}", (200, 2 * GI)) for i in range(2)]
    w.cp.place(lambda: w.cp.deployment("backend", APPS, 2, cpu_millicores=1500), APPS, "backend", 2, on=cool)
    w.cp.place(lambda: w.cp.deployment("hog", APPS, 1, cpu_millicores=500), APPS, "hog", 1, on=[hot])
    w.metrics.app_usage["hog"] = (1500, GI)
    # Without the taint, the scheduler prefers the hot node (LeastAllocated: fewest requests).
    w.cp.deployment("probe", APPS, 1, cpu_millicores=500)
    probe = wait_for(lambda: w.cp.ready_pods(APPS, "probe"), 60, "the probe pod")
    assert probe[0]["spec"]["nodeName"] == hot, "the probe should land on the emptiest node by requests"
    w.cp.delete("Deployment", "probe", APPS, "apps/v1")
    wait_for(lambda: not w.cp.pods(APPS, "probe"), 30, "the probe to go")
    first_hog = w.cp.pods(APPS, "hog")[0]["metadata"]["name"]

    def soft_taint() -> dict[str, Any] | None:
        node = w.cp.get("Node", hot) or {}
        return next(
            (t for t in (node.get("spec") or {}).get("taints") or [] if t["key"] == "scaler.io/hot"), None
        )

    def replacement() -> list[dict[str, Any]]:
        return [p for p in w.cp.ready_pods(APPS, "hog") if p["metadata"]["name"] != first_hog]

    with w.scaler("--hot-node-relief", "--hot-node-time=0s", "--scale-down-utilization-threshold=0") as proc:
        taint = wait_for(soft_taint, 60, "the soft taint on the hot node")
        assert taint["effect"] == "PreferNoSchedule"
        wait_for(
            lambda: any(e.name == first_hog and e.code == 201 for e in evictions(w.audit())),
            60,
            "hog evicted",
        )
        placed = wait_for(replacement, 60, "hog's replacement to run")
        assert proc.terminate(30) == 0, proc.output
    assert placed[0]["spec"]["nodeName"] in cool, "the replacement must avoid the soft-tainted hot node"
    assert {e.name for e in evictions(w.audit()) if e.code == 201} == {first_hog}, "only hog was evicted"
    assert w.events_for(hot, "HotNodeRelief"), "an event on the node"


# -- fencing: one actor at a time, whatever the pause; rollbacks that finish -------------------------


def lease(cp: ControlPlane) -> dict[str, Any] | None:
    return cp.get("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1")


def test_a_leader_paused_past_its_lease_writes_nothing_more_and_exits_1(w: World) -> None:
    """The leader is SIGSTOPped mid-drain for longer than its (8 s) lease; another holder takes
    the lease and, as its recovery would, rolls the node back. Continued, the old leader makes
    no write at all (no eviction, no rollback of the node it no longer owns, no event, no
    lease update) and exits 1 so that its Deployment restarts it clean. Today's main kept
    evicting and then rolled back the other holder's node."""
    import signal

    _, under, _ = stuck_drain(w, "pause")
    with w.scaler("--max-pod-eviction-time=120s", "--leader-elect=true", *SHORT_LEASE, log="pause.log") as proc:
        wait_for(
            lambda: any(e.code == 429 for e in evictions(w.audit())),
            60,
            "a refused eviction (drain in flight)",
        )
        assert proc.proc is not None
        proc.proc.send_signal(signal.SIGSTOP)
        try:
            held = lease(w.cp)
            assert held is not None and held["spec"]["holderIdentity"]
            renewed = held["spec"]["renewTime"]
            # Past the lease (judged as client-go does: from when the record was last seen to change).
            seen = time.monotonic()
            wait_for(lambda: time.monotonic() > seen + held["spec"]["leaseDurationSeconds"] + 1
                     and (lease(w.cp) or {}).get("spec", {}).get("renewTime") == renewed, 40, "the lease to expire")  # fmt: skip
            current = lease(w.cp)
            assert current is not None
            current["spec"].update(holderIdentity="other-replica_1", renewTime=iso_now(), acquireTime=iso_now(),
                                   leaseTransitions=int(current["spec"].get("leaseTransitions") or 0) + 1)  # fmt: skip
            w.cp.request("PUT", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/scaler", current)
            # The new holder's recovery rolls the node back (and may taint it again later).
            w.cp.patch("Node", under, {
                "metadata": {"annotations": {k: None for k in (ANNOTATION_OWNER, ANNOTATION_REPLICA, ANNOTATION_STATE)}},
                "spec": {"taints": None, "unschedulable": None},
            })  # fmt: skip
            after = w.cp.get("Node", under)
            assert after is not None
            version = after["metadata"]["resourceVersion"]
            offset = w.cp.audit_offset()
        finally:
            proc.proc.send_signal(signal.SIGCONT)
        code = proc.wait(60)
        out = proc.output
    assert code == 1, out[-3000:]
    assert "lost the lease" in out and "Traceback" not in out, out[-3000:]
    writes = [
        e.display for e in w.cp.audit(offset, SA_USER) if e.verb in WRITE_VERBS or e.subresource == "eviction"
    ]
    assert writes == [], f"writes after the lease was lost: {writes}"
    node = w.cp.get("Node", under)
    assert node is not None and node["metadata"]["resourceVersion"] == version, "the node was touched"
    assert untouched(w.cp, under)


def iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


def test_a_rollback_refused_403_is_retried_until_the_binding_is_back(world: World) -> None:
    """The ClusterRoleBinding is deleted mid-drain: the next eviction is refused (403), the
    drain fails, and so does its rollback (the node's GET: 403). While the binding is away the
    node's failed rollback shows in the status ConfigMap; once it is back the rollback completes
    (today's main tried once and left the node tainted and cordoned until a restart)."""
    w = world
    w.reset()
    _, under, _ = stuck_drain(w, "revoke")
    binding = next(d for d in rbac("base", SA) if d["kind"] == "ClusterRoleBinding")
    with w.scaler("--max-pod-eviction-time=120s", log="revoke.log") as proc:
        wait_for(
            lambda: any(e.code == 429 for e in evictions(w.audit())),
            60,
            "a refused eviction (drain in flight)",
        )
        w.cp.delete("ClusterRoleBinding", SA, api_version="rbac.authorization.k8s.io/v1")
        try:
            wait_for(lambda: any(e.code == 403 and e.resource == "nodes" and e.verb == "get" and e.name == under
                                 for e in w.audit()), 60, "a rollback refused (403)")  # fmt: skip
            wait_for(lambda: "rollbacksPending" in status_text(w.cp), 30, "the failed rollback in the status")
            assert tainted(w.cp, under)
        finally:
            w.cp.apply([binding])
        wait_for(lambda: untouched(w.cp, under), 90, "the rollback to complete once the binding is back")
        wait_for(lambda: "rollbacksPending" not in status_text(w.cp), 30, "the status to clear")
        assert proc.terminate(30) == 0, proc.output
    events = w.audit()
    deleted = [e.display for e in events if e.resource == "pods" and e.verb in ("delete", "deletecollection")]
    assert deleted == [], f"pods deleted, not evicted: {deleted}"
    assert w.cp.get("Node", under) is not None
    assert not world.kubelet.errors, world.kubelet.errors


def test_a_drain_stops_when_its_node_is_deleted_by_someone_else(w: World) -> None:
    """Mid-drain (an eviction refused by the PDB and retried every 10 s), someone else deletes the
    node: the drain stops (it reads its node every second), the failure names why, and no
    eviction follows, past the retry interval. Today's main went on evicting the pods of the
    deleted node. (One retry already under way as the node goes may still reach the API server:
    the test sees the refusal in the audit log some time after it happened, so the delete may
    fall just before the next retry.)"""
    _, under, _ = stuck_drain(w, "gone")
    with w.scaler("--max-pod-eviction-time=120s") as proc:
        wait_for(
            lambda: any(e.code == 429 for e in evictions(w.audit())),
            60,
            "a refused eviction (drain in flight)",
        )
        w.cp.delete("Node", under)
        deleted = w.cp.audit_offset()
        failed = wait_for(lambda: w.events_for(under, "ScaleDownFailed"), 30, "the drain to stop")
        assert "deleted by someone else" in failed[0]["message"], failed
        offset = w.cp.audit_offset()
        in_flight = [e.display for e in evictions(w.cp.audit(deleted, SA_USER))]
        assert len(in_flight) <= 1, f"evictions after the node was deleted, before the drain stopped: {in_flight}"
        holds_for(lambda: not evictions(w.cp.audit(offset, SA_USER)), 11,
                  "no eviction after the drain stopped, past the eviction retry interval (10 s)",
                  poll=0.5)  # fmt: skip
        assert proc.terminate(30) == 0, proc.output
    after = [e.display for e in evictions(w.cp.audit(offset, SA_USER))]
    assert after == [], f"evictions after the drain stopped: {after}"
    nodes = [
        e.display for e in w.cp.audit(offset, SA_USER) if e.resource == "nodes" and e.verb in WRITE_VERBS
    ]
    assert nodes == [], nodes

# -- kubectl scaler why -------------------------------------------------------------------------------


def test_why_explains_a_node_kept_by_a_pdb_with_read_only_rbac(w: World) -> None:
    """``scaler why`` with the dry-run overlay's read-only ServiceAccount: the underused node is
    kept because its pods' PDB allows no disruption (the blocking pod named); a busy node is
    above the threshold; an unknown node is one line and exit 2. Nothing is written."""
    busy = w.busy_nodes("why")
    under = w.node("why-under", IDLE_USAGE)
    w.cp.place(lambda: w.cp.deployment("guarded", APPS, 2), APPS, "guarded", 2, on=[under])
    w.cp.pdb("guarded", APPS, "guarded", max_unavailable=0)
    wait_for(lambda: w.cp.pdb_allows("guarded", APPS) == 0, 30, "PDB guarded to allow 0")
    pods = {p["metadata"]["name"] for p in w.cp.pods(APPS, "guarded")}

    def why(node: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "scaler.cli", "why", node, "--kubeconfig", str(w.kubeconfigs["scaler-dry-run"]),
                "-o", "json"]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)

    out = why(under)
    assert out.returncode == 0, out.stderr
    answer = json.loads(out.stdout)
    assert (answer["verdict"], answer["reason"], answer["blockingPodReason"]) == (
        "unremovable", "BlockedByPod", "NotEnoughPdb",
    ), answer  # fmt: skip
    namespace, _, pod = answer["blockingPod"].partition("/")
    assert namespace == APPS and pod in pods
    assert "PodDisruptionBudget" in answer["change"]
    out = why(busy[0])
    assert out.returncode == 0 and json.loads(out.stdout)["reason"] == "NotUnderutilized", out.stderr
    out = why("why-ghost")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "'why-ghost' not found" in out.stderr
    written = [e.display for e in w.audit("system:serviceaccount:scaler-system:scaler-dry-run")
               if e.verb in WRITE_VERBS]  # fmt: skip
    assert written == [], written


# -- the fault matrix: two replicas, each its own ServiceAccount, checked from the audit log ---------
#
# Each case runs replicas as the ServiceAccounts ``scaler-a`` and ``scaler-b`` (the base's RBAC,
# bound to each), records every Node and Pod state (faultcheck.ClusterRecorder), injects one
# fault, and checks faultcheck's invariants: pods only evicted, every node/pod write made while
# its replica held the Lease, nodes deleted only tainted, cordoned and without workload pods,
# and no node left tainted, cordoned or marked once the replicas recovered.

REPLICAS = ("scaler-a", "scaler-b")
LEASE = ("Lease", "scaler", NAMESPACE, "coordination.k8s.io/v1")


@dataclass
class Faults:
    """One matrix case: the world, its recorder, its replicas."""

    w: World
    rec: ClusterRecorder
    name: str
    procs: dict[str, ScalerProcess]
    lease_seconds: float = 15.0  # the replicas' --leader-elect-lease-duration

    def start(
        self, *args: str, replicas: int = 2, leader_elect: bool = True, short_lease: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:  # fmt: skip
        if short_lease:
            args = (*SHORT_LEASE, *args)
            self.lease_seconds = SHORT_LEASE_SECONDS
        for sa in REPLICAS[:replicas]:
            flags = [*FAST, f"--leader-elect={str(leader_elect).lower()}", *args]
            log = self.w.tmp / f"{self.name}-{sa}.log"
            self.procs[sa] = ScalerProcess(self.w.kubeconfigs[sa], flags, log, env).start()
        for proc in self.procs.values():  # both past their start-up checks before any fault
            proc.wait_output("scaler run started", 60)

    def events(self) -> list[AuditEvent]:
        return self.w.cp.audit(self.w.since)

    def leader(self, timeout: float = 60.0) -> str:
        """The ServiceAccount of the replica that last wrote the Lease (waits for one)."""
        users = {sa_user(sa): sa for sa in self.procs}
        found = wait_for(lambda: [u for _, u in holders(self.events()) if u in users], timeout, "a leader")
        return users[found[-1]]

    def evicted(self, sa: str | None = None, code: int = 201) -> list[AuditEvent]:
        return [e for e in evictions(self.events()) if e.code == code and (sa is None or e.user == sa_user(sa))]

    def settle(self, node: str, timeout: float = 120.0) -> None:
        """Wait until ``node`` is deleted or back to untouched, then SIGTERM the replicas still
        running (a replica that lost the lease may have exited on its own)."""
        wait_for(lambda: self.w.cp.get("Node", node) is None or untouched(self.w.cp, node), timeout,
                 f"node {node} deleted or rolled back")  # fmt: skip
        self.stop()

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.alive():
                proc.terminate(90)

    def check(self, leased: bool = True) -> None:
        """The invariants over the whole case (after the replicas stopped)."""
        report = violations(self.events(), [sa_user(sa) for sa in self.procs], self.rec, leased=leased,
                            lease_duration=self.lease_seconds)  # fmt: skip
        left = leftovers(self.w.cp)
        logs = "\n".join(f"--- {sa} (exit {p.proc.returncode if p.proc else None}):\n{p.output[-2500:]}"
                         for sa, p in self.procs.items())  # fmt: skip
        assert not report.violations and not left, f"{report.violations + left}\ncounts {dict(report.counts)}\n{logs}"


@contextlib.contextmanager
def fault_case(world: World, name: str) -> Iterator[Faults]:
    world.cp.resume("etcd")
    world.cp.apply(rbac("base", "scaler-a") + rbac("base", "scaler-b"))  # a case may have deleted a binding
    world.reset()
    with ClusterRecorder(world.cp) as rec:
        case = Faults(world, rec, name.removeprefix("test_")[:40], {})
        try:
            yield case
        finally:
            for proc in case.procs.values():
                proc.kill()


@pytest.fixture
def fx(world: World, request: pytest.FixtureRequest) -> Iterator[Faults]:
    with fault_case(world, request.node.name) as case:
        yield case


@pytest.fixture
def fx_uncached(uncached_world: World, request: pytest.FixtureRequest) -> Iterator[Faults]:
    """A matrix case on the control plane without a watch cache (:func:`uncached_world`)."""
    with fault_case(uncached_world, request.node.name) as case:
        yield case


def slow_drain(w: World, prefix: str, ready_after: float = 3.0) -> tuple[list[str], str]:
    """Two busy nodes and an underused one running two ``web`` pods under a PDB allowing one
    disruption; a replacement is Ready ``ready_after`` s after it starts, so the second eviction
    answers 429 until then and is retried 10 s later: a drain of about 10 s."""
    busy = w.busy_nodes(prefix)
    under = w.node(f"{prefix}-under", IDLE_USAGE)
    w.cp.place(lambda: w.cp.deployment("web", APPS, 2), APPS, "web", 2, on=[under])
    w.cp.pdb("web", APPS, "web", max_unavailable=1)
    wait_for(lambda: w.cp.pdb_allows("web", APPS) == 1, 30, "PDB web to allow 1")
    w.kubelet.hold(APPS, "web", seconds=ready_after)
    return busy, under


def test_fault_leader_paused_past_its_lease_then_continued(fx: Faults) -> None:
    """The leader is SIGSTOPped after its first eviction, for longer than its (8 s) lease; the
    other replica takes the Lease over, rolls the node back and drains it again; then the old
    leader is continued. It must not write again (no eviction, no rollback patch): its lease is
    gone, the node is the new leader's."""
    _, under = slow_drain(fx.w, "pause")
    fx.start("--max-pod-eviction-time=120s", short_lease=True)
    a = fx.leader()
    b = next(sa for sa in fx.procs if sa != a)
    wait_for(lambda: fx.evicted(a), 60, "the leader's first eviction")
    fx.procs[a].proc.send_signal(signal.SIGSTOP)  # type: ignore[union-attr]
    try:
        wait_for(lambda: fx.leader() == b, 60, "the other replica to take the Lease over")
        wait_for(lambda: tainted(fx.w.cp, under) or fx.w.cp.get("Node", under) is None, 30, "the new leader's taint")
    finally:
        fx.procs[a].proc.send_signal(signal.SIGCONT)  # type: ignore[union-attr]
    wait_for(lambda: not fx.procs[a].alive(), 60, "the old leader to exit (it lost the lease)")
    fx.settle(under)
    fx.check()


def test_fault_etcd_frozen_past_the_lease_mid_drain(fx: Faults) -> None:
    """etcd is SIGSTOPped after the first eviction for longer than the (8 s) lease (every API
    request hangs; the lease cannot be renewed), then continued. Whichever replica leads
    afterwards finishes or rolls the node back; no write is made by a replica whose lease ran
    out meanwhile."""
    _, under = slow_drain(fx.w, "etcd")
    fx.start("--max-pod-eviction-time=120s", short_lease=True)
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    fx.w.cp.pause("etcd")
    try:
        # The fault itself, not a wait for anything: etcd stays frozen past the lease (every
        # request hangs, so nothing can be observed through the API server meanwhile).
        time.sleep(SHORT_LEASE_SECONDS + 4)
    finally:
        fx.w.cp.resume("etcd")
    fx.settle(under)
    fx.check()


def test_fault_apiserver_restarted_mid_drain(fx: Faults) -> None:
    """kube-apiserver is stopped after the first eviction and started again (same port, same
    etcd): the drain carries on through retries, or the node is rolled back; nothing else."""
    _, under = slow_drain(fx.w, "restart")
    fx.start("--max-pod-eviction-time=120s")
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    down = fx.w.cp.restart_apiserver()
    print(f"kube-apiserver did not answer for {down:.1f}s")
    fx.settle(under)
    # The fake kubelet's own watches failed while kube-apiserver was down: expected here only.
    fx.w.kubelet.errors.clear()
    fx.check()


def test_fault_pod_tolerating_every_taint_bound_mid_drain(fx: Faults) -> None:
    """Mid-drain a Deployment's pod that tolerates every taint is bound to the draining node
    (``nodeName``: past the cordon and the taint). The verify step finds it: no delete, the node
    is rolled back, and the node's DaemonSet pod, evicted only once verify passes, stays."""
    w = fx.w
    _, under = slow_drain(w, "tol")
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": APPS},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
              "metadata": {"labels": {"app": "agent"}},
              "spec": {"nodeSelector": {"kubernetes.io/hostname": under}, "tolerations": [{"operator": "Exists"}],
                       "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.9"}]}}}}  # fmt: skip
    w.cp.create(ds)
    wait_for(lambda: w.cp.ready_pods(APPS, "agent"), 60, "the DaemonSet pod on the node")
    fx.start("--max-pod-eviction-time=120s", replicas=1)
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    sticky = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "sticky", "namespace": APPS},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "sticky"}}, "template": {
                  "metadata": {"labels": {"app": "sticky"}},
                  "spec": {"nodeName": under, "tolerations": [{"operator": "Exists"}],
                           "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}}}}  # fmt: skip
    w.cp.create(sticky)
    wait_for(lambda: w.events_for(under, "ScaleDownFailed"), 90, "the verify step to refuse")
    fx.settle(under)
    w.cp.delete("DaemonSet", "agent", APPS, "apps/v1")
    assert w.cp.get("Node", under) is not None
    agent = [e.display for e in evictions(fx.events()) if e.name.startswith("agent-")]
    assert agent == [], f"the DaemonSet pod was evicted although verify failed: {agent}"
    fx.check()


def test_fault_pdb_tightened_mid_drain(fx: Faults) -> None:
    """After the first eviction the PDB is tightened to maxUnavailable 0: the second eviction,
    which the first one's Ready replacement would have allowed at its 10 s retry, is refused
    (429) until --max-pod-eviction-time, and the node is rolled back."""
    _, under = slow_drain(fx.w, "tight")
    fx.start("--max-pod-eviction-time=25s", replicas=1)
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    fx.w.cp.request("PATCH", f"/apis/policy/v1/namespaces/{APPS}/poddisruptionbudgets/web",
                    {"spec": {"maxUnavailable": 0}}, content_type="application/merge-patch+json")  # fmt: skip
    wait_for(lambda: fx.w.events_for(under, "ScaleDownFailed"), 60, "the failed drain")
    fx.settle(under)
    assert fx.w.cp.get("Node", under) is not None
    assert len(fx.evicted()) == 1 and len(fx.evicted(code=429)) >= 2, [e.display for e in evictions(fx.events())]
    fx.check()


def test_fault_node_metrics_glitch_is_not_an_idle_node(fx: Faults) -> None:
    """n1's NodeMetrics say 1m CPU while its two pods' PodMetrics say 1.5 cores each (3 of its
    4): the node is busy, whatever its NodeMetrics say. It is never tainted, cordoned or drained,
    though its pods would fit elsewhere."""
    w = fx.w
    big = [f"glitch-big-{i}" for i in range(2)]
    for name in big:
        w.cp.add_node(name, cpu_millicores=16000)
        w.metrics.node_usage[name] = BUSY_USAGE
    w.cp.place(lambda: w.cp.deployment("backend", APPS, 2, cpu_millicores=500, memory_bytes=GI),
               APPS, "backend", 2, on=big)  # fmt: skip
    n1 = w.node("glitch-n1", (1, 512 * MI))
    w.cp.place(lambda: w.cp.deployment("hot", APPS, 2), APPS, "hot", 2, on=[n1])
    w.metrics.app_usage["hot"] = (1500, 256 * MI)
    # A 1 s metrics window: the pods, started before it, are in n1's NodeMetrics reading (not
    # added to it as pods not yet in the metrics).
    w.metrics.window_seconds = 1
    newest = max(dt.datetime.fromisoformat(p["status"]["startTime"]).timestamp() for p in w.cp.pods(APPS, "hot"))
    # The reading's timestamp is whole seconds too: its window starts at or after a pod's start
    # once the clock is a window past it.
    wait_for(lambda: time.time() > newest + w.metrics.window_seconds, 10,
             "the hot pods' start to be before the metrics window")  # fmt: skip
    fx.start(replicas=1)
    wait_for(lambda: ANNOTATION_STATUS in ((w.cp.get("Node", n1) or {}).get("metadata", {}).get("annotations") or {}),
             60, "n1's verdict")  # fmt: skip
    holds_for(lambda: not fx.rec.ever(n1, tainted=True, cordoned=True) and not evictions(fx.events()), 3,
              "n1 neither tainted, cordoned nor drained over a few more 1 s loops", poll=0.5)  # fmt: skip
    verdict = json.loads(((w.cp.get("Node", n1) or {})["metadata"]["annotations"])[ANNOTATION_STATUS])
    fx.stop()
    assert not fx.rec.ever(n1, tainted=True, cordoned=True), f"n1 was tainted or cordoned; verdict {verdict}"
    assert not evictions(fx.events()), [e.display for e in evictions(fx.events())]
    assert verdict["reason"] == "MetricsUnavailable", verdict
    fx.check()



# -- stale views: a relist after a 410, API Priority and Fairness ------------------------------------


def pod_reads(events: list[AuditEvent], user: str) -> list[AuditEvent]:
    """The user's cluster-wide pod LISTs and WATCHes (its watch cache's), answered, in order."""
    return sorted(
        (e for e in events if e.user == user and e.resource == "pods" and not e.group and not e.name
         and e.verb in ("list", "watch") and "fieldSelector" not in e.uri and e.stage != "ResponseStarted"),
        key=lambda e: e.time,
    )  # fmt: skip


def test_fault_410_mid_drain_then_a_slow_relist_holds_the_drain(fx_uncached: Faults) -> None:
    """Mid-drain, etcd is compacted (kube-apiserver without a watch cache: watches are served by
    etcd), so scaler's pod WATCH, resuming every 3 s, gets ``410 Expired``; its relist is held 12 s
    in API Priority and Fairness' queue (every seat of its priority level taken): a long relist
    that fails nothing. The Pod kind is stale meanwhile: no taint, eviction or delete until the
    relist completes (checked from the audit log), then the drain goes on."""
    fx, w = fx_uncached, fx_uncached.w
    _, under = slow_drain(w, "gone")
    fx.start("--max-pod-eviction-time=120s", replicas=1, env={"SCALER_WATCH_TIMEOUT_SECONDS": "3"})
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    user = sa_user("scaler-a")
    with Throttle(w.cp, w.metrics, "relist-queue", [(NAMESPACE, "scaler-a")], verbs=["list"], reject=False) as t:
        t.hold()
        # The fault: etcd compacted until scaler's pod watch resumes from a compacted revision:
        # 410, and a relist (a LIST, queued: the audit log has it once answered).
        proc = fx.procs["scaler-a"]
        wait_for(lambda: w.cp.compact_etcd() and "pods: watch ERROR 410" in proc.output, 30,
                 "a 410 on the pod watch", poll=1.0)  # fmt: skip
        time.sleep(12)  # the relist waits in the queue while the seats are held
    fx.settle(under)
    windows = [wd for wd in stale_windows(fx.events(), user) if wd[0] == "pods"]
    assert any(end - start >= 10 for _, start, end in windows), windows  # the drain's 10 s retry fell inside
    assert 429 not in [e.code for e in pod_reads(fx.events(), user)]  # queued, never refused
    fx.check()


def test_fault_apf_rejects_scalers_pod_reads_mid_drain(fx: Faults) -> None:
    """Mid-drain a FlowSchema sends scaler's pod LISTs and WATCHes to a priority level whose
    every seat is taken: 429 with ``Retry-After: 1`` for 12 s. The Pod kind is stale from the
    first 429 until a LIST passes: no taint, eviction or delete meanwhile (the audit log); every
    refused read is followed by the next one at least a second later (Retry-After honoured);
    then the drain goes on."""
    w = fx.w
    _, under = slow_drain(w, "apf")
    fx.start("--max-pod-eviction-time=120s", replicas=1, env={"SCALER_WATCH_TIMEOUT_SECONDS": "3"})
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    user = sa_user("scaler-a")
    with Throttle(w.cp, w.metrics, "scaler-reject", [(NAMESPACE, "scaler-a")]) as t:
        t.hold()
        wait_for(lambda: [e for e in w.cp.audit(w.since, user) if e.code == 429], 30, "a 429")
        time.sleep(12)
    fx.settle(under)
    reads = pod_reads(fx.events(), user)
    refused = [i for i, e in enumerate(reads) if e.code == 429]
    assert len(refused) >= 3, [(e.verb, e.code) for e in reads]
    gaps = [reads[i + 1].received - reads[i].time for i in refused if i + 1 < len(reads)]
    assert min(gaps) >= 0.9, gaps  # Retry-After: 1 (the client's clock and the server's agree here)
    windows = [wd for wd in stale_windows(fx.events(), user) if wd[0] == "pods"]
    assert any(end - start >= 10 for _, start, end in windows), windows
    fx.check()


def test_a_node_without_allocatable_is_said_and_the_rest_decided(w: World) -> None:
    """A Node created without ``status.allocatable`` (accepted by the API server) made the Node
    LIST fail, so the caches never synced. Now it is left out: a Warning ``UnreadableObject``
    event on it, ``scaler_unreadable_objects{kind="Node"}``, the verdict ``UnreadableObject`` on
    it, never tainted; the empty node beside it is removed."""
    created = w.cp.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "raw-0", "labels": {"cloud.google.com/gke-nodepool": "pool-a", "topology.kubernetes.io/zone": "zone-a"}}})  # fmt: skip
    assert "allocatable" not in (created.get("status") or {}), created  # accepted as it is
    w.busy_nodes("raw")
    empty = w.node("raw-empty", (50, 512 * MI))
    with w.scaler() as proc:
        port = proc.metrics_port()
        wait_for(lambda: w.events_for("raw-0", "UnreadableObject"), 60, "the UnreadableObject event")
        wait_for(lambda: w.cp.get("Node", empty) is None, 60, "the empty node to be deleted")

        def verdict() -> dict[str, Any]:
            notes = ((w.cp.get("Node", "raw-0") or {}).get("metadata") or {}).get("annotations") or {}
            return dict(json.loads(notes.get(ANNOTATION_STATUS, "{}")))

        wait_for(lambda: verdict().get("reason") == "UnreadableObject", 30, "raw-0's verdict")
        assert 'scaler_unreadable_objects{kind="Node"} 1.0' in metrics_text(port)
        assert proc.terminate(30) == 0, proc.output
    [event] = w.events_for("raw-0", "UnreadableObject")
    assert event["type"] == "Warning" and "missing required field 'status.allocatable'" in event["message"], event
    assert verdict()["detail"] == "cannot read Node raw-0: missing required field 'status.allocatable'"
    assert not tainted(w.cp, "raw-0")


# -- beside the real cluster-autoscaler ---------------------------------------------------------------


def kwok_shaped(cp: ControlPlane, names: list[str], pool: str = "pool-a") -> None:
    """Make ``names`` nodes of the kwok provider's node group ``pool`` (its annotations and
    provider ID) and give the provider its ConfigMaps (a group of exactly these nodes)."""
    for name in names:
        cp.request("PATCH", f"/api/v1/nodes/{name}", {
            "metadata": {"annotations": {ANNOTATION_KWOK_GROUP: pool, ANNOTATION_KWOK_MANAGED: "fake"}},
            "spec": {"providerID": f"kwok:{name}"}}, content_type="application/merge-patch+json")  # fmt: skip
    nodes = [n for n in cp.list("Node") if n["metadata"]["name"] in names]
    cp.apply(kwok_config_maps({pool: nodes}, CA_NAMESPACE))


@pytest.mark.skipif(bool(ca_unavailable()), reason=ca_unavailable() or "available")
def test_fault_a_cluster_autoscaler_starting_strips_the_taint_mid_drain(fx: Faults) -> None:
    """Self-hosted mode: an upstream cluster-autoscaler 1.30.7 (kwok provider, scale-down off)
    starts while scaler drains a node of one of its node groups. At start-up it removes every
    ``ToBeDeletedByClusterAutoscaler`` taint of its node groups, scaler's included, and leaves
    the cordon. scaler sees the taint gone within a second: it evicts nothing more, the removal
    fails saying why (event, the node's verdict), the node is rolled back (uncordoned, marks
    removed) and not deleted."""
    w = fx.w
    busy, under = slow_drain(w, "ca", ready_after=90.0)  # the second eviction waits on its PDB
    kwok_shaped(w.cp, [*busy, under])
    fx.start("--max-pod-eviction-time=120s", replicas=1)
    wait_for(lambda: fx.evicted(), 60, "the first eviction")
    assert tainted(w.cp, under)
    try:
        with ClusterAutoscaler(w.cp.admin_kubeconfig, w.tmp / "ca-strips-taint.log",
                               ["--scale-down-enabled=false", "--scan-interval=2s", "--v=4"]) as ca:  # fmt: skip
            wait_for(lambda: not tainted(w.cp, under), 90, "cluster-autoscaler to remove the taint")
            # kube-apiserver writes its audit log in batches: the patch may show a moment later.
            strip = wait_for(lambda: [e for e in fx.events() if e.resource == "nodes" and e.name == under
                                      and e.verb in ("patch", "update") and "cluster-autoscaler" in e.user_agent],
                             15, "cluster-autoscaler's write of the node in the audit log (else someone else removed "
                             "the taint)")  # fmt: skip
            # What cluster-autoscaler left: no taint, still cordoned (until scaler's rollback). The
            # recorder's watch may lag the reads above on a busy machine: wait until it saw the
            # taint go.
            def since_tainted() -> list[NodeState]:
                states = list(fx.rec.nodes.get(under, []))
                return states[next((i for i, s in enumerate(states) if s.tainted), len(states)):]

            wait_for(lambda: any(not s.tainted for s in since_tainted()), 30, "the recorder to see the taint go")
            assert any(not s.tainted and s.cordoned for s in since_tainted()), since_tainted()
            wait_for(lambda: w.events_for(under, "ScaleDownFailed"), 30, "scaler's ScaleDownFailed")
            ca.kill()
        fx.settle(under)

        def verdict() -> dict[str, Any]:
            notes = ((w.cp.get("Node", under) or {}).get("metadata") or {}).get("annotations") or {}
            return dict(json.loads(notes.get(ANNOTATION_STATUS, "{}")))

        failed = w.events_for(under, "ScaleDownFailed")[-1]["message"]
        assert "taint was removed by someone else (a cluster-autoscaler" in failed, failed
        late = [e.display for e in fx.evicted() if e.received > strip[0].time + 1.5]
        assert late == [], f"evictions after cluster-autoscaler removed the taint: {late}"
        assert w.cp.get("Node", under) is not None
        print(f"cluster-autoscaler removed the taint {strip[0].time - fx.evicted()[0].received:.1f}s after the first "
              f"eviction; scaler's verdict on the node: {verdict()}")  # fmt: skip
        fx.check()
    finally:
        for cm in ("kwok-provider-config", "kwok-provider-templates"):
            w.cp.delete("ConfigMap", cm, CA_NAMESPACE)
