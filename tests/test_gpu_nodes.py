"""GPU nodes as cluster-autoscaler judges them (requested GPUs / allocatable GPUs against
``--scale-down-gpu-utilization-threshold``, cpu and memory ignored), plus their real GPU usage
where DCGM reports it: ``scaler dry-run`` on snapshot files, and ``scaler run``'s controller
against the loopback Kubernetes and GCE fakes reaching the same verdicts on the same cluster.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import GI, T0, ZONES, E2ECluster, node_json, pod_json, workload_json
from promserver import prometheus_on
from test_decisions_e2e import dry_run, metrics_json, write_snapshot

from scaler.cli import main

ACCELERATOR = "cloud.google.com/gke-accelerator"


def gpu_node(
    name: str, gpus: int, provider_id: str = "", zone: str = ZONES[0], pool: str = "gpu"
) -> dict[str, Any]:
    """A GKE GPU node: ``gpus`` allocatable ``nvidia.com/gpu`` and the accelerator label."""
    node = node_json(name, pool, zone, provider_id, cpu_m=8000, mem=32 * GI)
    node["metadata"]["labels"][ACCELERATOR] = "nvidia-tesla-t4"
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus)
    return node


def gpu_pod(name: str, node: str, gpus: int, owner: str) -> dict[str, Any]:
    """A training pod asking for ``gpus`` GPUs and little cpu."""
    pod = pod_json(name, node, owner=("ReplicaSet", owner), cpu_m=500, mem=2 * GI)
    resources = pod["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = str(gpus)
    resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return pod


def gpu_cluster_objects(
    names: dict[str, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, tuple[int, int]]]:
    """Nodes, pods and node usage (cpu millicores, memory bytes) of the cluster every test here
    uses; ``names`` maps the roles ``full``, ``quarter``, ``idle``, ``cpu`` to node names (the
    controller test takes GKE instance names from the GCE fake) and ``provider:<name>`` to
    provider ids.

    * ``full``: 1 GPU, all of it requested by ``train-a``; its cpu is 5% used: CA keeps it.
    * ``quarter``: 4 GPUs, one requested (25%), cpu 30% used: a GPU candidate, but its pod
      needs a GPU and none is free once ``idle`` goes.
    * ``idle``: 4 GPUs, only a DaemonSet pod: removable-empty.
    * ``cpu``: a busy cpu node (no GPU): NotUnderutilized by cpu/memory as before.
    """
    full, quarter, idle, cpu = names["full"], names["quarter"], names["idle"], names["cpu"]
    nodes = [
        gpu_node(full, 1, names.get(f"provider:{full}", "")),
        gpu_node(quarter, 4, names.get(f"provider:{quarter}", "")),
        gpu_node(idle, 4, names.get(f"provider:{idle}", "")),
        node_json(cpu, "cpu", ZONES[0], names.get(f"provider:{cpu}", "")),
    ]
    pods = [
        gpu_pod("train-a", full, 1, "train-a"),
        gpu_pod("train-b", quarter, 1, "train-b"),
        pod_json("web", cpu, owner=("ReplicaSet", "web"), cpu_m=2000, mem=8 * GI),
        *(
            pod_json(
                f"dcgm-{i}",
                n,
                owner=("DaemonSet", "dcgm-exporter"),
                cpu_m=50,
                mem=GI // 8,
                namespace="kube-system",
            )
            for i, n in enumerate((full, quarter, idle))
        ),
    ]
    usage = {full: (400, 2 * GI), quarter: (2400, 3 * GI), idle: (100, GI), cpu: (2600, 10 * GI)}
    return nodes, pods, usage


WORKLOADS = [
    workload_json("ReplicaSet", "train-a", 1),
    workload_json("ReplicaSet", "train-b", 1),
    workload_json("ReplicaSet", "web", 1),
    workload_json("DaemonSet", "dcgm-exporter", None, "kube-system"),
]
SNAPSHOT_NAMES = {"full": "gpu-full", "quarter": "gpu-quarter", "idle": "gpu-idle", "cpu": "cpu-1"}


def gpu_snapshot(directory: Path, at: float = T0) -> Path:
    """The cluster as snapshot files, metrics stamped ``at``."""
    nodes, pods, usage = gpu_cluster_objects(SNAPSHOT_NAMES)
    node_metrics = [metrics_json(n, c, m, at) for n, (c, m) in usage.items()]
    pod_metrics = [metrics_json(p["metadata"]["name"], 100, GI, at, p["metadata"]["namespace"]) for p in pods]
    return write_snapshot(directory, nodes, pods, node_metrics, pod_metrics, WORKLOADS)


EXPECTED = {
    "gpu-full": ("unremovable", "NotUnderutilized"),
    "gpu-quarter": ("unremovable", "NoPlaceToMovePods"),
    "gpu-idle": ("removable-empty", "NoReason"),
    "cpu-1": ("unremovable", "NotUnderutilized"),
}


def test_dry_run_judges_gpu_nodes_by_their_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The fully requested GPU node with idle cpu is kept (it used to be drained onto the free
    GPU of another node); the idle one goes; the report names the GPU figures."""
    snap = gpu_snapshot(tmp_path / "snap")
    report = dry_run(capsys, "--snapshot", str(snap))
    assert {n: (r["status"], r["reason"]) for n, r in report.items()} == EXPECTED
    full = report["gpu-full"]
    assert full["detail"] == "gpu requests 100.0% > gpu threshold 50%"
    assert full["gpu"] == {
        "allocatable": 1, "requested": 1, "requestUtilization": 1.0, "usage": None, "judgedBy": "requests"
    }  # fmt: skip
    assert report["cpu-1"]["gpu"] is None
    # The GPU threshold is CA's flag: at 1.0 the full node is underutilized too, and its pod
    # finds the free GPUs of gpu-quarter (gpu-idle, removed first, is no destination).
    report = dry_run(capsys, "--snapshot", str(snap), "--scale-down-gpu-utilization-threshold=1")
    assert report["gpu-full"]["status"] == "removable-drain"
    assert [m["destination"] for m in report["gpu-full"]["moves"]] == ["gpu-quarter"]
    # And a config-file key of the same name.
    cfg = tmp_path / "config.yaml"
    cfg.write_text("scale-down-gpu-utilization-threshold: 0.2\n")
    report = dry_run(capsys, "--snapshot", str(snap), "--config", str(cfg))
    assert report["gpu-quarter"]["reason"] == "NotUnderutilized"
    assert report["gpu-quarter"]["detail"] == "gpu requests 25.0% > gpu threshold 20%"


