"""Google Application Default Credentials for Cloud Monitoring's PromQL endpoint, with the token
endpoint on loopback: ``scaler history export`` runs as a process whose metadata server is the
loopback fake (``GCE_METADATA_HOST`` and ``GCE_METADATA_IP``, as in a GKE pod with Workload
Identity). The token is fetched, sent with every query, refreshed before it expires, and never
printed or stored; missing credentials and a refused refresh are one line, exit 2.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.prometheus_api import FakePrometheus, RecordedRequest, grid, matrix
from ports import free_port

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_100
STEP = 300


@pytest.fixture
def prom() -> Iterator[FakePrometheus]:
    def answer(req: RecordedRequest) -> Any:
        if req.path.endswith("/label/__name__/values"):
            return {"status": "success", "data": ["kubernetes_io:container_cpu_core_usage_time"]}
        value = "0.25" if "cpu" in req.query.get("query", "") else "1073741824"
        return matrix(({"namespace_name": "shop", "pod_name": "web-0"}, [(t, value) for t in grid(req)]))

    with FakePrometheus(answer) as p:
        yield p


def export(prom: FakePrometheus, tmp_path: Path, *extra: str, metadata: str | None = None) -> subprocess.CompletedProcess[str]:
    """``scaler history export`` of GKE system metrics over 6 hours (a few windows, two queries
    each), in a process whose metadata server is ``metadata`` (default: the fake)."""
    host = metadata or prom.host
    env = {**os.environ, "GCE_METADATA_HOST": host, "GCE_METADATA_IP": host, "CLOUDSDK_CONFIG": str(tmp_path),
           "HOME": str(tmp_path), "NO_PROXY": "*"}  # fmt: skip
    env.pop("GOOGLE_APPLICATION_CREDENTIALS", None)
    argv = [sys.executable, "-m", "scaler.cli", "history", "export", "--prometheus-url", prom.url,
            "--prometheus-metrics", "gke-system", "--from", str(T0), "--to", str(T0 + 6 * 3600),
            "--out", str(tmp_path / "u.parquet"), *extra]  # fmt: skip
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def queries(prom: FakePrometheus) -> list[RecordedRequest]:
    return [r for r in prom.requests if r.path.startswith("/api/v1/")]


def token_fetches(prom: FakePrometheus) -> list[RecordedRequest]:
    return [r for r in prom.requests if r.path.endswith("/token")]


def test_the_token_is_fetched_sent_and_never_printed_or_stored(prom: FakePrometheus, tmp_path: Path) -> None:
    proc = export(prom, tmp_path, "--prometheus-auth", "google")
    assert proc.returncode == 0, proc.stderr
    assert len(token_fetches(prom)) == 1, "an hour-long token serves every query"
    assert len(queries(prom)) > 2 and {r.headers.get("authorization") for r in queries(prom)} == {"Bearer token-1"}
    assert token_fetches(prom)[0].headers.get("metadata-flavor") == "Google"
    written = proc.stdout + proc.stderr + (tmp_path / "u.parquet").read_bytes().decode("latin-1")
    assert "token-1" not in written


def test_a_token_is_refreshed_before_it_expires(prom: FakePrometheus, tmp_path: Path) -> None:
    """Tokens that expire within google-auth's refresh margin are replaced before the next
    query: each query goes out with a fresh one, none with an expired one."""
    prom.token_lifetime = 60
    proc = export(prom, tmp_path, "--prometheus-auth", "google")
    assert proc.returncode == 0, proc.stderr
    sent = [r.headers.get("authorization") for r in queries(prom)]
    assert sent == [f"Bearer token-{i}" for i in range(1, len(sent) + 1)]
    assert len(token_fetches(prom)) == len(sent)
    written = proc.stdout + proc.stderr + (tmp_path / "u.parquet").read_bytes().decode("latin-1")
    assert "token-" not in written


def test_without_credentials_it_says_how_to_get_them(prom: FakePrometheus, tmp_path: Path) -> None:
    closed = f"127.0.0.1:{free_port()}"  # no metadata server, no gcloud file, no variable
    proc = export(prom, tmp_path, "--prometheus-auth", "google", metadata=closed)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert "no Google Application Default Credentials" in proc.stderr
    assert "gcloud auth application-default login" in proc.stderr and "roles/monitoring.viewer" in proc.stderr
    assert queries(prom) == [], "nothing is asked without credentials"


def test_a_refused_refresh_is_one_line_without_secrets(prom: FakePrometheus, tmp_path: Path) -> None:
    prom.fail(403, times=None, body={"error": "access_denied"}, path="/computeMetadata/v1/instance/service-accounts")
    proc = export(prom, tmp_path, "--prometheus-auth", "google")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"prometheus at {prom.url}: Google credentials: cannot get an access token" in proc.stderr
    assert "token-" not in proc.stderr and not (tmp_path / "u.parquet").exists()


def test_an_auth_file_and_google_credentials_exclude_each_other(prom: FakePrometheus, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("file-token\n")
    proc = export(prom, tmp_path, "--prometheus-auth", "google", "--prometheus-auth-file", str(token))
    assert proc.returncode == 2 and "--prometheus-auth-file is read only with --prometheus-auth auto" in proc.stderr
    proc = export(prom, tmp_path, "--prometheus-auth-file", str(token))  # auto: the file, no Google credentials
    assert proc.returncode == 0, proc.stderr
    assert token_fetches(prom) == [] and {r.headers.get("authorization") for r in queries(prom)} == {"Bearer file-token"}


def test_the_history_role_holds_what_the_queries_need() -> None:
    """deploy/gke/iam-role-history.yaml grants exactly the permission Cloud Monitoring's PromQL
    API checks, and the install guide creates and binds it."""
    import yaml

    from scaler.history.google_auth import HISTORY_IAM_PERMISSIONS, MONITORING_READ_SCOPE

    role = yaml.safe_load((ROOT / "deploy" / "gke" / "iam-role-history.yaml").read_text())
    assert tuple(role["includedPermissions"]) == HISTORY_IAM_PERMISSIONS == ("monitoring.timeSeries.list",)
    assert MONITORING_READ_SCOPE == "https://www.googleapis.com/auth/monitoring.read"
    guide = (ROOT / "docs" / "getting-started" / "install-gke.md").read_text()
    assert "--file deploy/gke/iam-role-history.yaml" in guide and "roles/monitoring.viewer" in guide
