"""``scaler replay`` as a person runs it: the table under a pseudo-terminal at 80 and 200
columns, progress on a terminal and nothing extra when piped, log lines that name the policy and
the simulated time, and ``--from``/``--to`` against the trace's own range."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from ptyrun import ROOT, run_in_pty

from scaler.cli import main
from scaler.cmdline import UsageError, bundled_example
from scaler.replay.load import check_range

BITBRAINS = ROOT.parent / "shared" / "data" / "raw" / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
DAY1 = str(bundled_example())  # the bundled example the test traces name pods of

LOWREQ = ROOT / "scaler" / "examples" / "bitbrains-gke-night-lowreq"
T0 = 1_793_577_600  # 2026-11-02T00:00:00Z
MI = 2**20


def write_trace(tmp_path: Path, steps: int = 12) -> Path:
    """A long-format trace (5-minute samples from T0) for two workloads of the examples."""
    rows = ["timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes"]
    for k in range(steps):
        rows.append(f"{T0 + k * 300},catalog,catalog-svc001,{0.05 + 0.01 * k},{300 * MI}")
        rows.append(f"{T0 + k * 300},checkout,checkout-svc008,0.02,{200 * MI}")
    f = tmp_path / "trace.csv"
    f.write_text("\n".join(rows) + "\n")
    return f


def policy_rows(out: str) -> dict[str, dict[str, str]]:
    """The replay table's rows by policy, cut at the header's column starts."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("POLICY "))
    end = lines.index("", start)
    header = lines[start]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = {}
    for line in lines[start + 1 : end]:
        bounds = [*starts[1:], None]
        row = {names[i]: line[starts[i] : bounds[i]].strip() for i in range(len(names))}
        for s in starts[1:]:
            assert line[s - 1] == " ", (line, s)
        rows[row["POLICY"]] = row
    return rows


@pytest.mark.parametrize("columns", [80, 200])
def test_replay_table_under_a_terminal_cuts_no_policy_name(tmp_path: Path, columns: int) -> None:
    trace = write_trace(tmp_path)
    code, out = run_in_pty(["replay", "--snapshot", DAY1, "--trace", str(trace), "--workers", "1"], columns)
    assert code == 0, out
    table = out[out.index("POLICY ") :]
    assert "…" not in table
    rows = policy_rows(table)
    assert list(rows) == ["ca-requests", "ca-usage", "scaler", "scaler-portrait", "none"]
    header = next(line for line in table.splitlines() if line.startswith("POLICY "))
    assert header.split() == ["POLICY", "SAVED", "COST-USD", "REMOVED", "EVICTED", "OVERLOAD", "UNPLACEABLE"]
    assert all(len(line) <= 80 for line in table.splitlines()[: len(rows) + 1]), "fits 80 columns"
    assert all(len(line) <= columns for line in table.splitlines())
    assert re.search(r"Replayed in \d+ s on 1 worker\.", " ".join(table.split())), table


def without_timings(doc: object) -> object:
    """``doc`` without its ``elapsedSeconds`` (wall-clock figures differ between two runs)."""
    if isinstance(doc, dict):
        return {k: without_timings(v) for k, v in doc.items() if k != "elapsedSeconds"}
    if isinstance(doc, list):
        return [without_timings(v) for v in doc]
    return doc


