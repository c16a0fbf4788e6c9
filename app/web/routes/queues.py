"""JSON API of review queues: make one (admins), list them, a queue's progress, the caller's next item, a
reviewer's choice on a pair (pairwise queues), and an admin's final label or choice on an item the reviewers
disagreed on."""

from fastapi import APIRouter, HTTPException, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.domain.paging import MAX_OFFSET
from app.services import queues
from app.web.access import Admin, AnyViewer, Reviewer
from app.web.apidoc import (
    COUNT,
    FIELD_ERROR,
    INVALID,
    NOT_JSON,
    OBJECT,
    READ_REFUSALS,
    TEXT,
    WRITE_REFUSALS,
    json_body,
    object_schema,
    reply,
)
from app.web.browser import reviewer_of
from app.web.deps import DbDep, Viewer
from app.web.requests import json_object
from app.web.responses import JsonBody
from app.web.security import current_user

router = APIRouter(prefix="/api/queues", tags=["queues"])

QUEUE = object_schema({"id": TEXT, "name": TEXT, "items": COUNT, "done": COUNT, "by_reviewer": OBJECT,
                       "disputed": COUNT, "adjudicated": COUNT, "agreement": OBJECT},
                      "id", "name", "items", "done", "by_reviewer")
NO_QUEUE = {404: reply("no queue with this id")}


@router.post("", dependencies=[Admin], status_code=201, openapi_extra=json_body(
    '`{"name", "kind": "events" (default), "filter": {"trace_ids", "systems", "topologies", "tasks", "findings", '
    '"event_types", "roles", "agents", "tools", "subdecisions"} (all optional lists), "sample": {"n", "seed", '
    '"stratify_by"} (optional), "fields": [...], "required": [...], "reviewers": [...], "overlap": k, "blind": '
    'bool}`, or `{"name", "kind": "pairwise", "pairs": {"by", "keys", "per_group", "seed"} (all optional), '
    '"reviewers", "overlap", "blind", "show_rewards": bool}`'),
    responses=WRITE_REFUSALS | NOT_JSON | {201: reply("the queue with its progress", QUEUE),
                                           422: reply("a field is not valid (named in `field`)", FIELD_ERROR)})
async def create_queue(request: Request, db: DbDep):
    """Make a review queue: of events (a filter, an order or seeded sample, a rubric) or of pairs of rollouts
    sampled within groups (pairwise), with reviewers, overlap and blindness."""
    body = await json_object(request)
    user = current_user(request)
    return JsonBody(await run_in_threadpool(queues.create_queue, db, body, user.name if user else None),
                    status_code=201)


@router.get("", dependencies=[AnyViewer], responses=READ_REFUSALS | {200: reply(
    "every queue with its progress", object_schema({"queues": {"type": "array", "items": QUEUE}}, "queues"))})
def read_queues(db: DbDep, viewer: Viewer):
    return JsonBody({"queues": queues.list_all(db, viewer)})


@router.get("/{queue_id}", dependencies=[AnyViewer],
            responses=READ_REFUSALS | NO_QUEUE | {200: reply("the queue with its progress", QUEUE)})
def read_queue(queue_id: str, db: DbDep, viewer: Viewer):
    """The queue: its rubric, reviewers, items, done, labelled per reviewer, disputed, adjudicated, agreement
    (in a blind queue, a reviewer's figures count only the items they have labelled)."""
    return JsonBody(queues.summary(db, queue_id, viewer))


@router.get("/{queue_id}/items", dependencies=[AnyViewer], responses=READ_REFUSALS | NO_QUEUE | INVALID | {
    200: reply("every item in order (or a page of them, with `limit`): its event, labels by reviewer, done, "
               "disputed and the adjudication; `total`: the queue's items", OBJECT)})
def read_queue_items(queue_id: str, db: DbDep, viewer: Viewer,
                     limit: int | None = Query(None, ge=1, le=1000, description="items a page holds (all)"),
                     offset: int = Query(0, ge=0, le=MAX_OFFSET, description="items skipped (0)")):
    """Every item with its status and the labels (pairwise: the choices) the caller may see (blind: others' only
    once theirs is saved); a page of them with `limit` and `offset`."""
    listed, total = queues.item_page(db, queue_id, viewer, limit, offset)
    return JsonBody({"items": listed, "total": total})


def _caller(request: Request, reviewer: str | None) -> str:
    """The reviewer asking: the logged-in user; in open single-user mode, `reviewer` or the one picked."""
    me = reviewer_of(request) if current_user(request) else (reviewer or reviewer_of(request))
    if me is None:
        raise queues.QueueError("reviewer", "no reviewer: log in, or in open mode pass ?reviewer=NAME")
    return me


