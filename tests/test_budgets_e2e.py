"""Disruption budgets meet the simulation and hot-node relief, end to end: the same small
cluster read by ``scaler dry-run --snapshot`` (written as ``kubectl get -o json`` prints it) and
by ``scaler run``'s controller against the loopback Kubernetes and GCE fakes, which must reach
the same verdicts.

A node that a budget holds stays where it is for the whole window: none of its pods may be
simulated onto other nodes (where they would keep other candidates, judged against load that
will never arrive), and a hot node held that way is relieved in the cluster as it is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, ZONES, E2ECluster, iso, node_json, pod_json, workload_json

from scaler.cli import main
from scaler.planner import ScaleDownPlan

KINDS = ("Node", "Pod", "ReplicaSet", "DaemonSet", "PodDisruptionBudget", "NodeMetrics", "PodMetrics")


class TwoPools(E2ECluster):
    """Pool ``a``: one node, ``a1``; pool ``b``: two, ``b1`` and ``b2``, all 4 cores and 16 GiB
    in one zone. ``a1`` and ``b1`` are underused, each running pods of 300m; ``b2`` uses 35% cpu
    and 60% memory (not a candidate), so TargetUsage (45% cpu) leaves it room for one of them,
    not for both. ``a1`` comes first in the removal order (it uses less).

    With ``hot=True``, ``a1`` instead uses 40% cpu (still a candidate, but above a 30% hot-node
    waterline) with ``hog`` (500m requested, 700m used) and ``mid`` (300m, 400m), and the pool
    ``b`` nodes use 10% cpu and 60% memory (neither a candidate nor hot): room for both pods."""

    def __init__(self, tmp: Path, *, hot: bool = False) -> None:
        super().__init__(tmp)
        self.hot = hot

    def objects(self) -> list[dict[str, Any]]:
        (self.a1,) = self.gce.add_pool("a", ZONES[:1], 1)
        self.b1, self.b2 = self.gce.add_pool("b", ZONES[:1], 2)
        self.nodes = [self.a1, self.b1, self.b2]
        self.underused, self.busy = [self.a1, self.b1], [self.b2]
        objects: list[dict[str, Any]] = []
        for name in self.nodes:
            objects.append(node_json(name, self.gce.pool_of(name), ZONES[0], self.gce.provider_id(name)))
        if self.hot:
            self.usage = {
                self.a1: (1600, 2 * GI),
                self.b1: (400, int(9.6 * GI)),
                self.b2: (400, int(9.6 * GI)),
            }
            for pod, cpu, use in (("hog", 500, 700), ("mid", 300, 400)):
                objects.append(pod_json(pod, self.a1, owner=("ReplicaSet", pod), cpu_m=cpu))
                objects.append(workload_json("ReplicaSet", pod, 2))
                self.pod_usage[pod] = (use, GI // 2)
            objects.append(
                pod_json("resident-1", self.b1, owner=("ReplicaSet", "resident"), cpu_m=1000, mem=4 * GI)
            )
        else:
            self.usage = {self.a1: (200, GI), self.b1: (400, int(1.5 * GI)), self.b2: (1400, int(9.6 * GI))}
            for pod, node in (("pa", self.a1), ("pb", self.b1)):
                objects.append(pod_json(pod, node, owner=("ReplicaSet", pod), cpu_m=300))
                objects.append(workload_json("ReplicaSet", pod, 2))
        objects.append(
            pod_json("resident", self.b2, owner=("ReplicaSet", "resident"), cpu_m=1000, mem=4 * GI)
        )
        objects.append(workload_json("ReplicaSet", "resident", 1))
        return objects

    def write_snapshot(self, directory: Path) -> Path:
        """The fake API's objects now, one ``List`` file per kind, as ``kubectl get -o json``
        (and ``kubectl get --raw`` for the metrics) prints them."""
        directory.mkdir(parents=True, exist_ok=True)
        for kind in KINDS:
            items = self.kube.objects(kind)
            if items:
                doc = {"apiVersion": "v1", "kind": "List", "items": items}
                (directory / f"{kind.lower()}s.json").write_text(json.dumps(doc))
        return directory


def dry_run(capsys: pytest.CaptureFixture[str], cluster: TwoPools, tmp: Path, *flags: str) -> dict[str, Any]:
    snap = cluster.write_snapshot(tmp / "snap")
    code = main(["dry-run", "--snapshot", str(snap), "--now", iso(cluster.clock()), "-o", "json", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def verdicts(report: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {n["name"]: (n["status"], n["reason"]) for n in report["nodes"]}


def controller_verdicts(decision: ScaleDownPlan) -> dict[str, tuple[str, str]]:
    return {name: (status.value, reason.value) for name, (status, reason, _) in decision.verdicts.items()}


def test_a_node_held_by_a_budget_moves_no_pod_in_the_simulation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``nodes: 0`` budget on pool ``a`` holds ``a1`` for the whole window. ``b1`` may go: its
    pod has room on ``b2`` as long as nothing of ``a1`` is simulated there (the held node's
    moves used to stay committed and keep ``b1`` ``NoPlaceToMovePods`` by TargetUsage)."""
    budget = "0;nodePools=a;name=office"
    with TwoPools(tmp_path) as c:
        report = dry_run(capsys, c, tmp_path, "--scale-down-budget", budget)
        expected = {
            c.a1: ("unremovable", "ScaleDownBudgetExhausted"),
            c.b1: ("removable-drain", "NoReason"),
            c.b2: ("unremovable", "NotUnderutilized"),
        }
        assert verdicts(report) == expected
        nodes = {n["name"]: n for n in report["nodes"]}
        assert nodes[c.a1]["moves"] == [] and "budget office" in nodes[c.a1]["detail"]
        assert [m["pod"] for m in nodes[c.b1]["moves"]] == ["default/pb"]
        # Without the budget, a1 goes first and takes b2's room: b1 stays.
        free = verdicts(dry_run(capsys, c, tmp_path))
        assert free[c.a1] == ("removable-drain", "NoReason")
        assert free[c.b1] == ("unremovable", "NoPlaceToMovePods")

        # scaler run: the same verdicts, and b1 is drained once its unneeded time is over.
        cfg = c.config(budgets=[budget])
        with c.controller(cfg, dry_run=True) as ctl:
            ctl.run_once()
            c.advance(601)
            decision = ctl.run_once()
        assert controller_verdicts(decision) == expected
        assert [r.node.name for r in decision.drain] == [c.b1]
        assert decision.active_budgets == ("office",)
        # a1's unneeded timer runs while the budget alone holds it: it goes as soon as it may.
        assert c.a1 in decision.unneeded


