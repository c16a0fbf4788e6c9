"""Plotly figure dicts for statistics pages: pure functions over counts, rendered by static/charts.js.

Zero cells are drawn on purpose: in a corpus, the empty combinations are the finding.
"""

from app.figure import escape

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


def envelope_chart(agents: int, tool_calls: int, steps: int) -> dict:
    """This trace's sub-agents, tool calls and steps as bars, with the reported envelopes as lines."""
    categories = ["sub-agents", "tool calls", "steps (events)"]
    shapes, notes = [], []
    for k, (category, key) in enumerate((("sub-agents", "agents"), ("tool calls", "tool_calls"),
                                         ("steps (events)", "steps"))):
        for envelope, dash in zip(ENVELOPES, ("dot", "dash")):
            if key in envelope:
                shapes.append({"type": "line", "xref": "x", "yref": "y", "x0": k - 0.45, "x1": k + 0.45,
                               "y0": envelope[key], "y1": envelope[key], "line": {"color": "#b45309", "dash": dash}})
                notes.append({"x": k, "y": envelope[key], "text": f"{envelope[key]:,}", "showarrow": False,
                              "yshift": 8, "font": {"size": 10, "color": "#b45309"}})
    return {
        "data": [{"type": "bar", "x": categories, "y": [agents, tool_calls, steps], "marker": {"color": BAR_COLOUR},
                  "text": [f"{v:,}" for v in (agents, tool_calls, steps)], "textposition": "auto",
                  "hovertemplate": "%{x}: %{y}<extra></extra>"}],
        "layout": {"title": {"text": "Against reported deployment envelopes", "font": {"size": 13}},
                   "height": 240, "font": FONT, "margin": {"l": 50, "r": 10, "t": 36, "b": 30},
                   "yaxis": {"title": {"text": "count"}, "rangemode": "tozero"}, "shapes": shapes,
                   "annotations": notes, "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"},
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
