"""The interaction graph of a stored trace: figure JSON and overlay channels, built once and cached."""

import orjson

from app.domain.figure import (
    bin_traces,
    build_figure,
    build_overview,
    bundle_traces,
    exact_traces,
    lane_layout,
    lane_rows,
    row_spans,
    spawn_tree,
    subtree,
)
from app.domain.overlays import event_channels
from app.domain.taxonomy import COUNTERFACTUAL_SCORES, STOP_SCORES
from app.services.analysis import computed_credit, parse_computed
from app.services.cache import TraceCache
from app.store import labels as label_store
from app.store import lod as lod_store
from app.store import traces as trace_store
from app.store.db import Database
from app.store.writes import trace_locks

# A trace of more events opens as bins (level of detail); a window of at most EXACT_LIMIT events is drawn event
# by event. Bins are at least BIN_PX pixels wide, rows of bins at least ROW_PX apart, so marks never outnumber
# pixels; and at most MAX_MARKS bins fit a view, which SVG draws in a fraction of a second (figure.SVG_SCATTER).
LOD_ABOVE = 5000
EXACT_LIMIT = 4000
BIN_PX = 6
ROW_PX = 6
MAX_MARKS = 6000
MAX_BUNDLES = 3000
BUNDLE_BINS = 8  # an edge bundle spans this many bins: lines are fewer than marks
# The edge budget: at most one bundle line per this many square pixels of plot (a 40 x 40 px cell), the heaviest
# kept; a bundle's width tells how many edges it stands for (figure.BUNDLE_CLASSES), so fewer lines say as much.
BUNDLE_AREA_PX = 1600
DEFAULT_PX = (1200, 600)
FOCUS_SHOWS = ("subtree", "talks")  # an agent's spawn subtree; the agents it exchanges edges with


