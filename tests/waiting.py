"""The one poll helper of the test suite: wait until a condition holds, or fail naming it.

A bound on how long to wait is a liveness bound, not a timing assert: it only turns a hang into a
failure, so it is generous (the suite runs on a shared 2-core machine).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["DEFAULT_TIMEOUT", "wait_for"]

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
