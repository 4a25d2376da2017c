"""Run a pure computation in a forked child process while the caller goes on.

``scaler dry-run`` evaluates one snapshot three times (scaler's rule, cluster-autoscaler's rule,
and requests right-sized to usage, :mod:`scaler.report.compare`); the evaluations are CPU-bound
Python and independent, so on a machine with more than one CPU they run side by side: each extra
one in a child forked from the process that holds the snapshot (copy-on-write, nothing is
pickled on the way in), its result pickled back through a pipe.

:class:`Forked` falls back to running the function in the caller, at :meth:`Forked.result`,
when forking is not possible or not safe: no ``os.fork`` (not POSIX), a single CPU, or other
threads running (a fork copies their locks in whatever state they are).
"""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from scaler.errors import ScalerError

__all__ = ["Forked", "ForkedError"]

T = TypeVar("T")


class ForkedError(ScalerError, RuntimeError):
    """The child process died without a result (killed by a signal, out of memory)."""


def _can_fork() -> bool:
    return hasattr(os, "fork") and (os.cpu_count() or 1) > 1 and threading.active_count() == 1


class Forked(Generic[T]):
    """``fn()`` computed in a forked child while the caller goes on.

    ``fn`` must be pure (its only effect is its return value, which must pickle) and must not
    rely on threads. :meth:`result` returns the value, or raises the exception ``fn`` raised,
    as if it had been called there.

    Args:
        fn: the computation.
        parallel: ``False`` never forks (``fn`` runs in :meth:`result`).
    """

    def __init__(self, fn: Callable[[], T], *, parallel: bool = True) -> None:
        self._fn: Callable[[], T] | None = fn
        self._pid = 0
        self._read = -1
        if not (parallel and _can_fork()):
            return
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: compute, send, leave without running the parent's exit code
            os.close(read)
            try:
                try:
                    payload = pickle.dumps((True, fn()), protocol=pickle.HIGHEST_PROTOCOL)
                except BaseException as e:
                    payload = pickle.dumps((False, e), protocol=pickle.HIGHEST_PROTOCOL)
                with os.fdopen(write, "wb") as out:
                    out.write(payload)
            finally:
                os._exit(0)
        os.close(write)
        self._pid, self._read, self._fn = pid, read, None

    @property
    def in_child(self) -> bool:
        """Whether ``fn`` runs in a forked child (``False``: it will run in :meth:`result`)."""
        return self._pid != 0

    def result(self) -> T:
        """The value of ``fn()``; waits for the child.

        Raises:
            ForkedError: the child died without sending a result.
            BaseException: whatever ``fn`` raised.
        """
        if self._fn is not None:
            return self._fn()
        with os.fdopen(self._read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(self._pid, 0)
        self._pid, self._read = 0, -1
        if not data:
            raise ForkedError(f"the forked evaluation died ({_describe(status)})")
        ok, value = pickle.loads(data)
        if not ok:
            raise value
        return value  # type: ignore[no-any-return]

    def __del__(self) -> None:
        """Reap a child whose result was never asked for (an error in the caller)."""
        if self._pid and self._read >= 0:
            try:
                os.kill(self._pid, 9)
                os.waitpid(self._pid, 0)
                os.close(self._read)
            except OSError:
                pass
            self._read = -1


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"
