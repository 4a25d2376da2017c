"""Decisions end to end: ``scaler dry-run`` on snapshots written as ``kubectl get -o json`` prints
them, and ``scaler run``'s controller against the loopback Kubernetes and GCE fakes.

Each case is a plan a live cluster would regret: moved pods counted by their requests only,
pods the metrics do not show yet, a zone's MIG taken below its minimum, expendable pods
blocking a deletion forever.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, T0, ZONES, E2ECluster, iso, node_json, pod_json, workload_json

from scaler.cli import main

MI = 2**20


# ---- snapshot files --------------------------------------------------------------------------


def metrics_json(name: str, cpu_m: int, mem: int, at: float, namespace: str | None = None) -> dict[str, Any]:
    """A NodeMetrics item (a PodMetrics item with ``namespace``), 30 s window ending at ``at``."""
    meta: dict[str, Any] = {"name": name}
    usage = {"cpu": f"{cpu_m}m", "memory": str(mem)}
    if namespace is None:
        return {"metadata": meta, "timestamp": iso(at), "window": "30s", "usage": usage}
    meta["namespace"] = namespace
    return {
        "metadata": meta,
        "timestamp": iso(at),
        "window": "30s",
        "containers": [{"name": "c", "usage": usage}],
    }


def write_snapshot(
    directory: Path,
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    node_metrics: list[dict[str, Any]],
    pod_metrics: list[dict[str, Any]] = (),  # type: ignore[assignment]
    workloads: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> Path:
    """Write the objects as the files ``kubectl get -o json`` (and ``--raw`` for metrics) print."""
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "nodes.json": {"apiVersion": "v1", "kind": "List", "items": nodes},
        "pods.json": {"apiVersion": "v1", "kind": "List", "items": pods},
        "workloads.json": {"apiVersion": "v1", "kind": "List", "items": list(workloads)},
        "node-metrics.json": {
            "kind": "NodeMetricsList",
            "apiVersion": "metrics.k8s.io/v1beta1",
            "items": node_metrics,
        },
        "pod-metrics.json": {
            "kind": "PodMetricsList",
            "apiVersion": "metrics.k8s.io/v1beta1",
            "items": list(pod_metrics),
        },
    }
    for name, doc in files.items():
        (directory / name).write_text(json.dumps(doc, indent=4))
    return directory


def dry_run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, dict[str, Any]]:
    """``scaler dry-run -o json`` → node name → its report entry."""
    code = main(["dry-run", *argv, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return {n["name"]: n for n in json.loads(out)["nodes"]}


def best_effort_pod(name: str, node: str, owner: str) -> dict[str, Any]:
    pod = pod_json(name, node, owner=("ReplicaSet", owner))
    pod["spec"]["containers"][0]["resources"] = {}
    pod["status"]["qosClass"] = "BestEffort"
    return pod


def test_dry_run_counts_moved_pods_by_what_they_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten BestEffort pods using 180m each and a destination at 42.5% of 4 cores: counting
    their requests (zero) they all fit and the destination would run at 87.5%."""
    nodes = [node_json(n, "pool-a", "z1", "") for n in ("dst", "src")]
    pods = [best_effort_pod(f"be-{i}", "src", "batch") for i in range(10)]
    pods.append(pod_json("resident", "dst", owner=("ReplicaSet", "resident")))
    node_metrics = [metrics_json("dst", 1700, int(9.6 * GI), T0), metrics_json("src", 1900, 2 * GI, T0)]
    pod_metrics = [metrics_json(f"be-{i}", 180, 64 * MI, T0, "default") for i in range(10)]
    workloads = [workload_json("ReplicaSet", "batch", 10), workload_json("ReplicaSet", "resident", 1)]
    snap = write_snapshot(tmp_path / "snap", nodes, pods, node_metrics, pod_metrics, workloads)
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["dst"]["reason"] == "NotUnderutilized"
    assert report["src"]["reason"] == "NoPlaceToMovePods"
    assert "cpu usage above target 45%" in report["src"]["detail"]
    # Without PodMetrics the pods' usage is unknown, never zero: src stays, and says why.
    snap2 = write_snapshot(tmp_path / "snap2", nodes, pods, node_metrics, [], workloads)
    report = dry_run(capsys, "--snapshot", str(snap2))
    assert report["src"]["reason"] == "MetricsUnavailable"
    assert "neither a cpu request nor PodMetrics" in report["src"]["detail"]


# ---- scaler run: pods the metrics do not show yet ---------------------------------------------


