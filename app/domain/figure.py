"""The interaction graph of a trace as a Plotly figure dict: a pure function, cached by the caller.

x is time; each agent (or, for very wide traces, each role) gets a horizontal lane, lanes ordered
by the spawn tree. Events are markers (one trace per event type), edges are a few line traces (one
per edge type, segments separated by nulls), and a subplot shows how many agents are alive.
All trace strings in hover text and lane labels are HTML-escaped: Plotly renders tags in them.
"""

import math
from collections import Counter, defaultdict
from functools import lru_cache
from html import escape as html_escape

from app.domain.metrics import agent_spans
from app.domain.taxonomy import EDGE_TYPES, EVENT_TYPES

GROUP_LANES_ABOVE = 150
LANE_PX = 22
MIN_HEIGHT_PX = 460
MAX_HEIGHT_PX = 2400
NO_ROLE = "(no role)"
LANE_LABEL_CHARS = 26  # what the left margin shows; events' hover gives the agent whole
LABEL_PX = 14  # the least height a lane label needs (11 px text): closer lanes label every n-th one
LANES_DOMAIN = (0.2, 1)  # the share of the plot's height the lanes take (the rest: the concurrency strip)
PLOT_MARGIN_PX = 56  # the layout's top and bottom margins

# Every trace is drawn as SVG ("scatter"), never WebGL: a view holds at most a few thousand marks (graph.MAX_MARKS),
# which SVG draws faster than WebGL does without a GPU, where each WebGL context takes ~1 s to create and a
# redraw that resizes the plot creates them again.
SVG_SCATTER = "scatter"  # the Plotly trace type of every mark and line

EVENT_STYLE = {  # type: (colour, marker symbol)
    "orchestrator_decision": ("#6d28d9", "diamond"),
    "spawn": ("#0f766e", "triangle-right"),
    "despawn": ("#64748b", "x"),
    "message": ("#2563eb", "circle"),
    "tool_call": ("#d97706", "square"),
    "tool_result": ("#f59e0b", "square-open"),
    "return": ("#16a34a", "triangle-left"),
    "aggregate": ("#be185d", "star"),
    "human_intervention": ("#0891b2", "hexagon"),
    "safety_event": ("#dc2626", "cross"),
}
DIVERGING = [[0, "#b2182b"], [0.25, "#ef8a62"], [0.5, "#f7f7f7"], [0.75, "#67a9cf"], [1, "#2166ac"]]
# Edge types differ by colour, not dash: a browser dashes a line along its whole length, off screen too, so
# after a zoom into 0.2% of a trace the dashed edges crossing the view took ~0.15 s to draw without a GPU.
# Only temporal edges, hidden until asked for, are dotted.
EDGE_STYLE = {  # type: (colour, dash)
    "temporal": ("rgba(148,163,184,0.45)", "dot"),
    "causal": ("rgba(71,85,105,0.6)", "solid"),
    "spawn": ("rgba(15,118,110,0.75)", "solid"),
    "message": ("rgba(37,99,235,0.6)", "solid"),
    "tool_dependency": ("rgba(217,119,6,0.6)", "solid"),
    "return": ("rgba(22,163,74,0.7)", "solid"),
    "aggregate": ("rgba(190,24,93,0.6)", "solid"),
    "safety_flow": ("rgba(220,38,38,0.85)", "solid"),
}


