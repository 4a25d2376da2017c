"""Fan independent replays out on Ray: ``scaler replay``'s policies and ``scaler tune``'s trials.

A :class:`Pool` runs one function over many items with one shared input (a
:class:`~scaler.replay.simulate.ReplayInput`), three ways:

* ``workers=1`` and no ``address``: here, one item after the other, without Ray;
* ``workers=N``: on an embedded local Ray started with ``N`` CPUs and no dashboard
  (``ray.init(num_cpus=N, include_dashboard=False)``), stopped when the pool closes;
* ``address``: on an existing Ray cluster (``auto``, ``host:port`` of its GCS, or
  ``ray://host:10001`` through Ray Client), which the pool joins and leaves.

The shared input is put once in Ray's object store (``ray.put``) and each task gets its
reference, so it is shipped to a node once, not once per item; each worker process
deserializes it once and keeps it for the pool's later tasks (a 1,000-node input takes about
half a second to deserialize). The function must therefore not change it, as it must not when
the items run here one after the other. Each task asks one CPU.

What a task reports comes back to this process: ``report(*message)`` calls inside the function
reach the pool's ``progress`` callback (through a Ray queue actor, polled every 0.1 s), and
log records of level WARNING and above emitted during the task are handed to this process's
loggers when the task ends (Ray's own forwarding of worker output is off, so nothing else is
printed). Results come back in the order of the items, whatever order the tasks finished in,
with the Ray node id each ran on.

Sources: Ray's ``ray.init``, ``ray.put``, ``ray.remote``, ``ray.wait``,
``ray.util.queue.Queue`` and ``ray.get_runtime_context`` (docs.ray.io).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from scaler.errors import InputError

__all__ = ["Pool", "RayUnavailable", "TaskDone", "check_address", "workers_phrase"]

S = TypeVar("S")
I = TypeVar("I")  # noqa: E741
R = TypeVar("R")

Report = Callable[..., None]
"""``report(*message)``: hands ``message`` (a tuple of picklable values) to the pool's progress
callback, in the calling process."""


def workers_phrase(count: int) -> str:
    """``count`` workers in words, as the replay's and the tune's output say it: ``1 worker``,
    ``2 workers``."""
    return f"{count} worker{'' if count == 1 else 's'}"


class RayUnavailable(InputError):
    """Ray could not be started or joined; the message is one line naming the address."""


@dataclass(frozen=True, slots=True)
class TaskDone(Generic[R]):
    """One finished item: its index in the items, its result, and the Ray node id it ran on
    (``None`` when it ran in this process)."""

    index: int
    result: R
    node: str | None


class _Collect(logging.Handler):
    """Keeps the records of one task, picklable (message formatted, no args, no exc_info)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg = record.getMessage()
        record.args = None
        if record.exc_info:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.exc_info = None
        self.records.append(record)


_SHARED: dict[str, Any] = {}
"""The shared input this worker process last deserialized, by its object reference's hex id."""


def _shared_input(boxed: list[Any]) -> Any:
    """The shared input of ``boxed`` (a one-element list holding its object reference, so Ray
    leaves it unresolved): deserialized on the first task of a worker process, kept for the next
    ones; the previous pool's input is dropped."""
    import ray

    key = boxed[0].hex()
    if key not in _SHARED:
        _SHARED.clear()
        _SHARED[key] = ray.get(boxed[0])
    return _SHARED[key]


def _run_task(
    fn: Callable[[Any, Any, Report], Any],
    boxed: list[Any],
    item: Any,
    queue: Any,
    index: int,
    log_filter: logging.Filter | None,
) -> tuple[Any, list[logging.LogRecord], str | None]:
    """The body of a Ray task: ``fn(shared, item, report)`` with its log records collected;
    ``boxed`` holds the shared input's object reference (:func:`_shared_input`)."""
    import ray

    shared = _shared_input(boxed)
    collect = _Collect()
    if log_filter is not None:
        collect.addFilter(log_filter)
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [collect]

    def report(*message: Any) -> None:
        if queue is not None:
            queue.put((index, *message))

    try:
        result = fn(shared, item, report)
    finally:
        root.handlers = saved
    return result, collect.records, ray.get_runtime_context().get_node_id()


def check_address(address: str, timeout: float = 3.0) -> None:
    """Fail fast when ``address`` (``host:port`` or ``ray://host:port``) does not accept a TCP
    connection; ``auto`` is left to Ray.

    Raises:
        RayUnavailable: a malformed address, or nothing listening there.
    """
    if address == "auto":
        return
    parts = urlsplit(address if "://" in address else f"gcs://{address}")
    if parts.scheme not in ("ray", "gcs"):
        raise RayUnavailable(f"--ray-address {address}: expected auto, host:port or ray://host:port")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise RayUnavailable(f"--ray-address {address}: expected auto, host:port or ray://host:port")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        raise RayUnavailable(f"--ray-address {address}: no Ray cluster answers ({e.strerror or e})") from None


