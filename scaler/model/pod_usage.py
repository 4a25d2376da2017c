"""PodMetrics of many pods held as columns: one array per resource, one row per pod.

A source that knows every pod's usage as arrays (the replay's world: one usage slot per pod)
gives its snapshots a :class:`PodMetricsColumns` instead of a dict of :class:`PodMetrics`: it
is read as the same mapping (a record is made when a pod is first read), and code that sums
many pods' readings (a node's pods' PodMetrics, the usage history) reads the columns directly,
by row. A row number stays the pod's while the columns' ``layout`` is the same object, so
callers may keep rows from one snapshot to the next.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

from scaler.model.records import PodMetrics

__all__ = ["PodMetricsColumns"]

PodKey = tuple[str, str]
IntArray = npt.NDArray[np.int64]


class PodMetricsColumns(Mapping[PodKey, PodMetrics]):
    """PodMetrics by ``(namespace, name)``, all taken at ``timestamp`` over ``window_seconds``.

    Args:
        rows: ``(namespace, name)`` → row, for the pods that have a reading (read it, never
            change it: the mapping is the source's).
        cpu, memory: per row, CPU millicores and memory bytes (int64; rows of pods without a
            reading hold anything).
        timestamp, window_seconds: the readings' time (Unix seconds) and window (seconds).
        layout: an object that stays the same while ``rows`` maps the same keys to the same
            rows.
    """

    __slots__ = ("_made", "cpu", "layout", "memory", "rows", "timestamp", "window_seconds")

    def __init__(
        self,
        rows: Mapping[PodKey, int],
        cpu: IntArray,
        memory: IntArray,
        timestamp: float,
        window_seconds: float,
        layout: object,
    ) -> None:
        self.rows = rows
        self.cpu = cpu
        self.memory = memory
        self.timestamp = timestamp
        self.window_seconds = window_seconds
        self.layout = layout
        self._made: dict[int, PodMetrics] = {}

    def __getitem__(self, key: PodKey) -> PodMetrics:
        made = self.get(key)
        if made is None:
            raise KeyError(key)
        return made

    def get(self, key: PodKey, default: PodMetrics | None = None) -> PodMetrics | None:  # type: ignore[override]
        """The reading of ``key``, ``default`` without one (one look-up of ``rows``)."""
        row = self.rows.get(key)
        if row is None:
            return default
        made = self._made.get(row)
        if made is None or (made.namespace, made.name) != key:
            made = self._made[row] = PodMetrics(
                key[0], key[1], self.timestamp, self.window_seconds, int(self.cpu[row]), int(self.memory[row])
            )
        return made

    def __contains__(self, key: object) -> bool:
        return key in self.rows

    def __iter__(self) -> Iterator[PodKey]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def sums(self, rows: npt.NDArray[np.intp], offsets: npt.NDArray[np.intp]) -> tuple[IntArray, IntArray]:
        """The summed CPU and memory of consecutive groups of ``rows``: group ``i`` is
        ``rows[offsets[i]:offsets[i + 1]]`` (e.g. the pods of each node); a row -1 (a pod
        without a reading) adds nothing. Exact int64 sums."""
        missing = rows < 0
        at = np.where(missing, 0, rows) if missing.any() else rows
        cpu = np.concatenate(([0], np.cumsum(np.where(missing, 0, self.cpu[at]), dtype=np.int64)))
        mem = np.concatenate(([0], np.cumsum(np.where(missing, 0, self.memory[at]), dtype=np.int64)))
        return cpu[offsets[1:]] - cpu[offsets[:-1]], mem[offsets[1:]] - mem[offsets[:-1]]
