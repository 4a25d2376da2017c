"""A large GKE node pool has several MIGs in one zone; each keeps its own minimum: in the
dry-run (MIGs known from the node names, GKE's instance naming), in the controller's plan (MIGs
read from the GCE API) and in the GKE provider's own refusal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, T0, ZONES, E2ECluster, node_json, pod_json, workload_json
from test_decisions_e2e import dry_run, metrics_json, write_snapshot

from scaler.cloud.base import MinSizeReached
from scaler.limits import GroupLimits
from scaler.model.records import Node

ZONE = "us-central1-a"
MIGS = ("gke-c-pool-a-aaaa1111", "gke-c-pool-a-bbbb2222", "gke-c-pool-a-cccc3333")


def three_mig_snapshot(directory: Path) -> Path:
    """Pool ``pool-a`` in one zone through three single-node MIGs, each node holding only a
    DaemonSet pod (removable-empty unless a minimum holds it), and a big node of another pool."""
    nodes = [node_json(f"{m}-x1y2", "pool-a", ZONE, f"gce://p/{ZONE}/{m}-x1y2") for m in MIGS]
    nodes.append(node_json("big", "other", ZONE, "", cpu_m=32_000, mem=128 * GI))
    pods = [
        pod_json(f"agent-{i}", n["metadata"]["name"], owner=("DaemonSet", "agent"), namespace="kube-system")
        for i, n in enumerate(nodes)
    ]
    node_metrics = [metrics_json(n["metadata"]["name"], 100, GI, T0) for n in nodes]
    workloads = [workload_json("DaemonSet", "agent", None, "kube-system")]
    return write_snapshot(directory, nodes, pods, node_metrics, workloads=workloads)


def statuses(report: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {m: report[f"{m}-x1y2"]["reason"] for m in MIGS}


def test_dry_run_holds_each_mig_at_its_own_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snap = three_mig_snapshot(tmp_path / "snap")
    every_mig = [f"--nodes=1:5:{m}-grp" for m in MIGS]
    report = dry_run(capsys, "--snapshot", str(snap), *every_mig)
    assert set(statuses(report).values()) == {"NodeGroupMinSizeReached"}  # was: two of three removable
    detail = report[f"{MIGS[1]}-x1y2"]["detail"]
    assert detail == f"node group pool-a has 1 nodes in MIG {MIGS[1]}-grp, min 1 per MIG"
    # One MIG named: that one is held, the two others have min 0 and go.
    report = dry_run(capsys, "--snapshot", str(snap), f"--nodes=1:5:{MIGS[0]}-grp")
    assert statuses(report) == {MIGS[0]: "NodeGroupMinSizeReached", MIGS[1]: "NoReason", MIGS[2]: "NoReason"}
    # An entry naming the pool limits each of its MIGs, as the GKE provider applies it.
    report = dry_run(capsys, "--snapshot", str(snap), "--nodes=1:5:pool-a")
    assert set(statuses(report).values()) == {"NodeGroupMinSizeReached"}


def test_instance_group_base_follows_gke_naming() -> None:
    from scaler.limits import instance_group_base

    assert instance_group_base("gke-prod-default-pool-3e629681-x1y2") == "gke-prod-default-pool-3e629681"
    assert instance_group_base("gke-c-pool-a-aaaa1111-0a1b") == "gke-c-pool-a-aaaa1111"
    for name in ("node-1", "gke-x", "gke-c-pool", "gke-c-pool-"):
        assert instance_group_base(name) == ""
    limits = GroupLimits()
    assert limits.group_key(Node("gke-c-pool-a-aaaa1111-0a1b", _alloc(), labels=_labels())) == (
        "pool-a", ZONE, "gke-c-pool-a-aaaa1111-grp"
    )  # fmt: skip
    assert limits.group_key(Node("worker-1", _alloc(), labels=_labels())) == ("pool-a", ZONE, "")


def _alloc() -> Any:
    from scaler.model.records import Resources

    return Resources(4000, 16 * GI, pods=110)


def _labels() -> dict[str, str]:
    return {"cloud.google.com/gke-nodepool": "pool-a", "topology.kubernetes.io/zone": ZONE}


# ---- scaler run: the MIGs as the GCE API reports them ----------------------------------------------


class ThreeMigCluster(E2ECluster):
    """Pool ``pool-a``: three MIGs in one zone, two empty nodes each, minNodeCount 1 (each MIG
    gets it, as CA's GCE provider gives it)."""

    def objects(self) -> list[dict[str, Any]]:
        names = self.gce.add_pool("pool-a", ZONES[:1], 2, min=1, max=5, migs_per_zone=3)
        self.nodes = names
        objects: list[dict[str, Any]] = []
        for i, name in enumerate(names):
            objects.append(node_json(name, "pool-a", ZONES[0], self.gce.provider_id(name)))
            objects.append(
                pod_json(f"ds-{i}", name, owner=("DaemonSet", "agent"), namespace="kube-system", cpu_m=50)
            )
            self.usage[name] = (100, GI)
        return [*objects, workload_json("DaemonSet", "agent", None, "kube-system")]


def test_run_keeps_every_mig_of_a_zone_at_its_minimum(tmp_path: Path) -> None:
    """Six empty nodes, three MIGs of one zone, min 1 each: the zone's sum (min 3 of 6) let two
    nodes of one MIG go (they come first in name order); each MIG must keep one. One deletion a
    loop, until nothing more goes."""
    with ThreeMigCluster(tmp_path) as c, c.controller(c.config(max_scale_down_parallelism=1)) as ctl:
        ctl.run_once()
        for _ in range(6):
            c.advance(601)
            for name in c.gce.deleted_instances:
                if c.node(name) is not None:
                    c.kube.delete_object("Node", name)
            decision = ctl.run_once()
            c.wait_idle(ctl)
        assert len(c.gce.deleted_instances) == 3
        assert len({c.gce.mig_of(n).name for n in c.gce.deleted_instances}) == 3, c.gce.deleted_instances
        assert [m.target_size for m in c.gce.pools["pool-a"].migs] == [1, 1, 1]
        kept = [n for n in c.nodes if n not in c.gce.deleted_instances]
        assert all(decision.verdicts[n][1].value == "NodeGroupMinSizeReached" for n in kept)


def test_gke_provider_refuses_to_take_a_mig_below_its_minimum(tmp_path: Path) -> None:
    """The zone has room (6 nodes, min 3) but the MIG has not (2 nodes, min 1)."""
    with ThreeMigCluster(tmp_path) as c:
        provider = c.provider()
        mig = c.gce.pools["pool-a"].migs[0]
        nodes = [
            Node(
                n,
                _alloc(),
                labels=_labels() | {"topology.kubernetes.io/zone": ZONES[0]},
                provider_id=c.gce.provider_id(n),
            )
            for n in mig.instances
        ]
        with pytest.raises(MinSizeReached, match=rf"MIG {mig.name}: min size reached .*at most 1 may go"):
            provider.delete_nodes("pool-a", nodes)
        assert c.gce.deleted_instances == []
        provider.delete_nodes("pool-a", nodes[:1])
        assert c.gce.deleted_instances == [nodes[0].name]
        with pytest.raises(MinSizeReached, match=rf"MIG {mig.name}: min size reached"):
            provider.delete_nodes("pool-a", nodes[1:])