def spawn_tree(events: list[dict]) -> tuple[list[str], dict[str, str | None], dict[str, str]]:
    """Agents in spawn-tree order (each child under its spawner), their spawner, and their role."""
    first_seen: dict[str, int] = {}
    parent: dict[str, str | None] = {}
    role: dict[str, str] = {}
    spawned_role: dict[str, str] = {}
    tools = {e["agent"] for e in events if e["type"] == "tool_result"}
    for i, event in enumerate(events):
        agent = event["agent"]
        if event["type"] == "tool_result" and agent in tools:
            continue
        first_seen.setdefault(agent, i)
        if event["type"] == "spawn" and isinstance(event.get("to"), str):
            child = event["to"]
            if child != agent and child not in parent:
                parent[child] = agent
                first_seen.setdefault(child, i)
                if "role" in event:
                    spawned_role.setdefault(child, event["role"])
        elif "role" in event:
            role.setdefault(agent, event["role"])
    children: dict[str | None, list[str]] = defaultdict(list)
    for agent in sorted(first_seen, key=first_seen.get):
        up = parent.get(agent)
        children[up if up in first_seen and up != agent else None].append(agent)
    order: list[str] = []
    seen: set[str] = set()
    stack = list(reversed(children[None]))
    while stack:
        agent = stack.pop()
        if agent in seen:
            continue
        seen.add(agent)
        order.append(agent)
        stack.extend(reversed(children.get(agent, [])))
    order += [a for a in sorted(first_seen, key=first_seen.get) if a not in seen]  # spawn cycles
    roles = {a: role.get(a) or spawned_role.get(a) or NO_ROLE for a in order}
    return order, {a: parent.get(a) for a in order}, roles


def lane_agents(events: list[dict], edges: list[dict]) -> list[str]:
    """The agent whose lane shows each event: a tool result sits on the lane of the agent that called it."""
    index = {e["id"]: i for i, e in enumerate(events)}
    owner = [e["agent"] for e in events]
    for edge in edges:
        if edge["type"] == "tool_dependency":
            src, dst = index.get(edge["src"]), index.get(edge["dst"])
            if src is not None and dst is not None and events[dst]["type"] == "tool_result":
                owner[dst] = events[src]["agent"]
    return owner


def escape(text: str) -> str:
    """Escape for Plotly labels: it renders tags, and decodes &lt; &gt; &amp; but shows &quot; as is."""
    return html_escape(text, quote=False)


# Agent, role and tool names repeat across thousands of events: escape each once.
_escape_name = lru_cache(maxsize=65536)(escape)


def hover_text(event: dict) -> str:
    """Escaped hover label: Plotly renders HTML-like tags, and trace strings are untrusted."""
    text = f"<b>{escape(str(event['id']))}</b> · {event['type']}<br>agent: {_escape_name(event['agent'])}"
    if "role" in event:
        text += f"<br>role: {_escape_name(str(event['role']))}"
    if "tool" in event:
        text += f"<br>tool: {_escape_name(str(event['tool']))}"
    if "content_ref" in event:
        text += f"<br>content_ref: {escape(str(event['content_ref']))}"
    text += f"<br>t: {event['t']}"
    if "trusted" in event:
        text += "<br>trusted: yes" if event["trusted"] else "<br>trusted: NO"
    return text


def lanes_px(height: int) -> float:
    """The height in pixels the lanes get in a figure of this height."""
    return (height - PLOT_MARGIN_PX) * (LANES_DOMAIN[1] - LANES_DOMAIN[0])


def lane_ticks(labels: list[str], px: float, first: int, last: int) -> dict:
    """Tick values and texts for the lanes first..last shown in `px` pixels: every n-th lane, so labels never
    print over each other (the page thins them the same way, in trace.js, when the view zooms)."""
    visible = max(1, last - first + 1)
    step = max(1, math.ceil(visible * LABEL_PX / max(px, 1)))
    start = math.ceil(first / step) * step
    values = list(range(start, last + 1, step))
    return {"tickvals": values, "ticktext": [labels[i] for i in values]}


def lane_layout(events: list[dict], owners, group_by_role: bool | None, expand: frozenset[str],
                collapse: frozenset[str] = frozenset(),
                keep: frozenset[str] | None = None) -> tuple[list[dict], dict[str, int], bool]:
    """Lanes (label, role, agents, group, folded, and `agent` for an agent's own lane), each lane owner's lane,
    and whether lanes are grouped by role. `events` may be all the trace's events or its skeleton
    (app/store/lod.py skeleton_events): the spawn tree is the same; `owners` are the lane owners (lane_agents) in
    event order, which add lanes for tools nobody called; `collapse` names agents whose spawn subtrees fold into
    their lanes; `keep`, when given, the only lane owners drawn (a focus: an agent's subtree or its partners)."""
    order, parents, roles = spawn_tree(events)
    for agent in owners:
        if agent not in roles:
            order.append(agent)
            roles[agent] = "tool"
    if keep is not None:
        order = [agent for agent in order if agent in keep]
    if group_by_role is None:
        group_by_role = len(order) > GROUP_LANES_ABOVE
    lanes, lane_of = _lanes(order, roles, group_by_role, expand, parents, collapse)
    return lanes, lane_of, group_by_role


