"""The root of every error scaler raises on purpose, and its two kinds.

Every public exception class of the package derives from :class:`ScalerError`, so an entry point
(``scaler`` and its sub-commands, the controller's runner) catches the root instead of a hand-kept
list. Below it:

- :class:`InputError`: bad input of any kind (a flag, a config key, a snapshot or trace file, an
  API answer, a missing metric). The entry point prints it as one line,
  ``scaler: error: <message>``, and exits with :data:`EXIT_BAD_INPUT` before anything is done.
- :class:`TransientError`: a failure that may pass by itself (the cluster or the metadata server
  unreachable, a Prometheus that times out). A loop retries on its next pass; a one-shot command
  reports it.

The classes that were ``ValueError`` or ``RuntimeError`` before keep that base as well (for
example ``class ConfigError(InputError, ValueError)``), so a caller catching ``ValueError`` still
catches them. This module imports nothing from scaler: it is the lowest layer.
"""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILURE", "InputError", "ScalerError", "TransientError", "one_line"]

EXIT_BAD_INPUT = 2
"""Exit status for bad input (flags, config, files, API answers), as Go's flag package uses."""

EXIT_FAILURE = 1
"""Exit status for any other error scaler reports (a cloud or API failure that did not pass)."""


class ScalerError(Exception):
    """Root of every error scaler raises on purpose; its message is one line for an operator."""


class InputError(ScalerError):
    """Bad input: printed as one line naming the bad value; exit status :data:`EXIT_BAD_INPUT`."""


class TransientError(ScalerError):
    """A failure that may pass by itself (unreachable, timed out): retried by a loop."""


def one_line(error: BaseException) -> str:
    """``error``'s message with every run of white space (new lines included) made one space."""
    return " ".join(str(error).split())
