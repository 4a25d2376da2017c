"""What every sub-command shares: the one-line usage error, its exit status, the bundled example.

Bad input of any kind (a flag, a config key, a file, an API answer) ends as :class:`UsageError`:
``scaler: error: <message>`` on stderr and exit status :data:`EXIT_BAD_INPUT`, before anything
is done. :mod:`scaler.cli` and :mod:`scaler.replay.cli` both raise it, and neither imports the
other for it.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["EXIT_BAD_INPUT", "UsageError", "bundled_example"]

EXIT_BAD_INPUT = 2
"""Exit status for bad input (flags, config, files, API answers), as Go's flag package uses."""


class UsageError(Exception):
    """Bad input: the message is printed as one line and the exit status is :data:`EXIT_BAD_INPUT`."""


def bundled_example() -> Path:
    """Path of the example snapshot shipped inside the package (``bitbrains-gke-day1``)."""
    return Path(str(resources.files("scaler") / "examples" / "bitbrains-gke-day1"))
