"""Golden replays: every figure of a replay's :class:`~scaler.replay.simulate.PolicyResult`,
pinned in ``tests/data/golden-replay/`` (one file per case) and compared byte for byte by
``tests/test_golden_replay.py``.

A case replays one cluster over a stretch of the Bitbrains "Rnd" July 2013 trace (from
2013-07-01T00:00Z, 5-minute steps) with the policies it names, in one process, one policy after
the other, and dumps each result whole (every total, every per-step series, the events; not
the wall time). The clusters are the bundled example (``scaler/examples/bitbrains-gke-day1``)
and clusters made by the benchmarks' deterministic generator (:func:`benchmarks.generate.generate`),
written as snapshot files and read back as ``scaler replay --snapshot`` reads them.

A change that should not change a decision (speed, structure) leaves every golden file
byte-identical. A change that changes decisions on purpose regenerates them, and its commit
says why the figures moved::

    .venv/bin/python -m tests.golden_replay            # check every case, print what differs
    .venv/bin/python -m tests.golden_replay --write    # regenerate every case
    .venv/bin/python -m tests.golden_replay --write gen-100-day   # one case

Needs the raw trace ``../shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "raw" / "bitbrains-rnd-2013" / "rnd-2013-7.tar.gz"
GOLDEN = Path(__file__).resolve().parent / "data" / "golden-replay"
START = 1372636800.0  # 2013-07-01T00:00:00Z
STEP = 300.0


@dataclass(frozen=True)
class Case:
    """One golden replay: ``nodes`` 0 is the bundled example, else a generated cluster of that
    many nodes; ``steps`` 5-minute steps from :data:`START`; the policies, replayed in order."""

    name: str
    nodes: int
    steps: int
    policies: tuple[str, ...]
    long: bool = False
    """Minutes of CPU: checked by ``make test`` only with ``SCALER_GOLDEN_LONG=1`` (always by
    ``python -m tests.golden_replay``)."""


CASES = (
    Case("bundled-day", 0, 288, ("scaler", "seed", "scaler-relief")),
    Case("gen-100-day", 100, 288, ("scaler", "scaler-relief")),
    Case("gen-1000", 1000, 36, ("scaler",)),
    Case("bundled-week", 0, 2016, ("scaler", "seed", "scaler-relief"), long=True),
)
"""The cases, cheapest first; the bundled day is the first day of the bundled week."""


@cache
def whole_trace() -> Any:
    """Every series of the trace, read once per process (about 14 s) and shared by the cases:
    a case's replay reads only its pods' series, so the answer is the one of a trace read for
    those series alone."""
    from scaler.replay.traces import load_trace

    return load_trace(str(TRACE))


def replay_input(case: Case, workdir: Path) -> Any:
    """The :class:`~scaler.replay.simulate.ReplayInput` of ``case`` (a generated cluster is
    written under ``workdir`` and read back)."""
    from scaler.cmdline import bundled_example
    from scaler.prices import load_prices
    from scaler.replay.bundled import known_map
    from scaler.replay.inputs import build_grid, map_pods, usage_table
    from scaler.replay.simulate import ReplayInput
    from scaler.sources.files import load_snapshot

    if case.nodes:
        from benchmarks.generate import generate

        cluster = generate(case.nodes)
        path = workdir / f"snap-{case.nodes}"
        cluster.write(path)
        wanted: dict[str, str] = cluster.pod_series()
        del cluster
    else:
        path = Path(str(bundled_example()))
        wanted = known_map(path.name)
    snap = load_snapshot([str(path)], None)
    trace = whole_trace()
    if case.nodes:
        pod_series = {k: v for k, v in wanted.items() if v in trace.series}
    else:
        pod_series = map_pods(snap, trace, {}, path.name)
    used = set(pod_series.values())
    grid = build_grid(trace, used, START, START + case.steps * STEP, STEP)
    return ReplayInput(
        snap, usage_table(trace, used, grid), pod_series, STEP, 120.0, load_prices(None), 3600.0, 0
    )


def figures(result: Any) -> dict[str, Any]:
    """Everything a :class:`~scaler.replay.simulate.PolicyResult` holds but its wall time."""
    out = dataclasses.asdict(result)
    del out["elapsed_seconds"]
    return out


def dump(results: Mapping[str, Mapping[str, Any]]) -> str:
    """The golden text of one case: per policy, one line per field (JSON; floats as Python's
    shortest round-trip repr, so the text is exact)."""
    lines = ["{"]
    for i, (policy, fields) in enumerate(results.items()):
        lines.append(f" {json.dumps(policy)}: {{")
        keys = list(fields)
        for j, key in enumerate(keys):
            value = json.dumps(fields[key], sort_keys=True, separators=(",", ":"), allow_nan=True)
            lines.append(f"  {json.dumps(key)}: {value}{',' if j < len(keys) - 1 else ''}")
        lines.append(" }" + ("," if i < len(results) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def run_case(case: Case) -> str:
    """Replay ``case`` with the code of this tree and return its golden text."""
    from scaler.replay.policies import parse_policies
    from scaler.replay.simulate import run_policy

    with tempfile.TemporaryDirectory(prefix="golden-replay-") as tmp:
        inp = replay_input(case, Path(tmp))
        results = {}
        for name in case.policies:
            policy = parse_policies([name], {})[0]
            results[name] = figures(run_policy(inp, policy))
    return dump(results)


def path_of(case: Case) -> Path:
    """Where ``case``'s golden text lives."""
    return GOLDEN / f"{case.name}.json"


