"""Dynamic Resource Allocation end to end: the same GPU cluster through ``scaler dry-run
--snapshot`` (files as ``kubectl get -o json`` prints them) and through ``scaler run``'s
controller against the loopback Kubernetes API (which serves ``resource.k8s.io/v1``) and GCE.

Three GPU nodes whose two devices each come from a DRA driver (the accelerator label, no
``nvidia.com/gpu`` allocatable), and a CPU node:

* ``gpu-a``: one device of two allocated (50%, at the GPU threshold): its inference pod can get
  the free device of ``gpu-b`` and nowhere else (the CPU node has no devices) → removable;
* ``gpu-b``: one of two allocated; it receives ``gpu-a``'s pod → kept;
* ``gpu-c``: both devices allocated (100% > 50%) → ``NotUnderutilized``, judged like a GPU node;
* ``cpu-a`` (with ``--scale-down-utilization-threshold`` high) holds a pod whose claim's
  selector calls a function scaler does not evaluate → ``BlockedByPod`` naming the claim.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from dra_objects import claim, device, device_class, local_slice, request, template
from e2e_cluster import GI, ZONES, E2ECluster, node_json, pod_json, workload_json

from scaler.cli import main

ACCELERATOR = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
BAD_SELECTOR = 'device.attributes["gpu.example.com"].model.foo() == "x"'


def _with_claims(pod: dict[str, Any], *, template_claim: str = "", claim_name: str = "") -> dict[str, Any]:
    if template_claim:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]
        pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": template_claim}]
    else:
        pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim_name}]
    return pod


class DraCluster(E2ECluster):
    """The cluster of the module doc."""

    def objects(self) -> list[dict[str, Any]]:
        gpus = self.gce.add_pool("gpu", ZONES, 1, min=0, max=5)
        cpus = self.gce.add_pool("cpu", ZONES[:1], 1, min=0, max=5)
        self.gpu = dict(zip(("a", "b", "c"), gpus, strict=True))
        self.cpu = cpus[0]
        now = self.clock()
        objects: list[dict[str, Any]] = [device_class(), template("tmpl", "default")]
        for name in gpus:
            n = node_json(name, "gpu", self.gce.mig_of(name).zone, self.gce.provider_id(name), created=now)
            n["metadata"]["labels"].update(ACCELERATOR)
            objects.append(n)
            objects.append(local_slice(name, [device("gpu-0", model="l4"), device("gpu-1", model="l4")]))
            self.usage[name] = (400, 2 * GI)
        used = {"a": ["gpu-0"], "b": ["gpu-0"], "c": ["gpu-0", "gpu-1"]}
        for key, name in self.gpu.items():
            for i, dev in enumerate(used[key]):
                pod_name = f"infer-{key}{i}"
                objects.append(
                    claim(f"{pod_name}-gpu", "default", owner=pod_name, allocated=[("gpu", name, dev)],
                          node_name=name, reserved_for=[pod_name])
                )  # fmt: skip
                pod = pod_json(pod_name, name, owner=("ReplicaSet", "infer"), cpu_m=500, mem=GI, created=now)
                objects.append(_with_claims(pod, template_claim=f"{pod_name}-gpu"))
        zone = self.gce.mig_of(self.cpu).zone
        objects.append(
            node_json(
                self.cpu, "cpu", zone, self.gce.provider_id(self.cpu), cpu_m=16000, mem=64 * GI, created=now
            )
        )
        self.usage[self.cpu] = (1000, 4 * GI)
        objects.append(claim("odd", "default", requests=[request(selectors=[BAD_SELECTOR])]))
        odd = pod_json("odd-0", self.cpu, owner=("ReplicaSet", "odd"), cpu_m=500, mem=GI, created=now)
        objects.append(_with_claims(odd, claim_name="odd"))
        objects += [workload_json("ReplicaSet", "infer"), workload_json("ReplicaSet", "odd", 1)]
        return objects

    def write_files(self, directory: Path) -> Path:
        """The fake's objects as snapshot files, metrics included."""
        directory.mkdir(parents=True, exist_ok=True)
        items = []
        for kind in (
            "Node",
            "Pod",
            "ReplicaSet",
            "DeviceClass",
            "ResourceSlice",
            "ResourceClaim",
            "ResourceClaimTemplate",
        ):
            items += [{**o, "kind": kind} for o in self.kube.objects(kind)]
        (directory / "objects.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        )
        metrics = [{**o, "kind": k} for k in ("NodeMetrics", "PodMetrics") for o in self.kube.objects(k)]
        (directory / "metrics.json").write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": metrics})
        )
        return directory


