"""Plain aligned columns, the way ``kubectl get`` prints them.

kubectl's printers (``k8s.io/cli-runtime/pkg/printers``, ``GetNewTabWriter``) write through Go's
``text/tabwriter`` with a padding of 3 spaces: upper-case headers, left-aligned cells, no box
drawing, and no cell is ever shortened whatever the terminal width (a line longer than the
terminal wraps in the terminal). :func:`render_columns` does the same; widths are display cells
(:func:`rich.cells.cell_len`), so ``—`` or ``±`` count as one column.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TextIO

from rich.cells import cell_len

__all__ = ["COLUMN_PADDING", "output_width", "render_columns", "wrap_text"]

COLUMN_PADDING = 3
"""Spaces between two columns (kubectl's tabwriter padding)."""


def render_columns(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Align ``rows`` under ``headers``; returns one string per line (header first), no
    trailing spaces. Every cell is printed whole.

    Raises:
        ValueError: a row does not have one cell per header.
    """
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells for {len(headers)} columns: {row!r}")
    widths = [cell_len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], cell_len(cell))
    lines = []
    for row in (headers, *rows):
        parts = [cell + " " * (widths[i] - cell_len(cell) + COLUMN_PADDING) for i, cell in enumerate(row)]
        lines.append("".join(parts).rstrip())
    return lines


def output_width(stream: TextIO | None = None) -> int | None:
    """Columns available for prose on ``stream`` (default stdout): ``$COLUMNS`` when set, else
    the terminal's width, else ``None`` (piped: do not wrap)."""
    stream = sys.stdout if stream is None else stream
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if stream.isatty():
        return shutil.get_terminal_size().columns
    return None


def wrap_text(text: str, width: int | None, indent: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` columns (one line when ``width`` is ``None``);
    continuation lines start with ``indent``. Words are never split (a node name stays whole)."""
    if width is None:
        return [text]
    return textwrap.wrap(
        text, width=max(width, 20), subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    ) or [""]
