"""Prometheus answers are validated at the edge, never trusted: each crafted answer below, served
by a loopback Prometheus the test starts (:class:`fakes.prometheus_api.FakePrometheus`, real
HTTP), ends ``scaler history export`` and the controller's history path with one line naming the
query and what was wrong (exit status 2 on the command line), never with a traceback, a wrong
attribution or a negative usage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from builders import make_node, make_pod
from fakes.prometheus_api import FakePrometheus, RecordedRequest, Response, grid, matrix

from scaler.cli import main
from scaler.config import ScalerConfig
from scaler.history.prometheus import HistoryError, PrometheusClient, fetch_samples
from scaler.history.source import load_profiles
from scaler.model.snapshot import ClusterSnapshot

T0 = 1_700_000_100.0  # a multiple of 300
STEP = 300.0
T1 = T0 + 3 * STEP


def usage_answer(
    cpu: Callable[[RecordedRequest], Any], memory: Callable[[RecordedRequest], Any] | None = None
) -> Callable[[RecordedRequest], Any]:
    """Answer the CPU query with ``cpu(req)`` and the memory query with ``memory(req)`` (default:
    1 GiB for pods a-0 and b-0 at every instant)."""

    def default_memory(req: RecordedRequest) -> Any:
        pts = [(t, "1073741824") for t in grid(req)]
        return matrix(({"namespace": "ns", "pod": "a-0"}, pts), ({"namespace": "ns", "pod": "b-0"}, pts))

    def answer(req: RecordedRequest) -> Any:
        if req.path.endswith("/label/__name__/values"):
            return {"status": "success", "data": ["container_cpu_usage_seconds_total"]}
        q = req.query.get("query", "")
        return cpu(req) if "cpu" in q else (memory or default_memory)(req)

    return answer


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    with FakePrometheus() as p:
        yield p


def export(prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    out = tmp_path / "usage.parquet"
    code = main(["history", "export", "--prometheus-url", prom.url, "--from", str(T0), "--to", str(T1),
                 "--step", "5m", "--out", str(out), "-q"])  # fmt: skip
    o, e = capsys.readouterr()
    assert not out.exists() or code == 0
    return code, o, e


def test_a_sample_one_step_past_the_window_is_refused_not_given_to_another_pod(
    prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def cpu(req: RecordedRequest) -> Any:
        pts = [(t, "0.5") for t in grid(req)]
        past = (float(req.query["end"]) + STEP, "7.77")  # one step past the window
        return matrix(
            ({"namespace": "ns", "pod": "a-0"}, [*pts, past]), ({"namespace": "ns", "pod": "b-0"}, pts)
        )

    prom.answer = usage_answer(cpu)
    code, out, err = export(prom, tmp_path, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(
        f"scaler: error: prometheus at {prom.url}: bad answer to sum by (namespace, pod) (rate(container_cpu"
    )
    assert "series {namespace='ns',pod='a-0'}: timestamp" in err and "is outside the window" in err


def pts(req: RecordedRequest, value: Any = "0.5") -> list[tuple[Any, Any]]:
    return [(t, value) for t in grid(req)]


CRAFTED: dict[str, tuple[Callable[[RecordedRequest], Any], str]] = {
    "duplicate timestamps": (
        lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, [pts(r)[0], *pts(r)])),
        "timestamps not strictly increasing",
    ),
    "out of order": (
        lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, list(reversed(pts(r))))),
        "timestamps not strictly increasing",
    ),
    "NaN": (lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, pts(r, "NaN"))), "value 'NaN' at"),
    "+Inf": (lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, pts(r, "+Inf"))), "value '+Inf' at"),
    "negative": (lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, pts(r, "-5000"))), "negative value '-5000'"),
    "not a number": (lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, pts(r, "lots"))), "value 'lots' is not a number"),
    "boolean timestamps": (
        lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, [(True, "1")])),
        "malformed series: Expected `float`, got `bool`",
    ),
    "off the step grid": (
        lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, [(t + 7, "1") for t in grid(r)])),
        "is off the step grid",
    ),
    "a label that is not a string": (
        lambda r: matrix(({"namespace": "ns", "pod": 7}, pts(r))),
        "malformed series: Expected `str`, got `int`",
    ),
    "two series alike": (
        lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, pts(r)), ({"pod": "a-0", "namespace": "ns"}, pts(r))),
        "two series {namespace='ns',pod='a-0'}",
    ),
    "deeply nested JSON": (
        lambda r: Response(200, b'{"status":"success","data":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        "nested too deeply",
    ),
    "deeply nested series": (
        lambda r: Response(200, b'{"status":"success","data":{"resultType":"matrix","result":'
                           + b"[" * 100_000 + b"]" * 100_000 + b"}}"),
        "nested too deeply",
    ),
}  # fmt: skip


@pytest.mark.parametrize("defect", list(CRAFTED))
def test_crafted_answers_end_the_export_with_one_line_naming_the_query(
    prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str], defect: str
) -> None:
    cpu, message = CRAFTED[defect]
    prom.answer = usage_answer(cpu)
    code, out, err = export(prom, tmp_path, capsys)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"scaler: error: prometheus at {prom.url}: ")
    assert message in err
    assert "container_cpu_usage_seconds_total" in err  # the query
    assert "Traceback" not in err


def snapshot() -> ClusterSnapshot:
    pods = [make_pod("a-0", "ns", owner_kind="StatefulSet", owner_name="a"),
            make_pod("b-0", "ns", owner_kind="StatefulSet", owner_name="b")]  # fmt: skip
    return ClusterSnapshot.create(now=T1 + STEP, nodes=[make_node("n1")], pods=pods)


def test_the_controllers_history_path_refuses_negative_usage(prom: FakePrometheus) -> None:
    def cpu(req: RecordedRequest) -> Any:
        values = ["-5000.0", "-1e12"]
        return matrix(
            ({"namespace": "ns", "pod": "a-0"}, [(t, values[i % 2]) for i, t in enumerate(grid(req))])
        )

    prom.answer = usage_answer(cpu)
    cfg = ScalerConfig(history="prometheus", prometheus_url=prom.url, history_days=1.0)
    with pytest.raises(HistoryError) as e:
        load_profiles(cfg, snapshot(), T1 + STEP)
    text = str(e.value)
    assert (
        "\n" not in text
        and "negative value '-5000.0'" in text
        and "container_cpu_usage_seconds_total" in text
    )


@pytest.mark.parametrize(
    "defect", ["NaN", "boolean timestamps", "deeply nested JSON", "duplicate timestamps"]
)
def test_the_dry_run_with_history_exits_2_on_a_crafted_answer(
    prom: FakePrometheus, capsys: pytest.CaptureFixture[str], defect: str
) -> None:
    cpu, message = CRAFTED[defect]
    prom.answer = usage_answer(cpu)
    example = Path(__file__).resolve().parents[1] / "scaler" / "examples" / "bitbrains-gke-day1"
    code = main(["dry-run", "--snapshot", str(example), "--history", "prometheus", "--prometheus-url", prom.url,
                 "--history-days", "1"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err


def test_series_count_and_answer_size_are_bounded(prom: FakePrometheus) -> None:
    prom.answer = lambda r: matrix(*(({"namespace": "ns", "pod": f"p-{i}"}, pts(r)) for i in range(5)))
    with (
        PrometheusClient(prom.url, max_series=4) as c,
        pytest.raises(HistoryError, match="5 series, over the bound of 4"),
    ):
        c.query_range("up", T0, T1, STEP)
    with (
        PrometheusClient(prom.url, max_bytes=100) as c,
        pytest.raises(HistoryError, match="over the cap of 100 bytes"),
    ):
        c.query_range("up", T0, T1, STEP)
    with PrometheusClient(prom.url) as c:
        assert len(c.query_range("up", T0, T1, STEP)) == 5


def test_fetch_samples_keeps_valid_answers_whole(prom: FakePrometheus) -> None:
    """The checks refuse nothing a well-formed answer holds."""
    prom.answer = usage_answer(lambda r: matrix(({"namespace": "ns", "pod": "a-0"}, pts(r, "0.25"))))
    samples = fetch_samples(prom.url, snapshot(), T1 + STEP, 1.0)
    cpu = [(k, t, c) for k, t, c, _ in samples if c == c]
    assert cpu == [("ns/StatefulSet/a", T1 + STEP - 86400 + i * STEP, 250.0) for i in range(288)]
