"""`scaler run` as a process and as replicas: crash mid-drain, SIGTERM, leader election."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e_cluster import E2ECluster, WallClock
from waiting import wait_for

from scaler.kube.writer import ANNOTATION_OWNER, ANNOTATION_STATUS
from scaler.model.records import ANNOTATION_SCALE_DOWN_DISABLED, TAINT_TO_BE_DELETED
from scaler.runner import Runner, StartupError, build_runner, default_identity
from scaler.sources.watch import WATCHED_CALLS


def tainted(c: E2ECluster, name: str) -> bool:
    node = c.node(name)
    return node is not None and any(t["key"] == TAINT_TO_BE_DELETED for t in node["spec"].get("taints") or [])


FAST = [
    "--scale-down-unneeded-time=0s", "--scan-interval=0.2s", "--node-delete-delay-after-taint=0s",
    "--scale-down-delay-after-add=0s", "--max-pod-eviction-time=60s", "--address=127.0.0.1:0",
    "--gke-project=acme", "--gke-location=europe-west1", "--gke-cluster=prod",
]  # fmt: skip


def start_process(c: E2ECluster, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, SCALER_GCE_API_ENDPOINT=c.gce.url, POD_NAME="scaler-0")
    kubeconfig = c.kube.write_kubeconfig(c.tmp / "kubeconfig")
    return subprocess.Popen(
        [sys.executable, "-m", "scaler.cli", "run", "--kubeconfig", str(kubeconfig), *FAST, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def start_tainting(c: E2ECluster, eviction_delay: float, *extra: str) -> subprocess.Popen[str]:
    """:func:`start_process` with every eviction answered ``eviction_delay`` seconds late,
    returned once it has tainted a node (killed if it never does)."""
    c.kube.delay("/api/v1/namespaces/", eviction_delay, match=lambda r: r.path.endswith("/eviction"), method="POST")
    proc = start_process(c, *extra)
    try:
        wait_for(lambda: any(tainted(c, n) for n in c.underused), what="a node to be tainted")
    except BaseException:
        proc.kill()
        proc.wait(10)
        raise
    return proc


def terminate(proc: subprocess.Popen[str]) -> str:
    """SIGTERM; its output once it exited 0 within 30 s (killed if it did not)."""
    try:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    return out


def test_kill_mid_drain_then_restart_rolls_the_node_back(tmp_path: Path) -> None:
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        # Evictions hang, so the drain is in flight when the process dies.
        proc = start_tainting(c, 30.0, "--leader-elect=false")
        try:
            wait_for(lambda: any(r.path.endswith("/eviction") for r in c.kube.requests), what="an eviction")
            target = next(n for n in c.underused if tainted(c, n))
        finally:
            proc.kill()
            proc.wait(10)
        node = c.node(target)
        assert node is not None and node["spec"].get("unschedulable")
        assert (node["metadata"].get("annotations") or {}).get(ANNOTATION_OWNER) == "scaler"
        assert c.gce.deleted_instances == []
        c.kube.reset_faults()
        # The restart recognizes its own work and rolls it back before anything else.
        with c.controller(c.config()) as ctl:
            ctl.run_once()
        assert not tainted(c, target)
        node = c.node(target)
        assert node is not None and not node["spec"].get("unschedulable")
        assert ANNOTATION_OWNER not in (node["metadata"].get("annotations") or {})
        assert c.gce.deleted_instances == []


def test_sigterm_rolls_back_in_flight_drain_and_exits(tmp_path: Path) -> None:
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        out = terminate(start_tainting(c, 2.0, "--leader-elect=true", "--namespace=scaler-system"))
        lease = c.kube.get_object("Lease", "scaler", "scaler-system")
        assert lease is not None and not lease["spec"].get("holderIdentity"), "lease released"
        for name in c.underused:
            node = c.node(name)
            if node is not None and name not in c.gce.deleted_instances:
                assert not tainted(c, name), f"{name} left tainted after SIGTERM:\n{out[-6000:]}"


def test_sigusr1_writes_every_threads_stack_and_the_process_goes_on(tmp_path: Path) -> None:
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        proc = start_tainting(c, 2.0, "--leader-elect=false")
        node_metrics = "/apis/metrics.k8s.io/v1beta1/nodes"  # one LIST a loop
        loops = len(c.kube.requests_to(node_metrics))
        proc.send_signal(signal.SIGUSR1)
        # Two more loops after the signal, or the process ended: then it did not go on.
        wait_for(lambda: len(c.kube.requests_to(node_metrics)) >= loops + 2 or proc.poll() is not None,
                 what="two more loops after SIGUSR1")  # fmt: skip
        alive = proc.poll() is None
        out = terminate(proc) if alive else proc.communicate()[0]
        assert alive, f"SIGUSR1 stopped the process ({proc.returncode}):\n{out[-3000:]}"
        dump = out[out.index("stacks of") :]
        assert "scaler/runner.py" in dump and dump.count("most recent call last") >= 2, dump[:3000]
        assert "Thread loop" in dump, dump[:3000]


def test_two_replicas_elect_one_leader_and_fail_over(tmp_path: Path) -> None:
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        # The lease timings come from the configuration (--leader-elect-lease-duration etc.).
        cfg = c.config(leader_elect=True, scan_interval=0.2, address="127.0.0.1:0", scale_down_unneeded_time=3600,
                       leader_elect_lease_duration=1.0, leader_elect_renew_deadline=0.8,
                       leader_elect_retry_period=0.1)  # fmt: skip
        runners = [
            Runner(cfg, c.api, c.provider(), identity=f"replica-{i}").start(sync_timeout=10) for i in range(2)
        ]
        try:
            wait_for(lambda: any(r.controller.leader.is_set() for r in runners), what="a leader")
            # Both replicas keep trying the lease (every 0.1 s): a second leader would show
            # within a few more attempts.
            lease = "/apis/coordination.k8s.io/v1/namespaces/scaler-system/leases/scaler"
            seen = len(c.kube.requests_to(lease))
            wait_for(lambda: len(c.kube.requests_to(lease)) >= seen + 8, what="more lease attempts")
            leaders = [r for r in runners if r.controller.leader.is_set()]
            assert len(leaders) == 1
            leader = leaders[0]
            follower = next(r for r in runners if r is not leader)
            lease = c.kube.get_object("Lease", "scaler", "scaler-system")
            assert lease is not None and lease["spec"]["leaseDurationSeconds"] == 1, lease
            wait_for(lambda: c.kube.get_object("ConfigMap", "scaler-status", "scaler-system") is not None,
                     what="the status ConfigMap")  # fmt: skip
            status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
            assert status is not None and f"leader: {leader.controller.identity}" in status["data"]["status"]
            assert follower.metrics.is_leader._value.get() == 0
            assert leader.health is not None
            health = httpx.get(f"http://127.0.0.1:{leader.health.port}/healthz", timeout=5)
            assert health.status_code == 200
            metrics = httpx.get(f"http://127.0.0.1:{leader.health.port}/metrics", timeout=5).text
            assert "scaler_unneeded_nodes_count" in metrics and "scaler_is_leader 1.0" in metrics
            leader.stop(timeout=10)
            wait_for(lambda: follower.controller.leader.is_set(), timeout=10, what="fail-over")
        finally:
            for r in runners:
                r.stop(timeout=10)


def test_a_permission_missing_on_becoming_leader_stops_the_replica_before_it_acts(tmp_path: Path) -> None:
    """Permissions are checked again on becoming leader (they may have changed while the replica
    followed): a missing one stops the replica with the reason, and nothing is touched."""
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        cfg = c.config(leader_elect=True, scan_interval=0.2, address="127.0.0.1:0", scale_down_unneeded_time=0)
        checks: list[int] = []

        def check() -> str:
            checks.append(1)
            return "missing Kubernetes permission(s) for scaler run: delete nodes"

        runner = Runner(cfg, c.api, c.provider(), identity="r-0", lease=(1.0, 0.8, 0.1), permission_check=check)
        runner.start(sync_timeout=10)
        try:
            wait_for(runner.stop_event.is_set, what="the replica to stop")
        finally:
            runner.stop(timeout=10)
        assert checks == [1]
        assert runner.fatal == "missing Kubernetes permission(s) for scaler run: delete nodes"
        assert not runner.controller.leader.is_set()
        assert not any(tainted(c, n) for n in c.nodes)
        assert not [r for r in c.kube.requests if r.method == "PATCH"]
        lease = c.kube.get_object("Lease", "scaler", "scaler-system")
        assert lease is not None and not lease["spec"].get("holderIdentity"), "lease released"


def test_identity_is_pod_name_or_hostname_plus_a_random_suffix(monkeypatch: Any) -> None:
    monkeypatch.setenv("POD_NAME", "scaler-7d9f-abcde")
    a, b = default_identity(), default_identity()
    assert a != b and re.fullmatch(r"scaler-7d9f-abcde_[0-9a-f-]{36}", a)
    monkeypatch.delenv("POD_NAME")
    assert re.fullmatch(re.escape(socket.gethostname()) + r"_[0-9a-f-]{36}", default_identity())


def test_start_checks_permissions_before_reading_anything(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with E2ECluster(tmp_path) as c:
        cfg = c.config(cloud_provider="kubernetes", address="127.0.0.1:0")
        c.kube.authorizer = lambda a: not (a["resource"] == "nodes" and a["verb"] == "delete")
        with pytest.raises(StartupError, match=r"missing Kubernetes permission\(s\) for scaler run: delete nodes \("):
            build_runner(cfg, c.api, dry_run=False, identity="t")
        assert c.kube.requests and all(r.path.endswith("/selfsubjectaccessreviews") for r in c.kube.requests)
        reviews = [r.json()["spec"]["resourceAttributes"] for r in c.kube.requests]
        assert {"resource": "pods", "subresource": "eviction", "verb": "create", "group": ""} in reviews
        assert {"group": "coordination.k8s.io", "resource": "leases", "verb": "update",
                "namespace": "scaler-system", "name": "scaler"} in reviews  # fmt: skip
        # A dry-run neither evicts nor deletes: it starts. A kind the source may skip only warns.
        c.kube.authorizer = lambda a: a["resource"] != "persistentvolumes"
        runner = build_runner(cfg, c.api, dry_run=True, identity="t")
        runner.cache.stop()
        assert "no permission to list persistentvolumes; watch persistentvolumes" in caplog.text
        lists = [r for r in c.kube.requests if r.method == "GET" and "watch" not in r.query]
        assert sorted(r.path for r in lists) == sorted({c.path for c in WATCHED_CALLS}), (
            "each kind listed once"
        )


def test_an_unreachable_api_server_is_one_line_a_loop_not_a_traceback(tmp_path: Path) -> None:
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        proc = start_process(c, "--leader-elect=false", "--scale-down-unneeded-time=1h")
        lines: list[str] = []
        assert proc.stdout is not None
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")))  # type: ignore[union-attr]
        reader.start()
        try:
            wait_for(lambda: any("serving /metrics" in line for line in lines), what="the start-up line")
            node_metrics = "/apis/metrics.k8s.io/v1beta1/nodes"  # one LIST a loop
            wait_for(lambda: len(c.kube.requests_to(node_metrics)) >= 3, what="a few loops against the live server")
            c.kube.close()  # the API server goes away
            skipped = "control loop skipped: cannot reach API server"
            wait_for(lambda: sum(skipped in line for line in lines) >= 3, timeout=30, what="three skipped loops")
        finally:
            proc.kill()
            proc.wait(10)
            reader.join(10)
        out = "".join(lines)
        assert "Traceback" not in out, out
        assert "control loop failed" not in out, out


def _taint_patches(c: E2ECluster) -> list[Any]:
    """The node PATCHes that put the ToBeDeletedByClusterAutoscaler taint."""
    out = []
    for r in c.kube.requests:
        if (
            r.method == "PATCH"
            and r.path.startswith("/api/v1/nodes/")
            and TAINT_TO_BE_DELETED.encode() in r.body
        ):
            taints = ((json.loads(r.body).get("spec") or {}).get("taints")) or []
            if any(t.get("key") == TAINT_TO_BE_DELETED for t in taints):
                out.append(r)
    return out


def test_no_taint_while_pods_are_relisted_after_a_410(tmp_path: Path) -> None:
    """The watch history expires (410) and the pods' relist takes 3 s; meanwhile an underused
    node becomes a candidate (its scale-down-disabled annotation removed). While the Pod kind is
    being relisted the view is stale: the node is tainted only once the relist completed."""
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        target = c.underused[0]
        for name in c.underused:
            node = c.node(name)
            assert node is not None
            node["metadata"].setdefault("annotations", {})[ANNOTATION_SCALE_DOWN_DISABLED] = "true"
            c.kube.put_object(node)
        cfg = c.config(scan_interval=0.2, address="127.0.0.1:0", scale_down_unneeded_time=0.0)
        runner = Runner(cfg, c.api, c.provider(), identity="replica-0").start(sync_timeout=10)
        try:
            wait_for(lambda: c.kube.get_object("ConfigMap", "scaler-status", "scaler-system") is not None,
                     what="a first loop")  # fmt: skip
            c.kube.delay("/api/v1/pods", 3.0, times=1, match=lambda r: not r.watch)
            expired = time.monotonic()
            c.kube.expire_history(notify=True)
            wait_for(lambda: [r for r in c.kube.requests_to("/api/v1/pods") if not r.watch and r.received > expired],
                     timeout=5, what="the pods' relist to start")  # fmt: skip
            node = c.node(target)
            assert node is not None
            del node["metadata"]["annotations"][ANNOTATION_SCALE_DOWN_DISABLED]
            c.kube.put_object(node)
            wait_for(lambda: _taint_patches(c), timeout=30, what="the node to be tainted")
            relists = [r for r in c.kube.requests_to("/api/v1/pods") if not r.watch and r.received > expired]
            relisted = relists[0].received + 3.0  # the delayed LIST answered
            taint = _taint_patches(c)[0]
            assert taint.received >= relisted, (
                f"tainted {relisted - taint.received:.1f}s before the relist completed"
            )
            assert runner.metrics.errors.labels("stale_cache")._value.get() >= 1
        finally:
            runner.stop(timeout=10)


def test_a_node_that_cannot_be_read_is_skipped_said_and_the_rest_is_decided(tmp_path: Path) -> None:
    """A Node without ``status.allocatable`` failed the whole Node LIST: the caches never
    synced. Now it is left out with a warning Event on it, ``scaler_unreadable_objects``, and
    its own verdict (``UnreadableObject``) on it; the underused nodes are still removed."""
    with E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        c.kube.put_object({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "raw", "uid": "uid-raw", "labels": {"cloud.google.com/gke-nodepool": "pool-a"}}})  # fmt: skip
        cfg = c.config(scan_interval=0.2, address="127.0.0.1:0", scale_down_unneeded_time=0.0)
        runner = Runner(cfg, c.api, c.provider(), identity="replica-0").start(sync_timeout=10)
        try:
            wait_for(lambda: c.events("UnreadableObject"), what="the UnreadableObject event")
            [event] = c.events("UnreadableObject")
            assert event["type"] == "Warning" and event["involvedObject"]["name"] == "raw"
            assert "missing required field 'status.allocatable'" in event["message"]
            assert runner.metrics.unreadable_objects.labels("Node")._value.get() == 1

            def verdict() -> dict[str, Any]:
                annotations = (c.node("raw") or {}).get("metadata", {}).get("annotations") or {}
                return json.loads(annotations.get(ANNOTATION_STATUS, "{}"))

            wait_for(lambda: verdict().get("reason") == "UnreadableObject", what="the node's verdict")
            assert verdict()["detail"] == "cannot read Node raw: missing required field 'status.allocatable'"
            wait_for(lambda: any(tainted(c, n) or c.node(n) is None for n in c.underused), timeout=30,
                     what="an underused node to be removed")  # fmt: skip
            raw = c.node("raw") or {}
            assert not (raw.get("spec") or {}).get("taints") and not (raw.get("spec") or {}).get(
                "unschedulable"
            )
            assert len(c.events("UnreadableObject")) == 1  # said once
        finally:
            runner.stop(timeout=10)
