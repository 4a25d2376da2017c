"""Usage traces for ``scaler replay``: loading, validation and resampling onto the replay clock.

Two formats are read:

**Bitbrains GWA-T-12** (the Grid Workloads Archive's "Rnd"/"fastStorage" traces): one file per
VM, named ``<vm id>.csv``, ``;``-separated (a tab may follow each ``;``), with the header
``Timestamp [ms]; CPU cores; CPU capacity provisioned [MHZ]; CPU usage [MHZ]; CPU usage [%];
Memory capacity provisioned [KB]; Memory usage [KB]; …``. Given as a ``.tar.gz``/``.tgz``/``.tar``
archive or a directory of such files (searched recursively). Quirk: the ``Timestamp [ms]``
column holds Unix **seconds**, and is read as such. A VM's CPU in millicores is
``usage MHz / (provisioned MHz / cores) × 1000`` (its usage in cores of its own clock speed);
memory is ``usage KB × 1024`` bytes. Rows of a VM with 0 cores or 0 provisioned MHz carry no
usable CPU figure and are skipped (63 VMs of the July 2013 "Rnd" trace have 0 cores); the count
of skipped rows is reported. The series is named by the VM id (the file name without ``.csv``).

**Generic long format**, for exports from Prometheus or BigQuery: a CSV file (or ``.parquet``,
read with pyarrow when installed) with a header and one row per sample::

    timestamp,namespace,pod_or_workload,cpu_cores,memory_bytes
    2026-11-02T00:00:00Z,checkout,checkout-svc004,0.25,536870912
    1793577600,checkout,checkout-svc004-6d9c7b7d9f-x2x8q,0.31,541065216

``timestamp`` is Unix seconds or RFC 3339; ``cpu_cores`` is CPU cores (0.25 = 250m);
``memory_bytes`` is bytes (working set). Extra columns are ignored. The series is named
``namespace/pod_or_workload``. Several rows for the same series and timestamp are **added up**,
so a per-container export works as is. Rows need not be sorted.

A malformed row raises :class:`TraceError` naming the file and line (``trace.csv:17: …``).

An export of ``scaler history export`` (its metadata names its grid) is read straight into
per-series columns on that grid (:mod:`scaler.replay.trace_grid`): the same series and
samples, in float32 where that loses nothing, and on disk when larger than memory allows.

**Resampling** (:func:`resample`): at each replay step ``t`` a series takes the value of its
latest sample at or before ``t`` (sample and hold); before its first sample it holds its first
value. Duplicate timestamps of a Bitbrains file keep the last row.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import os
import tarfile
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from scaler.errors import InputError
from scaler.model.times import timestamp_seconds
from scaler.replay.trace_grid import sums_in_order

__all__ = [
    "LONG_COLUMNS",
    "Series",
    "Trace",
    "TraceError",
    "csv_members",
    "load_trace",
    "resample",
    "trace_kind",
]

FloatArray = npt.NDArray[np.float64]

LONG_COLUMNS = ("timestamp", "namespace", "pod_or_workload", "cpu_cores", "memory_bytes")
"""Required columns of the generic long format, in any order."""


class TraceError(InputError, ValueError):
    """A trace cannot be read; the message names the file (and line) and the bad value."""


@dataclass(frozen=True, slots=True)
class Series:
    """One usage series: sorted unique times (Unix s), CPU millicores and memory bytes."""

    times: FloatArray
    cpu_millicores: FloatArray
    memory_bytes: FloatArray


@dataclass(frozen=True, slots=True)
class Trace:
    """A loaded trace.

    Attributes:
        kind: ``"bitbrains"`` or ``"long"``.
        source: the path it was read from.
        series: series name → :class:`Series` (Bitbrains: VM id; long: ``namespace/name``).
        skipped_rows: Bitbrains rows skipped for 0 cores or 0 provisioned MHz.
        meta: a Parquet file's ``scaler.*`` metadata, prefix removed (``scaler history export``
            writes ``source: prometheus``, the URL, queries and range); empty otherwise.
        grid: for an export on a regular grid, its per-series columns
            (:class:`~scaler.replay.trace_grid.GridUsage`), which ``series`` reads from and the
            replay's usage table takes without a copy; ``None`` otherwise.
    """

    kind: str
    source: str
    series: Mapping[str, Series] = field(default_factory=dict)
    skipped_rows: int = 0
    meta: Mapping[str, str] = field(default_factory=dict)
    grid: Any = None

    def span(self) -> tuple[float, float]:
        """(first, last) sample time over every series.

        Raises:
            TraceError: the trace has no sample.
        """
        firsts = [s.times[0] for s in self.series.values() if len(s.times)]
        lasts = [s.times[-1] for s in self.series.values() if len(s.times)]
        if not firsts:
            raise TraceError(f"{self.source}: the trace holds no sample")
        return float(min(firsts)), float(max(lasts))


def _series(times: npt.ArrayLike, cpu: npt.ArrayLike, mem: npt.ArrayLike, *, sum_duplicates: bool) -> Series:
    """Sort by time and merge equal timestamps (sum, or keep the last row)."""
    t = np.asarray(times, dtype=np.float64)
    c = np.asarray(cpu, dtype=np.float64)
    m = np.asarray(mem, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, c, m = t[order], c[order], m[order]
    if len(t) > 1 and np.any(t[1:] == t[:-1]):
        uniq, start = np.unique(t, return_index=True)
        if sum_duplicates:
            c, m = sums_in_order(c, start), sums_in_order(m, start)
        else:  # the last of each run of equal timestamps
            last = np.append(start[1:], len(t)) - 1
            c, m = c[last], m[last]
        t = uniq
    return Series(t, c, m)


# ---- Bitbrains -----------------------------------------------------------------------------------


def _parse_bitbrains(text: str, where: str) -> tuple[Series, int]:
    """One VM file: returns its series and the number of rows skipped for 0 capacity."""
    times: list[float] = []
    cpu: list[float] = []
    mem: list[float] = []
    skipped = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        f = line.split(";")
        head = f[0].strip()
        if lineno == 1 and not head[:1].isdigit():
            continue  # the header
        if len(f) < 7:
            raise TraceError(f"{where}:{lineno}: expected at least 7 ';'-separated fields, got {len(f)}")
        try:
            t = float(head)
            cores = float(f[1])
            cap_mhz = float(f[2])
            use_mhz = float(f[3])
            mem_kb = float(f[6])
        except ValueError:
            bad = next(x.strip() for x in (f[0], f[1], f[2], f[3], f[6]) if not _is_number(x))
            raise TraceError(f"{where}:{lineno}: not a number: {bad!r}") from None
        if not (math.isfinite(t) and math.isfinite(use_mhz) and math.isfinite(mem_kb)):
            raise TraceError(f"{where}:{lineno}: timestamp and usage must be finite numbers")
        if use_mhz < 0 or mem_kb < 0:
            raise TraceError(f"{where}:{lineno}: negative usage ({use_mhz} MHz, {mem_kb} KB)")
        if cores <= 0 or cap_mhz <= 0 or cap_mhz / cores <= 0:  # the last: a speed below 5e-324 MHz
            skipped += 1
            continue
        millicores, memory = use_mhz / (cap_mhz / cores) * 1000.0, mem_kb * 1024.0
        if not (math.isfinite(millicores) and math.isfinite(memory)):
            raise TraceError(f"{where}:{lineno}: usage out of range ({use_mhz} MHz, {mem_kb} KB)")
        times.append(t)  # the "[ms]" column holds Unix seconds
        cpu.append(millicores)
        mem.append(memory)
    return _series(times, cpu, mem, sum_duplicates=False), skipped


def _parse_bitbrains_columnar(data: bytes) -> tuple[Series, int] | None:
    """One VM file read columnar with pyarrow's CSV reader (no Python object per row), with the
    same arithmetic and the same skipped rows as :func:`_parse_bitbrains`: about four times
    faster over the July 2013 "Rnd" trace (455 MB of text). ``None`` when pyarrow is absent or a
    row is not what the row reader accepts silently (a missing field, text, a non-finite or
    negative value): the caller reads the file row by row, which names the line."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import pyarrow.csv as pacsv  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return None
    line = data.split(b"\n", 1)[0].strip()
    if not line:
        return None  # a blank first line: the row reader decides what the next one is
    first = line[:1]
    columns = ["f0", "f1", "f2", "f3", "f6"]
    try:
        table = pacsv.read_csv(
            pa.py_buffer(data if data.endswith(b"\n") else data + b"\n"),  # a last line unended
            read_options=pacsv.ReadOptions(
                autogenerate_column_names=True, skip_rows=0 if first.isdigit() else 1, use_threads=False
            ),
            parse_options=pacsv.ParseOptions(delimiter=";"),
            convert_options=pacsv.ConvertOptions(
                include_columns=columns, column_types=dict.fromkeys(columns, pa.float64())
            ),
        )
    except (pa.ArrowException, ValueError):
        return None
    if table.num_columns != len(columns) or any(c.null_count for c in table.columns):
        return None
    t, cores, cap_mhz, use_mhz, mem_kb = (
        np.asarray(table.column(c).to_numpy(), dtype=np.float64) for c in columns
    )
    finite = all(np.isfinite(a).all() for a in (t, cores, cap_mhz, use_mhz, mem_kb))
    if not finite or (use_mhz < 0).any() or (mem_kb < 0).any():
        return None  # the row reader decides, and names the row it refuses
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        keep = (cores > 0) & (cap_mhz > 0) & (cap_mhz / cores > 0)
        t, cores, cap_mhz, use_mhz, mem_kb = (a[keep] for a in (t, cores, cap_mhz, use_mhz, mem_kb))
        cpu, memory = use_mhz / (cap_mhz / cores) * 1000.0, mem_kb * 1024.0
    if not (np.isfinite(cpu).all() and np.isfinite(memory).all()):
        return None  # out of range: the row reader names the row
    return _series(t, cpu, memory, sum_duplicates=False), int(keep.size - keep.sum())


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def csv_members(tar: tarfile.TarFile) -> Iterator[tuple[str, IO[bytes]]]:
    """(member name, binary stream) of every regular ``*.csv`` member of an open archive, in
    archive order (a Bitbrains GWA-T-12 trace holds one ``<vm>.csv`` per VM).

    Raises:
        tarfile.TarError, OSError, EOFError: the archive is unreadable (callers name the file).
    """
    for member in tar:
        if not member.isfile() or not member.name.endswith(".csv"):
            continue
        fh = tar.extractfile(member)
        if fh is not None:
            yield member.name, fh


