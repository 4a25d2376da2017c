"""Flags behave like cluster-autoscaler's Go flags: no abbreviations, the closest flag suggested
for an unknown one, Go durations and enum choices in ``--help``, ``dry-run --help`` limited to
the flags a dry-run reads, ``--version``, and ``nan`` refused as not a number."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Literal, get_args, get_origin

import pytest

from scaler import cli, planner
from scaler.cli import main
from scaler.config import DRY_RUN_KEYS, DURATION_KEYS, ScalerConfig, flag_name
from scaler.model.times import format_duration

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "scaler" / "examples" / "bitbrains-gke-day1")


def error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("scaler: error: "), err
    return lines[0]


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["dry-run", "--snapshot", EXAMPLE, "--scale-down-util=0.3"], "--scale-down-utilization-threshold"),
        (["dry-run", "--snapshot", EXAMPLE, "--target-cpu", "0.3"], "--target-cpu-usage"),
        (["dry-run", "--snapshot", EXAMPLE, "--outpt", "json"], "--output"),
        (["dry-run", "--snapshot", EXAMPLE, "--skip-nodes-with-local-storag=false"], "--skip-nodes-with-local-storage"),
        (["run", "--scan-int=5s"], "--scan-interval"),
        (["run", "--scale-down-delay-after-ad", "1m"], "--scale-down-delay-after-add"),
        (["snapshot", "--out", "x", "--overwr"], "--overwrite"),
        (["replay", "--trace", "t.csv", "--proc", "2"], "--processes"),
        (["replay", "--trace", "t.csv", "--stp", "5m"], "--step"),
    ],
)  # fmt: skip
def test_no_abbreviations_and_the_closest_flag_is_suggested(
    capsys: pytest.CaptureFixture[str], argv: list[str], suggestion: str
) -> None:
    line = error_line(capsys, *argv)
    typo = next(a for a in argv if a.startswith("--") and suggestion not in a and a.split("=")[0] not in (
        "--snapshot", "--out", "--trace"))  # fmt: skip
    assert f"unknown flag {typo.split('=')[0]}" in line
    assert line.endswith(f"(did you mean {suggestion}?)")


def test_unknown_flags_without_a_close_one_and_stray_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert error_line(capsys, "dry-run", "--no-such-flag") == "scaler: error: unknown flag --no-such-flag"
    assert error_line(capsys, "dry-run", "-o", "json", "extra", "--snapshot", EXAMPLE).startswith(
        "scaler: error: unexpected argument"
    )
    line = error_line(capsys, "dry-run", "--scale-down-unneeded-time=5m")
    assert (
        line
        == "scaler: error: unknown flag --scale-down-unneeded-time: it only affects `scaler run`, not a dry-run"
    )


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"scaler {version('gke-scaler')}"
    proc = subprocess.run(
        [sys.executable, "-m", "scaler.cli", "--version"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0 and proc.stdout.strip() == f"scaler {version('gke-scaler')}"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (5, "5s"), (10, "10s"), (90, "1m30s"), (120, "2m0s"), (600, "10m0s"), (3600, "1h0m0s"),
     (5400, "1h30m0s"), (2.5, "2.5s"), (0.5, "500ms"), (0.0015, "1.5ms"), (86400, "24h0m0s")],
)  # fmt: skip
def test_help_durations_are_time_duration_strings(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_help_shows_go_durations_and_the_choices_of_every_enum_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_help = help_text(capsys, "run")
    defaults = ScalerConfig()
    for key in DURATION_KEYS:
        flag = "--" + key.replace("_", "-")
        assert re.search(
            rf"{flag} duration .*?\(default {re.escape(format_duration(getattr(defaults, key)))}\)", run_help
        ), flag
    assert "(default 10m0s)" in run_help and "(default 1h0m0s)" in run_help
    assert "600.0" not in run_help and "3600.0" not in run_help, "durations in seconds"
    for key, field in ScalerConfig.model_fields.items():
        if get_origin(field.annotation) is Literal:
            choices = ",".join(get_args(field.annotation))
            assert f"--{key.replace('_', '-')} {{{choices}}}" in run_help, key
        if field.annotation is bool:
            assert f"--{key.replace('_', '-')} [true|false]" in run_help, key
    assert "--output {table,wide,json,yaml}" in help_text(capsys, "dry-run")
    assert "--output {table,wide,json,yaml,html}" in help_text(capsys, "replay")
    assert "(default 5m0s)" in help_text(capsys, "replay")


def _keys_read(sources: list[str]) -> set[str]:
    """Configuration keys read in ``sources``: ``config.<key>`` or ``cfg.<key>``, and per-pool
    values read as ``config.for_pool(...).<key>`` or through a variable bound to ``for_pool``."""
    fields = set(ScalerConfig.model_fields)
    found = set()
    for text in sources:
        names = set(re.findall(r"\b(?:config|cfg)\.([a-z_]+)\b", text))
        names |= set(re.findall(r"for_pool\([^)]*\)\.([a-z_]+)", text))
        for var in re.findall(r"\b(\w+) = \w+(?:\.config)?\.for_pool\(", text):
            names |= set(re.findall(rf"\b{var}\.([a-z_]+)", text))
        found |= names & fields
    return found


def test_dry_run_help_shows_exactly_the_flags_an_evaluation_reads(capsys: pytest.CaptureFixture[str]) -> None:
    # Everything scaler dry-run runs: utilization, eligibility, drain rules, simulation, the
    # plugins it loads, the history it may read, the budgets that hold nodes, hot-node relief,
    # and the command itself (the price table).
    files = [
        ROOT / "scaler" / f
        for f in ("engine.py", "eligibility.py", "limits.py", "utilization.py", "budgets.py", "relief.py")
    ]
    for folder in ("scaler/drain", "scaler/simulator", "scaler/history", "plugins"):
        files += sorted((ROOT / folder).rglob("*.py"))
    functions = [planner.relief_admission, cli._dry_run, cli._report, cli._prices, cli._cloud_limits]
    sources = [f.read_text() for f in files] + [inspect.getsource(f) for f in functions]
    # --cloud-provider gke and the cluster's names: the node-pool limits read from GKE.
    cloud = {"cloud_provider", "gke_project", "gke_location", "gke_cluster"}
    assert _keys_read(sources) == set(DRY_RUN_KEYS) | cloud
    dry_help = help_text(capsys, "dry-run")  # node-pools is a config-file key: no flag
    flags = {k: f for k in ScalerConfig.model_fields if (f := flag_name(k)) is not None}
    shown = {k for k, f in flags.items() if f + " " in dry_help}
    assert shown == (set(DRY_RUN_KEYS) | cloud) - {"node_pools"}
    run_help = help_text(capsys, "run")
    assert all(f + " " in run_help for f in flags.values())


@pytest.mark.parametrize("value", ["nan", "NaN", "-nan"])
def test_nan_is_not_a_number(capsys: pytest.CaptureFixture[str], value: str) -> None:
    line = error_line(capsys, "dry-run", "--snapshot", EXAMPLE, f"--scale-down-utilization-threshold={value}")
    assert (
        line == f"scaler: error: invalid value {value!r} for scale-down-utilization-threshold: not a number"
    )
    line = error_line(capsys, "dry-run", "--snapshot", EXAMPLE, "--target-cpu-usage", "inf")
    assert line.endswith("target-cpu-usage: not a finite number")


def test_nan_in_the_config_file_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("portrait-quantile: .nan\n")
    line = error_line(capsys, "dry-run", "--snapshot", EXAMPLE, "--config", str(cfg))
    assert line.endswith("for portrait-quantile: not a number")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--leader-elect-renew-deadline=20s"],
         "invalid value '20s' for leader-elect-renew-deadline: must be shorter than --leader-elect-lease-duration (15s)"),
        (["--leader-elect-lease-duration=8s"],
         "invalid value 10s (the default) for leader-elect-renew-deadline: must be shorter than --leader-elect-lease-duration (8s)"),
        (["--leader-elect-retry-period=10s"],
         "invalid value '10s' for leader-elect-retry-period: must be shorter than --leader-elect-renew-deadline (10s)"),
        (["--leader-elect-retry-period=0s"], "invalid value '0s' for leader-elect-retry-period: "),
    ],
)  # fmt: skip
def test_lease_timings_out_of_order_are_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """client-go's rules (NewLeaderElector): renew deadline < lease duration, retry period <
    renew deadline; refused before anything is contacted (no --kubeconfig is needed)."""
    assert error_line(capsys, "run", *argv).startswith(f"scaler: error: {message}")
