"""Usage on a regular time grid, loaded straight into per-series columns: how an export of
``scaler history export`` (or ``scaler replay --prometheus-url``'s cache) is read.

An export's samples sit on one grid, ``from + k·step`` (its Parquet metadata says ``from``,
``to`` and ``step``). :func:`load_grid` reads it row group by row group into two matrices, one
row per series and one column per step (column-major, so one step of every series is one
contiguous block: what the replay reads each step), without ever holding the rows:

* the first pass reads only the two name columns (dictionary-encoded) to learn the series;
* the second writes each batch's values into their cells (CPU millicores, memory bytes; rows
  of the same series and instant are added up, as the long format says);
* a pass over the columns then fills each series' missing steps with its last sample (before
  its first sample, the first one): the sample-and-hold rule of
  :func:`scaler.replay.traces.resample`, applied once. Which steps inside a series' life had no
  sample is kept (:attr:`GridUsage.gaps`), so :meth:`GridUsage.series` gives exactly the samples
  of the file.

**Precision.** A matrix is float32 where that loses nothing: every value of the file is exactly
a float32 (memory in bytes is a whole number of 4 KiB pages for cgroups, exactly a float32 up to
64 GiB per pod), else float64 (CPU rates are arbitrary doubles). So a figure never depends on
the format: the replay reads the same numbers as from a CSV. A month of 30,000 pods at 5-minute
steps (8,640 steps) is 259 million cells: 12 bytes each, about 3.1 GB.

**On disk.** When the matrices would take more than :func:`memory_limit` bytes (40% of the
machine's memory), they live in a file beside the trace instead (memory-mapped, unlinked at
once: the kernel pages columns in and out as the replay reads them, and nothing is left behind):
a month of 150,000 pods (15.5 GB) replays on a machine with less memory than that. Such a
table is meant for a replay in one process (``--workers 1``): a Ray worker would receive a copy.

A file whose timestamps are not on its grid, or with an invalid value, is not read here:
:func:`load_grid` returns ``None`` and the caller reads it as any long-format file (which names
the bad row).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from scaler.replay.sim_records import UsageTable

__all__ = ["GridSeries", "GridUsage", "load_grid", "memory_limit", "sums_in_order"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Matrix = npt.NDArray[Any]

_BATCH_ROWS = 1 << 20
_LUT_CELLS = 1 << 24  # dictionary pairs looked up through a table (128 MiB at most)
_TOLERANCE = 1e-3  # seconds: exports stamp instants in milliseconds


def memory_limit() -> int:
    """Bytes of matrices held in memory before they go to disk: 40% of the physical memory."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 << 30
    return int(total * 0.4)


