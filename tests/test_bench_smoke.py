"""Smoke test of the benchmark generator (``benchmarks/``): a 50-node cluster, in memory and as
files, evaluated once. The benchmarks themselves run with ``make bench``, never here; nothing
here asserts on time."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import placement_kernel, tune
from benchmarks.generate import FILES, Cluster, generate
from scaler.config import ScalerConfig
from scaler.engine import evaluate
from scaler.model.snapshot import ClusterSnapshot
from scaler.sources.files import load_snapshot

NODES = 50


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return generate(NODES)


@pytest.fixture(scope="module")
def snapshot(cluster: Cluster) -> ClusterSnapshot:
    return cluster.snapshot()


def test_generation_is_deterministic(cluster: Cluster) -> None:
    assert list(generate(NODES).iter_objects()) == list(cluster.iter_objects())


def test_cluster_shape_and_constraints(cluster: Cluster) -> None:
    stats = cluster.stats()
    assert stats["nodes"] == NODES
    assert 25 * NODES <= stats["pods"] <= 35 * NODES  # about 30 pods per node
    for constraint in (
        "underused_nodes",
        "tainted_nodes",
        "tolerations",
        "node_selectors",
        "anti_affinity",
        "topology_spread_hard",
        "pdbs",
        "local_storage",
        "bare_pods",
    ):
        assert stats[constraint] > 0, constraint


def test_files_and_memory_give_the_same_snapshot(
    cluster: Cluster, snapshot: ClusterSnapshot, tmp_path: Path
) -> None:
    sizes = cluster.write(tmp_path)
    assert sorted(sizes) == sorted(FILES) and all(v > 0 for v in sizes.values())
    from_files = load_snapshot([tmp_path])
    in_memory = snapshot
    assert from_files.nodes == in_memory.nodes
    assert from_files.pods == in_memory.pods
    assert from_files.pdbs == in_memory.pdbs
    assert from_files.node_metrics == in_memory.node_metrics
    assert from_files.now == in_memory.now


def test_evaluation_sees_every_kind_of_verdict(snapshot: ClusterSnapshot) -> None:
    assert len(snapshot.nodes) == NODES
    result = evaluate(snapshot, ScalerConfig())
    assert len(result.nodes) == NODES
    reasons = Counter(r.reason.value for r in result.nodes)
    assert reasons["NotUnderutilized"] > 0  # busy nodes
    assert sum(1 for r in result.nodes if r.removable) > 0  # underused nodes go
    blocking = Counter(r.blocking_pod.reason.value for r in result.nodes if r.blocking_pod)
    assert blocking  # drain rules at work
    again = evaluate(snapshot, ScalerConfig())
    assert [(r.node.name, r.status, r.detail, r.moves) for r in again.nodes] == [
        (r.node.name, r.status, r.detail, r.moves) for r in result.nodes
    ]


def test_live_steady_loop_requests_on_a_generated_cluster() -> None:
    """The live benchmark (item 2(d)): against the loopback fake, a steady loop makes the two
    metrics LISTs only when the kubernetes provider takes its sizes from the snapshot; LISTing
    the nodes adds one request per page. Leader election renews the Lease apart."""
    from benchmarks.live import measure_live

    live = measure_live(NODES, loops=2, lease_seconds=2.5)
    assert live["node_source"]["requests_per_loop"] == [2, 2]
    assert set(live["node_source"]["requests"]) == {
        "GET /apis/metrics.k8s.io/v1beta1/nodes",
        "GET /apis/metrics.k8s.io/v1beta1/pods",
    }
    assert live["node_list"]["requests"]["GET /api/v1/nodes"] == 2  # one page per loop, 2 loops
    assert live["lease"]["methods"].get("PUT", 0) >= 1


def test_floor_and_steady_loop_benchmarks_run(cluster: Cluster, tmp_path: Path) -> None:
    # The measuring code of `make bench` (b) and (d), at 30 nodes; nothing here asserts on time.
    from benchmarks.loop import measure_loop
    from benchmarks.run import _work_floor

    cluster.write(tmp_path)
    floor = _work_floor(str(tmp_path / "pods.json"))
    assert floor["pods"] == cluster.stats()["pods"] and floor["seconds"] > 0
    loop = measure_loop(30, loops=2)
    assert loop["requests_per_loop"] == [2, 2]
    assert loop["requests"] == ["GET /apis/metrics.k8s.io/v1beta1/nodes", "GET /apis/metrics.k8s.io/v1beta1/pods"]
    assert loop["evaluated_nodes"] == 30


def test_the_tune_benchmark_refuses_a_halving_dir_that_is_no_tune_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "frontier.json").write_text('{"run": {}}')
    for bad in (tmp_path / "absent", tmp_path):
        assert tune.main(["--halving-from", str(bad), "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"--halving-from {bad}:" in err


def test_the_placement_kernel_measure_refuses_bad_sizes_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--nodes", "0"], ["--steps", "-3"]):
        assert placement_kernel.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "must be at least 1" in err and argv[1] in err


@pytest.mark.skipif(importlib.util.find_spec("numba") is not None, reason="numba is installed here")
def test_the_placement_kernel_measure_says_in_one_line_that_it_needs_numba(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert placement_kernel.main(["--nodes", "10", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install numba" in err
