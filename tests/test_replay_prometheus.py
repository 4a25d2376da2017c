"""``scaler replay --prometheus-url`` and ``scaler history export`` against a real Prometheus.

The night-lowreq example's 412 trace pods over 6 hours of the Bitbrains trace (July 8, 2013),
written twice: as a long-format CSV (what ``--trace`` reads) and as cAdvisor's series in
OpenMetrics (a CPU counter that grows at each pod's rate, a working-set gauge), which ``promtool
tsdb create-blocks-from openmetrics`` turns into TSDB blocks for Debian's ``prometheus``. The
replay from Prometheus must give the figures of the replay of the CSV, figure by figure. Then
the errors: an unreachable server, a query error, an empty result and a window without samples
each give one line naming the URL or the query, and exit 2.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ports import free_port
from promserver import prometheus_on

from scaler.cli import main
from scaler.history.export import export_usage, parse_span, parse_time, read_metadata
from scaler.replay.bundled import known_map
from scaler.replay.traces import load_trace, resample

ROOT = Path(__file__).resolve().parents[1]
LOWREQ = ROOT / "scaler" / "examples" / "bitbrains-gke-night-lowreq"
BITBRAINS_TAR = ROOT.parent / "shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz"
START = 1373241600  # 2013-07-08T00:00:00Z
STEPS = 72  # 6 hours of 5 minutes
STEP = 300
END = START + STEPS * STEP

pytestmark = pytest.mark.skipif(not BITBRAINS_TAR.exists(), reason="the Bitbrains trace (../shared/data) is not here")


@functools.cache
def pod_usage() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per trace pod of night-lowreq (``namespace/name``): its VM's CPU (cores) and working
    set (bytes) at each step of the window, sampled as the replay samples the trace. Read once
    per process (a minute of decompressing the trace): test_history_gke uses it too; callers do
    not modify it."""
    pods = known_map(LOWREQ.name)
    trace = load_trace(BITBRAINS_TAR, wanted=set(pods.values()))
    grid = START + STEP * np.arange(STEPS, dtype=np.float64)
    out = {}
    for key, vm in sorted(pods.items()):
        cpu, mem = resample(trace.series[vm], grid)
        out[key] = (cpu / 1000.0, np.round(mem))
    return out