@dataclass(frozen=True, slots=True)
class GridUsage:
    """Per-series usage on a regular grid (see the module doc).

    Attributes:
        times: the grid, Unix seconds, ascending, evenly spaced.
        names: series names (``namespace/pod``), sorted; row ``i`` is ``names[i]``.
        cpu: CPU millicores, shape ``(len(names), len(times))``, column-major, held between
            samples; float32 or float64 (module doc).
        memory: memory bytes, same shape and layout.
        first, last: per series, the steps of its first and last sample.
        gaps: row → the steps inside ``(first, last)`` without a sample (rows with none absent).
        on_disk: the matrices are memory-mapped from an unlinked file.
    """

    times: FloatArray
    names: tuple[str, ...]
    cpu: Matrix
    memory: Matrix
    first: IntArray
    last: IntArray
    gaps: Mapping[int, IntArray] = field(default_factory=dict)
    on_disk: bool = False

    def samples(self, row: int) -> tuple[FloatArray, Matrix, Matrix]:
        """``(times, cpu, memory)`` of ``row``'s samples only (views of the matrices; a copy
        where the series has gaps)."""
        f, last = int(self.first[row]), int(self.last[row])
        times, cpu, mem = (
            self.times[f : last + 1],
            self.cpu[row, f : last + 1],
            self.memory[row, f : last + 1],
        )
        missing = self.gaps.get(row)
        if missing is not None and len(missing):
            keep = np.ones(last - f + 1, dtype=np.bool_)
            keep[missing - f] = False
            times, cpu, mem = times[keep], cpu[keep], mem[keep]
        return times, cpu, mem

    def usage_table(self, used: Collection[str], grid: FloatArray) -> UsageTable | None:
        """The replay's usage table of the ``used`` series on ``grid``, read from the matrices:
        a view when ``used`` is every series (no copy), else a copy of their rows; ``None`` when
        ``grid`` is not a run of this grid's steps or a name is not a series here (the caller
        resamples series by series)."""
        n = len(grid)
        if n == 0 or len(self.times) == 0:
            return None
        step = float(self.times[1] - self.times[0]) if len(self.times) > 1 else 0.0
        a = int(np.searchsorted(self.times, float(grid[0]) - _TOLERANCE))
        if a + n > len(self.times) or not np.allclose(self.times[a : a + n], grid, rtol=0.0, atol=_TOLERANCE):
            return None
        if n > 1 and step and not np.isclose(float(grid[1] - grid[0]), step, rtol=0.0, atol=_TOLERANCE):
            return None
        index = {name: i for i, name in enumerate(self.names)}
        names = tuple(sorted(used))
        if any(name not in index for name in names):
            return None
        rows = np.asarray([index[name] for name in names], dtype=np.int64)
        if len(rows) == len(self.names):  # every series, in order: views
            cpu, mem = self.cpu[:, a : a + n], self.memory[:, a : a + n]
        else:
            cpu, mem = _rows(self.cpu, rows, a, n), _rows(self.memory, rows, a, n)
        first = self.times[self.first[rows]].astype(np.float64)
        return UsageTable(np.asarray(grid, dtype=np.float64), names, cpu, mem, first)


class GridSeries(Mapping[str, Any]):
    """A :class:`GridUsage`'s series by name, each built when asked by ``make(times, cpu,
    memory)`` from :meth:`GridUsage.samples` (:class:`scaler.replay.traces.Series`)."""

    def __init__(self, grid: GridUsage, make: Callable[..., Any]) -> None:
        self.grid = grid
        self.make = make
        self._index = {name: i for i, name in enumerate(grid.names)}

    def __getitem__(self, name: str) -> Any:
        return self.make(*self.grid.samples(self._index[name]))

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self.grid.names)

    def __len__(self) -> int:
        return len(self.grid.names)


def _rows(matrix: Matrix, rows: IntArray, a: int, n: int) -> Matrix:
    """``matrix[rows, a:a+n]`` as a new column-major matrix, copied a block of columns at a time."""
    out = np.empty((len(rows), n), dtype=matrix.dtype, order="F")
    block = max(1, (64 << 20) // max(1, matrix.shape[0] * matrix.itemsize))
    for j in range(0, n, block):
        k = min(n, j + block)
        out[:, j:k] = matrix[:, a + j : a + k][rows]
    return out


class _Store:
    """Where the matrices live: memory, or unlinked files beside the trace (module doc)."""

    def __init__(self, on_disk: bool, directory: Path) -> None:
        self.on_disk = on_disk
        self.directory = directory

    def alloc(self, shape: tuple[int, int], dtype: type[np.floating[Any]]) -> Matrix:
        """A NaN-filled column-major matrix."""
        if not self.on_disk:
            return np.full(shape, np.nan, dtype=dtype, order="F")
        try:
            fd, name = tempfile.mkstemp(prefix=".scaler-grid-", dir=self.directory)
        except OSError:
            fd, name = tempfile.mkstemp(prefix=".scaler-grid-")
        try:
            size = int(np.prod(shape)) * np.dtype(dtype).itemsize
            os.ftruncate(fd, size)
            m = np.memmap(name, dtype=dtype, mode="r+", shape=shape, order="F")
        finally:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name)  # the mapping keeps the file; nothing is left behind
        for j in range(0, shape[1], 256):
            m[:, j : j + 256] = np.nan
        return m

    def widen(self, matrix: Matrix) -> Matrix:
        """``matrix`` as float64 (a float32 matrix met a value float32 cannot hold)."""
        out = self.alloc(matrix.shape, np.float64)
        for j in range(0, matrix.shape[1], 256):
            out[:, j : j + 256] = matrix[:, j : j + 256]
        return out


