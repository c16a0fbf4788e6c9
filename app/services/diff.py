"""The structural diff of two stored traces (app/domain/diff.py), and what the /diff page draws of it: the two
spawn trees coloured by what matched, the two runs on one lane order, and each lane's steps side by side."""

from app.domain.diff import diff_traces
from app.domain.figure import spawn_tree
from app.domain.refusals import NotFound
from app.services import analysis
from app.services.cache import TraceCache
from app.store import traces as trace_store
from app.store.db import Database
from app.store.traces import TraceFilters

MAX_ROWS = 3000  # step rows the page lists (the API has every one)
MAX_POINTS = 20_000  # steps per run the page draws
SIBLINGS = 20  # traces of the same task offered to compare with
COLOURS = {"same": "#9aa3ad", "changed": "#d97706", "only_a": "#dc2626", "only_b": "#16a34a"}
WORDS = {"same": "same", "changed": "changed", "only_a": "only in A", "only_b": "only in B"}


def load_pair(db: Database, cache: TraceCache, a: str, b: str) -> tuple[dict, dict]:
    """Both traces, or NotFound naming the parameter whose trace does not exist."""
    traces = db.together(lambda: analysis.stored_trace(db, cache, a), lambda: analysis.stored_trace(db, cache, b))
    for name, trace_id, trace in zip("ab", (a, b), traces):  # read side by side on a lake
        if trace is None:
            raise NotFound(f"{name}: no trace with id '{trace_id}'", what=f"trace '{trace_id}'")
    return traces[0], traces[1]


def trace_diff(db: Database, cache: TraceCache, a: str, b: str) -> dict:
    """GET /api/diff: the diff of trace a against trace b, made once per version of the two."""
    versions = (trace_store.trace_version(db, a), trace_store.trace_version(db, b))
    return cache.get_or_build(("diff", a, b, versions), lambda: diff_traces(*load_pair(db, cache, a, b)))


def compare_candidates(db: Database, trace: dict) -> list[str]:
    """Other traces of the trace's task, to compare it with (the page's "compare with" list)."""
    rows, _ = trace_store.list_traces(db, TraceFilters(task=trace["task_id"]), "trace_id", SIBLINGS + 1, 0)
    return [row["trace_id"] for row in rows if row["trace_id"] != trace["trace_id"]][:SIBLINGS]


def diff_page(db: Database, cache: TraceCache, a: str, b: str) -> dict:
    """What the /diff page shows: the diff, both trees, the figure and the rows of aligned steps."""
    trace_a, trace_b = load_pair(db, cache, a, b)
    diff = trace_diff(db, cache, a, b)
    events = {"a": _by_id(trace_a), "b": _by_id(trace_b)}
    lanes = diff["lanes"]
    differs = {side: {lane[f"agent_{side}"] for lane in lanes
                      if lane[f"agent_{side}"] is not None and any(op["op"] != "same" for op in lane["ops"])}
               for side in ("a", "b")}
    only = {"a": set(diff["agents"]["only_a"]), "b": set(diff["agents"]["only_b"])}
    rows, listed = [], 0
    for lane in lanes:
        ops = lane["ops"][:max(0, MAX_ROWS - listed)]
        listed += len(ops)
        rows.append({"lane": lane, "label": lane_label(lane), "differs": any(op["op"] != "same" for op in lane["ops"]),
                     "hidden": len(lane["ops"]) - len(ops),
                     "ops": [{"op": op["op"], "word": WORDS[op["op"]], "a": events["a"].get(op["a"]),
                              "b": events["b"].get(op["b"])} for op in ops]})
    return {
        "diff": diff, "a": trace_a, "b": trace_b, "rows": rows, "listed": listed,
        "steps": sum(len(lane["ops"]) for lane in lanes),
        "trees": {side: _tree(trace["events"], only[side], differs[side])
                  for side, trace in (("a", trace_a), ("b", trace_b))},
        "figure": diff_figure(diff, events),
        "divergence": _divergence(diff, events),
        "colours": COLOURS, "words": WORDS,
    }


def lane_label(lane: dict) -> str:
    a, b = lane["agent_a"], lane["agent_b"]
    return a if b is None or a == b else b if a is None else f"{a} ⇄ {b}"


def _by_id(trace: dict) -> dict[str, dict]:
    """Each event by id, with its time since the run's start."""
    t0 = min((e["t"] for e in trace["events"]), default=0)
    return {e["id"]: {"id": e["id"], "type": e["type"], "agent": e["agent"], "tool": e.get("tool"),
                      "to": e.get("to") if isinstance(e.get("to"), str) else None, "t": e["t"], "dt": e["t"] - t0}
            for e in trace["events"]}


