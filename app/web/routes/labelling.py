"""HTML pages of labelling: reviewer identity, the label form of the inspector, label history,
the labels list with exports, and per-trace reviewer agreement."""


from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.domain.agreement import agreement
from app.domain.label_fields import AGREEMENT_LEVELS, NAMES, LabelError
from app.domain.paging import fetch_page
from app.domain.taxonomy import REWARD_FAMILIES
from app.services import labels as annotations
from app.services import queues
from app.store import labels as label_store
from app.store import traces as trace_store
from app.web.access import AnyViewer, Reviewer, may_call
from app.web.browser import COOKIE_MAX_AGE_S, REVIEWER_COOKIE, local_url, require_csrf, reviewer_of
from app.web.deps import DbDep, TraceId, Viewer
from app.web.label_form import form_values, label_context
from app.web.render import render

router = APIRouter(include_in_schema=False)
DISAGREEMENT_ROWS = 50
LABELS_PER_PAGE = 50
LABEL_IMPORT = ("POST", "/api/annotations/import")  # where the labels page's import form posts


def form_base_version(form) -> int | None:
    """The version the form edited (none for a first save); text that is not a whole number is a field
    error shown in the form, not a 500."""
    base = form.get("base_version")
    if base is None or base == "":
        return None
    try:
        return int(base)
    except (TypeError, ValueError):  # an uploaded file, or text such as "abc"
        message = f"{base!r} is not a whole number (0 for a first label)"
        raise LabelError("base_version", message) from None


@router.post("/traces/{trace_id}/events/{event_id}/label", dependencies=[Reviewer, Depends(require_csrf)])
async def save_label_form(request: Request, trace_id: str, event_id: str, db: DbDep):
    """Save, clear or undo from the inspector's form; answers with the form showing the outcome."""
    form = await request.form()
    reviewer = reviewer_of(request)
    queue_id = form.get("queue_id") or None
    status, code, conflict, mine = None, 200, None, None
    try:
        if reviewer is None:
            raise LabelError("reviewer", "pick a reviewer name first (top right)")
        data = {"trace_id": trace_id, "event_id": event_id, "reviewer": reviewer,
                "base_version": form_base_version(form),
                "client_request_id": form.get("client_request_id") or None, "queue_id": queue_id}
        action = form.get("action", "save")
        if action == "clear":
            label, _ = await run_in_threadpool(annotations.clear_label, db, data)
            status = f"cleared (v{label['version']})"
        elif action == "undo":
            label, _ = await run_in_threadpool(annotations.undo_label, db, data)
            restored = label["version"] - 2
            status = f"undone: v{label['version']} restores " + (f"v{restored}" if restored else "the empty label")
        else:
            mine = form_values(form)
            label, created = await run_in_threadpool(annotations.save_label, db, data | mine)
            status = f"saved v{label['version']}" if created else f"already saved v{label['version']}"
    except (LabelError, queues.QueueError) as exc:
        status, code = str(exc), 422
    except annotations.StaleVersion as exc:
        status, code, conflict = str(exc), 409, {"current": exc.current, "mine": mine}
    except annotations.NotFound as exc:
        status, code = str(exc), 404
    context = await run_in_threadpool(label_context, db, trace_id, event_id, reviewer, queue_id, status=status,
                                      status_code=code, conflict=conflict, oob=True)
    return render(request, "_label_form.html", context, status_code=code)


@router.get("/traces/{trace_id}/events/{event_id}/history", dependencies=[AnyViewer])
def read_label_history(request: Request, trace_id: str, event_id: str, db: DbDep, viewer: Viewer):
    """Every version of every reviewer's label on an event (that the reviewer may see), with what each one
    changed."""
    versions = annotations.list_labels(db, viewer, trace_id, event_id, None, history=True)
    previous: dict[str, dict] = {}
    rows = []
    for version in versions:
        before = previous.get(version["reviewer"], annotations.EMPTY_LABEL)
        changed = [f for f in NAMES if version[f] != before[f]]
        rows.append({"label": version, "changed": changed})
        previous[version["reviewer"]] = version
    return render(request, "_label_history.html", {"rows": rows, "event_id": event_id, "trace_id": trace_id})


@router.get("/reviewer", dependencies=[AnyViewer])
def read_reviewer_page(request: Request, db: DbDep, next: str = "/"):
    """Pick a reviewer name: open single-user mode only; with accounts, you label as yourself."""
    if not request.state.open_mode:
        return RedirectResponse("/account", status_code=303)
    return render(request, "reviewer.html", {"names": annotations.reviewers(db), "next": local_url(next)})


