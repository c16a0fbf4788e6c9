"""Plotly figure dicts for statistics pages: pure functions over counts, rendered by static/charts.js.

Zero cells are drawn on purpose: in a corpus, the empty combinations are the finding. A figure with
nothing at all to draw (no counts, or only zeros) says so in `empty`, so a page can show what to do to
get data instead of an empty frame; `title` is its title as plain text, for that message.
Every axis has `automargin`: Plotly grows a margin until the tick labels and axis titles fit, so a
long category name is never cut off whatever the chart's width.
"""

import math
from dataclasses import dataclass

from app.domain.figure import escape

BAR_COLOUR = "#0f766e"
HEATMAP_LEVEL_COLUMNS = 6  # more columns than this: slant their labels, which would touch when level
HEATMAP_SCALE = [[0, "#fff7ed"], [0.0001, "#ccfbf1"], [1, "#0f766e"]]
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}
AXIS = {"automargin": True, "ticklabelstandoff": 4}  # the standoff keeps x and y labels apart at the corner
DENSITY_SCALE = [[0, "#ccfbf1"], [1, "#0f766e"]]
BAR_HEIGHT_PX = 24  # per horizontal bar
PLOT_CHROME_PX = 60  # title and margins


def make_figure(title: str, data: list[dict], layout: dict, empty: bool = False) -> dict:
    """A figure dict with the shared look: title, font, white background."""
    base = {"title": {"text": escape(title), "font": {"size": 14}}, "font": FONT,
            "plot_bgcolor": "#fff", "paper_bgcolor": "#fff"}
    return {"data": data, "layout": base | layout, "title": title, "empty": empty}


def bar_chart(title: str, counts: dict[str, int], links: list[str | None] | None = None) -> dict:
    """Counts as horizontal bars, in the order given (top down): category names read level, at any length.
    Each bar has its count written at its end, so the count axis shows no ticks (and no 0.5 of a paper). With
    `links` (a local URL or None per bar), clicking a bar opens its URL."""
    labels = [escape(str(k)) for k in counts]
    values = list(counts.values())
    data = [{"type": "bar", "orientation": "h", "y": labels, "x": values, "marker": {"color": BAR_COLOUR},
             "text": values, "textposition": "outside", "cliponaxis": False,
             "hovertemplate": "%{y}: %{x}<extra></extra>"} | linked(links)]
    layout = {"height": PLOT_CHROME_PX + BAR_HEIGHT_PX * len(labels),
              "margin": {"l": 10, "r": 40, "t": 40, "b": 10}, "bargap": 0.25,
              "xaxis": AXIS | {"rangemode": "tozero", "showticklabels": False, "showgrid": False},
              "yaxis": AXIS | {"autorange": "reversed", "type": "category"}}
    return make_figure(title, data, layout, empty=not any(values))


def heatmap(title: str, table: dict[str, dict[str, int]], x_label: str, y_label: str) -> dict:
    """Rows are y values, columns x values; every count is written in its cell, zeros included."""
    ys = list(table)
    xs = list(next(iter(table.values()))) if table else []
    z = [[table[y][x] for x in xs] for y in ys]
    data = [{"type": "heatmap", "x": [escape(x) for x in xs], "y": [escape(y) for y in ys], "z": z,
             "colorscale": HEATMAP_SCALE, "showscale": False, "xgap": 2, "ygap": 2,
             "texttemplate": "%{z}", "textfont": {"size": 12},
             "hovertemplate": f"{escape(y_label)} %{{y}} × {escape(x_label)} %{{x}}: %{{z}}<extra></extra>"}]
    layout = {"height": 90 + 34 * max(len(ys), 3), "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
              "xaxis": AXIS | {"title": {"text": escape(x_label)}, "side": "bottom", "type": "category",
                               "tickangle": -30 if len(xs) > HEATMAP_LEVEL_COLUMNS else 0},
              "yaxis": AXIS | {"title": {"text": ""}, "autorange": "reversed", "type": "category"}}
    return make_figure(title, data, layout, empty=not any(any(row) for row in z))


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
    title = "Against reported deployment envelopes"
    layout = {"title": {"text": title, "font": {"size": 13}}, "height": 280,
              "margin": {"l": 10, "r": 10, "t": 36, "b": 30},
              "xaxis": AXIS, "yaxis": AXIS | {"title": {"text": "count (log)"}, "type": "log"},
              "legend": {"orientation": "h", "y": -0.18, "font": {"size": 10}}, "showlegend": True}
    return make_figure(title, data, layout)


def rollup_chart(title: str, rows: list[dict], limit: int = 15) -> dict:
    top = rows[:limit]
    data = [{"type": "bar", "orientation": "h", "y": [escape(str(r["key"])) for r in top][::-1],
             "x": [r["credit"] for r in top][::-1],
             "marker": {"color": ["#2166ac" if r["credit"] >= 0 else "#b2182b" for r in top][::-1]},
             "hovertemplate": "%{y}: %{x:.4g}<extra></extra>"}]
    layout = {"title": {"text": escape(title), "font": {"size": 13}}, "height": 60 + 22 * max(len(top), 3),
              "margin": {"l": 10, "r": 10, "t": 36, "b": 30},
              "xaxis": AXIS, "yaxis": AXIS | {"type": "category"}}
    return make_figure(title, data, layout, empty=not top)


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
    layout = {"height": 300, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
              "xaxis": AXIS | {"title": {"text": escape(x_label)}},
              "yaxis": AXIS | {"title": {"text": escape(y_label)}}}
    drawn = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
    return make_figure(title, [trace], layout, empty=not drawn)


