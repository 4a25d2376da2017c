"""What ``scaler tune`` writes: ``frontier.json``, the Pareto-front table, ``recommended.yaml``.

``frontier.json`` (``-o json``; ``apiVersion: scaler.io/v1alpha1``, ``kind: TuneFrontier``):
the inputs (``snapshot``, ``trace``, ``from``, ``to``, ``stepSeconds``, ``steps``), ``search``
(``sampler``, ``seed``, ``trials``, ``generationSize``, the constraints
``maxAddedOverloadNodeMinutes`` and ``maxOverloadRatio`` (``null`` when not asked),
``trialsFrom`` (the ``frontier.json`` whose trials were replayed, or ``null``), ``halving``
(``eta`` and the ``rungs``: each one's ``from``, ``to``, ``steps`` and ``trials`` replayed over
it; ``null`` without halving), ``space``), ``baseline`` (``none`` over the whole window:
``nodeHours``, ``costUsd``, ``overloadNodeMinutes``, ``evictions``), ``references`` (``scaler``
defaults and ``ca-requests``, figured as trials, over the whole window), ``trials`` (every
trial: ``number``, ``flags`` (flag → value), ``window`` (``from``, ``to``, ``steps``: where its
figures come from, the longest rung it reached), ``rung``, ``nodeHours``, ``savedNodeHours``,
``savedPercent``, ``usdPerMonth`` (cost saved, scaled to 30 days), ``addedOverloadNodeMinutes``,
``overloadRatio`` (its overload over no scale-down's on the same window; ``null`` when that is
0), ``evictions``, ``hotNodeRelief`` (its configuration turns on hot-node relief, which evicts
pods from busy nodes), ``reliefEvictions``, ``feasible`` (within the constraints over the whole
window; ``null`` for a trial stopped on a shorter one), ``pareto``), ``recommended`` (a trial
number or ``null``) and ``run`` (how it ran: ``workers``, ``rayAddress``, ``elapsedSeconds``,
``trialNodes``: the Ray node id of each trial's last replay). Everything but ``run`` is the same
for the same inputs and seed whatever ran the replays.

The Pareto front: the feasible trials of the whole window no other such trial dominates (at
least as many node-hours saved, no more added overload, no more evictions, and better in one).
The recommended trial: the front's point with the most node-hours saved; ties go to fewer
evictions, then less added overload, then the lower number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

import yaml

from scaler.model.times import format_time
from scaler.replay.simulate import PolicyResult
from scaler.report.columns import output_width, render_columns, wrap_text
from scaler.tune.search import ETA, Constraints, SearchResult, objectives
from scaler.tune.space import Space, Value

__all__ = [
    "constraint_phrase",
    "defaults_of",
    "front_rows",
    "frontier_dict",
    "pareto",
    "print_front",
    "recommended_yaml",
    "relief_note",
    "span_phrase",
]

_MONTH = 30 * 86400.0


def _dominates(a: tuple[float, float, float], b: tuple[float, float, float]) -> bool:
    better_or_equal = a[0] >= b[0] and a[1] <= b[1] and a[2] <= b[2]
    return better_or_equal and (a[0] > b[0] or a[1] < b[1] or a[2] < b[2])


def pareto(points: Mapping[int, tuple[float, float, float]]) -> set[int]:
    """The keys of ``points`` (saved, added overload, evictions) no other point dominates."""
    return {k for k, p in points.items() if not any(_dominates(q, p) for j, q in points.items() if j != k)}


def span_phrase(seconds: float) -> str:
    """A window's length in words: ``7 days``, ``1 day``, ``2.3 days``, ``6 hours``, ``1 hour``."""
    days = seconds / 86400.0
    if days >= 1:
        text = f"{days:.0f}" if abs(days - round(days)) < 0.05 else f"{days:.1f}"
        return f"{text} day{'' if text == '1' else 's'}"
    hours = seconds / 3600.0
    text = f"{hours:.0f}" if abs(hours - round(hours)) < 0.05 else f"{hours:.1f}"
    return f"{text} hour{'' if text == '1' else 's'}"


def _figures(r: PolicyResult, baseline: PolicyResult, span: float) -> dict[str, Any]:
    saved, added, evictions = objectives(r, baseline)
    usd = None
    if r.cost is not None and baseline.cost is not None and span > 0:
        usd = round((baseline.cost - r.cost) * _MONTH / span, 2)
    over = baseline.overload_node_minutes
    return {
        "nodeHours": round(r.node_hours, 3),
        "savedNodeHours": saved,
        "savedPercent": round(100.0 * saved / baseline.node_hours, 2) if baseline.node_hours else 0.0,
        "usdPerMonth": usd,
        "addedOverloadNodeMinutes": added,
        "overloadRatio": round(r.overload_node_minutes / over, 4) if over else None,
        "evictions": int(evictions),
        "reliefEvictions": r.relief_evictions,
    }