@router.post("/reviewer", dependencies=[Reviewer, Depends(require_csrf)])
async def set_reviewer(request: Request, db: DbDep):
    """Remember the reviewer name in a cookie (created in the reviewer list on first use)."""
    if not request.state.open_mode:
        raise HTTPException(409, "this server has accounts: labels are saved under the name you logged in with")
    form = await request.form()
    raw = (form.get("new_name") or "").strip() or (form.get("name") or "")
    next_url = local_url(form.get("next") or "/")
    try:
        name = annotations.add_reviewer(db, raw)
    except LabelError as exc:
        context = {"names": annotations.reviewers(db), "next": next_url, "error": str(exc)}
        return render(request, "reviewer.html", context, status_code=422)
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(REVIEWER_COOKIE, name, max_age=COOKIE_MAX_AGE_S, samesite="strict")
    return response


@router.get("/annotations", dependencies=[AnyViewer])
def read_labels_page(request: Request, db: DbDep, viewer: Viewer, trace_id: str | None = None,
                     reviewer: str | None = None, reward_family: str | None = None, history: bool = False,
                     page: int = 1):
    """Labels across traces, a page at a time, with filters, exports and the import form."""
    filters = {"trace_id": trace_id or "", "reviewer": reviewer or "", "reward_family": reward_family or ""}
    (rows, total, page, pages), names, traces, orphans = db.together(  # side by side on a lake
        lambda: fetch_page(page, LABELS_PER_PAGE, lambda limit, offset: label_store.read_labels_page(
            db, viewer, filters, history, limit, offset)),
        lambda: annotations.reviewers(db), lambda: label_store.traces_with_labels(db, viewer),
        lambda: label_store.orphaned_labels(db, viewer, trace_id or None))
    context = {"labels": [annotations.to_dict(annotations.LabelRow._make(row)) for row in rows], "total": total,
               "page": page, "pages": pages, "filters": filters | {"history": history}, "names": names,
               "reward_families": REWARD_FAMILIES, "traces": traces, "orphans": orphans,
               "import_url": LABEL_IMPORT[1], "may_import": may_post(request, *LABEL_IMPORT)}
    return render(request, "annotations.html", context, fragments=("_labels_table.html",))


def may_post(request: Request, method: str, path: str) -> bool:
    """Whether this browser may send that request: what its route declares (app.web.access) lets the caller call
    it (so a form is shown only to those whose post would not be refused)."""
    return may_call(request, method, path)


@router.get("/traces/{trace_id}/agreement", dependencies=[AnyViewer])
def read_agreement_page(request: Request, trace_id: TraceId, db: DbDep, viewer: Viewer, reviewers: str | None = None):
    """Agreement per field among the trace's reviewers, and the events they disagree on most (as far as the
    reviewer asking may see their labels)."""
    summary = trace_store.read_trace_summary(db, trace_id)
    labels = annotations.list_labels(db, viewer, trace_id)
    everyone = sorted({label["reviewer"] for label in labels})
    chosen = [r for r in (reviewers.split(",") if reviewers else everyone) if r in everyone]
    by_event: dict[str, dict] = {}
    for label in labels:
        if label["reviewer"] in chosen:
            by_event.setdefault(label["event_id"], {})[label["reviewer"]] = label
    fields = {}
    for field, level in AGREEMENT_LEVELS.items():
        ratings = {event: {r: lab[field] for r, lab in labs.items()} for event, labs in by_event.items()}
        fields[field] = agreement(ratings, chosen, level) if len(chosen) >= 2 else None
    return render(request, "agreement.html", {"trace": summary, "reviewers": everyone, "chosen": chosen,
                                              "fields": fields, "disagreements": disagreements(by_event)})


def disagreements(by_event: dict[str, dict]) -> list[dict]:
    """Events labelled by two or more reviewers, most disputed first (credit spread, then differing tags)."""
    rows = []
    for event_id, labs in by_event.items():
        if len(labs) < 2:
            continue
        credits = [lab["credit"] for lab in labs.values() if lab["credit"] is not None]
        spread = max(credits) - min(credits) if len(credits) >= 2 else 0.0
        differing = [f for f, level in AGREEMENT_LEVELS.items()
                     if level == "nominal" and len({lab[f] for lab in labs.values()}) > 1]
        if spread or differing:
            rows.append({"event_id": event_id, "spread": spread, "differing": differing, "labels": labs})
    rows.sort(key=lambda row: (-row["spread"], -len(row["differing"]), row["event_id"]))
    return rows[:DISAGREEMENT_ROWS]
