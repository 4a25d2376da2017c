"""Every command shown in docs/tasks/replay.md and docs/tune.md, run on the bundled example and
the Bitbrains trace, its figures compared with those the page quotes, so that a number cannot go
stale.

A page's commands are the lines of its ``sh`` blocks (continuations joined, comments dropped;
``NAME=value`` lines are kept as the shell variables of the later commands). Each is classified
(:func:`classify`):

* **skipped**, with the reason: it needs what a test has not got (a cluster, a Prometheus, GKE,
  docker) or stands for the reader's own files (``snap/``, ``history.parquet``);
* **day**: a day of the example or less (seconds of CPU): run by this test;
* **long**: weeks of the example (minutes to an hour): run only with ``SCALER_DOCS_LONG=1``, so
  that CI stays short; the page's month and three-week tables are checked that way.

A command's quoted output is the block that follows it before the next ``sh`` block: a fenced
block (compared line by line after the wall time and the worker count are masked: replays and
tunes run in one process, see :func:`in_process`; a line ``…`` stands for lines left
out), or a Markdown table of replay figures (the commands are run with ``-o json`` and every
cell is recomputed from the JSON as the page formats it). An unclassified command fails the
test: a new command on the page must say how it is checked.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
BITBRAINS = SHARED / "data" / "raw" / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
PAGES = ("docs/tasks/replay.md", "docs/tune.md")
LONG = os.environ.get("SCALER_DOCS_LONG") == "1"

SKIPPED: tuple[tuple[str, str], ...] = (
    (r"--prometheus-url", "needs a Prometheus that scrapes a cluster"),
    (r"^scaler snapshot\b", "needs a cluster"),
    (r"^scaler history export\b", "needs a Prometheus"),
    (r"^scaler run\b", "the live controller, on a cluster"),
    (r"\bsnap/|history\.parquet|usage\.parquet", "stands for the reader's own snapshot and history"),
    (r"^(kubectl|docker)\b", "needs a GKE cluster or docker"),
    (r"^gcloud\b", "needs Google credentials"),
    (r"^pip install\b", "installs the package this test runs from"),
)
"""(pattern, reason) of the commands not run here."""


def classify(command: str) -> str:
    """``day``, ``long`` or ``skip: REASON`` for one command of a page (see the module doc).

    Raises:
        AssertionError: a command none of the rules knows.
    """
    for pattern, reason in SKIPPED:
        if re.search(pattern, command):
            return f"skip: {reason}"
    if re.match(r"scaler tune --print-space$", command) or command.startswith("scaler dry-run --config tuned/"):
        return "day"
    if re.search(r"--from 2013-07-08T?[0-9:Z]* --to 2013-07-0[89]\b", command):
        return "day"
    if "../shared/" in command or "$T" in command:
        return "long"
    raise AssertionError(f"a command the docs test does not know how to check: {command!r}")


@dataclass
class Step:
    """One command of a page, the shell variables set before it, and what the page quotes of
    its output (a fenced block's lines, or a Markdown table's rows, or nothing)."""

    page: str
    line: int
    command: str
    variables: list[str]
    quoted: list[str] = field(default_factory=list)
    table: list[list[str]] = field(default_factory=list)
    group: int = 0  # the sh block it came from: a table checks all of that block's commands


def _commands(text: str) -> Iterator[str]:
    text = re.sub(r"\\\n\s*", " ", text)  # continuation lines
    for raw in text.splitlines():
        line = re.sub(r"\s+#\s.*$", "", raw).strip()
        if line and not line.startswith("#"):
            yield line


def steps(page: str) -> list[Step]:
    """The commands of ``page`` with what it quotes after them."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    out: list[Step] = []
    variables: list[str] = []
    block: list[Step] = []
    i, group = 0, 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^\s*```(\w*)\s*$", line)
        if fence:
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
            body = [x[len(line) - len(line.lstrip()) :] for x in lines[i + 1 : end]]
            if fence[1] == "sh":
                group += 1
                block = []
                for command in _commands("\n".join(body)):
                    if re.match(r"^[A-Z]+=", command):
                        variables.append(command)
                        continue
                    step = Step(page, i + 1, command, list(variables), group=group)
                    out.append(step)
                    block.append(step)
            elif fence[1] in ("", "yaml") and block and not block[-1].quoted and not block[-1].table:
                block[-1].quoted = body
            i = end + 1
            continue
        if line.startswith("|") and block and not block[-1].table and not block[-1].quoted:
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            block[-1].table = [r for r in rows if not set("".join(r)) <= set("-: ")]
            continue
        i += 1
    return out


ALL = [s for page in PAGES for s in steps(page)]


def test_every_command_of_the_pages_is_classified() -> None:
    kinds = {(s.page, s.command): classify(s.command) for s in ALL}
    assert len(kinds) >= 15
    runnable = [s for s in ALL if not classify(s.command).startswith("skip")]
    assert any(classify(s.command) == "day" and s.quoted for s in runnable), "a day-long command with its output"
    assert {s.page for s in runnable} == set(PAGES)


@pytest.fixture
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory where the pages' relative paths resolve: ``scaler/`` (the examples) and
    ``../shared`` (the trace); outputs (``tuned/``, ``replay.html``) land there."""
    if not BITBRAINS.exists():
        pytest.skip(f"needs ../shared: {BITBRAINS} is absent")
    top = tmp_path_factory.mktemp("docs")
    (top / "shared").symlink_to(SHARED)
    work = top / "work"
    work.mkdir()
    (work / "scaler").symlink_to(ROOT / "scaler")
    return work


def in_process(command: str) -> str:
    """``command`` with ``--workers 1`` when it is a replay or a tune that names no workers: the
    figures are the same on any number of workers (tests/test_replay_cli.py, tests/test_tune.py),
    and on a machine as busy as the suite keeps it, the default embedded Ray takes twice as long
    as the same replays in one process (measured on 2 cores: 145 s against 70 s for the replay
    page's day). The output's worker count is masked (:func:`_masked`)."""
    if re.match(r"scaler (replay|tune)\b", command) and not re.search(r"--workers|--ray-address|--print-space", command):
        return command + " --workers 1"
    return command


def run(step: Step, workdir: Path, extra: str = "") -> str:
    """Run one command of a page in ``workdir`` with the page's shell variables, stdout piped,
    a replay or a tune in one process (:func:`in_process`)."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}  # piped: no wrapping
    env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}", "PYTHONPATH": str(ROOT)}
    script = "\n".join([*step.variables, in_process(step.command) + extra])
    proc = subprocess.run(["bash", "-c", script], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=7200, check=False)  # fmt: skip
    assert proc.returncode == 0, f"{step.page}:{step.line}: {step.command}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _masked(text: str) -> str:
    text = re.sub(r"\b\d[\d,.]* s on (\d+ workers?|Ray)", "N s on W", text)  # the machine's, not the page's
    return "\n".join(line.rstrip() for line in text.splitlines())


def same_output(quoted: list[str], actual: str) -> None:
    """The quoted lines appear in the output in order, from its first line, consecutively except
    where a quoted line is ``…``."""
    got = _masked(actual).splitlines()
    segments = [[]]  # type: list[list[str]]
    for line in _masked("\n".join(quoted)).splitlines():
        if line.strip() == "…":
            segments.append([])
        else:
            segments[-1].append(line)
    at = 0
    for k, seg in enumerate(s for s in segments if s):
        if k == 0:
            assert got[: len(seg)] == seg, "\n".join(got[: len(seg) + 2])
            at = len(seg)
            continue
        found = next((j for j in range(at, len(got) - len(seg) + 1) if got[j : j + len(seg)] == seg), None)
        assert found is not None, f"not in the output: {seg[0]!r}\n" + "\n".join(got)
        at = found + len(seg)


def _signed(v: float) -> str:
    return "±0" if round(v) == 0 else (f"+{v:,.0f}" if v > 0 else f"−{-v:,.0f}")


REPLAY_COLUMNS: dict[str, Callable[[dict[str, Any], dict[str, Any]], str]] = {
    "node-hours": lambda p, b: f"{p['nodeHours']:,.1f}",
    "saved": lambda p, b: "—" if p is b else f"{100 * (b['nodeHours'] - p['nodeHours']) / b['nodeHours']:.1f}%",
    "cost USD": lambda p, b: f"{p['costUsd']:,.0f}",
    "nodes removed": lambda p, b: str(p["nodesRemoved"]),
    "pods evicted": lambda p, b: f"{p['podsEvicted']:,}"
    + (f" ({p['reliefEvictions']:,} by relief)" if p["reliefEvictions"] else ""),
    "relief evictions": lambda p, b: f"{p['reliefEvictions']:,}",
    "overload node-min": lambda p, b: f"{p['overloadNodeMinutes']:,.0f}",
    "vs none": lambda p, b: "—" if p is b else _signed(p["overloadNodeMinutes"] - b["overloadNodeMinutes"]),
    "throttled CPU core-min": lambda p, b: f"{p['throttledCpuCoreMinutes']:,.0f}",
    "OOM kills": lambda p, b: f"{p['oomKills']:,}",
    "unplaceable pods": lambda p, b: f"{p['unplaceablePods']:,}",
}
"""A replay table's column → its cell from the JSON report (policy, baseline)."""

RELIEF_ROWS = {
    "all (× 5 = node-minutes)": ("all", "all"),
    "with CPU over 100%": ("all", "cpu"),
    "… where one pod alone uses more CPU than the node's allocatable": ("one pod above allocatable", "cpu"),
    "DaemonSet pods and node overhead alone (no workload pod to move)": ("overhead", "all"),
    "a pod the drain rules keep (PDB, local storage, not replicated)": ("drain-rules", "all"),
    "a pod whose own usage (or request) is above TargetUsage's 45% CPU / 75% memory of a node of "
    "the same shape: no destination passes TargetUsage, even an idle one": ("target-usage", "all"),
    "a pod whose request fits no other node": ("no-room", "all"),
    "nothing: relievable in principle by the rules of relief": ("relievable", "all"),
}
"""A row of the relief-bound table → (row key, resource) of ``benchmarks.relief_bound -o json``."""


def same_table(table: list[list[str]], reports: list[dict[str, Any]]) -> None:
    """Every cell of a page's table equals the one recomputed from the JSON reports."""
    header, rows = table[0], table[1:]
    if "node_steps" in reports[0]:  # benchmarks.relief_bound, one report per column
        by_policy = {r["policy"]: r["node_steps"] for r in reports}
        for row in rows:
            if not row[1]:
                continue  # a heading row
            key, resource = RELIEF_ROWS[row[0]]
            for name, cell in zip(header[1:], row[1:], strict=True):
                assert cell == f"{by_policy[name.strip('`')][key][resource]:,}", (row[0], name)
        return
    policies = {p["name"]: p for r in reports for p in r["policies"]}
    baseline = reports[0]["baseline"]
    policies["none"] = baseline
    for row in rows:
        name = row[0].strip("`")
        for column, cell in zip(header[1:], row[1:], strict=True):
            if column in REPLAY_COLUMNS:
                assert cell == REPLAY_COLUMNS[column](policies[name], baseline), (name, column)


