"""A slow or failing Prometheus costs a bounded wait and never stalls scale-down.

* Every call has an overall deadline: a server that trickles one byte every 5 s ends
  ``scaler history export`` at ``--prometheus-timeout`` (httpx's read timeout alone never
  fires: each byte comes before it), and the controller's history path the same way.
* A transient failure is retried through tenacity, waiting what ``Retry-After`` asks.
* ``scaler run`` refreshes portraits and GPU usage in the background: against a Prometheus that
  never answers in time, the controller goes on removing nodes, and the status ConfigMap, a
  metric and a log line say what failed. A GPU usage reading older than its limit is not used:
  the GPU node is judged by its GPU requests, and its detail says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_cluster import E2ECluster
from fakes.prometheus_api import FakePrometheus, RecordedRequest, Response, grid, matrix, trickle
from test_runner_e2e import WallClock
from waiting import wait_for

from scaler.cli import main
from scaler.config import ScalerConfig
from scaler.history.export import export_usage
from scaler.history.prometheus import HistoryError, PrometheusClient
from scaler.history.refresh import GPU_USAGE_MAX_AGE_SECONDS, HistoryRefresher
from scaler.history.source import load_profiles
from scaler.model.snapshot import ClusterSnapshot
from scaler.runner import Runner

T0 = 1_700_000_100.0
STEP = 300.0


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as p:
        yield p


def test_a_trickling_server_ends_the_export_at_its_deadline(
    prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One byte every 5 s: two bytes arrive (each before any read timeout), then the deadline
    (12 s) ends the call; a deadline is not retried, so the command ends there, exit 2."""
    prom.answer = lambda r: trickle(b'{"status":"success","data":{"resultType":"matrix","result":[]}}', 5.0)
    out = tmp_path / "u.parquet"
    started = time.monotonic()
    code = main(["history", "export", "--prometheus-url", prom.url, "--from", str(T0), "--to", str(T0 + 3600),
                 "--out", str(out), "--prometheus-timeout", "12s", "--prometheus-metrics", "cadvisor", "-q"])  # fmt: skip
    elapsed = time.monotonic() - started
    _, err = capsys.readouterr()
    assert code == 2 and not out.exists()
    assert err == (
        f"scaler: error: prometheus at {prom.url}: no complete answer within 12 s (deadline) (query sum by "
        '(namespace, pod) (rate(container_cpu_usage_seconds_total{container!="",pod!=""}[5m])))\n'
    )
    assert 12 <= elapsed < 16, elapsed  # the deadline, plus imports and start-up on a busy machine
    assert len(prom.requests) == 1


def test_a_server_that_never_answers_ends_the_controllers_fetch_at_its_deadline(prom: FakePrometheus) -> None:
    prom.answer = lambda r: trickle(b" " * 10 + b"{}", 1.0)
    cfg = ScalerConfig(history="prometheus", prometheus_url=prom.url, history_days=1.0, prometheus_timeout=2.5,
                       prometheus_metrics="cadvisor")  # fmt: skip
    snap = ClusterSnapshot.create(now=T0, nodes=[], pods=[])
    started = time.monotonic()
    with pytest.raises(HistoryError, match=r"no complete answer within 2.5 s \(deadline\)"):
        load_profiles(cfg, snap, T0)
    assert 2.5 <= time.monotonic() - started < 4.5


def test_an_answer_over_the_cap_is_refused_before_it_is_read(prom: FakePrometheus) -> None:
    big = b'{"status":"success","data":{"resultType":"matrix","result":[]}}' + b" " * 5000
    prom.answer = lambda r: Response(200, big)
    with PrometheusClient(prom.url, max_bytes=4096) as c, pytest.raises(HistoryError) as e:
        c.query_range("up", T0, T0 + STEP, STEP)
    assert f"answer of {len(big):,} bytes is over the cap of 4,096 bytes" in str(e.value)


def test_429_is_retried_after_what_retry_after_asks(prom: FakePrometheus, tmp_path: Path) -> None:
    calls: list[float] = []

    def answer(req: RecordedRequest) -> Any:
        calls.append(time.monotonic())
        if len(calls) == 1:
            body = {"status": "error", "errorType": "unavailable", "error": "quota exceeded"}
            return Response(429, body, headers={"Retry-After": "2"})
        series = [(t, "1") for t in grid(req)]
        return matrix(({"namespace": "ns", "pod": "a-0"}, series))

    prom.answer = answer
    out = tmp_path / "u.parquet"
    export = export_usage(prom.url, T0, T0 + 2 * STEP, STEP, out=out, metrics="cadvisor", retry_wait=0.01)
    assert export.rows == 3 and out.exists()
    assert calls[1] - calls[0] >= 2.0, "the second try waited what Retry-After asked"


