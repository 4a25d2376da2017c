"""Incomplete input and names that match nothing are said, never silently used: a snapshot
without NodeMetrics is an error, a kind absent from it is named on stderr, a metrics reading
stamped far ahead of the others is an error naming it, and a pool, MIG or machine-type name
that matches nothing in the cluster is an error with the closest existing name (``scaler
dry-run``), checked once at the start of ``scaler run``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, T0, ZONES, E2ECluster, node_json, pdb_json, pod_json, workload_json
from test_decisions_e2e import metrics_json, write_snapshot
from test_runner_e2e import start_process

from scaler.cli import main
from scaler.runner import StartupError, build_runner

NODES = ("gke-prod-default-pool-3e629681-x1y2", "gke-prod-default-pool-3e629681-z9w8")


def snapshot(directory: Path) -> Path:
    """Two nodes of ``default-pool`` (machine type e2-standard-4), a web pod on each, a PDB."""
    nodes = []
    for name in NODES:
        node = node_json(name, "default-pool", ZONES[0], f"gce://p/{ZONES[0]}/{name}")
        node["metadata"]["labels"]["node.kubernetes.io/instance-type"] = "e2-standard-4"
        nodes.append(node)
    pods = [pod_json(f"web-{i}", n, owner=("ReplicaSet", "web")) for i, n in enumerate(NODES)]
    node_metrics = [metrics_json(n, 300, 2 * GI, T0) for n in NODES]
    pod_metrics = [metrics_json(f"web-{i}", 100, GI, T0, "default") for i in range(2)]
    snap = write_snapshot(
        directory, nodes, pods, node_metrics, pod_metrics, [workload_json("ReplicaSet", "web", 2)]
    )
    (snap / "pdbs.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [pdb_json("web", "web", 1)]})
    )
    return snap


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["dry-run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err


def test_a_complete_snapshot_says_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--snapshot", str(snapshot(tmp_path / "s")))
    assert (code, err) == (0, "")


def test_no_node_metrics_is_an_error_with_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = snapshot(tmp_path / "s")
    (snap / "node-metrics.json").unlink()
    code, out, err = run(capsys, "--snapshot", str(snap))
    assert (code, out) == (2, "")
    line = one_line(err)
    assert line.startswith("scaler: error: no NodeMetrics in the input")
    assert (
        "kubectl get --raw /apis/metrics.k8s.io/v1beta1/nodes" in line
        and "--utilization-source=requests" in line
    )
    # Judged by requests, as cluster-autoscaler judges, NodeMetrics are not needed.
    code, _, err = run(capsys, "--snapshot", str(snap), "--utilization-source=requests")
    assert (code, err) == (0, "")


def test_absent_kinds_are_named_on_stderr_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = snapshot(tmp_path / "s")
    for name in ("pdbs.json", "workloads.json", "pod-metrics.json"):
        (snap / name).unlink()
    code, out, err = run(capsys, "--snapshot", str(snap), "-o", "json")
    assert code == 0 and json.loads(out)["nodes"]
    line = one_line(err)
    assert line.startswith("scaler: warning: the snapshot holds no PodDisruptionBudgets")
    assert "no workload controllers" in line and "no PodMetrics" in line


def test_a_metrics_reading_far_ahead_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = snapshot(tmp_path / "s")
    doc = json.loads((snap / "node-metrics.json").read_text())
    doc["items"][1]["timestamp"] = "2030-01-01T00:00:00Z"
    (snap / "node-metrics.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "--snapshot", str(snap))
    assert code == 2
    assert f"NodeMetrics {NODES[1]} is stamped 2030-01-01T00:00:00Z" in one_line(err)
    # A PodMetrics reading too; a few minutes apart is a normal scrape.
    snap = snapshot(tmp_path / "s2")
    doc = json.loads((snap / "pod-metrics.json").read_text())
    doc["items"][0]["timestamp"] = "2030-01-01T00:00:00Z"
    (snap / "pod-metrics.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "--snapshot", str(snap))
    assert code == 2 and "PodMetrics default/web-0 is stamped 2030" in one_line(err)
    doc["items"][0]["timestamp"] = metrics_json("x", 0, 0, T0 + 300)["timestamp"]
    (snap / "pod-metrics.json").write_text(json.dumps(doc))
    assert run(capsys, "--snapshot", str(snap))[0] == 0


@pytest.mark.parametrize(
    ("argv", "config", "message"),
    [
        (["--nodes=1:10:defualt-pool"], None,
         "--nodes entry 'defualt-pool' names no node pool or MIG of the snapshot (did you mean default-pool?)"),
        (["--nodes=1:10:default-pool:x"], None, "--nodes entry 'default-pool:x' names no node pool or MIG"),
        (["--nodes=1:10:gke-prod-default-pool-3e629618-grp"], None, "(did you mean gke-prod-default-pool-3e629681-grp?)"),
        ([], {"node-pools": {"defaultpool": {"min-size": 1}}},
         "node-pools key 'defaultpool' names no node pool of the snapshot (did you mean default-pool?)"),
        (["--scale-down-budget", "0;nodePools=default-pol"], None,
         "budget 'budget-1': nodePools entry 'default-pol' names no node pool of the snapshot (did you mean default-pool?)"),
        ([], {"budgets": [{"name": "night", "nodes": "1", "nodePools": ["default-pool", "batch"]}]},
         "budget 'night': nodePools entry 'batch' names no node pool of the snapshot"),
    ],
)  # fmt: skip
def test_names_that_match_nothing_are_errors(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    config: dict[str, Any] | None,
    message: str,
) -> None:
    snap = snapshot(tmp_path / "s")
    if config is not None:
        f = tmp_path / "config.yaml"
        f.write_text(json.dumps(config))
        argv = [*argv, "--config", str(f)]
    code, out, err = run(capsys, "--snapshot", str(snap), *argv)
    assert (code, out) == (2, "")
    assert message in one_line(err)


def test_a_price_for_no_machine_type_of_the_cluster_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = snapshot(tmp_path / "s")
    f = tmp_path / "prices.yaml"
    f.write_text("source: our contract\nprices: {e2-standard-4: 0.12, e2-standrad-8: 0.24}\n")
    code, _, err = run(capsys, "--snapshot", str(snap), "--prices", str(f))
    assert code == 2
    assert "--prices: machine type 'e2-standrad-8' is the type of no node of the snapshot" in one_line(err)
    f.write_text("e2-standard-4: 0.12\n")  # the plain layout
    assert run(capsys, "--snapshot", str(snap), "--prices", str(f))[0] == 0


# ---- scaler run: checked once at start-up ----------------------------------------------------------


def test_run_refuses_to_start_on_a_pool_the_gke_api_does_not_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with E2ECluster(tmp_path) as c:
        proc = start_process(c, "--nodes=1:3:pool-b", "--leader-elect=false")
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 2, out
        errors = [line for line in out.splitlines() if line.startswith("scaler: error:")]
        assert errors == [
            "scaler: error: --nodes entry 'pool-b' names no node pool or MIG of the cluster (GKE API) "
            "(did you mean pool-a?)"
        ], out
        # The pool and a MIG the GKE API lists pass.
        monkeypatch.setenv("SCALER_GCE_API_ENDPOINT", c.gce.url)
        mig = c.gce.mig_of(c.nodes[0]).name
        cfg = c.config(nodes=[f"1:3:{mig}", "0:5:pool-a"], address="127.0.0.1:0")
        build_runner(cfg, c.api, dry_run=True, identity="t").cache.stop()
        with pytest.raises(StartupError, match=r"'pool-aa' names no node pool .*\(did you mean pool-a\?\)"):
            build_runner(
                c.config(nodes=["1:3:pool-aa"], address="127.0.0.1:0"), c.api, dry_run=True, identity="t"
            )


def test_run_with_the_kubernetes_provider_warns_and_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Only nodes tell the pools there: a pool scaled to zero has no node, so a name matching no
    node must not keep the controller from starting (nor restart it in a loop)."""
    with E2ECluster(tmp_path) as c, caplog.at_level(logging.WARNING):
        cfg = c.config(cloud_provider="kubernetes", address="127.0.0.1:0", nodes=["0:3:batch"])
        runner = build_runner(cfg, c.api, dry_run=True, identity="t")
        runner.cache.stop()
        assert "--nodes entry 'batch' names no node pool or MIG of the cluster's nodes" in caplog.text
