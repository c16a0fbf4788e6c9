"""JSON API of traces: ingest, list, read whole, delete.

The OpenAPI description names every body, status and media type a route answers with; the JSON schemas
of the answers are written here (`responses=`), since the routes return plain dicts.
"""

import math
from typing import Annotated, Literal

from fastapi import APIRouter, BackgroundTasks, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.domain.atif_export import to_atif
from app.domain.overlays import describe
from app.domain.paging import MAX_OFFSET
from app.ingest.importers import FORMATS
from app.ingest.importers.common import KEEP, ContentPolicy, strictest
from app.ingest.pipeline import ingest
from app.services import analysis, graph, live
from app.store import labels as label_store
from app.store import lod as lod_store
from app.store import traces as trace_store
from app.store.db import iso_utc
from app.store.writes import delete_trace
from app.web.access import Admin, AnyViewer, Reviewer, replace_refusal
from app.web.apidoc import (
    BINARY,
    COUNT,
    DOCUMENT_ERROR,
    INVALID,
    MAYBE_TEXT,
    NUMBER,
    OBJECT,
    PROBLEMS,
    READ_REFUSALS,
    TEXT,
    TEXTS,
    WRITE_REFUSALS,
    object_schema,
    reply,
)
from app.web.deps import CacheDep, DbDep, SettingsDep, TraceId, Viewer
from app.web.requests import read_uploads
from app.web.responses import JsonBody
from app.web.security import Forbidden

router = APIRouter(prefix="/api/traces", tags=["traces"])


NO_TRACE = {404: reply("no trace with this id")}
Grouping = Literal["auto", "role", "agent"]
GROUPINGS = {"auto": None, "role": True, "agent": False}
PlotWidth = Annotated[int, Query(ge=100, le=10000, description="the plot's width in pixels")]
PlotHeight = Annotated[int, Query(ge=100, le=10000, description="the plot's height in pixels")]
FocusAgent = Annotated[str | None, Query(max_length=1000, description="draw only this agent's lanes of `show`")]
FocusShow = Annotated[Literal[graph.FOCUS_SHOWS], Query(
    description="with `focus`: `subtree` (the agent and those it spawned) or `talks` (and those it has edges with)")]
TRACE_SUMMARY = object_schema({
    "trace_id": TEXT, "task_id": TEXT, "system": MAYBE_TEXT, "topology": MAYBE_TEXT,
    "rewards": OBJECT, "costs": OBJECT, "metrics": {"type": ["object", "null"]}, "events": COUNT, "edges": COUNT,
    "agents": COUNT, "tokens": NUMBER, "wall_clock_s": NUMBER, "ingested_at": TEXT}, "trace_id", "task_id")
EVENT = object_schema({"id": TEXT, "t": NUMBER, "type": TEXT, "agent": TEXT}, "id", "t", "type", "agent")
EDGE = object_schema({"src": TEXT, "dst": TEXT, "type": TEXT}, "src", "dst", "type")
TRACE = object_schema({"trace_id": TEXT, "task_id": TEXT, "system": TEXT, "topology": TEXT,
                       "events": {"type": "array", "items": EVENT}, "edges": {"type": "array", "items": EDGE},
                       "rewards": OBJECT, "costs": OBJECT, "metrics": OBJECT},
                      "trace_id", "task_id", "events", "edges", "rewards", "costs")
UPLOAD_BODY = {"requestBody": {"required": True, "description": (
    "One trace object, a JSON array of traces, JSON Lines (one per line), or an export in an industrial "
    "format (OTLP/JSON, an OpenAI Agents SDK export, a Claude Code session): as the body, gzipped or not, "
    "or as multipart `file` parts (also .zip and .tar.gz archives). The format is recognised from the "
    "content, or named by `format`."), "content": {
    "application/json": {"schema": {"description": "a trace, an array of traces, or an industrial export"}},
    "application/x-ndjson": {"schema": {"description": "JSON Lines: one trace (or record) per line"}},
    "application/gzip": {"schema": BINARY},
    "application/zip": {"schema": BINARY},
    "application/x-tar": {"schema": BINARY},
    "multipart/form-data": {"schema": object_schema({"file": {"type": "array", "items": BINARY}}, "file")},
}}}


