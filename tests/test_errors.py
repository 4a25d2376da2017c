"""One error root: every public exception class of ``scaler`` derives from ``ScalerError``, and
the entry point turns any ``InputError`` into one line and exit status 2."""

from __future__ import annotations

import importlib
import pkgutil

import scaler
from scaler.cli import main
from scaler.errors import EXIT_BAD_INPUT, InputError, ScalerError, TransientError


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(scaler.__path__, "scaler."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_public_exception_has_the_root() -> None:
    found = _public_exceptions()
    assert len(found) >= 32
    assert [name for name, cls in sorted(found.items()) if not issubclass(cls, ScalerError)] == []


def test_former_bases_are_kept() -> None:
    """A caller catching ``ValueError`` or ``RuntimeError`` still catches what it caught."""
    from scaler.config import ConfigError
    from scaler.history.prometheus import TransientHistoryError
    from scaler.sources.kube import ClusterUnreachable, LiveSourceError

    assert issubclass(ConfigError, InputError) and issubclass(ConfigError, ValueError)
    assert issubclass(LiveSourceError, InputError) and issubclass(LiveSourceError, ValueError)
    assert issubclass(TransientHistoryError, TransientError) and issubclass(TransientHistoryError, RuntimeError)
    assert issubclass(ClusterUnreachable, TransientError)


def test_an_input_error_from_below_is_one_line_and_exit_2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A snapshot file that is not a snapshot: the error raised deep in the model layer reaches
    ``main`` through the root, as one line naming the file, exit 2."""
    (tmp_path / "nodes.json").write_text("{not json", encoding="utf-8")
    assert main(["dry-run", "--snapshot", str(tmp_path)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("scaler: error: ") and err.count("\n") == 1