CONFIG = {"scale_down_utilization_threshold": 0.9}
FLAGS = ["--scale-down-utilization-threshold=0.9"]


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    with DraCluster(tmp_path) as c:
        yield c


def _expected(c: DraCluster) -> dict[str, tuple[str, str]]:
    return {
        c.gpu["a"]: ("NoReason", ""),
        c.gpu["b"]: ("DestinationForMovedPods", ""),
        c.gpu["c"]: ("NotUnderutilized", "dra gpu.example.com/" + c.gpu["c"] + " 100.0% > gpu threshold 50%"),
        c.cpu: (
            "BlockedByPod",
            "UnexpectedError (ResourceClaim default/odd: request gpu: the request: selector",
        ),
    }


def test_dry_run_snapshot_and_run_give_the_same_verdicts(
    cluster: DraCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c = cluster
    snap = c.write_files(tmp_path / "snap")
    assert main(["dry-run", "--snapshot", str(snap), "-o", "json", *FLAGS]) == 0
    report = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in report["nodes"]}
    expected = _expected(c)
    for name, (reason, detail) in expected.items():
        assert nodes[name]["reason"] == reason, (name, nodes[name]["detail"])
        assert detail in nodes[name]["detail"], (name, nodes[name]["detail"])
    assert nodes[c.gpu["a"]]["moves"][0]["destination"] == c.gpu["b"]
    assert nodes[c.gpu["a"]]["dra"]["utilization"] == 0.5
    assert nodes[c.cpu].get("dra") is None and nodes[c.cpu]["blockingPod"]["name"] == "odd-0"

    with c.controller(c.config(**CONFIG)) as ctl:
        first = ctl.run_once()
        for name, (reason, detail) in expected.items():
            _status, why, text = first.verdicts[name]
            if reason == "NoReason":
                assert name in first.unneeded
            else:
                assert (why.value, detail in text) == (reason, True), (name, why, text)
        c.advance(601)
        decision = ctl.run_once()
        assert [r.node.name for r in decision.drain] == [c.gpu["a"]]
        assert {d for _, d in decision.drain[0].moves} == {c.gpu["b"]}