# ---- scaler run: history in the background ------------------------------------------------------


def status_doc(c: E2ECluster) -> dict[str, Any]:
    """The status ConfigMap's document (empty before it is written)."""
    import yaml

    cm = c.kube.get_object("ConfigMap", "scaler-status", "scaler-system")
    return yaml.safe_load(cm["data"]["status"]) if cm is not None else {}


def test_run_keeps_scaling_down_while_prometheus_does_not_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The controller loop never waits for Prometheus: with every query trickling past a 1.5 s
    deadline, the underused nodes are removed as without history, and the failure is in the
    status ConfigMap, the metrics and the log."""
    caplog.set_level(logging.WARNING, logger="scaler.history.refresh")
    with FakePrometheus() as prom, E2ECluster(tmp_path, clock=WallClock()) as c:  # type: ignore[arg-type]
        prom.answer = lambda r: trickle(b"{" * 100, 0.5)
        cfg = c.config(history="prometheus", prometheus_url=prom.url, prometheus_timeout=1.5, scan_interval=0.2,
                       scale_down_unneeded_time=0, address="127.0.0.1:0")  # fmt: skip
        runner = Runner(cfg, c.api, c.provider(), identity="r-0").start(sync_timeout=10, serve=False)
        try:
            wait_for(lambda: len(c.gce.deleted_instances) >= 1, timeout=60, what="a node removed")
            assert runner.history is not None
            wait_for(lambda: runner.history.profiles_state.failures >= 1, what="a failed profile refresh")
            wait_for(lambda: "no complete answer within 1.5 s" in str(status_doc(c).get("history")),
                     what="the failure in the status ConfigMap")  # fmt: skip
        finally:
            runner.stop(timeout=10)
        profiles = status_doc(c)["history"]["profiles"]
        assert profiles["status"] == "NotLoaded" and profiles["consecutiveFailures"] >= 1
        assert profiles["lastError"].startswith(f"prometheus at {prom.url}: no complete answer within 1.5 s")
        assert runner.metrics.history_failures.labels("profiles")._value.get() >= 1
        text = runner.metrics.exposition().decode()
        assert 'scaler_history_refresh_failures_total{cache="profiles"}' in text
    lines = [r.getMessage() for r in caplog.records if "profiles refresh failed" in r.getMessage()]
    assert lines and "none loaded yet" in lines[0] and "no complete answer within 1.5 s" in lines[0]


def test_a_gpu_usage_reading_older_than_its_limit_is_not_used(tmp_path: Path) -> None:
    """gpu-quarter keeps three GPUs busy; its reading keeps it while fresh. Once the reading is
    older than its limit (the refreshes failing since), the node is judged by its GPU requests
    alone, as cluster-autoscaler judges it, and its detail says why."""
    from test_gpu_nodes import gpu_snapshot

    from scaler.engine import evaluate
    from scaler.sources.files import load_snapshot

    snap = load_snapshot([str(gpu_snapshot(tmp_path / "snap"))], None)
    cfg = ScalerConfig(history="prometheus", prometheus_url="http://127.0.0.1:9")
    readings = [{"gpu-quarter": 2.65 / 4, "gpu-full": 0.03, "gpu-idle": 0.0}]

    def gpu(config: ScalerConfig, s: ClusterSnapshot, now: float) -> dict[str, float]:
        if not readings:
            raise HistoryError("prometheus at http://127.0.0.1:9: unreachable")
        return readings.pop()

    history = HistoryRefresher(cfg, load_profiles=lambda *a: {}, load_gpu_usage=gpu)
    t = snap.now
    history.attach(snap, t)
    history.refresh_due(t)

    def verdict(now: float) -> tuple[str, str]:
        r = {n.node.name: n for n in evaluate(history.attach(snap, now), cfg).nodes}["gpu-quarter"]
        return r.reason.value, r.detail

    assert verdict(t + 10) == ("NotUnderutilized", "gpu usage 66.2% (measured) > gpu threshold 50%")
    history.refresh_due(t + 60)  # fails: the reading of t stays, still young enough
    assert verdict(t + 60)[0] == "NotUnderutilized"
    late = t + GPU_USAGE_MAX_AGE_SECONDS + 1
    reason, detail = verdict(late)
    assert reason == "NoPlaceToMovePods"
    assert detail.endswith("; judged by GPU requests: GPU usage reading 5m1s old, over its 5m0s limit")
    assert history.status(late)["gpuUsage"]["status"] == "Stale"
    # The dry-run's verdict without any GPU usage: the same as judged by requests.
    assert verdict(late)[0] == {n.node.name: n for n in evaluate(snap, cfg).nodes}["gpu-quarter"].reason.value