def _tree(events: list[dict], only: set[str], differs: set[str]) -> list[dict]:
    """The spawn tree as nested nodes, each with how it compares: only in this run, its steps differ, or same."""
    order, parents, roles = spawn_tree(events)
    nodes = {agent: {"agent": agent, "role": roles[agent], "children": [],
                     "status": "only" if agent in only else "differs" if agent in differs else "same"}
             for agent in order}
    roots = []
    for agent in order:
        parent = parents.get(agent)
        (nodes[parent]["children"] if parent in nodes else roots).append(nodes[agent])
    return roots


def _divergence(diff: dict, events: dict) -> dict | None:
    first = diff["first_divergence"]
    if first["a"] is None and first["b"] is None:
        return None
    lane = next(k for k, lane in enumerate(diff["lanes"])
                if any(op["a"] == first["a"] and op["b"] == first["b"] for op in lane["ops"]))
    return {"a": events["a"].get(first["a"]), "b": events["b"].get(first["b"]), "lane": lane,
            "label": lane_label(diff["lanes"][lane])}


def diff_figure(diff: dict, events: dict) -> dict:
    """Plotly: run A left, run B right, on one lane order (matched agents share a row); each step coloured by its
    op, the first divergence starred on both sides."""
    labels = [lane_label(lane) for lane in diff["lanes"]]
    points = {(side, op): {"x": [], "y": [], "ids": [], "text": []} for side in ("a", "b") for op in COLOURS}
    drawn = {"a": 0, "b": 0}
    for label, lane in zip(labels, diff["lanes"]):
        for op in lane["ops"]:
            for side in ("a", "b"):
                event = events[side].get(op[side])
                if event is None or drawn[side] >= MAX_POINTS:
                    continue
                drawn[side] += 1
                group = points[(side, op["op"])]
                group["x"].append(event["dt"])
                group["y"].append(label)
                group["ids"].append(event["id"])
                detail = event["tool"] or (f"→ {event['to']}" if event["to"] else "")
                group["text"].append(f"{event['id']} · {event['type']} {detail} · {WORDS[op['op']]}")
    data = []
    for (side, op), group in points.items():
        if not group["x"]:
            continue
        data.append({"type": "scatter", "mode": "markers",
                     "name": WORDS[op], "legendgroup": op, "showlegend": side == "a" or op == "only_b",
                     "x": group["x"], "y": group["y"], "customdata": group["ids"], "text": group["text"],
                     "hovertemplate": "%{text}<extra></extra>", "xaxis": "x" if side == "a" else "x2",
                     "marker": {"color": COLOURS[op], "size": 9 if op == "same" else 11,
                                "symbol": "circle" if op == "same" else "diamond",
                                "line": {"width": 0 if op == "same" else 1, "color": "#1f2937"}},
                     "meta": side})
    first = diff["first_divergence"]
    for side in ("a", "b"):
        event = events[side].get(first[side])
        if event is not None:
            lane = next(label for label, lane in zip(labels, diff["lanes"]) if any(op[side] == event["id"]
                                                                                  for op in lane["ops"]))
            data.append({"type": "scatter", "mode": "markers", "name": "first divergence", "showlegend": side == "a",
                         "x": [event["dt"]], "y": [lane], "customdata": [event["id"]], "meta": side,
                         "xaxis": "x" if side == "a" else "x2", "hovertemplate": "first divergence<extra></extra>",
                         "marker": {"symbol": "star", "size": 20, "color": "#7c3aed",
                                    "line": {"width": 1, "color": "#ffffff"}}})
    height = max(260, min(2400, 110 + 24 * len(labels)))  # a label per lane up to ~95 lanes

    def axis(side: str, domain: list[float]) -> dict:
        return {"title": {"text": f"{side.upper()} {diff[side]}: seconds since its start"}, "zeroline": False,
                "gridcolor": "#eef0f3", "domain": domain}

    return {"data": data, "layout": {
        "height": height, "margin": {"l": 150, "r": 20, "t": 30, "b": 48}, "hovermode": "closest",
        "xaxis": axis("a", [0, 0.48]), "xaxis2": axis("b", [0.52, 1]),
        "yaxis": {"type": "category", "categoryorder": "array", "categoryarray": list(reversed(labels)),
                  "automargin": True, "gridcolor": "#eef0f3"},
        "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        "plot_bgcolor": "#ffffff", "paper_bgcolor": "#ffffff"}}
