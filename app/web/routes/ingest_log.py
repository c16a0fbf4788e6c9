"""The ingest log: every receipt from exporters, uploads and the CLI, as JSON and as a page."""

from fastapi import APIRouter, Query, Request

from app.domain.paging import MAX_OFFSET, fetch_page
from app.store import ingest_log as log_store
from app.web.access import AnyViewer
from app.web.apidoc import COUNT, INVALID, OBJECT, READ_REFUSALS, TEXT, TEXTS, object_schema, reply
from app.web.deps import DbDep
from app.web.render import render

router = APIRouter(tags=["ingest log"])

ENTRIES_PER_PAGE = 50


RECEIPT = object_schema({
    "id": TEXT, "received_at": TEXT, "endpoint": TEXT, "format": TEXT, "unit": TEXT, "received": COUNT,
    "used": COUNT, "duplicates": COUNT, "skipped": COUNT, "reasons": {"type": "array", "items": OBJECT},
    "created": TEXTS, "extended": TEXTS, "repeated": TEXTS, "status": {"type": "integer"}, "error": {"type": ["string", "null"]}},
    "id", "received_at", "endpoint", "status")


@router.get("/api/ingest-log", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: reply("one page of receipts, newest first, and how many match",
               object_schema({"items": {"type": "array", "items": RECEIPT}, "total": COUNT}, "items", "total"))})
def read_ingest_log(db: DbDep, endpoint: str | None = None, trace_id: str | None = None,
                    limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0, le=MAX_OFFSET)):
    """Receipts, newest first: what came, what was used, duplicates, what was skipped and why."""
    items, total = log_store.list_ingest_log(db, limit, offset, endpoint, trace_id)
    return {"items": items, "total": total}


@router.get("/ingest-log", dependencies=[AnyViewer], include_in_schema=False)
def read_ingest_log_page(request: Request, db: DbDep, endpoint: str | None = None, trace_id: str | None = None,
                         page: int = 1):
    rows, total, page, pages = fetch_page(
        page, ENTRIES_PER_PAGE, lambda limit, offset: log_store.list_ingest_log(db, limit, offset, endpoint, trace_id))
    return render(request, "ingest_log.html", {"rows": rows, "total": total, "page": page, "pages": pages,
                                               "filters": {"endpoint": endpoint or "", "trace_id": trace_id or ""},
                                               "endpoints": log_store.ingest_endpoints(db)})