def _window(start: float, step: float, steps: int) -> dict[str, Any]:
    return {"from": format_time(start), "to": format_time(start + steps * step), "steps": steps}


def _trial_rows(
    search: SearchResult, settings: Mapping[str, Any], start: float, step: float
) -> list[dict[str, Any]]:
    """One ``frontier.json`` row per trial, each marked ``pareto`` (on the frontier of the
    feasible trials of the full window) or not."""
    full = len(search.rungs) - 1
    constraints = Constraints(settings["maxAddedOverloadNodeMinutes"], settings["maxOverloadRatio"])
    trials: list[dict[str, Any]] = []
    for tr in search.trials:
        baseline = search.baselines[tr.rung]
        whole = tr.rung == full
        trials.append(
            {
                "number": tr.number,
                "flags": dict(tr.flags),
                "window": _window(start, step, tr.steps),
                "rung": tr.rung,
                **_figures(tr.result, baseline, tr.steps * step),
                "hotNodeRelief": tr.relief,
                "feasible": constraints.feasible(tr.result, baseline) if whole else None,
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
    return trials


def _halving(search: SearchResult, start: float, step: float) -> dict[str, Any] | None:
    """The ``search.halving`` section: η and each rung's window and trial count (``None``
    without halving)."""
    if len(search.rungs) <= 1:
        return None
    return {
        "eta": ETA,
        "rungs": [
            {**_window(start, step, steps), "trials": count}
            for steps, count in zip(search.rungs, search.rung_trials, strict=True)
        ],
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
    ``sampler``, ``seed``, ``trials``, ``generationSize``, ``maxAddedOverloadNodeMinutes``,
    ``maxOverloadRatio``; ``run``: how it ran."""
    start, step = float(inputs["from"]), float(inputs["stepSeconds"])
    trials = _trial_rows(search, settings, start, step)
    best = sorted(
        (t for t in trials if t["pareto"]),
        key=lambda t: (-t["savedNodeHours"], t["evictions"], t["addedOverloadNodeMinutes"], t["number"]),
    )
    baseline = search.references["none"]
    span = float(inputs["to"]) - start
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
    halving = _halving(search, start, step)
    return {
        "apiVersion": "scaler.io/v1alpha1",
        "kind": "TuneFrontier",
        "scalerVersion": inputs.get("scalerVersion", ""),
        "snapshot": inputs["snapshot"],
        "trace": inputs["trace"],
        "from": format_time(start),
        "to": format_time(float(inputs["to"])),
        "stepSeconds": inputs["stepSeconds"],
        "steps": inputs["steps"],
        "search": {**settings, "halving": halving, "space": space.describe()},
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


def _evictions(t: Mapping[str, Any]) -> str:
    """A trial's evictions, with those of hot-node relief when its configuration turns it on."""
    text = f"{t['evictions']:,}"
    return f"{text} ({t['reliefEvictions']:,} by relief)" if t["hotNodeRelief"] else text


def front_rows(doc: Mapping[str, Any], defaults: Mapping[str, Value]) -> list[list[str]]:
    """Table rows of the front, most node-hours saved first: trial, saved %, USD per month,
    added overload, overload ratio, evictions (those of hot-node relief said), the flags that
    differ from ``defaults`` (flag → value)."""
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
                "—" if t["overloadRatio"] is None else f"{t['overloadRatio']:.2f}",
                _evictions(t),
                _changed(t["flags"], defaults),
            ]
        )
    return rows


def constraint_phrase(search: Mapping[str, Any]) -> str:
    """The constraints in words: ``added overload at most 0 node-minutes``, ``overload at most
    0.5 of no scale-down's``, or both joined by ``and``."""
    parts = []
    if search.get("maxAddedOverloadNodeMinutes") is not None:
        parts.append(f"added overload at most {search['maxAddedOverloadNodeMinutes']:g} node-minutes")
    if search.get("maxOverloadRatio") is not None:
        parts.append(f"overload at most {search['maxOverloadRatio']:g} of no scale-down's")
    return " and ".join(parts)


def _rungs_phrase(doc: Mapping[str, Any]) -> str:
    """How the trials were replayed: ``by successive halving (32 over the first 1 day, 11 over 3
    days, 4 over the whole 7 days)``, or ``""`` without halving."""
    halving = doc["search"].get("halving")
    if not halving:
        return ""
    step = float(doc["stepSeconds"])
    parts = [f"{r['trials']} over {span_phrase(r['steps'] * step)}" for r in halving["rungs"]]
    parts[0] = parts[0].replace(" over ", " over the first ", 1)
    parts[-1] = parts[-1].replace(" over ", " over the whole ", 1)
    return f" by successive halving ({', '.join(parts)})"


def relief_note(doc: Mapping[str, Any]) -> str | None:
    """A sentence when the recommended trial turns on hot-node relief (a feature that evicts
    pods from busy nodes, off by default), with its eviction count; else ``None``."""
    rec = next((t for t in doc["trials"] if t["number"] == doc["recommended"]), None)
    if rec is None or not rec["hotNodeRelief"]:
        return None
    return (
        f"Trial {rec['number']} turns on hot-node relief (hot-node-relief: true), which evicts pods from busy "
        f"nodes and is off by default: {rec['reliefEvictions']:,} of its {rec['evictions']:,} evictions over "
        f"the window are relief's."
    )


def print_front(
    doc: Mapping[str, Any], defaults: Mapping[str, Value], stream: TextIO, wall: float, workers: str
) -> None:
    """Print a title, the Pareto front as kubectl-style columns (never cut) and what they mean."""
    width = output_width(stream)
    trials = doc["trials"]
    front = [t for t in trials if t["pareto"]]
    lines = wrap_text(
        f"scaler tune: {doc['from']} → {doc['to']}, {len(trials)} trials{_rungs_phrase(doc)}, {len(front)} on "
        f"the Pareto front ({constraint_phrase(doc['search'])}).",
        width,
        "  ",
    )
    headers = ["TRIAL", "SAVED", "USD/MONTH", "ADDED-OVERLOAD", "OVERLOAD-RATIO", "EVICTIONS", "FLAGS"]
    if front:
        lines += render_columns(headers, front_rows(doc, defaults))
    else:
        lines.append("No trial meets the constraints over the whole window: nothing to recommend.")
    lines.append("")
    refs = "; ".join(
        f"{r['name']} saves {r['savedPercent']:.1f}% with {r['addedOverloadNodeMinutes']:,.0f} added overload "
        f"node-minutes and {r['evictions']:,} evictions"
        for r in doc["references"]
    )
    rec = doc["recommended"]
    stopped = sum(1 for t in trials if t["feasible"] is None)
    note = (
        "SAVED: node-hours saved against no scale-down. USD/MONTH: cost saved, scaled to 30 days. "
        "ADDED-OVERLOAD: node-minutes above 100% cpu or 95% memory, added to no scale-down's "
        f"{doc['baseline']['overloadNodeMinutes']:,.0f}; OVERLOAD-RATIO: the trial's overload over no "
        "scale-down's. FLAGS: those that differ from the defaults. "
        + (f"* recommended (trial {rec}). " if rec is not None else "")
        + (
            f"Figures are over the whole window; the {stopped} trials stopped on a shorter one are in "
            "frontier.json with that window's figures. "
            if stopped
            else ""
        )
        + f"For comparison, {refs}. {len(trials)} trials in {wall:.0f} s on {workers}."
    )
    lines += wrap_text(note, width, "  ")
    relief = relief_note(doc)
    if relief is not None:
        lines += ["", *wrap_text(f"Note: {relief}", width, "  ")]
    stream.write("\n".join(lines) + "\n")


def recommended_yaml(doc: Mapping[str, Any], base: Mapping[str, Any]) -> str | None:
    """``recommended.yaml``: the ``--config`` mapping with the recommended trial's flags over
    it, commented with its figures, the window they come from, and hot-node relief's
    evictions when it turns relief on; ``None`` when nothing is recommended. A configuration
    file ``scaler run --config`` and ``scaler dry-run --config`` read as it is."""
    number = doc["recommended"]
    if number is None:
        return None
    t = next(t for t in doc["trials"] if t["number"] == number)
    values: dict[str, Any] = {**base, **t["flags"]}
    added = float(t["addedOverloadNodeMinutes"])
    usd = "" if t["usdPerMonth"] is None else f", about ${t['usdPerMonth']:,.0f} a month"
    ratio = (
        "" if t["overloadRatio"] is None else f" (its overload: {t['overloadRatio']:.2f} of no scale-down's)"
    )
    halving = f", the whole window{_rungs_phrase(doc)}" if doc["search"].get("halving") else ""
    head = [
        "# scaler configuration recommended by `scaler tune` (trial {n}, seed {seed}).".format(
            n=number, seed=doc["search"]["seed"]
        ),
        f"# Replayed over {t['window']['from']} → {t['window']['to']}{halving}, of {doc['trace']}:",
        f"#   saves {t['savedNodeHours']:,.1f} node-hours ({t['savedPercent']:.1f}%){usd},",
        f"#   {'adds' if added >= 0 else 'takes'} {abs(added):,.1f} overload node-minutes "
        f"{'to' if added >= 0 else 'off'} no scale-down's {doc['baseline']['overloadNodeMinutes']:,.1f}{ratio},",
        f"#   evicts {t['evictions']:,} pods.",
    ]
    relief = relief_note(doc)
    if relief is not None:
        head += [f"# {line}" for line in wrap_text(relief, 96, "")]
    head.append("# Use: scaler run --config FILE, scaler dry-run --config FILE, scaler replay --config FILE.")
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
