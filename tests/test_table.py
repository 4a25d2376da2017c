"""The dry-run table as a person sees it: the real CLI under a pseudo-terminal at 80 and 200
columns, piped, and ``-o wide|json|yaml``; ``make demo``'s command; the bundled examples."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from ptyrun import ROOT, run_in_pty

from scaler.cli import main
from scaler.model.quantity import parse_bytes, parse_millicores
from scaler.report.models import NodeReport
from scaler.report.table import SHORT_BLOCKING_REASON, SHORT_REASON, short_reason

EXAMPLES = ROOT / "scaler" / "examples"
DAY1 = EXAMPLES / "bitbrains-gke-day1"
LOWREQ = EXAMPLES / "bitbrains-gke-night-lowreq"
SHARED = ROOT.parent / "shared"
STATUS = {"removable-empty": "empty", "removable-drain": "drain", "unremovable": "keep"}


def json_report(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main(["dry-run", *argv, "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def table_lines(out: str) -> list[str]:
    """The node table: from the NAME header to the first blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("NAME "))
    end = lines.index("", start)
    return lines[start:end]


def cells(lines: list[str]) -> list[dict[str, str]]:
    """Cut every row at the header's column starts (kubectl-style alignment), header → cell."""
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = []
    for line in lines[1:]:
        bounds = [*starts[1:], None]
        row = {names[i]: line[starts[i] : bounds[i]].strip() for i in range(len(names))}
        # The cell before each column start ends in at least one space: no cell runs into the next.
        for s in starts[1:]:
            assert s <= len(line) and line[s - 1] == " ", (line, s)
        rows.append(row)
    return rows


def arg(path: Path) -> str:
    """``path`` relative to ROOT (the command's cwd): a clone's absolute path has any length, and
    the summary never wraps a path, so an absolute one would break the width checks in CI."""
    return str(path.relative_to(ROOT))


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.parametrize("example", [LOWREQ, DAY1], ids=lambda p: p.name)
def test_table_under_a_terminal_names_every_node_and_cuts_no_cell(
    example: Path, columns: int, capsys: pytest.CaptureFixture[str]
) -> None:
    report = json_report(capsys, "--snapshot", str(example))
    code, out = run_in_pty(["dry-run", "--snapshot", arg(example)], columns)
    assert code == 0, out
    assert "…" not in out
    lines = table_lines(out)
    assert lines[0].split() == ["NAME", "STATUS", "CPU%", "MEM%", "REASON"]
    # The default view fits 80 columns with GKE node names, so the terminal wraps nothing.
    assert max(len(line) for line in lines) <= 80
    rows = {r["NAME"]: r for r in cells(lines)}
    assert set(rows) == {n["name"] for n in report["nodes"]}, "every node name whole, once"
    for n in report["nodes"]:
        row = rows[n["name"]]
        assert row["STATUS"] == STATUS[n["status"]]
        assert row["CPU%"] == pct(n["utilization"]["cpu"]) and row["MEM%"] == pct(n["utilization"]["memory"])
        assert row["REASON"] == short_reason(NodeReport.model_validate(n))
        if not n["removable"]:
            assert row["REASON"], n["name"]
    # Prose is wrapped at the terminal's width, never a word cut.
    assert all(len(line) <= columns for line in out.splitlines())
    words = " ".join(out.split())
    c = report["comparison"]
    assert f"requests rule (--utilization-source=requests --filter-plugins=) removes {c['clusterAutoscaler']['removable']} node" in words
    assert f"scaler removes {c['scaler']['removable']} node" in words


def test_short_reasons_fit_the_80_column_view() -> None:
    from scaler.drain.rules import BlockingPodReason
    from scaler.reasons import UnremovableReason

    for reason in UnremovableReason:
        if reason is not UnremovableReason.NoReason:
            assert len(SHORT_REASON[reason]) <= 16, reason
    for blocking in BlockingPodReason:
        if blocking is not BlockingPodReason.NoReason:
            assert len(SHORT_BLOCKING_REASON[blocking.value]) <= 16, blocking


