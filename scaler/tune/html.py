"""``scaler tune -o html``: one self-contained page with savings against added overload.

The plot: every trial replayed over the whole window as a point (x: overload node-minutes
added over no scale-down, y: node-hours saved in %; trials stopped on a shorter window by
successive halving are not comparable and are left out), the Pareto front highlighted (its third
objective, evictions, is in each point's hover text), the recommended trial circled, the
``--max-added-overload`` constraint as a dashed line, and scaler's defaults and
cluster-autoscaler's requests-based rule marked; the front's table below, and a note when the
recommended trial turns on hot-node relief. The page embeds plotly.js (it opens offline). Needs
``plotly``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from scaler.tune.frontier import constraint_phrase, front_rows, relief_note
from scaler.tune.space import Value

__all__ = ["figure", "render_html"]

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
p.meta { color: #555; margin: 0 0 16px 0; font-size: 13px; }
p.note { background: #fff4e5; border-left: 4px solid #ff9800; padding: 6px 10px; font-size: 14px; }
table { border-collapse: collapse; font-size: 13px; margin: 12px 0 18px 0; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
td:last-child, th:last-child { text-align: left; font-family: monospace; }
"""


def _hover(t: Mapping[str, Any]) -> str:
    flags = "<br>".join(f"{k}={v}" for k, v in t["flags"].items())
    return (
        f"trial {t['number']}: saved {t['savedPercent']:.1f}%, added overload "
        f"{t['addedOverloadNodeMinutes']:,.0f}, evictions {t['evictions']:,}"
        f"{f' ({relief:,} by hot-node relief)' if (relief := t.get('reliefEvictions')) and t.get('hotNodeRelief') else ''}"
        f"<br>{flags}"
    )


def figure(doc: Mapping[str, Any]) -> Any:
    """The plotly figure of a ``frontier.json`` document.

    Raises:
        ImportError: plotly is not installed.
    """
    import plotly.graph_objects as go  # type: ignore[import-untyped,import-not-found,unused-ignore]

    trials = [t for t in doc["trials"] if t["feasible"] is not None]  # the whole window's
    fig = go.Figure()
    others = [t for t in trials if not t["pareto"]]
    front = sorted((t for t in trials if t["pareto"]), key=lambda t: t["addedOverloadNodeMinutes"])
    fig.add_trace(_points(go, others, "trials", "#bbbbbb", 8))
    fig.add_trace(_points(go, front, "Pareto front (saved, added overload, evictions)", "#1f77b4", 11))
    rec = next((t for t in trials if t["number"] == doc["recommended"]), None)
    if rec is not None:
        fig.add_trace(
            go.Scatter(
                x=[rec["addedOverloadNodeMinutes"]],
                y=[rec["savedPercent"]],
                mode="markers+text",
                name=f"recommended (trial {rec['number']})",
                marker={"symbol": "circle-open", "size": 22, "color": "#2ca02c", "line": {"width": 3}},
                text=[f"trial {rec['number']}"],
                textposition="top center",
                hovertext=[_hover(rec)],
                hoverinfo="text",
            )
        )
    for ref, symbol, color in zip(doc["references"], ("diamond", "x"), ("#ff7f0e", "#d62728"), strict=False):
        label = "scaler defaults" if ref["name"] == "scaler" else "requests-based (ca-requests)"
        fig.add_trace(
            go.Scatter(
                x=[ref["addedOverloadNodeMinutes"]],
                y=[ref["savedPercent"]],
                mode="markers+text",
                name=label,
                marker={"symbol": symbol, "size": 14, "color": color},
                text=[label],
                textposition="middle left",
                hovertext=[f"{label}: saved {ref['savedPercent']:.1f}%, evictions {ref['evictions']:,}"],
                hoverinfo="text",
            )
        )
    if doc["search"].get("maxAddedOverloadNodeMinutes") is not None:
        fig.add_vline(
            x=float(doc["search"]["maxAddedOverloadNodeMinutes"]),
            line={"dash": "dash", "color": "#888888"},
            annotation_text="--max-added-overload",
            annotation_position="top right",
        )
    fig.update_layout(
        title=f"Node-hours saved against added overload, {doc['from']} → {doc['to']}",
        xaxis_title="overload node-minutes added over no scale-down",
        yaxis_title="node-hours saved (%)",
        template="plotly_white",
        height=560,
        legend={"orientation": "h", "y": -0.18},
    )
    return fig


def _points(go: Any, trials: list[dict[str, Any]], name: str, color: str, size: int) -> Any:
    """A scatter of ``trials``: added overload (node-minutes) against saved %, each with its hover."""
    return go.Scatter(
        x=[t["addedOverloadNodeMinutes"] for t in trials],
        y=[t["savedPercent"] for t in trials],
        mode="markers",
        name=name,
        marker={"color": color, "size": size},
        hovertext=[_hover(t) for t in trials],
        hoverinfo="text",
    )


def render_html(doc: Mapping[str, Any], defaults: Mapping[str, Value]) -> str:
    """The page for a ``frontier.json`` document; ``defaults``: flag → value without search.

    Raises:
        ImportError: plotly is not installed.
    """
    fig = figure(doc)
    plot = fig.to_html(
        full_html=False, include_plotlyjs=True, config={"displaylogo": False, "responsive": True}
    )
    headers = ["trial", "saved", "USD/month", "added overload", "overload ratio", "evictions", "flags"]
    rows = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in front_rows(doc, defaults)
    )
    whole = sum(1 for t in doc["trials"] if t["feasible"] is not None)
    stopped = f" ({whole} replayed over the whole window, the others stopped by successive halving)"
    meta = (
        f"{html.escape(str(doc['snapshot']))} · {html.escape(str(doc['trace']))} · {len(doc['trials'])} trials"
        f"{stopped if whole < len(doc['trials']) else ''}, seed {doc['search']['seed']}, "
        f"{doc['search']['sampler']} · {html.escape(constraint_phrase(doc['search']))}"
    )
    relief = relief_note(doc)
    note = f'<p class="note">{html.escape(relief)}</p>' if relief is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>scaler tune</title><style>{_CSS}</style></head>
<body>
<h1>scaler tune: {html.escape(doc["from"])} → {html.escape(doc["to"])}</h1>
<p class="meta">{meta}</p>
{note}
{plot}
<table><tr>{"".join(f"<th>{h}</th>" for h in headers)}</tr>
{rows}
</table>
</body></html>
"""
