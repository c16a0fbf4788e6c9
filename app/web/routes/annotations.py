"""JSON API of event labels: save, clear, undo, list, export, import, agreement, annotated traces."""

from typing import Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from app.domain.agreement import agreement
from app.domain.refusals import NotFound
from app.domain.taxonomy import AGREEMENT_LEVELS, PAPER_FIELDS
from app.services import exports, papers, queues
from app.services import labels as annotations
from app.store import queries
from app.web.apidoc import (
    BINARY,
    CSV,
    FIELD_ERROR,
    INVALID,
    NOT_JSON,
    OBJECT,
    PROBLEMS,
    READ_REFUSALS,
    WRITE_REFUSALS,
    json_body,
    object_schema,
    reply,
)
from app.web.browser import reviewer_of
from app.web.deps import CacheDep, DbDep, TraceId
from app.web.downloads import attachment
from app.web.requests import json_object, read_uploads
from app.web.responses import JsonBody
from app.web.security import acting_reviewer, current_user

router = APIRouter(prefix="/api", tags=["annotations"])



def saved(label: dict, created: bool) -> JSONResponse:
    """201 for a new version, 200 when a retried client_request_id found the version it made before."""
    return JSONResponse(label, status_code=201 if created else 200)


LABEL = object_schema({}, "trace_id", "event_id", "reviewer", "version")
LABEL_BODY = json_body("`trace_id`, `event_id`, the label fields to set (`credit`, `reward_family`, `credit_unit`, "
                       "`subdecision`, `safety`, `tags`, `note`, `paper`), and optionally `base_version`, "
                       "`client_request_id`; `reviewer` in open single-user mode (with accounts, you)")
LABEL_ANSWERS = WRITE_REFUSALS | NOT_JSON | {
    200: reply("a retried `client_request_id`: the version it made before", LABEL),
    201: reply("the new version", LABEL),
    404: reply("no such trace or event"),
    409: reply("`base_version` is not the current version", object_schema({"error": {}, "current": OBJECT},
                                                                           "error")),
    422: reply("a field is not valid (named in `field`), or a parameter", FIELD_ERROR),
}


@router.post("/annotations", status_code=201, openapi_extra=LABEL_BODY, responses=LABEL_ANSWERS)
async def create_annotation(request: Request, db: DbDep):
    """Save a label version; omitted fields keep their previous value."""
    body = acting_reviewer(request, await json_object(request))
    return saved(*await run_in_threadpool(annotations.save_label, db, body))


@router.post("/annotations/clear", status_code=201, openapi_extra=LABEL_BODY, responses=LABEL_ANSWERS)
async def clear_annotation(request: Request, db: DbDep):
    """A new version with every field empty."""
    body = acting_reviewer(request, await json_object(request))
    return saved(*await run_in_threadpool(annotations.clear_label, db, body))


@router.post("/annotations/undo", status_code=201, openapi_extra=LABEL_BODY, responses=LABEL_ANSWERS)
async def undo_annotation(request: Request, db: DbDep):
    """A new version restoring the version before the current one."""
    body = acting_reviewer(request, await json_object(request))
    return saved(*await run_in_threadpool(annotations.undo_label, db, body))


@router.get("/annotations")
def read_annotations(request: Request, db: DbDep, trace_id: str | None = None, event_id: str | None = None,
                     reviewer: str | None = None, history: bool = False, orphaned: bool = False):
    """Current labels (every version with history=true); orphaned=true lists labels of vanished events. On an
    item of a blind queue, other reviewers' labels stay hidden from a reviewer until they saved theirs."""
    if orphaned:
        return JsonBody({"items": queries.orphaned_labels(db, trace_id)})
    items = annotations.list_labels(db, trace_id, event_id, reviewer, history)
    me = reviewer_of(request)
    hidden = queries.blind_hidden_events(db, me) if me else set()
    if hidden:
        items = [label for label in items
                 if label["reviewer"] == me or (label["trace_id"], label["event_id"]) not in hidden]
    return JsonBody({"items": items})


@router.get("/annotations/export", responses=READ_REFUSALS | INVALID | {
    200: {"description": "csv, json: one row per label (per version with history=true); rllm, trl_stepwise, "
                         "credit_jsonl: JSON Lines for RL trainers (README, 'Exports for RL trainers')",
          "content": {"text/csv": {"schema": CSV}, "application/json": {"schema": {"type": "array"}},
                      "application/jsonl": {"schema": {"type": "string"}}}},
    404: reply("no trace or queue with this id")})