class LaggingCluster(E2ECluster):
    """Two sources (pool ``src``, one node per zone) and two destinations (pool ``dst``, one
    zone). Each source runs one pod requesting 200m and 1.5 GiB; the destinations use 20% cpu
    and 60% memory (no candidates), so each has room for one source's pod under TargetUsage's
    75% memory target (12 GiB of 16), not for two."""

    def objects(self) -> list[dict[str, Any]]:
        sources = self.gce.add_pool("src", ZONES[:2], 1)
        destinations = sorted(self.gce.add_pool("dst", ZONES[:1], 2))
        self.sources, self.destinations = sources, destinations
        self.nodes = [*sources, *destinations]
        objects: list[dict[str, Any]] = []
        for name in self.nodes:
            pool = self.gce.pool_of(name)
            objects.append(node_json(name, pool, self.gce.mig_of(name).zone, self.gce.provider_id(name)))
            self.usage[name] = (800, int(9.6 * GI)) if pool == "dst" else (150, 2 * GI)
        for i, name in enumerate(sources):
            objects.append(pod_json(f"app-{i}", name, owner=("ReplicaSet", "app"), mem=3 * GI // 2))
        for i, name in enumerate(destinations):
            objects.append(pod_json(f"resident-{i}", name, owner=("ReplicaSet", "resident"), mem=GI))
        objects += [workload_json("ReplicaSet", "app", 2), workload_json("ReplicaSet", "resident", 2)]
        return objects


def test_run_does_not_pile_a_second_drain_onto_a_destination_whose_metrics_lag(tmp_path: Path) -> None:
    with LaggingCluster(tmp_path) as c, c.controller(c.config()) as ctl:
        first_dst, second_dst = c.destinations
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        # Both sources are unneeded; one drain at a time (--max-drain-parallelism=1). The first
        # source's pod goes to the first destination, the second's to the other one.
        assert len(decision.drain) == 1
        drained = decision.drain[0].node.name
        assert {d for _, d in decision.drain[0].moves} == {first_dst}
        waiting = next(n for n in c.sources if n != drained)
        assert waiting in decision.unneeded
        c.wait_idle(ctl)
        assert c.gce.deleted_instances == [drained]
        c.kube.delete_object("Node", drained)
        # kube-scheduler placed the replacement on the first destination; that node's metrics
        # still show the old usage under a new timestamp (metrics-server has not scraped it yet).
        moved = next(p for p, _ in decision.drain[0].moves)
        c.kube.load_objects([
            pod_json(f"{moved.name}-r", first_dst, owner=("ReplicaSet", "app"), mem=3 * GI // 2,
                     created=c.clock() + 3600, started=c.clock())
        ])  # fmt: skip
        c.advance(10)
        c.wait_cache(lambda: any(p.name == f"{moved.name}-r" for p in ctl.snapshot_source(c.clock()).pods))
        again = ctl.run_once()
        assert [r.node.name for r in again.drain] == [waiting]
        # 9.6 GiB + 1.5 GiB (the replacement, not in the metrics) + 1.5 GiB > 12 GiB: not there.
        assert {d for _, d in again.drain[0].moves} == {second_dst}
        c.wait_idle(ctl)


# ---- scaler run: expendable pods -------------------------------------------------------------


def test_run_deletes_a_node_with_expendable_pods_on_it(tmp_path: Path) -> None:
    """Pods below --expendable-pods-priority-cutoff are neither moved nor waited for: the node is
    deleted with them on it, as CA does (the verify step used to count them and roll back)."""
    with E2ECluster(tmp_path) as c:
        c.kube.load_objects([
            pod_json(f"cheap-{i}", name, owner=("ReplicaSet", "batch"), priority=-100)
            for i, name in enumerate(c.underused)
        ] + [workload_json("ReplicaSet", "batch", 2)])  # fmt: skip
        with c.controller(c.config()) as ctl:
            ctl.run_once()
            c.advance(601)
            decision = ctl.run_once()
            assert len(decision.drain) == 1
            target = decision.drain[0].node.name
            assert all(not p.name.startswith("cheap") for p, _ in decision.drain[0].moves)
            c.wait_idle(ctl)
            assert c.gce.deleted_instances == [target]
            assert not c.events("ScaleDownFailed")
            assert ctl.metrics.scaled_down_nodes.labels("underutilized")._value.get() == 1
            # Nothing evicted the expendable pod: it was still there when the VM went.
            assert c.kube.get_object("Pod", f"cheap-{c.underused.index(target)}", "default") is not None


# ---- node-group minimums per zone --------------------------------------------------------------


def test_dry_run_applies_each_mig_entry_to_its_mig(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three DaemonSet-only nodes of one pool, one per MIG (zone), each MIG at its --nodes
    minimum: all NodeGroupMinSizeReached. A --nodes entry naming the pool means per zone too."""
    migs = [f"gke-prod-default-pool-{h}" for h in ("3e629681", "8c1d0f2a", "f00dcafe")]
    nodes = [node_json(f"{m}-x1y2", "default-pool", z, f"gce://p/{z}/{m}-x1y2") for m, z in zip(migs, ZONES, strict=True)]
    nodes.append(node_json("big", "other", ZONES[0], "", cpu_m=32_000, mem=128 * GI))
    pods = [
        pod_json(f"agent-{i}", n["metadata"]["name"], owner=("DaemonSet", "agent"), namespace="kube-system")
        for i, n in enumerate(nodes[:3])
    ]
    node_metrics = [metrics_json(n["metadata"]["name"], 100, GI, T0) for n in nodes]
    snap = write_snapshot(
        tmp_path / "snap", nodes, pods, node_metrics, workloads=[workload_json("DaemonSet", "agent", None, "kube-system")]
    )
    mig_flags = [f"--nodes=1:3:https://www.googleapis.com/compute/v1/projects/p/zones/{z}/instanceGroups/{m}-grp"
                 for m, z in zip(migs, ZONES, strict=True)]  # fmt: skip
    report = dry_run(capsys, "--snapshot", str(snap), *mig_flags)
    assert {report[n["metadata"]["name"]]["reason"] for n in nodes[:3]} == {"NodeGroupMinSizeReached"}
    report = dry_run(capsys, "--snapshot", str(snap), "--nodes=1:3:default-pool")
    assert {report[n["metadata"]["name"]]["reason"] for n in nodes[:3]} == {"NodeGroupMinSizeReached"}
    report = dry_run(capsys, "--snapshot", str(snap))
    assert {report[n["metadata"]["name"]]["status"] for n in nodes[:3]} == {"removable-empty"}


def test_run_keeps_a_zone_at_its_minimum(tmp_path: Path) -> None:
    """A 3-zone pool with minNodeCount 1 (per zone, as GKE means it) whose two underused nodes
    are both in one zone: one goes, the other stays (the pool-wide reading, 3 of 6, let both go)."""
    with E2ECluster(tmp_path, min_per_zone=1) as c, c.controller(c.config()) as ctl:
        assert len({c.gce.mig_of(n).zone for n in c.underused}) == 1
        decision = ctl.run_once()
        for _ in range(40):
            c.advance(60)
            for name in c.gce.deleted_instances:
                if c.node(name) is not None:
                    c.kube.delete_object("Node", name)
            decision = ctl.run_once()
            c.wait_idle(ctl)
        assert len(c.gce.deleted_instances) == 1
        kept = next(n for n in c.underused if n not in c.gce.deleted_instances)
        assert decision.verdicts[kept][1].value == "NodeGroupMinSizeReached"
        assert "per zone" in decision.verdicts[kept][2]
        zone = c.gce.mig_of(kept).zone
        assert c.gce.target_size("pool-a") == 5
        assert next(m for m in c.gce.pools["pool-a"].migs if m.zone == zone).target_size == 1


# ---- pod affinity with a namespaceSelector -----------------------------------------------------


def test_dry_run_resolves_affinity_namespace_selectors_against_namespace_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """web must share a zone with a db pod of a namespace labelled team=a. zone-a holds only
    team-b's db: kube-scheduler refuses dst-a there, and so must the simulation (a selector
    taken as "all namespaces" accepted it)."""
    nodes = [
        node_json("src", "pool-a", "zone-a", ""),
        node_json("dst-a", "pool-a", "zone-a", ""),
        node_json("dst-b", "pool-a", "zone-b", ""),
    ]
    web = pod_json("web", "src", owner=("ReplicaSet", "web"), namespace="web")
    web["spec"]["affinity"] = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {"matchLabels": {"team": "a"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    }
    pods = [
        web,
        pod_json("db-b", "dst-a", owner=("StatefulSet", "db"), namespace="team-b"),
        pod_json("db-a", "dst-b", owner=("StatefulSet", "db"), namespace="team-a"),
    ]
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": labels}}
        for n, labels in (("web", {}), ("team-a", {"team": "a"}), ("team-b", {"team": "b"}))
    ]
    usage = {"src": (200, GI), "dst-a": (1000, 10 * GI), "dst-b": (1000, 10 * GI)}
    node_metrics = [metrics_json(n, c, m, T0) for n, (c, m) in usage.items()]
    workloads = [
        workload_json("ReplicaSet", "web", 1, "web"),
        workload_json("StatefulSet", "db", 1, "team-a"),
        workload_json("StatefulSet", "db", 1, "team-b"),
    ]
    snap = write_snapshot(tmp_path / "snap", nodes, pods, node_metrics, workloads=workloads)
    (snap / "namespaces.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": namespaces}))
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["src"]["status"] == "removable-drain"
    assert [m["destination"] for m in report["src"]["moves"]] == ["dst-b"]
    # Without the Namespaces the selector's namespaces are unknown: no destination is proven.
    (snap / "namespaces.json").unlink()
    report = dry_run(capsys, "--snapshot", str(snap))
    assert report["src"]["reason"] == "NoPlaceToMovePods"
