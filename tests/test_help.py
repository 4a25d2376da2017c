"""``--help`` of every command: no token split at 80 columns, one metavar per flag across
commands, help texts that say what the code does."""

from __future__ import annotations

import argparse

import pytest

from scaler.cli import _commands, build_parser, main


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser whose help a user can print, by command line (``history export`` included)."""
    top = build_parser()
    out = {"": top}
    for name, sub in _commands(top).items():
        out[name] = sub
        for inner, p in _commands(sub).items():
            out[f"{name} {inner}"] = p
    return out


def _help(capsys: pytest.CaptureFixture[str], command: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        main([*command.split(), "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(_parsers()))
def test_help_at_80_columns_never_splits_a_token(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = _help(capsys, command)
    lines = text.splitlines()
    tokens = {
        t
        for a in _parsers()[command]._actions
        if a.help and a.help != argparse.SUPPRESS
        for t in (a.help % {"default": a.default} if "%(" in a.help else a.help.replace("%%", "%")).split()
    }
    assert tokens
    split = [t for t in tokens if not any(t in line for line in lines)]
    assert not split, f"scaler {command} --help splits {split[:5]}"
    # Words are kept whole; only a token longer than the line itself may pass the 80 columns.
    for line in lines:
        if len(line) > 80:
            assert len(line.split()[-1]) > 80 - 24, line


def test_a_url_and_a_budget_spec_stay_whole(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    text = _help(capsys, "dry-run")
    assert "https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus" in text
    assert "[;timeZone=ZONE]" in text
    assert "--scale-down-unneeded-time" in _help(capsys, "run")


def _metavars() -> dict[str, dict[str, str]]:
    """Long flag -> command -> how its value is shown (``{a,b}`` for choices)."""
    out: dict[str, dict[str, str]] = {}
    for command, parser in _parsers().items():
        formatter = parser._get_formatter()
        for a in parser._actions:
            if a.help == argparse.SUPPRESS or a.nargs == 0 or not a.option_strings:
                continue
            shown = formatter._format_args(a, formatter._get_default_metavar_for_optional(a))
            for flag in a.option_strings:
                if flag.startswith("--"):
                    out.setdefault(flag, {})[command] = shown
    return out


def test_every_value_has_a_chosen_metavar_never_the_raw_dest() -> None:
    # argparse shows dest.upper() (PROVISION_DELAY, PROCESSES) for a flag without a metavar.
    raw = [
        (command, a.option_strings[-1])
        for command, parser in _parsers().items()
        for a in parser._actions
        if a.option_strings and a.nargs != 0 and a.help != argparse.SUPPRESS
        if a.metavar is None and a.choices is None
    ]
    assert not raw, raw


# --out is a directory for `scaler snapshot` and a file for `replay` and `history export`.
DIFFERENT_BY_DESIGN = {"--out"}


def test_the_same_flag_shows_the_same_metavar_in_every_command() -> None:
    differ = {
        flag: by_command
        for flag, by_command in _metavars().items()
        if flag not in DIFFERENT_BY_DESIGN and len(set(by_command.values())) > 1 and flag != "--output"
    }
    assert not differ, differ
    shared = _metavars()
    assert shared["--prices"] == {"dry-run": "FILE", "why": "FILE", "run": "FILE", "replay": "FILE", "tune": "FILE"}
    assert set(shared["--prometheus-url"].values()) == {"URL"}


def test_target_usage_help_states_the_max_of_request_and_usage() -> None:
    # TargetUsage counts every pod by max(request, real usage) (plugins/target_usage.py).
    for command in ("dry-run", "run"):
        helps = {o: a.help or "" for a in _parsers()[command]._actions for o in a.option_strings}
        for flag in ("--target-cpu-usage", "--target-memory-usage"):
            assert "max(request, real usage)" in helps[flag], (command, flag)
            assert "moved requests" not in helps[flag]


def test_history_export_help_shows_the_queries_it_sends(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.history.usage_metrics import CADVISOR, GKE_SYSTEM

    with pytest.raises(SystemExit):
        main(["history", "export", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for query in (CADVISOR.cpu_query(), CADVISOR.memory_query(), GKE_SYSTEM.cpu_query(), GKE_SYSTEM.memory_query()):
        assert query in text
