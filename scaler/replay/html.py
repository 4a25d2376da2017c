"""The self-contained HTML replay report: the summary table and five plotly charts.

Charts: nodes over time per policy (with the no-scale-down baseline), cumulative cost over
time and total cost per policy, the overload node-minutes each policy added over those of the
baseline (cumulative over time), and total overload node-minutes per policy (CPU and memory). The page
embeds plotly.js once (about 4.7 MB): it opens offline, from a file, with no network access.
Needs the ``plotly`` package (``pip install 'gke-scaler[tune]'``).
"""

from __future__ import annotations

import datetime as dt
import html
from typing import Any

from scaler.errors import ScalerError

__all__ = ["HtmlError", "render_html"]

_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
_BASELINE = "#7f7f7f"

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 22px; margin: 0 0 4px 0; }
h2.chart-title { font-size: 16px; font-weight: 600; margin: 12px 0 0 60px; }
p.meta { color: #555; margin: 0 0 16px 0; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin-bottom: 18px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.baseline td { color: #777; font-style: italic; }
.grid { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
.chart { border: 1px solid #eee; border-radius: 4px; }
.wide { grid-column: 1 / span 2; }
p.note { color: #555; font-size: 12px; max-width: 1100px; }
"""


class HtmlError(ScalerError, RuntimeError):
    """The HTML report cannot be made (plotly is not installed)."""


def _times(report: dict[str, Any]) -> list[dt.datetime]:
    return [dt.datetime.fromtimestamp(t, dt.UTC) for t in report["timeline"]["time"]]


def _rows(report: dict[str, Any]) -> str:
    base = report["baseline"]
    out = []
    rows = [*report["policies"], {**base, "name": "none (baseline)"}]
    for i, p in enumerate(rows):
        saved = base["nodeHours"] - p["nodeHours"]
        pct = f"{saved / base['nodeHours']:.1%}" if base["nodeHours"] else "—"
        cost = "—" if p["costUsd"] is None else f"{p['costUsd']:,.0f}"
        cls = ' class="baseline"' if i == len(rows) - 1 else ""
        out.append(
            f'<tr{cls}><td title="{html.escape(p["description"])}">{html.escape(p["name"])}</td>'
            f"<td>{p['nodeHours']:,.1f}</td><td>{pct}</td><td>{cost}</td><td>{p['nodesRemoved']}</td>"
            f"<td>{p['nodesAdded']}</td><td>{p['podsEvicted']}</td>"
            f"<td>{p['overloadCpuNodeMinutes']:,.0f}</td><td>{p['overloadMemoryNodeMinutes']:,.0f}</td>"
            f"<td>{p['overloadNodeMinutes']:,.0f}</td><td>{p['unplaceablePods']}</td></tr>"
        )
    return "\n".join(out)


def _nodes_figure(
    go: Any, layout: dict[str, Any], times: list[Any], series: list[dict[str, Any]], colors: dict[str, str]
) -> Any:
    """Nodes over time, one step line per policy (the baseline dotted)."""
    nodes = go.Figure(
        layout={
            **layout,
            "title": "Nodes over time",
            "yaxis_title": "nodes",
            "height": 420,
            "yaxis_rangemode": "normal",
        }
    )
    for p in series:
        nodes.add_trace(
            go.Scatter(
                x=times,
                y=p["timeline"]["nodes"],
                name=p["name"],
                mode="lines",
                line_shape="hv",
                line={
                    "color": colors[p["name"]],
                    "width": 1.6,
                    "dash": "dot" if p is series[-1] else "solid",
                },
            )
        )
    return nodes


def _cumulative_figure(
    go: Any, layout: dict[str, Any], times: list[Any], series: list[dict[str, Any]], colors: dict[str, str]
) -> Any:
    """Cumulative cost in USD over time, one line per policy."""
    cumulative = go.Figure(layout={**layout, "title": "Cumulative cost (USD)", "yaxis_title": "USD"})
    for p in series:
        total, acc = 0.0, []
        for c in p["timeline"]["costUsd"]:
            total += c
            acc.append(round(total, 2))
        cumulative.add_trace(
            go.Scatter(
                x=times,
                y=acc,
                name=p["name"],
                mode="lines",
                line={"color": colors[p["name"]], "dash": "dot" if p is series[-1] else "solid"},
            )
        )
    return cumulative


def _overload_figure(go: Any, layout: dict[str, Any], names: list[str], series: list[dict[str, Any]]) -> Any:
    """Total overload node-minutes per policy: CPU and memory bars, either as a marker."""
    overload = go.Figure(
        layout={
            **layout,
            "title": "Overload node-minutes (total)",
            "barmode": "group",
            "yaxis_title": "node-minutes",
        }
    )
    overload.add_trace(
        go.Bar(
            x=names,
            y=[p["overloadCpuNodeMinutes"] for p in series],
            name="cpu > 100%",
            marker_color="#ef553b",
        )
    )
    overload.add_trace(
        go.Bar(
            x=names,
            y=[p["overloadMemoryNodeMinutes"] for p in series],
            name="memory > 95%",
            marker_color="#636efa",
        )
    )
    overload.add_trace(
        go.Scatter(
            x=names,
            y=[p["overloadNodeMinutes"] for p in series],
            name="either",
            mode="markers",
            marker={"symbol": "diamond", "size": 11, "color": "#222"},
        )
    )
    return overload


def _overload_time_figure(
    go: Any, layout: dict[str, Any], times: list[Any], report: dict[str, Any], colors: dict[str, str]
) -> Any:
    """Overload node-minutes each policy adds over the baseline, cumulative over time."""
    base = report["baseline"]
    overload_time = go.Figure(
        layout={
            **layout,
            "title": "Overload added by scale-down (cumulative, vs none)",
            "yaxis_title": "node-minutes",
            "yaxis_rangemode": "normal",
        }
    )
    step_minutes = report["stepSeconds"] / 60.0
    base_over = base["timeline"]["overloadedNodes"]
    for p in report["policies"]:
        total, acc = 0.0, []
        for n, b in zip(p["timeline"]["overloadedNodes"], base_over, strict=True):
            total += (n - b) * step_minutes
            acc.append(total)
        overload_time.add_trace(
            go.Scatter(x=times, y=acc, name=p["name"], mode="lines", line={"color": colors[p["name"]]})
        )
    return overload_time


def _cost_figure(
    go: Any, layout: dict[str, Any], names: list[str], series: list[dict[str, Any]], colors: dict[str, str]
) -> Any:
    """Cost in USD per policy, as bars labelled with the amount."""
    cost = go.Figure(layout={**layout, "title": "Cost (USD)", "yaxis_title": "USD", "showlegend": False})
    cost.add_trace(
        go.Bar(
            x=names,
            y=[p["costUsd"] or 0 for p in series],
            marker_color=[colors[n] for n in names],
            text=["—" if p["costUsd"] is None else f"{p['costUsd']:,.0f}" for p in series],
            textposition="outside",
        )
    )

    return cost


def _div(fig: Any, first: bool, cls: str) -> str:
    """One chart as an HTML fragment (plotly's JS with the ``first`` only)."""
    # The title is a heading above the chart, not plotly's own: plotly's mode bar (zoom,
    # save as PNG) sits in the chart's top margin and would cover a title there.
    title = fig.layout.title.text or ""
    fig.update_layout(title=None, margin={"t": 36})
    body = fig.to_html(
        full_html=False, include_plotlyjs=first, config={"displaylogo": False, "responsive": True}
    )
    return f'<div class="chart {cls}"><h2 class="chart-title">{html.escape(title)}</h2>{body}</div>'


def render_html(report: dict[str, Any]) -> str:
    """The report page for a :func:`scaler.replay.report.report_dict` report.

    Raises:
        HtmlError: plotly is not installed.
    """
    try:
        import plotly.graph_objects as go  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        raise HtmlError("--output html needs plotly: pip install 'gke-scaler[tune]'") from None

    times = _times(report)
    base = report["baseline"]
    series = [*report["policies"], {**base, "name": "none (baseline)"}]
    colors = {p["name"]: _PALETTE[i % len(_PALETTE)] for i, p in enumerate(report["policies"])}
    colors["none (baseline)"] = _BASELINE
    names = [p["name"] for p in series]
    layout = {
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "template": "plotly_white",
        "height": 380,
        "yaxis_rangemode": "tozero",
    }

    nodes = _nodes_figure(go, layout, times, series, colors)
    cumulative = _cumulative_figure(go, layout, times, series, colors)
    overload = _overload_figure(go, layout, names, series)
    overload_time = _overload_time_figure(go, layout, times, report, colors)
    cost = _cost_figure(go, layout, names, series, colors)
    div = _div

    tr = report["trace"]
    meta = (
        f"{html.escape(report['from'])} → {html.escape(report['to'])}, {report['steps']} steps of "
        f"{report['stepSeconds'] / 60:g} min · snapshot {html.escape(report['snapshot'])} · trace "
        f"{html.escape(tr['path'])} ({html.escape(tr['format'])}, {tr['podsFollowingTrace']} of {tr['pods']} pods "
        f"following {tr['seriesUsed']} series) · provision delay {report['provisionDelaySeconds']:g} s"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>scaler replay</title><style>{_CSS}</style></head>
<body>
<h1>scaler replay: policies side by side</h1>
<p class="meta">{meta}</p>
<table id="summary">
<thead><tr><th>policy</th><th>node-hours</th><th>saved</th><th>cost USD</th><th>nodes removed</th>
<th>nodes added</th><th>pods evicted</th><th>cpu overload node-min</th><th>memory overload node-min</th>
<th>overload node-min</th><th>unplaceable pods</th></tr></thead>
<tbody>
{_rows(report)}
</tbody></table>
<div class="grid">
{div(nodes, True, "wide")}
{div(cumulative, False, "")}
{div(cost, False, "")}
{div(overload_time, False, "")}
{div(overload, False, "")}
</div>
<p class="note">Each policy ran the live controller's loop (evaluate, plan, actuate) against the same
replayed cluster. Overload counts, per step, the nodes whose real usage (the trace) is above 100% of
allocatable CPU or 95% of allocatable memory; the baseline is the cluster with no scale-down at all, so
its overload is the workload's own and "added" is what a policy's removals caused. Unplaceable pods:
evicted pods that found no node by requests and waited for a new node.</p>
</body></html>
"""
