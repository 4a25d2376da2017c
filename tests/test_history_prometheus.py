"""The Prometheus history path: error handling and auth (httpx mock transport), and the real
thing: Debian's ``prometheus`` server on loopback, backfilled with ``promtool tsdb
create-blocks-from openmetrics`` with cAdvisor-like series, queried by ``load_profiles``.

The real-server tests install the package when it is missing (``make test-deps`` does it first)
and are skipped, with the reason, only where that cannot be done (not root, or no apt-get).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from builders import MI, make_controller, make_node, make_pod, owner_ref
from ports import free_port
from promserver import prometheus_on

from scaler.config import ScalerConfig
from scaler.history.profiles import build_profiles
from scaler.history.prometheus import (
    HistoryError,
    PrometheusClient,
    fetch_pod_usage,
    fetch_samples,
    read_auth_header,
)
from scaler.history.refresh import HistoryRefresher
from scaler.history.source import load_profiles
from scaler.model.profiles import hour_of_day
from scaler.model.snapshot import ClusterSnapshot

HOUR = 3600
DAY = 86400

# --- mock transport: errors and auth -----------------------------------------------------------


def mock(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


def matrix(*series: tuple[dict[str, str], list[tuple[float, str]]]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": m, "values": [list(v) for v in vs]} for m, vs in series]},
    }


def query(transport: httpx.BaseTransport, auth_file: str = "") -> Any:
    with PrometheusClient("http://prom.test:9090/", auth_file=auth_file, transport=transport) as c:
        return c.query_range("up", 0, 600, 300)


class TestErrors:
    @pytest.mark.parametrize(
        ("response", "message"),
        [
            (httpx.Response(200, content=b"<html>not json"), "invalid JSON"),
            (httpx.Response(200, json=[1, 2]), "not a JSON object"),
            (httpx.Response(200, json={"status": "error", "errorType": "timeout", "error": "query\ntimed out"}),
             "query failed: timeout: query timed out"),
            (httpx.Response(400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}),
             "HTTP 400: bad_data: parse error"),
            (httpx.Response(502, content=b"Bad Gateway\n<hr>"), "HTTP 502: Bad Gateway <hr>"),
            (httpx.Response(200, json={"status": "success", "data": {"resultType": "vector", "result": []}}),
             "expected a matrix"),
            (httpx.Response(200, json={"status": "success", "data": {"resultType": "matrix",
                                                                     "result": [{"metric": {}, "values": [["x"]]}]}}),
             "malformed series"),
        ],
    )  # fmt: skip
    def test_bad_answers_raise_one_line_history_errors(self, response: httpx.Response, message: str) -> None:
        with pytest.raises(HistoryError) as e:
            query(mock(lambda _r: response))
        text = str(e.value)
        assert message in text and "\n" not in text
        assert text.startswith("prometheus at http://prom.test:9090:")

    def test_unreachable_server(self) -> None:
        port = free_port()  # nothing listens there
        with (
            pytest.raises(HistoryError, match=r"unreachable") as e,
            PrometheusClient(f"http://127.0.0.1:{port}", deadline=5) as c,
        ):
            c.query_range("up", 0, 600, 300)
        assert "\n" not in str(e.value)

    def test_timeout(self) -> None:
        def slow(_r: httpx.Request) -> httpx.Response:
            raise httpx.ReadTimeout("read timed out")

        with pytest.raises(HistoryError, match="timed out"):
            query(mock(slow))

    @pytest.mark.parametrize("url", ["", "prom:9090"])
    def test_bad_url(self, url: str) -> None:
        with pytest.raises(HistoryError, match="--prometheus-url"):
            PrometheusClient(url)

    def test_missing_auth_file(self, tmp_path: Path) -> None:
        with pytest.raises(HistoryError, match=r"auth file .*cannot read"):
            PrometheusClient("http://p:9090", auth_file=str(tmp_path / "nope"))


class TestAuth:
    @pytest.mark.parametrize(
        ("content", "header"),
        [
            ("ya29.token-value\n", ("Authorization", "Bearer ya29.token-value")),
            ("Bearer abc\n", ("Authorization", "Bearer abc")),
            ("X-Scope-OrgID: tenant-1\n", ("X-Scope-OrgID", "tenant-1")),
            ("Authorization: Basic dXNlcjpwYXNz", ("Authorization", "Basic dXNlcjpwYXNz")),
        ],
    )
    def test_header_forms(self, tmp_path: Path, content: str, header: tuple[str, str]) -> None:
        f = tmp_path / "auth"
        f.write_text(content)
        assert read_auth_header(f) == header

    def test_header_is_sent(self, tmp_path: Path) -> None:
        f = tmp_path / "token"
        f.write_text("s3cret\n")
        seen: list[str] = []

        def handler(r: httpx.Request) -> httpx.Response:
            seen.append(r.headers.get("authorization", ""))
            assert r.url.path == "/api/v1/query_range"
            return httpx.Response(200, json=matrix())

        assert query(mock(handler), auth_file=str(f)) == []
        assert seen == ["Bearer s3cret"]

    def test_empty_auth_file(self, tmp_path: Path) -> None:
        f = tmp_path / "empty"
        f.write_text("  \n")
        with pytest.raises(HistoryError, match="empty"):
            read_auth_header(f)


def test_long_windows_are_chunked_without_overlap() -> None:
    calls: list[tuple[float, float, float]] = []

    def handler(r: httpx.Request) -> httpx.Response:
        q = r.url.params
        start, end, step = float(q["start"]), float(q["end"]), float(q["step"])
        calls.append((start, end, step))
        n = int((end - start) // step) + 1
        return httpx.Response(200, json=matrix(({"namespace": "ns", "pod": "p"}, [(start + i * step, "1") for i in range(n)])))

    with PrometheusClient("http://p", transport=mock(handler)) as c:
        usage = fetch_pod_usage(c, 0.0, 3 * DAY, 300.0)
    cpu_calls, memory_calls = calls[0::2], calls[1::2]  # window by window: CPU, then memory
    assert cpu_calls == memory_calls
    # A first window of 3 instants tells the series count; then a day per query for one series.
    assert [(end - start) / 300 + 1 for start, end, _ in cpu_calls] == [3, 288, 288, 286]
    assert all(end - start < DAY for start, end, _ in cpu_calls)
    assert [c[0] for c in cpu_calls[1:]] == [c[1] + 300 for c in cpu_calls[:-1]]
    instants = sorted(usage[("ns", "p")])
    assert instants == [i * 300.0 for i in range(3 * DAY // 300 + 1)]
    assert usage[("ns", "p")][0.0] == [1000.0, 1.0]  # cores -> millicores; bytes as they are


def test_windows_shrink_as_the_series_grow() -> None:
    """No answer grows with the cluster: once a window showed N series, the next ones hold about
    POINTS_PER_ANSWER / N instants (at most a day and 11,000), and no instant is asked twice."""
    from scaler.history.prometheus import POINTS_PER_ANSWER, Windows

    w = Windows(0.0, 7 * DAY, 300.0)
    spans = []
    for i, (lo, hi) in enumerate(w):
        spans.append((lo, hi))
        w.saw(30_000 if i >= 2 else 100)
    sizes = [round((hi - lo) / 300) + 1 for lo, hi in spans]
    assert sizes[:4] == [3, 288, 288, POINTS_PER_ANSWER // 30_000] and set(sizes[4:-1]) == {POINTS_PER_ANSWER // 30_000}
    assert sum(sizes) == 7 * 288 + 1 and [lo for lo, _ in spans[1:]] == [hi + 300 for _, hi in spans[:-1]]
    assert max(round((hi - lo) / 60) + 1 for lo, hi in Windows(0.0, 30 * DAY, 60.0, max_points=11_000)) <= 1440


def test_history_none_loads_nothing() -> None:
    snap = ClusterSnapshot.create(now=0, nodes=[], pods=[])
    assert load_profiles(ScalerConfig(), snap, 1e9) == {}


def test_prometheus_without_url_is_a_history_error() -> None:
    snap = ClusterSnapshot.create(now=0, nodes=[], pods=[])
    with pytest.raises(HistoryError, match="--prometheus-url is required"):
        load_profiles(ScalerConfig(history="prometheus"), snap, 1e9)


# --- a real Prometheus ---------------------------------------------------------------------------


# Synthetic cAdvisor data, per pod: (namespace, pod, container, cluster) -> cores(h), bytes(h)
# where h is the UTC hour of the day. Counters advance every 60 s by cores × 60.
def web_a_cores(h: int) -> float:
    return 0.1 + 0.01 * h


def db_cores(h: int) -> float:
    return 0.5 if 8 <= h < 18 else 0.1


@dataclass(frozen=True)
class Series:
    namespace: str
    pod: str
    container: str
    cluster: str
    cores: Callable[[int], float]
    memory: Callable[[int], float]
    start: float
    end: float  # last sample time (inclusive)


@dataclass(frozen=True)
class Server:
    url: str
    now: float  # an hour boundary; data runs from now - 3 days to now
    series: tuple[Series, ...]


def build_series(now: float) -> tuple[Series, ...]:
    t0, t1 = now - 3 * DAY, now
    return (
        # Deployment web: two live replicas, the second twice the first.
        Series("shop", "web-7d9c6b5f4-aaaaa", "app", "prod", web_a_cores, lambda h: (100 + h) * MI, t0, t1),
        Series("shop", "web-7d9c6b5f4-bbbbb", "app", "prod", lambda h: 2 * web_a_cores(h), lambda h: (200 + h) * MI, t0, t1),
        # cAdvisor's pod-level cgroup series (container="") must not be counted again.
        Series("shop", "web-7d9c6b5f4-aaaaa", "", "prod", lambda h: 5.0, lambda h: 10_000 * MI, t0, t1),
        # The same pod name in another cluster of the same (managed) Prometheus.
        Series("shop", "web-7d9c6b5f4-aaaaa", "app", "staging", lambda h: 1.0, lambda h: 5000 * MI, t0, t1),
        # StatefulSet db: two containers, summed per pod.
        Series("shop", "db-0", "db", "prod", db_cores, lambda h: 1024 * MI + h * MI, t0, t1),
        Series("shop", "db-0", "sidecar", "prod", lambda h: 0.05, lambda h: 10 * MI, t0, t1),
        # Deployment api: one live pod and one of an older revision, gone since, 30 h to 26 h ago.
        Series("shop", "api-6b6b6b6b6-qqqqq", "app", "prod", lambda h: 0.2, lambda h: 300 * MI, t0, t1),
        Series("shop", "api-5c5c5c5c5-zzzzz", "app", "prod", lambda h: 0.2, lambda h: 300 * MI, now - 30 * HOUR, now - 26 * HOUR - 1800),
        # A pod of no known workload.
        Series("shop", "orphan-x1y2z", "app", "prod", lambda h: 0.3, lambda h: 50 * MI, t0, t1),
    )  # fmt: skip


def openmetrics(series: tuple[Series, ...]) -> str:
    def labels(s: Series) -> str:
        return f'namespace="{s.namespace}",pod="{s.pod}",container="{s.container}",cluster="{s.cluster}"'

    lines = ["# TYPE container_cpu_usage_seconds counter"]
    for s in series:
        total, t = 0.0, s.start
        while t <= s.end:
            lines.append(f"container_cpu_usage_seconds_total{{{labels(s)}}} {total!r} {int(t)}")
            total += s.cores(hour_of_day(t)) * 60
            t += 60
    lines.append("# TYPE container_memory_working_set_bytes gauge")
    for s in series:
        t = s.start
        while t <= s.end:
            lines.append(f"container_memory_working_set_bytes{{{labels(s)}}} {s.memory(hour_of_day(t))!r} {int(t)}")
            t += 60
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("prometheus")
    now = float(int(time.time()) // HOUR * HOUR)
    series = build_series(now)
    data = root / "data.om"
    data.write_text(openmetrics(series))
    with prometheus_on(data, root) as url:
        yield Server(url, now, series)


def cluster_snapshot(now: float) -> ClusterSnapshot:
    rs_web = make_controller("ReplicaSet", "web-7d9c6b5f4", "shop", owner=owner_ref("Deployment", "web"))
    rs_api = make_controller("ReplicaSet", "api-6b6b6b6b6", "shop", owner=owner_ref("Deployment", "api"))
    pods = [
        make_pod("web-7d9c6b5f4-aaaaa", "shop", owner_kind="ReplicaSet", owner_name="web-7d9c6b5f4"),
        make_pod("web-7d9c6b5f4-bbbbb", "shop", owner_kind="ReplicaSet", owner_name="web-7d9c6b5f4"),
        make_pod("db-0", "shop", owner_kind="StatefulSet", owner_name="db"),
        make_pod("api-6b6b6b6b6-qqqqq", "shop", owner_kind="ReplicaSet", owner_name="api-6b6b6b6b6"),
    ]
    return ClusterSnapshot.create(now=now, nodes=[make_node("n1")], pods=pods, controllers=[rs_web, rs_api])


def ideal(now: float, days: float, pods: list[tuple[str, Callable[[int], float], Callable[[int], float]]]) -> Any:
    """The profiles the queries should give for live pods over ``days``: at instant t, the CPU
    rate over (t − 5m, t] is the cores of the hour of t − 1 s, memory the gauge at t."""
    samples = []
    t = now - days * DAY
    while t < now:
        for key, cores, memory in pods:
            samples.append((key, t, cores(hour_of_day(t - 1)) * 1000, memory(hour_of_day(t))))
        t += 300
    return build_profiles(samples, now, days)


def assert_profiles_close(got: Any, want: Any) -> None:
    for field in ("cpu_mean", "cpu_std", "cpu_peak", "memory_mean", "memory_std", "memory_peak"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-6, abs=1e-6), field
    assert got.cpu_samples == want.cpu_samples and got.memory_samples == want.memory_samples


def test_profiles_from_a_real_prometheus(prometheus: Server) -> None:
    now, days = prometheus.now, 2.0
    cfg = ScalerConfig(history="prometheus", prometheus_url=prometheus.url, history_days=days,
                       prometheus_selector='cluster="prod"')  # fmt: skip
    profiles = load_profiles(cfg, cluster_snapshot(now), now)
    assert set(profiles) == {"shop/Deployment/web", "shop/StatefulSet/db", "shop/Deployment/api"}  # no orphan

    # Two replicas pooled per hour (one replica's profile), container="" and staging left out.
    web = ideal(now, days, [
        ("w", web_a_cores, lambda h: (100 + h) * MI),
        ("w", lambda h: 2 * web_a_cores(h), lambda h: (200 + h) * MI),
    ])["w"]  # fmt: skip
    assert_profiles_close(profiles["shop/Deployment/web"], web)
    # 12:05 … 12:55 see hour 12 (220m and 440m per replica), 12:00 still sees hour 11's rate.
    assert profiles["shop/Deployment/web"].cpu_mean[12] == pytest.approx((11 * 330 + 315) / 12)
    assert sum(profiles["shop/Deployment/web"].cpu_samples) == 2 * days * 288  # 2 pods, 5-minute steps

    # Containers summed per pod.
    db = ideal(now, days, [("d", lambda h: db_cores(h) + 0.05, lambda h: 1034 * MI + h * MI)])["d"]
    assert_profiles_close(profiles["shop/StatefulSet/db"], db)
    assert profiles["shop/StatefulSet/db"].cpu_peak[9] == pytest.approx(550.0)

    # The gone api pod of an older revision counts for Deployment api in the hours it ran.
    api = profiles["shop/Deployment/api"]
    ran = {hour_of_day(now - 30 * HOUR + k * HOUR) for k in range(4)}  # 3.5 hours from 30 h ago
    for h in range(24):
        live_only = 2 * 12  # 2 days × 12 five-minute instants
        assert (api.cpu_samples[h] > live_only) == (h in ran), h
    assert max(api.cpu_peak) == pytest.approx(200.0)


def test_window_and_selector_on_a_real_prometheus(prometheus: Server) -> None:
    now = prometheus.now
    snap = cluster_snapshot(now)
    one_day = fetch_samples(prometheus.url, snap, now, 1.0, selector='cluster="prod"')
    assert min(t for _k, t, _c, _m in one_day) == now - DAY
    assert max(t for _k, t, _c, _m in one_day) == now - 300
    # Without the cluster matcher the staging series of web-a adds into the same pod.
    everything = build_profiles(fetch_samples(prometheus.url, snap, now, 1.0), now, 1.0)
    prod = build_profiles(one_day, now, 1.0)
    assert prod["shop/Deployment/web"].cpu_peak[3] == pytest.approx(2 * web_a_cores(3) * 1000)  # replica b
    assert everything["shop/Deployment/web"].cpu_peak[3] == pytest.approx((web_a_cores(3) + 1.0) * 1000)  # a + staging
    assert everything["shop/StatefulSet/db"] == prod["shop/StatefulSet/db"]


def test_errors_from_a_real_prometheus(prometheus: Server) -> None:
    with PrometheusClient(prometheus.url) as c, pytest.raises(HistoryError, match=r"HTTP 400: bad_data: .*parse error"):
        c.query_range("sum(", prometheus.now - 3600, prometheus.now, 300)
    with PrometheusClient(prometheus.url + "/nope") as c, pytest.raises(HistoryError, match="HTTP 404"):
        c.query_range("up", prometheus.now - 3600, prometheus.now, 300)


def test_background_profiles_refresh_hourly_and_keep_the_last_good(prometheus: Server) -> None:
    now = prometheus.now
    snap = cluster_snapshot(now)
    cfg = ScalerConfig(history="prometheus", prometheus_url=prometheus.url, history_days=1.0)
    history = HistoryRefresher(cfg, clock=lambda: now)
    assert history.attach(snap, now).workload_profiles == {}  # nothing loaded yet: no wait, no profiles
    history.refresh_due(now)
    first = history.attach(snap, now).workload_profiles
    assert first and history.profiles_state.loaded_at == now
    history.config = cfg.model_copy(update={"prometheus_url": "http://127.0.0.1:1"})
    history.refresh_due(now + 60)  # within the hour: no fetch at all
    assert history.profiles_state.attempted_at == now and history.attach(snap, now + 60).workload_profiles is first
    history.refresh_due(now + 3600)  # the fetch fails: the last good profiles stay
    assert history.attach(snap, now + 3600).workload_profiles is first
    assert "unreachable" in history.profiles_state.last_error and history.profiles_state.failures == 1
    status = history.status(now + 3600)["profiles"]
    assert status["status"] == "Failing" and "unreachable" in status["lastError"]
    assert not math.isnan(first["shop/StatefulSet/db"].cpu_mean[0])


@pytest.mark.parametrize(
    ("key", "value"),
    [("history", "influx"), ("history-days", 0), ("history-days", -1), ("oversell-rate", 0), ("oversell-rate", 1.01),
     ("portrait-cpu-weight", -1), ("prometheus-selector", 'cluster="a"}')],
)  # fmt: skip
def test_history_flags_are_validated(key: str, value: object) -> None:
    from scaler.config import ConfigError

    with pytest.raises(ConfigError, match=key):
        ScalerConfig.from_mapping({key: value})


def test_history_flags_parse() -> None:
    c = ScalerConfig.from_mapping({"history": "prometheus", "prometheus-url": "http://p:9090", "history-days": "14"})
    assert (c.history, c.prometheus_url, c.history_days, c.oversell_rate) == ("prometheus", "http://p:9090", 14.0, 1.0)