def _bitbrains_files(path: Path, wanted: Collection[str] | None) -> Iterator[tuple[str, str, bytes]]:
    """(series name, where, UTF-8 bytes) of every ``<id>.csv`` of an archive or directory."""
    if path.is_dir():
        for p in sorted(path.rglob("*.csv")):
            name = p.stem
            if wanted is not None and name not in wanted:
                continue
            try:
                data = p.read_bytes()
                data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise TraceError(f"{p}: cannot read: {e}") from None
            yield name, str(p), data
        return
    try:
        with tarfile.open(path) as tar:
            for member_name, fh in csv_members(tar):
                name = os.path.basename(member_name)[:-4]
                if wanted is not None and name not in wanted:
                    continue
                where = f"{path}:{member_name}"
                data = fh.read()
                try:
                    data.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise TraceError(f"{where}: not UTF-8 text: {e}") from None
                yield name, where, data
    except (tarfile.TarError, OSError, EOFError) as e:
        raise TraceError(f"{path}: cannot read the archive: {e}") from None


def load_bitbrains(path: str | Path, wanted: Collection[str] | None = None) -> Trace:
    """Read a Bitbrains GWA-T-12 trace (archive or directory of ``<vm>.csv`` files).

    Args:
        path: ``.tar.gz``/``.tgz``/``.tar`` archive or directory.
        wanted: read only these VM ids (``None``: every file).

    Raises:
        TraceError: unreadable input, no VM file, or a malformed row (names file and line).
    """
    p = Path(path)
    series: dict[str, Series] = {}
    skipped = 0
    for name, where, data in _bitbrains_files(p, wanted):
        parsed = _parse_bitbrains_columnar(data)
        s, k = parsed if parsed is not None else _parse_bitbrains(data.decode("utf-8"), where)
        skipped += k
        if len(s.times):
            series[name] = s
    if not series and wanted is None:
        raise TraceError(f"{p}: no Bitbrains VM file (<id>.csv) with usable rows")
    return Trace("bitbrains", str(p), series, skipped)