def test_replay_wide_json_yaml_agree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path)
    argv = ["replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "scaler", "--processes", "1"]
    assert main([*argv, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert main([*argv, "-o", "yaml"]) == 0
    assert without_timings(yaml.safe_load(capsys.readouterr().out)) == without_timings(report)
    assert main([*argv, "-o", "wide"]) == 0
    rows = policy_rows(capsys.readouterr().out)
    scaler = next(p for p in report["policies"] if p["name"] == "scaler")
    assert rows["scaler"]["NODE-HOURS"] == f"{scaler['nodeHours']:,.1f}"
    assert rows["scaler"]["DESCRIPTION"] == scaler["description"]
    assert rows["none"]["NODE-HOURS"] == f"{report['baseline']['nodeHours']:,.1f}"


def test_progress_on_a_terminal_nothing_extra_when_piped(tmp_path: Path) -> None:
    trace = write_trace(tmp_path)
    # In one process (tests/test_fanout.py checks that Ray's tasks report to the driver).
    code, out = run_in_pty(["replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "ca-usage,scaler", "--workers", "1"], 80)
    assert code == 0, out
    # One bar per policy: its name, the simulated time reached, steps per second, time left.
    for name in ("ca-usage", "scaler", "none"):
        assert re.search(rf"{name}\s.*2026-11-02T00:55:00Z.*steps/s.*\d:\d\d:\d\d", out), name
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.run(
        [sys.executable, "-m", "scaler.cli", "replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "ca-usage,scaler", "--workers", "1"],
        capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # Piped: no progress, no chatter; only the warning that few pods follow this small trace.
    assert proc.stderr == (
        "scaler: warning: 6 of 1172 pods follow the trace; the other 1166 keep the usage of their "
        "PodMetrics all along\n"
    )
    assert proc.stdout.startswith("scaler replay: ") and "\x1b[" not in proc.stdout


NOISY = """
    import logging
    import os
    from pathlib import Path


    class Noisy:
        name = "Noisy"

        def __init__(self, config):
            self.said = False

        def filter(self, pod, node, state):
            if not self.said:
                self.said = True
                logging.getLogger("noisy").warning("noisy filter consulted for %s", pod.key)
                Path(os.environ["NOISY_MARK"]).touch()  # it did log
            return None
"""


@pytest.mark.parametrize("processes", ["1", "2"])
def test_the_simulated_controllers_log_lines_never_reach_the_terminal(tmp_path: Path, processes: str) -> None:
    """A plugin that logs a warning from inside the controller's evaluation, in this process or
    a worker: the replay runs, the report is printed, and stderr holds only the command's own
    warning (a replay's controller is a simulation: its lines are not the user's). On Ray, the
    tune alone: both commands hand their tasks' records back through the same pool
    (scaler.fanout), and each Ray start costs a minute on a busy machine."""
    plugin = tmp_path / "plugin"
    (plugin / "noisy-0.1.dist-info").mkdir(parents=True)
    (plugin / "noisy_plugin.py").write_text(textwrap.dedent(NOISY))
    (plugin / "noisy-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: noisy\nVersion: 0.1\n")
    (plugin / "noisy-0.1.dist-info" / "entry_points.txt").write_text("[scaler.plugins]\nNoisy = noisy_plugin:Noisy\n")
    trace = write_trace(tmp_path)
    mark = tmp_path / "logged"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(ROOT)]), "NOISY_MARK": str(mark)}
    commands = (["replay", "--policies", "loud=--filter-plugins=TargetUsage,Noisy"],
                ["tune", "--config", str(_write(tmp_path / "loud.yaml", "filter-plugins: [TargetUsage, Noisy]\n")),
                 "--trials", "1", "--space", str(_write(tmp_path / "s.yaml", "target-cpu-usage: {low: 0.3, high: 0.4}\n"))])
    for command in commands if processes == "1" else commands[1:]:
        proc = subprocess.run(
            [sys.executable, "-m", "scaler.cli", *command, "--snapshot", str(LOWREQ), "--trace", str(trace),
             "--workers", processes, "-o", "json"],
            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert mark.exists(), "the plugin was consulted and logged"
        mark.unlink()
        doc = json.loads(proc.stdout)
        assert doc["kind"] in ("ReplayReport", "TuneFrontier")
        if processes == "2":  # the tune's trials ran as Ray tasks
            assert doc["run"]["workers"] == 2 and all(doc["run"]["trialNodes"]), doc["run"]
        assert proc.stderr.splitlines() == [
            "scaler: warning: 6 of 822 pods follow the trace; the other 816 keep the usage of their PodMetrics all along"
        ], proc.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_trace_of_ones_own_needs_a_snapshot_and_the_bundled_example_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --snapshot a long-format trace (a user's own) is refused in one line, naming the
    flag to give; the Bitbrains trace replays over the bundled example, which stderr names; a
    trace no pod follows names the snapshot it was matched against."""
    trace = write_trace(tmp_path, steps=2)
    proc = subprocess.run([sys.executable, "-m", "scaler.cli", "replay", "--trace", str(trace), "--workers", "1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"scaler: error: --trace {trace} needs --snapshot DIR, the cluster its pods run in (from `scaler "
        "snapshot`): without it only the Bitbrains trace replays, over the bundled example\n"
    )
    other = tmp_path / "other.csv"
    other.write_text("timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes\n1,nowhere,x,1,1\n")
    assert main(["replay", "--snapshot", str(LOWREQ), "--trace", str(other), "--workers", "1"]) == 2
    assert f"scaler: error: no pod of the snapshot {LOWREQ} follows a series of the trace" in capsys.readouterr().err
    if not BITBRAINS.exists():
        pytest.skip(f"needs ../shared: {BITBRAINS} is absent")
    argv = ["replay", "--trace", str(BITBRAINS), "--from", "2013-07-08", "--to", "2013-07-08T00:10:00Z",
            "--policies", "scaler", "--workers", "1", "-o", "json"]  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "scaler.cli", *argv], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == f"scaler: no --snapshot: replaying the bundled example {DAY1}"
    assert json.loads(proc.stdout)["snapshot"] == DAY1
    quiet = subprocess.run([sys.executable, "-m", "scaler.cli", *argv, "-q"], capture_output=True, text=True,
                           cwd=ROOT, timeout=300, check=False)  # fmt: skip
    assert "no --snapshot" not in quiet.stderr


def test_range_outside_the_trace_is_an_error_partly_a_warning(tmp_path: Path) -> None:
    first, last, step = float(T0), float(T0 + 11 * 300), 300.0
    assert check_range(first, last, None, None, step) is None
    assert check_range(first, last, first + 600, last + step, step) is None
    assert check_range(first, first, None, None, step) is None, "a trace of one sample covers itself"
    with pytest.raises(UsageError, match=r"--from 2026-11-03T00:00:00Z is outside the trace: the trace covers "
                       r"2026-11-02T00:00:00Z to 2026-11-02T00:55:00Z"):  # fmt: skip
        check_range(first, last, T0 + 86400.0, None, step)
    with pytest.raises(UsageError, match=r"--to 2026-11-01T00:00:00Z is outside the trace"):
        check_range(first, last, None, T0 - 86400.0, step)
    warning = check_range(first, last, T0 - 3600.0, T0 + 86400.0, step)
    assert warning is not None
    assert "--from 2026-11-01T23:00:00Z is before its first sample" in warning
    assert "--to 2026-11-03T00:00:00Z is after its last sample" in warning
    assert "2026-11-02T00:00:00Z to 2026-11-02T00:55:00Z" in warning
    # Through the command: one line, exit 2; a warning on stderr and the replay runs.
    trace = write_trace(tmp_path)
    base = [sys.executable, "-m", "scaler.cli", "replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "scaler", "-o", "json", "--workers", "1"]
    proc = subprocess.run([*base, "--from", "2027-01-01"], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "scaler: error: --from 2027-01-01T00:00:00Z is outside the trace: the trace covers "
        "2026-11-02T00:00:00Z to 2026-11-02T00:55:00Z"
    ]
    proc = subprocess.run([*base, "--from", "2026-11-01T23:00:00Z"], capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("scaler: warning: --from 2026-11-01T23:00:00Z is before its first sample")
    assert json.loads(proc.stdout)["from"] == "2026-11-01T23:00:00Z"


def test_json_report_is_byte_identical_whatever_the_processes(tmp_path: Path) -> None:
    """The same inputs give the same bytes with one worker process or several, and the report
    names its inputs: the snapshot, the trace and the scaler version."""
    trace = write_trace(tmp_path)
    outs = []
    for processes in ("1", "2", "1"):
        out = tmp_path / f"report-{processes}-{len(outs)}.json"
        argv = ["replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "seed,scaler", "--processes", processes,
                "-o", "json", "--out", str(out), "-q"]  # fmt: skip
        assert main(argv) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]
    report = json.loads(outs[0])
    assert report["scalerVersion"] and report["trace"]["path"] == str(trace)
    assert report["snapshot"].endswith("bitbrains-gke-day1") and "elapsedSeconds" not in outs[0].decode()


def test_the_command_says_where_it_wrote_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = write_trace(tmp_path, steps=2)
    out = tmp_path / "r.yaml"
    assert main(["replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "seed", "--processes", "1", "-o", "yaml", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert f"scaler replay: wrote the yaml report to {out}\n" in captured.err
    assert captured.out.startswith("scaler replay: ") and "-o wide" in captured.out
    assert main(["replay", "--snapshot", DAY1, "--trace", str(trace), "--policies", "seed", "--processes", "1", "-o", "wide"]) == 0
    assert "-o wide" not in capsys.readouterr().out, "the wide table does not send the user to -o wide"
