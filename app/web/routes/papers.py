"""JSON API of the paper pool: import, export, statistics, reviewer tags."""

from typing import Literal

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from app.domain.taxonomy import EXCLUSION_COLUMNS
from app.services import papers
from app.web.access import Admin, AnyViewer, Reviewer
from app.web.apidoc import (
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
from app.web.deps import DbDep
from app.web.downloads import attachment
from app.web.requests import json_object, read_uploads
from app.web.responses import JsonBody
from app.web.security import acting_reviewer

router = APIRouter(prefix="/api/papers", tags=["papers"])


@router.post("/import", dependencies=[Admin], openapi_extra={"requestBody": {"required": True, "content": {
    "text/csv": {"schema": CSV},
    "multipart/form-data": {"schema": object_schema({"file": {"type": "array", "items": {
        "type": "string", "format": "binary"}}}, "file")}},
    "description": "a paper pool (18 columns) or exclusion log (9 columns) CSV (admins only)"}},
    responses=WRITE_REFUSALS | {
        200: reply("rows imported per file", OBJECT),
        400: reply("the body is not readable text, or a multipart upload has no `file` part"),
        422: reply("each problem with its line and column", PROBLEMS)})
async def import_papers(request: Request, db: DbDep):
    """A pool (18 columns) or exclusion log (9 columns) as a raw CSV body or a multipart `file`."""
    uploads = await read_uploads(request)
    results = [await run_in_threadpool(papers.import_csv, db, upload.data) for upload in uploads]
    return results[0] if len(results) == 1 else {"files": results}


@router.get("/export", dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: {"description": "the rows", "content": {"text/csv": {"schema": CSV},
                                                 "application/json": {"schema": {"type": "array"}}}},
    404: reply("no reviewer of that name has tagged papers")})
def export_papers(db: DbDep, format: Literal["csv", "json"] = "csv", source: str = papers.POOL,
                  kind: Literal["papers", "excluded", "tags"] = "papers", history: bool = True):
    """The pool as `source` (pool or a reviewer) sees it, the exclusion log, or reviewers' tags."""
    if kind == "tags":
        rows = papers.tag_history(db, history=history)
        columns = ("key", "reviewer", "version", *papers.PAPER_FIELDS, "note", "created_at")
        rows = [{c: ("" if r[c] is None else r[c]) for c in columns} for r in rows] if format == "csv" else rows
    elif kind == "excluded":
        rows, columns = papers.excluded_rows(db), EXCLUSION_COLUMNS
    else:
        if source != papers.POOL and source not in papers.taggers(db):
            raise HTTPException(404, f"no reviewer '{source}' has tagged papers; source is pool or a reviewer")
        rows, columns = papers.effective_rows(db, source), papers.PAPER_COLUMNS
    if format == "json":
        return JSONResponse(rows)
    name = f"{kind}{'' if source == papers.POOL else '-' + source}.csv"
    return Response(papers.to_csv(rows, columns), media_type="text/csv; charset=utf-8",
                    headers=attachment(name))


@router.get("/stats", dependencies=[AnyViewer])
def read_stats(db: DbDep, source: str = papers.POOL):
    """Counts per controlled field, the sparsity cross-tabs and the exclusion log's facets."""
    return JsonBody(papers.stats(db, source))


@router.post("/{key}/tags", dependencies=[Reviewer], status_code=201, openapi_extra=json_body(
    "the paper fields to set for this reviewer (null: follow the pool), `note`; `reviewer` in open mode"),
    responses=WRITE_REFUSALS | NOT_JSON | {201: reply("the new version of the reviewer's tags", OBJECT),
                                           404: reply("no paper with this key"),
                                           422: reply("a field is not valid (named in `field`)", FIELD_ERROR)})
async def create_tags(key: str, request: Request, db: DbDep):
    """A reviewer's tags on a paper, as a new version (omitted fields keep their value)."""
    body = acting_reviewer(request, await json_object(request))
    return await run_in_threadpool(papers.save_tags, db, key, body)


@router.get("/{key}/tags", dependencies=[AnyViewer])
def read_tags(key: str, db: DbDep, reviewer: str | None = None, history: bool = True):
    return JsonBody({"items": papers.tag_history(db, key, reviewer, history)})
