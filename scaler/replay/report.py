"""The replay report: one JSON document, and the side-by-side terminal table.

JSON (``--output json``): ``apiVersion: scaler.io/v1alpha1``, ``kind: ReplayReport``,
``scalerVersion``; the replay's inputs (``snapshot``; ``trace``: its ``path``, ``format``, how
many pods follow it and how they were matched, and for an export from Prometheus ``prometheus``:
URL, selector, both queries, its range and step; ``from``, ``to``, ``stepSeconds``, ``steps``,
``provisionDelaySeconds``), ``baseline`` (the same figures with no scale-down at all), and
``policies``: per policy ``name``, ``description``, ``flags``, ``nodeHours``,
``nodeHoursByPool``, ``costUsd`` (``null`` when a machine type has no price; then
``missingPrices`` names it), ``costByPoolUsd``, ``nodesRemoved``, ``nodesAdded``,
``podsEvicted`` (drains and reliefs), ``reliefEvictions``, ``podsDeleted``, ``overloadNodeMinutes`` (and ``…Cpu…``/``…Memory…``),
``throttledCpuCoreMinutes`` (CPU demand above the pods' limits), ``oomKills``, ``unplaceablePods``, ``unschedulablePods``, ``pendingPodMinutes``, ``failedRemovals``,
``events`` and ``timeline`` (per step: ``nodes``, ``overloadedNodes``, ``costUsd``); the step
times are in the top-level ``timeline.time`` (Unix seconds). Units are in the names;
node-minutes are minutes × nodes.

The document holds no wall-clock figure and nothing that depends on how the replay ran: the
same inputs give the same bytes whatever ``--processes``. The time the replay took is in the
table's footer only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from scaler.fanout import workers_phrase
from scaler.model.times import format_time
from scaler.replay.simulate import PolicyResult
from scaler.report.columns import output_width, render_columns, wrap_text

__all__ = ["ReplayMeta", "print_table", "report_dict", "table_lines"]


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
    version: str = ""
    pods_by_pod: int = 0
    pods_by_workload: int = 0
    pods_without_series: int = 0
    prometheus: Mapping[str, str] | None = None


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
        "reliefEvictions": r.relief_evictions,
        "podsDeleted": r.pods_deleted,
        "overloadNodeMinutes": round(r.overload_node_minutes, 1),
        "overloadCpuNodeMinutes": round(r.overload_cpu_node_minutes, 1),
        "overloadMemoryNodeMinutes": round(r.overload_memory_node_minutes, 1),
        "throttledCpuCoreMinutes": round(r.throttled_cpu_core_minutes, 1),
        "oomKills": r.oom_kills,
        "unplaceablePods": r.unplaceable_pods,
        "unschedulablePods": r.unschedulable_pods,
        "pendingPodMinutes": round(r.pending_pod_minutes, 1),
        "failedRemovals": r.failed_removals,
        "events": r.events,
    }


def _timeline(r: PolicyResult) -> dict[str, Any]:
    return {
        "nodes": r.nodes,
        "overloadedNodes": r.overloaded,
        "costUsd": [round(c, 6) for c in r.cost_per_step],
    }


def report_dict(meta: ReplayMeta, results: Sequence[PolicyResult], baseline: PolicyResult) -> dict[str, Any]:
    """The JSON report (see the module doc)."""
    trace: dict[str, Any] = {
        "path": meta.trace,
        "format": meta.trace_kind,
        "seriesUsed": meta.series,
        "skippedRows": meta.skipped_rows,
        "pods": meta.pods,
        "podsFollowingTrace": meta.pods_following,
        "podsMatchedByPod": meta.pods_by_pod,
        "podsMatchedByWorkload": meta.pods_by_workload,
        "podsWithoutSeries": meta.pods_without_series,
    }
    if meta.prometheus is not None:
        trace["prometheus"] = dict(meta.prometheus)
    return {
        "apiVersion": "scaler.io/v1alpha1",
        "kind": "ReplayReport",
        "scalerVersion": meta.version,
        "snapshot": meta.snapshot,
        "trace": trace,
        "from": format_time(meta.start),
        "to": format_time(meta.end),
        "stepSeconds": meta.step,
        "steps": meta.steps,
        "provisionDelaySeconds": meta.provision_delay,
        "baseline": {**_summary(baseline), "timeline": _timeline(baseline)},
        "policies": [{**_summary(r), "timeline": _timeline(r)} for r in results],
        "timeline": {"time": baseline.times},
    }


def _money(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _delta(v: float, base: float, unit: str = "") -> str:
    d = v - base
    if abs(d) < 0.05:
        return "±0"
    return f"{d:+,.0f}{unit}"


def table_lines(report: dict[str, Any], wide: bool = False) -> list[str]:
    """The side-by-side table of a :func:`report_dict` report, one policy per row and ``none``
    (no scale-down) last, as ``kubectl get`` prints (:mod:`scaler.report.columns`): the default
    view fits 80 columns with the built-in policy names; ``wide`` adds node-hours, nodes added,
    the pods evicted by hot-node relief, the absolute overload, the CPU throttled above the
    pods' limits, OOM kills, pods that fit no pool and the policy's description."""
    base = report["baseline"]
    headers = ["POLICY"] + (["NODE-HOURS"] if wide else []) + ["SAVED", "COST-USD", "REMOVED"]
    headers += (["ADDED"] if wide else []) + ["EVICTED"] + (["RELIEF-EVICTED"] if wide else []) + ["OVERLOAD"]
    headers += (["OVERLOAD-NODE-MIN", "THROTTLED-CORE-MIN", "OOM-KILLS"] if wide else []) + ["UNPLACEABLE"]
    headers += ["FIT-NO-POOL", "DESCRIPTION"] if wide else []
    rows = []
    for p, is_base in [*((p, False) for p in report["policies"]), (base, True)]:
        saved = base["nodeHours"] - p["nodeHours"]
        row = ["none" if is_base else p["name"]] + ([f"{p['nodeHours']:,.1f}"] if wide else [])
        row += [
            f"{saved / base['nodeHours']:.1%}" if base["nodeHours"] and not is_base else "-",
            _money(p["costUsd"]),
            str(p["nodesRemoved"]),
        ]
        row += ([str(p["nodesAdded"])] if wide else []) + [str(p["podsEvicted"])]
        row += [str(p["reliefEvictions"])] if wide else []
        row.append("-" if is_base else _delta(p["overloadNodeMinutes"], base["overloadNodeMinutes"]))
        if wide:
            row += [
                f"{p['overloadNodeMinutes']:,.0f}",
                f"{p['throttledCpuCoreMinutes']:,.0f}",
                f"{p['oomKills']:,}",
            ]
        row.append(str(p["unplaceablePods"]))
        row += [str(p["unschedulablePods"]), p["description"]] if wide else []
        rows.append(row)
    return render_columns(headers, rows)


def print_table(
    report: dict[str, Any], stream: TextIO, wide: bool = False, run: tuple[float, int] | None = None
) -> None:
    """Print a title line, the side-by-side table (:func:`table_lines`) and what the columns
    mean; prose wraps at :func:`scaler.report.columns.output_width`, the table never does.
    ``run``: (wall seconds, workers) of the replay, said in the footer."""
    steps, step = report["steps"], report["stepSeconds"]
    width = output_width(stream)
    lines = wrap_text(
        f"scaler replay: {report['from']} → {report['to']}, {steps} steps of {step / 60:g} min, "
        f"{report['trace']['podsFollowingTrace']} of {report['trace']['pods']} pods following the trace"
        + (
            f" ({report['trace']['podsMatchedByPod']} by pod, {report['trace']['podsMatchedByWorkload']} by workload)."
            if report["trace"].get("podsMatchedByWorkload")
            else "."
        ),
        width,
        "  ",
    )
    lines += table_lines(report, wide)
    lines.append("")
    missing = sorted({m for p in report["policies"] for m in p["missingPrices"]})
    notes = []
    if missing:
        notes.append(f"No price for {', '.join(missing)}: cost not computed (add them with --prices FILE).")
    notes.append(
        "SAVED: node-hours saved against none (no scale-down). OVERLOAD: node-minutes with real usage "
        "above 100% of allocatable cpu or 95% of memory, added to none's "
        f"{report['baseline']['overloadNodeMinutes']:,.0f}. UNPLACEABLE: evicted pods that found no node. "
        f"Pods' limits: none has {report['baseline']['throttledCpuCoreMinutes']:,.0f} core-minutes of CPU "
        f"demand above them (throttled) and {report['baseline']['oomKills']:,} OOM kills"
        + ("." if wide else "; each policy's figures with -o wide.")
        + ("" if run is None else f" Replayed in {run[0]:.0f} s on {workers_phrase(run[1])}.")
    )
    for text in notes:
        lines += wrap_text(text, width, "  ")
    stream.write("\n".join(lines) + "\n")
