"""`scaler dry-run --cloud-provider gke`: the node-pool limits the controller reads from GKE, read
by a workstation dry-run too (loopback Kubernetes and GCE fakes, real HTTP)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_cluster import E2ECluster, iso

from scaler.cli import main


def _dry_run(
    capsys: pytest.CaptureFixture[str], c: E2ECluster, kubeconfig: Path, *argv: str
) -> dict[str, Any]:
    code = main(["dry-run", "--kubeconfig", str(kubeconfig), "--now", iso(c.clock()), "-o", "json", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _verdicts(report: dict[str, Any], names: list[str]) -> dict[str, str]:
    return {
        n["name"]: n["status"] if n["removable"] else n["reason"]
        for n in report["nodes"]
        if n["name"] in names
    }


def test_dry_run_reads_the_pools_min_size_from_gke_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # pool-a: minNodeCount 2 per zone, 2 nodes per zone; the two underused nodes share a zone.
    with E2ECluster(tmp_path, min_per_zone=2) as c:
        monkeypatch.setenv("SCALER_GCE_API_ENDPOINT", c.gce.url)
        kubeconfig = c.kube.write_kubeconfig(tmp_path / "kubeconfig")
        # Without --cloud-provider: limits only from --nodes (none): the underused nodes go.
        plain = _dry_run(capsys, c, kubeconfig)
        assert "removable-drain" in _verdicts(plain, c.underused).values()
        assert not c.gce.requests, "a dry-run reads GKE only when asked"
        # With it: the MIG's minimum from GKE, as scaler run applies it.
        gke = _dry_run(
            capsys, c, kubeconfig, "--cloud-provider", "gke",
            "--gke-project", "acme", "--gke-location", "europe-west1", "--gke-cluster", "prod",
        )  # fmt: skip
        assert set(_verdicts(gke, c.underused).values()) == {"NodeGroupMinSizeReached"}
        assert "node-pool limits from GKE cluster prod" in gke["source"]
        assert all(r.method == "GET" for r in c.gce.requests), "read-only"
        # An explicit --nodes entry for the pool wins over GKE's limits, as in scaler run.
        explicit = _dry_run(capsys, c, kubeconfig, "--cloud-provider", "gke", "--gke-project", "acme",
                            "--gke-location", "europe-west1", "--gke-cluster", "prod", "--nodes", "0:5:pool-a")  # fmt: skip
        assert _verdicts(explicit, c.underused) == _verdicts(plain, c.underused)


def test_the_cluster_comes_from_a_gcloud_context_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with E2ECluster(tmp_path, min_per_zone=2) as c:
        monkeypatch.setenv("SCALER_GCE_API_ENDPOINT", c.gce.url)
        kubeconfig = c.kube.write_kubeconfig(tmp_path / "kubeconfig")
        doc = yaml.safe_load(kubeconfig.read_text())
        doc["contexts"][0]["name"] = doc["current-context"] = "gke_acme_europe-west1_prod"
        kubeconfig.write_text(yaml.safe_dump(doc))
        gke = _dry_run(capsys, c, kubeconfig, "--cloud-provider", "gke")
        assert set(_verdicts(gke, c.underused).values()) == {"NodeGroupMinSizeReached"}


def test_gke_refusing_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with E2ECluster(tmp_path) as c:
        monkeypatch.setenv("SCALER_GCE_API_ENDPOINT", c.gce.url)
        kubeconfig = c.kube.write_kubeconfig(tmp_path / "kubeconfig")
        code = main(["dry-run", "--kubeconfig", str(kubeconfig), "--cloud-provider", "gke", "--gke-project", "acme",
                     "--gke-location", "europe-west1", "--gke-cluster", "other"])  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 2 and out == ""
        lines = err.strip().splitlines()
        assert (
            len(lines) == 1
            and lines[0].startswith("scaler: error: --cloud-provider gke:")
            and "other" in lines[0]
        )


def test_a_config_file_rendered_from_the_defaults_does_not_make_a_dry_run_read_gke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # config/default.yaml holds `cloud-provider: gke` for scaler run; a dry-run with it reads no cloud.
    root = Path(__file__).resolve().parent.parent
    with E2ECluster(tmp_path, min_per_zone=2) as c:
        monkeypatch.setenv("SCALER_GCE_API_ENDPOINT", c.gce.url)
        kubeconfig = c.kube.write_kubeconfig(tmp_path / "kubeconfig")
        report = _dry_run(capsys, c, kubeconfig, "--config", str(root / "config" / "default.yaml"))
        assert "removable-drain" in _verdicts(report, c.underused).values()
        assert not c.gce.requests
