"""The poll helpers of the test suite: wait until a condition holds (:func:`wait_for`), or check
that it keeps holding for a while (:func:`holds_for`); either fails naming the condition.

A bound on how long to wait is a liveness bound, not a timing assert: it only turns a hang into a
failure, so it is generous (the suite runs on a shared 2-core machine). The interval of
:func:`holds_for` is the other kind: the test claims that nothing happens for that long (longer
than a loop, a retry or a lease), so it is as short as that claim allows and always passes in full.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DEFAULT_TIMEOUT", "holds_for", "wait_for"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
"""Seconds a condition may take before the wait fails."""


def wait_for(
    predicate: Callable[[], T], timeout: float = DEFAULT_TIMEOUT, what: str = "condition", poll: float = 0.02
) -> T:
    """Call ``predicate`` every ``poll`` seconds until it returns something truthy, and return
    that value.

    Raises:
        AssertionError: ``timeout`` seconds passed without a truthy value (names ``what``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(poll)


def holds_for(predicate: Callable[[], object], seconds: float, what: str, poll: float = 0.1) -> None:
    """Check ``predicate`` every ``poll`` seconds for ``seconds`` seconds (once at the start and
    once at the end, whatever ``seconds``): the proof that something does not happen. ``what``
    says what holds and why that long (e.g. "no second leader, past the 2 s retry period").

    Raises:
        AssertionError: ``predicate`` returned something falsy (at once, naming ``what`` and when).
    """
    start = time.monotonic()
    deadline = start + max(0.0, seconds)
    while True:
        if not predicate():
            raise AssertionError(f"{what}: broken after {time.monotonic() - start:.1f}s of {seconds:g}s")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(poll, remaining))