def linked(links: list | None) -> dict:
    """The keys that make a Plotly trace's marks open a local URL each (None: that mark opens nothing) on click
    (static/charts.js)."""
    return {"customdata": links, "meta": "links"} if links is not None else {}


BINS_PER_AXIS = 20  # about this many bins along an axis of a density chart
STEP_MANTISSAS = (1, 2, 5, 10)
STEP_EXPONENTS = (-300, 307)  # a step's power of ten, kept where it and its inverse are finite doubles


@dataclass(frozen=True)
class Grid:
    """Bins of one axis on an absolute decimal grid: edge k is k * num / den in doubles (num and den whole, den a
    power of ten, so an edge is the double its decimal text reads as), computed alike here and in SQL; bins
    first..last, bin k is [edge k, edge k+1)."""
    num: int
    den: int
    first: int
    last: int
    whole: bool = False  # bins of one whole number each: bin k is the value k

    def edge(self, k: int) -> float:
        return edge(k, self.num, self.den)

    def text(self, k: int) -> str:
        """Edge k as exact decimal text, for a link's range."""
        places = len(str(self.den)) - 1
        digits = str(abs(k * self.num)).rjust(places + 1, "0")
        whole, fraction = digits[:len(digits) - places], digits[len(digits) - places:].rstrip("0")
        return ("-" if k * self.num < 0 else "") + whole + ("." + fraction if fraction else "")

    def edges(self) -> list[float]:
        return [self.edge(k) for k in range(self.first, self.last + 2)]


def edge(k: float, num: float, den: float) -> float:
    """Edge k of a grid as app/store/corpus.py PLOT_BINS computes it: double operations in the same order."""
    return (float(k) * float(num)) / float(den)


def bin_of(value: float, num: int, den: int) -> int:
    """The k with edge k <= value < edge k+1, as app/store/corpus.py PLOT_BINS finds it."""
    k = math.floor(value * float(den) / float(num))
    return k - (value < edge(k, num, den)) + (value >= edge(k + 1, num, den))


def grid(low: float, high: float, whole: bool, bins: int = BINS_PER_AXIS) -> Grid:
    """About `bins` bins of a round width (1, 2 or 5 times a power of ten; at least 1 for whole numbers) covering
    low..high."""
    raw = high / bins - low / bins  # not (high - low) / bins: that overflows for -1e308..1e308
    if raw <= 0:
        raw = (abs(low) or 1) / bins
    exponent = min(max(math.floor(math.log10(raw)), STEP_EXPONENTS[0]), STEP_EXPONENTS[1])
    mantissa = next((m for m in STEP_MANTISSAS if m * 10.0 ** exponent >= raw), STEP_MANTISSAS[-1])
    num, den = (mantissa * 10 ** exponent, 1) if exponent >= 0 else (mantissa, 10 ** -exponent)
    if whole and num < den:
        num, den = 1, 1
    return Grid(num, den, bin_of(low, num, den), bin_of(high, num, den), whole and num == den)


def density(title: str, x: Grid, y: Grid, counts: dict[tuple[int, int], int], x_label: str, y_label: str,
            links: dict[tuple[int, int], str] | None = None) -> dict:
    """Counts in 2-D bins (`counts[(i, j)]`, i and j bin numbers of the grids) as a heatmap of bricks, each bin
    [x edge i, x edge i+1) × [y edge j, y edge j+1); a bin with no count is left blank; with `links`, clicking a
    bin opens its URL. What a scatter of every point becomes when the points outnumber the pixels."""
    xs, ys = range(x.first, x.last + 1), range(y.first, y.last + 1)
    z = [[counts.get((i, j)) for i in xs] for j in ys]
    hover = [[f"{escape(x_label)} {span(x, i)}<br>{escape(y_label)} {span(y, j)}" for i in xs] for j in ys]
    trace = {"type": "heatmap", "x": x.edges(), "y": y.edges(), "z": z, "text": hover, "colorscale": DENSITY_SCALE,
             "showscale": True, "colorbar": {"title": {"text": "traces"}, "thickness": 12},
             "hovertemplate": "%{text}<br>%{z:,} traces<extra></extra>"}
    if links is not None:
        trace |= linked([[links.get((i, j)) for i in xs] for j in ys])
    layout = {"height": 300, "margin": {"l": 10, "r": 10, "t": 40, "b": 10},
              "xaxis": AXIS | {"title": {"text": escape(x_label)}} | value_ticks(x),
              "yaxis": AXIS | {"title": {"text": escape(y_label)}} | value_ticks(y)}
    return make_figure(title, [trace], layout, empty=not any(counts.values()))


def span(axis: Grid, k: int) -> str:
    """What bin k holds, in words."""
    return axis.text(k) if axis.whole else f"{axis.text(k)} to under {axis.text(k + 1)}"


def value_ticks(axis: Grid) -> dict:
    """A grid of one whole number per bin is ticked at each bin's middle with its number (6 agents, not 6 to 7)."""
    if not axis.whole or axis.last - axis.first >= BINS_PER_AXIS:
        return {}
    ks = range(axis.first, axis.last + 1)
    return {"tickmode": "array", "tickvals": [axis.edge(k) + 0.5 for k in ks], "ticktext": [str(k) for k in ks]}
