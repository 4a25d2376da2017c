"""`scaler run`'s controller end to end, against the loopback Kubernetes and GCE fakes."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import E2ECluster

from scaler.kube.writer import ANNOTATION_OWNER, ANNOTATION_STATUS
from scaler.model.records import TAINT_TO_BE_DELETED


def tainted(cluster: E2ECluster, name: str) -> bool:
    node = cluster.node(name)
    assert node is not None
    return any(t["key"] == TAINT_TO_BE_DELETED for t in node["spec"].get("taints") or [])


def node_lifecycle(cluster: E2ECluster) -> None:
    """GKE removes the Node object once its VM is gone; the fakes need a nudge."""
    for name in cluster.gce.deleted_instances:
        if cluster.node(name) is not None:
            cluster.kube.delete_object("Node", name)


def test_two_underused_nodes_are_drained_and_deleted(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config()) as ctl:
        c.kube.fail("/api/v1/namespaces/default/pods/web-0/eviction", 429, times=1, method="POST")
        first = ctl.run_once()
        # One web pod per underused node and a PDB allowing one disruption: the PDB budget is
        # shared by the nodes of one evaluation, so the second node waits for the first.
        assert len(first.unneeded) == 1 and set(first.unneeded) < set(c.underused)
        second = next(n for n in c.underused if n not in first.unneeded)
        assert first.verdicts[second][1].value == "BlockedByPod" and "NotEnoughPdb" in first.verdicts[second][2]
        assert first.to_delete == ()
        assert not any(tainted(c, n) for n in c.nodes)
        removed: list[str] = []
        for _ in range(60):
            c.advance(60)
            node_lifecycle(c)
            ctl.run_once()
            c.wait_idle(ctl)
            removed = [n for n in c.underused if n in c.gce.deleted_instances]
            if len(removed) == 2:
                break
        assert sorted(removed) == sorted(c.underused)
        assert sorted(c.gce.deleted_instances) == sorted(c.underused), "each deleted once, nothing else"
        posts = c.gce.requests_matching("POST", r"deleteInstances")
        assert len(posts) == 2
        assert all(p.json["skipInstancesOnValidationError"] is True for p in posts)
        for name in c.busy:
            node = c.node(name)
            assert node is not None and not node["spec"].get("unschedulable") and not node["spec"].get("taints")
        evictions = c.kube.requests_to("/api/v1/namespaces/default/pods/web-0/eviction", "POST")
        assert len(evictions) == 2, "one 429, retried once"
        assert ctl.metrics.scaled_down_nodes.labels("underutilized")._value.get() == 2
        reasons = [e["reason"] for e in c.events()]
        assert reasons.count("ScaleDown") >= 2
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert status is not None and "autoscalerStatus: Running" in status["data"]["status"]


def test_eviction_429_past_max_pod_eviction_time_rolls_back(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(max_pod_eviction_time=0.3)) as ctl:
        ctl.run_once()
        c.kube.fail("/api/v1/namespaces/", 429, match=lambda r: r.path.endswith("/eviction"), method="POST")
        c.advance(601)
        decision = ctl.run_once()
        assert len(decision.drain) == 1
        target = decision.drain[0].node.name
        c.wait_idle(ctl)
        node = c.node(target)
        assert node is not None
        assert not tainted(c, target)
        assert not node["spec"].get("unschedulable")
        assert ANNOTATION_OWNER not in (node["metadata"].get("annotations") or {})
        failed = [e for e in c.events("ScaleDownFailed") if e["involvedObject"]["name"] == target]
        assert failed and "failed to drain and delete node" in failed[0]["message"]
        assert c.gce.deleted_instances == []
        assert ctl.metrics.failed_scale_downs.labels("drain")._value.get() == 1
        assert ctl.metrics.evicted_pods.labels("failed")._value.get() >= 1
        # The failure cools scale-down down, and the node waits out the recheck timeout.
        c.kube.reset_faults()
        c.advance(10)
        c.wait_cached_node(target)  # the roll-back's untaint has reached the watch cache
        again = ctl.run_once()
        assert target not in again.unneeded
        assert again.cooldown.startswith("scale-down-delay-after-failure until")
        _, reason, detail = again.verdicts[target]
        assert reason.value == "RecentlyUnremovable" and "scale-down failed at" in detail and "drain" in detail


def test_a_failed_delete_cools_down_and_the_node_is_not_retried_before_the_recheck_timeout(tmp_path: Path) -> None:
    """Not only a failed taint: a failure at the last step (the cloud refuses the deletion)
    starts --scale-down-delay-after-failure, and the node is not tried again before
    --unremovable-node-recheck-timeout, even with a short unneeded time."""
    cfg = dict(scale_down_unneeded_time=0, scale_down_delay_after_failure=180, unremovable_node_recheck_timeout=300)
    with E2ECluster(tmp_path) as c, c.controller(c.config(**cfg)) as ctl:
        c.gce.fail("POST", r"deleteInstances", 403)
        first = ctl.run_once()
        target = first.drain[0].node.name
        c.wait_idle(ctl)
        assert not tainted(c, target) and c.gce.deleted_instances == []
        assert ctl.metrics.failed_scale_downs.labels("delete")._value.get() == 1
        c.gce.reset_faults()
        for _ in range(5):  # every loop of the cooldown: nothing starts
            c.advance(30)
            node_lifecycle(c)
            decision = ctl.run_once()
            c.wait_idle(ctl)
            assert decision.to_delete == (), decision.to_delete
            assert decision.cooldown.startswith("scale-down-delay-after-failure until")
            assert decision.verdicts[target][1].value == "RecentlyUnremovable"
            assert not tainted(c, target)
        assert ctl.metrics.in_cooldown._value.get() == 1
        # After the cooldown, before the recheck timeout: scale-down resumes, without this node.
        c.advance(60)
        node_lifecycle(c)
        decision = ctl.run_once()
        c.wait_idle(ctl)
        assert decision.cooldown == ""
        assert target not in {r.node.name for r in decision.to_delete}
        assert "not retried before" in decision.verdicts[target][2]
        # After the recheck timeout it is a candidate again.
        c.advance(200)
        node_lifecycle(c)
        decision = ctl.run_once()
        assert decision.verdicts[target][1].value != "RecentlyUnremovable"


def test_delete_instances_503_twice_then_success_deletes_once(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config()) as ctl:
        c.gce.fail("POST", r"deleteInstances", 503, times=2)
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        c.wait_idle(ctl)
        target = decision.drain[0].node.name
        assert c.gce.deleted_instances == [target]
        assert len(c.gce.requests_matching("POST", r"deleteInstances")) == 3


def test_pool_at_min_size_is_never_shrunk(tmp_path: Path) -> None:
    with E2ECluster(tmp_path, min_per_zone=2) as c, c.controller(c.config()) as ctl:
        ctl.run_once()
        for _ in range(3):
            c.advance(601)
            decision = ctl.run_once()
            c.wait_idle(ctl)
            assert decision.to_delete == ()
        assert c.gce.deleted_instances == []
        assert not any(tainted(c, n) for n in c.nodes)
        # The first underused node is held by the min size (the second waits for the PDB budget).
        reasons = {decision.verdicts[n][1].value for n in c.underused}
        assert "NodeGroupMinSizeReached" in reasons and reasons <= {"NodeGroupMinSizeReached", "BlockedByPod"}
        assert ctl.metrics.unremovable_nodes.labels("NodeGroupMinSizeReached")._value.get() >= 1
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert status is not None and "reason: NodeGroupMinSizeReached" in status["data"]["status"]


def test_dry_run_writes_nothing_but_events_and_status(tmp_path: Path) -> None:
    """By default a dry-run writes nothing to the cluster's nodes or pods: its verdicts go to the
    status ConfigMap and events only."""
    with E2ECluster(tmp_path) as c, c.controller(c.config(), dry_run=True) as ctl:
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        assert decision.to_delete
        writes = [r for r in c.kube.requests if r.method != "GET" and "/events" not in r.path and "/configmaps" not in r.path]
        assert writes == []
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert status is not None and "mode: dry-run" in status["data"]["status"]
        assert any("[dry-run]" in e["message"] for e in c.events("ScaleDownDryRun"))


def test_dry_run_writes_node_verdicts_only_when_asked(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(write_node_status=True), dry_run=True) as ctl:
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        assert decision.to_delete
        writes = [r for r in c.kube.requests if r.method != "GET" and "/events" not in r.path and "/configmaps" not in r.path]
        # Only the nodes' status annotation and label (one merge patch of those two keys each).
        assert writes and {r.method for r in writes} == {"PATCH"}
        for r in writes:
            assert r.path.startswith("/api/v1/nodes/")
            meta = r.json()["metadata"]
            assert r.json().keys() == {"metadata"} and meta.keys() == {"annotations", "labels"}
            assert meta["annotations"].keys() == meta["labels"].keys() == {ANNOTATION_STATUS}
        assert not any(tainted(c, n) for n in c.nodes)
        assert c.gce.requests_matching("POST", r".") == []
        assert any("[dry-run]" in e["message"] for e in c.events("ScaleDownDryRun"))


@pytest.mark.parametrize("drained", [False, True])
def test_restart_after_crash_rolls_back_or_completes(tmp_path: Path, drained: bool) -> None:
    with E2ECluster(tmp_path) as c:
        target = c.underused[0]
        # A previous run tainted the node and (maybe) finished its drain, then died.
        from scaler.kube.writer import STATE_DRAINED, KubeWriter

        writer = KubeWriter(c.api, "scaler", clock=c.clock)
        writer.mark_to_be_deleted(target, c.clock())
        if drained:
            for pod in c.kube.objects("Pod"):
                if pod["spec"]["nodeName"] == target and pod["metadata"]["namespace"] != "kube-system":
                    c.kube.delete_object("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
            writer.set_state(target, STATE_DRAINED)
        with c.controller(c.config()) as ctl:
            ctl.run_once()
            c.wait_idle(ctl)
        if drained:
            assert c.gce.deleted_instances == [target]
        else:
            assert c.gce.deleted_instances == []
            assert not tainted(c, target)
            node = c.node(target)
            assert node is not None and not node["spec"].get("unschedulable")
            assert any(e["reason"] == "ScaleDownRolledBack" for e in c.events())


def test_stale_cluster_view_starts_nothing(tmp_path: Path) -> None:
    problem = ["pods"]
    with E2ECluster(tmp_path) as c, c.controller(c.config(), source_problem=lambda: ", ".join(problem)) as ctl:
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        assert decision.drain, "the plan still says what could go"
        assert not any(tainted(c, n) for n in c.nodes), "but nothing is started"
        assert ctl.metrics.errors.labels("stale_cache")._value.get() == 2
        problem.clear()
        c.advance(10)
        ctl.run_once()
        c.wait_idle(ctl)
        assert c.gce.deleted_instances


def test_steady_loop_makes_exactly_two_api_requests(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(scale_down_unneeded_time=3600)) as ctl:
        ctl.run_once()
        c.advance(10)
        ctl.run_once()  # the status settles
        before = len(c.kube.requests)
        loops = 5
        for _ in range(loops):
            c.advance(10)
            ctl.run_once()
        made = c.kube.requests[before:]
        paths = sorted(r.path for r in made)
        assert len(made) == 2 * loops, paths
        assert set(paths) == {"/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods"}


def test_metrics_outage_is_reported_once_and_starts_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(scale_down_unneeded_time=60, max_inactivity=30)) as ctl:
        first = ctl.run_once()
        assert first.unneeded and ctl.metrics.metrics_api_available._value.get() == 1
        c.kube.fail("/apis/metrics.k8s.io", 503)
        for _ in range(5):
            c.advance(20)
            decision = ctl.run_once()  # no exception: a state, not a traceback
            assert decision.to_delete == () and decision.unneeded == {}
            assert ctl.healthy(), "the loop is alive although nothing can be decided"
        assert not any(tainted(c, n) for n in c.nodes)
        assert {v[1].value for v in decision.verdicts.values()} == {"MetricsUnavailable"}
        assert set(decision.verdicts) == set(c.nodes)
        assert decision.cooldown.startswith("metrics.k8s.io unavailable since")
        assert ctl.metrics.metrics_api_available._value.get() == 0
        assert ctl.metrics.unremovable_nodes.labels("MetricsUnavailable")._value.get() == len(c.nodes)
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert status is not None and "status: Unavailable" in status["data"]["status"]
        assert "503" in status["data"]["status"]
        c.kube.reset_faults()
        c.advance(20)
        back = ctl.run_once()
        assert ctl.metrics.metrics_api_available._value.get() == 1
        assert back.unneeded and set(back.unneeded.values()) == {c.clock()}, "timers restart after an outage"
        assert back.to_delete == ()
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert status is not None and "status: Available" in status["data"]["status"]
    warnings = [r.getMessage() for r in caplog.records if "metrics API" in r.getMessage()]
    assert len(warnings) == 2 and "unavailable" in warnings[0] and "available again" in warnings[1], warnings
    assert not [r for r in caplog.records if r.exc_info]


def test_daemonset_pods_are_evicted_only_after_verify_passed(tmp_path: Path) -> None:
    """A pod bound to the node mid-drain makes the verify step refuse the deletion: the node is
    rolled back and its DaemonSet pod, which would have been lost for nothing, is not evicted
    (today's main evicted DaemonSet pods before verifying)."""
    from e2e_cluster import pod_json

    with E2ECluster(tmp_path) as c, c.controller(c.config()) as ctl:
        ctl.run_once()
        c.kube.delay("/api/v1/namespaces/", 0.5, match=lambda r: r.path.endswith("/eviction"), method="POST")
        c.advance(601)
        decision = ctl.run_once()
        assert len(decision.drain) == 1
        target = decision.drain[0].node.name
        c.wait_cache(lambda: any(r.path.endswith("/eviction") for r in c.kube.requests), 10)
        c.kube.load_objects([pod_json("intruder", target, owner=("ReplicaSet", "intruder"), created=c.clock())])
        c.wait_idle(ctl)
        evicted = [r.path for r in c.kube.requests if r.method == "POST" and r.path.endswith("/eviction")]
        assert not [p for p in evicted if "/kube-system/" in p], f"DaemonSet pods evicted: {evicted}"
        daemonset = [p["metadata"]["name"] for p in c.kube.objects("Pod")
                     if p["spec"]["nodeName"] == target and p["metadata"]["namespace"] == "kube-system"]  # fmt: skip
        assert daemonset, "the DaemonSet pod is still on the node"
        failed = [e for e in c.events("ScaleDownFailed") if e["involvedObject"]["name"] == target]
        assert failed and "verify: 1 non-DaemonSet pod(s) still on the node" in failed[0]["message"], failed
        assert not tainted(c, target) and c.gce.deleted_instances == []
        ctl.run_once()  # the outcome reaches the planner's state in the next loop
        detail = ctl.state.failed_removals[target]
        assert "(verify: 1 non-DaemonSet pod(s)" in detail and "verify: verify:" not in detail, detail


def test_a_replica_that_loses_the_lease_mid_drain_writes_nothing_more(tmp_path: Path) -> None:
    """The fence closes while a drain is under way: the removal stops where it is, with no
    further write, not even the rollback (the next leader's recovery owns the node). A write
    whose fence check passed before the lease was lost may still be on its way (an eviction sent
    in parallel with the others): at most as many as the checks passed and not yet seen as
    requests, and only evictions."""
    from scaler.kube.leader import LeaseLost

    holds = [True]
    passed = [0]
    counting = threading.Lock()  # the evictions' threads check the fence at once

    def fence() -> None:
        if not holds[0]:
            raise LeaseLost("replica test no longer holds the lease")
        with counting:
            passed[0] += 1

    def writes(requests: list[Any]) -> list[str]:
        return [f"{r.method} {r.path}" for r in requests if r.method != "GET"]

    with E2ECluster(tmp_path) as c, c.controller(c.config(), fence=fence) as ctl:
        ctl.run_once()
        c.kube.delay("/api/v1/namespaces/", 0.5, match=lambda r: r.path.endswith("/eviction"), method="POST")
        c.advance(601)
        decision = ctl.run_once()
        target = decision.drain[0].node.name
        c.wait_cache(lambda: any(r.path.endswith("/eviction") for r in c.kube.requests), 10)
        holds[0] = False
        with counting:
            checks_passed = passed[0]
        since = len(c.kube.requests)
        in_flight = checks_passed - len(writes(c.kube.requests[:since]))
        c.wait_idle(ctl)
        late = writes(c.kube.requests[since:])
        assert len(late) <= in_flight, f"writes after the lease was lost: {late} ({in_flight} checks passed before)"
        assert all(w.startswith("POST ") and w.endswith("/eviction") for w in late), f"more than evictions: {late}"
        assert tainted(c, target), "not rolled back: the next leader's recovery owns it"
        assert ctl.actuator.lease_lost.is_set() and c.gce.deleted_instances == []


def test_a_rollback_that_raises_is_retried_and_shows_meanwhile(tmp_path: Path) -> None:
    """The drain fails, and so does the rollback, with an unexpected error (the node's GET answers
    malformed JSON: not a WriteError). The failure is recorded at once, the node is listed under
    rollbacksPending in the status and counted in scaler_rollbacks_pending, and the rollback is
    retried until it succeeds. Today's main let the exception kill the removal thread: the node
    stayed tainted and cordoned."""
    with E2ECluster(tmp_path) as c, c.controller(c.config(max_pod_eviction_time=0.3)) as ctl:
        ctl.run_once()
        c.kube.fail("/api/v1/namespaces/", 429, match=lambda r: r.path.endswith("/eviction"), method="POST")
        c.kube.delay("/api/v1/namespaces/", 0.3, match=lambda r: r.path.endswith("/eviction"), method="POST")
        c.advance(601)
        decision = ctl.run_once()
        target = decision.drain[0].node.name
        c.kube.fail(f"/api/v1/nodes/{target}", 200, body=b"{not json", method="GET", exact=True)
        c.wait_cache(lambda: ctl.actuator.rollbacks.get(target, "not rolled back yet") != "not rolled back yet", 20)
        assert tainted(c, target)
        assert ctl.metrics.failed_scale_downs.labels("drain")._value.get() == 1, "the failure is recorded at once"
        assert ctl.metrics.rollbacks_pending._value.get() == 1
        c.advance(10)
        ctl.run_once()
        status = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
        assert status is not None and f"name: {target}" in status["data"]["status"].split("rollbacksPending:")[1]
        c.kube.reset_faults()
        c.wait_idle(ctl)
        assert not tainted(c, target)
        node = c.node(target)
        assert node is not None and not node["spec"].get("unschedulable")
        assert ctl.metrics.rollbacks_pending._value.get() == 0