class Pool(Generic[S]):
    """Runs functions over items with one shared input, here or on Ray (see the module doc).

    Args:
        shared: the input every task reads (put once in Ray's object store).
        workers: CPUs of the embedded local Ray; 1 runs here without Ray (ignored with
            ``address``).
        address: an existing Ray cluster to join, or ``None``.
        progress: called here with every ``report(*message)`` of a task, as ``progress(index,
            *message)``; ``None`` sends no reports.
        log_filter: added to the task's log collector (e.g. to prefix the records).

    Use as a context manager; Ray is started (or joined) on entry and stopped (or left) on exit.

    Raises:
        RayUnavailable: on entry, Ray cannot be started or the address does not answer.
    """

    def __init__(
        self,
        shared: S,
        workers: int,
        address: str | None = None,
        progress: Callable[..., None] | None = None,
        log_filter: logging.Filter | None = None,
    ) -> None:
        self.shared = shared
        self.workers = max(1, workers)
        self.address = address
        self.progress = progress
        self.log_filter = log_filter
        self.local = address is None and self.workers == 1
        self._ray: Any = None
        self._ref: Any = None
        self._queue: Any = None
        self._remote: Any = None
        self._started = False

    def __enter__(self) -> Pool[S]:
        if self.local:
            return self
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        if self.address is not None:
            check_address(self.address)
        else:  # an embedded Ray serves this process alone: loopback, not the host's address
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        import ray

        self._ray = ray
        common: dict[str, Any] = {
            "log_to_driver": False,
            "logging_level": logging.ERROR,
            "configure_logging": True,
        }
        try:
            if self.address is None:
                ray.init(num_cpus=self.workers, include_dashboard=False, **common)
            else:
                self._join(ray, common)
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError, …
            where = f"--ray-address {self.address}" if self.address else "local Ray"
            text = " ".join(str(e).split()) or type(e).__name__
            raise RayUnavailable(f"{where}: cannot start or join Ray: {text[:500]}") from None
        self._started = True
        try:
            self._ref = ray.put(self.shared)
            if self.progress is not None:
                from ray.util.queue import Queue

                self._queue = Queue(actor_options={"num_cpus": 0})
            self._remote = ray.remote(num_cpus=1, max_retries=0)(_run_task)
        except BaseException:
            self.close()
            raise
        return self

    def _join(self, ray: Any, common: dict[str, Any]) -> None:
        """``ray.init(address=…)``; through Ray Client (``ray://``), tried three times, 3 s
        apart: its server answers "Initialization failure from server" while the head is
        still starting the per-client server."""
        attempts = 3 if str(self.address).startswith("ray://") else 1
        for attempt in range(attempts):
            try:
                ray.init(address=self.address, **common)
                return
            except ConnectionError:
                if attempt == attempts - 1:
                    raise
                ray.shutdown()
                time.sleep(3.0)

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the embedded Ray, or leave the cluster (idempotent)."""
        if self._started:
            self._started = False
            self._queue = None
            self._ref = None
            self._ray.shutdown()

    def _drain(self) -> None:
        if self._queue is None or self.progress is None:
            return
        while True:
            n = self._queue.qsize()
            if not n:
                return
            for message in self._queue.get_nowait_batch(n):
                self.progress(*message)

    def map(
        self,
        fn: Callable[[S, I, Report], R],
        items: Sequence[I],
        on_done: Callable[[TaskDone[R]], None] | None = None,
    ) -> list[TaskDone[R]]:
        """Run ``fn(shared, item, report)`` for every item; ``on_done`` is called here as each
        finishes (in finishing order). Returns every item's :class:`TaskDone`, in item order.

        Raises:
            whatever ``fn`` raised (the first failure, after the others were cancelled).
        """
        done: dict[int, TaskDone[R]] = {}
        if self.local:
            for i, item in enumerate(items):

                def report(*message: Any, _i: int = i) -> None:
                    if self.progress is not None:
                        self.progress(_i, *message)

                d = TaskDone(i, fn(self.shared, item, report), None)
                done[i] = d
                if on_done is not None:
                    on_done(d)
            return [done[i] for i in range(len(items))]
        ray = self._ray
        refs = {
            self._remote.remote(fn, [self._ref], item, self._queue, i, self.log_filter): i
            for i, item in enumerate(items)
        }
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1, timeout=0.1)
                self._drain()
                for ref in ready:
                    i = refs[ref]
                    result, records, node = ray.get(ref)
                    for record in records:
                        logging.getLogger(record.name).handle(record)
                    d = TaskDone(i, result, node)
                    done[i] = d
                    if on_done is not None:
                        on_done(d)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        self._drain()
        return [done[i] for i in range(len(items))]
