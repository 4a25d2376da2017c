"""What every sub-command shares: the one-line usage error, its exit status, the bundled example.

A bad flag or a bad combination of flags ends as :class:`UsageError`, an
:class:`scaler.errors.InputError`: ``scaler: error: <message>`` on stderr and exit status
:data:`EXIT_BAD_INPUT`, before anything is done. :mod:`scaler.cli`, :mod:`scaler.replay.cli` and
:mod:`scaler.history.cli` all raise it, and none imports another for it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from scaler.errors import EXIT_BAD_INPUT, InputError

__all__ = ["EXIT_BAD_INPUT", "UsageError", "bundled_example"]


class UsageError(InputError):
    """Bad input: the message is printed as one line and the exit status is :data:`EXIT_BAD_INPUT`."""


def bundled_example() -> Path:
    """Path of the example snapshot shipped inside the package (``bitbrains-gke-day1``)."""
    return Path(str(resources.files("scaler") / "examples" / "bitbrains-gke-day1"))