def load_grid(
    pf: Any,
    columns: list[str],
    meta: Mapping[str, str],
    source: str,
    seconds: Callable[[Any], FloatArray | None],
    on_disk: bool | None = None,
) -> GridUsage | None:
    """Read the long-format Parquet file ``pf`` (a ``pyarrow.parquet.ParquetFile``; ``columns``
    its columns in :data:`scaler.replay.traces.LONG_COLUMNS` order) onto the grid its ``meta``
    names (``from_seconds``, ``to_seconds``, ``step_seconds``), as the module doc says.
    ``seconds`` reads a timestamp column as Unix seconds (``None`` when it cannot);
    ``on_disk``: ``None`` decides by size (:func:`memory_limit`).

    Returns ``None`` when the file does not fit its grid or holds an invalid value (the caller
    reads it the general way).

    Raises:
        pyarrow.ArrowException, OSError: the file cannot be read.
    """
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    try:
        t0, t1, step = (float(meta[k]) for k in ("from_seconds", "to_seconds", "step_seconds"))
    except (KeyError, ValueError):
        return None
    if not (step > 0 and t1 >= t0 and np.isfinite(t0 + t1 + step)):
        return None
    steps = round((t1 - t0) / step) + 1
    times = t0 + step * np.arange(steps, dtype=np.float64)

    names = _Names(columns[1:3])
    try:
        for batch in _batches(pf, columns[1:3]):
            names.rows(batch)
        ordered = tuple(sorted(names.index))
        if not ordered:
            return None
        names = _Names(columns[1:3], {n: i for i, n in enumerate(ordered)})
        size = len(ordered) * steps * 12
        store = _Store(size > memory_limit() if on_disk is None else on_disk, Path(source).parent)
        dtypes: list[type[np.floating[Any]]] = [np.float32, np.float32]
        mats: list[Matrix] = []
        for batch in _batches(pf, columns):
            if batch.num_rows == 0:
                continue
            t = seconds(batch.column(batch.schema.get_field_index(columns[0])))
            if t is None:
                raise _NotGrid
            k = np.rint((t - t0) / step)
            if not (np.all(np.abs(t - (t0 + k * step)) <= _TOLERANCE) and k.min() >= 0 and k.max() < steps):
                raise _NotGrid
            rows, k, order, start = _cells(names.rows(batch), k.astype(np.int64))
            values = [v if order is None else v[order] for v in _usage_columns(batch, columns)]
            # Each cell's samples of this batch added up in file order, after what it holds.
            held = [m[rows, k] for m in mats] if mats else [None] * len(values)
            values = [sums_in_order(v, start, h) for v, h in zip(values, held, strict=True)]
            if not mats:  # the first batch decides float32 or float64; a later one may widen
                for i, v in enumerate(values):
                    if not _exact32(v):
                        dtypes[i] = np.float64
                mats = [store.alloc((len(ordered), steps), d) for d in dtypes]
            for i, v in enumerate(values):
                if mats[i].dtype == np.float32 and not _exact32(v):
                    mats[i] = store.widen(mats[i])
            for m, v in zip(mats, values, strict=True):
                m[rows, k] = v
    except _NotGrid:
        return None
    except (pa.ArrowInvalid, ValueError):
        return None
    first, last = _span(mats[0])
    gaps = _fill(mats, first, last)
    return GridUsage(times, ordered, mats[0], mats[1], first, last, gaps, store.on_disk)


