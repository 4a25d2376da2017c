"""What bounds hot-node relief on a trace: every overloaded node-step of one replay policy,
classified by what would have to move to bring the node back under the replay's overload line.

Issue 14 asks the README to say, when relief cannot halve the overload of doing nothing, what
bounds it. This replays one policy through :func:`scaler.replay.simulate.run_policy` (the same
inputs, controller and accounting as ``scaler replay``) and, through its per-step ``observe``
hook, looks at every node-step the replay counts as overloaded (real usage above
:data:`~scaler.replay.simulate.OVERLOAD_CPU` of allocatable CPU or
:data:`~scaler.replay.simulate.OVERLOAD_MEMORY` of allocatable memory). :func:`classify` names
the first thing in the way of relieving it, each node-step counted once, in this order:

* ``overhead``: still overloaded without any workload pod (DaemonSet pods, node overhead);
* ``drain-rules``: needs pods the drain rules keep (PDB, local storage, not replicated,
  ``safe-to-evict: "false"``; :func:`scaler.drain.rules.get_pods_to_move`);
* ``target-usage``: needs a pod whose load (max of request and real usage) fails TargetUsage
  even on an idle node of the same shape (above ``target_cpu_usage`` of its CPU or at or above
  ``target_memory_usage`` of its memory; :mod:`plugins.target_usage`);
* ``no-room``: needs a pod whose request fits on no other node (allocatable minus the requests
  of its pods, taints the pod does not tolerate excluded);
* ``relievable``: moving pods within those rules could bring it under, in principle.

Each step's resource is ``cpu`` when CPU is over the line (memory may be too), else ``memory``.
The bound is optimistic: it ignores the other scheduler filters and moves counted together.

Usage (one replay; ``none`` takes under a minute, ``scaler-relief`` about five)::

    python -m benchmarks.relief_bound --snapshot scaler/examples/bitbrains-gke-night-lowreq \\
        --trace ../shared/data/raw/bitbrains-rnd-2013/rnd-2013-7.tar.gz --from 2013-07-08 \\
        [--to TIME] [--policy none] [-o table|json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from scaler.config import ScalerConfig
from scaler.drain.pdb import RemainingPdbTracker
from scaler.drain.rules import DrainContext, DrainOptions, get_pods_to_move
from scaler.model.records import Node, Pod, Resources, Taint
from scaler.model.times import timestamp_seconds
from scaler.replay.world import World
from scaler.simulator.filters import untolerated_taint

__all__ = ["Blocker", "BoundCounter", "PodOnNode", "Room", "Verdict", "classify", "main"]


class Blocker(StrEnum):
    """What blocks relieving an overloaded node-step first (see the module doc)."""

    OVERHEAD = "overhead"
    DRAIN_RULES = "drain-rules"
    TARGET_USAGE = "target-usage"
    NO_ROOM = "no-room"
    RELIEVABLE = "relievable"


DESCRIPTIONS: Mapping[Blocker, str] = {
    Blocker.OVERHEAD: "overloaded without any workload pod (DaemonSets, node overhead)",
    Blocker.DRAIN_RULES: "needs a pod the drain rules keep (PDB, local storage, not replicated)",
    Blocker.TARGET_USAGE: "needs a pod above TargetUsage even on an idle node of the same shape",
    Blocker.NO_ROOM: "needs a pod whose request fits on no other node",
    Blocker.RELIEVABLE: "relievable in principle",
}
"""One line per :class:`Blocker` for the table."""


@dataclass(frozen=True, slots=True)
class PodOnNode:
    """A pod on the overloaded node.

    Attributes:
        pod: the pod (DaemonSet, mirror and terminal pods are not workload and never move).
        cpu_millicores, memory_bytes: its real usage at the step.
        movable: the drain rules (PDBs included) let it be evicted.
    """

    pod: Pod
    cpu_millicores: float
    memory_bytes: float
    movable: bool


@dataclass(frozen=True, slots=True)
class Room:
    """Another node as a destination by requests.

    Attributes:
        name: the node's name (a room named as the overloaded node is skipped).
        free_cpu_millicores, free_memory_bytes: allocatable minus the requests of its pods
            (negative when over-committed).
        taints: its taints (``NoSchedule`` and ``NoExecute`` ones keep pods that do not
            tolerate them away).
    """

    name: str
    free_cpu_millicores: int
    free_memory_bytes: int
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """The classification of one overloaded node-step.

    Attributes:
        resource: ``"cpu"`` when CPU is over the line (memory may be too), else ``"memory"``.
        blocker: what blocks relieving it first.
        one_pod_above_allocatable: one workload pod alone uses more of ``resource`` than the
            node's allocatable.
        pod_without_limit: a workload pod has no limit for ``resource``.
    """

    resource: str
    blocker: Blocker
    one_pod_above_allocatable: bool
    pod_without_limit: bool


def _over(allocatable: Resources, cpu: float, memory: float, lines: tuple[float, float]) -> bool:
    return cpu > allocatable.cpu_millicores * lines[0] or memory > allocatable.memory_bytes * lines[1]


def classify(
    node: Node,
    cpu_millicores: float,
    memory_bytes: float,
    pods: Sequence[PodOnNode],
    rooms: Sequence[Room],
    *,
    target: tuple[float, float] = (0.45, 0.75),
    lines: tuple[float, float] = (1.0, 0.95),
) -> Verdict | None:
    """Classify one node-step by what would have to move to bring ``node`` under ``lines``.

    Args:
        node: the node (its ``allocatable`` and ``name``).
        cpu_millicores, memory_bytes: its real usage (pods, DaemonSets and overhead).
        pods: the pods on it with their usage and movability; non-workload pods (DaemonSet,
            mirror, terminal) are ignored.
        rooms: the other nodes' free requests and taints.
        target: TargetUsage's CPU and memory targets, fractions 0-1 of a node of the same
            shape (CPU passes at or below, memory strictly below).
        lines: the overload line, fractions 0-1 of allocatable CPU and memory (above is over).

    Returns:
        ``None`` when the node is not over ``lines``, else a :class:`Verdict`. The pods that
        would move form nested sets (all workload pods ⊇ movable ⊇ movable under TargetUsage ⊇
        those with a destination by requests); the first set whose removal does not bring the
        node under names the blocker.
    """
    alloc = node.allocatable
    if not _over(alloc, cpu_millicores, memory_bytes, lines):
        return None
    resource = "cpu" if cpu_millicores > alloc.cpu_millicores * lines[0] else "memory"
    workload = [p for p in pods if not (p.pod.is_daemonset or p.pod.is_mirror or p.pod.is_terminal)]

    def passes_target(p: PodOnNode) -> bool:
        load_cpu = max(float(p.pod.requests.cpu_millicores), p.cpu_millicores)
        load_mem = max(float(p.pod.requests.memory_bytes), p.memory_bytes)
        return load_cpu <= target[0] * alloc.cpu_millicores and load_mem < target[1] * alloc.memory_bytes

    def has_room(p: PodOnNode) -> bool:
        req = p.pod.requests
        return any(
            r.name != node.name
            and req.cpu_millicores <= r.free_cpu_millicores
            and req.memory_bytes <= r.free_memory_bytes
            and untolerated_taint(r.taints, p.pod.tolerations) is None
            for r in rooms
        )

    movable = [p for p in workload if p.movable]
    small = [p for p in movable if passes_target(p)]
    placed = [p for p in small if has_room(p)]
    blocker = Blocker.RELIEVABLE
    for moved, if_still_over in (
        (workload, Blocker.OVERHEAD),
        (movable, Blocker.DRAIN_RULES),
        (small, Blocker.TARGET_USAGE),
        (placed, Blocker.NO_ROOM),
    ):
        left_cpu = cpu_millicores - sum(p.cpu_millicores for p in moved)
        left_mem = memory_bytes - sum(p.memory_bytes for p in moved)
        if _over(alloc, left_cpu, left_mem, lines):
            blocker = if_still_over
            break
    if resource == "cpu":
        biggest = max((p.cpu_millicores for p in workload), default=0.0)
        one_above = biggest > alloc.cpu_millicores
        no_limit = any(p.pod.cpu_limit_millicores is None for p in workload)
    else:
        biggest = max((p.memory_bytes for p in workload), default=0.0)
        one_above = biggest > alloc.memory_bytes
        no_limit = any(p.pod.memory_limit_bytes is None for p in workload)
    return Verdict(resource, blocker, one_above, no_limit)


class BoundCounter:
    """The ``observe`` hook of :func:`scaler.replay.simulate.run_policy`: classifies every
    overloaded node-step of the replay and counts the verdicts.

    Attributes:
        counts: ``(row, resource)`` → node-steps, where ``row`` is a :class:`Blocker` value,
            ``"all"``, ``"one pod above allocatable"`` or ``"pod without a limit"`` and
            ``resource`` is ``"cpu"`` or ``"memory"``.
    """

    def __init__(self, config: ScalerConfig, lines: tuple[float, float]) -> None:
        """``config``: the policy's (drain options, TargetUsage targets per node pool);
        ``lines``: the replay's overload line (fractions of allocatable CPU and memory)."""
        self.config = config
        self.options = DrainOptions.from_config(config)
        self.lines = lines
        self.counts: Counter[tuple[str, str]] = Counter()

    def __call__(self, world: World) -> None:
        """Classify the overloaded nodes of ``world``'s current step (read only)."""
        names, cpu, mem = world.node_usage()
        over = [
            (n, c, m)
            for n, c, m in zip(names, cpu.tolist(), mem.tolist(), strict=True)
            if _over(world.nodes[n].allocatable, c, m, self.lines)
        ]
        if not over:
            return
        snap = world.snapshot()
        usage = world.pod_usage()
        rooms = []
        for name in names:
            node = world.nodes[name]
            bound = [p for p in snap.pods_by_node.get(name, ()) if not p.is_terminal]
            rooms.append(
                Room(
                    name,
                    node.allocatable.cpu_millicores - sum(p.requests.cpu_millicores for p in bound),
                    node.allocatable.memory_bytes - sum(p.requests.memory_bytes for p in bound),
                    node.taints,
                )
            )
        for name, c, m in over:
            node = world.nodes[name]
            pods = []
            for p in snap.pods_by_node.get(name, ()):
                if p.is_daemonset or p.is_mirror or p.is_terminal:
                    continue
                ctx = DrainContext(snap, self.options, snap.now, RemainingPdbTracker(snap.pdbs))
                u = usage.get(p.uid, (0.0, 0.0))
                pods.append(PodOnNode(p, u[0], u[1], bool(get_pods_to_move([p], ctx).pods)))
            pool = self.config.for_pool(node.node_group)
            verdict = classify(
                node,
                c,
                m,
                pods,
                rooms,
                target=(pool.target_cpu_usage, pool.target_memory_usage),
                lines=self.lines,
            )
            if verdict is None:  # pragma: no cover - filtered above with the same line
                continue
            self.counts["all", verdict.resource] += 1
            self.counts[verdict.blocker.value, verdict.resource] += 1
            self.counts["one pod above allocatable", verdict.resource] += verdict.one_pod_above_allocatable
            self.counts["pod without a limit", verdict.resource] += verdict.pod_without_limit


