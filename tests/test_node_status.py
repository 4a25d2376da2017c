"""``scaler.io/scale-down-status`` on the nodes: written by the controller once per change of a
node's status or reason, against the loopback Kubernetes fake, with the requests counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, E2ECluster

from scaler.controller import Controller
from scaler.kube.writer import ANNOTATION_STATUS, LABEL_STATUS, KubeWriter, WriteError


def status_patches(c: E2ECluster, since: int = 0) -> list[Any]:
    return [r for r in c.kube.requests[since:] if r.method == "PATCH" and r.path.startswith("/api/v1/nodes/")]


def on_node(c: E2ECluster, name: str) -> tuple[str | None, dict[str, Any] | None]:
    node = c.node(name)
    assert node is not None
    meta = node["metadata"]
    annotation = (meta.get("annotations") or {}).get(ANNOTATION_STATUS)
    return (meta.get("labels") or {}).get(LABEL_STATUS), json.loads(annotation) if annotation else None


def loop(c: E2ECluster, ctl: Controller, seconds: float = 10) -> list[Any]:
    """Advance the clock, run one loop, return the status patches it made."""
    c.advance(seconds)
    before = len(c.kube.requests)
    ctl.run_once()
    return status_patches(c, before)


def test_each_node_is_annotated_once_then_only_when_its_verdict_changes(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(scale_down_unneeded_time=3600)) as ctl:
        first = loop(c, ctl, 0)
        assert sorted(r.path.rsplit("/", 1)[1] for r in first) == sorted(c.nodes)  # one request per node
        busy = c.busy[0]
        idle = next(n for n in c.underused if on_node(c, n)[0] == "NotUnneededLongEnough")
        label, doc = on_node(c, busy)
        assert label == "NotUnderutilized" and doc is not None
        assert doc["status"] == "unremovable" and doc["reason"] == "NotUnderutilized" and "threshold 50%" in doc["detail"]
        assert doc["since"] == "2027-01-15T08:00:00Z"
        label, doc = on_node(c, idle)
        assert doc is not None and doc["reason"] == label and doc["status"] == "unremovable"
        blocked = next(n for n in c.underused if n != idle)
        assert on_node(c, blocked)[0] == "BlockedByPod"  # the PDB allows one of the two
        # The blocked node is now RecentlyUnremovable (not re-simulated): its reason still holds.
        assert loop(c, ctl) == []
        # Steady: no status write, and exactly the two metrics LISTs per loop.
        for _ in range(3):
            before = len(c.kube.requests)
            assert loop(c, ctl) == []
            paths = sorted(r.path for r in c.kube.requests[before:])
            assert paths == ["/apis/metrics.k8s.io/v1beta1/nodes", "/apis/metrics.k8s.io/v1beta1/pods"]
        # The idle node gets busy: one write, for it alone, with a new "since".
        c.usage[idle] = (3_000, 9 * GI)
        changed = loop(c, ctl)
        assert [r.path for r in changed] == [f"/api/v1/nodes/{idle}"]
        label, doc = on_node(c, idle)
        assert label == "NotUnderutilized" and doc is not None and doc["since"] == "2027-01-15T08:00:50Z"
        assert loop(c, ctl) == []


def test_a_restarted_controller_rewrites_nothing_still_true(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c:
        cfg = c.config(scale_down_unneeded_time=3600)
        with c.controller(cfg) as ctl:
            assert len(loop(c, ctl, 0)) == len(c.nodes)
        since = {n: on_node(c, n)[1] for n in c.nodes}
        with c.controller(cfg) as ctl:  # a new replica: new memory, a cache listed afresh
            assert loop(c, ctl) == []
        assert {n: on_node(c, n)[1] for n in c.nodes} == since


def test_switched_off_no_node_is_written(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(write_node_status=False), dry_run=True) as ctl:
        assert loop(c, ctl, 0) == [] and loop(c, ctl, 601) == []
        assert on_node(c, c.nodes[0]) == (None, None)


def test_followers_do_not_write(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(), leader=False) as ctl:
        assert loop(c, ctl, 0) == []


def test_writes_per_loop_are_capped_candidates_first(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(scale_down_unneeded_time=3600)) as ctl:
        ctl.node_status_writes_per_loop = 2
        first = loop(c, ctl, 0)
        assert len(first) == 2
        unneeded = set(ctl.last_plan.unneeded) if ctl.last_plan else set()
        written = {r.path.rsplit("/", 1)[1] for r in first}
        assert unneeded and unneeded <= written  # the unneeded node goes first
        counts = [len(loop(c, ctl)) for _ in range(3)]
        assert counts == [2, 2, 0]  # six nodes in all, then nothing
        assert all(on_node(c, n)[0] for n in c.nodes)


def test_a_failed_write_is_counted_and_retried_next_loop(tmp_path: Path) -> None:
    with E2ECluster(tmp_path) as c, c.controller(c.config(scale_down_unneeded_time=3600)) as ctl:
        c.kube.fail("/api/v1/nodes/", 500, times=1, method="PATCH")
        first = loop(c, ctl, 0)
        assert len(first) == 1  # the loop stops writing at the first failure, and goes on
        assert ctl.metrics.errors.labels("node_status")._value.get() == 1
        assert len(loop(c, ctl)) == len(c.nodes)
        assert loop(c, ctl) == []


def test_without_node_get_scaler_cannot_taint_but_can_write_the_status(tmp_path: Path) -> None:
    """The dry-run overlay's RBAC (node patch, no node get) as the fake answers it: every taint,
    cordon or rollback is a read-modify-write that starts with the refused GET, so no PATCH is
    sent; the status is one blind merge patch and goes through."""
    with E2ECluster(tmp_path) as c:
        name = c.nodes[0]
        c.kube.fail(f"/api/v1/nodes/{name}", 403, method="GET", exact=True)
        writer = KubeWriter(c.api, "scaler", clock=c.clock)
        before = len(c.kube.requests)
        for act in (lambda: writer.mark_to_be_deleted(name, c.clock()), lambda: writer.set_state(name, "drained"),
                    lambda: writer.clean_to_be_deleted(name)):  # fmt: skip
            with pytest.raises(WriteError, match="HTTP 403"):
                act()
        assert [r.method for r in c.kube.requests[before:]] == ["GET", "GET", "GET"]
        assert writer.set_node_status(name, '{"status":"unremovable"}', "NotUnderutilized")
        assert on_node(c, name)[0] == "NotUnderutilized"
        assert not (c.node(name) or {}).get("spec", {}).get("taints")
