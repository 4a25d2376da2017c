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
