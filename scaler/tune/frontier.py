"""What ``scaler tune`` writes: ``frontier.json``, the Pareto-front table, ``recommended.yaml``.

``frontier.json`` (``-o json``; ``apiVersion: scaler.io/v1alpha1``, ``kind: TuneFrontier``):
the inputs (``snapshot``, ``trace``, ``from``, ``to``, ``stepSeconds``, ``steps``), ``search``
(``sampler``, ``seed``, ``trials``, ``generationSize``, ``maxAddedOverloadNodeMinutes``,
``space``), ``baseline`` (``none``: ``nodeHours``, ``costUsd``, ``overloadNodeMinutes``,
``evictions``), ``references`` (``scaler`` defaults and ``ca-requests``, figured as trials),
``trials`` (every trial: ``number``, ``flags`` (flag → value), ``nodeHours``,
``savedNodeHours``, ``savedPercent``, ``usdPerMonth`` (cost saved, scaled to 30 days),
``addedOverloadNodeMinutes``, ``evictions``, ``feasible`` (within the constraint), ``pareto``),
``recommended`` (a trial number or ``null``) and ``run`` (how it ran: ``workers``,
``rayAddress``, ``elapsedSeconds``, ``trialNodes``: the Ray node id of each trial). Everything
but ``run`` is the same for the same inputs and seed whatever ran the replays.

The Pareto front: the feasible trials no other feasible trial dominates (at least as many
node-hours saved, no more added overload, no more evictions, and better in one). The
recommended trial: the front's point with the most node-hours saved; ties go to fewer
evictions, then less added overload, then the lower number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

import yaml

from scaler.model.times import format_time
from scaler.replay.simulate import PolicyResult
from scaler.report.columns import output_width, render_columns, wrap_text
from scaler.tune.search import SearchResult, objectives
from scaler.tune.space import Space, Value

__all__ = ["defaults_of", "front_rows", "frontier_dict", "pareto", "print_front", "recommended_yaml"]

_MONTH = 30 * 86400.0


def _dominates(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    better_or_equal = a[0] >= b[0] and a[1] <= b[1] and a[2] <= b[2]
    return better_or_equal and (a[0] > b[0] or a[1] < b[1] or a[2] < b[2])


def pareto(points: Mapping[int, tuple[float, float, float]]) -> set[int]:
    """The keys of ``points`` (saved, added overload, evictions) no other point dominates."""
    return {k for k, p in points.items() if not any(_dominates(q, p) for j, q in points.items() if j != k)}


def _figures(r: PolicyResult, baseline: PolicyResult, span: float) -> dict[str, Any]:
    saved, added, evictions = objectives(r, baseline)
    usd = None
    if r.cost is not None and baseline.cost is not None and span > 0:
        usd = round((baseline.cost - r.cost) * _MONTH / span, 2)
    return {
        "nodeHours": round(r.node_hours, 3),
        "savedNodeHours": saved,
        "savedPercent": round(100.0 * saved / baseline.node_hours, 2) if baseline.node_hours else 0.0,
        "usdPerMonth": usd,
        "addedOverloadNodeMinutes": added,
        "evictions": int(evictions),
    }


def frontier_dict(
    search: SearchResult,
    space: Space,
    inputs: Mapping[str, Any],
    settings: Mapping[str, Any],
    run: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``frontier.json`` document (see the module doc). ``inputs``: ``snapshot``, ``trace``,
    ``from``/``to`` (Unix seconds), ``stepSeconds``, ``steps``; ``settings``: the search's
    ``sampler``, ``seed``, ``trials``, ``generationSize``, ``maxAddedOverloadNodeMinutes``;
    ``run``: how it ran."""
    baseline = search.references["none"]
    span = float(inputs["to"]) - float(inputs["from"])
    limit = float(settings["maxAddedOverloadNodeMinutes"])
    trials: list[dict[str, Any]] = []
    for tr in search.trials:
        f = _figures(tr.result, baseline, span)
        trials.append(
            {
                "number": tr.number,
                "flags": dict(tr.flags),
                **f,
                "feasible": f["addedOverloadNodeMinutes"] <= limit,
            }
        )
    points = {
        t["number"]: (t["savedNodeHours"], t["addedOverloadNodeMinutes"], float(t["evictions"]))
        for t in trials
        if t["feasible"]
    }
    front = pareto(points)
    for t in trials:
        t["pareto"] = t["number"] in front
    best = sorted(
        (t for t in trials if t["pareto"]),
        key=lambda t: (-t["savedNodeHours"], t["evictions"], t["addedOverloadNodeMinutes"], t["number"]),
    )
    references = [
        {
            "name": "scaler",
            "description": "scaler's defaults",
            **_figures(search.references["scaler"], baseline, span),
        },
        {
            "name": "ca-requests",
            "description": "cluster-autoscaler's rule: requests-based utilization, threshold 0.5",
            **_figures(search.references["ca-requests"], baseline, span),
        },
    ]
    return {
        "apiVersion": "scaler.io/v1alpha1",
        "kind": "TuneFrontier",
        "scalerVersion": inputs.get("scalerVersion", ""),
        "snapshot": inputs["snapshot"],
        "trace": inputs["trace"],
        "from": format_time(float(inputs["from"])),
        "to": format_time(float(inputs["to"])),
        "stepSeconds": inputs["stepSeconds"],
        "steps": inputs["steps"],
        "search": {**settings, "space": space.describe()},
        "baseline": {
            "nodeHours": round(baseline.node_hours, 3),
            "costUsd": None if baseline.cost is None else round(baseline.cost, 2),
            "overloadNodeMinutes": round(baseline.overload_node_minutes, 1),
            "evictions": baseline.pods_evicted,
        },
        "references": references,
        "trials": trials,
        "recommended": best[0]["number"] if best else None,
        "run": dict(run),
    }


