"""A real Prometheus on loopback for tests: Debian's ``prometheus`` server started on TSDB blocks
that ``promtool tsdb create-blocks-from openmetrics`` builds from an OpenMetrics text file.

:func:`ensure_prometheus` installs the package when it is missing (``make test-deps`` does it
first) and skips the test, with the reason, only where that cannot be done (not root, or no
apt-get).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from ports import free_port
from waiting import wait_for


def ensure_prometheus() -> None:
    """Install Debian's ``prometheus`` package when ``prometheus``/``promtool`` are missing;
    skip when that is impossible here (not root, or no apt-get)."""
    if shutil.which("prometheus") and shutil.which("promtool"):
        return
    if not shutil.which("apt-get") or os.geteuid() != 0:
        pytest.skip("Debian's prometheus package is not installed and cannot be (needs root and apt-get): "
                    "run `make test-deps` as root")  # fmt: skip
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "prometheus"]
    if subprocess.run(install, env=env, capture_output=True, timeout=600).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True, timeout=300, check=True)
        subprocess.run(install, env=env, capture_output=True, timeout=600, check=True)
    assert shutil.which("prometheus") and shutil.which("promtool")


@contextmanager
def prometheus_on(openmetrics: Path, root: Path) -> Iterator[str]:
    """Build TSDB blocks from ``openmetrics`` under ``root`` and serve them; yields the URL.
    Retention is a century, so old data (a 2013 trace) stays."""
    ensure_prometheus()
    tsdb = root / "tsdb"
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(tsdb)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    config = root / "minimal.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    with _serve(tsdb, config, root) as url:
        yield url


@contextmanager
def prometheus_scraping(targets: list[str], root: Path, interval: str = "1s") -> Iterator[str]:
    """A Prometheus under ``root`` scraping ``/metrics`` of ``targets`` (``host:port``) every
    ``interval`` as job ``scaler``; yields its URL."""
    ensure_prometheus()
    root.mkdir(parents=True, exist_ok=True)
    config = root / "scrape.yml"
    config.write_text(
        f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
        f"scrape_configs:\n  - job_name: scaler\n    static_configs:\n      - targets: {targets!r}\n"
    )
    with _serve(root / "tsdb", config, root) as url:
        yield url


@contextmanager
def _serve(tsdb: Path, config: Path, root: Path) -> Iterator[str]:
    """Run ``prometheus`` on ``tsdb`` with ``config`` until ready; yields its URL, stops it after."""
    port = free_port()
    log_path = root / "prometheus.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            ["prometheus", f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{port}",
             f"--config.file={config}", "--storage.tsdb.retention.time=100y"],
            stdout=log, stderr=subprocess.STDOUT, cwd=root,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        try:

            def ready() -> bool:
                if proc.poll() is not None:
                    raise RuntimeError(f"prometheus exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
                try:
                    return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
                except httpx.HTTPError:
                    return False

            wait_for(ready, 60, "prometheus to become ready", poll=0.2)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
