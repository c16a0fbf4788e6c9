"""JSON API of traces: ingest, list, read whole, delete."""

from typing import Literal

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from app import analysis, graph, queries
from app.deps import CacheDep, DbDep, SettingsDep
from app.documents import Upload
from app.ingest import ingest
from app.overlays import describe
from app.paging import MAX_OFFSET
from app.store import delete_trace

router = APIRouter(prefix="/api/traces", tags=["traces"])


async def read_uploads(request: Request) -> list[Upload]:
    """The request's documents: each multipart `file` part, or the raw body."""
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        form = await request.form(max_files=10_000)
        files = [part for part in form.getlist("file") if isinstance(part, UploadFile)]
        if not files:
            raise HTTPException(400, "multipart upload has no `file` part")
        return [Upload(part.filename or "file", await part.read()) for part in files]
    return [Upload("body", await request.body())]


ImportFormat = Literal["orchestrace", "otlp", "openai_agents", "claude_code"]


@router.post("", status_code=201)
async def create_traces(request: Request, db: DbDep, settings: SettingsDep, replace: bool = False,
                        format: ImportFormat | None = None, keep_content: bool = False):
    """Ingest traces in our format or an industrial one (detected, or `format`); all stored or none."""
    uploads = await read_uploads(request)
    existing = "replace" if replace else "error"
    stored, _, warnings = await run_in_threadpool(ingest, db, uploads, existing, settings.max_body_bytes,
                                                  format, keep_content)
    answer = {"ingested": stored, "warnings": warnings}
    if replace:  # labels of events that vanished with the replacement are kept and reported
        orphans = [o for trace_id in stored for o in queries.orphaned_labels(db, trace_id)]
        answer["orphaned_labels"] = orphans
    return answer


@router.get("")
def read_traces(
    db: DbDep,
    topology: str | None = None,
    system: str | None = None,
    q: str | None = None,
    sort: str = "trace_id",
    limit: int = Query(50, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    """Trace summaries matching the filters, one page at a time."""
    try:
        items, total = queries.list_traces(db, topology, system, q, sort, limit, offset)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    return {"items": items, "total": total}


@router.get("/{trace_id}")
def read_trace(trace_id: str, db: DbDep):
    """The trace exactly as ingested."""
    trace = queries.read_trace(db, trace_id)
    if trace is None:
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    return trace


@router.get("/{trace_id}/live", responses={404: {"description": "no trace received from an exporter with this id"}})
def read_live_status(trace_id: str, db: DbDep):
    """How a trace sent by an exporter stands: `receiving` (its root span has not arrived), `building`
    (stored once the builder has run), `complete`; with spans received and the last build's error."""
    status = queries.live_status(db, trace_id)
    if status is None:
        raise HTTPException(404, f"no trace received from an exporter with id '{trace_id}'")
    return {"status": status["status"], "source": status["source"], "received": status["received"],
            "first_received_at": status["first_received_at"].isoformat() + "Z",
            "last_received_at": status["last_received_at"].isoformat() + "Z",
            "built_at": status["built_at"].isoformat() + "Z" if status["built_at"] else None,
            "build_error": status["build_error"]}


@router.get("/{trace_id}/figure")
def read_figure(trace_id: str, db: DbDep, cache: CacheDep, group: Literal["auto", "role", "agent"] = "auto",
                expand: list[str] = Query([])):
    """The interaction graph as a Plotly figure, with lane layout and event ids (built once, cached)."""
    grouping = {"auto": None, "role": True, "agent": False}[group]
    body = graph.figure_json(db, cache, trace_id, grouping, frozenset(expand))
    if body is None:
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    return Response(body, media_type="application/json")


@router.get("/{trace_id}/overlays")
def read_overlays(trace_id: str, db: DbDep, cache: CacheDep):
    """The numeric per-event channels a graph can be coloured by."""
    channels = graph.overlay_channels(db, cache, trace_id)
    if channels is None:
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    return {"channels": describe(channels)}


@router.get("/{trace_id}/overlay")
def read_overlay(trace_id: str, channel: str, db: DbDep, cache: CacheDep):
    """One channel's value per event, in event order (null where an event has none)."""
    if not queries.trace_exists(db, trace_id):
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    try:
        values = graph.overlay_channel(db, cache, trace_id, channel)
    except ValueError as exc:
        raise HTTPException(404, str(exc)) from exc
    if values is None:
        raise HTTPException(404, f"trace '{trace_id}' has no numeric channel '{channel}'")
    return {"channel": channel, "values": values}


@router.get("/{trace_id}/metrics")
def read_metrics(trace_id: str, db: DbDep, cache: CacheDep):
    """Orchestration measures of the trace (definitions in the README), with its critical path."""
    result = analysis.ensure_analysis(db, cache, trace_id)
    if result is None:
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    return result["metrics"]


@router.get("/{trace_id}/audit")
def read_audit(trace_id: str, db: DbDep, cache: CacheDep):
    """Structural and safety findings: rule, severity, message and the events involved."""
    result = analysis.ensure_analysis(db, cache, trace_id)
    if result is None:
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    return {"findings": result["findings"]}


@router.get("/{trace_id}/credit")
def read_credit(trace_id: str, db: DbDep, cache: CacheDep, channel: str,
                rule: Literal["uniform", "causal", "critical_path"] = "causal"):
    """A reward channel assigned to events by a rule, rolled up to the eight credit units, and its
    correlation with the reviewers' mean credit."""
    if not queries.trace_exists(db, trace_id):
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    try:
        values = analysis.computed_credit(db, cache, trace_id, rule, channel)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from exc
    human = (graph.overlay_channels(db, cache, trace_id) or {}).get(graph.HUMAN_MEAN)
    ids = queries.event_ids(db, trace_id)
    report = analysis.credit_report(db, cache, trace_id, values, human)
    return {"rule": rule, "channel": channel, "total": sum(values),
            "events": [{"id": i, "credit": v} for i, v in zip(ids, values)], **report}


@router.delete("/{trace_id}")
def remove_trace(trace_id: str, db: DbDep, force: bool = False):
    """Remove a trace; one with labels needs force=true, and its labels stay (orphaned, exportable)."""
    if not queries.trace_exists(db, trace_id):
        raise HTTPException(404, f"no trace with id '{trace_id}'")
    labels = queries.label_count(db, trace_id)
    if labels and not force:
        raise HTTPException(409, f"trace '{trace_id}' has {labels} label version(s); "
                                 "add ?force=true to delete it (the labels are kept and stay exportable)")
    delete_trace(db, trace_id)
    return {"deleted": trace_id, "labels_kept": labels}