def differences(expected: str, got: str) -> list[str]:
    """Every field that differs between two golden texts, worded (the first element of each
    differing series); empty when equal."""
    if expected == got:
        return []
    want, have = json.loads(expected), json.loads(got)
    out: list[str] = []
    for policy in sorted(set(want) | set(have)):
        a, b = want.get(policy), have.get(policy)
        if a is None or b is None:
            out.append(f"policy {policy}: {'missing' if b is None else 'not expected'}")
            continue
        for key in sorted(set(a) | set(b)):
            if a.get(key) == b.get(key):
                continue
            x, y = a.get(key), b.get(key)
            if isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
                k = next(i for i, (u, v) in enumerate(zip(x, y, strict=True)) if u != v)
                out.append(f"policy {policy}, {key}[{k}]: expected {x[k]!r}, got {y[k]!r}")
            else:
                out.append(f"policy {policy}, {key}: expected {x!r}, got {y!r}")
    return out or ["the texts differ in layout only"]


def first_difference(expected: str, got: str) -> str:
    """The first field that differs between two golden texts, worded (``""`` when equal)."""
    found = differences(expected, got)
    return found[0] if found else ""


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.golden_replay [--write] [CASE...]``: check (or write) the cases."""
    ap = argparse.ArgumentParser(prog="python -m tests.golden_replay", description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    ap.add_argument("--write", action="store_true", help="write the golden files instead of checking")
    a = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"golden-replay: the trace {TRACE} is missing", file=sys.stderr)
        return 2
    chosen = [c for c in CASES if not a.cases or c.name in a.cases]
    failed = 0
    for case in chosen:
        t = time.perf_counter()
        text = run_case(case)
        took = time.perf_counter() - t
        if a.write:
            GOLDEN.mkdir(parents=True, exist_ok=True)
            path_of(case).write_text(text, encoding="utf-8")
            print(f"{case.name}: written ({took:.1f} s)")
            continue
        diff = differences(path_of(case).read_text(encoding="utf-8"), text)
        print(f"{case.name}: {'identical' if not diff else 'DIFFERS: ' + '; '.join(diff)} ({took:.1f} s)")
        if diff:  # kept for a look (or to be copied over the golden file once understood)
            got = Path(tempfile.gettempdir()) / f"golden-replay-{case.name}.got.json"
            got.write_text(text, encoding="utf-8")
            print(f"{case.name}: this run's text is in {got}")
        failed += bool(diff)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
