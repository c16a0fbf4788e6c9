"""JSON API of event labels: save, clear, undo, list, export, import, agreement, annotated traces."""

from typing import Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from app.domain.agreement import agreement
from app.domain.label_fields import AGREEMENT_LEVELS
from app.domain.paging import MAX_OFFSET
from app.domain.refusals import InvalidParameter
from app.domain.taxonomy import PAPER_FIELDS
from app.services import exports, papers
from app.services import labels as annotations
from app.store import labels as label_store
from app.store import traces as trace_store
from app.web.access import Admin, AnyViewer, Reviewer
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
from app.web.deps import DbDep, TraceId, Viewer
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


@router.post("/annotations", dependencies=[Reviewer], status_code=201, openapi_extra=LABEL_BODY,
             responses=LABEL_ANSWERS)
async def create_annotation(request: Request, db: DbDep):
    """Save a label version; omitted fields keep their previous value."""
    body = acting_reviewer(request, await json_object(request))
    return saved(*await run_in_threadpool(annotations.save_label, db, body))


@router.post("/annotations/clear", dependencies=[Reviewer], status_code=201, openapi_extra=LABEL_BODY,
             responses=LABEL_ANSWERS)
async def clear_annotation(request: Request, db: DbDep):
    """A new version with every field empty."""
    body = acting_reviewer(request, await json_object(request))
    return saved(*await run_in_threadpool(annotations.clear_label, db, body))


@router.post("/annotations/undo", dependencies=[Reviewer], status_code=201, openapi_extra=LABEL_BODY,
             responses=LABEL_ANSWERS)
async def undo_annotation(request: Request, db: DbDep):
    """A new version restoring the version before the current one."""
    body = acting_reviewer(request, await json_object(request))
    return saved(*await run_in_threadpool(annotations.undo_label, db, body))


@router.get("/annotations", dependencies=[AnyViewer])
def read_annotations(db: DbDep, viewer: Viewer, trace_id: str | None = None, event_id: str | None = None,
                     reviewer: str | None = None, history: bool = False, orphaned: bool = False,
                     limit: int | None = Query(None, ge=1, le=1000, description="labels a page holds (all)"),
                     offset: int = Query(0, ge=0, le=MAX_OFFSET, description="labels skipped (0)")):
    """Current labels (every version with history=true), in trace, event, reviewer, version order, all or a page
    (`limit`, `offset`), with `total`; orphaned=true lists labels of vanished events. On an item of a blind queue,
    other reviewers' labels stay hidden from a reviewer until they saved theirs."""
    if orphaned:
        if limit is not None or offset:
            raise InvalidParameter("limit" if limit is not None else "offset", "pages labels; not orphaned=true")
        return JsonBody({"items": label_store.orphaned_labels(db, viewer, trace_id)})
    if limit is None and not offset:
        items = annotations.list_labels(db, viewer, trace_id, event_id, reviewer, history)
        return JsonBody({"items": items, "total": len(items)})
    filters = {"trace_id": trace_id, "event_id": event_id, "reviewer": reviewer}
    items, total = annotations.label_page(db, viewer, filters, history, limit, offset)
    return JsonBody({"items": items, "total": total})


@router.get("/annotations/export", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: {"description": "csv, json: one row per label (per version with history=true); rllm, trl_stepwise, "
                         "credit_jsonl: JSON Lines for RL trainers (README, 'Exports for RL trainers'); "
                         "preference_pairs: a pairwise queue's decided pairs as JSON Lines for TRL's preference "
                         "trainers",
          "content": {"text/csv": {"schema": CSV}, "application/json": {"schema": {"type": "array"}},
                      "application/jsonl": {"schema": {"type": "string"}}}},
    404: reply("no trace or queue with this id"),
    422: reply("final=true without a queue_id, or with a format other than csv or json; preference_pairs without "
               "a pairwise queue, or a pairwise queue in another format", PROBLEMS)})
def export_annotations(db: DbDep, viewer: Viewer,
                       format: Literal["csv", "json", "rllm", "trl_stepwise", "credit_jsonl",
                                       "preference_pairs"] = "csv",
                       history: bool = False, trace_id: str | None = None,
                       rule: Literal["uniform", "causal", "critical_path"] = "causal", channel: str | None = None,
                       queue_id: str | None = None, final: bool = False):
    """Labels as CSV or JSON (one row per label, per version with history=true; with `final=true` and
    `queue_id`, one row per queue item with its final label and status), or for RL trainers: `rllm` (an rLLM
    Episode per trace), `trl_stepwise` (TRL stepwise-supervision rows per agent), `credit_jsonl` (a row per
    labelled event); their rewards are reviewers' mean credit (`disputed` while their credits disagree), else
    credit computed by `rule` over the reward `channel` (default `team`, else the trace's first); an admin's
    adjudicated credit wins where a review queue settled an event. With `queue_id`: that queue's traces, labels
    and adjudications only. `preference_pairs` (a pairwise queue's `queue_id`): a line `{"prompt", "chosen",
    "rejected", ...}` per pair decided `a` or `b` (adjudicated, else the majority of its reviewers' choices)."""
    export = exports.label_export(db, viewer, format, trace_id, queue_id, final, history, rule, channel)
    return StreamingResponse(export.chunks, media_type=export.media_type, headers=attachment(export.filename))


@router.post("/annotations/import", dependencies=[Admin], openapi_extra={"requestBody": {"required": True, "content": {
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


@router.get("/traces/{trace_id}/annotated", dependencies=[AnyViewer],
            responses=READ_REFUSALS | {404: reply("no such trace")})
def read_annotated_trace(trace_id: TraceId, db: DbDep, viewer: Viewer):
    """The trace with an `annotations` list (current labels) on each labelled event."""
    trace = trace_store.read_trace(db, trace_id)
    by_event: dict[str, list] = {}
    for label in annotations.list_labels(db, viewer, trace_id):
        by_event.setdefault(label["event_id"], []).append(
            {k: v for k, v in label.items() if k not in ("trace_id", "event_id", "event_type", "agent", "role")})
    for event in trace["events"]:
        if event["id"] in by_event:
            event["annotations"] = by_event[event["id"]]
    return JsonBody(trace)


@router.get("/agreement", dependencies=[AnyViewer], responses=READ_REFUSALS | {
    200: reply("the agreement coefficient with the units and ratings it was computed on", OBJECT),
    422: reply("fewer than two reviewers, a field agreement is not computed on, or an invalid parameter", PROBLEMS)})
def read_agreement(db: DbDep, viewer: Viewer, field: str, reviewers: str,
                   target: Literal["events", "papers"] = "events", trace_id: str | None = None):
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
    for label in annotations.list_labels(db, viewer, trace_id):
        if label["reviewer"] in names:
            ratings.setdefault((label["trace_id"], label["event_id"]), {})[label["reviewer"]] = label[field]
    return agreement(ratings, names, AGREEMENT_LEVELS[field])
