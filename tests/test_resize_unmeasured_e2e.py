"""Pods resized in place and containers nobody measures, end to end: ``scaler dry-run
--snapshot`` and ``scaler run`` against the loopback fakes give the same verdict.

One pool of two nodes in one zone: ``dst`` runs at 20% cpu and 60% memory (not a candidate,
room under TargetUsage), ``src`` at 3% holds the pod to move. The resize goes through the fake
API server's ``pods/resize`` subresource, validated as the real one validates it; the test then
plays the kubelet through ``pods/status`` (``allocatedResources``, ``resources``, the
``PodResize*`` conditions). The same objects, dumped from the fake, are the dry-run's snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, ZONES, E2ECluster, node_json, pod_json, workload_json
from kubernetes import client as k8s
from test_decisions_e2e import dry_run

MI = 2**20


class PairCluster(E2ECluster):
    """``dst`` and ``src`` (pool ``pool-a``, one zone); ``place(src, dst)`` gives the pods of
    the scenario (a DaemonSet pod on each node is added)."""

    def __init__(self, tmp: Path, place: Callable[[str, str], list[dict[str, Any]]]) -> None:
        super().__init__(tmp)
        self.place = place

    def objects(self) -> list[dict[str, Any]]:
        self.nodes = self.gce.add_pool("pool-a", ZONES[:1], 2, min=0, max=5)
        self.dst, self.src = self.nodes
        self.busy, self.underused = [self.dst], [self.src]
        now = self.clock()
        objects: list[dict[str, Any]] = []
        for i, name in enumerate(self.nodes):
            objects.append(node_json(name, "pool-a", ZONES[0], self.gce.provider_id(name), created=now))
            objects.append(pod_json(f"ds-{i}", name, owner=("DaemonSet", "node-agent"), cpu_m=50, mem=GI // 8,
                                    namespace="kube-system", created=now))  # fmt: skip
        self.usage = {self.dst: (800, int(9.6 * GI)), self.src: (120, GI)}
        objects += self.place(self.src, self.dst)
        objects += [
            workload_json("ReplicaSet", "mover", 2),
            workload_json("ReplicaSet", "grower", 1),
            workload_json("DaemonSet", "node-agent", None, "kube-system"),
        ]
        return objects

    def dump(self, directory: Path) -> Path:
        """The fake's objects as snapshot files (``kubectl get -o json`` Lists)."""
        directory.mkdir()
        kinds = {"Node": "v1", "Pod": "v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1",
                 "NodeMetrics": "metrics.k8s.io/v1beta1", "PodMetrics": "metrics.k8s.io/v1beta1"}  # fmt: skip
        for kind, version in kinds.items():
            items = [{**o, "kind": kind, "apiVersion": version} for o in self.kube.objects(kind)]
            (directory / f"{kind.lower()}s.json").write_text(json.dumps({"kind": "List", "items": items}))
        return directory


def verdicts(c: PairCluster, tmp: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str, str, bool]:
    """``src``'s dry-run report entry, and the controller's ``(reason, detail, drained)`` for it
    after ``--scale-down-unneeded-time``."""
    report = dry_run(capsys, "--snapshot", str(c.dump(tmp / "snapshot")))[c.src]
    with c.controller(c.config()) as ctl:
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        _, reason, detail = decision.verdicts[c.src]
        drained = c.src in [r.node.name for r in decision.drain]
        c.wait_idle(ctl)
    return report, reason.value, detail, drained


def running(name: str, node: str, owner: str, cpu_m: int, *containers: str) -> dict[str, Any]:
    pod = pod_json(name, node, owner=("ReplicaSet", owner), cpu_m=cpu_m, mem=256 * MI)
    for extra in containers:
        pod["spec"]["containers"].append({"name": extra})
    return pod


def kubelet_status(
    cpu_allocated: str, cpu_running: str, condition: dict[str, str] | None, memory: str = str(256 * MI)
) -> dict[str, Any]:
    """The status a kubelet writes for container ``c`` during a resize."""
    status: dict[str, Any] = {
        "containerStatuses": [
            {
                "name": "c",
                "image": "registry.example/app:1",
                "imageID": "registry.example/app@sha256:0",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-11-04T13:00:00Z"}},
                "allocatedResources": {"cpu": cpu_allocated, "memory": memory},
                "resources": {"requests": {"cpu": cpu_running, "memory": memory}},
            }
        ]
    }
    if condition is not None:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", **condition}] if "reason" in condition else [condition]
    return {"status": status}


