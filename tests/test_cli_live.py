"""`scaler dry-run` and `scaler snapshot` against the loopback fake API server (real HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes.kube_api import FakeKubeAPI

from scaler.cli import main
from scaler.sources.files import load_objects
from scaler.sources.kube import READ_CALLS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "scaler" / "examples" / "bitbrains-gke-day1"
NOW = "2026-11-04T13:59:48Z"


@pytest.fixture(scope="module")
def fake() -> Any:
    with FakeKubeAPI() as api:
        api.load_objects(load_objects([EXAMPLE]))
        yield api


def report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = main(["dry-run", *argv, "--now", NOW, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def verdicts(r: dict[str, Any]) -> list[tuple[str, str, str, list[tuple[str, str]]]]:
    return [(n["name"], n["status"], n["reason"], [(m["pod"], m["destination"]) for m in n["moves"]]) for n in r["nodes"]]


def test_live_dry_run_equals_offline_and_lists_metrics_once(
    fake: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    fake.requests.clear()
    live = report(capsys, "--kubeconfig", str(kubeconfig), "--context", "fake")
    offline = report(capsys, "--snapshot", str(EXAMPLE))
    assert live["source"] == "live cluster"
    assert verdicts(live) == verdicts(offline)
    assert len(fake.requests_to("/apis/metrics.k8s.io/v1beta1/nodes")) == 1
    assert len(fake.requests_to("/apis/metrics.k8s.io/v1beta1/pods")) == 1
    assert all(r.method == "GET" for r in fake.requests), "the dry-run is read-only"
    # One LIST per kind (paginated at 500): never a request per node or per pod.
    assert len(fake.requests) <= len(READ_CALLS) + 2


def test_snapshot_command_round_trips(fake: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    out = tmp_path / "snap"
    assert main(["snapshot", "--kubeconfig", str(kubeconfig), "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().err
    assert {p.name for p in out.iterdir()} >= {"nodes.json", "pods.json", "node-metrics.json", "pod-metrics.json"}
    assert verdicts(report(capsys, "--snapshot", str(out))) == verdicts(report(capsys, "--snapshot", str(EXAMPLE)))
    # A second run refuses to overwrite, with one line and exit 2.
    assert main(["snapshot", "--kubeconfig", str(kubeconfig), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0]


def test_missing_metrics_api_is_one_line_exit_2(
    fake: FakeKubeAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
    fake.fail("/apis/metrics.k8s.io", 404, times=1)
    try:
        code = main(["dry-run", "--kubeconfig", str(kubeconfig), "--now", NOW])
    finally:
        fake.reset_faults()
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "metrics.k8s.io" in lines[0]
