"""How much loading a month of usage history needs: ``python -m benchmarks.trace_memory``.

A generator process writes what ``scaler history export`` writes: a long-format Parquet file of
``--series`` pods over ``--steps`` 5-minute steps (8,640: a month), streamed in time windows (one
row group of about a million rows each) with the export's metadata (its grid), CPU as arbitrary doubles (rates) and
memory as whole 4 KiB pages (cgroup memory). It never holds the file's rows: it writes a window
at a time.

Another process then loads it as ``scaler replay --trace`` does
(:func:`~scaler.replay.traces.load_trace`, straight into per-pod columns, then the usage table
on the replay's grid) and reports, as one JSON line on stdout:

* ``seconds``: the wall time of the load;
* ``peak_rss_bytes``: the peak resident set of the loading process (``ru_maxrss``: everything it
  touched, file-backed pages included) and ``peak_anon_bytes``: the peak of its anonymous
  memory (``RssAnon``, sampled every 50 ms: what it holds itself, which the kernel cannot page
  back to a file);
* ``on_disk``: whether the columns were memory-mapped from a file (``--on-disk auto`` decides as
  the replay does: above 40% of the machine's memory);
* ``read_seconds`` (with ``--read-steps N``): the time to read every pod's CPU and memory at each
  of N steps, as the replay's world reads them each step (a column of every series).

Figures go into docs/tasks/replay.md by hand ("How much a month needs").
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

START = 1372636800  # 2013-07-01T00:00:00Z
STEP = 300
ROW_GROUP_ROWS = 1 << 20  # rows per row group of the generated file, as the export writes them


def _write(path: str, series: int, steps: int) -> None:
    """The generator: ``series`` pods × ``steps`` instants, window by window (see the module doc)."""
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

    rng = np.random.default_rng(1)
    names = pa.array([f"pod-{i:06d}" for i in range(series)], pa.string())
    namespaces = pa.array(["bench"], pa.string())
    writer = None
    window = max(1, ROW_GROUP_ROWS // series)  # steps per row group
    for lo in range(0, steps, window):
        n = min(window, steps - lo)
        rows = series * n
        t = START + STEP * (lo + np.tile(np.arange(n, dtype=np.int64), series))
        table = pa.table(
            {
                "timestamp": pa.array(t * 1000, pa.timestamp("ms", tz="UTC")),
                "namespace": pa.DictionaryArray.from_arrays(
                    pa.array(np.zeros(rows, dtype=np.int32)), namespaces
                ),
                "pod_or_workload": pa.DictionaryArray.from_arrays(
                    pa.array(np.repeat(np.arange(series, dtype=np.int32), n)), names
                ),
                "cpu_cores": rng.random(rows) * 2.0,
                "memory_bytes": (rng.integers(256, 1 << 20, rows) * 4096).astype(np.float64),
            }
        )
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    assert writer is not None
    writer.add_key_value_metadata(
        {
            "scaler.source": "prometheus",
            "scaler.from_seconds": repr(float(START)),
            "scaler.to_seconds": repr(float(START + (steps - 1) * STEP)),
            "scaler.step_seconds": repr(float(STEP)),
        }
    )
    writer.close()


class _AnonPeak:
    """The peak of this process's ``RssAnon``, sampled every 50 ms in a thread."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def now() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        return 0

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, self.now())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.now())


def _load(path: str, steps: int, on_disk: str, read_steps: int) -> dict[str, Any]:
    """The code under test: load the trace and build the usage table (then read columns)."""
    import numpy as np

    from scaler.replay import trace_grid
    from scaler.replay.inputs import build_grid, usage_table
    from scaler.replay.traces import load_trace

    if on_disk != "auto":  # as the replay decides, or forced either way
        trace_grid.memory_limit = (lambda: 0) if on_disk == "yes" else (lambda: 1 << 62)
    anon = _AnonPeak()
    t = time.perf_counter()
    trace = load_trace(path)
    used = set(trace.series)
    grid = build_grid(trace, used, float(START), float(START + steps * STEP), float(STEP))
    usage = usage_table(trace, used, grid)
    out: dict[str, Any] = {"seconds": time.perf_counter() - t}
    if read_steps:
        rows = np.arange(len(usage.series))
        t = time.perf_counter()
        total = 0.0
        for k in range(min(read_steps, len(grid))):
            total += float(usage.cpu[rows, k].sum() + usage.memory[rows, k].sum())
        out["read_seconds"] = time.perf_counter() - t
        out["read_steps"] = min(read_steps, len(grid))
    out |= {
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "peak_anon_bytes": anon.stop(),
        "on_disk": bool(trace.grid is not None and trace.grid.on_disk),
        "grid": trace.grid is not None,
        "cpu_dtype": str(usage.cpu.dtype),
        "memory_dtype": str(usage.memory.dtype),
    }
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.trace_memory``."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.trace_memory", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--series", type=int, default=3000, help="series (pods) in the trace")
    ap.add_argument("--steps", type=int, default=8640, help="5-minute steps per series (8640: a month)")
    ap.add_argument("--on-disk", choices=("auto", "yes", "no"), default="auto",
                    help="columns in memory or memory-mapped from a file (auto: as the replay decides)")  # fmt: skip
    ap.add_argument(
        "--read-steps", type=int, default=0, help="then read every pod's usage at this many steps"
    )
    ap.add_argument("--dir", help="where the trace is written (default: a temporary directory)")
    ap.add_argument("--role", choices=("write", "load"), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.role == "write":
        _write(a.path, a.series, a.steps)
        return 0
    if a.role == "load":
        print(json.dumps(_load(a.path, a.steps, a.on_disk, a.read_steps)))
        return 0
    with tempfile.TemporaryDirectory(prefix="trace-memory-", dir=a.dir) as tmp:
        path = str(Path(tmp) / "trace.parquet")
        common = ["--series", str(a.series), "--steps", str(a.steps), "--path", path]
        me = [sys.executable, "-m", "benchmarks.trace_memory", *common]
        t = time.perf_counter()
        subprocess.run([*me, "--role", "write"], check=True)
        written = time.perf_counter() - t
        size = Path(path).stat().st_size
        load = [*me, "--role", "load", "--on-disk", a.on_disk, "--read-steps", str(a.read_steps)]
        out = subprocess.run(load, check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    rows = a.series * a.steps
    r |= {"series": a.series, "steps": a.steps, "rows": rows, "file_bytes": size, "write_seconds": written}
    r["peak_bytes_per_row"] = r["peak_rss_bytes"] / rows
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