def test_wide_adds_requests_group_zone_pods_and_the_full_reason(capsys: pytest.CaptureFixture[str]) -> None:
    report = json_report(capsys, "--snapshot", str(LOWREQ))
    code, out = run_in_pty(["dry-run", "--snapshot", arg(LOWREQ), "-o", "wide"], 80)
    assert code == 0, out
    lines = table_lines(out)
    assert lines[0].split() == [
        "NAME", "STATUS", "CPU%", "MEM%", "REQ-CPU%", "REQ-MEM%", "GROUP", "ZONE", "PODS-TO-MOVE", "$/MONTH",
        "REASON",
    ]  # fmt: skip
    rows = {r["NAME"]: r for r in cells(lines)}
    for n in report["nodes"]:
        row = rows[n["name"]]
        assert row["REQ-CPU%"] == pct(n["requestUtilization"]["cpu"])
        assert row["GROUP"] == n["nodeGroup"] and row["ZONE"] == n["zone"]
        assert row["PODS-TO-MOVE"] == (str(len(n["moves"])) if n["removable"] else "-")
        monthly = n["cost"]["monthlyUsd"]
        assert row["$/MONTH"] == ("unknown" if monthly is None else f"${monthly:,.2f}")
        assert row["REASON"] == (n["detail"] if n["removable"] else f"{n['reason']}: {n['detail']}")


def test_requests_source_says_so_in_the_headers() -> None:
    code, out = run_in_pty(["dry-run", "--snapshot", arg(LOWREQ), "--utilization-source=requests"], 80)
    assert code == 0, out
    assert table_lines(out)[0].split() == ["NAME", "STATUS", "REQ-CPU%", "REQ-MEM%", "REASON"]


