"""Decisions at the edges of the input, end to end through ``scaler dry-run --snapshot``: unknown
usage never read as zero, expendable pods ignored everywhere, cluster-autoscaler's scale-down
reasons, a node's usage never below what its pods use, bad quantities and times refused in one
line, prices attributed to their source, and kube-scheduler's own node-affinity table entry.

Each snapshot is a handful of nodes written as ``kubectl get -o json`` prints them
(:func:`test_decisions_e2e.write_snapshot`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, T0, node_json, pod_json, workload_json
from test_decisions_e2e import dry_run, metrics_json, write_snapshot

from scaler.cli import main

MI = 2**20


def not_ready(node: dict[str, Any]) -> dict[str, Any]:
    node["status"]["conditions"][0]["status"] = "False"
    return node


# ---- CA's scale-down reasons --------------------------------------------------------------------


def test_an_empty_not_ready_node_is_unready_for_budgets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CA 1.30 ``nodeScaleDownReason`` checks readiness first: an empty NotReady node is removed
    for the reason ``unready``, so a ``reasons: [unready]`` budget of 0 holds it."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2")]
    nodes.append(not_ready(node_json("n3", "pool-a", "z1", "")))
    pods = [pod_json(f"a-{n}", n, owner=("ReplicaSet", "app")) for n in ("n1", "n2")]
    node_metrics = [metrics_json(n, 2000, 8 * GI, T0) for n in ("n1", "n2")]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, [], [workload_json("ReplicaSet", "app", 2)])
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["n3"]["status"] == "removable-empty"
    report = dry_run(capsys, "--snapshot", str(snap), "--scale-down-budget", "0;reasons=unready")
    assert not report["n3"]["removable"], report["n3"]
    assert "unready" in report["n3"]["detail"]
    report = dry_run(capsys, "--snapshot", str(snap), "--scale-down-budget", "0;reasons=empty")
    assert report["n3"]["status"] == "removable-empty"


# ---- expendable pods ----------------------------------------------------------------------------


def test_an_expendable_pod_not_yet_in_the_metrics_is_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A priority -100 BestEffort pod that started after ``dst``'s metrics window: expendable
    (below the default cutoff -10), so its unknown usage neither makes ``dst``'s usage unknown
    nor keeps ``src``'s pod from moving there."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("dst", "src")]
    late = pod_json("late", "dst", owner=("ReplicaSet", "late"), started=T0 - 5, priority=-100)
    late["spec"]["containers"][0]["resources"] = {}
    pods = [pod_json("app", "src", owner=("ReplicaSet", "app")), late]
    pods.append(pod_json("resident", "dst", owner=("ReplicaSet", "resident"), cpu_m=1000, mem=4 * GI))
    node_metrics = [metrics_json("dst", 1000, 4 * GI, T0), metrics_json("src", 300, GI, T0)]
    workloads = [workload_json("ReplicaSet", n, 1) for n in ("app", "late", "resident")]
    snap = write_snapshot(tmp_path / "s", nodes, pods, node_metrics, [], workloads)
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["dst"]["reason"] != "MetricsUnavailable", report["dst"]["detail"]
    assert report["src"]["status"] == "removable-drain", report["src"]["detail"]
    assert [m["destination"] for m in report["src"]["moves"]] == ["dst"]


def test_a_pod_without_priority_is_never_expendable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """CA's ``IsExpendablePod`` needs ``spec.priority``: a bare pod without one still blocks its
    node under ``--expendable-pods-priority-cutoff=10``; one with priority 0 does not."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("n1", "n2")]
    bare = pod_json("bare", "n1", owner=("ReplicaSet", "x"))
    del bare["metadata"]["ownerReferences"]
    ranked = pod_json("ranked", "n2", owner=("ReplicaSet", "x"), priority=0)
    del ranked["metadata"]["ownerReferences"]
    node_metrics = [metrics_json(n, 200, GI, T0) for n in ("n1", "n2")]
    snap = write_snapshot(tmp_path / "s", nodes, [bare, ranked], node_metrics)
    report = dry_run(capsys, "--snapshot", str(snap), "--expendable-pods-priority-cutoff=10")
    assert report["n1"]["reason"] == "BlockedByPod"
    assert report["n1"]["blockingPod"]["reason"] == "NotReplicated"
    assert report["n2"]["status"] == "removable-empty"
