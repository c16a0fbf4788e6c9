"""Plotly figure dicts for statistics pages: pure functions over counts, rendered by static/charts.js.

Zero cells are drawn on purpose: in a corpus, the empty combinations are the finding.
"""

from html import escape

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