def _piped(env_extra: dict[str, str], *argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env.update(env_extra)
    proc = subprocess.run(
        [sys.executable, "-m", "scaler.cli", "dry-run", "--snapshot", arg(LOWREQ), *argv],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_piped_output_is_not_forced_to_a_width_and_follows_columns() -> None:
    plain = _piped({})
    # No terminal and no $COLUMNS: prose is not wrapped (one sentence per line), the table as always.
    side = [line for line in plain.splitlines() if line.startswith("Side by side:")]
    assert len(side) == 1 and len(side[0]) > 80
    assert table_lines(plain) == table_lines(_piped({"COLUMNS": "60"}))
    narrow = _piped({"COLUMNS": "60"}).splitlines()
    prose = narrow[len(table_lines("\n".join(narrow))) :]
    start = next(i for i, line in enumerate(prose) if line.startswith("NAMESPACE "))
    end = next(i for i, line in enumerate(prose) if line.startswith("If requests matched"))
    assert all(len(line) <= 60 for line in prose[:start] + prose[end:]), prose
    assert len(prose[start:end]) > 1, "the workload table is printed whole"


def test_yaml_is_the_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    as_json = json_report(capsys, "--snapshot", str(LOWREQ))
    assert main(["dry-run", "--snapshot", str(LOWREQ), "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == as_json


# ---- cluster-autoscaler side by side, what blocks -------------------------------------------------


def test_side_by_side_is_computed_and_scaler_drains_more_on_night_lowreq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = json_report(capsys, "--snapshot", str(LOWREQ))
    ca_run = json_report(capsys, "--snapshot", str(LOWREQ), "--utilization-source=requests", "--filter-plugins=")
    c = report["comparison"]
    ca, ours = c["clusterAutoscaler"], c["scaler"]
    assert ca["settings"] == ["--utilization-source=requests", "--filter-plugins="]
    # Both sides are evaluations: CA's equals a dry-run with its flags, scaler's the report itself.
    assert ca["removable"] == ca_run["summary"]["removable"]
    assert ca["nodes"] == [n["name"] for n in sorted(ca_run["nodes"], key=lambda n: n["rank"] or 0) if n["removable"]]
    assert ours["removable"] == report["summary"]["removable"]
    assert ours["removableDrain"] == report["summary"]["removableDrain"] >= 1
    assert c["additionalNodes"] == ours["removable"] - ca["removable"]
    # The point of the example: usage-based draining removes more nodes than the requests rule.
    assert ours["removable"] > ca["removable"]


def _p95(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(0.95 * len(ordered))) - 1]


def _rightsize_files(src: Path, dst: Path) -> None:
    """Write ``src`` to ``dst`` with every pod's requests at its workload's p95 per-pod usage
    (nearest rank), computed here from the files alone."""
    for f in src.glob("*.json"):
        (dst / f.name).write_bytes(f.read_bytes())
    pods = json.loads((src / "pods.json").read_text())
    usage = {
        (m["metadata"]["namespace"], m["metadata"]["name"]): (
            sum(parse_millicores(c["usage"]["cpu"]) for c in m["containers"]),
            sum(parse_bytes(c["usage"]["memory"]) for c in m["containers"]),
        )
        for m in json.loads((src / "pod-metrics.json").read_text())["items"]
    }
    deployment_of = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): ref["name"]
        for o in json.loads((src / "workloads.json").read_text())["items"]
        if o["kind"] == "ReplicaSet"
        for ref in o["metadata"].get("ownerReferences", [])
        if ref["kind"] == "Deployment"
    }

    def workload(p: dict[str, Any]) -> str:
        ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
        ref = next((r for r in p["metadata"].get("ownerReferences", []) if r.get("controller")), None)
        if ref is None:
            return f"{ns}/Pod/{name}"
        if ref["kind"] == "ReplicaSet" and (ns, ref["name"]) in deployment_of:
            return f"{ns}/Deployment/{deployment_of[(ns, ref['name'])]}"
        return f"{ns}/{ref['kind']}/{ref['name']}"

    members: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for p in pods["items"]:
        key = (p["metadata"]["namespace"], p["metadata"]["name"])
        if key in usage and p["spec"].get("nodeName") and "kubernetes.io/config.mirror" not in p["metadata"].get("annotations", {}):
            members[workload(p)].append(usage[key])
    for p in pods["items"]:
        w = members.get(workload(p))
        key = (p["metadata"]["namespace"], p["metadata"]["name"])
        if not w or key not in usage or p.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        cpu, mem = _p95([c for c, _ in w]), _p95([m for _, m in w])
        for i, c in enumerate(p["spec"]["containers"]):
            c["resources"] = {"requests": {"cpu": f"{cpu if i == 0 else 0}m", "memory": str(mem if i == 0 else 0)}}
    (dst / "pods.json").write_text(json.dumps(pods))


def test_what_blocks_on_the_requests_bound_day1_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = json_report(capsys, "--snapshot", str(DAY1))
    b = report["requestsBound"]
    threshold = report["flags"]["scale-down-utilization-threshold"]
    underused = [
        n for n in report["nodes"]
        if not n["removable"] and not n["empty"] and n["utilization"]["value"] is not None
        and n["utilization"]["value"] <= threshold
    ]  # fmt: skip
    assert b["underusedNodes"] == len(underused) > 0
    assert sum(b["underusedByReason"].values()) == len(underused)
    # The workloads requesting most above their use, largest excess first, with what they use.
    assert b["workloads"], "day-1 is bound by requests"
    for w in b["workloads"]:
        assert w["requested"]["cpuMillicores"] > w["used"]["cpuMillicores"] or (
            w["requested"]["memoryBytes"] > w["used"]["memoryBytes"]
        )
    # "If requests matched p95 usage": re-checked by a dry-run of a snapshot rewritten here.
    _rightsize_files(DAY1, tmp_path)
    rightsized = json_report(capsys, "--snapshot", str(tmp_path))
    assert b["removableIfRightsized"] == rightsized["summary"]["removable"]
    before = {n["name"] for n in report["nodes"] if n["removable"]}
    assert b["nodesIfRightsized"] == [
        n["name"] for n in sorted(rightsized["nodes"], key=lambda n: n["rank"] or 0)
        if n["removable"] and n["name"] not in before
    ]  # fmt: skip
    assert b["keptByRequests"] > 0
    assert b["keptByRequests"] == len({n["name"] for n in underused} & set(b["nodesIfRightsized"]))
    # The table says it too.
    code, out = run_in_pty(["dry-run", "--snapshot", arg(DAY1)], 80)
    assert code == 0
    words = " ".join(out.split())
    assert f"What blocks: {b['underusedNodes']} nodes" in words
    assert f"{b['keptByRequests']} of them are kept by requests" in words
    first = b["workloads"][0]
    assert re.search(rf"^{re.escape(first['namespace'])}\s+{first['kind'].lower()}/{re.escape(first['name'])}\s", out, re.M)


# ---- make demo and the bundled examples ------------------------------------------------------------


def _demo_argv() -> list[str]:
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n\t(.+)$", text, re.M)
    assert recipe is not None
    argv = shlex.split(recipe[1])
    assert argv[0] == "$(VENV)/bin/scaler"
    return argv[1:]


def test_make_demo_at_80_columns_shows_drains_and_the_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    argv = _demo_argv()
    code, out = run_in_pty(argv, 80)
    assert code == 0, out
    lines = table_lines(out)
    assert max(len(line) for line in lines) <= 80 and "…" not in out
    statuses = [r["STATUS"] for r in cells(lines)]
    assert statuses.count("drain") >= 1
    assert "Side by side: cluster-autoscaler's requests rule" in out
    assert main([*argv, "-o", "json"]) == 0
    c = json.loads(capsys.readouterr().out)["comparison"]
    assert c["scaler"]["removable"] > c["clusterAutoscaler"]["removable"]


def test_night_lowreq_is_bundled_in_the_package() -> None:
    from importlib import resources

    bundled = Path(str(resources.files("scaler") / "examples" / "bitbrains-gke-night-lowreq"))
    assert (bundled / "pods.json").is_file()
    assert (ROOT / "tests" / "data" / "snapshots" / "bitbrains-gke-night-lowreq" / "pods.json").is_file()


BUILT_SNAPSHOTS = [
    *sorted(f"scaler/examples/{p.name}" for p in EXAMPLES.iterdir() if p.is_dir()),
    "tests/data/snapshots/bitbrains-gke-night",
]


@pytest.mark.parametrize("folder", BUILT_SNAPSHOTS)
def test_example_readme_names_the_builder_and_rebuilds_the_files(folder: str, tmp_path: Path) -> None:
    text = (ROOT / folder / "README.md").read_text()
    assert "`tools/build_snapshot.py" not in text, "the builder is ../shared/tools/build_snapshot.py"
    commands = re.findall(r"`(python3 \S*build_snapshot\.py [^`]+)`", text)
    assert len(commands) == 1, "the README names the command that built the snapshot"
    argv = shlex.split(commands[0])
    assert argv[1] == "../shared/tools/build_snapshot.py"
    assert argv[argv.index("--out") + 1] == folder
    if not (SHARED / "tools" / "build_snapshot.py").is_file():
        pytest.skip("../shared is not beside this checkout")
    argv[argv.index("--out") + 1] = str(tmp_path)
    subprocess.run([sys.executable, *argv[1:]], cwd=ROOT, check=True, capture_output=True, timeout=300)
    for f in sorted((ROOT / folder).glob("*.json")):
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f.name


# ---- the README's and the docs' set-up and dry-run examples -------------------------------------------


def _section(title: str, path: str = "README.md") -> str:
    """The ``## title...`` section of ``path`` (a page under docs/, or the README)."""
    text = (ROOT / path).read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def test_contributing_says_what_make_test_installs_as_root_and_what_happens_without() -> None:
    section = _section("Set-up and tests", "docs/contributing.md")
    recipe = (ROOT / "Makefile").read_text().split("\ntest-deps:", 1)[1].split("\n\n", 1)[0]
    packages = set(re.findall(r"\$\(APT_INSTALL\) ([\w-]+)", recipe))
    assert packages == {"prometheus", "chromium", "etcd-server"}
    for package in packages:
        assert f"`{package}`" in section, package
    assert "**as root**" in section and "apt-get" in section
    quoted = re.search(r"`(test-deps: prometheus is missing[^`]*)`", " ".join(section.split()))
    assert quoted is not None and f'echo "{quoted[1]}"' in recipe, "the README quotes make's own message"
    assert "skipped with that reason" in section


@pytest.mark.parametrize(
    ("path", "title"),
    [("README.md", "A dry-run in one minute"), ("docs/getting-started/dry-run.md", "Try it on the bundled example")],
)
def test_demo_output_in_the_readme_and_the_docs_is_what_make_demo_prints(path: str, title: str) -> None:
    section = _section(title, path)
    assert f"`scaler {' '.join(_demo_argv())}`" in " ".join(section.split())
    block = re.search(r"```\n(NAME .*?)```", section, re.S)
    assert block is not None
    code, out = run_in_pty(_demo_argv(), 80)
    assert code == 0
    lines = out.splitlines()
    for line in block[1].splitlines():
        if line != "…":
            assert line in lines, f"{path} line not in make demo's output: {line!r}"


def test_docs_what_blocks_example_is_what_the_day1_dry_run_prints() -> None:
    section = _section("All the ways to run it", "docs/getting-started/dry-run.md")
    block = re.search(r"```\n(What blocks: .*?)```", section, re.S)
    assert block is not None
    code, out = run_in_pty(["dry-run", "--snapshot", arg(DAY1)], 80)
    assert code == 0
    lines = out.splitlines()
    for line in block[1].splitlines():
        assert line in lines, f"docs line not in the day-1 dry-run's output: {line!r}"