def _rows(counts: Counter[tuple[str, str]]) -> list[tuple[str, str, int, int, int]]:
    """(key, description, all, cpu, memory) per row of the report."""
    keys = [
        ("all", "overloaded node-steps (x step = node-minutes)"),
        ("one pod above allocatable", "... one workload pod alone uses more than allocatable"),
        ("pod without a limit", "... a workload pod has no limit for the resource"),
        *((b.value, DESCRIPTIONS[b]) for b in Blocker),
    ]
    return [
        (k, d, counts[k, "cpu"] + counts[k, "memory"], counts[k, "cpu"], counts[k, "memory"]) for k, d in keys
    ]


def report(counts: Counter[tuple[str, str]], meta: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON report: ``meta`` (policy, range, replay figures) and, per row key, the
    node-steps ``{"all", "cpu", "memory"}``."""
    return {
        **meta,
        "node_steps": {k: {"all": a, "cpu": c, "memory": m} for k, _, a, c, m in _rows(counts)},
    }


def print_table(counts: Counter[tuple[str, str]], meta: Mapping[str, Any]) -> None:
    """Print ``meta`` then the rows as plain aligned columns (kubectl style)."""
    for k, v in meta.items():
        print(f"{k}: {v}")
    table = [("ROW", "NODE-STEPS", "CPU", "MEMORY", "DESCRIPTION")]
    table += [(k, f"{a:,}", f"{c:,}", f"{m:,}", d) for k, d, a, c, m in _rows(counts)]
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    for r in table:
        print("   ".join(r[i].ljust(widths[i]) if i == 0 else r[i].rjust(widths[i]) for i in range(4)), r[4])


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.relief_bound``: replay one policy and print the breakdown.
    Returns 0; bad input exits 2 with a one-line error naming it."""
    from scaler.model.snapshot import SnapshotError
    from scaler.prices import load_prices
    from scaler.replay.bundled import known_map
    from scaler.replay.inputs import (
        ANNOTATION_SERIES,
        MappingError,
        build_grid,
        map_pods,
        usage_table,
        with_history,
    )
    from scaler.replay.policies import PolicyError, parse_policies
    from scaler.replay.simulate import OVERLOAD_CPU, OVERLOAD_MEMORY, ReplayInput, run_policy
    from scaler.replay.traces import TraceError, load_trace
    from scaler.sources.files import load_snapshot

    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.relief_bound", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--snapshot", required=True, metavar="DIR", help="starting cluster (snapshot dir or file)"
    )
    ap.add_argument("--trace", required=True, metavar="PATH", help="usage trace, as scaler replay's")
    ap.add_argument("--from", dest="start", metavar="TIME", help="first step (RFC 3339 or Unix seconds)")
    ap.add_argument("--to", dest="end", metavar="TIME", help="end of the replay, exclusive")
    ap.add_argument("--policy", default="none", help="one scaler replay policy (default none)")
    ap.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    step = 300.0  # scaler replay's default --step
    try:
        start = None if args.start is None else timestamp_seconds(args.start)
        end = None if args.end is None else timestamp_seconds(args.end)
        policies = parse_policies([args.policy])
        if len(policies) != 1:
            raise ValueError(f"--policy: one policy, got {args.policy!r}")
        policy = policies[0]
        snapshot = load_snapshot([args.snapshot], None)
        name = Path(args.snapshot).resolve().name
        wanted = set(known_map(name).values())
        wanted |= {
            p.annotations[ANNOTATION_SERIES] for p in snapshot.pods if ANNOTATION_SERIES in p.annotations
        }
        trace = load_trace(args.trace, wanted=wanted or None)
        pod_series = map_pods(snapshot, trace, {}, name)
        used = set(pod_series.values())
        grid = build_grid(trace, used, start, end, step)
        history = policy.history_days * 86400.0 if policy.portrait else 0.0
        full, start_step = with_history(trace, used, grid, history)
    except (SnapshotError, TraceError, MappingError, PolicyError, ValueError) as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    inp = ReplayInput(
        snapshot,
        usage_table(trace, used, full),
        pod_series,
        step,
        prices=load_prices(None),
        start_step=start_step,
    )
    counter = BoundCounter(policy.config, (OVERLOAD_CPU, OVERLOAD_MEMORY))
    result = run_policy(inp, policy, observe=counter)
    meta = {
        "policy": policy.name,
        "snapshot": args.snapshot,
        "from": args.start,
        "to": args.end,
        "steps": len(grid),
        "node_hours": round(result.node_hours, 1),
        "overload_node_minutes": result.overload_node_minutes,
        "seconds": round(time.perf_counter() - started),
    }
    if args.output == "json":
        json.dump(report(counter.counts, meta), sys.stdout, indent=1)
        print()
    else:
        print_table(counter.counts, meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
