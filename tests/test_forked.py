"""scaler.forked.Forked: a computation in a forked child, its value or exception handed back."""

from __future__ import annotations

import os
import select
import signal
import threading

import pytest
from waiting import wait_for

from scaler.forked import Forked, ForkedError

needs_fork = pytest.mark.skipif(not hasattr(os, "fork") or (os.cpu_count() or 1) < 2, reason="needs fork and 2 CPUs")


@pytest.fixture(autouse=True)
def _only_this_thread() -> None:
    """Forked falls back to running in the caller while other threads run; wait for the ones an
    earlier test left (a fake server's last connection) to end, and name any that do not."""
    try:
        wait_for(lambda: threading.active_count() == 1, 15, "the other threads to end")
    except AssertionError:
        others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
        raise AssertionError(f"threads left running by an earlier test: {others}") from None


@needs_fork
def test_the_value_comes_from_a_child_process() -> None:
    parent = os.getpid()
    job = Forked(os.getpid)
    assert job.in_child
    assert job.result() != parent  # computed elsewhere


@needs_fork
def test_large_values_and_exceptions_come_back() -> None:
    big = Forked(lambda: list(range(300_000)))  # far beyond a pipe's buffer
    assert big.result() == list(range(300_000))

    def boom() -> int:
        raise ValueError("bad plugin 'X'")

    with pytest.raises(ValueError, match="bad plugin 'X'"):
        Forked(boom).result()


@needs_fork
def test_runs_beside_the_caller() -> None:
    """The child waits for a byte the caller writes only after ``Forked`` returned: run in the
    caller instead, it would read nothing (the job answers 0 after its own bound)."""
    read_end, write_end = os.pipe()

    def child() -> int:
        ready, _, _ = select.select([read_end], [], [], 30)
        return 1 if ready and os.read(read_end, 1) == b"x" else 0

    try:
        job = Forked(child)
        os.write(write_end, b"x")  # the caller's own work, meanwhile
        assert job.result() == 1
    finally:
        os.close(read_end)
        os.close(write_end)


@needs_fork
def test_a_child_that_dies_is_an_error() -> None:
    def die() -> int:
        os.kill(os.getpid(), signal.SIGKILL)
        return 0

    job = Forked(die)
    assert job.in_child  # never run die() in pytest's own process
    with pytest.raises(ForkedError, match="signal 9"):
        job.result()


def test_serial_without_fork_or_with_threads_running() -> None:
    parent = os.getpid()
    serial = Forked(os.getpid, parallel=False)
    assert not serial.in_child
    assert serial.result() == parent
    stop = threading.Event()
    t = threading.Thread(target=stop.wait)
    t.start()
    try:  # another thread runs: a fork would copy its locks, so the value is computed here
        assert Forked(os.getpid).result() == parent
    finally:
        stop.set()
        t.join()
