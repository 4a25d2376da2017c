"""What every sub-command shares: the one-line usage error, its exit status, the bundled example.

A bad flag or a bad combination of flags ends as :class:`UsageError`, an
:class:`scaler.errors.InputError`: ``scaler: error: <message>`` on stderr and exit status
:data:`EXIT_BAD_INPUT`, before anything is done. :mod:`scaler.cli`, :mod:`scaler.replay.cli` and
:mod:`scaler.history.cli` all raise it, and none imports another for it.
"""

from __future__ import annotations

import argparse
import textwrap
from importlib import resources
from pathlib import Path

from scaler.errors import EXIT_BAD_INPUT, InputError

__all__ = ["EXIT_BAD_INPUT", "HelpFormatter", "ParagraphHelpFormatter", "UsageError", "bundled_example"]


class UsageError(InputError):
    """Bad input: the message is printed as one line and the exit status is :data:`EXIT_BAD_INPUT`."""


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` wrapped at the terminal's width (``$COLUMNS`` first) without ever splitting a
    token: a URL, a flag, ``timeZone=ZONE]`` or a hyphenated name stays on one line, even when
    it is longer than the line (the terminal then wraps it), as Go's flag help never cuts a word.

    argparse's own formatter wraps with :func:`textwrap.wrap`'s defaults, which break long words
    and break at hyphens (``https://monitoring.goog`` / ``leapis.com``)."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False) or [""]

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        text = " ".join(text.split())
        return textwrap.fill(
            text,
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_long_words=False,
            break_on_hyphens=False,
        )


class ParagraphHelpFormatter(HelpFormatter):
    """:class:`HelpFormatter` that keeps the description's and epilog's paragraphs (separated by
    blank lines) apart, each filled to the width without splitting a token. In a paragraph, a
    line starting with ``- `` starts a list item, filled with a hanging indent."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        return "\n\n".join(self._fill_paragraph(p, width, indent) for p in paragraphs)

    def _fill_paragraph(self, text: str, width: int, indent: str) -> str:
        parts = text.split("\n- ")
        out = [super()._fill_text(parts[0], width, indent)] if parts[0].strip() else []
        for item in parts[1:]:
            filled = super()._fill_text(item, width - 4, "")
            lines = filled.splitlines()
            out.append("\n".join([f"{indent}  - {lines[0]}", *(f"{indent}    {line}" for line in lines[1:])]))
        return "\n".join(out)


def bundled_example() -> Path:
    """Path of the example snapshot shipped inside the package (``bitbrains-gke-day1``)."""
    return Path(str(resources.files("scaler") / "examples" / "bitbrains-gke-day1"))
