"""A password or token never leaves through a URL: credentials in ``--prometheus-url`` (a user
and password, a query string) are refused before anything is asked or written, with a line
that shows the URL redacted and points to ``--prometheus-auth-file``; a credential given the
right way (the auth file) is sent and never printed, logged or stored. Each case greps
everything scaler wrote: stdout, stderr, the log records (debug included, httpx's too), the
Parquet export's metadata and every file of the replay's cache.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.prometheus_api import FakePrometheus, RecordedRequest, grid, matrix

from scaler.cli import main
from scaler.history.export import read_metadata

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "scaler" / "examples" / "bitbrains-gke-day1"
SECRET = "s3cr3t-Pa55"
START = 1793800800 - 3600  # the hour before the bundled snapshot
END = 1793800800
PODS = ("analytics/analytics-svc021-0", "analytics/analytics-job005-gwfpz")


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    def answer(req: RecordedRequest) -> Any:
        if req.path.endswith("/label/__name__/values"):
            return {"status": "success", "data": ["container_cpu_usage_seconds_total"]}
        value = "0.5" if "cpu" in req.query.get("query", "") else "536870912"
        return matrix(*(({"namespace": k.split("/")[0], "pod": k.split("/")[1]}, [(t, value) for t in grid(req)])
                        for k in PODS))  # fmt: skip

    with FakePrometheus(answer) as p:
        yield p


def everything_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    """stdout, stderr, every log record and every file under ``tmp_path`` (the Parquet files'
    bytes include their metadata), as one text."""
    out, err = capsys.readouterr()
    files = [p.read_bytes().decode("latin-1") for p in tmp_path.rglob("*") if p.is_file()]
    return "\n".join([out, err, *(r.getMessage() for r in caplog.records), *files])


REFUSED = {
    "userinfo": "http://scaler:{s}@{host}",
    "query string": "http://{host}/?access_token={s}",
    "fragment": "http://{host}/#{s}",
}


@pytest.mark.parametrize("form", list(REFUSED))
@pytest.mark.parametrize("command", ["export", "replay", "dry-run", "run"])
def test_credentials_in_the_url_are_refused_and_never_shown(
    prom: FakePrometheus,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
    command: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    url = REFUSED[form].format(s=SECRET, host=prom.host)
    window = ["--from", str(START), "--to", str(END)]
    argv = {
        "export": ["history", "export", "--prometheus-url", url, *window, "--out", str(tmp_path / "u.parquet")],
        "replay": ["replay", "--snapshot", str(EXAMPLE), "--prometheus-url", url, *window,
                   "--cache-dir", str(tmp_path / "cache"), "-o", "json"],
        "dry-run": ["dry-run", "--snapshot", str(EXAMPLE), "--history", "prometheus", "--prometheus-url", url],
        "run": ["run", "--kubeconfig", str(tmp_path / "none"), "--history", "prometheus", "--prometheus-url", url],
    }[command]  # fmt: skip
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert "--prometheus-auth-file" in err and f"{prom.host}" in err and "***" in err
    text = "\n".join([out, err, *(r.getMessage() for r in caplog.records)])
    text += "\n".join(p.read_bytes().decode("latin-1") for p in tmp_path.rglob("*") if p.is_file())
    assert SECRET not in text
    assert prom.requests == [], "nothing was asked"


def test_a_config_file_with_credentials_in_the_url_is_refused_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"history: prometheus\nprometheus-url: https://u:{SECRET}@prometheus.example.com\n")
    assert main(["dry-run", "--snapshot", str(EXAMPLE), "--config", str(cfg)]) == 2
    out, err = capsys.readouterr()
    assert SECRET not in out + err and "https://***@prometheus.example.com" in err and err.count("\n") == 1


def test_a_credential_in_the_auth_file_is_sent_and_never_printed_or_stored(
    prom: FakePrometheus, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The same export and replay with the password where it belongs: sent as the header of
    every query, absent from everything written (the Parquet metadata names the URL, the
    queries and the range, no header)."""
    caplog.set_level(logging.DEBUG)
    basic = base64.b64encode(f"scaler:{SECRET}".encode()).decode()
    auth = tmp_path / "auth"
    auth.write_text(f"Authorization: Basic {basic}\n")
    work = tmp_path / "work"
    work.mkdir()
    window = ["--from", str(START), "--to", str(END)]
    out = work / "u.parquet"
    assert main(["history", "export", "--prometheus-url", prom.url, "--prometheus-auth-file", str(auth), *window,
                 "--out", str(out)]) == 0  # fmt: skip
    assert read_metadata(out)["url"] == prom.url
    assert main(["replay", "--snapshot", str(EXAMPLE), "--prometheus-url", prom.url, "--prometheus-auth-file",
                 str(auth), *window, "--cache-dir", str(work / "cache"), "--policies", "seed", "--workers", "1",
                 "-o", "json"]) == 0  # fmt: skip
    assert prom.requests and {r.headers.get("authorization") for r in prom.requests} == {f"Basic {basic}"}
    auth.unlink()  # the one file that holds it on purpose
    written = everything_written(tmp_path, capsys, caplog)
    assert prom.url in written  # the URL is there: the grep reads what was written
    assert SECRET not in written and basic not in written