def write_csv(usage: dict[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    rows = ["timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes"]
    for key, (cpu, mem) in usage.items():
        ns, pod = key.split("/")
        for k in range(STEPS):
            rows.append(f"{START + k * STEP},{ns},{pod},{float(cpu[k])!r},{float(mem[k])!r}")
    path.write_text("\n".join(rows) + "\n")


def write_openmetrics(usage: dict[str, tuple[np.ndarray, np.ndarray]], path: Path) -> None:
    """cAdvisor's series for each pod (one container ``app``): the CPU counter advances at the
    pod's rate of step k over (t_k − 5m, t_k], sampled every 150 s, so that
    ``rate(…[5m])`` at t_k is that rate; the working set is a gauge sampled at each t_k. A
    pod-level series (``container=""``) that the queries must leave out is added for one pod."""
    lines = ["# TYPE container_cpu_usage_seconds counter"]
    first = next(iter(usage))
    for key, (cpu, _mem) in usage.items():
        ns, pod = key.split("/")
        for container in ("app", "") if key == first else ("app",):
            labels = f'namespace="{ns}",pod="{pod}",container="{container}"'
            total = 1000.0
            lines.append(f"container_cpu_usage_seconds_total{{{labels}}} {total!r} {START - STEP}")
            for k in range(STEPS):
                t = START + k * STEP
                lines.append(f"container_cpu_usage_seconds_total{{{labels}}} {total + 150 * float(cpu[k])!r} {t - 150}")
                total += 300 * float(cpu[k])
                lines.append(f"container_cpu_usage_seconds_total{{{labels}}} {total!r} {t}")
    lines.append("# TYPE container_memory_working_set_bytes gauge")
    for key, (_cpu, mem) in usage.items():
        ns, pod = key.split("/")
        labels = f'namespace="{ns}",pod="{pod}",container="app"'
        for k in range(STEPS):
            lines.append(f"container_memory_working_set_bytes{{{labels}}} {float(mem[k])!r} {START + k * STEP}")
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


class Data:
    def __init__(self, root: Path, url: str, csv: Path, usage: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        self.root, self.url, self.csv, self.usage = root, url, csv, usage


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Data]:
    root = tmp_path_factory.mktemp("replay-prometheus")
    usage = pod_usage()
    csv = root / "trace.csv"
    write_csv(usage, csv)
    om = root / "data.om"
    write_openmetrics(usage, om)
    with prometheus_on(om, root) as url:
        yield Data(root, url, csv, usage)


def replay_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


FIGURES = ("nodeHours", "costUsd", "nodesRemoved", "nodesAdded", "podsEvicted", "overloadNodeMinutes",
           "overloadCpuNodeMinutes", "overloadMemoryNodeMinutes", "throttledCpuCoreMinutes", "oomKills",
           "unplaceablePods", "failedRemovals")  # fmt: skip


def test_replay_from_prometheus_equals_the_replay_of_the_same_trace(
    data: Data, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["replay", "--snapshot", str(LOWREQ), "--from", str(START), "--to", str(END),
              "--policies", "seed,scaler", "--processes", "1", "-o", "json"]  # fmt: skip
    by_trace = replay_json([*common, "--trace", str(data.csv)], capsys)
    cache = data.root / "cache"
    by_prom = replay_json([*common, "--prometheus-url", data.url, "--cache-dir", str(cache)], capsys)

    assert by_prom["steps"] == by_trace["steps"] == STEPS
    for want, got in zip([*by_trace["policies"], by_trace["baseline"]], [*by_prom["policies"], by_prom["baseline"]], strict=True):
        assert got["name"] == want["name"]
        for figure in FIGURES:
            assert got[figure] == want[figure], (want["name"], figure)
        assert got["timeline"] == want["timeline"], want["name"]
    seed = by_trace["policies"][0]
    assert seed["nodesRemoved"] > 0 and seed["podsEvicted"] > 0, "the window exercises removals and evictions"

    # The report names its inputs: the Prometheus URL, both queries and the range.
    trace = by_prom["trace"]
    assert trace["podsFollowingTrace"] == trace["podsMatchedByPod"] == 412 and trace["podsMatchedByWorkload"] == 0
    assert trace["podsWithoutSeries"] == by_trace["trace"]["podsWithoutSeries"] == 822 - 412
    prom = trace["prometheus"]
    assert prom["url"] == data.url and prom["from"] == "2013-07-08T00:00:00Z" and prom["to"] == "2013-07-08T06:00:00Z"
    assert prom["cpu_query"].startswith('sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{container!=""')
    assert by_prom["scalerVersion"] and by_prom["scalerVersion"] == by_trace["scalerVersion"]

    # The second run reads the cached export (not written again; the same figures).
    (cached,) = cache.iterdir()
    written = cached.stat().st_mtime_ns
    seed_only = [a if a != "seed,scaler" else "seed" for a in common]
    again = replay_json([*seed_only, "--prometheus-url", data.url, "--cache-dir", str(cache)], capsys)
    assert again["policies"] == by_prom["policies"][:1] and again["trace"] == by_prom["trace"]
    assert cached.stat().st_mtime_ns == written


def test_history_export_writes_the_long_format_in_chunks(data: Data, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "usage.parquet"
    argv = ["history", "export", "--prometheus-url", data.url, "--from", "2013-07-08T00:00:00Z",
            "--to", "2013-07-08T05:55:00Z", "--step", "5m", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    _, err = capsys.readouterr()
    assert err == (
        "scaler: history source: cadvisor (container_cpu_usage_seconds_total has series; "
        "kubernetes_io:container_cpu_core_usage_time has none)\n"
        f"wrote 29,664 samples of 412 pods, 2013-07-08T00:00:00Z to 2013-07-08T05:55:00Z every 5m0s, to {out}\n"
    )
    meta = read_metadata(out)
    assert meta["url"] == data.url and meta["from"] == "2013-07-08T00:00:00Z" and meta["step_seconds"] == "300.0"
    assert meta["metrics"] == "cadvisor" and meta["rows"] == "29664" and meta["pods"] == "412"
    assert 'container_memory_working_set_bytes{container!="",pod!=""}' in meta["memory_query"]
    table = pq.read_table(out)
    assert table.column_names == ["timestamp", "namespace", "pod_or_workload", "cpu_cores", "memory_bytes"]
    trace = load_trace(out)
    assert trace.grid is not None  # read straight into per-pod columns
    assert set(trace.series) == set(data.usage)
    for key, (cpu, mem) in data.usage.items():
        s = trace.series[key]
        assert s.times.tolist() == [START + k * STEP for k in range(STEPS)]
        np.testing.assert_allclose(s.cpu_millicores, cpu * 1000.0, rtol=1e-9, atol=1e-9)
        assert s.memory_bytes.tolist() == mem.tolist()
    # Streamed window by window: small windows (at most 25 points, 2,000 points per answer)
    # give the same rows as a day per query, in more row groups.
    small = export_usage(data.url, START, END - STEP, STEP, out=tmp_path / "small.parquet", max_points=25, points=2000)
    whole = export_usage(data.url, START, END - STEP, STEP, out=tmp_path / "whole.parquet")
    assert small.row_groups == whole.row_groups == 1 and whole.rows == small.rows == 412 * STEPS

    def rows(path: Path) -> list[tuple[Any, ...]]:
        t = pq.read_table(path)
        return sorted(zip(*(t.column(c).to_pylist() for c in t.column_names), strict=True))

    assert rows(small.path) == rows(whole.path) and len(rows(small.path)) == 412 * STEPS
    assert pq.ParquetFile(small.path).metadata.num_row_groups == 1  # the windows gathered into one


def one_error_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith("scaler: error: ")
    return err


@pytest.mark.parametrize("command", ["export", "replay"])
def test_errors_are_one_line_naming_the_url_or_the_query(
    data: Data, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def run(url: str, *extra: str, start: str = "2013-07-08T00:00:00Z", end: str = "2013-07-08T03:00:00Z") -> str:
        if command == "export":
            argv = ["history", "export", "--out", str(tmp_path / "x.parquet")]
        else:
            argv = ["replay", "--snapshot", str(LOWREQ), "--cache-dir", str(tmp_path / "cache")]
        return one_error_line([*argv, "--prometheus-url", url, "--from", start, "--to", end, *extra], capsys)

    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    assert f"prometheus at {closed}: unreachable" in run(closed)
    bad = run(data.url, "--prometheus-selector", 'namespace=~"("')
    assert f"prometheus at {data.url}: HTTP 400: bad_data" in bad and 'namespace=~"("' in bad
    empty = run(data.url, "--prometheus-selector", 'cluster="nope"')  # auto: neither source has series
    assert f"prometheus at {data.url}: empty result: neither cAdvisor (container_cpu_usage_seconds_total" in empty
    gke = 'kubernetes_io:container_cpu_core_usage_time{monitored_resource="k8s_container",cluster_name="nope"}'
    assert 'cluster="nope"' in empty and gke in empty
    empty = run(data.url, "--prometheus-selector", 'cluster="nope"', "--prometheus-metrics", "cadvisor")
    assert f"prometheus at {data.url}: empty result for sum by (namespace, pod) (rate(" in empty
    assert 'cluster="nope"' in empty and "that the kubelet's cAdvisor metrics are scraped" in empty
    window = run(data.url, start="2013-06-01T00:00:00Z", end="2013-06-02T00:00:00Z")
    assert f"prometheus at {data.url}: no samples from 2013-06-01T00:00:00Z to 2013-06-02T00:00:00Z for sum by" in window
    assert "its series exist outside that window" in window
    assert not (tmp_path / "x.parquet").exists()


def test_relative_times_and_spans() -> None:
    now = 1_800_000_000.0
    assert parse_time("-14d", now) == now - 14 * 86400
    assert parse_time("now-6h", now) == now - 6 * 3600
    assert parse_time("now", now) == now
    assert parse_time("-1h30m", now) == now - 5400
    assert parse_time("2013-07-08T00:00:00Z", now) == START
    assert parse_time(str(START), now) == START
    assert parse_span("2w") == 14 * 86400 and parse_span("1d12h") == 1.5 * 86400
    for bad in ("-14x", "yesterday", "now-"):
        with pytest.raises(ValueError, match="not an RFC 3339 time"):
            parse_time(bad, now)


def test_without_snapshot_the_replay_starts_from_the_live_cluster(
    data: Data, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No --snapshot: the cluster of the kubeconfig (here the loopback fake API server serving
    night-lowreq's objects, over real HTTP), its pods matched to the series by namespace and
    name."""
    from fakes.kube_api import FakeKubeAPI

    from scaler.sources.files import load_objects

    with FakeKubeAPI() as api:
        api.load_objects(load_objects([LOWREQ]))
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        report = replay_json(
            ["replay", "--prometheus-url", data.url, "--cache-dir", str(tmp_path / "cache"),
             "--kubeconfig", str(kubeconfig), "--context", "fake", "--from", str(START), "--to", str(START + 3600),
             "--policies", "seed", "--processes", "1", "-o", "json"],
            capsys,
        )  # fmt: skip
    assert report["snapshot"] == "live cluster (context fake)"
    assert report["trace"]["podsMatchedByPod"] == 412 and report["trace"]["pods"] == 822
    assert report["steps"] == 12


def test_without_snapshot_or_cluster_it_says_what_to_pass(
    data: Data, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    err = one_error_line(["replay", "--prometheus-url", data.url, "--from", "-1d"], capsys)
    assert "--prometheus-url without --snapshot replays the live cluster, but none is configured" in err
    assert "pass --snapshot DIR" in err


def test_relative_times_on_the_command_line(data: Data, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--from -14d`` (a value argparse would take for a flag) is 14 days before now: this
    server holds 2013 only, so the window has no samples, and the error names the window."""
    err = one_error_line(["history", "export", "--prometheus-url", data.url, "--from", "-14d", "--to", "-13d",
                          "--out", str(tmp_path / "x.parquet")], capsys)  # fmt: skip
    assert "no samples from 20" in err and "its series exist outside that window" in err
    assert "2013" not in err.split(" for ")[0]


def test_export_shows_progress_on_a_terminal(data: Data, tmp_path: Path) -> None:
    from ptyrun import run_in_pty

    out = tmp_path / "u.parquet"
    code, text = run_in_pty(["history", "export", "--prometheus-url", data.url, "--from", str(START),
                             "--to", str(START + 3 * 86400), "--out", str(out)], 120)  # fmt: skip
    assert code == 0, text
    # A bar while it runs (queries done of all), the summary line at the end.
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert re.search(rf"exporting from {re.escape(data.url)} \S+ (\d+|\?)/(\d+|\?) queries", plain)
    assert re.search(rf"wrote 29,664 samples of 412 pods, 2013-07-08T00:00:00Z to 2013-07-11T00:00:00Z every 5m0s, to\s+{re.escape(str(out))}", plain)