ImportFormat = Literal[FORMATS]


@router.post("", dependencies=[Reviewer], status_code=201, openapi_extra=UPLOAD_BODY, responses=WRITE_REFUSALS | {
    201: reply("the traces are stored; `orphaned_labels` (with replace=true) lists labels of events that vanished",
               object_schema({"ingested": TEXTS, "warnings": TEXTS, "orphaned_labels": {"type": "array",
                                                                                        "items": OBJECT}},
                             "ingested", "warnings")),
    400: reply("the body is not readable (malformed JSON, not UTF-8, not gzip, a multipart upload without a "
               "`file` part), or the Host is not served here", DOCUMENT_ERROR),
    403: reply("a cross-site request, a viewer, or replace=true from a caller who is not an admin"),
    409: reply("a trace id is stored already (an admin may add replace=true); nothing is stored",
               object_schema({"error": TEXT, "trace_ids": TEXTS}, "error", "trace_ids")),
    415: reply("a Content-Type a browser may send cross-site (text/plain, a form)"),
    422: reply("invalid traces (each problem with its trace and path), a file no importer can read, or an "
               "invalid parameter; nothing is stored", PROBLEMS)})
async def create_traces(request: Request, db: DbDep, settings: SettingsDep, background: BackgroundTasks,
                        replace: bool = Query(False, description="replace traces whose ids are stored (admins)"),
                        format: ImportFormat | None = None,
                        content: ContentPolicy = Query(KEEP, description=(
                            "`hash`: keep only the `content_ref` hashes of what an industrial format's events said, "
                            "not the content itself; a server whose ORCHESTRACE_CONTENT is `hash` keeps hashes "
                            "whatever is asked"))):
    """Ingest traces in our format or an industrial one (detected, or `format`); all stored or none.

    Beyond the published schema, refused (422, naming the path): text with a lone surrogate (an
    unpaired \\ud800-\\udfff escape), a number beyond a double (such as 1e400), an integer of 2**63 or
    more in `t` or `costs`, a key given twice in one object, and an event property nested more than 64
    levels of objects and arrays deep. Other integers of any size are kept exactly. Replacing (replace=true) is
    an admin's."""
    if replace and (refused := replace_refusal(request)):
        raise Forbidden(refused)
    uploads = await read_uploads(request)
    existing = "replace" if replace else "error"
    stored, _, warnings, events = await run_in_threadpool(ingest, db, uploads, existing, settings.max_body_bytes,
                                                          format, strictest(settings.content, content))
    background.add_task(graph.prepare_lod, db, events)
    answer = {"ingested": stored, "warnings": warnings}
    if replace:  # labels of events that vanished with the replacement are kept and reported
        answer["orphaned_labels"] = label_store.orphaned_labels_in(db, None, stored)
    return answer


@router.get("", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: reply("one page of trace summaries, and how many match",
               object_schema({"items": {"type": "array", "items": TRACE_SUMMARY}, "total": COUNT}, "items", "total"))})
