"""The documentation site: generated reference pages match the code, the troubleshooting page has
every reason, no internal vocabulary in user-facing text, ``mkdocs build --strict`` passes, and
two built pages render in headless Chromium as pages, not error pages."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from scaler import docs as reference
from scaler.drain.rules import BlockingPodReason
from scaler.reasons import UnremovableReason

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_generated_reference_pages_match_the_code() -> None:
    stale = [
        name
        for name, text in reference.generate().items()
        if not (DOCS / "reference" / name).is_file() or (DOCS / "reference" / name).read_text() != text
    ]
    assert not stale, f"stale reference pages {stale}: run python -m scaler.docs"


def test_the_check_mode_names_a_stale_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--out", str(tmp_path)]) == 0
    assert reference.main(["--out", str(tmp_path), "--check"]) == 0
    (tmp_path / "flags.md").write_text("old\n")
    assert reference.main(["--out", str(tmp_path), "--check"]) == 1
    assert "flags.md" in capsys.readouterr().err


def test_the_flags_page_lists_every_flag_of_every_command() -> None:
    from scaler.cli import build_parser

    page = (DOCS / "reference" / "flags.md").read_text()
    parsers = [build_parser()]
    flags: set[str] = set()
    while parsers:
        p = parsers.pop()
        for a in p._actions:
            if hasattr(a, "choices") and isinstance(a.choices, dict):
                parsers += list(a.choices.values())
            elif a.help != "==SUPPRESS==":
                flags |= {o for o in a.option_strings if o.startswith("--") and o not in ("--help", "--version")}
    missing = sorted(f for f in flags if f"`{f}`" not in page)
    assert not missing, missing


def _entries(section: str) -> dict[str, str]:
    """``### `Name``` entries of a ``## section`` of the troubleshooting page, with their text."""
    text = (DOCS / "tasks" / "troubleshooting.md").read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"^### `(\w+)`\n", body, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_troubleshooting_has_one_entry_per_reason_with_meaning_sight_and_fix() -> None:
    nodes, pods = _entries("Node reasons"), _entries("Blocking-pod reasons")
    assert set(nodes) == {r.value for r in UnremovableReason}
    assert set(pods) == {r.value for r in BlockingPodReason} - {"NoReason"}
    for name, text in (*nodes.items(), *pods.items()):
        for part in ("**What it means:**", "**How to see it:**", "**What to change:**"):
            assert part in text, f"{name}: {part} missing"


INTERNAL = re.compile(
    r"seed 0\d\d|\bissue \d+|\bissue-\d+|(?<![\w/-])#\d+\b|\(\S+ s before\)|\d+(\.\d+)? \w+ before\)"
    r"|as measured when this|\bnot re-run\b|/work/|\bmain at [0-9a-f]{7}|\bat [0-9a-f]{7}\b",
    re.I,
)


def test_user_docs_speak_to_operators_without_internal_vocabulary() -> None:
    pages = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
    found = [
        f"{p.relative_to(ROOT)}:{i}: {m[0]}"
        for p in pages
        for i, line in enumerate(p.read_text().splitlines(), 1)
        for m in INTERNAL.finditer(line)
    ]
    assert not found, found


def test_the_readme_is_a_first_screen_not_the_manual() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 160
    for heading in ("## A dry-run in one minute", "## Install on GKE in three steps", "## Documentation"):
        assert heading in text


def test_the_readme_links_only_to_pages_that_exist() -> None:
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)", (ROOT / "README.md").read_text())
    assert targets
    missing = [t for t in targets if not (ROOT / t).is_file()]
    assert not missing, missing


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` of the repository's site, once for this module."""
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-3000:]
    # Clean: no page left out of the navigation, no warning.
    assert "not included" not in res.stderr and "WARNING" not in res.stderr, res.stderr[-3000:]
    return out


def test_site_builds_strict_with_every_page(site: Path) -> None:
    for page in ("index.html", "reference/flags/index.html", "tasks/troubleshooting/index.html",
                 "getting-started/self-hosted-ca/index.html", "benchmarks/index.html"):  # fmt: skip
        assert (site / page).is_file(), page


def test_strict_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    # The repository's settings (strict, link validation) on a one-page site with a broken link.
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config.pop("nav")
    config.pop("not_in_nav", None)
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# scaler\n\n[gone](no-such-page.md)\n")
    res = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert res.returncode != 0 and "no-such-page.md" in res.stderr, res.stderr[-2000:]


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and the raw (filtered) scanlines of an 8-bit RGB/RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def _chromium(profile: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", *args],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test-deps installs Debian's chromium)")
@pytest.mark.parametrize(
    ("page", "title", "text"),
    [
        ("index.html", "scaler", "scaler"),
        ("tasks/troubleshooting/index.html", "Troubleshooting", "NodeGroupMinSizeReached"),
    ],
)
def test_two_pages_render_in_headless_chromium(site: Path, tmp_path: Path, page: str, title: str, text: str) -> None:
    url = (site / page).as_uri()
    dom = _chromium(tmp_path / "profile-dom", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr.decode(errors="replace")[-2000:]
    html = dom.stdout.decode()
    m = re.search(r"<title>(.*?)</title>", html, re.S)
    assert m is not None and title in m[1] and "scaler" in m[1], m
    assert 'class="md-nav' in html, "the material theme's navigation is rendered"
    shot = tmp_path / "shot.png"
    res = _chromium(tmp_path / "profile-shot", "--hide-scrollbars", "--window-size=1200,900",
                    f"--screenshot={shot}", url)  # fmt: skip
    assert res.returncode == 0 and shot.is_file(), res.stderr.decode(errors="replace")[-2000:]
    width, height, raw = _png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 900)
    # A page, not a blank or an error page: many distinct byte values across the scanlines.
    assert len(set(raw[:: max(1, len(raw) // 200_000)])) > 32
    assert shot.stat().st_size > 20_000
