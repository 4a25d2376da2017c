"""GKE system metrics as a history source, against real Prometheus servers.

The same usage (160 of the night-lowreq example's trace pods over four hours of the Bitbrains trace)
is written twice, sampled every 60 s as GKE samples, and served by two real Prometheus servers
(TSDB blocks built with ``promtool tsdb create-blocks-from openmetrics``):

* under cAdvisor's names and labels (``container_cpu_usage_seconds_total``,
  ``container_memory_working_set_bytes``; ``namespace``, ``pod``, ``container``, ``cluster``;
  plus the pod-level cgroup series, ``container=""``, that must not count twice);
* under the names and labels Cloud Monitoring's PromQL gives GKE's system metrics
  (``kubernetes_io:container_cpu_core_usage_time``, ``kubernetes_io:container_memory_used_bytes``
  split by ``memory_type`` into ``evictable`` and ``non-evictable``, ``monitored_resource``,
  ``namespace_name``, ``pod_name``, ``container_name``, ``cluster_name``, ``location``,
  ``project_id``).

Both hold the same quirks: pods with two containers, a container restart (its counter starts
again from zero), a 40-minute gap in some pods' samples, and a second cluster whose pods have the
same names and other usage. With ``--prometheus-selector cluster="prod"`` on both (the label
translated for GKE), ``scaler history export``, ``scaler replay`` and ``scaler tune`` give
identical figures from either server, and ``--prometheus-metrics auto`` picks the right source on
each. GKE's accelerator duty cycle judges GPU nodes as DCGM's readings do.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from promserver import prometheus_on
from test_replay_prometheus import BITBRAINS_TAR, FIGURES, LOWREQ, START, STEP, pod_usage, replay_json

from scaler.cli import main
from scaler.history.export import read_metadata

pytestmark = pytest.mark.skipif(not BITBRAINS_TAR.exists(), reason="the Bitbrains trace (../shared/data) is not here")

MINUTE = 60
PODS = 160
STEPS = 48  # four hours of 5-minute steps
END = START + STEPS * STEP
FIRST = START - 15 * MINUTE  # samples start a little before the window
LAST = END + 45 * MINUTE  # and end after it (the GPU readings sit there)
GPU_AT = END + 40 * MINUTE  # the GPU snapshot's time
SELECTOR = 'cluster="prod"'


@dataclass(frozen=True)
class PodSeries:
    """One container's minute-by-minute usage: CPU counter (seconds) and memory (bytes)."""

    namespace: str
    pod: str
    container: str
    cluster: str
    counter: list[float]
    memory: list[float]


def minutes() -> list[int]:
    return list(range(FIRST, LAST + 1, MINUTE))


def step_of(t: int) -> int:
    """The 5-minute replay step whose rate window ``(t_k - 5m, t_k]`` holds minute ``t``."""
    return min(max(0, math.ceil((t - START) / STEP)), len(next(iter(USAGE.values()))[0]) - 1)


USAGE: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def containers() -> list[PodSeries]:
    """Every container series both servers hold (see the module doc)."""
    out: list[PodSeries] = []
    keys = sorted(USAGE)
    two = set(keys[::7])  # pods with a sidecar taking 30%
    gap = set(keys[3::40])  # pods without samples for 40 minutes
    restart = keys[5]  # a container that restarts mid-window
    staging = keys[:20]  # the same pod names in another cluster
    ts = minutes()
    for cluster, members in (("prod", keys), ("staging", staging)):
        for key in members:
            ns, pod = key.split("/")
            cpu, mem = USAGE[key]
            shares = (("app", 0.7), ("sidecar", 0.3)) if key in two else (("app", 1.0),)
            for container, share in shares:
                total, counter, memory = 500.0, [], []
                for t in ts:
                    k = step_of(t)
                    scale = share * (1.7 if cluster == "staging" else 1.0)
                    total += float(cpu[k]) * 60.0 * scale
                    if key == restart and container == "app" and t == START + 95 * MINUTE:
                        total = float(cpu[k]) * 60.0 * scale  # a new container: the counter starts again
                    hole = key in gap and START + 120 * MINUTE <= t < START + 160 * MINUTE
                    counter.append(math.nan if hole else total)
                    memory.append(math.nan if hole else float(round(float(mem[k]) * scale)))
                out.append(PodSeries(ns, pod, container, cluster, counter, memory))
    return out


