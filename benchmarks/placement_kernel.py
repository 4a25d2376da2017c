"""What a compiled first fit would give: ``python -m benchmarks.placement_kernel``.

Needs numba (``pip install numba``), which is not a dependency of scaler: this measures a
design choice, it is not part of the product.

A generated cluster (:func:`benchmarks.generate.generate`, 1,000 nodes by default) is replayed
twice with the ``scaler`` policy, in a process of its own (the generator runs in this one). The
first replay is timed as it is. In the second, every placement of a pod whose filters all answer
for the whole node table at once (no Score plugin, no extended resources: the path the removal
simulator takes for nearly every pod) also finds the pod's destination with a first fit compiled
by numba, at the same moment, on the same state: one pass over the destination tier in
round-robin order that stops at the first node where the pod fits, reading NodeResourcesFit's
room left, TargetUsage's rooms and moved load, and the mask of the other filters, asked as the
removal simulator asks them (:class:`~scaler.simulator.removal.Prefilter`). Both must choose the same node at every placement (else exit 1):
the compiled pass keeps the semantics the filter tests pin. The two are timed alternately, each
first on every other placement.

It prints the time per placement of both, their share of a step, and the step and month the
compiled first fit would give (the month: 8,640 five-minute steps).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MONTH = 8640


# ---- the worker (a process of its own) ------------------------------------------------------------


def _kernel() -> Any:
    """The compiled first fit: the index into ``pos`` of the first row from ``start`` (wrapping
    round) where ``passing`` (the other filters' mask) is true and the pod fits by
    NodeResourcesFit and TargetUsage, ``-1`` when none. The arithmetic is the one of the
    filters' ``fit_mask`` on int64 columns."""
    import numba  # type: ignore[import-not-found,unused-ignore]

    @numba.njit(cache=False, nogil=True)  # type: ignore[untyped-decorator,unused-ignore]
    def first_fit(
        pos: Any,
        start: int,
        passing: Any,
        free_pods: Any,
        free_cpu: Any,
        free_mem: Any,
        free_eph: Any,
        req_cpu: int,
        req_mem: int,
        req_eph: int,
        moved_cpu: Any,
        moved_mem: Any,
        cpu_room: Any,
        mem_room: Any,
        load_cpu: int,
        load_mem: int,
    ) -> int:
        n = len(pos)
        for k in range(n):
            j = start + k
            if j >= n:
                j -= n
            r = pos[j]
            if not passing[r] or free_pods[r] < 1:
                continue
            if (req_cpu > 0 and free_cpu[r] < req_cpu) or (req_mem > 0 and free_mem[r] < req_mem):
                continue
            if req_eph > 0 and free_eph[r] < req_eph:
                continue
            if moved_cpu[r] + load_cpu <= cpu_room[r] and moved_mem[r] + load_mem < mem_room[r]:
                return j
        return -1

    return first_fit


class _Compiled:
    """The compiled path of one placement, beside the project's (see the module doc)."""

    def __init__(self) -> None:
        self.first_fit = _kernel()
        self.calls = 0  # placements that found a destination, timed on both paths
        self.nowhere = 0  # placements that found none (both then count refusals alike: not timed)
        self.other = 0  # placements the compiled path cannot take (a filter left to ask)
        self.seconds_project = 0.0
        self.seconds_compiled = 0.0
        self.kernel_seconds = 0.0  # in the compiled pass itself, over the timed placements
        self.warm = False
        # Per simulator's filters: them, whether NodeResourcesFit is one, TargetUsage, a Prefilter of the others.
        self._prefilters: dict[int, tuple[Any, bool, Any, Any]] = {}

    def destination(self, sim: Any, pod: Any, tiers: Any, offsets: dict[int, int]) -> str | bool | None:
        """The compiled path's answer for ``pod`` (``False``: it cannot take this pod)."""
        state = sim.state
        kept = self._prefilters.get(id(sim.filters))
        if kept is None or kept[0] is not sim.filters:
            from scaler.simulator.removal import Prefilter

            named = {f.name: f for f in sim.filters}
            nrf, tu = named.get("NodeResourcesFit"), named.get("TargetUsage")
            others = Prefilter([f for f in sim.filters if f is not nrf and f is not tu])
            kept = self._prefilters[id(sim.filters)] = (sim.filters, nrf is not None, tu, others)
        _, has_nrf, tu, others = kept
        if not has_nrf or tu is None or sim.scorers:
            return False
        if any(v > 0 for v in pod.placement_requests.extended.values()):
            return False
        passing = others.of(pod, state)  # the other filters, asked as the simulator asks them
        if not passing.by_mask:
            return False
        t = state.table
        load_cpu, load_mem = state.load(pod)
        if t.magnitude + abs(load_cpu) + abs(load_mem) >= 2**62:
            return False
        cpu_room, _, mem_room, _, _ = tu._rooms(state)
        req = pod.placement_requests
        for i, tier in enumerate(tiers):
            pos = sim._positions(tier)
            if len(pos) == 0:
                continue
            k0 = time.perf_counter()
            j = self.first_fit(
                pos, offsets.get(i, 0) % len(pos), passing._mask,
                t.free_pods, t.free_cpu, t.free_mem, t.free_eph,
                req.cpu_millicores, req.memory_bytes, req.ephemeral_storage_bytes,
                t.moved_cpu, t.moved_mem, cpu_room, mem_room, load_cpu, load_mem,
            )  # fmt: skip
            self.kernel_seconds += time.perf_counter() - k0
            if j >= 0:
                return str(state.names[int(pos[j])])
        return None


def _work(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.replay import _input
    from scaler.replay.policies import parse_policies
    from scaler.replay.simulate import run_policy
    from scaler.simulator.removal import RemovalSimulator

    inp = _input(args.snapshot, args.series, args.steps)
    policy = parse_policies(["scaler"], {})[0]
    started = time.perf_counter()
    run_policy(inp, policy)
    step_seconds = (time.perf_counter() - started) / args.steps

    compiled = _Compiled()
    project = RemovalSimulator._find_destination
    mismatches: list[str] = []

    def both(sim: Any, pod: Any, tiers: Any, reasons: Any) -> str | None:
        offsets = dict(sim._offsets)
        if not compiled.warm:  # compile once, outside the timings
            compiled.destination(sim, pod, tiers, offsets)
            compiled.warm, compiled.kernel_seconds = True, 0.0
        kernel = compiled.kernel_seconds
        first = (compiled.calls + compiled.nowhere) % 2 == 0
        if first:
            t0 = time.perf_counter()
            mine = compiled.destination(sim, pod, tiers, offsets)
            t1 = time.perf_counter()
        t2 = time.perf_counter()
        answer: str | None = project(sim, pod, tiers, reasons)
        t3 = time.perf_counter()
        if not first:
            t0 = time.perf_counter()
            mine = compiled.destination(sim, pod, tiers, offsets)
            t1 = time.perf_counter()
        if mine is False:
            compiled.other += 1
            return answer
        if mine != answer and len(mismatches) < 5:
            mismatches.append(f"{pod.key}: compiled {mine}, project {answer}")
        if answer is None:
            compiled.nowhere += 1
            compiled.kernel_seconds = kernel
            return answer
        compiled.calls += 1
        compiled.seconds_compiled += t1 - t0
        compiled.seconds_project += t3 - t2
        return answer

    # The measure runs beside the simulator's own search, in this worker only.
    RemovalSimulator._find_destination = both  # type: ignore[method-assign,assignment]
    try:
        run_policy(inp, policy)
    finally:
        RemovalSimulator._find_destination = project  # type: ignore[method-assign]
    return {
        "nodes": len(inp.snapshot.nodes),
        "steps": args.steps,
        "step_seconds": step_seconds,
        "placements": compiled.calls,
        "placements_other": compiled.other,
        "placements_nowhere": compiled.nowhere,
        "project_seconds": compiled.seconds_project,
        "compiled_seconds": compiled.seconds_compiled,
        "kernel_seconds": compiled.kernel_seconds,
        "mismatches": mismatches,
    }


# ---- the driver -------------------------------------------------------------------------------------


def report(r: dict[str, Any]) -> str:
    """The figures of one worker's result, as printed."""
    steps, n = r["steps"], max(r["placements"], 1)
    saved = (r["project_seconds"] - r["compiled_seconds"]) / steps
    step, after = r["step_seconds"], r["step_seconds"] - saved
    lines = [
        f"{r['nodes']} nodes, {steps} steps of scaler: {step * 1000:.1f} ms a step "
        f"(a month {step * MONTH / 60:.1f} min)",
        f"placements a step: {r['placements'] / steps:.0f} found a destination by mask, "
        f"{r['placements_nowhere'] / steps:.1f} found none, {r['placements_other'] / steps:.1f} not by mask",
        f"finding a destination, project: {r['project_seconds'] / n * 1e6:.1f} µs a placement, "
        f"{r['project_seconds'] / steps / step:.0%} of a step",
        f"finding a destination, compiled first fit: {r['compiled_seconds'] / n * 1e6:.1f} µs a placement "
        f"({r['kernel_seconds'] / n * 1e6:.1f} in the compiled pass, the rest the other filters' masks)",
        f"a step with the compiled first fit: {after * 1000:.1f} ms (a month {after * MONTH / 60:.1f} min, "
        f"{step / after:.2f}× faster)",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the measure (see the module doc); exit 2 without numba, 1 when the answers differ."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.placement_kernel", description="What a compiled first fit would give."
    )
    ap.add_argument("--nodes", type=int, default=1000, help="generated cluster size (default 1000)")
    ap.add_argument("--steps", type=int, default=288, help="5-minute steps replayed (default 288, a day)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--snapshot", help=argparse.SUPPRESS)
    ap.add_argument("--series", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.nodes < 1 or args.steps < 1:
        print(f"placement_kernel: --nodes and --steps must be at least 1, not {args.nodes} and {args.steps}",
              file=sys.stderr)  # fmt: skip
        return 2
    if importlib.util.find_spec("numba") is None:
        print(
            "placement_kernel: needs numba (pip install numba), which scaler does not depend on",
            file=sys.stderr,
        )
        return 2
    if args.worker:
        print(json.dumps(_work(args)))
        return 0
    from benchmarks.generate import generate

    with tempfile.TemporaryDirectory(prefix="placement-kernel-") as tmp:
        cluster = generate(args.nodes)
        cluster.write(Path(tmp) / "snap")
        series = Path(tmp) / "series.json"
        series.write_text(json.dumps(cluster.pod_series()), encoding="utf-8")
        del cluster
        cmd = [sys.executable, "-m", "benchmarks.placement_kernel", "--worker", "--snapshot", f"{tmp}/snap",
               "--series", str(series), "--steps", str(args.steps)]  # fmt: skip
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"placement_kernel: the worker failed:\n{proc.stderr[-3000:]}", file=sys.stderr)
        return 1
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(report(result))
    if result["mismatches"]:
        print("different destinations: " + "; ".join(result["mismatches"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
