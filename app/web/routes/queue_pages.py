"""HTML pages of review queues: the list with the form that makes one (admins), a queue's progress with its
disputed items and their adjudication, and the review workspace, where a reviewer labels their items one after
another: Enter saves once and swaps in the next item, `s` skips, without a page load."""

from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.domain.label_fields import FIELDS, LabelError, clean_values
from app.domain.refusals import NotFound
from app.domain.taxonomy import EVENT_TYPES, SUBDECISIONS
from app.services import accounts, labels, queues
from app.store import labels as label_store
from app.store import queues as queue_store
from app.store import traces as trace_store
from app.web.access import Admin, AnyViewer, Reviewer
from app.web.browser import require_csrf, reviewer_of
from app.web.deps import DbDep, Viewer
from app.web.event_view import event_view
from app.web.label_form import FORM_TAG_SEPARATOR, form_values, label_context
from app.web.render import render
from app.web.security import current_user

router = APIRouter(include_in_schema=False)


def _form_context(db, request: Request) -> dict:
    facets = trace_store.trace_facets(db)
    names = ([u["username"] for u in accounts.list_users(db) if u["role"] != "viewer" and not u["disabled"]]
             if not request.state.open_mode else labels.reviewers(db))
    return {"facets": facets, "event_types": EVENT_TYPES, "subdecisions": SUBDECISIONS,
            "fields": [f.name for f in FIELDS], "default_fields": queues.DEFAULT_FIELDS, "strata": queues.STRATA,
            "people": names}


@router.get("/queues", dependencies=[AnyViewer])
def read_queues_page(request: Request, db: DbDep, viewer: Viewer):
    return render(request, "queues.html", {"queues": queues.list_all(db, viewer), **_form_context(db, request)})


def _words(value: str) -> list[str]:
    return [word.strip() for word in value.replace("\n", ",").split(",") if word.strip()]


@router.post("/queues", dependencies=[Admin, Depends(require_csrf)])
async def create_queue_from_form(request: Request, db: DbDep, viewer: Viewer):
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
        context = {"queues": queues.list_all(db, viewer), "error": str(exc), "asked": body,
                   **_form_context(db, request)}
        return render(request, "queues.html", context, status_code=422)
    return RedirectResponse(f"/queues/{quote(queue['id'])}", status_code=303)


@router.get("/queues/{queue_id}", dependencies=[AnyViewer])
def read_queue_page(request: Request, queue_id: str, db: DbDep, viewer: Viewer):
    queue = queues.summary(db, queue_id, viewer)
    items = queues.items(db, queue_id, viewer)
    return render(request, "queue_detail.html", {
        "queue": queue, "items": items, "me": viewer, "fields": [f for f in FIELDS if f.name in queue["fields"]],
        "disputed": [item for item in items if item["disputed"]]})


@router.get("/queues/{queue_id}/next", dependencies=[AnyViewer])
def open_next_item(queue_id: str):
    """Where "Label my next item" used to lead: the review workspace (a GET keeps no item for anyone)."""
    return RedirectResponse(f"/queues/{quote(queue_id)}/review", status_code=303)


@router.get("/queues/{queue_id}/review", dependencies=[AnyViewer])
def read_review_page(request: Request, queue_id: str, db: DbDep, viewer: Viewer):
    """The review workspace; its first item is taken by a POST the page sends as it loads."""
    if viewer is None:
        return RedirectResponse(f"/reviewer?next={quote(request.url.path)}", status_code=303)
    queue = queues.load(db, queue_id)
    return render(request, "queue_review.html", {"queue": queue, "me": viewer,
                                                 "is_reviewer": viewer in queue["reviewers"]})