def openmetrics_cadvisor(series: list[PodSeries]) -> str:
    lines = ["# TYPE container_cpu_usage_seconds counter"]
    for s in series:
        labels = f'namespace="{s.namespace}",pod="{s.pod}",container="{s.container}",cluster="{s.cluster}"'
        lines += [f"container_cpu_usage_seconds_total{{{labels}}} {v!r} {t}" for t, v in zip(minutes(), s.counter, strict=True) if v == v]
    pod_level = series[0]  # cAdvisor's pod cgroup: the queries leave it out
    labels = f'namespace="{pod_level.namespace}",pod="{pod_level.pod}",container="",cluster="prod"'
    lines += [f"container_cpu_usage_seconds_total{{{labels}}} {1e6 + i * 600.0!r} {t}" for i, t in enumerate(minutes())]
    lines.append("# TYPE container_memory_working_set_bytes gauge")
    for s in series:
        labels = f'namespace="{s.namespace}",pod="{s.pod}",container="{s.container}",cluster="{s.cluster}"'
        lines += [f"container_memory_working_set_bytes{{{labels}}} {v!r} {t}" for t, v in zip(minutes(), s.memory, strict=True) if v == v]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def gke_labels(s: PodSeries) -> str:
    return (f'project_id="acme",location="europe-west1",cluster_name="{s.cluster}",namespace_name="{s.namespace}",'
            f'pod_name="{s.pod}",container_name="{s.container}",monitored_resource="k8s_container"')  # fmt: skip


GPU_PODS = {  # (namespace, pod) -> [(accelerator_id, duty cycle %)]: gpu-quarter's pod keeps 3 GPUs busy
    ("default", "train-a"): [("GPU-f0", 3.0)],
    ("default", "train-b"): [("GPU-q0", 95.0), ("GPU-q1", 90.0), ("GPU-q2", 80.0), ("GPU-q3", 0.0)],
}


def openmetrics_gke(series: list[PodSeries]) -> str:
    lines = ["# TYPE kubernetes_io:container_cpu_core_usage_time unknown"]
    for s in series:
        lines += [f"kubernetes_io:container_cpu_core_usage_time{{{gke_labels(s)}}} {v!r} {t}"
                  for t, v in zip(minutes(), s.counter, strict=True) if v == v]  # fmt: skip
    lines.append("# TYPE kubernetes_io:container_memory_used_bytes gauge")
    for s in series:
        for kind in ("evictable", "non-evictable"):
            lines += [
                f'kubernetes_io:container_memory_used_bytes{{{gke_labels(s)},memory_type="{kind}"}} '
                f"{(v if kind == 'non-evictable' else 0.4 * v + 12345.0)!r} {t}"
                for t, v in zip(minutes(), s.memory, strict=True) if v == v
            ]  # fmt: skip
    lines.append("# TYPE kubernetes_io:container_accelerator_duty_cycle gauge")
    for (ns, pod), gpus in GPU_PODS.items():
        for accelerator, duty in gpus:
            s = PodSeries(ns, pod, "train", "prod", [], [])
            labels = f'{gke_labels(s)},accelerator_id="{accelerator}",make="nvidia",model="Tesla T4"'
            lines += [f"kubernetes_io:container_accelerator_duty_cycle{{{labels}}} {duty!r} {t}"
                      for t in minutes() if t >= GPU_AT - 30 * MINUTE]  # fmt: skip
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Servers:
    cadvisor: str
    gke: str
    root: Path


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    root = tmp_path_factory.mktemp("gke")
    USAGE.update({k: (c[:STEPS], m[:STEPS]) for k, (c, m) in sorted(pod_usage().items())[:PODS]})
    series = containers()
    (root / "cadvisor").mkdir()
    (root / "gke").mkdir()
    (root / "cadvisor" / "data.om").write_text(openmetrics_cadvisor(series))
    (root / "gke" / "data.om").write_text(openmetrics_gke(series))
    with (
        prometheus_on(root / "cadvisor" / "data.om", root / "cadvisor") as cadvisor,
        prometheus_on(root / "gke" / "data.om", root / "gke") as gke,
    ):
        yield Servers(cadvisor, gke, root)


def export(url: str, out: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    argv = ["history", "export", "--prometheus-url", url, "--prometheus-selector", SELECTOR,
            "--from", str(START), "--to", str(END), "--out", str(out), *extra]  # fmt: skip
    assert main(argv) == 0
    return capsys.readouterr().err


def rows(path: Path) -> list[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    t = pq.read_table(path)
    return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))


