"""Command-line behaviour: bad input exits 2 with one line, config precedence, fallbacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from scaler.cmdline import bundled_example
from scaler.config import (
    DRY_RUN_GROUPS,
    DRY_RUN_KEYS,
    FLAG_GROUPS,
    FLAG_HELP,
    ScalerConfig,
    flag_name,
    load_config_file,
    render_default_config,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "scaler" / "examples" / "bitbrains-gke-day1")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(err: str, *needles: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("scaler: error:"), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def json_report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code, out, err = run(capsys, "dry-run", *argv, "-o", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("argv", "needles"),
    [
        (["dry-run", "--no-such-flag"], ["--no-such-flag"]),
        (["dry-run", "--snapshot", EXAMPLE, "--scale-down-utilization-threshold", "1.5"], ["1.5", "scale-down-utilization-threshold"]),
        (["dry-run", "--snapshot", EXAMPLE, "--target-cpu-usage", "abc"], ["abc", "target-cpu-usage"]),
        (["dry-run", "--snapshot", EXAMPLE, "--max-metrics-age", "10 minutes"], ["10 minutes"]),
        (["dry-run", "--snapshot", EXAMPLE, "--nodes", "5:1:default-pool"], ["5:1:default-pool"]),
        (["dry-run", "--snapshot", EXAMPLE, "--skip-nodes-with-local-storage=maybe"], ["maybe"]),
        (["dry-run", "--snapshot", EXAMPLE, "--utilization-source", "guess"], ["guess"]),
        (["dry-run", "--snapshot", EXAMPLE, "--filter-plugins", "NoSuchPlugin"], ["NoSuchPlugin"]),
        (["dry-run", "--snapshot", "/nonexistent/snap"], ["/nonexistent/snap"]),
        (["dry-run", "--snapshot", EXAMPLE, "--now", "yesterday"], ["yesterday"]),
        (["dry-run", "--snapshot", EXAMPLE, "--config", "/nonexistent/cfg.yaml"], ["/nonexistent/cfg.yaml"]),
        (["dry-run", "--output", "xml"], ["xml"]),
        (["frobnicate"], ["frobnicate"]),
        # Plugin names are resolved at start, before the cluster is even contacted.
        (["run", "--kubeconfig", "/nonexistent/kubeconfig", "--filter-plugins=Typo"], ["unknown filter plugin 'Typo'"]),
        (["run", "--kubeconfig", "/nonexistent/kubeconfig", "--score-plugins=Typo"], ["unknown score plugin 'Typo'"]),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], needles: list[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    one_line_error(err, *needles)


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc))
    return path


def test_malformed_quantity_names_the_pod_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = json.loads((Path(EXAMPLE) / "pods.json").read_text())
    pods["items"][3]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "12 cores"
    name = pods["items"][3]["metadata"]["name"]
    for f in ("nodes.json", "node-metrics.json"):
        (tmp_path / f).write_bytes((Path(EXAMPLE) / f).read_bytes())
    write(tmp_path / "pods.json", pods)
    code, _, err = run(capsys, "dry-run", "--snapshot", str(tmp_path))
    assert code == 2
    one_line_error(err, name, "12 cores")


def test_object_missing_required_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = json.loads((Path(EXAMPLE) / "nodes.json").read_text())
    del nodes["items"][0]["status"]["allocatable"]
    write(tmp_path / "nodes.json", nodes)
    (tmp_path / "node-metrics.json").write_bytes((Path(EXAMPLE) / "node-metrics.json").read_bytes())
    code, _, err = run(capsys, "dry-run", "--snapshot", str(tmp_path))
    assert code == 2
    one_line_error(err, nodes["items"][0]["metadata"]["name"], "allocatable")


def test_invalid_json_and_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nodes.json").write_text('{"kind": "List", "items": [')
    code, _, err = run(capsys, "dry-run", "--snapshot", str(tmp_path / "nodes.json"))
    assert code == 2
    one_line_error(err, "nodes.json")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("scale-down-utilization-threshold: 0.4\nno-such-key: 1\n")
    code, _, err = run(capsys, "dry-run", "--snapshot", EXAMPLE, "--config", str(cfg))
    assert code == 2
    one_line_error(err, "no-such-key")
    cfg.write_text("- just\n- a list\n")
    code, _, err = run(capsys, "dry-run", "--snapshot", EXAMPLE, "--config", str(cfg))
    assert code == 2
    one_line_error(err, str(cfg))


def test_flags_win_over_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("scale-down-utilization-threshold: 0.3\ntarget-cpu-usage: 0.4\nmax-metrics-age: 5m\n")
    report = json_report(capsys, "--snapshot", EXAMPLE, "--config", str(cfg), "--target-cpu-usage", "0.35")
    flags = report["flags"]
    assert flags["scale-down-utilization-threshold"] == 0.3
    assert flags["target-cpu-usage"] == 0.35
    assert flags["max-metrics-age"] == 300.0


def test_default_config_file_documents_every_key_with_its_default() -> None:
    path = ROOT / "config" / "default.yaml"
    assert path.read_text() == render_default_config(), (
        "regenerate with scaler.config.render_default_config()"
    )
    data = load_config_file(path)
    assert {k.replace("-", "_") for k in data} == set(ScalerConfig.model_fields)
    assert ScalerConfig.from_mapping(data) == ScalerConfig()
    text = path.read_text()
    for key in ScalerConfig.model_fields:
        assert key in FLAG_HELP, f"{key} has no help text"
        assert f"\n{key.replace('_', '-')}:" in text
    assert yaml.safe_load(text) is not None


def test_every_engine_key_is_a_dry_run_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["dry-run", "--help"])
    out = capsys.readouterr().out
    for group in DRY_RUN_GROUPS:
        for key in FLAG_GROUPS[group]:
            flag = flag_name(key)
            if flag is None:
                assert key == "node_pools"
            else:
                assert (flag + " " in out) == (key in DRY_RUN_KEYS), flag


def test_bool_flags_take_go_forms(capsys: pytest.CaptureFixture[str]) -> None:
    r1 = json_report(capsys, "--snapshot", EXAMPLE, "--ignore-daemonsets-utilization")
    r2 = json_report(capsys, "--snapshot", EXAMPLE, "--skip-nodes-with-local-storage=false")
    assert r1["flags"]["ignore-daemonsets-utilization"] is True
    assert r2["flags"]["skip-nodes-with-local-storage"] is False
    blocked = [
        n for n in r2["nodes"] if n["blockingPod"] and n["blockingPod"]["reason"] == "LocalStorageRequested"
    ]
    assert blocked == []


def test_now_defaults_to_metrics_time_and_can_be_overridden(capsys: pytest.CaptureFixture[str]) -> None:
    report = json_report(capsys, "--snapshot", EXAMPLE)
    assert report["generatedAt"] == "2026-11-04T13:59:48Z"  # the NodeMetrics timestamp
    later = json_report(capsys, "--snapshot", EXAMPLE, "--now", "2026-11-04T14:10:00Z")
    # Ten minutes later every NodeMetrics is older than --max-metrics-age: no non-empty node is idle.
    reasons = {n["reason"] for n in later["nodes"] if not n["empty"]}
    assert reasons == {"MetricsUnavailable"}
    assert all(n["metrics"] == "stale" for n in later["nodes"])
    busy = next(n for n in later["nodes"] if not n["empty"])
    assert busy["detail"].startswith("metrics 10m12s old, over --max-metrics-age 2m0s;"), busy["detail"]
    assert main(["dry-run", "--snapshot", EXAMPLE, "--now", "2026-11-04T14:10:00Z"]) == 0
    assert "94 node(s) have NodeMetrics older than --max-metrics-age" in capsys.readouterr().out


def test_nodes_flag_sets_min_size(capsys: pytest.CaptureFixture[str]) -> None:
    report = json_report(capsys, "--snapshot", EXAMPLE, "--nodes", "3:10:highmem-pool")
    highmem = [n for n in report["nodes"] if n["nodeGroup"] == "highmem-pool"]
    assert len(highmem) == 3
    assert {n["reason"] for n in highmem} == {"NodeGroupMinSizeReached"}


def test_requests_source_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    usage = json_report(capsys, "--snapshot", EXAMPLE)
    requests = json_report(capsys, "--snapshot", EXAMPLE, "--utilization-source", "requests")
    u = {n["name"]: n for n in usage["nodes"]}
    for n in requests["nodes"]:
        assert n["utilization"]["source"] == "requests"
        assert n["utilization"]["value"] == pytest.approx(u[n["name"]]["requestUtilization"]["value"])


def test_no_snapshot_and_no_cluster_uses_bundled_example(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "missing")}
    proc = subprocess.run(
        [sys.executable, "-m", "scaler.cli", "dry-run", "-o", "json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "bundled example" in proc.stderr
    report = json.loads(proc.stdout)
    assert report["source"].startswith("bundled example")
    assert report["summary"]["nodes"] == 94
    assert bundled_example().is_dir()


def test_named_but_unreachable_cluster_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "dry-run", "--kubeconfig", str(tmp_path / "missing"))
    assert code == 2 and out == ""
    one_line_error(err, "unreachable")


def test_unreachable_history_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "dry-run", "--snapshot", EXAMPLE, "--history", "prometheus", "--prometheus-url", "http://127.0.0.1:9"
    )
    assert code == 2 and out == ""
    one_line_error(err, "127.0.0.1:9")


def test_gke_cluster_flags_without_the_gke_provider_are_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """A dry-run reads GKE only with ``--cloud-provider gke``: ``--gke-*`` alone would be ignored."""
    for extra in ([], ["--cloud-provider", "kubernetes"]):
        assert main(["dry-run", "--snapshot", EXAMPLE, "--gke-cluster", "prod", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err == "scaler: error: --gke-cluster is read only with --cloud-provider gke (the node-pool limits from GKE)"
