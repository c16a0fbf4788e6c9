"""HTML pages of review queues: the list with the form that makes one (admins), a queue's progress with its
disputed items and their adjudication, and `next`, which opens the caller's next item on the trace page."""

from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.domain.taxonomy import COUNTERFACTUAL_ANSWERS, EVENT_TYPES, LABEL_FIELDS, STOP_ANSWERS, SUBDECISIONS
from app.services import accounts, labels, queues
from app.store import queries
from app.web.browser import require_csrf, reviewer_of
from app.web.deps import DbDep
from app.web.render import render
from app.web.security import current_user

router = APIRouter(include_in_schema=False)
LIST_KEYS = ("systems", "topologies", "event_types", "subdecisions", "roles", "agents", "tools", "trace_ids")


def _form_context(db, request: Request) -> dict:
    facets = queries.trace_facets(db)
    names = ([u["username"] for u in accounts.list_users(db) if u["role"] != "viewer"]
             if not request.state.open_mode else labels.reviewers(db))
    return {"facets": facets, "event_types": EVENT_TYPES, "subdecisions": SUBDECISIONS, "fields": LABEL_FIELDS,
            "default_fields": queues.DEFAULT_FIELDS, "strata": queues.STRATA, "people": names}


@router.get("/queues")
def read_queues_page(request: Request, db: DbDep):
    return render(request, "queues.html", {"queues": queues.list_all(db), **_form_context(db, request)})


def _number(text: str):
    """A form's number, or its text (refused by the label rules, naming the field), or None when empty."""
    try:
        return float(text) if text.strip() else None
    except ValueError:
        return text


def _words(value: str) -> list[str]:
    return [word.strip() for word in value.replace("\n", ",").split(",") if word.strip()]


@router.post("/queues", dependencies=[Depends(require_csrf)])
async def create_queue_from_form(request: Request, db: DbDep):
    """Make a queue from the form; a refusal shows the form again with the message."""
    form = await request.form()
    flt = {key: [v for v in form.getlist(key) if v] for key in ("systems", "topologies", "event_types", "subdecisions")}
    flt |= {key: _words(form.get(key) or "") for key in ("roles", "agents", "tools", "trace_ids")}
    body = {"name": form.get("name") or "", "filter": flt, "fields": form.getlist("fields"),
            "required": form.getlist("required"), "reviewers": form.getlist("reviewers") + _words(
                form.get("more_reviewers") or ""),
            "overlap": int(form.get("overlap") or 1) if (form.get("overlap") or "1").isdigit() else -1,
            "blind": form.get("blind") == "on"}
    if (form.get("sample_n") or "").strip():
        n, seed = form.get("sample_n").strip(), (form.get("sample_seed") or "0").strip()
        body["sample"] = {"n": int(n) if n.isdigit() else 0, "seed": int(seed) if seed.lstrip("-").isdigit() else 0,
                          "stratify_by": form.get("stratify_by") or None}
    user = current_user(request)
    try:
        queue = await run_in_threadpool(queues.create_queue, db, body, user.name if user else None)
    except queues.QueueError as exc:
        context = {"queues": queues.list_all(db), "error": str(exc), "asked": body, **_form_context(db, request)}
        return render(request, "queues.html", context, status_code=422)
    return RedirectResponse(f"/queues/{quote(queue['id'])}", status_code=303)


@router.get("/queues/{queue_id}")
def read_queue_page(request: Request, queue_id: str, db: DbDep):
    queue = queues.summary(db, queue_id)
    items = queues.items(db, queue_id)
    me = reviewer_of(request)
    return render(request, "queue_detail.html", {
        "queue": queue, "items": items, "me": me, "answers": {"counterfactual": COUNTERFACTUAL_ANSWERS,
                                                              "stop": STOP_ANSWERS},
        "disputed": [item for item in items if item["disputed"]]})


@router.get("/queues/{queue_id}/next")
def open_next_item(request: Request, queue_id: str, db: DbDep):
    """Open the caller's next item on the trace page, in queue mode; back to the queue when none is left."""
    me = reviewer_of(request)
    if me is None:
        return RedirectResponse(f"/reviewer?next={quote(request.url.path)}", status_code=303)
    item = queues.next_item(db, queue_id, me)
    if item is None:
        return RedirectResponse(f"/queues/{quote(queue_id)}?finished=1", status_code=303)
    return RedirectResponse(f"/traces/{quote(item['trace_id'], safe='')}?event={quote(item['event_id'], safe='')}"
                            f"&queue={quote(queue_id)}", status_code=303)


@router.post("/queues/{queue_id}/items/{item_id}/adjudicate", dependencies=[Depends(require_csrf)])
async def adjudicate_from_form(request: Request, queue_id: str, item_id: int, db: DbDep):
    form = await request.form()
    queue = queues.load(db, queue_id)
    raw = {field: form.get(field) for field in queue["fields"] if field in form}
    if "credit" in raw:
        raw["credit"] = _number(raw["credit"] or "")
    if "safety" in queue["fields"]:
        raw["safety"] = form.get("safety") == "on"
    if "tags" in raw:
        raw["tags"] = _words(raw["tags"] or "")
    user = current_user(request)
    adjudicator = user.name if user else (reviewer_of(request) or "admin")
    await run_in_threadpool(queues.adjudicate, db, queue_id, item_id, adjudicator, labels.clean_values(raw),
                            form.get("reason") or "")
    return RedirectResponse(f"/queues/{quote(queue_id)}#item-{item_id}", status_code=303)