def _workspace(request: Request, db, queue_id: str, reviewer: str, item: dict | None, **extra):
    """The workspace fragment for `item` (None: nothing left), with the reviewer's progress in the queue."""
    queue = queues.load(db, queue_id)
    context = {"queue": queue, "me": reviewer, "item": item, **extra,
               "queue_progress": label_store.queue_progress(db, queue_id, reviewer)}
    if item is not None:
        action = f"/queues/{quote(queue_id)}/items/{item['item_id']}/label"
        context |= event_view(db, item["trace_id"], item["event_id"])
        event_type = context["selected"]["event"]["type"] if context["selected"] else None
        context |= label_context(db, item["trace_id"], item["event_id"], reviewer, queue_id, event_type,
                                 workspace=True, workspace_action=action,
                                 **{k: v for k, v in extra.items() if k.startswith("status")})
        if "draft" in extra:  # a refused save shows the form as the reviewer left it
            context["label"] = (context["label"] or {"version": 0}) | extra["draft"]
    return render(request, "_queue_workspace.html", context, status_code=extra.get("status_code", 200))


def _caller(request: Request) -> str:
    me = reviewer_of(request)
    if me is None:
        raise queues.QueueError("reviewer", "pick a reviewer name first")
    return me


@router.post("/queues/{queue_id}/review/next", dependencies=[Reviewer, Depends(require_csrf)])
async def take_next_item(request: Request, queue_id: str, db: DbDep):
    """Take the reviewer's next item and answer with its workspace."""
    me = _caller(request)
    item = await run_in_threadpool(queues.next_item, db, queue_id, me)
    return _workspace(request, db, queue_id, me, item)


@router.post("/queues/{queue_id}/items/{item_id}/label", dependencies=[Reviewer, Depends(require_csrf)])
async def save_and_next(request: Request, queue_id: str, item_id: int, db: DbDep):
    """Save the label once (a retried request id saves nothing more) and answer with the next item; a refusal
    answers with the same item, its form as the reviewer left it and what is missing. `action=skip` saves
    nothing and moves on; the item comes back after every other."""
    me = _caller(request)
    form = await request.form()
    item = queue_store.queue_item(db, queue_id, item_id)
    if item is None:
        raise NotFound(f"queue '{queue_id}' has no item {item_id}")
    saved = None
    if form.get("action") == "skip":
        await run_in_threadpool(queues.skip_item, db, queue_id, item_id, me)
    else:
        data = {"trace_id": item["trace_id"], "event_id": item["event_id"], "reviewer": me, "queue_id": queue_id,
                "client_request_id": form.get("client_request_id") or None}
        mine: dict = {}
        try:
            mine = form_values(form)
            saved, _ = await run_in_threadpool(labels.save_label, db, data | mine)
        except (LabelError, queues.QueueError) as exc:
            return _workspace(request, db, queue_id, me, item, status=str(exc), status_code=422, draft=mine)
    following = await run_in_threadpool(queues.next_item, db, queue_id, me)
    return _workspace(request, db, queue_id, me, following,
                      just_saved=None if saved is None else {
                          "item_id": item_id, "version": saved["version"],
                          "others": labels.others_on_event(db, me, item["trace_id"], item["event_id"])},
                      just_skipped=item_id if saved is None else None)


@router.post("/queues/{queue_id}/items/{item_id}/adjudicate", dependencies=[Admin, Depends(require_csrf)])
async def adjudicate_from_form(request: Request, queue_id: str, item_id: int, db: DbDep):
    form = await request.form()
    queue = queues.load(db, queue_id)
    raw = {f.name: f.from_text(form.get(f.name) if isinstance(form.get(f.name), str) else None, FORM_TAG_SEPARATOR)
           for f in FIELDS if f.name in queue["fields"] and (f.name in form or f.kind == "flag")}
    user = current_user(request)
    adjudicator = user.name if user else (reviewer_of(request) or "admin")
    await run_in_threadpool(queues.adjudicate, db, queue_id, item_id, adjudicator, clean_values(raw),
                            form.get("reason") or "")
    return RedirectResponse(f"/queues/{quote(queue_id)}#item-{item_id}", status_code=303)