def test_a_gpu_pod_never_moves_to_a_node_without_devices(
    cluster: DraCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With gpu-b's free device taken, gpu-a's pod fits nowhere: the CPU node has room for its
    CPU and memory but no device (before DRA it was moved there)."""
    c = cluster
    c.kube.load_objects([
        claim("extra-gpu", "default", allocated=[("gpu", c.gpu["b"], "gpu-1")], node_name=c.gpu["b"], reserved_for=["x"])
    ])  # fmt: skip
    snap = c.write_files(tmp_path / "snap")
    assert main(["dry-run", "--snapshot", str(snap), "-o", "json", *FLAGS]) == 0
    nodes = {n["name"]: n for n in json.loads(capsys.readouterr().out)["nodes"]}
    a = nodes[c.gpu["a"]]
    assert a["reason"] == "NoPlaceToMovePods", a["detail"]
    assert "DynamicResources: cannot allocate all claims" in a["detail"]
    with c.controller(c.config(**CONFIG)) as ctl:
        _status, why, text = ctl.run_once().verdicts[c.gpu["a"]]
        assert why.value == "NoPlaceToMovePods" and "cannot allocate all claims" in text


def test_a_cluster_without_the_dra_api_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The fake as a cluster before 1.34 (no resource.k8s.io/v1): the controller runs, says so
    once, and the GPU pods, whose claims it cannot read, are not moved."""
    import logging

    import scaler.sources.kube as kube_source

    kube_source._DRA_UNSERVED_SAID = False
    caplog.set_level(logging.INFO)
    with DraCluster(tmp_path) as c:
        c.kube.serve_dra = False
        with c.controller(c.config(**CONFIG)) as ctl:
            first = ctl.run_once()
            ctl.run_once()
        said = [r for r in caplog.records if "does not serve resource.k8s.io/v1" in r.getMessage()]
        assert len(said) == 1 and said[0].levelno == logging.INFO
        assert not [
            r for r in caplog.records if r.levelno >= logging.WARNING and "resource.k8s.io" in r.getMessage()
        ]
        _status, why, text = first.verdicts[c.gpu["a"]]
        assert why.value == "BlockedByPod" and "ResourceClaim not found" in text


@pytest.mark.parametrize("gpu2_full", [False, True])
def test_replay_reads_dra_objects_and_moves_a_gpu_pod_only_onto_free_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], gpu2_full: bool
) -> None:
    """``scaler replay`` over a snapshot with DRA objects: gpu-1's pod (one of its two devices)
    moves to gpu-2's free device when gpu-1 is removed, never to the CPU node; gpu-2 then holds
    both its devices and stays. With gpu-2's second device taken too, nothing moves (the CPU node
    has room for the pod but no device). ``scaler tune`` over the same snapshot replays its
    defaults to the same evictions."""
    import dra_objects as d

    acc = {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    objs = [
        d.node("gpu-1", labels=acc), d.node("gpu-2", labels=acc), d.node("cpu-1", pool="cpu", cpu="16", memory="64Gi"),
        d.local_slice("gpu-1", [d.device("gpu-0"), d.device("gpu-1")]),
        d.local_slice("gpu-2", [d.device("gpu-0"), d.device("gpu-1")]),
        d.device_class(), d.template("tmpl"),
        d.claim("infer-0-gpu", owner="infer-0", allocated=[("gpu", "gpu-1", "gpu-0")], node_name="gpu-1", reserved_for=["infer-0"]),
        d.claim("infer-1-gpu", owner="infer-1", allocated=[("gpu", "gpu-2", "gpu-0")], node_name="gpu-2", reserved_for=["infer-1"]),
        d.pod("infer-0", "gpu-1", template_claims={"gpu": "infer-0-gpu"}),
        d.pod("infer-1", "gpu-2", template_claims={"gpu": "infer-1-gpu"}),
        d.pod("web-0", "cpu-1", namespace="shop", cpu="4", memory="8Gi", owner=("ReplicaSet", "web")),
        d.node_metrics("gpu-1"), d.node_metrics("gpu-2"), d.node_metrics("cpu-1", cpu="5", memory="10Gi"),
        d.pod_metrics("infer-0"), d.pod_metrics("infer-1"), d.pod_metrics("web-0", "shop", "4", "8Gi"),
    ]  # fmt: skip
    pods = ["infer-0", "infer-1"]
    if gpu2_full:
        objs += [
            d.claim("infer-2-gpu", owner="infer-2", allocated=[("gpu", "gpu-2", "gpu-1")], node_name="gpu-2", reserved_for=["infer-2"]),
            d.pod("infer-2", "gpu-2", template_claims={"gpu": "infer-2-gpu"}), d.pod_metrics("infer-2"),
        ]  # fmt: skip
        pods.append("infer-2")
    snap = d.write_snapshot(tmp_path / "snap", objs)
    start = 1_795_867_200  # 2026-11-28T12:00:00Z, the snapshot's time
    rows = ["timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes"]
    for k in range(13):
        rows += [f"{start + 300 * k},ml,{p},0.1,536870912" for p in pods]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(rows) + "\n")
    argv = ["replay", "--snapshot", str(snap), "--trace", str(trace), "-o", "json", "--workers", "1",
            "--policies", "scaler", "--config", str(_config(tmp_path))]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    (policy,) = report["policies"]
    assert (policy["nodesRemoved"], policy["podsEvicted"]) == ((0, 0) if gpu2_full else (1, 1))
    assert policy["unplaceablePods"] == 0 and policy["pendingPodMinutes"] == 0
    # scaler tune replays its trials in the same world: a GPU pod is never moved without a device.
    argv = ["tune", "--snapshot", str(snap), "--trace", str(trace), "-o", "json", "--workers", "1", "--trials", "2",
            "--quiet", "--config", str(_config(tmp_path)), "--out", str(tmp_path / "tune")]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    frontier = json.loads((tmp_path / "tune" / "frontier.json").read_text())
    (defaults,) = [r for r in frontier["references"] if r["name"] == "scaler"]
    assert defaults["evictions"] == policy["podsEvicted"] and len(frontier["trials"]) == 2


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text("scale-down-unneeded-time: 10m\nscale-down-utilization-threshold: 0.9\n")
    return path
