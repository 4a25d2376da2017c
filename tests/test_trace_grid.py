"""An export read straight into per-pod columns (:mod:`scaler.replay.trace_grid`) is the same
trace as read row by row: the same series, the same samples (gaps, duplicates added up, any row
order), the same usage table; float32 only where no value changes; on disk the same numbers; and
a file that does not fit its grid is read the general way, its bad row named.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scaler.replay import trace_grid
from scaler.replay.inputs import build_grid, usage_table
from scaler.replay.trace_grid import sums_in_order
from scaler.replay.traces import TraceError, load_trace

T0 = 1_700_000_100.0
STEP = 300.0
PAGE = 4096.0


def write(path: Path, rows: list[tuple[float, str, str, float, float]], steps: int, *, grid: bool = True) -> Path:
    """A long-format Parquet file of ``rows`` (with an export's grid metadata unless not ``grid``)."""
    t, ns, pod, cpu, mem = (list(c) for c in zip(*rows, strict=True))
    table = pa.table({"timestamp": pa.array(np.asarray(t) * 1000, pa.int64()).cast(pa.timestamp("ms", tz="UTC")),
                      "namespace": ns, "pod_or_workload": pod, "cpu_cores": cpu, "memory_bytes": mem})  # fmt: skip
    w = pq.ParquetWriter(path, table.schema)
    for i in range(0, len(rows), 7):  # several row groups
        w.write_table(table.slice(i, 7))
    if grid:
        w.add_key_value_metadata({"scaler.source": "prometheus", "scaler.from_seconds": repr(T0),
                                  "scaler.to_seconds": repr(T0 + (steps - 1) * STEP),
                                  "scaler.step_seconds": repr(STEP)})  # fmt: skip
    w.close()
    return path


def same(a: Any, b: Any) -> None:
    """Two traces hold the same series and samples, value for value."""
    assert sorted(a.series) == sorted(b.series)
    for name in a.series:
        x, y = a.series[name], b.series[name]
        assert x.times.tolist() == y.times.tolist(), name
        assert np.asarray(x.cpu_millicores, dtype=np.float64).tolist() == y.cpu_millicores.tolist(), name
        assert np.asarray(x.memory_bytes, dtype=np.float64).tolist() == y.memory_bytes.tolist(), name


ROWS = [  # (step, namespace, pod, cores, pages)
    *[(k, "shop", "web-0", 0.25 + 0.01 * k, 1000 + k) for k in range(10)],
    *[(k, "shop", "web-1", 0.5, 2000) for k in range(3, 10) if k not in (5, 6)],  # starts late, a gap
    *[(k, "db", "db-0", 1.5, 9000) for k in range(0, 4)],  # ends early
    (2, "db", "db-0", 0.5, 1000),  # a second container of db-0 at step 2: added up
    (7, " shop ", " web-0 ", 0.125, 1),  # padded names are the same series, added up
]


def rows_of(spec: list[tuple[int, str, str, float, int]]) -> list[tuple[float, str, str, float, float]]:
    return [(T0 + k * STEP, ns, pod, cores, pages * PAGE) for k, ns, pod, cores, pages in spec]


def test_an_export_reads_into_columns_as_row_by_row(tmp_path: Path) -> None:
    rows = rows_of(ROWS)
    rng = np.random.default_rng(7)
    shuffled = [rows[i] for i in rng.permutation(len(rows))]
    columns = load_trace(write(tmp_path / "e.parquet", shuffled, 10))
    rowwise = load_trace(write(tmp_path / "r.parquet", shuffled, 10, grid=False))
    assert columns.grid is not None and rowwise.grid is None
    same(columns, rowwise)
    g = columns.grid
    assert g.memory.dtype == np.float32 and g.cpu.dtype == np.float64  # whole pages: float32 loses nothing
    assert g.cpu.flags.f_contiguous and g.names == ("db/db-0", "shop/web-0", "shop/web-1")
    assert {g.names[r]: s.tolist() for r, s in g.gaps.items()} == {"shop/web-1": [5, 6]}
    assert columns.series["shop/web-0"].cpu_millicores[7] == pytest.approx(320.0 + 125.0)
    # The usage table: the columns themselves for every series on the file's grid; a copy of the
    # rows otherwise; always what resampling gives.
    for used, lo, hi in ((set(g.names), T0, T0 + 10 * STEP), ({"shop/web-1", "db/db-0"}, T0 + 2 * STEP, T0 + 8 * STEP)):
        grid = build_grid(columns, used, lo, hi, STEP)
        fast, slow = usage_table(columns, used, grid), usage_table(rowwise, used, grid)
        assert fast.series == slow.series and fast.times.tolist() == slow.times.tolist()
        assert fast.cpu.tolist() == slow.cpu.tolist() and fast.memory.tolist() == slow.memory.tolist()
        assert fast.first_sample is not None and slow.first_sample is not None
        assert fast.first_sample.tolist() == slow.first_sample.tolist()
        assert np.shares_memory(fast.cpu, g.cpu) == (len(used) == len(g.names))
    # A grid that is not a run of the file's steps is resampled series by series.
    off = build_grid(columns, set(g.names), T0 + 150.0, T0 + 9 * STEP, STEP)
    assert usage_table(columns, set(g.names), off).cpu.tolist() == usage_table(rowwise, set(g.names), off).cpu.tolist()


def test_float64_where_a_value_is_not_a_float32(tmp_path: Path) -> None:
    rows = rows_of(ROWS[:10])
    rows[4] = (*rows[4][:4], 2.0**25 + 1)  # bytes that float32 cannot hold
    trace = load_trace(write(tmp_path / "e.parquet", rows, 10))
    assert trace.grid is not None and trace.grid.memory.dtype == np.float64
    assert trace.series["shop/web-0"].memory_bytes[4] == 2.0**25 + 1


def test_on_disk_the_same_numbers_and_nothing_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "e.parquet", rows_of(ROWS), 10)
    monkeypatch.setattr(trace_grid, "memory_limit", lambda: 0)
    on_disk = load_trace(path)
    monkeypatch.undo()
    in_memory = load_trace(path)
    assert on_disk.grid is not None and on_disk.grid.on_disk and isinstance(on_disk.grid.cpu, np.memmap)
    same(on_disk, in_memory)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["e.parquet"], "the column file is unlinked at once"