def test_auto_picks_each_source_and_the_exports_are_identical(
    servers: Servers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = export(servers.cadvisor, tmp_path / "c.parquet", capsys)
    assert err.startswith("scaler: history source: cadvisor (container_cpu_usage_seconds_total has series; "
                          "kubernetes_io:container_cpu_core_usage_time has none)\n")  # fmt: skip
    err = export(servers.gke, tmp_path / "g.parquet", capsys)
    assert err.startswith("scaler: history source: gke-system (kubernetes_io:container_cpu_core_usage_time has "
                          "series; container_cpu_usage_seconds_total has none)\n")  # fmt: skip
    c, g = read_metadata(tmp_path / "c.parquet"), read_metadata(tmp_path / "g.parquet")
    assert (c["metrics"], g["metrics"]) == ("cadvisor", "gke-system")
    assert g["cpu_query"] == ("sum by (namespace_name, pod_name) (rate(kubernetes_io:container_cpu_core_usage_time"
                              '{monitored_resource="k8s_container",cluster_name="prod"}[5m]))')  # fmt: skip
    assert g["memory_query"] == ('sum by (namespace_name, pod_name) (kubernetes_io:container_memory_used_bytes'
                                 '{monitored_resource="k8s_container",memory_type="non-evictable",cluster_name="prod"})')  # fmt: skip
    assert c["rows"] == g["rows"] and c["pods"] == g["pods"] == str(PODS) and c["dropped_rows"] == g["dropped_rows"]
    assert rows(tmp_path / "c.parquet") == rows(tmp_path / "g.parquet")
    # The quirks are in the data: the gap leaves instants out, the restart is no negative rate,
    # the other cluster's pods and the pod-level cgroup series do not count.
    assert int(c["rows"]) < PODS * (STEPS + 1)
    got = {(r[1], r[2], r[0].timestamp()): (r[3], r[4]) for r in rows(tmp_path / "g.parquet")}
    key = sorted(USAGE)[0]
    ns, pod = key.split("/")
    for k in (0, 30, STEPS):
        cpu, mem = USAGE[key][0][min(k, STEPS - 1)], USAGE[key][1][min(k, STEPS - 1)]
        assert got[(ns, pod, float(START + k * STEP))] == (pytest.approx(float(cpu), rel=1e-9), pytest.approx(float(mem), abs=1))
    # The GKE label names work on the cAdvisor source too, and the other way round.
    export(servers.cadvisor, tmp_path / "c2.parquet", capsys, "--prometheus-selector", 'cluster_name="prod"')
    assert rows(tmp_path / "c2.parquet") == rows(tmp_path / "c.parquet")


def test_replay_gives_identical_figures_from_both(servers: Servers, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["replay", "--snapshot", str(LOWREQ), "--from", str(START), "--to", str(END), "--prometheus-selector",
              SELECTOR, "--policies", "seed,scaler", "--workers", "1", "-o", "json"]  # fmt: skip
    by_cadvisor = replay_json([*common, "--prometheus-url", servers.cadvisor, "--cache-dir", str(tmp_path / "c")], capsys)
    by_gke = replay_json([*common, "--prometheus-url", servers.gke, "--cache-dir", str(tmp_path / "g")], capsys)
    assert by_gke["steps"] == by_cadvisor["steps"] == STEPS
    for want, got in zip([*by_cadvisor["policies"], by_cadvisor["baseline"]], [*by_gke["policies"], by_gke["baseline"]], strict=True):
        for figure in FIGURES:
            assert got[figure] == want[figure], (want["name"], figure)
        assert got["timeline"] == want["timeline"]
    seed = by_cadvisor["policies"][0]
    assert seed["nodesRemoved"] > 0, "the window exercises removals"
    assert by_gke["trace"]["podsMatchedByPod"] == by_cadvisor["trace"]["podsMatchedByPod"] == PODS
    assert by_gke["trace"]["prometheus"]["metrics"] == "gke-system"
    assert by_cadvisor["trace"]["prometheus"]["metrics"] == "cadvisor"


def test_tune_gives_identical_figures_from_both(servers: Servers, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["tune", "--snapshot", str(LOWREQ), "--from", str(START), "--to", str(END), "--prometheus-selector",
              SELECTOR, "--trials", "2", "--generation-size", "2", "--seed", "3", "--workers", "1", "-o", "json"]  # fmt: skip
    docs = []
    for url, cache in ((servers.cadvisor, "c"), (servers.gke, "g")):
        assert main([*common, "--prometheus-url", url, "--cache-dir", str(tmp_path / cache)]) == 0
        docs.append(json.loads(capsys.readouterr().out))

    def figures(doc: dict[str, Any]) -> Any:
        return json.dumps({k: v for k, v in doc.items() if k not in ("run", "inputs", "trace")}, sort_keys=True)

    assert figures(docs[0]) == figures(docs[1])


def test_gke_duty_cycle_judges_gpu_nodes_as_dcgm_does(
    servers: Servers, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The GPU cluster of test_gpu_nodes at GPU_AT: its pods' duty cycle, placed on their nodes
    through the snapshot, keeps gpu-quarter (three of its GPUs busy) as DCGM's readings did."""
    from test_decisions_e2e import dry_run
    from test_gpu_nodes import gpu_snapshot

    snap = gpu_snapshot(tmp_path / "snap", at=GPU_AT)
    history = ["--history=prometheus", f"--prometheus-url={servers.gke}", f"--prometheus-selector={SELECTOR}",
               "--history-days=1"]  # fmt: skip
    report = dry_run(capsys, "--snapshot", str(snap), *history)
    quarter = report["gpu-quarter"]
    assert (quarter["reason"], quarter["detail"]) == ("NotUnderutilized", "gpu usage 66.2% (measured) > gpu threshold 50%")
    assert quarter["gpu"]["usage"] == pytest.approx(2.65 / 4) and quarter["gpu"]["judgedBy"] == "requests and usage"
    assert report["gpu-full"]["gpu"]["usage"] == pytest.approx(0.03)
    idle = report["gpu-idle"]  # no pod of it has a duty cycle: judged by its requests, and it says so
    assert idle["gpu"]["usage"] is None and idle["status"] == "removable-empty"
    assert idle["detail"].endswith("; judged by GPU requests: no GPU usage series for this node")