# ---- generic long format -------------------------------------------------------------------------


class _LongBuilder:
    """Accumulates validated long-format rows per series."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.rows: dict[str, tuple[list[float], list[float], list[float]]] = {}

    def add(self, where: str, ts: object, namespace: object, name: object, cpu: object, mem: object) -> None:
        """Validate and add one row; ``where`` is ``file:line`` for errors."""
        ns, nm = str(namespace or "").strip(), str(name or "").strip()
        if not ns:
            raise TraceError(f"{where}: empty namespace")
        if not nm:
            raise TraceError(f"{where}: empty pod_or_workload")
        try:
            t = timestamp_seconds(str(ts)) if not isinstance(ts, (int, float)) else float(ts)
        except (ValueError, TypeError):
            raise TraceError(f"{where}: timestamp {ts!r} is not Unix seconds or RFC 3339") from None
        values = []
        for label, raw in (("cpu_cores", cpu), ("memory_bytes", mem)):
            try:
                v = float(raw)  # type: ignore[arg-type]
            except (ValueError, TypeError):
                raise TraceError(f"{where}: {label} {raw!r} is not a number") from None
            if not math.isfinite(v) or v < 0:
                raise TraceError(f"{where}: {label} {raw!r} must be a finite number >= 0")
            values.append(v)
        entry = self.rows.get(f"{ns}/{nm}")
        if entry is None:
            entry = self.rows[f"{ns}/{nm}"] = ([], [], [])
        entry[0].append(t)
        entry[1].append(values[0] * 1000.0)
        entry[2].append(values[1])

    def trace(self) -> Trace:
        """The trace of every row added.

        Raises:
            TraceError: no row.
        """
        if not self.rows:
            raise TraceError(f"{self.source}: no data row")
        series = {k: _series(*v, sum_duplicates=True) for k, v in self.rows.items()}
        return Trace("long", self.source, series)


def _header_index(header: list[str], where: str) -> list[int]:
    names = [h.strip().lower() for h in header]
    missing = [c for c in LONG_COLUMNS if c not in names]
    if missing:
        raise TraceError(
            f"{where}: missing column(s) {', '.join(missing)}; the header must name {','.join(LONG_COLUMNS)}"
        )
    return [names.index(c) for c in LONG_COLUMNS]


def load_long_csv(path: str | Path) -> Trace:
    """Read the generic long format from a CSV file: columnar with pyarrow when it is installed
    (:func:`_columnar_trace`, no Python object per row), else row by row. A file the columnar
    path refuses is read again row by row, which names the first bad line.

    Raises:
        TraceError: unreadable file, missing columns, or a malformed row (names file and line).
    """
    p = Path(path)
    try:
        import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import pyarrow.csv as pacsv  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return _load_long_csv_rows(p)
    try:
        with p.open(encoding="utf-8", newline="") as fh:
            header = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{p}: cannot read: {e}") from None
    except csv.Error as e:
        raise TraceError(f"{p}: malformed CSV: {e}") from None
    if header is None:
        raise TraceError(f"{p}: empty file")
    idx = _header_index(header, f"{p}:1")
    names = [header[i] for i in idx]
    try:
        reader = pacsv.open_csv(
            p,
            read_options=pacsv.ReadOptions(block_size=4 << 20),
            convert_options=pacsv.ConvertOptions(
                include_columns=names,
                column_types={names[1]: pa.string(), names[2]: pa.string()},
                strings_can_be_null=False,
            ),
        )
        trace = _columnar_trace(reader, names, str(p))
    except (pa.ArrowException, OSError, ValueError):
        return _load_long_csv_rows(p)
    return trace if trace is not None else _load_long_csv_rows(p)


def _load_long_csv_rows(p: Path) -> Trace:
    """The row-by-row CSV reader (errors name the line)."""
    b = _LongBuilder(str(p))
    try:
        with p.open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                raise TraceError(f"{p}: empty file")
            idx = _header_index(header, f"{p}:1")
            width = max(idx) + 1
            for row in reader:
                if not row or not any(x.strip() for x in row):
                    continue
                where = f"{p}:{reader.line_num}"
                if len(row) < width:
                    raise TraceError(f"{where}: expected {len(header)} fields, got {len(row)}")
                b.add(where, *(row[i] for i in idx))
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{p}: cannot read: {e}") from None
    except csv.Error as e:
        raise TraceError(f"{p}: malformed CSV: {e}") from None
    return b.trace()


def _seconds_column(column: Any) -> FloatArray | None:
    """A timestamp column as float64 Unix seconds: numbers as they are, Arrow timestamps
    (naive ones as UTC), strings parsed once per distinct value (RFC 3339 or Unix seconds).
    ``None`` when a value is null or does not parse."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped,import-not-found,unused-ignore]

    col = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if col.null_count:
        return None
    typ = col.type
    if pa.types.is_timestamp(typ):
        per_second = {"s": 1.0, "ms": 1e3, "us": 1e6, "ns": 1e9}[typ.unit]
        ints = col.cast(pa.int64()).to_numpy(zero_copy_only=False)
        return np.asarray(ints, dtype=np.float64) / per_second
    if pa.types.is_integer(typ) or pa.types.is_floating(typ):
        return np.asarray(col.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_dictionary(typ):
        enc = col if pa.types.is_dictionary(typ) else pc.dictionary_encode(col)
        try:
            values = np.asarray(
                [timestamp_seconds(str(v)) for v in enc.dictionary.to_pylist()], dtype=np.float64
            )
        except (ValueError, TypeError):
            return None
        return values[np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.intp)]
    return None