def edge_budget(px: tuple[int, int]) -> int:
    """How many edge bundle lines a plot of `px` (width, height) pixels draws at most."""
    return max(1, min(MAX_BUNDLES, px[0] * px[1] // BUNDLE_AREA_PX))


def figure_json(db: Database, cache: TraceCache, trace_id: str, group: bool | None, expand: frozenset[str],
                px: tuple[int, int] = DEFAULT_PX, collapse: frozenset[str] = frozenset(),
                focus: tuple[str, str] | None = None) -> bytes | None:
    """Serialized figure payload, or None for an unknown trace: every event (figure.build_figure) when the
    trace has at most LOD_ABOVE, else the overview (figure.build_overview) with the whole trace's bins, sized
    for a plot of `px` (width, height) pixels; agents of `collapse` show their spawn subtrees on their lanes;
    `focus` (agent, "subtree" or "talks") narrows the lanes to that agent's subtree or partners (focus_lanes).
    ValueError when the focus names no agent of the trace."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None

    n_events = trace_store.event_count(db, trace_id)
    keep = focus_lanes(db, cache, trace_id, version, focus) if focus else None

    def build() -> bytes:
        if n_events > LOD_ABOVE:
            skeleton, owners, owner_events, (t0, t1) = _skeleton(db, cache, trace_id, version)
            payload = build_overview(trace_id, skeleton, owners, n_events, group, expand, collapse, keep, owner_events)
            window = _window(db, cache, None, trace_id, version, (group, expand, collapse, keep), t0, t1, None, px, None)
            # the frame stays "bins"; its first window may be drawn event by event when a focus keeps few events
            payload.update(window, mode="bins", window_mode=window["mode"])
            return orjson.dumps(payload)
        trace = {"trace_id": trace_id, "events": trace_store.read_event_cores(db, trace_id),
                 "edges": trace_store.read_edges(db, trace_id)}
        return orjson.dumps(build_figure(trace, group, expand, collapse, keep))

    key_px = px if n_events > LOD_ABOVE else None  # a whole figure does not depend on the plot's size
    return cache.get_or_build(("figure", trace_id, version, group, expand, collapse, focus, key_px), build)


def window_json(db: Database, cache: TraceCache, viewer: str | None, trace_id: str, group: bool | None,
                expand: frozenset[str], t0: float, t1: float, lanes: tuple[float, float] | None, px: tuple[int, int],
                channel: str | None, collapse: frozenset[str] = frozenset(),
                focus: tuple[str, str] | None = None) -> bytes | None:
    """What a zoomed or panned view shows of [t0, t1] (and of the lanes in view): the events one by one when
    they are at most EXACT_LIMIT, else bins and edge bundles; coloured by `channel` (as `viewer` may see a
    human channel) when given."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None
    keep = focus_lanes(db, cache, trace_id, version, focus) if focus else None
    return orjson.dumps(_window(db, cache, viewer, trace_id, version, (group, expand, collapse, keep), t0, t1, lanes,
                                px, channel))


def focus_lanes(db: Database, cache: TraceCache, trace_id: str, version, focus: tuple[str, str]) -> frozenset[str]:
    """The lane owners a focus keeps: (agent, "subtree") the agent and every agent it spawned; (agent, "talks")
    the agent and every lane owner at the other end of one of its edges. ValueError for an unknown agent."""
    agent, show = focus

    def build() -> frozenset[str]:
        _, parents, _ = spawn_tree(_layout_events(db, cache, trace_id, version))
        if agent not in parents:
            raise ValueError(f"trace '{trace_id}' has no agent '{agent}'")
        if show == "subtree":
            return subtree(parents, agent)
        ensure_lod(db, trace_id)
        return frozenset({agent, *lod_store.talk_partners(db, trace_id, agent)})

    return cache.get_or_build(("focus", trace_id, version, focus), build)


def ensure_lod(db: Database, trace_id: str) -> None:
    """Keep each event's and edge's lanes (lod_store.fill_lod) the first time a trace is viewed by window: read
    before the write (lod_store.lod_rows), read again inside it only if the trace was replaced meanwhile."""
    if lod_store.lod_ready(db, trace_id):
        return
    version = trace_store.trace_version(db, trace_id)
    rows = lod_store.lod_rows(db, trace_id)

    def fill(cur) -> None:
        if not lod_store.lod_ready_in(cur, trace_id):  # another request may have filled it meanwhile
            same = trace_store.trace_version_in(cur, trace_id) == version
            lod_store.fill_lod(cur, trace_id, rows if same else None)

    db.write(fill, trace_locks([trace_id]))  # one instance fills it; another then finds it kept


def prepare_lod(db: Database, events: dict[str, int]) -> None:
    """Keep the lanes of the large ones among just-stored traces (`events`: each one's number of events, which the
    ingest knows: no read, where on a lake a read competes with the next page's), after the ingest has answered, so
    that their first view does not wait for it (a million events take seconds)."""
    for trace_id, n in events.items():
        if n > LOD_ABOVE:
            ensure_lod(db, trace_id)


def skeleton_events(db: Database, cache: TraceCache, trace_id: str, version) -> list[dict]:
    """lod_store.skeleton_events of a trace's `version`, kept: its page's spawn tree and its figure's layout both
    start from them, and the first open of a trace asks for both."""
    return cache.get_or_build(("skeleton events", trace_id, version), lambda: lod_store.skeleton_events(db, trace_id))


def _skeleton(db: Database, cache: TraceCache, trace_id: str, version) -> tuple[list[dict], list[str], dict, tuple]:
    """The skeleton events, the lane owners, each owner's number of events, and the first and last event times."""
    def build() -> tuple[list[dict], list[str], dict, tuple]:
        ensure_lod(db, trace_id)
        (counts, span), skeleton = db.together(lambda: lod_store.lanes_and_span(db, trace_id),
                                               lambda: skeleton_events(db, cache, trace_id, version))
        return skeleton, list(counts), counts, span

    return cache.get_or_build(("skeleton", trace_id, version), build)


def _layout_events(db: Database, cache: TraceCache, trace_id: str, version) -> list[dict]:
    """Events enough to lay out the spawn tree: the skeleton of a large trace, every event of a small one."""
    if trace_store.event_count(db, trace_id) > LOD_ABOVE:
        return _skeleton(db, cache, trace_id, version)[0]
    return trace_store.read_event_cores(db, trace_id)


def _window(db: Database, cache: TraceCache, viewer: str | None, trace_id: str, version, layout: tuple, t0: float,
            t1: float,
            lanes_in_view, px: tuple[int, int], channel: str | None) -> dict:
    """`layout`: (group, expand, collapse, keep) as lane_layout takes them."""
    skeleton, owners, owner_events, span = _skeleton(db, cache, trace_id, version)
    lanes, lane_of, _ = lane_layout(skeleton, owners, *layout)
    values = overlay_channel(db, cache, viewer, trace_id, channel) if channel else None
    if channel and values is None:
        raise ValueError(f"trace '{trace_id}' has no numeric channel '{channel}'")
    kept = None if layout[3] is None else list(lane_of)  # a focus: only its lanes' events count and are drawn
    whole = kept is None and span is not None and t0 <= span[0] and span[1] <= t1  # every event: counted
    count = sum(owner_events.values()) if whole else lod_store.window_count(db, trace_id, t0, t1, kept)
    if count <= EXACT_LIMIT:  # the window's events and edges, and below its bins and bundles, read side by side
        traces, events = exact_traces(*db.together(lambda: lod_store.window_events(db, trace_id, t0, t1, kept),
                                                   lambda: lod_store.window_edges(db, trace_id, t0, t1)),
                                      lane_of, lanes_in_view)
        if values is not None:
            events["values"] = [values[seq] for seq in events["seq"]]
        return {"mode": "exact", "traces": traces, "events": events, "count": count, "window": [t0, t1]}
    first, last = lanes_in_view or (0, len(lanes) - 1)
    first = max(0, min(int(first), len(lanes) - 1))  # a view may have been of more lanes than drawn now
    last = max(first, min(len(lanes) - 1, int(last)))
    labels = [lane["label"] for lane in lanes]
    row_of, row_y, row_names = lane_rows(labels, first, last, px[1] // ROW_PX)
    rows = {agent: row_of[lane] for agent, lane in lane_of.items()}
    buckets = max(1, min(px[0] // BIN_PX, MAX_MARKS // len(row_y)))
    numbers = None if values is None else {seq: v for seq, v in enumerate(values) if v is not None}
    budget = edge_budget(px)
    bins, bundles = db.together(
        lambda: lod_store.event_bins(db, trace_id, rows, t0, t1, buckets, numbers),
        lambda: lod_store.edge_bundles(db, trace_id, rows, t0, t1, max(1, buckets // BUNDLE_BINS), budget,
                                       (row_of[first], row_of[last]) if lanes else None))
    traces = bundle_traces(bundles, row_y) + bin_traces(bins, row_y, row_names, channel, row_spans(row_of),
                                                        (t0, t1, buckets))
    return {"mode": "bins", "traces": traces, "events": None, "count": count, "window": [t0, t1],
            "edge_budget": budget}


def channels(db: Database, cache: TraceCache, trace_id: str) -> dict[str, list] | None:
    """Every numeric per-event channel of a trace, aligned with event order; None for an unknown trace."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None

    def build() -> dict[str, list]:
        n_events = trace_store.event_count(db, trace_id)
        return event_channels(trace_store.read_event_extras(db, trace_id), n_events)

    return cache.get_or_build(("channels", trace_id, version), build)


HUMAN_MEAN = "human credit (mean)"
HUMAN_PREFIX = "human credit: "
HUMAN_COUNTERFACTUAL = "human counterfactual (mean: no 0, partly 0.5, yes 1)"
HUMAN_STOP = "human stop (mean: too early -1, right 0, too late 1)"


def overlay_channel(db: Database, cache: TraceCache, viewer: str | None, trace_id: str, name: str) -> list | None:
    """One overlay channel's values: stored or human channels, or computed credit built on request."""
    computed = parse_computed(name)
    if computed:
        return computed_credit(db, cache, trace_id, *computed)
    return (overlay_channels(db, cache, viewer, trace_id) or {}).get(name)


def overlay_channels(db: Database, cache: TraceCache, viewer: str | None, trace_id: str) -> dict[str, list] | None:
    """The trace's own numeric channels plus the current labels `viewer` may see: credit (mean and per
    reviewer), and the mean counterfactual and stop answers as numbers."""
    stored = channels(db, cache, trace_id)
    if stored is None:
        return None
    n_events = trace_store.event_count(db, trace_id)
    per_reviewer: dict[str, list] = {}
    credits: dict[int, list[float]] = {}
    for row in label_store.human_credit(db, viewer, trace_id):
        column = per_reviewer.setdefault(HUMAN_PREFIX + row["reviewer"], [None] * n_events)
        column[row["seq"]] = row["credit"]
        credits.setdefault(row["seq"], []).append(row["credit"])
    answers = label_store.human_answers(db, viewer, trace_id)
    human = {HUMAN_MEAN: credits,
             HUMAN_COUNTERFACTUAL: _scores(answers, "counterfactual", COUNTERFACTUAL_SCORES),
             HUMAN_STOP: _scores(answers, "stop", STOP_SCORES)}
    means = {name: _means(values, n_events) for name, values in human.items() if values}
    return {**means, **dict(sorted(per_reviewer.items())), **stored}


def _scores(rows: list[dict], field: str, scores: dict[str, float]) -> dict[int, list[float]]:
    """Per event position, the numbers of its answers to one question (answers without a number left out)."""
    out: dict[int, list[float]] = {}
    for row in rows:
        if row[field] in scores:
            out.setdefault(row["seq"], []).append(scores[row[field]])
    return out


def _means(values: dict[int, list[float]], n_events: int) -> list:
    column = [None] * n_events
    for seq, numbers in values.items():
        column[seq] = sum(numbers) / len(numbers)
    return column
