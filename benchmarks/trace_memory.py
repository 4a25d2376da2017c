"""How much loading a month of usage history needs: ``python -m benchmarks.trace_memory``.

Writes a long-format Parquet trace (:mod:`scaler.replay.traces`) of ``--series`` series over
``--steps`` 5-minute steps (8,640: a month) in a process of its own, then, in another process,
loads it as ``scaler replay --trace`` does (:func:`~scaler.replay.traces.load_trace`, then the
usage table on the replay's grid) and reports the wall time and the peak RSS of that process,
with the bytes per row. Figures go to stdout (one JSON line) and into docs/tasks/replay.md by
hand ("How much a month needs").
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = 1372636800  # 2013-07-01T00:00:00Z
STEP = 300


def _write(path: str, series: int, steps: int) -> None:
    """The generator: ``series`` × ``steps`` rows of random usage, one series per pod."""
    import numpy as np
    import pyarrow as pa  # type: ignore[import-untyped,import-not-found,unused-ignore]
    import pyarrow.parquet as pq  # type: ignore[import-untyped,import-not-found,unused-ignore]

    rng = np.random.default_rng(1)
    rows = series * steps
    names = np.array([f"pod-{i:06d}" for i in range(series)])
    table = pa.table(
        {
            "timestamp": np.tile(START + STEP * np.arange(steps, dtype=np.int64), series),
            "namespace": pa.DictionaryArray.from_arrays(np.zeros(rows, dtype=np.int32), ["bench"]),
            "pod_or_workload": np.repeat(names, steps),
            "cpu_cores": rng.random(rows),
            "memory_bytes": rng.integers(1 << 20, 1 << 32, rows).astype(np.float64),
        }
    )
    pq.write_table(table, path)


def _load(path: str, steps: int) -> dict[str, float]:
    """The code under test: load the trace and build the usage table; time and peak RSS."""
    from scaler.replay.inputs import build_grid, usage_table
    from scaler.replay.traces import load_trace

    t = time.perf_counter()
    trace = load_trace(path)
    used = set(trace.series)
    grid = build_grid(trace, used, float(START), float(START + steps * STEP), float(STEP))
    usage_table(trace, used, grid)
    return {
        "seconds": time.perf_counter() - t,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.trace_memory``."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.trace_memory", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--series", type=int, default=3000, help="series (pods) in the trace")
    ap.add_argument("--steps", type=int, default=8640, help="5-minute steps per series (8640: a month)")
    ap.add_argument("--role", choices=("write", "load"), help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.role == "write":
        _write(a.path, a.series, a.steps)
        return 0
    if a.role == "load":
        print(json.dumps(_load(a.path, a.steps)))
        return 0
    with tempfile.TemporaryDirectory(prefix="trace-memory-") as tmp:
        path = str(Path(tmp) / "trace.parquet")
        common = ["--series", str(a.series), "--steps", str(a.steps), "--path", path]
        me = [sys.executable, "-m", "benchmarks.trace_memory", *common]
        subprocess.run([*me, "--role", "write"], check=True)
        size = Path(path).stat().st_size
        out = subprocess.run([*me, "--role", "load"], check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    rows = a.series * a.steps
    r |= {"series": a.series, "steps": a.steps, "rows": rows, "file_bytes": size}
    r["peak_bytes_per_row"] = r["peak_rss_bytes"] / rows
    print(json.dumps(r))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