def _columnar_trace(batches: Iterable[Any], names: list[str], source: str) -> Trace | None:
    """The trace of Arrow record batches of the long format (``names``: its columns in
    :data:`LONG_COLUMNS` order), read batch by batch and kept as numpy arrays (28 bytes a row:
    time, CPU, memory, series id), then grouped per series and summed per timestamp with
    numpy; no Python object per row, only per distinct series name of a batch. ``None`` when a
    value is invalid (a null, an empty name, a value that is not a finite number >= 0): the
    caller reads the rows one by one to name it.

    Raises:
        TraceError: no row.
        pyarrow.ArrowException: a batch cannot be read or converted (the caller falls back).
    """
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped,import-not-found,unused-ignore]

    ids: dict[str, int] = {}
    parts: list[tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.int32]]] = []
    for batch in batches:
        if batch.num_rows == 0:
            continue
        col = [batch.column(batch.schema.get_field_index(n)) for n in names]
        times = _seconds_column(col[0])
        if times is None or not np.all(np.isfinite(times)):
            return None
        keys = []
        for c in col[1:3]:
            if c.null_count:
                return None
            c = pc.utf8_trim_whitespace(c if pa.types.is_string(c.type) else c.cast(pa.string()))
            if pc.any(pc.equal(pc.utf8_length(c), 0)).as_py():
                return None
            keys.append(c)
        values = []
        for c in col[3:5]:
            try:
                arr = np.asarray(c.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
            except (pa.ArrowException, ValueError):
                return None
            if c.null_count or not np.all(np.isfinite(arr)) or np.any(arr < 0):
                return None
            values.append(arr)
        enc = pc.dictionary_encode(pc.binary_join_element_wise(keys[0], keys[1], "/"))
        remap = np.asarray(
            [ids.setdefault(str(k), len(ids)) for k in enc.dictionary.to_pylist()], dtype=np.int32
        )
        local = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.intp)
        parts.append((times, values[0] * 1000.0, values[1], remap[local]))
    if not parts:
        raise TraceError(f"{source}: no data row")
    t = np.concatenate([x[0] for x in parts])
    cpu = np.concatenate([x[1] for x in parts])
    mem = np.concatenate([x[2] for x in parts])
    index = np.concatenate([x[3] for x in parts])
    del parts
    order = np.lexsort((t, index))
    index = index[order]  # one column at a time: each old copy is freed before the next
    t = t[order]
    cpu = cpu[order]
    mem = mem[order]
    del order
    # Rows of the same series and time are added up (a per-container export).
    new = np.ones(len(t), dtype=np.bool_)
    new[1:] = (index[1:] != index[:-1]) | (t[1:] != t[:-1])
    starts = np.flatnonzero(new)
    index, t = index[starts], t[starts]
    cpu, mem = sums_in_order(cpu, starts), sums_in_order(mem, starts)
    labels = list(ids)
    bounds = np.flatnonzero(np.diff(index)) + 1
    series: dict[str, Series] = {}
    for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(t)])), strict=True):
        series[labels[int(index[lo])]] = Series(t[lo:hi].copy(), cpu[lo:hi].copy(), mem[lo:hi].copy())
    return Trace("long", source, dict(sorted(series.items())))


