"""The HTML replay report renders in a real browser: headless Chromium (Debian's ``chromium``,
installed by ``make test-deps``) loads the file offline, runs plotly, and the DOM it dumps holds
the summary table and every chart's SVG. Skipped (saying why) where Chromium is missing."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_replay import DAY1, _bundled_trace, _run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make test-deps installs Debian's chromium)"
)


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=20000",
            *args,
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_html_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    trace = _bundled_trace(tmp_path, hours=2)
    page = tmp_path / "replay.html"
    code = _run_cli(
        ["--snapshot", DAY1, "--trace", str(trace), "--policies", "ca-usage,scaler", "-o", "html", "--out", str(page), "-q"]
    )
    assert code == 0
    text = page.read_text()
    assert "<script src=" not in text  # self-contained: plotly.js is inlined, nothing is fetched
    assert "plotly.js" in text

    dom = _chromium(tmp_path / "profile-dom", "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    html = dom.stdout.decode()
    # plotly replaced each chart's empty div with its rendered SVG layers.
    charts = re.findall(r'<div[^>]*class="[^"]*js-plotly-plot', html)
    assert len(charts) == 5
    assert html.count('class="main-svg"') >= 5
    assert "Nodes over time" in html and "Cumulative cost" in html and "Overload" in html
    # Each title is a heading above its chart, clear of plotly's mode bar (which sits in the
    # chart's top margin): no title inside the plots.
    assert '<h2 class="chart-title">Nodes over time</h2>' in html and 'class="gtitle"' not in html
    table = html[html.index('<table id="summary"') : html.index("</table>")]
    for name in ("ca-usage", "scaler", "none (baseline)"):
        assert f">{name}</td>" in table

    shot = tmp_path / "shot.png"
    res = _chromium(
        tmp_path / "profile-shot",
        "--hide-scrollbars",
        "--window-size=1400,1500",
        f"--screenshot={shot}",
        page.as_uri(),
    )
    assert res.returncode == 0 and shot.exists()
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