def read_traces(
    db: DbDep,
    topology: str | None = None,
    system: str | None = None,
    task: str | None = Query(None, description="the task id, exactly"),
    q: str | None = None,
    finding: str | None = Query(None, description="traces with a finding of this audit rule"),
    ranges: list[str] = Query([], alias="range", description=(
        "key:low:high, traces with low <= value < high (a bound may be empty); key is a numeric sort key or "
        "reward:<channel>; repeat for more")),
    sort: str = "trace_id",
    limit: int = Query(50, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    """Trace summaries matching the filters, one page at a time."""
    try:
        filters = trace_store.parse_filters(topology, system, task, q, finding, ranges)
        items, total = trace_store.list_traces(db, filters, sort, limit, offset)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    return JsonBody({"items": items, "total": total})


@router.get("/{trace_id}", dependencies=[AnyViewer],
            responses=READ_REFUSALS | NO_TRACE | {200: reply("the trace as ingested", TRACE)})
def read_trace(trace_id: TraceId, db: DbDep):
    """The trace exactly as ingested."""
    trace = trace_store.read_trace(db, trace_id)
    return JsonBody(trace)


@router.get("/{trace_id}/live", dependencies=[AnyViewer], responses=READ_REFUSALS | {
    200: reply("how the trace stands", object_schema({
        "status": {"enum": ["receiving", "building", "complete"]}, "source": TEXT, "received": COUNT,
        "first_received_at": TEXT, "last_received_at": TEXT, "built_at": MAYBE_TEXT,
        "build_error": MAYBE_TEXT, "build_warnings": TEXTS}, "status", "source", "received", "build_warnings")),
    404: reply("no trace received from an exporter with this id")})
def read_live_status(trace_id: str, db: DbDep):
    """How a trace sent by an exporter stands: `receiving` (its root span has not arrived), `building`
    (stored once the builder has run), `complete`; with spans received and the last build's error and warnings."""
    status = live.live_status(db, trace_id)
    if status is None:
        raise HTTPException(404, f"no trace received from an exporter with id '{trace_id}'")
    return {"status": status["status"], "source": status["source"], "received": status["received"],
            "first_received_at": iso_utc(status["first_received_at"]),
            "last_received_at": iso_utc(status["last_received_at"]),
            "built_at": iso_utc(status["built_at"]) if status["built_at"] else None,
            "build_error": status["build_error"], "build_warnings": status["build_warnings"]}


@router.get("/{trace_id}/figure", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | NO_TRACE | {
    200: reply("a Plotly figure with its lanes and event positions", object_schema(
        {"figure": OBJECT, "lanes": {"type": "array"}, "event_ids": TEXTS}, "figure"))})
def read_figure(trace_id: TraceId, db: DbDep, cache: CacheDep, group: Grouping = "auto",
                expand: list[str] = Query([]), collapse: list[str] = Query([]),
                width: PlotWidth = graph.DEFAULT_PX[0], height: PlotHeight = graph.DEFAULT_PX[1],
                focus: FocusAgent = None, show: FocusShow = "subtree"):
    """The interaction graph as a Plotly figure with its lane layout (built once, cached). `mode` "exact": every
    event, with `event_ids` and `positions`; "bins" (a trace of more than 5,000 events): the whole trace binned
    for a plot of `width` x `height` pixels, which the page refines through `/window` as it zooms. `focus`
    narrows the lanes to an agent's subtree or partners (404 for an agent the trace lacks)."""
    try:
        body = graph.figure_json(db, cache, trace_id, GROUPINGS[group], frozenset(expand), (width, height),
                                 frozenset(collapse), (focus, show) if focus else None)
    except ValueError as exc:  # an unknown focus agent
        raise HTTPException(404, str(exc)) from exc
    return Response(body, media_type="application/json")


@router.get("/{trace_id}/window", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | NO_TRACE | {
    200: reply("the window's Plotly traces, exact or binned", object_schema(
        {"mode": {"enum": ["exact", "bins"]}, "traces": {"type": "array"}, "count": COUNT,
         "events": {"type": ["object", "null"]}}, "mode", "traces", "count"))})
def read_window(trace_id: TraceId, db: DbDep, cache: CacheDep, viewer: Viewer, t0: float, t1: float,
                group: Grouping = "auto", expand: list[str] = Query([]), collapse: list[str] = Query([]),
                lane0: float | None = None,
                lane1: float | None = None, width: PlotWidth = graph.DEFAULT_PX[0],
                height: PlotHeight = graph.DEFAULT_PX[1], channel: str | None = None,
                focus: FocusAgent = None, show: FocusShow = "subtree"):
    """What a zoomed view shows of the events with t in [t0, t1] (lanes lane0..lane1 in view): every event with
    its seq, id and position when they are at most 4,000 (`mode` "exact"), else bins per lane and time bucket and
    edge bundles (`mode` "bins"); coloured by the overlay `channel` when given."""
    if not (math.isfinite(t0) and math.isfinite(t1) and t0 <= t1):
        raise HTTPException(422, f"t0 and t1 must be finite numbers with t0 <= t1 (got t0={t0}, t1={t1})")
    lanes = None if lane0 is None or lane1 is None else (min(lane0, lane1), max(lane0, lane1))
    try:
        body = graph.window_json(db, cache, viewer, trace_id, GROUPINGS[group], frozenset(expand), t0, t1, lanes,
                                 (width, height), channel, frozenset(collapse), (focus, show) if focus else None)
    except ValueError as exc:  # an unknown computed channel or focus agent
        raise HTTPException(404, str(exc)) from exc
    return Response(body, media_type="application/json")


@router.get("/{trace_id}/locate", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | NO_TRACE | {
    200: reply("where the events are drawn", object_schema({"items": {"type": "array", "items": object_schema(
        {"event_id": TEXT, "seq": COUNT, "t": NUMBER, "lane_owner": TEXT}, "event_id", "seq", "t", "lane_owner")},
        "missing": TEXTS}, "items", "missing"))})
def locate_events(trace_id: TraceId, db: DbDep, event: list[str] = Query(min_length=1, max_length=1000)):
    """Where events are drawn: each one's position in the trace (seq), its time and the agent whose lane shows
    it (a tool's answer sits on its caller's lane); ids the trace lacks are listed in `missing`. How the page
    brings an event of a binned trace into view, and marks a critical path or audit findings on it."""
    graph.ensure_lod(db, trace_id)
    items = lod_store.locate_events(db, trace_id, event)
    found = {item["event_id"] for item in items}
    return JsonBody({"items": items, "missing": [e for e in dict.fromkeys(event) if e not in found]})


SEARCH_HIT = object_schema({"kind": {"enum": ["agent", "role", "tool", "event"]}, "value": TEXT, "events": COUNT,
                            "first_event": TEXT}, "kind", "value", "events", "first_event")


@router.get("/{trace_id}/search", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | NO_TRACE | {
    200: reply("the matches, best first", object_schema({"items": {"type": "array", "items": SEARCH_HIT}}, "items"))})
def search_trace(trace_id: TraceId, db: DbDep, q: str = Query(min_length=1, max_length=200),
                 limit: int = Query(20, ge=1, le=100)):
    """Agents, roles, tools and event ids containing `q` (case-insensitive; exact, then prefix matches first),
    each with its number of events and its first event in time order: the trace page's find box."""
    return JsonBody({"items": trace_store.search_trace(db, trace_id, q, limit)})


@router.get("/{trace_id}/overlays", dependencies=[AnyViewer], responses=READ_REFUSALS | NO_TRACE | {
    200: reply("the numeric channels", object_schema({"channels": {"type": "array", "items": object_schema(
        {"name": TEXT, "count": COUNT, "min": NUMBER, "max": NUMBER}, "name", "count", "min", "max")}}, "channels"))})
def read_overlays(trace_id: TraceId, db: DbDep, cache: CacheDep, viewer: Viewer):
    """The numeric per-event channels a graph can be coloured by."""
    channels = graph.overlay_channels(db, cache, viewer, trace_id)
    return JsonBody({"channels": describe(channels)})


@router.get("/{trace_id}/overlay", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: reply("the channel's value per event", object_schema(
        {"channel": TEXT, "values": {"type": "array", "items": {"type": ["number", "null"]}}}, "channel", "values")),
    404: reply("no trace with this id, or no numeric channel of this name")})
def read_overlay(trace_id: TraceId, channel: str, db: DbDep, cache: CacheDep, viewer: Viewer):
    """One channel's value per event, in event order (null where an event has none)."""
    try:
        values = graph.overlay_channel(db, cache, viewer, trace_id, channel)
    except ValueError as exc:
        raise HTTPException(404, str(exc)) from exc
    if values is None:
        raise HTTPException(404, f"trace '{trace_id}' has no numeric channel '{channel}'")
    return {"channel": channel, "values": values}


@router.get("/{trace_id}/metrics", dependencies=[AnyViewer], responses=READ_REFUSALS | NO_TRACE | {
    200: reply("the measures by name", object_schema({"events": COUNT, "edges": COUNT, "agents": COUNT,
                                                      "critical_path": TEXTS}, "events", "edges", "agents"))})
def read_metrics(trace_id: TraceId, db: DbDep, cache: CacheDep):
    """Orchestration measures of the trace (definitions in the README), with its critical path."""
    result = analysis.ensure_analysis(db, cache, trace_id)
    return JsonBody(result["metrics"])


@router.get("/{trace_id}/audit", dependencies=[AnyViewer], responses=READ_REFUSALS | NO_TRACE | {
    200: reply("the findings", object_schema({"findings": {"type": "array", "items": object_schema(
        {"rule": TEXT, "severity": {"enum": ["error", "warning", "info"]}, "message": TEXT, "events": TEXTS},
        "rule", "severity", "message", "events")}}, "findings"))})
def read_audit(trace_id: TraceId, db: DbDep, cache: CacheDep):
    """Structural and safety findings: rule, severity, message and the events involved."""
    result = analysis.ensure_analysis(db, cache, trace_id)
    return JsonBody({"findings": result["findings"]})


@router.get("/{trace_id}/credit", dependencies=[AnyViewer], responses=READ_REFUSALS | NO_TRACE | {
    200: reply("each event's credit, the roll-ups and the correlation with reviewers", object_schema(
        {"rule": TEXT, "channel": TEXT, "total": NUMBER, "events": {"type": "array", "items": object_schema(
            {"id": TEXT, "credit": NUMBER}, "id", "credit")}, "rollup": OBJECT}, "rule", "channel", "total", "events")),
    422: reply("no reward channel of this name, or an invalid parameter", PROBLEMS)})
def read_credit(trace_id: TraceId, db: DbDep, cache: CacheDep, viewer: Viewer, channel: str,
                rule: Literal["uniform", "causal", "critical_path"] = "causal"):
    """A reward channel assigned to events by a rule, rolled up to the eight credit units, and its
    correlation with the reviewers' mean credit."""
    try:
        values = analysis.computed_credit(db, cache, trace_id, rule, channel)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    human = (graph.overlay_channels(db, cache, viewer, trace_id) or {}).get(graph.HUMAN_MEAN)
    ids = trace_store.event_ids(db, trace_id)
    report = analysis.credit_report(db, cache, trace_id, values, human)
    return JsonBody({"rule": rule, "channel": channel, "total": sum(values),
                     "events": [{"id": i, "credit": v} for i, v in zip(ids, values)], **report})


@router.get("/{trace_id}/atif", dependencies=[AnyViewer], responses=READ_REFUSALS | NO_TRACE | {
    200: reply("the trace as one ATIF-v1.8 trajectory (Harbor's Agent Trajectory Interchange Format), each "
               "sub-agent's trajectory embedded in its spawner's", OBJECT)})
def read_trace_atif(trace_id: TraceId, db: DbDep):
    """The trace as ATIF-v1.8, as harbor's models validate it (app.domain.atif_export)."""
    return JsonBody(to_atif(trace_store.read_trace(db, trace_id)))


@router.delete("/{trace_id}", dependencies=[Admin], responses=WRITE_REFUSALS | NO_TRACE | {
    200: reply("the trace is removed; its labels are kept",
               object_schema({"deleted": TEXT, "labels_kept": COUNT}, "deleted", "labels_kept")),
    409: reply("the trace has labels: add force=true")})
def remove_trace(trace_id: TraceId, db: DbDep, force: bool = False):
    """Remove a trace; one with labels needs force=true, and its labels stay (orphaned, exportable)."""
    labels = label_store.label_count(db, trace_id)
    if labels and not force:
        raise HTTPException(409, f"trace '{trace_id}' has {labels} label version(s); "
                                 "add ?force=true to delete it (the labels are kept and stay exportable)")
    delete_trace(db, trace_id)
    return {"deleted": trace_id, "labels_kept": labels}