def test_a_hot_node_held_by_a_budget_is_relieved_in_the_cluster_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``a1`` is underused by the scale-down threshold (40% < 50%) but hot by a 30% waterline,
    and a budget holds its removal (not its relief). Its pods were simulated away before the
    budget held it, so relief found nothing to evict (the dry-run) or called it "being removed"
    (the controller). Held before the simulation, it is relieved of ``hog``."""
    flags = {
        "hot_node_relief": True,
        "hot_node_cpu_threshold": 0.3,
        "hot_node_time": 60.0,
        "budgets": ["0;nodePools=a;reasons=underutilized;name=office"],
    }
    cli = [
        "--hot-node-relief", "--hot-node-cpu-threshold=0.3",
        "--scale-down-budget", "0;nodePools=a;reasons=underutilized;name=office",
    ]  # fmt: skip
    with TwoPools(tmp_path, hot=True) as c:
        report = dry_run(capsys, c, tmp_path, *cli)
        assert verdicts(report)[c.a1] == ("unremovable", "ScaleDownBudgetExhausted")
        (hot,) = report["relief"]["hotNodes"]
        assert hot["name"] == c.a1 and not hot["held"]
        assert [e["pod"] for e in hot["evictions"]] == ["default/hog"] and hot["gapClosed"]
        assert {e["destination"] for e in hot["evictions"]} <= {c.b1, c.b2}

        with c.controller(c.config(**flags)) as ctl:
            first = ctl.run_once()
            c.advance(60)
            decision = ctl.run_once()
            c.wait_idle(ctl)
        assert first.to_delete == decision.to_delete == ()
        assert controller_verdicts(decision) == verdicts(report)
        relief = ctl.last_relief
        assert relief is not None
        (node,) = relief.reliefs
        assert node.node.name == c.a1 and not node.held
        assert [(p.key, dest) for p, dest in node.evictions] == [
            (e["pod"], e["destination"]) for e in hot["evictions"]
        ]
        evictions = [r.path for r in c.kube.requests if r.method == "POST" and r.path.endswith("/eviction")]
        assert evictions == ["/api/v1/namespaces/default/pods/hog/eviction"]