class _Names:
    """Each row's series (``namespace/pod``, trimmed) as a row number, from the two name columns
    of a batch: their dictionary codes looked up once per distinct pair, the lookups kept while
    the batches' dictionaries stay the same (an export's row groups share them). Without
    ``index``, new names are numbered as they come (the first pass)."""

    def __init__(self, columns: list[str], index: dict[str, int] | None = None) -> None:
        self.columns = columns
        self.fixed = index is not None
        self.index: dict[str, int] = index if index is not None else {}
        self._dicts: tuple[Any, Any] | None = None
        self._lut = np.empty(0, dtype=np.int64)

    def rows(self, batch: Any) -> IntArray:
        """The row number of each row of ``batch``.

        Raises:
            _NotGrid: a null or empty name (the caller reads the file the general way).
        """
        import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import pyarrow.compute as pc  # type: ignore[import-untyped,import-not-found,unused-ignore]

        parts = []
        for name in self.columns:
            c = batch.column(batch.schema.get_field_index(name))
            if c.null_count:
                raise _NotGrid
            parts.append(c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c))
        (ns_dict, ns_idx), (pod_dict, pod_idx) = ((p.dictionary, p.indices) for p in parts)
        if self._dicts is None or not (self._dicts[0].equals(ns_dict) and self._dicts[1].equals(pod_dict)):
            self._dicts = (ns_dict, pod_dict)
            self._ns = [str(x).strip() for x in ns_dict.to_pylist()]
            self._pod = [str(x).strip() for x in pod_dict.to_pylist()]
            pairs = len(self._ns) * len(self._pod)
            self._lut = np.full(pairs if pairs <= _LUT_CELLS else 0, -1, dtype=np.int64)
        width = max(1, len(self._pod))
        codes = np.asarray(ns_idx.to_numpy(zero_copy_only=False), dtype=np.int64) * width + np.asarray(
            pod_idx.to_numpy(zero_copy_only=False), dtype=np.int64
        )
        if len(self._lut) == 0:  # too many pairs for a table: each distinct code looked up
            uniq, inverse = np.unique(codes, return_inverse=True)
            return np.asarray([self._row(c, width) for c in uniq.tolist()], dtype=np.int64)[inverse]
        rows = self._lut[codes]
        if (rows < 0).any():
            for code in np.unique(codes[rows < 0]).tolist():
                self._lut[code] = self._row(code, width)
            rows = self._lut[codes]
        return rows

    def _row(self, code: int, width: int) -> int:
        ns, pod = self._ns[code // width], self._pod[code % width]
        if not ns or not pod:
            raise _NotGrid
        key = f"{ns}/{pod}"
        row = self.index.get(key)
        if row is None:
            if self.fixed:
                raise _NotGrid
            row = self.index[key] = len(self.index)
        return row


def _span(cpu: Matrix) -> tuple[IntArray, IntArray]:
    """Each row's first and last step with a sample (a non-NaN cell), column by column."""
    n, steps = cpu.shape
    first = np.full(n, -1, dtype=np.int64)
    last = np.full(n, -1, dtype=np.int64)
    for k in range(steps):
        valid = ~np.isnan(cpu[:, k])
        first[valid & (first < 0)] = k
        last[valid] = k
    return first, last


def _batches(pf: Any, columns: list[str]) -> Iterator[Any]:
    """The record batches of ``columns``, one row group read at a time (a reader over the whole
    file holds on to what it read, dictionaries unified across row groups: the file's size)."""
    for i in range(pf.num_row_groups):
        yield from pf.read_row_group(i, columns=columns).to_batches(max_chunksize=_BATCH_ROWS)


def sums_in_order(
    values: npt.NDArray[np.float64], start: npt.NDArray[np.intp], initial: npt.NDArray[Any] | None = None
) -> npt.NDArray[np.float64]:
    """The sum of each run of ``values`` (runs begin at the ascending indexes ``start`` and end
    where the next begins), added up one by one from the first, after ``initial[i]`` where it
    is given and not NaN. Floating-point sums depend on their order: every reader of a trace
    (:mod:`scaler.replay.traces`, this module) adds a series' samples of one instant up this
    way, in file order, so that they agree to the last bit (NumPy's own sums add long runs
    pairwise)."""
    lengths = np.append(start[1:], len(values)) - start
    out = values[start].astype(np.float64)
    if initial is not None:
        have = ~np.isnan(initial)
        out[have] = initial[have] + out[have]
    runs = np.flatnonzero(lengths > 1)  # one pass per place in a run: a run's j-th values at once
    j = 1
    while len(runs):
        out[runs] += values[start[runs] + j]
        j += 1
        runs = runs[lengths[runs] > j]
    return out


class _NotGrid(Exception):
    """The file does not fit its grid, or holds a value to report row by row (private)."""


def _exact32(v: FloatArray) -> bool:
    """Every value of ``v`` is exactly a float32."""
    return bool(np.array_equal(v.astype(np.float32).astype(np.float64), v))


def _usage_columns(batch: Any, columns: list[str]) -> list[FloatArray]:
    """A batch's CPU (millicores, from cores) and memory (bytes) columns as float64 arrays.

    Raises:
        _NotGrid: a null, or a value that is not a finite number >= 0 (the general reader
            names its row).
    """
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]

    values = []
    for name, scale in zip(columns[3:5], (1000.0, 1.0), strict=True):
        c = batch.column(batch.schema.get_field_index(name))
        if c.null_count:
            raise _NotGrid
        v = np.asarray(c.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        if not np.all(np.isfinite(v)) or np.any(v < 0):
            raise _NotGrid
        values.append(v * scale if scale != 1.0 else v)
    return values


def _cells(rows: IntArray, steps: IntArray) -> tuple[IntArray, IntArray, IntArray | None, IntArray]:
    """The distinct ``(row, step)`` cells of a batch, sorted, with the order that groups the
    batch's entries by cell (file order within a cell; ``None`` when they already are, one per
    cell, as in an export) and where each cell's entries begin in that order."""
    key = rows * (int(steps.max()) + 1) + steps
    if len(key) < 2 or np.all(key[1:] > key[:-1]):
        return rows, steps, None, np.arange(len(key), dtype=np.intp)
    order = np.argsort(key, kind="stable")
    key = key[order]
    start = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    return rows[order][start], steps[order][start], order, start


def _fill(mats: list[Matrix], first: IntArray, last: IntArray) -> dict[int, IntArray]:
    """Hold each series' last sample over its missing steps and its first sample before it,
    column by column; returns the steps inside each series' life that had no sample."""
    cpu, mem = mats
    steps = cpu.shape[1]
    gap_rows: list[IntArray] = []
    gap_steps: list[IntArray] = []
    for k in range(1, steps):
        miss = np.isnan(cpu[:, k])
        if not miss.any():
            continue
        inside = miss & (first < k) & (k < last)
        if inside.any():
            r = np.flatnonzero(inside)
            gap_rows.append(r)
            gap_steps.append(np.full(len(r), k, dtype=np.int64))
        rows = np.flatnonzero(miss)
        cpu[rows, k] = cpu[rows, k - 1]
        mem[rows, k] = mem[rows, k - 1]
    late = np.flatnonzero(first > 0)
    if len(late):
        head_cpu, head_mem = cpu[late, first[late]], mem[late, first[late]]
        for k in range(int(first[late].max())):
            sel = first[late] > k
            cpu[late[sel], k] = head_cpu[sel]
            mem[late[sel], k] = head_mem[sel]
    if not gap_rows:
        return {}
    r, s = np.concatenate(gap_rows), np.concatenate(gap_steps)
    order = np.lexsort((s, r))
    r, s = r[order], s[order]
    bounds = np.flatnonzero(np.diff(r)) + 1
    return {int(rr[0]): ss for rr, ss in zip(np.split(r, bounds), np.split(s, bounds), strict=True)}