def resize(c: PairCluster, name: str, cpu: str, status: dict[str, Any]) -> None:
    """Resize container ``c`` of pod ``name`` to ``cpu`` through ``pods/resize`` (the API server
    validates it), then write the kubelet's status through ``pods/status``."""
    v1 = k8s.CoreV1Api(c.api)
    patch = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": str(256 * MI)}}}]}}
    for answer in (
        v1.patch_namespaced_pod_resize(name, "default", patch, _preload_content=False),
        v1.patch_namespaced_pod_status(name, "default", status, _preload_content=False),
    ):
        assert answer.status == 200, answer.data
        answer.release_conn()


def test_a_destination_resized_down_counts_what_it_still_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``grower`` on ``dst`` is being resized from 3500m down to 1000m: the kubelet has
    allocated the new value but the container still runs with 3500m (``PodResizeInProgress``).
    kube-scheduler counts the larger, 3500m, so ``mover`` (600m) does not fit on ``dst``
    (4000m) and ``src`` stays. Read by its spec alone, ``grower`` would leave room, ``src``
    would be drained and ``mover``'s replacement would stay Pending."""

    def place(src: str, dst: str) -> list[dict[str, Any]]:
        return [running("mover-0", src, "mover", 600), running("grower-0", dst, "grower", 3500)]

    with PairCluster(tmp_path, place) as c:
        in_progress = {"type": "PodResizeInProgress", "status": "True"}
        resize(c, "grower-0", "1000m", kubelet_status("1000m", "3500m", in_progress))
        report, reason, detail, drained = verdicts(c, tmp_path, capsys)
    assert report["reason"] == reason == "NoPlaceToMovePods", (report, reason, detail)
    assert "Insufficient cpu" in report["detail"] and "Insufficient cpu" in detail
    assert not drained


def test_a_resize_the_node_refused_counts_what_is_allocated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``grower`` on ``dst`` was resized from 1000m to 6000m, more than ``dst`` can ever hold:
    the kubelet keeps 1000m (``PodResizePending``, reason ``Infeasible``). kube-scheduler counts
    1000m, so ``mover`` fits and ``src`` is drained, as cluster-autoscaler drains it; read by its
    spec alone, ``dst`` would look full and ``src`` would be kept."""

    def place(src: str, dst: str) -> list[dict[str, Any]]:
        return [running("mover-0", src, "mover", 600), running("grower-0", dst, "grower", 1000)]

    with PairCluster(tmp_path, place) as c:
        resize(c, "grower-0", "6000m", kubelet_status("1000m", "1000m", {"reason": "Infeasible"}))
        report, reason, detail, drained = verdicts(c, tmp_path, capsys)
    assert report["status"] == "removable-drain", report
    assert reason == report["reason"] == "NoReason", (reason, detail)
    assert drained


@pytest.mark.parametrize("shipper_request", [None, "100m"])
def test_a_container_nobody_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], shipper_request: str | None
) -> None:
    """``logger`` on ``src`` runs ``c`` (300m requested) and ``shipper``; its PodMetrics report
    ``c`` only. A ``shipper`` without requests has an unknown load: ``src`` is
    ``MetricsUnavailable`` naming the pod and the container (read by ``c``'s reading and
    request, ``logger`` would move). With a request, ``shipper`` counts at it and ``src`` is
    drained."""

    def place(src: str, dst: str) -> list[dict[str, Any]]:
        logger = running("logger-0", src, "mover", 300, "shipper")
        if shipper_request is not None:
            logger["spec"]["containers"][1]["resources"] = {"requests": {"cpu": shipper_request, "memory": "64Mi"}}
        return [logger, running("grower-0", dst, "grower", 1000)]

    with PairCluster(tmp_path, place) as c:
        report, reason, detail, drained = verdicts(c, tmp_path, capsys)
    if shipper_request is None:
        assert report["reason"] == reason == "MetricsUnavailable", (report, reason, detail)
        words = "pod default/logger-0: its PodMetrics lack container 'shipper', which has no cpu request"
        assert words in report["detail"] and words in detail
        assert not drained
    else:
        assert report["status"] == "removable-drain", (report["reason"], report["detail"])
        assert reason == "NoReason" and drained
