"""The ingest log: every receipt from exporters, uploads and the CLI, as JSON and as a page."""

from typing import Literal

from fastapi import APIRouter, HTTPException, Query, Request

from app.domain.paging import MAX_OFFSET, fetch_page
from app.store import ingest_log as log_store
from app.web.access import AnyViewer
from app.web.apidoc import COUNT, INVALID, OBJECT, READ_REFUSALS, TEXT, TEXTS, object_schema, reply
from app.web.deps import DbDep
from app.web.render import render
from app.web.responses import JsonBody

router = APIRouter(tags=["ingest log"])

ENTRIES_PER_PAGE = 50
API_TRACES_SHOWN = log_store.LISTED  # traces named per list of a receipt in the list API (100); its own route names all
PAGE_TRACES_SHOWN = 5  # and on the page, with a link to that route
Outcome = Literal[log_store.OUTCOMES]


RECEIPT = object_schema({
    "id": TEXT, "received_at": TEXT, "endpoint": TEXT, "format": TEXT, "unit": TEXT, "received": COUNT,
    "used": COUNT, "duplicates": COUNT, "skipped": COUNT, "reasons": {"type": "array", "items": OBJECT},
    "created": TEXTS, "extended": TEXTS, "repeated": TEXTS, "created_count": COUNT, "extended_count": COUNT,
    "repeated_count": COUNT, "status": {"type": "integer"}, "error": {"type": ["string", "null"]},
    "outcome": {"enum": list(log_store.OUTCOMES)}},
    "id", "received_at", "endpoint", "status", "outcome")


@router.get("/api/ingest-log", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: reply("one page of receipts, newest first, and how many match",
               object_schema({"items": {"type": "array", "items": RECEIPT}, "total": COUNT}, "items", "total"))})
def read_ingest_log(db: DbDep, endpoint: str | None = None, trace_id: str | None = None,
                    outcome: Outcome | None = Query(None, description=(
                        "ok (every item used, or repeats), partial (some skipped) or refused (refused whole)")),
                    limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0, le=MAX_OFFSET)):
    """Receipts, newest first: what came, what was used, duplicates, what was skipped and why; each names at most
    100 traces per list (`created_count` and the others say how many in all: the receipt's route names every one)."""
    items, total = log_store.list_ingest_log(db, limit, offset, endpoint, trace_id, outcome, API_TRACES_SHOWN)
    return JsonBody({"items": items, "total": total})  # JSON values already: no encoder walks thousands of ids


@router.get("/api/ingest-log/{receipt_id}", dependencies=[AnyViewer], responses=READ_REFUSALS | {
    200: reply("the receipt, naming every trace", RECEIPT), 404: reply("no receipt with this id")})
def read_receipt(receipt_id: str, db: DbDep):
    """One receipt whole: every trace it created, extended or repeated."""
    receipt = log_store.read_receipt(db, receipt_id)
    if receipt is None:
        raise HTTPException(404, f"no receipt with id '{receipt_id}'")
    return JsonBody(receipt)


@router.get("/ingest-log", dependencies=[AnyViewer], include_in_schema=False)
def read_ingest_log_page(request: Request, db: DbDep, endpoint: str | None = None, trace_id: str | None = None,
                         outcome: str | None = None, page: int = 1):
    """The receipts, newest first, a page at a time; each names its first few traces per list and links the rest."""
    outcome = outcome if outcome in log_store.OUTCOMES else None
    (rows, total, page, pages), endpoints = db.together(  # side by side on a lake
        lambda: fetch_page(page, ENTRIES_PER_PAGE, lambda limit, offset: log_store.list_ingest_log(
            db, limit, offset, endpoint or None, trace_id or None, outcome, PAGE_TRACES_SHOWN)),
        lambda: log_store.ingest_endpoints(db))
    return render(request, "ingest_log.html", {
        "rows": rows, "total": total, "page": page, "pages": pages, "outcomes": log_store.OUTCOMES,
        "filters": {"endpoint": endpoint or "", "trace_id": trace_id or "", "outcome": outcome or ""},
        "endpoints": endpoints}, fragments=("_ingest_log.html",))