def build_figure(trace: dict, group_by_role: bool | None = None, expand: frozenset[str] = frozenset(),
                 collapse: frozenset[str] = frozenset(), keep: frozenset[str] | None = None) -> dict:
    """Figure dict plus the lane layout the page needs; `group_by_role` None means: when lanes are many. Events
    of lanes left out by `keep` have no y (null): they are not drawn, and positions still follow event order."""
    events, edges = trace["events"], trace["edges"]
    owners = lane_agents(events, edges)
    lanes, lane_of, group_by_role = lane_layout(events, owners, group_by_role, expand, collapse, keep)
    x = [e["t"] for e in events]
    y = [lane_of.get(a) for a in owners]
    spans = agent_spans(events)  # the same lifetimes the metrics use
    figure_traces = [_lifetime_trace(spans, lane_of)]
    figure_traces += _edge_traces(events, edges, x, y)
    figure_traces += _event_traces(events, x, y, range(len(events)))
    figure_traces.append(_concurrency_trace(spans))
    return {**_frame(trace["trace_id"], lanes, lane_of, figure_traces, group_by_role),
            "mode": "exact",
            "event_ids": [e["id"] for e in events],
            "positions": {"x": x, "y": y}}


def build_overview(trace_id: str, skeleton: list[dict], owners: list[str], n_events: int,
                   group_by_role: bool | None, expand: frozenset[str], collapse: frozenset[str] = frozenset(),
                   keep: frozenset[str] | None = None, owner_events: dict[str, int] | None = None) -> dict:
    """The frame of a trace too large to draw event by event: lanes, lifetimes and the concurrency strip from
    its skeleton, without events; the page adds the bins of the window in view. A role's band, hovered, tells
    its agents, events (`owner_events`: per lane owner) and when they were active."""
    lanes, lane_of, group_by_role = lane_layout(skeleton, owners, group_by_role, expand, collapse, keep)
    spans = agent_spans(skeleton)
    figure_traces = [_lifetime_trace(spans, lane_of), *_role_bands(lanes, lane_of, spans, owner_events or {}),
                     _concurrency_trace(spans)]
    return {**_frame(trace_id, lanes, lane_of, figure_traces, group_by_role), "mode": "bins", "n_events": n_events,
            "window": [min((t for t, _ in spans.values()), default=0), max((t for _, t in spans.values()), default=0)]}


def _frame(trace_id: str, lanes: list[dict], lane_of: dict[str, int], figure_traces: list[dict], grouped: bool) -> dict:
    """The figure around its traces: layout, lanes, their labels and each lane owner's lane (where find looks)."""
    alive = next(t for t in figure_traces if t["name"] == "agents alive")
    height = max(MIN_HEIGHT_PX, min(MAX_HEIGHT_PX, len(lanes) * LANE_PX + 220))
    layout = {
        "height": height,
        "margin": {"l": 160, "r": 20, "t": 16, "b": 40},
        "hovermode": "closest",
        "dragmode": "zoom",
        "uirevision": trace_id,
        # the page shows a one-row legend with a toggle per edge type above the plot (static/trace/legend.js):
        # Plotly's own took five rows over a binned trace and pushed the plot below the fold
        "showlegend": False,
        # "allow": labels are already short (LANE_LABEL_CHARS) and thinned; Plotly's default hides overflowing
        # ones by measuring every label's box, ~0.5 s of a first paint
        "xaxis": {"title": {"text": "t (s)"}, "zeroline": False, "anchor": "y2", "ticklabeloverflow": "allow"},
        "yaxis": {"domain": list(LANES_DOMAIN), "autorange": "reversed",
                  **lane_ticks([lane["label"] for lane in lanes], lanes_px(height), 0, len(lanes) - 1),
                  "zeroline": False, "fixedrange": False,
                  "showgrid": True, "gridcolor": "#eef1f5", "tickfont": {"size": 11}, "automargin": True,
                  "ticklabeloverflow": "allow"},
        "yaxis2": {"domain": [0, 0.13], "title": {"text": "alive", "font": {"size": 11}},
                   "rangemode": "tozero", "fixedrange": True, "tick0": 0,
                   "dtick": max(1, math.ceil(max(alive["y"], default=0) / 3))},  # whole agents
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12},
    }
    return {
        "figure": {"data": figure_traces, "layout": layout},
        "lanes": lanes,
        "lane_of": lane_of,
        "lane_labels": [lane["label"] for lane in lanes],
        "label_px": LABEL_PX,
        "grouped": grouped,
    }


