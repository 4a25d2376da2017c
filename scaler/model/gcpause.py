"""Pause CPython's cyclic garbage collector around allocation-heavy, cycle-free work.

Parsing a snapshot and evaluating it allocate millions of small objects (decoded JSON, records,
index and journal entries) that form no reference cycles. Each burst of allocations makes the
cyclic collector traverse every live container, the whole snapshot included, again and again:
on a 150,000-pod cluster that is most of the run time. Reference counting frees everything as
usual while the collector is paused; it is resumed, if it was on, when the block ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["no_cycle_collector"]


@contextmanager
def no_cycle_collector() -> Iterator[None]:
    """Run the ``with`` block with the cyclic garbage collector paused (re-entrant)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
