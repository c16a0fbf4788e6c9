"""HTML pages of review queues: the list with the forms that make one (admins), a queue's progress with its
disputed items and their adjudication, and the review workspace, where a reviewer labels their items (or, in a
pairwise queue, chooses the better of two rollouts) one after another: Enter saves once and swaps in the next
item, `s` skips, without a page load."""

import uuid
from urllib.parse import quote

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.domain.label_fields import FIELDS, LabelError, clean_values
from app.domain.preference import CHOICES, ChoiceError
from app.domain.refusals import NotFound
from app.domain.taxonomy import EVENT_TYPES, SUBDECISIONS
from app.services import accounts, labels, queues
from app.store import choices as choice_store
from app.store import groups as group_store
from app.store import labels as label_store
from app.store import queues as queue_store
from app.web.access import Admin, AnyViewer, Reviewer
from app.web.browser import require_csrf, reviewer_of
from app.web.deps import CacheDep, CorpusDep, DbDep, Viewer
from app.web.event_view import event_view
from app.web.label_form import FORM_TAG_SEPARATOR, form_values, label_context
from app.web.render import render
from app.web.security import current_user

router = APIRouter(include_in_schema=False)
SHOWN_ITEMS = 500  # a queue's items its page lists; the API pages them all


def _form_context(db, facts, request: Request) -> dict:
    facets = facts.trace_facets()
    names = ([u["username"] for u in accounts.list_users(db) if u["role"] != "viewer" and not u["disabled"]]
             if not request.state.open_mode else labels.reviewers(db))
    return {"facets": facets, "event_types": EVENT_TYPES, "subdecisions": SUBDECISIONS,
            "fields": [f.name for f in FIELDS], "default_fields": queues.DEFAULT_FIELDS, "strata": queues.STRATA,
            "people": names, "group_by": group_store.GROUP_BY}


@router.get("/queues", dependencies=[AnyViewer])
def read_queues_page(request: Request, db: DbDep, facts: CorpusDep, viewer: Viewer):
    return render(request, "queues.html", {"queues": queues.list_all(db, viewer), **_form_context(db, facts, request)})


def _words(value: str) -> list[str]:
    return [word.strip() for word in value.replace("\n", ",").split(",") if word.strip()]


def _number(text: str | None, default: int) -> int:
    """A whole number typed in a form; what is not one is -1, which every check refuses by name."""
    text = (text or "").strip()
    return default if not text else int(text) if text.lstrip("-").isdigit() else -1


@router.post("/queues", dependencies=[Admin, Depends(require_csrf)])
async def create_queue_from_form(request: Request, db: DbDep, facts: CorpusDep, viewer: Viewer):
    """Make a queue from either form (`kind`); a refusal shows the forms again with the message."""
    form = await request.form()
    people = {"name": form.get("name") or "", "overlap": _number(form.get("overlap"), 1),
              "reviewers": form.getlist("reviewers") + _words(form.get("more_reviewers") or ""),
              "blind": form.get("blind") == "on"}
    if form.get("kind") == "pairwise":
        body = people | {"kind": "pairwise", "show_rewards": form.get("show_rewards") == "on", "pairs": {
            "by": form.get("by") or queues.DEFAULT_GROUP_BY, "keys": _words(form.get("keys") or ""),
            "per_group": _number(form.get("per_group"), 1), "seed": _number(form.get("seed"), 0)}}
    else:
        flt = {key: [v for v in form.getlist(key) if v]
               for key in ("systems", "topologies", "event_types", "subdecisions")}
        flt |= {key: _words(form.get(key) or "") for key in ("roles", "agents", "tools", "trace_ids")}
        body = people | {"filter": flt, "fields": form.getlist("fields"), "required": form.getlist("required")}
        if (form.get("sample_n") or "").strip():
            body["sample"] = {"n": _number(form.get("sample_n"), 0), "seed": _number(form.get("sample_seed"), 0),
                              "stratify_by": form.get("stratify_by") or None}
    user = current_user(request)
    try:
        queue = await run_in_threadpool(queues.create_queue, db, body, user.name if user else None)
    except queues.QueueError as exc:
        context = {"queues": queues.list_all(db, viewer), "error": str(exc), "asked": body,
                   **_form_context(db, facts, request)}
        return render(request, "queues.html", context, status_code=422)
    return RedirectResponse(f"/queues/{quote(queue['id'])}", status_code=303)


@router.get("/queues/{queue_id}", dependencies=[AnyViewer])
def read_queue_page(request: Request, queue_id: str, db: DbDep, viewer: Viewer):
    """A queue's progress, its disputed items with the adjudication form (admins) and its first SHOWN_ITEMS items."""
    view = queues.with_items(db, queue_id, viewer, SHOWN_ITEMS)
    return render(request, "queue_detail.html", {
        "queue": view.summary, "items": view.items, "total": view.total, "disputed": view.disputed, "me": viewer,
        "choices": CHOICES, "fields": [f for f in FIELDS if f.name in view.summary.get("fields", ())]})


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


