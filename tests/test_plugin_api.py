"""The public plugin API: its exported members are pinned, the built-in plugins use nothing else,
and a separately packaged third-party plugin works in a real ``scaler dry-run``.

The pin follows httpx's ``tests/test_exported_members.py``: adding or removing a public name is
a deliberate change of this test, never an accident.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import scaler.plugin_api as api

ROOT = Path(__file__).resolve().parents[1]
THIRD_PARTY = ROOT / "tests" / "third_party_plugin"
SNAPSHOT = ROOT / "tests" / "data" / "snapshots" / "bitbrains-gke-night-lowreq"

EXPORTED = {
    "HOURS",
    "BatchScorePlugin",
    "ClusterState",
    "Codes",
    "EvictionMetric",
    "FilterPlugin",
    "Node",
    "NodeState",
    "NodeTable",
    "Pod",
    "PodUsage",
    "Positions",
    "Resources",
    "ScalerConfig",
    "ScorePlugin",
    "VectorFilterPlugin",
    "WorkloadProfile",
    "class_and_priority",
    "hour_of_day",
    "ordered_by",
    "running_time",
    "usage",
    "workload_key",
}


def test_exported_members_are_pinned() -> None:
    assert set(api.__all__) == EXPORTED
    assert len(api.__all__) == len(EXPORTED)  # no name listed twice
    for name in api.__all__:
        assert getattr(api, name) is not None, name


def test_public_names_are_not_private_modules_leaking() -> None:
    """Everything public in the module is in ``__all__`` (no accidental extra export)."""
    public = {n for n in vars(api) if not n.startswith("_") and n != "annotations"}
    assert public == EXPORTED


def _scaler_imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out.update(n for n in names if n == "scaler" or n.startswith("scaler."))
    return out


@pytest.mark.parametrize(
    "path",
    [*sorted((ROOT / "plugins").rglob("*.py")), *sorted(THIRD_PARTY.rglob("*.py"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_plugins_import_only_the_plugin_api(path: Path) -> None:
    assert _scaler_imports(path) <= {"scaler.plugin_api"}


@pytest.fixture(scope="module")
def third_party_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The third-party distribution installed by pip into a directory of its own (offline:
    built with the venv's setuptools, no dependencies fetched)."""
    site = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("src") / "plugin"
    shutil.copytree(THIRD_PARTY, build)  # pip builds in the source tree; keep tests/ clean
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(build)],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert list(site.glob("scaler_zone_guard-*.dist-info"))
    return site


def _dry_run(snapshot: Path, site: Path | None, *flags: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "scaler.cli", "dry-run", "--snapshot", str(snapshot), "-o", "json", *flags],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def _destinations(report: dict[str, object]) -> set[str]:
    nodes = report["nodes"]
    assert isinstance(nodes, list)
    return {m["destination"] for n in nodes for m in n.get("moves", [])}


def test_third_party_plugin_enabled_by_name(third_party_site: Path, tmp_path: Path) -> None:
    if not SNAPSHOT.is_dir():
        pytest.skip(f"{SNAPSHOT} is missing")
    base = _dry_run(SNAPSHOT, None)
    assert base.returncode == 0, base.stderr
    used = _destinations(json.loads(base.stdout))
    assert used, "the snapshot must have moves for this test to mean anything"

    # Protect every node the moves used; the plugin must send the pods elsewhere or nowhere.
    snap = tmp_path / "snap"
    shutil.copytree(SNAPSHOT, snap)
    nodes_file = snap / "nodes.json"
    doc = json.loads(nodes_file.read_text())
    for item in doc["items"]:
        if item["metadata"]["name"] in used:
            item["metadata"]["labels"]["example.com/protected"] = "true"
    nodes_file.write_text(json.dumps(doc))

    flags = ("--filter-plugins", "TargetUsage,ProtectedNodes")
    unknown = _dry_run(snap, None, *flags)  # without the distribution the name is unknown
    assert unknown.returncode == 2
    assert "unknown filter plugin 'ProtectedNodes'" in unknown.stderr

    guarded = _dry_run(snap, third_party_site, *flags)
    assert guarded.returncode == 0, guarded.stderr
    report = json.loads(guarded.stdout)
    assert not _destinations(report) & used
    assert report["flags"]["filter-plugins"] == ["TargetUsage", "ProtectedNodes"]
    refused = [n["detail"] for n in report["nodes"] if n["reason"] == "NoPlaceToMovePods"]
    # The plugin's own reason reaches the report: a candidate whose pods only fitted on protected
    # nodes names it.
    assert refused and any("node is protected" in d for d in refused), refused