def export_annotations(db: DbDep, cache: CacheDep,
                       format: Literal["csv", "json", "rllm", "trl_stepwise", "credit_jsonl"] = "csv",
                       history: bool = False, trace_id: str | None = None,
                       rule: Literal["uniform", "causal", "critical_path"] = "causal", channel: str | None = None,
                       queue_id: str | None = None):
    """Labels as CSV or JSON (one row per label, per version with history=true), or for RL trainers: `rllm`
    (an rLLM Episode per trace), `trl_stepwise` (TRL stepwise-supervision rows per agent), `credit_jsonl` (a row
    per labelled event); their rewards are reviewers' mean credit, else credit computed by `rule` over the
    reward `channel` (default `team`, else the trace's first); an admin's adjudicated credit wins where a review
    queue settled an event. With `queue_id`: that queue's traces, labels and adjudications only."""
    if queue_id is not None:
        queues.load(db, queue_id)  # 404 for an unknown queue
    if format in exports.RL_FORMATS:  # (labels, unlike these, stay exportable after their trace is deleted)
        if trace_id is not None and not queries.trace_exists(db, trace_id):
            raise NotFound(f"no trace with id '{trace_id}'")
        if queue_id is not None:
            ids = [t for t in queries.queue_trace_ids(db, queue_id) if trace_id in (None, t)]
        else:
            ids = [trace_id] if trace_id else queries.trace_ids(db, labelled_only=format == "credit_jsonl")
        name = f"{format}{'-' + trace_id if trace_id else ''}{'-' + queue_id if queue_id else ''}.jsonl"
        return StreamingResponse(exports.rl_lines(db, cache, format, ids, rule, channel, queue_id),
                                 media_type="application/jsonl", headers=attachment(name))
    labels = annotations.list_labels(db, trace_id, None, None, history, queue_id)
    name = f"annotations{'-' + trace_id if trace_id else ''}{'-history' if history else ''}.{format}"
    headers = attachment(name)
    if format == "json":
        return JSONResponse(annotations.export_rows(labels), headers=headers)
    return Response(annotations.to_csv(labels), media_type="text/csv; charset=utf-8", headers=headers)


@router.post("/annotations/import", openapi_extra={"requestBody": {"required": True, "content": {
    "application/json": {"schema": {"type": "array", "items": OBJECT}}, "text/csv": {"schema": CSV},
    "multipart/form-data": {"schema": {"type": "object", "required": ["file"], "properties": {
        "file": {"type": "array", "items": BINARY}}}}},
    "description": "our JSON or CSV export of labels, as the body or as multipart `file` parts (admins only)"}},
    responses=WRITE_REFUSALS | {
    200: reply("what was imported and what was already there",
               object_schema({"imported": {"type": "integer"}, "unchanged": {"type": "integer"}})),
    400: reply("the body cannot be read as JSON or CSV", PROBLEMS),
    409: reply("a version differs from the stored one of the same number", PROBLEMS),
    422: reply("rows that are not labels, each with where it is", PROBLEMS)})
async def import_annotations(request: Request, db: DbDep):
    """Merge our JSON or CSV export: identical versions are skipped, so re-importing changes nothing."""
    uploads = await read_uploads(request)
    content_type = "" if len(uploads) > 1 or uploads[0].source != "body" else request.headers.get("content-type", "")
    rows = [(f"{upload.source}: {where}" if len(uploads) > 1 else where, raw)
            for upload in uploads for where, raw in annotations.parse_import(upload.data, content_type)]
    user = current_user(request)
    return await run_in_threadpool(annotations.import_labels, db, rows, user.name if user else None)


@router.get("/traces/{trace_id}/annotated", responses=READ_REFUSALS | {404: reply("no such trace")})
def read_annotated_trace(trace_id: TraceId, db: DbDep):
    """The trace with an `annotations` list (current labels) on each labelled event."""
    trace = queries.read_trace(db, trace_id)
    by_event: dict[str, list] = {}
    for label in annotations.list_labels(db, trace_id):
        by_event.setdefault(label["event_id"], []).append(
            {k: v for k, v in label.items() if k not in ("trace_id", "event_id", "event_type", "agent", "role")})
    for event in trace["events"]:
        if event["id"] in by_event:
            event["annotations"] = by_event[event["id"]]
    return JsonBody(trace)


@router.get("/agreement", responses=READ_REFUSALS | {
    200: reply("the agreement coefficient with the units and ratings it was computed on", OBJECT),
    422: reply("fewer than two reviewers, a field agreement is not computed on, or an invalid parameter", PROBLEMS)})
def read_agreement(db: DbDep, field: str, reviewers: str, target: Literal["events", "papers"] = "events",
                   trace_id: str | None = None):
    """Agreement between reviewers on one field: event labels (interval alpha for credit, nominal
    otherwise) or paper tags (nominal; `pool` stands for the pool's own tags)."""
    names = [name.strip() for name in reviewers.split(",") if name.strip()]
    if len(names) < 2:
        raise HTTPException(422, "reviewers: name at least two reviewers, comma-separated")
    allowed = PAPER_FIELDS if target == "papers" else tuple(AGREEMENT_LEVELS)
    if field not in allowed:
        raise HTTPException(422, f"field: {field!r} is not one of {', '.join(allowed)}")
    if target == "papers":
        return agreement(papers.ratings(db, field, names), names, "nominal")
    ratings: dict = {}
    for label in annotations.list_labels(db, trace_id):
        if label["reviewer"] in names:
            ratings.setdefault((label["trace_id"], label["event_id"]), {})[label["reviewer"]] = label[field]
    return agreement(ratings, names, AGREEMENT_LEVELS[field])
