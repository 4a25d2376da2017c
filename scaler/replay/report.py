"""The replay report: one JSON document, and the side-by-side terminal table.

JSON (``--output json``): ``apiVersion: scaler.io/v1alpha1``, ``kind: ReplayReport``; the
replay's inputs (``snapshot``, ``trace``, ``from``, ``to``, ``stepSeconds``, ``steps``,
``provisionDelaySeconds``), ``baseline`` (the same figures with no scale-down at all), and
``policies``: per policy ``name``, ``description``, ``flags``, ``nodeHours``,
``nodeHoursByPool``, ``costUsd`` (``null`` when a machine type has no price; then
``missingPrices`` names it), ``costByPoolUsd``, ``nodesRemoved``, ``nodesAdded``,
``podsEvicted``, ``podsDeleted``, ``overloadNodeMinutes`` (and ``…Cpu…``/``…Memory…``),
``unplaceablePods``, ``unschedulablePods``, ``pendingPodMinutes``, ``failedRemovals``,
``events``, ``elapsedSeconds`` and ``timeline`` (per step: ``nodes``, ``overloadedNodes``,
``costUsd``); the step times are in the top-level ``timeline.time`` (Unix seconds).
Units are in the names; node-minutes are minutes × nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from scaler.model.times import format_time
from scaler.replay.simulate import PolicyResult

__all__ = ["ReplayMeta", "print_table", "report_dict"]


@dataclass(frozen=True, slots=True)
class ReplayMeta:
    """What was replayed: inputs and run figures for the report header."""

    snapshot: str
    trace: str
    trace_kind: str
    series: int
    pods: int
    pods_following: int
    start: float
    end: float
    step: float
    steps: int
    provision_delay: float
    processes: int
    elapsed_seconds: float
    skipped_rows: int = 0


def _summary(r: PolicyResult) -> dict[str, Any]:
    return {
        "name": r.name,
        "description": r.description,
        "flags": list(r.flags),
        "nodeHours": round(r.node_hours, 3),
        "nodeHoursByPool": r.node_hours_by_pool,
        "costUsd": None if r.cost is None else round(r.cost, 2),
        "costByPoolUsd": {k: round(v, 2) for k, v in r.cost_by_pool.items()},
        "missingPrices": list(r.missing_prices),
        "nodesRemoved": r.nodes_removed,
        "nodesAdded": r.nodes_added,
        "podsEvicted": r.pods_evicted,
        "podsDeleted": r.pods_deleted,
        "overloadNodeMinutes": round(r.overload_node_minutes, 1),
        "overloadCpuNodeMinutes": round(r.overload_cpu_node_minutes, 1),
        "overloadMemoryNodeMinutes": round(r.overload_memory_node_minutes, 1),
        "unplaceablePods": r.unplaceable_pods,
        "unschedulablePods": r.unschedulable_pods,
        "pendingPodMinutes": round(r.pending_pod_minutes, 1),
        "failedRemovals": r.failed_removals,
        "events": r.events,
        "elapsedSeconds": round(r.elapsed_seconds, 2),
    }


def _timeline(r: PolicyResult) -> dict[str, Any]:
    return {
        "nodes": r.nodes,
        "overloadedNodes": r.overloaded,
        "costUsd": [round(c, 6) for c in r.cost_per_step],
    }


def report_dict(meta: ReplayMeta, results: Sequence[PolicyResult], baseline: PolicyResult) -> dict[str, Any]:
    """The JSON report (see the module doc)."""
    return {
        "apiVersion": "scaler.io/v1alpha1",
        "kind": "ReplayReport",
        "snapshot": meta.snapshot,
        "trace": {
            "path": meta.trace,
            "format": meta.trace_kind,
            "seriesUsed": meta.series,
            "skippedRows": meta.skipped_rows,
            "pods": meta.pods,
            "podsFollowingTrace": meta.pods_following,
        },
        "from": format_time(meta.start),
        "to": format_time(meta.end),
        "stepSeconds": meta.step,
        "steps": meta.steps,
        "provisionDelaySeconds": meta.provision_delay,
        "processes": meta.processes,
        "elapsedSeconds": round(meta.elapsed_seconds, 2),
        "baseline": {**_summary(baseline), "timeline": _timeline(baseline)},
        "policies": [{**_summary(r), "timeline": _timeline(r)} for r in results],
        "timeline": {"time": baseline.times},
    }


def _money(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def _delta(v: float, base: float, unit: str = "") -> str:
    d = v - base
    if abs(d) < 0.05:
        return "±0"
    return f"{d:+,.0f}{unit}"


def print_table(report: dict[str, Any], console: Console) -> None:
    """Print the side-by-side table of a :func:`report_dict` report."""
    base = report["baseline"]
    steps, step = report["steps"], report["stepSeconds"]
    title = (
        f"scaler replay: {report['from']} → {report['to']}, {steps} steps of {step / 60:g} min, "
        f"{report['trace']['podsFollowingTrace']} of {report['trace']['pods']} pods following the trace"
    )
    table = Table(title=title, title_justify="left")
    for col, just in (
        ("policy", "left"),
        ("node-hours", "right"),
        ("saved", "right"),
        ("cost USD", "right"),
        ("nodes removed", "right"),
        ("added", "right"),
        ("pods evicted", "right"),
        ("overload node-min", "right"),
        ("vs none", "right"),
        ("unplaceable pods", "right"),
    ):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for p in [*report["policies"], {**base, "name": "none (baseline)"}]:
        saved = base["nodeHours"] - p["nodeHours"]
        pct = f"{saved / base['nodeHours']:.1%}" if base["nodeHours"] else "—"
        unplaceable = str(p["unplaceablePods"])
        if p["unschedulablePods"]:
            unplaceable += f" ({p['unschedulablePods']} fit no pool)"
        table.add_row(
            p["name"],
            f"{p['nodeHours']:,.1f}",
            pct,
            _money(p["costUsd"]),
            str(p["nodesRemoved"]),
            str(p["nodesAdded"]),
            str(p["podsEvicted"]),
            f"{p['overloadNodeMinutes']:,.0f}",
            _delta(p["overloadNodeMinutes"], base["overloadNodeMinutes"]),
            unplaceable,
        )
    console.print(table)
    missing = sorted({m for p in report["policies"] for m in p["missingPrices"]})
    if missing:
        console.print(f"no price for {', '.join(missing)}: cost not computed (add them with --prices FILE)")
    console.print(
        "overload: node-minutes with real usage above 100% of allocatable cpu or 95% of memory; "
        "'vs none' compares with no scale-down at all. "
        f"Replayed in {report['elapsedSeconds']:.0f} s on {report['processes']} process(es)."
    )