def load_long_parquet(path: str | Path) -> Trace:
    """Read the generic long format from a Parquet file (needs pyarrow), columnar
    (:func:`_columnar_trace`). ``timestamp`` may be numbers (Unix seconds), an Arrow timestamp
    (naive ones are UTC) or strings. A file with an invalid value is read again row by row to
    name it: row ``n`` is reported as line ``n + 1``, as in the equivalent CSV with header.

    Raises:
        TraceError: pyarrow missing, unreadable file, missing columns, or a malformed row.
    """
    p = Path(path)
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise TraceError(f"{p}: reading Parquet needs pyarrow (pip install 'gke-scaler[tune]')") from None
    try:
        pf = pq.ParquetFile(p)
        schema = pf.schema_arrow
    except Exception as e:
        raise TraceError(f"{p}: cannot read Parquet: {' '.join(str(e).split())}") from None
    names = {n.strip().lower(): n for n in schema.names}
    _header_index(list(names), f"{p}")
    meta = {
        k.decode("utf-8", "replace")[7:]: v.decode("utf-8", "replace")
        for k, v in {**(schema.metadata or {}), **(pf.metadata.metadata or {})}.items()
        if k.startswith(b"scaler.")
    }
    columns = [names[c] for c in LONG_COLUMNS]
    if {"from_seconds", "to_seconds", "step_seconds"} <= set(meta):  # an export: straight into columns
        from scaler.replay.trace_grid import GridSeries, load_grid

        try:
            grid = load_grid(pf, columns, meta, str(p), _seconds_column)
        except Exception as e:
            raise TraceError(f"{p}: cannot read Parquet: {' '.join(str(e).split())}") from None
        if grid is not None:
            return Trace("long", str(p), GridSeries(grid, Series), meta=meta, grid=grid)
    try:
        trace = _columnar_trace(pf.iter_batches(batch_size=1 << 20, columns=columns), columns, str(p))
    except TraceError:
        raise
    except Exception as e:
        raise TraceError(f"{p}: cannot read Parquet: {' '.join(str(e).split())}") from None
    if trace is not None:
        return replace(trace, meta=meta)
    try:
        table = pq.read_table(p, columns=columns)
    except Exception as e:
        raise TraceError(f"{p}: cannot read Parquet: {' '.join(str(e).split())}") from None
    cols = [table.column(c).to_pylist() for c in columns]
    b = _LongBuilder(str(p))
    for i, row in enumerate(zip(*cols, strict=True)):
        ts = row[0]
        if isinstance(ts, dt.datetime):
            ts = (ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)).timestamp()
        b.add(f"{p}:{i + 2}", ts, *row[1:])
    return b.trace()