def _workspace(request: Request, db, cache, queue_id: str, reviewer: str, item: dict | None, **extra):
    """The workspace fragment for `item` (None: nothing left), with the reviewer's progress in the queue."""
    queue = queues.load(db, queue_id)
    context = {"queue": queue, "me": reviewer, "item": item, **extra}
    if queue["kind"] == "pairwise":
        context["queue_progress"] = choice_store.choice_progress(db, queue_id, reviewer)
        if item is not None:
            context |= {"rollouts": queues.pair_rollouts(db, cache, queue, item), "choices": CHOICES,
                        "action": f"/queues/{quote(queue_id)}/items/{item['item_id']}/choice",
                        "request_id": uuid.uuid4().hex}
        return render(request, "_queue_workspace.html", context, status_code=extra.get("status_code", 200))
    context["queue_progress"] = label_store.queue_progress(db, queue_id, reviewer)
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
async def take_next_item(request: Request, queue_id: str, db: DbDep, cache: CacheDep):
    """Take the reviewer's next item and answer with its workspace."""
    me = _caller(request)
    item = await run_in_threadpool(queues.next_item, db, queue_id, me)
    return _workspace(request, db, cache, queue_id, me, item)


@router.post("/queues/{queue_id}/items/{item_id}/label", dependencies=[Reviewer, Depends(require_csrf)])
async def save_and_next(request: Request, queue_id: str, item_id: int, db: DbDep, cache: CacheDep):
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
            return _workspace(request, db, cache, queue_id, me, item, status=str(exc), status_code=422, draft=mine)
    following = await run_in_threadpool(queues.next_item, db, queue_id, me)
    return _workspace(request, db, cache, queue_id, me, following,
                      just_saved=None if saved is None else {
                          "item_id": item_id, "version": saved["version"],
                          "others": labels.others_on_event(db, me, item["trace_id"], item["event_id"])},
                      just_skipped=item_id if saved is None else None)


@router.post("/queues/{queue_id}/items/{item_id}/choice", dependencies=[Reviewer, Depends(require_csrf)])
async def choose_and_next(request: Request, queue_id: str, item_id: int, db: DbDep, cache: CacheDep):
    """Save the reviewer's choice on a pair once (a retried request id saves nothing more) and answer with the
    next pair; a refusal answers with the same pair, the form as the reviewer left it and what is wrong.
    `action=skip` saves nothing and moves on; the pair comes back after every other."""
    me = _caller(request)
    form = await request.form()
    item = queue_store.queue_item(db, queue_id, item_id, "pairwise")
    if item is None:
        raise NotFound(f"queue '{queue_id}' has no pair {item_id}")
    saved = None
    if form.get("action") == "skip":
        await run_in_threadpool(queues.skip_item, db, queue_id, item_id, me)
    else:
        draft = {"choice": form.get("choice"), "reason": form.get("reason") or "",
                 "deciding_event": {"side": form.get("deciding_side") or None, "event_id": form.get("deciding_event")}
                 if (form.get("deciding_event") or "").strip() else None,
                 "client_request_id": form.get("client_request_id") or None}
        try:
            saved, _ = await run_in_threadpool(queues.save_choice, db, queue_id, item_id, me, draft)
        except (ChoiceError, queues.QueueError) as exc:
            return _workspace(request, db, cache, queue_id, me, item, status=str(exc), status_code=422, draft=draft)
    following = await run_in_threadpool(queues.next_item, db, queue_id, me)
    others = None
    if saved is not None:
        state = queues.states_of(db, [queues.load(db, queue_id)], me)[queue_id].get(item_id, {"choices": {}})
        others = {reviewer: choice for reviewer, choice in state["choices"].items() if reviewer != me}
    return _workspace(request, db, cache, queue_id, me, following,
                      just_saved=None if saved is None else {"item_id": item_id, "version": saved["version"],
                                                             "choice": saved["choice"], "others": others},
                      just_skipped=item_id if saved is None else None)


@router.post("/queues/{queue_id}/items/{item_id}/adjudicate", dependencies=[Admin, Depends(require_csrf)])
async def adjudicate_from_form(request: Request, queue_id: str, item_id: int, db: DbDep):
    form = await request.form()
    queue = queues.load(db, queue_id)
    if queue["kind"] == "pairwise":
        label = {"choice": form.get("choice")}
    else:
        raw = {f.name: f.from_text(form.get(f.name) if isinstance(form.get(f.name), str) else None,
                                   FORM_TAG_SEPARATOR)
               for f in FIELDS if f.name in queue["fields"] and (f.name in form or f.kind == "flag")}
        label = clean_values(raw)
    user = current_user(request)
    adjudicator = user.name if user else (reviewer_of(request) or "admin")
    await run_in_threadpool(queues.adjudicate, db, queue_id, item_id, adjudicator, label, form.get("reason") or "")
    return RedirectResponse(f"/queues/{quote(queue_id)}#item-{item_id}", status_code=303)
