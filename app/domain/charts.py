"""Plotly figure dicts for statistics pages: pure functions over counts, rendered by static/charts.js.

Zero cells are drawn on purpose: in a corpus, the empty combinations are the finding.
"""

from app.domain.figure import escape

BAR_COLOUR = "#0f766e"
HEATMAP_SCALE = [[0, "#fff7ed"], [0.0001, "#ccfbf1"], [1, "#0f766e"]]
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}


def bar_chart(title: str, counts: dict[str, int]) -> dict:
    labels = [escape(str(k)) for k in counts]
    return {
        "data": [{"type": "bar", "x": labels, "y": list(counts.values()), "marker": {"color": BAR_COLOUR},
                  "text": list(counts.values()), "textposition": "outside", "cliponaxis": False,
                  "hovertemplate": "%{x}: %{y}<extra></extra>"}],
        "layout": {"title": {"text": escape(title), "font": {"size": 14}}, "height": 280, "font": FONT,
                   "margin": {"l": 40, "r": 10, "t": 40, "b": 80}, "yaxis": {"rangemode": "tozero"},
                   "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"},
    }


def heatmap(title: str, table: dict[str, dict[str, int]], x_label: str, y_label: str) -> dict:
    """Rows are y values, columns x values; every count is written in its cell, zeros included."""
    ys = list(table)
    xs = list(next(iter(table.values()))) if table else []
    z = [[table[y][x] for x in xs] for y in ys]
    return {
        "data": [{"type": "heatmap", "x": [escape(x) for x in xs], "y": [escape(y) for y in ys], "z": z,
                  "colorscale": HEATMAP_SCALE, "showscale": False, "xgap": 2, "ygap": 2,
                  "texttemplate": "%{z}", "textfont": {"size": 12},
                  "hovertemplate": f"{escape(y_label)} %{{y}} × {escape(x_label)} %{{x}}: %{{z}}<extra></extra>"}],
        "layout": {"title": {"text": escape(title), "font": {"size": 14}}, "height": 80 + 34 * max(len(ys), 3),
                   "font": FONT, "margin": {"l": 170, "r": 10, "t": 40, "b": 90},
                   "xaxis": {"title": {"text": escape(x_label)}, "side": "bottom"},
                   "yaxis": {"title": {"text": ""}, "autorange": "reversed"},
                   "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"},
    }


# Publicly reported industrial envelopes (TAXONOMY.md §7): first generation, then the next (early 2026).
ENVELOPES = ({"label": "gen 1: 100 sub-agents / 1,500 tool calls", "agents": 100, "tool_calls": 1500},
             {"label": "gen 2: 300 sub-agents / 4,000 steps", "agents": 300, "steps": 4000})
ENVELOPE_COLOURS = ("#b45309", "#7c3aed")


def envelope_chart(spawns: int, tool_calls: int, steps: int) -> dict:
    """This trace's sub-agents (spawns), tool calls and steps as bars against the reported deployment
    envelopes (a mark per figure, a legend entry per report), on a log scale: 3 and 4,000 both read."""
    measures = (("sub-agents (spawns)", "agents", spawns), ("tool calls", "tool_calls", tool_calls),
                ("steps (events)", "steps", steps))
    data = [{"type": "bar", "name": "this trace", "x": [m[0] for m in measures], "y": [m[2] for m in measures],
             "marker": {"color": BAR_COLOUR}, "text": [f"{m[2]:,}" for m in measures], "textposition": "outside",
             "cliponaxis": False, "hovertemplate": "this trace, %{x}: %{y:,}<extra></extra>"}]
    for envelope, colour in zip(ENVELOPES, ENVELOPE_COLOURS):
        marks = [(label, envelope[key]) for label, key, _ in measures if key in envelope]
        data.append({"type": "scatter", "mode": "markers", "name": envelope["label"],
                     "x": [label for label, _ in marks], "y": [value for _, value in marks],
                     "marker": {"symbol": "line-ew-open", "size": 70, "color": colour, "line": {"width": 2.5}},
                     "hovertemplate": f"{envelope['label']}: %{{y:,}}<extra></extra>"})
    return {
        "data": data,
        "layout": {"title": {"text": "Against reported deployment envelopes", "font": {"size": 13}},
                   "height": 280, "font": FONT, "margin": {"l": 50, "r": 10, "t": 36, "b": 30},
                   "yaxis": {"title": {"text": "count (log)"}, "type": "log"},
                   "legend": {"orientation": "h", "y": -0.18, "font": {"size": 10}}, "showlegend": True,
                   "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"},
    }


def rollup_chart(title: str, rows: list[dict], limit: int = 15) -> dict:
    top = rows[:limit]
    return {
        "data": [{"type": "bar", "orientation": "h", "y": [escape(str(r["key"])) for r in top][::-1],
                  "x": [r["credit"] for r in top][::-1],
                  "marker": {"color": ["#2166ac" if r["credit"] >= 0 else "#b2182b" for r in top][::-1]},
                  "hovertemplate": "%{y}: %{x:.4g}<extra></extra>"}],
        "layout": {"title": {"text": escape(title), "font": {"size": 13}}, "height": 60 + 22 * max(len(top), 3),
                   "font": FONT, "margin": {"l": 170, "r": 10, "t": 36, "b": 30},
                   "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"},
    }


def scatter(title: str, xs: list, ys: list, x_label: str, y_label: str, ids: list[str] | None = None,
            names: list[str] | None = None, links: bool = False) -> dict:
    """Points with hover names; with `links`, clicking a point opens its trace (ids are trace ids)."""
    trace = {"type": "scatter", "mode": "markers", "x": xs, "y": ys,
             "marker": {"color": BAR_COLOUR, "size": 9, "opacity": 0.8},
             "text": [escape(n) for n in (names or ids or [])],
             "hovertemplate": "%{text}<br>" + escape(x_label) + ": %{x}<br>" + escape(y_label) + ": %{y}<extra></extra>"}
    if ids is not None:
        trace["customdata"] = ids
    if links:
        trace["meta"] = "trace-links"
    return {
        "data": [trace],
        "layout": {"title": {"text": escape(title), "font": {"size": 13}}, "height": 300, "font": FONT,
                   "margin": {"l": 60, "r": 10, "t": 36, "b": 50},
                   "xaxis": {"title": {"text": escape(x_label)}}, "yaxis": {"title": {"text": escape(y_label)}},
                   "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"},
    }