def _value(v: Value) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:g}" if isinstance(v, float) else str(v)


def _changed(flags: Mapping[str, Value], defaults: Mapping[str, Value]) -> str:
    parts = [f"{k}={_value(v)}" for k, v in flags.items() if _value(v) != _value(defaults.get(k, ""))]
    return " ".join(parts) if parts else "(defaults)"


def front_rows(doc: Mapping[str, Any], defaults: Mapping[str, Value]) -> list[list[str]]:
    """Table rows of the front, most node-hours saved first: trial, saved %, USD per month,
    added overload, evictions, the flags that differ from ``defaults`` (flag → value)."""
    rows = []
    front = sorted(
        (t for t in doc["trials"] if t["pareto"]), key=lambda t: (-t["savedNodeHours"], t["number"])
    )
    for t in front:
        usd = "—" if t["usdPerMonth"] is None else f"{t['usdPerMonth']:,.0f}"
        mark = "*" if t["number"] == doc["recommended"] else ""
        rows.append(
            [
                f"{t['number']}{mark}",
                f"{t['savedPercent']:.1f}%",
                usd,
                f"{t['addedOverloadNodeMinutes']:,.0f}",
                f"{t['evictions']:,}",
                _changed(t["flags"], defaults),
            ]
        )
    return rows


def print_front(
    doc: Mapping[str, Any], defaults: Mapping[str, Value], stream: TextIO, wall: float, workers: str
) -> None:
    """Print a title, the Pareto front as kubectl-style columns (never cut) and what they mean."""
    width = output_width(stream)
    trials = doc["trials"]
    front = [t for t in trials if t["pareto"]]
    lines = wrap_text(
        f"scaler tune: {doc['from']} → {doc['to']}, {len(trials)} trials, {len(front)} on the Pareto front "
        f"(added overload at most {doc['search']['maxAddedOverloadNodeMinutes']:g} node-minutes).",
        width,
        "  ",
    )
    headers = ["TRIAL", "SAVED", "USD/MONTH", "ADDED-OVERLOAD", "EVICTIONS", "FLAGS"]
    if front:
        lines += render_columns(headers, front_rows(doc, defaults))
    else:
        lines.append("No trial stays within --max-added-overload: nothing to recommend.")
    lines.append("")
    refs = "; ".join(
        f"{r['name']} saves {r['savedPercent']:.1f}% with {r['addedOverloadNodeMinutes']:,.0f} added overload "
        f"node-minutes and {r['evictions']:,} evictions"
        for r in doc["references"]
    )
    rec = doc["recommended"]
    note = (
        "SAVED: node-hours saved against no scale-down. USD/MONTH: cost saved, scaled to 30 days. "
        "ADDED-OVERLOAD: node-minutes above 100% cpu or 95% memory, added to no scale-down's "
        f"{doc['baseline']['overloadNodeMinutes']:,.0f}. FLAGS: those that differ from the defaults. "
        + (f"* recommended (trial {rec}). " if rec is not None else "")
        + f"For comparison, {refs}. {len(trials)} trials in {wall:.0f} s on {workers}."
    )
    lines += wrap_text(note, width, "  ")
    stream.write("\n".join(lines) + "\n")


def recommended_yaml(doc: Mapping[str, Any], base: Mapping[str, Any]) -> str | None:
    """``recommended.yaml``: the ``--config`` mapping with the recommended trial's flags over
    it, commented with its figures; ``None`` when nothing is recommended. A configuration file
    ``scaler run --config`` and ``scaler dry-run --config`` read as it is."""
    number = doc["recommended"]
    if number is None:
        return None
    t = next(t for t in doc["trials"] if t["number"] == number)
    values: dict[str, Any] = {**base, **t["flags"]}
    added = float(t["addedOverloadNodeMinutes"])
    usd = "" if t["usdPerMonth"] is None else f", about ${t['usdPerMonth']:,.0f} a month"
    head = [
        "# scaler configuration recommended by `scaler tune` (trial {n}, seed {seed}).".format(
            n=number, seed=doc["search"]["seed"]
        ),
        f"# Replayed over {doc['from']} → {doc['to']} of {doc['trace']}:",
        f"#   saves {t['savedNodeHours']:,.1f} node-hours ({t['savedPercent']:.1f}%){usd},",
        f"#   {'adds' if added >= 0 else 'takes'} {abs(added):,.1f} overload node-minutes "
        f"{'to' if added >= 0 else 'off'} no scale-down's {doc['baseline']['overloadNodeMinutes']:,.1f},",
        f"#   evicts {t['evictions']:,} pods.",
        "# Use: scaler run --config FILE, scaler dry-run --config FILE, scaler replay --config FILE.",
    ]
    return "\n".join(head) + "\n" + yaml.safe_dump(values, sort_keys=False, default_flow_style=False)


def defaults_of(space: Space, base: Mapping[str, Any]) -> dict[str, Value]:
    """flag → the value it takes without the search (``--config``, else scaler's default), in
    the form trials write it, for the table's "differs from the defaults"."""
    from scaler.config import DURATION_KEYS, ScalerConfig
    from scaler.tune.space import format_duration

    cfg = ScalerConfig.from_mapping(base)
    out: dict[str, Value] = {}
    for p in space.params:
        field = p.flag.replace("-", "_")
        v = getattr(cfg, field)
        out[p.flag] = format_duration(float(v)) if field in DURATION_KEYS else v
    return out