def test_dry_run_table_has_a_gpu_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = gpu_snapshot(tmp_path / "snap")
    assert main(["dry-run", "--snapshot", str(snap)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[0].split()
    assert header[:5] == ["NAME", "STATUS", "CPU%", "MEM%", "GPU%"]
    cells = {line.split()[0]: line.split() for line in lines[1:5]}
    assert cells["gpu-full"][4] == "100%"
    assert cells["gpu-quarter"][4] == "25%"
    assert cells["gpu-idle"][4] == "0%"
    assert cells["cpu-1"][4] == "-"


def test_gpu_threshold_flag_is_in_help_and_validated(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("dry-run", "run"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--scale-down-gpu-utilization-threshold" in capsys.readouterr().out
    assert main(["dry-run", "--scale-down-gpu-utilization-threshold=1.5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1.5" in err and "scale-down-gpu-utilization-threshold" in err


# ---- scaler run: the same cluster behind the loopback fakes --------------------------------------


class GpuCluster(E2ECluster):
    """:func:`gpu_cluster_objects` with GKE instance names: pool ``gpu`` (three MIGs' worth of
    nodes in one zone) and pool ``cpu``."""

    def objects(self) -> list[dict[str, Any]]:
        gpus = self.gce.add_pool("gpu", ZONES[:1], 3)
        cpus = self.gce.add_pool("cpu", ZONES[:1], 1)
        names = {"full": gpus[0], "quarter": gpus[1], "idle": gpus[2], "cpu": cpus[0]}
        names |= {f"provider:{n}": self.gce.provider_id(n) for n in (*gpus, *cpus)}
        self.roles = names
        nodes, pods, usage = gpu_cluster_objects(names)
        self.usage.update(usage)
        self.pod_usage.update({p["metadata"]["name"]: (100, GI) for p in pods})
        return [*nodes, *pods, *WORKLOADS]


def test_run_reaches_the_dry_runs_gpu_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with GpuCluster(tmp_path) as c, c.controller(c.config()) as ctl:
        ctl.run_once()
        c.advance(601)
        decision = ctl.run_once()
        role = {c.roles[k]: SNAPSHOT_NAMES[k] for k in ("full", "quarter", "idle", "cpu")}
        got = {role[n]: (s.value, r.value) for n, (s, r, _) in decision.verdicts.items()}
        assert [role[r.node.name] for r in decision.to_delete] == ["gpu-idle"]
        kept = {n: v for n, v in got.items() if n != "gpu-idle"}
        assert kept == {n: v for n, v in EXPECTED.items() if n != "gpu-idle"}
        full = decision.verdicts[c.roles["full"]][2]
        assert full == "gpu requests 100.0% > gpu threshold 50%"
        c.wait_idle(ctl)
        assert c.gce.deleted_instances == [c.roles["idle"]]
    # The dry-run of the same objects as snapshot files agrees.
    snap = gpu_snapshot(tmp_path / "snap")
    report = dry_run(capsys, "--snapshot", str(snap))
    assert {n: (r["status"], r["reason"]) for n, r in report.items()} == EXPECTED


# ---- real GPU usage: NVIDIA DCGM's series in a real Prometheus ------------------------------------

# (Hostname, UUID, cluster) -> DCGM_FI_DEV_GPU_UTIL (percent) over the last half hour. gpu-quarter
# requests one GPU of four but keeps three busy (time-shared work the requests do not show);
# gpu-idle's GPUs are idle in this cluster and busy in a staging cluster of the same Prometheus.
DCGM = {
    ("gpu-full", "GPU-f0", "prod"): 3.0,
    ("gpu-quarter", "GPU-q0", "prod"): 95.0,
    ("gpu-quarter", "GPU-q1", "prod"): 90.0,
    ("gpu-quarter", "GPU-q2", "prod"): 80.0,
    ("gpu-quarter", "GPU-q3", "prod"): 0.0,
    **{("gpu-idle", f"GPU-i{i}", "prod"): 0.0 for i in range(4)},
    ("gpu-idle", "GPU-s0", "staging"): 100.0,
}


@pytest.fixture(scope="module")
def dcgm_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, float]]:
    """A real Prometheus on loopback holding :data:`DCGM` (backfilled with promtool): its URL
    and the time the series end."""
    root = tmp_path_factory.mktemp("dcgm")
    now = float(int(time.time()) // 60 * 60)
    lines = ["# TYPE DCGM_FI_DEV_GPU_UTIL gauge"]
    for (host, uuid, cluster), util in DCGM.items():
        labels = f'Hostname="{host}",UUID="{uuid}",gpu="{uuid[-1]}",modelName="Tesla T4",cluster="{cluster}"'
        lines += [f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} {util} {int(now - k * 60)}" for k in range(30, -1, -1)]
    (root / "data.om").write_text("\n".join([*lines, "# EOF"]) + "\n")
    with prometheus_on(root / "data.om", root) as url:
        yield url, now


def test_dry_run_keeps_a_gpu_node_whose_real_gpu_usage_is_high(
    dcgm_prometheus: tuple[str, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --history prometheus a GPU node is idle only when its GPU requests and its real GPU
    usage are both at or below the threshold; the report says which figure keeps it."""
    url, now = dcgm_prometheus
    snap = gpu_snapshot(tmp_path / "snap", at=now)
    history = ["--history=prometheus", f"--prometheus-url={url}", '--prometheus-selector=cluster="prod"']
    report = dry_run(capsys, "--snapshot", str(snap), *history)
    quarter = report["gpu-quarter"]
    assert (quarter["reason"], quarter["detail"]) == (
        "NotUnderutilized",
        "gpu usage 66.2% (measured) > gpu threshold 50%",
    )
    assert quarter["gpu"]["usage"] == pytest.approx(2.65 / 4)
    assert quarter["gpu"]["judgedBy"] == "requests and usage"
    assert report["gpu-full"]["detail"] == "gpu requests 100.0% > gpu threshold 50%"
    assert report["gpu-full"]["gpu"]["usage"] == pytest.approx(0.03)
    idle = report["gpu-idle"]  # the staging cluster's busy GPU is not this node's
    assert (idle["status"], idle["gpu"]["usage"]) == ("removable-empty", 0.0)
    assert main(["dry-run", "--snapshot", str(snap), *history]) == 0
    cells = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()[1:5]}
    assert cells["gpu-quarter"][4] == "25%/66%"
    # Without the selector the staging GPU counts for gpu-idle: 100% of one GPU of four.
    report = dry_run(capsys, "--snapshot", str(snap), *history[:2])
    assert report["gpu-idle"]["gpu"]["usage"] == pytest.approx(0.25)


# ---- CA's GPU utilization, unit by unit ----------------------------------------------------------


def test_gpu_requests_fraction_follows_ca() -> None:
    """``CalculateUtilizationOfResource`` for nvidia.com/gpu: DaemonSet pods out of both sides
    when ignored, long-terminating pods not counted, 0 while no GPU is allocatable yet (the
    label alone marks a GPU node)."""
    from builders import make_node, make_pod

    from scaler.config import ScalerConfig
    from scaler.model.records import Resources
    from scaler.utilization import gpu_requests_fraction, is_gpu_node

    def gpus(n: int) -> Resources:
        return Resources(500, GI, pods=1, extended={"nvidia.com/gpu": n})

    node = make_node(
        "g", cpu_m=8000, allocatable=Resources(8000, 32 * GI, pods=110, extended={"nvidia.com/gpu": 4})
    )
    job = make_pod("job", node="g", requests=gpus(1))
    ds = make_pod("ds", node="g", owner_kind="DaemonSet", requests=gpus(1))
    gone = make_pod("gone", node="g", requests=gpus(2), deletion_ts=T0 - 3600, termination_grace_seconds=30)
    cfg = ScalerConfig()
    assert is_gpu_node(node)
    assert gpu_requests_fraction(node, [job, ds, gone], cfg, T0) == 0.5
    ignoring = ScalerConfig(ignore_daemonsets_utilization=True)
    assert gpu_requests_fraction(node, [job, ds, gone], ignoring, T0) == pytest.approx(1 / 3)
    unready = make_node("u", labels={ACCELERATOR: "nvidia-l4"})
    assert is_gpu_node(unready) and gpu_requests_fraction(unready, [job], cfg, T0) == 0.0
    assert not is_gpu_node(make_node("cpu"))
