"""The errors of the history path: :class:`HistoryError` and its transient kind.

Every failure of a history source (the server unreachable or too slow, an HTTP error, an answer
that fails validation, credentials that cannot be had) is one of these, with a one-line message
naming the server (its URL redacted) and, for a query, the query. :mod:`scaler.history.prometheus`
re-exports both.
"""

from __future__ import annotations

from scaler.errors import ScalerError, TransientError

__all__ = ["HistoryError", "TransientHistoryError", "one_line", "with_suffix"]


class HistoryError(ScalerError, RuntimeError):
    """Usage history could not be loaded; the message is one line naming the server or file."""


class TransientHistoryError(HistoryError, TransientError):
    """A failure worth retrying: the server is unreachable, or answered HTTP 429 or 5xx
    (overloaded, over quota, restarting, a proxy's gateway error). A call that ran past its
    deadline is not one: a server that trickles its answer would trickle it again."""

    retry_after: float | None = None
    """The server's ``Retry-After`` (seconds), when it sent one (HTTP 429, 503)."""


def one_line(text: object, limit: int = 300) -> str:
    """``text`` on one line (every run of white space one space), cut to ``limit`` characters
    with ``…``."""
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def with_suffix(error: HistoryError, suffix: str) -> HistoryError:
    """A copy of ``error`` (same class, same ``retry_after``) with ``suffix`` added to its
    message (the query that failed, for instance)."""
    out = type(error)(f"{error}{suffix}")
    if isinstance(error, TransientHistoryError) and isinstance(out, TransientHistoryError):
        out.retry_after = error.retry_after
    return out
