"""Which cluster a command reads: a cluster named anywhere (``--kubeconfig``, ``$KUBECONFIG``,
``~/.kube/config``) that cannot be reached is an error (exit 2, one line, no urllib3 retry
warnings); the bundled example is used only when no cluster is configured at all.

Real processes with a temporary ``HOME`` and ``KUBECONFIG``, and a real loopback port that
nothing listens on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port

ROOT = Path(__file__).resolve().parent.parent


def write_kubeconfig(path: Path, server: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters:\n- name: c\n  cluster: {{server: '{server}'}}\n"
        "contexts:\n- name: c\n  context: {cluster: c, user: u}\n"
        "users:\n- name: u\n  user: {token: t}\n"
    )
    return path


def scaler(home: Path, *argv: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "HOME")
    }
    env["HOME"] = str(home)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [sys.executable, "-m", "scaler.cli", *argv],
        capture_output=True, text=True, env=env, cwd=home, timeout=120, check=False,
    )  # fmt: skip


def one_error_line(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("scaler: error: ")
    assert "Retrying" not in proc.stderr and "urllib3" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.mark.parametrize("where", ["home", "env", "flag"])
def test_an_unreachable_configured_cluster_is_an_error(tmp_path: Path, where: str) -> None:
    port = free_port()  # nothing listens there
    home = tmp_path / "home"
    home.mkdir()
    if where == "home":
        write_kubeconfig(home / ".kube" / "config", f"https://127.0.0.1:{port}")
        proc = scaler(home, "dry-run", "-o", "json")
    elif where == "env":
        kc = write_kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{port}")
        proc = scaler(home, "dry-run", "-o", "json", kubeconfig=kc)
    else:
        kc = write_kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{port}")
        proc = scaler(home, "dry-run", "-o", "json", "--kubeconfig", str(kc))
    one_error_line(proc, "cluster unreachable", f"127.0.0.1:{port}")


def test_snapshot_and_run_too(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    kc = write_kubeconfig(tmp_path / "kc.yaml", f"https://127.0.0.1:{port}")
    one_error_line(scaler(tmp_path, "snapshot", "--out", str(tmp_path / "snap"), kubeconfig=kc), f"127.0.0.1:{port}")
    # The controller configures logging before it connects: still one line, no retry warnings.
    proc = scaler(tmp_path, "run", "--cloud-provider", "kubernetes", kubeconfig=kc)
    one_error_line(proc, f"127.0.0.1:{port}")


def test_the_bundled_example_only_when_no_cluster_is_configured(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = scaler(home, "dry-run", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "no cluster configured" in lines[0] and "bundled example" in lines[0]
    assert json.loads(proc.stdout)["source"] == "bundled example bitbrains-gke-day1"
    # A named context without any kubeconfig names a cluster: an error, not the example.
    one_error_line(scaler(home, "dry-run", "--context", "prod"), "prod")