def _checked(kind: str) -> list[Step]:
    return [s for s in ALL if classify(s.command) == kind]


def check(steps: list[Step], workdir: Path) -> None:
    """Run ``steps`` in order in ``workdir`` and compare what they print with what the page
    quotes: a fenced block after its command, a table with all the commands of its block."""
    for step in steps:
        if step.table:
            continue  # checked below with its block's other commands
        out = run(step, workdir)
        if step.quoted:
            same_output(step.quoted, out)
    for step in (s for s in steps if s.table):
        block = [s for s in steps if s.group == step.group and s.page == step.page]
        reports = [json.loads(run(s, workdir, "" if "-o json" in s.command else " -o json")) for s in block]
        same_table(step.table, reports)


@pytest.mark.parametrize("page", PAGES)
def test_a_days_commands_run_and_give_the_figures_the_pages_quote(workdir: Path, page: str) -> None:
    """A page's commands run in order (a later one reads what an earlier one wrote); each page a
    test of its own, in a directory of its own, so that pytest-xdist's workers share them out."""
    todo = [s for s in _checked("day") if s.page == page]
    assert todo
    check(todo, workdir)


def test_weeks_of_commands_run_and_give_the_figures_the_pages_quote(workdir: Path) -> None:
    if not LONG:
        pytest.skip("weeks of replay: run with SCALER_DOCS_LONG=1")
    todo = _checked("long")
    assert todo
    check(todo, workdir)


def test_the_replay_page_explains_every_builtin_policy() -> None:
    from scaler.replay.policies import BUILTIN_POLICIES

    text = (ROOT / "docs/tasks/replay.md").read_text(encoding="utf-8")
    table = text.split("**Policies**", 1)[1].split("\n\n", 2)[1]
    names = re.findall(r"^\| `([a-z-]+)` \|", table, re.M)
    assert names == list(BUILTIN_POLICIES)