def lane_rows(labels: list[str], first: int, last: int, max_rows: int) -> tuple[list[int], list[float], list[str]]:
    """Rows of bins: each lane's row, each row's y and name. A row is one lane, or, when lanes first..last are
    more than `max_rows` rows of marks can show, a band of adjacent lanes at its middle (marks never outnumber
    the pixels)."""
    band = max(1, math.ceil((last - first + 1) / max(max_rows, 1)))
    row_of = [lane // band for lane in range(len(labels))]
    row_y, row_names = [], []
    for start in range(0, len(labels), band):
        end = min(start + band, len(labels)) - 1
        row_y.append((start + end) / 2)
        row_names.append(labels[start] if start == end else f"{end - start + 1} lanes: {labels[start]} … {labels[end]}")
    return row_of, row_y, row_names


def row_spans(row_of: list[int]) -> list[tuple[int, int]]:
    """Each row's first and last lane (lane_rows' `row_of`): where a click on one of its bins zooms to."""
    spans: dict[int, tuple[int, int]] = {}
    for lane, row in enumerate(row_of):
        spans[row] = (spans[row][0], lane) if row in spans else (lane, lane)
    return [spans[row] for row in sorted(spans)]


def bin_traces(bins: list[tuple], row_y: list[float], row_names: list[str], channel: str | None,
               spans: list[tuple[int, int]] | None = None, grid: tuple[float, float, int] | None = None) -> list[dict]:
    """Bins (row, bucket, events, t_min, t_max, type, value) as marks: one trace per most common event type,
    area by count; with a channel, one trace coloured by the bin's mean value (none: grey). Each mark's
    customdata also holds its row's lanes (`spans`, from row_spans) and its bucket's time span (`grid`: the
    window's t0, t1 and number of buckets), so that a click zooms to the bin."""
    if not bins:
        return []
    t0, t1, buckets = grid or (0.0, 0.0, 1)
    width = (t1 - t0) / buckets

    def place(b: tuple) -> list:
        first, last = spans[b[0]] if spans else (b[0], b[0])
        return [b[2], b[3], b[4], b[5], first, last, t0 + b[1] * width, t0 + (b[1] + 1) * width]

    most = max(b[2] for b in bins)

    def size(n: int) -> float:
        return 5 + 13 * math.sqrt(n / most)

    # hover from per-mark numbers: far less JSON than a text per mark (a view may hold thousands)
    template = ("<b>%{customdata[0]:,} events</b> · mostly %{customdata[3]}<br>lane: %{text}"
                "<br>t: %{customdata[1]:.6g} – %{customdata[2]:.6g}"
                + (f"<br>{escape(channel)} (mean): %{{marker.color:.4g}}" if channel else "") + "<extra></extra>")

    def marks(rows: list[tuple], name: str, marker: dict) -> dict:
        return {"type": SVG_SCATTER, "mode": "markers", "name": name,
                "x": [(b[3] + b[4]) / 2 for b in rows], "y": [row_y[b[0]] for b in rows],
                "customdata": [place(b) for b in rows], "text": [row_names[b[0]] for b in rows],
                "hovertemplate": template, "marker": {**marker, "size": [size(b[2]) for b in rows]},
                "meta": {"kind": "bins"}}

    if channel:
        valued = [b for b in bins if b[6] is not None]
        bound = max((abs(b[6]) for b in valued), default=0) or 1
        return [marks([b for b in bins if b[6] is None], "no value", {"color": "#c7ccd4", "opacity": 0.7}),
                marks(valued, escape(channel), {"color": [b[6] for b in valued], "cmin": -bound, "cmax": bound,
                                                "cmid": 0, "colorscale": DIVERGING, "opacity": 0.9,
                                                "colorbar": {"title": {"text": escape(channel)}, "thickness": 12,
                                                             "len": 0.6, "y": 0.6},
                                                "line": {"width": 0.5, "color": "rgba(0,0,0,0.35)"}})]
    by_type: dict[str, list[tuple]] = defaultdict(list)
    for b in bins:
        by_type[b[5]].append(b)
    return [marks(by_type[kind], f"{kind} (binned)", {"color": EVENT_STYLE[kind][0], "symbol": EVENT_STYLE[kind][1],
                                                      "opacity": 0.85})
            for kind in EVENT_TYPES if kind in by_type]


# A bundle's line grows with the edges it stands for: (at most this many edges, width px, opacity).
BUNDLE_CLASSES = ((1, 0.8, 0.35), (10, 1.6, 0.55), (100, 3.0, 0.7), (math.inf, 5.0, 0.8))


def bundle_traces(bundles: list[tuple], row_y: list[float]) -> list[dict]:
    """Edge bundles (type, source row, target row, edges, mean source t, mean target t) as line traces per edge
    type and size class (BUNDLE_CLASSES): a segment per bundle, wider and darker the more edges it bundles."""
    traces = []
    low = 0
    for high, width, opacity in BUNDLE_CLASSES:
        lines = _line_traces((kind, src_t, row_y[src], dst_t, row_y[dst])
                             for kind, src, dst, n, src_t, dst_t in bundles if low < n <= high)
        for trace in lines:
            trace["line"]["width"] = width
            trace["opacity"] = opacity
            trace["meta"]["least_edges"] = low + 1
        traces += lines
        low = high
    return traces


def exact_traces(events: list[dict], edges: list[dict], lane_of: dict[str, int],
                 lanes_in_view: tuple[float, float] | None = None) -> tuple[list[dict], dict]:
    """A window's events (window_events rows) and edges (window_edges rows) drawn one by one, and where each
    event sits: {seq, id, x, y} lists for selection. Given the lanes in view (first, last), only edges with an
    end on one of them: the others only cross the view, by the thousand over a wide role."""
    events = [e for e in events if e["owner"] in lane_of]  # a focus leaves some lanes out
    x = [e["t"] for e in events]
    y = [lane_of[e["owner"]] for e in events]
    first, last = lanes_in_view or (-math.inf, math.inf)
    ends = ((e, lane_of.get(e["src_owner"]), lane_of.get(e["dst_owner"])) for e in edges)
    traces = _line_traces((e["type"], e["src_t"], src, e["dst_t"], dst) for e, src, dst in ends
                          if src is not None and dst is not None
                          and (first - 0.5 <= src <= last + 0.5 or first - 0.5 <= dst <= last + 0.5))
    traces += _event_traces(events, x, y, [e["seq"] for e in events])
    return traces, {"seq": [e["seq"] for e in events], "id": [e["id"] for e in events], "x": x, "y": y}


def _role_bands(lanes: list[dict], lane_of: dict[str, int], spans: dict, owner_events: dict[str, int]) -> list[dict]:
    """A grouped role's lane as a faint band over its agents' active time: hovering it tells how many agents,
    events and which time the band covers, and how many are alive at most (a click on it names the role)."""
    members: dict[int, list[str]] = defaultdict(list)
    for owner, lane in lane_of.items():
        if lanes[lane]["group"]:
            members[lane].append(owner)
    bands = []
    for lane, owners in sorted(members.items()):
        active = [spans[owner] for owner in owners if owner in spans]
        if not active:
            continue
        lo, hi = min(a for a, _ in active), max(b for _, b in active)
        _, alive = concurrency({owner: spans[owner] for owner in owners if owner in spans})
        events = sum(owner_events.get(owner, 0) for owner in owners)
        text = (f"<b>{escape(lanes[lane]['role'])}</b>: {lanes[lane]['agents']:,} agents · {events:,} events"
                f"<br>active t {lo:.6g} – {hi:.6g} · at most {max(alive, default=0):,} alive at once"
                "<br>click a bin to see its agents' lanes")
        bands.append({"type": SVG_SCATTER, "mode": "lines", "name": f"role {lanes[lane]['role']}",
                      "x": [lo, hi, hi, lo, lo], "y": [lane - 0.42, lane - 0.42, lane + 0.42, lane + 0.42, lane - 0.42],
                      "fill": "toself", "fillcolor": "rgba(100,116,139,0.06)", "line": {"width": 0},
                      "hoveron": "fills", "text": text, "hoverinfo": "text",
                      "meta": {"kind": "role", "role": lanes[lane]["role"], "lane": lane}})
    return bands


def subtree(parents: dict[str, str | None], agent: str) -> frozenset[str]:
    """An agent and every agent it spawned, directly or through others."""
    children: dict[str | None, list[str]] = defaultdict(list)
    for child, parent in parents.items():
        children[parent].append(child)
    found, stack = set(), [agent]
    while stack:
        node = stack.pop()
        if node not in found:
            found.add(node)
            stack.extend(children.get(node, []))
    return frozenset(found)


def lane_label(agent: str) -> str:
    """An agent key short enough for the margin: an instance `name#<long id>` keeps its name and the end
    of its id (ids such as span_… or uuids share their starts and differ at the end)."""
    if len(agent) <= LANE_LABEL_CHARS:
        return agent
    name, sep, instance = agent.rpartition("#")
    if sep and len(name) <= LANE_LABEL_CHARS - 8:
        return f"{name}#…{instance[len(name) + 2 - LANE_LABEL_CHARS:]}"
    return agent[:LANE_LABEL_CHARS - 1] + "…"


def _lanes(order, roles, group_by_role, expand, parents, collapse):
    """Lane list (label, role, agents, group, folded) and each agent's lane index. An agent of `collapse` shows
    its whole spawn subtree on its own lane (or its role's), marked `folded` with the number of agents folded in."""
    home: dict[str, str] = {}  # agent -> the agent whose lane shows it (itself unless an ancestor is folded)
    for agent in order:  # spawn-tree order: a parent comes before its children
        up = parents.get(agent)
        home[agent] = home[up] if up in home and (up in collapse or home[up] != up) else agent
    shown = [agent for agent in order if home[agent] == agent]
    folded = Counter(home[agent] for agent in order if home[agent] != agent)
    lanes: list[dict] = []
    lane_of: dict[str, int] = {}
    short = Counter(lane_label(agent) for agent in shown)

    def label(agent: str) -> str:  # in full where two shortened labels would look the same
        text = lane_label(agent)
        text = escape(text if short[text] == 1 else agent)
        return f"{text} +{folded[agent]}" if folded[agent] else text

    def own_lane(agent: str, role: str) -> None:
        lane_of[agent] = len(lanes)
        lanes.append({"label": label(agent), "role": role, "agents": 1 + folded[agent], "group": False,
                      "folded": folded[agent], "agent": agent})

    if not group_by_role:
        for agent in shown:
            own_lane(agent, roles[agent])
    else:
        by_role: dict[str, list[str]] = defaultdict(list)
        for agent in shown:
            by_role[roles[agent]].append(agent)
        for role, agents in by_role.items():
            if role in expand:
                for agent in agents:
                    own_lane(agent, role)
            else:
                for agent in agents:
                    lane_of[agent] = len(lanes)
                members = len(agents) + sum(folded[agent] for agent in agents)
                lanes.append({"label": f"{escape(role)} ×{members}", "role": role, "agents": members,
                              "group": True, "folded": sum(folded[agent] for agent in agents)})
    for agent in order:
        lane_of[agent] = lane_of[home[agent]]
    return lanes, lane_of


def _lifetime_trace(spans: dict, lane_of: dict) -> dict:
    xs, ys = [], []
    for agent, (lo, hi) in spans.items():
        if agent in lane_of:
            xs += [lo, hi, None]
            ys += [lane_of[agent], lane_of[agent], None]
    return {"type": SVG_SCATTER, "mode": "lines", "name": "agent lifetime", "x": xs, "y": ys,
            "line": {"color": "rgba(100,116,139,0.18)", "width": 9}, "hoverinfo": "skip"}


def _edge_traces(events, edges, x, y) -> list[dict]:
    index = {e["id"]: i for i, e in enumerate(events)}
    ends = ((edge["type"], index.get(edge["src"]), index.get(edge["dst"])) for edge in edges)
    return _line_traces((kind, x[src], y[src], x[dst], y[dst]) for kind, src, dst in ends
                        if src is not None and dst is not None and y[src] is not None and y[dst] is not None)


def _line_traces(lines) -> list[dict]:
    """One line trace per edge type from (type, x0, y0, x1, y1) segments (separated by None in the trace)."""
    segments: dict[str, tuple[list, list]] = {t: ([], []) for t in EDGE_TYPES}
    for kind, x0, y0, x1, y1 in lines:
        if kind in segments:
            xs, ys = segments[kind]
            xs += [x0, x1, None]
            ys += [y0, y1, None]
    traces = []
    for edge_type, (xs, ys) in segments.items():
        if not xs:
            continue
        colour, dash = EDGE_STYLE[edge_type]
        traces.append({"type": SVG_SCATTER, "mode": "lines", "name": f"{edge_type} edge", "x": xs, "y": ys,
                       "line": {"color": colour, "width": 1.2, "dash": dash}, "hoverinfo": "skip",
                       "meta": {"kind": "edge", "edge_type": edge_type},
                       "visible": "legendonly" if edge_type == "temporal" else True})
    return traces


def _event_traces(events, x, y, seqs) -> list[dict]:
    """Markers per event type; customdata is each event's seq (its position in the trace)."""
    by_type: dict[str, list[int]] = defaultdict(list)
    for i, event in enumerate(events):
        by_type[event["type"]].append(i)
    traces = []
    for event_type in EVENT_TYPES:
        indices = by_type.get(event_type)
        if not indices:
            continue
        colour, symbol = EVENT_STYLE[event_type]
        traces.append({
            "type": SVG_SCATTER, "mode": "markers", "name": event_type,
            "x": [x[i] for i in indices], "y": [y[i] for i in indices], "customdata": [seqs[i] for i in indices],
            "hovertext": [hover_text(events[i]) for i in indices],
            "hovertemplate": "%{hovertext}<extra></extra>",
            "marker": {"color": colour, "symbol": symbol, "size": 9,
                       "line": {"width": 1, "color": "rgba(255,255,255,0.9)"}},
            "meta": {"kind": "events", "event_type": event_type},
        })
    return traces


def concurrency(spans: dict) -> tuple[list[float], list[int]]:
    """Step function of agents alive over time; an agent counts from its start to its end, both included."""
    starts: dict[float, int] = defaultdict(int)
    ends: dict[float, int] = defaultdict(int)
    for lo, hi in spans.values():
        starts[lo] += 1
        ends[hi] += 1
    xs, ys, alive = [], [], 0
    for t in sorted(starts.keys() | ends.keys()):
        alive += starts[t]
        xs.append(t)
        ys.append(alive)
        if ends[t]:
            alive -= ends[t]
            xs.append(t)
            ys.append(alive)
    return xs, ys


def _concurrency_trace(spans: dict) -> dict:
    xs, ys = concurrency(spans)
    return {"type": "scatter", "mode": "lines", "name": "agents alive", "x": xs, "y": ys,
            "line": {"shape": "hv", "color": "#0f766e", "width": 1.5}, "fill": "tozeroy",
            "fillcolor": "rgba(15,118,110,0.12)", "xaxis": "x", "yaxis": "y2",
            "hovertemplate": "t %{x}: %{y} alive<extra></extra>", "showlegend": False}