def trace_kind(path: str | Path) -> str:
    """The format of the trace at ``path``, as :func:`load_trace` reads it: ``bitbrains`` for a
    directory, a ``.tar.gz``, ``.tgz`` or ``.tar``, or a CSV whose first line starts with
    ``Timestamp [ms]``; ``long`` otherwise (a ``.parquet``, any other CSV).

    Raises:
        TraceError: the path does not exist or cannot be read.
    """
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{p}: no such file or directory")
    name = p.name.lower()
    if p.is_dir() or name.endswith((".tar.gz", ".tgz", ".tar")):
        return "bitbrains"
    if name.endswith(".parquet"):
        return "long"
    try:
        with p.open(encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError) as e:
        raise TraceError(f"{p}: cannot read: {e}") from None
    return "bitbrains" if first.lstrip().lower().startswith("timestamp [ms]") else "long"


def load_trace(path: str | Path, wanted: Collection[str] | None = None) -> Trace:
    """Read a trace, choosing the format from the path: a directory, ``.tar.gz``, ``.tgz`` or
    ``.tar`` is Bitbrains; ``.parquet`` is the long format in Parquet; any other file is a CSV,
    Bitbrains when its first line starts with ``Timestamp [ms]``, the long format otherwise.

    Args:
        path: the trace.
        wanted: Bitbrains only: the VM ids to read (others are skipped unparsed).

    Raises:
        TraceError: the path does not exist or the trace is malformed.
    """
    p = Path(path)
    kind = trace_kind(p)
    name = p.name.lower()
    if p.is_dir() or name.endswith((".tar.gz", ".tgz", ".tar")):
        return load_bitbrains(p, wanted)
    if name.endswith(".parquet"):
        return load_long_parquet(p)
    if kind == "bitbrains":  # one VM's CSV
        text = p.read_text(encoding="utf-8")
        s, skipped = _parse_bitbrains(text, str(p))
        return Trace("bitbrains", str(p), {p.stem: s} if len(s.times) else {}, skipped)
    return load_long_csv(p)


def resample(series: Series, grid: FloatArray) -> tuple[FloatArray, FloatArray]:
    """CPU millicores and memory bytes of ``series`` at each time of ``grid``: the latest sample
    at or before the time, or the first sample before the series starts."""
    idx = np.searchsorted(series.times, grid, side="right") - 1
    np.clip(idx, 0, len(series.times) - 1, out=idx)
    return series.cpu_millicores[idx], series.memory_bytes[idx]