def test_a_file_off_its_grid_or_with_a_bad_value_is_read_the_general_way(tmp_path: Path) -> None:
    rows = rows_of(ROWS)
    rows[3] = (rows[3][0] + 7.0, *rows[3][1:])  # off the grid
    trace = load_trace(write(tmp_path / "off.parquet", rows, 10))
    assert trace.grid is None and trace.series["shop/web-0"].times[3] == T0 + 3 * STEP + 7.0
    rows = rows_of(ROWS)
    rows[4] = (*rows[4][:3], -1.0, rows[4][4])
    with pytest.raises(TraceError, match=r"bad\.parquet:6: cpu_cores -1\.0 must be a finite number >= 0"):
        load_trace(write(tmp_path / "bad.parquet", rows, 10))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cells=st.lists(
        st.tuples(
            st.integers(0, 11),
            st.sampled_from(["a", "b", "c b"]),
            st.sampled_from(["p-0", "p-1", "p-2"]),
            st.floats(0, 64, allow_nan=False),
            st.integers(0, 1 << 22),
        ),
        min_size=1,
        max_size=60,
    )
)
def test_columns_equal_rows_for_any_export(tmp_path: Path, cells: list[tuple[int, str, str, float, int]]) -> None:
    rows = rows_of(cells)
    same(load_trace(write(tmp_path / "e.parquet", rows, 12)), load_trace(write(tmp_path / "r.parquet", rows, 12, grid=False)))


def test_many_samples_of_one_instant_over_row_groups_add_up_as_row_by_row(tmp_path: Path) -> None:
    # Twelve samples of one series and instant over two row groups: the sum depends on its
    # order to the last bit (NumPy adds long runs pairwise, which a batch-by-batch sum is not).
    cores = [53.533533, 30.486605, 40.900361, 9.639451, 40.631082, 55.5549, 33.483597]  # a row group
    cores += [47.440119, 42.970334, 4.098012, 48.526736, 37.830373]  # the next
    rows = rows_of([(0, "a", "p-0", c, 0) for c in cores])
    columns = load_trace(write(tmp_path / "e.parquet", rows, 12))
    assert columns.grid is not None
    same(columns, load_trace(write(tmp_path / "r.parquet", rows, 12, grid=False)))
    total = 0.0
    for c in cores:  # one by one, in file order
        total += c * 1000.0
    assert columns.series["a/p-0"].cpu_millicores.tolist() == [total]


@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=12), min_size=1, max_size=8),
    held=st.lists(st.one_of(st.none(), st.floats(0, 1e6, allow_nan=False)), min_size=8, max_size=8),
)
def test_sums_in_order_add_each_run_up_one_by_one(runs: list[list[float]], held: list[float | None]) -> None:
    values = np.array([x for run in runs for x in run])
    start = np.cumsum([0] + [len(r) for r in runs[:-1]])
    initial = np.array([np.nan if h is None else h for h in held[: len(runs)]])
    want = []
    for run, h in zip(runs, initial.tolist(), strict=True):
        total = run[0] if np.isnan(h) else h + run[0]
        for x in run[1:]:
            total += x
        want.append(total)
    assert sums_in_order(values, start, initial).tolist() == want
    assert sums_in_order(values, start).tolist() == sums_in_order(values, start, np.full(len(runs), np.nan)).tolist()
