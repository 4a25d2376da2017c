"""The release a user installs: ``python -m build`` makes an sdist and, from it, a wheel of the
``gke-scaler`` distribution (``scaler`` on PyPI is an unrelated project); both install into a
fresh virtualenv and the installed ``scaler`` runs a dry-run of the example bundled in the
package. One version source: ``scaler.__version__``.

Offline and quick: the build runs without isolation on the project venv's setuptools, the fresh
venvs have no pip (the project venv's pip installs into them with ``--python``), and their
dependencies come from the project venv's site-packages through a ``.pth`` file, while the
``scaler`` package itself is only the installed one (the test runs outside the source tree).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from scaler import __version__

REPO = Path(__file__).resolve().parents[1]
DIST = "gke-scaler"


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(wheel, sdist) built by ``python -m build`` (the sdist, then the wheel from the sdist)."""
    pytest.importorskip("build", reason="the dev extra's `build` package is not installed")
    out = tmp_path_factory.mktemp("dist")
    # A copy of what the build reads: setuptools writes build/ and *.egg-info beside the sources.
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "MANIFEST.in"):
        shutil.copy2(REPO / name, src / name)
    for package in ("scaler", "plugins"):
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    run = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return wheels[0], sdists[0]


def fresh_venv(root: Path) -> Path:
    """A virtualenv without pip whose dependencies resolve to the project venv's site-packages
    (appended to ``sys.path`` after its own); returns its ``bin`` directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin"


def install(target_bin: Path, artefact: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(target_bin / "python"), "install", "--no-deps",
         "--no-index", "--no-build-isolation", "--quiet", str(artefact)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]


def in_venv(bin_dir: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` from the venv, away from the source tree and from any kubeconfig."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "PYTHONPATH", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(cwd), PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run([str(bin_dir / argv[0]), *argv[1:]], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=300, check=False)  # fmt: skip


def test_the_distribution_name_and_version_have_one_source(dists: tuple[Path, Path]) -> None:
    wheel, sdist = dists
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert pyproject["name"] == DIST and "version" not in pyproject and "version" in pyproject["dynamic"]
    assert wheel.name.startswith(f"gke_scaler-{__version__}-py3-none-any")
    assert sdist.name == f"gke_scaler-{__version__}.tar.gz"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(f"gke_scaler-{__version__}.dist-info/METADATA").decode()
        entry_points = z.read(f"gke_scaler-{__version__}.dist-info/entry_points.txt").decode()
    assert f"Name: {DIST}\n" in metadata and f"Version: {__version__}\n" in metadata
    assert "scaler = scaler.cli:main" in entry_points and "kubectl-scaler = scaler.kubectl_plugin:main" in entry_points
    # The bundled examples and the report's schema are package data.
    assert any(n.startswith("scaler/examples/bitbrains-gke-day1/") for n in names)
    assert "scaler/report/schema.json" in names
    assert not any(n.startswith(("tests/", "deploy/", "benchmarks/")) for n in names)
    with tarfile.open(sdist) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "CHANGELOG.md", "scaler/__init__.py"} <= members
    # The CHANGELOG has an entry for this version.
    assert f"## {__version__} " in (REPO / "CHANGELOG.md").read_text()


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_installed_package_runs_and_dry_runs_the_bundled_example(
    dists: tuple[Path, Path], tmp_path: Path, kind: str
) -> None:
    bin_dir = fresh_venv(tmp_path / "venv")
    install(bin_dir, dists[0] if kind == "wheel" else dists[1])
    where = in_venv(bin_dir, "python", "-c", "import scaler; print(scaler.__file__)", cwd=tmp_path)
    assert where.stdout.startswith(str(tmp_path / "venv")), where.stdout + where.stderr
    version = in_venv(bin_dir, "scaler", "--version", cwd=tmp_path)
    assert version.stdout == f"scaler {__version__}\n", version.stderr
    plugin = in_venv(bin_dir, "kubectl-scaler", "--version", cwd=tmp_path)
    assert plugin.stdout == f"kubectl-scaler {__version__}\n", plugin.stderr
    if kind == "sdist":
        return  # the same files as the wheel (built from this sdist); one dry-run is enough
    # No cluster configured (no kubeconfig, not in a pod): the bundled example, from the install.
    dry = in_venv(bin_dir, "scaler", "dry-run", "-o", "json", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr[-3000:]
    assert "using the bundled example" in dry.stderr and str(tmp_path / "venv") in dry.stderr
    assert '"kind": "DryRunReport"' in dry.stdout