NEXT_ANSWERS = NO_QUEUE | {
    200: reply("the caller's next item: an event, or a pair of rollouts in a pairwise queue", object_schema(
        {"item_id": COUNT, "trace_id": TEXT, "event_id": TEXT, "group": TEXT, "trace_a": TEXT, "trace_b": TEXT},
        "item_id")),
    204: {"description": "nothing is left for the caller"},
    422: reply("the caller is not a reviewer of this queue (or no reviewer is known)", FIELD_ERROR)}


@router.post("/{queue_id}/next", dependencies=[Reviewer], responses=WRITE_REFUSALS | NEXT_ANSWERS)
async def take_next_item(queue_id: str, request: Request, db: DbDep, reviewer: str | None = None):
    """Give the caller their next item and keep it for them: the one given before and neither labelled nor
    skipped, else a new one, else the item they skipped longest ago. The caller is the logged-in user; in open
    single-user mode, `reviewer` (or the reviewer picked on the pages)."""
    item = await run_in_threadpool(queues.next_item, db, queue_id, _caller(request, reviewer))
    return Response(status_code=204) if item is None else JsonBody(item)


@router.get("/{queue_id}/next", dependencies=[AnyViewer], responses=READ_REFUSALS | NEXT_ANSWERS)
def read_next_item(queue_id: str, request: Request, db: DbDep, reviewer: str | None = None):
    """The item `POST .../next` would give the caller now, without keeping it for them (a read changes
    nothing: a link or an image elsewhere cannot take items for a reviewer)."""
    item = queues.peek_item(db, queue_id, _caller(request, reviewer))
    return Response(status_code=204) if item is None else JsonBody(item)


@router.post("/{queue_id}/items/{item_id}/skip", dependencies=[Reviewer], status_code=204,
             responses=WRITE_REFUSALS | NO_QUEUE | {
    204: {"description": "skipped: `next` gives it to the caller again after every other item"},
    404: reply("no queue with this id, or the item was not given to the caller"),
    422: reply("the caller is not a reviewer of this queue (or no reviewer is known)", FIELD_ERROR)})
async def skip_item(queue_id: str, item_id: int, request: Request, db: DbDep, reviewer: str | None = None):
    """Put an item given to the caller aside without labelling it."""
    await run_in_threadpool(queues.skip_item, db, queue_id, item_id, _caller(request, reviewer))
    return Response(status_code=204)


CHOICE = object_schema({"queue_id": TEXT, "item_id": COUNT, "reviewer": TEXT, "version": COUNT, "choice": TEXT,
                        "reason": TEXT, "deciding_event": {"type": ["object", "null"]}, "created_at": TEXT},
                       "queue_id", "item_id", "reviewer", "version", "choice")


@router.post("/{queue_id}/items/{item_id}/choice", dependencies=[Reviewer], status_code=201, openapi_extra=json_body(
    '`{"choice": "a" | "b" | "tie", "reason": text, "deciding_event": {"side": "a" | "b", "event_id"} (optional), '
    '"client_request_id" (optional)}`'), responses=WRITE_REFUSALS | NOT_JSON | {
        200: reply("a retried `client_request_id`: the version it made before", CHOICE),
        201: reply("the caller's new choice version", CHOICE),
        404: reply("no queue with this id, or no such item"),
        422: reply("a value is not valid, the queue is not pairwise, or the caller is not its reviewer", FIELD_ERROR)})
async def create_choice(queue_id: str, item_id: int, request: Request, db: DbDep, reviewer: str | None = None):
    """Save the caller's choice on a pair as their next version (append-only; the current is the highest)."""
    body = await json_object(request)
    choice, created = await run_in_threadpool(queues.save_choice, db, queue_id, item_id, _caller(request, reviewer),
                                              body)
    return JSONResponse(choice, status_code=201 if created else 200)


@router.post("/{queue_id}/items/{item_id}/adjudicate", dependencies=[Admin], status_code=201, openapi_extra=json_body(
    '`{"label": {field: value} (the rubric\'s fields; in a pairwise queue `{"choice", "reason", '
    '"deciding_event"}`), "note": text}`'),
    responses=WRITE_REFUSALS | NOT_JSON | NO_QUEUE | {
        201: reply("the item with its labels (or choices) and the adjudication", OBJECT),
        422: reply("a value is not valid, or no reviewer has answered the item", FIELD_ERROR)})
async def adjudicate_item(queue_id: str, item_id: int, request: Request, db: DbDep):
    """An admin's final label or choice on an item (kept beside the reviewers' answers, with which versions it
    resolved)."""
    body = await json_object(request)
    label, note = body.get("label"), body.get("note") or ""
    if not isinstance(label, dict) or not isinstance(note, str):
        raise HTTPException(422, "label must be an object of label fields (or a choice), and note text")
    user = current_user(request)
    adjudicator = user.name if user else (reviewer_of(request) or "admin")
    return JsonBody(await run_in_threadpool(queues.adjudicate, db, queue_id, item_id, adjudicator, label, note),
                    status_code=201)
