"""Findings triage: a trace's audit findings with stable ids and marks (JSON API), and the page where reviewers
work through them, grouped by rule or by source agent."""

from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.domain.audit import SEVERITIES
from app.domain.paging import MAX_OFFSET
from app.domain.refusals import InvalidParameter
from app.domain.triage import MARKS, remaining
from app.services import triage
from app.web.access import AnyViewer, Reviewer
from app.web.apidoc import (
    COUNT,
    FIELD_ERROR,
    INVALID,
    MAYBE_TEXT,
    NOT_JSON,
    READ_REFUSALS,
    TEXT,
    TEXTS,
    WRITE_REFUSALS,
    object_schema,
    reply,
)
from app.web.browser import require_csrf, reviewer_of
from app.web.deps import CacheDep, DbDep, TraceId
from app.web.render import render
from app.web.requests import json_object
from app.web.security import acting_reviewer

router = APIRouter()

MARK = {"type": ["object", "null"], "properties": {"mark": {"enum": list(MARKS)}, "note": TEXT, "by": MAYBE_TEXT,
                                                   "at": TEXT}}
FINDING = object_schema({"id": TEXT, "rule": TEXT, "severity": {"enum": list(SEVERITIES)}, "agent": MAYBE_TEXT,
                         "events": TEXTS, "message": TEXT, "mark": MARK},
                        "id", "rule", "severity", "agent", "events", "message", "mark")
NO_TRACE = {404: reply("no trace with this id")}
MARK_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": object_schema(
    {"mark": {"enum": list(MARKS)}, "note": TEXT}, "mark")}}}}
BY = ("rule", "agent")


@router.get("/api/traces/{trace_id}/findings", tags=["audit"], dependencies=[AnyViewer],
            responses=READ_REFUSALS | NO_TRACE | {200: reply("the findings, each with its id and current mark",
                                                              object_schema({"findings": {"type": "array",
                                                                                          "items": FINDING},
                                                                             "remaining": COUNT}, "findings"))})
def read_findings(trace_id: TraceId, db: DbDep, cache: CacheDep):
    """Every audit finding of the trace: `id` (the same whenever the trace is analysed again), rule, severity,
    `agent` (the agent of its first event), events, message and its current `mark` (null when unmarked);
    `remaining` counts the unmarked."""
    findings = triage.trace_findings(db, cache, trace_id)
    return {"findings": findings, "remaining": len(remaining(findings))}


FINDINGS_OF = object_schema({"trace_id": TEXT, "findings": {"type": "array", "items": FINDING}, "remaining": COUNT},
                            "trace_id", "findings", "remaining")
MAX_NAMED = 1000  # trace ids one request may name: a page's worth


@router.get("/api/findings", tags=["audit"], dependencies=[AnyViewer], responses=READ_REFUSALS | INVALID | {
    200: reply("the findings of a page of every trace in id order (`total` traces in all), or of the traces named "
               "(`missing`: those not stored)",
               object_schema({"items": {"type": "array", "items": FINDINGS_OF}, "total": COUNT, "missing": TEXTS},
                             "items"))})
def read_many_findings(db: DbDep, cache: CacheDep,
                       trace_id: list[str] = Query([], description=f"these traces (at most {MAX_NAMED}), in the "
                                                   "order named, rather than a page of every trace"),
                       limit: int | None = Query(None, ge=1, le=1000, description="traces a page holds (100)"),
                       offset: int | None = Query(None, ge=0, le=MAX_OFFSET, description="traces skipped (0)")):
    """What `GET /api/traces/{trace_id}/findings` answers, for many traces in one call: every trace's, a page at
    a time in trace id order (`limit`, `offset`, with `total`), or the traces `trace_id` names (with `missing`).
    `orchestrace audit` asks a server for its findings this way."""
    if not trace_id:
        return triage.findings_page(db, cache, limit or 100, offset or 0)
    if limit is not None or offset is not None:
        raise InvalidParameter("limit" if limit is not None else "offset", "pages every trace; not given with trace_id")
    if len(trace_id) > MAX_NAMED:
        raise InvalidParameter("trace_id", f"at most {MAX_NAMED:,} a request, {len(trace_id):,} given")
    return triage.named_findings(db, cache, trace_id)


@router.post("/api/traces/{trace_id}/findings/{finding_id}/mark", tags=["audit"], dependencies=[Reviewer],
             status_code=201, openapi_extra=MARK_BODY,
             responses=WRITE_REFUSALS | NOT_JSON | {
                 201: reply("the finding with its new mark", FINDING),
                 404: reply("no trace with this id, or no finding with this id in it"),
                 422: reply("`mark` or `note` is not valid (named in `field`)", FIELD_ERROR)})
async def create_mark(request: Request, trace_id: TraceId, finding_id: str, db: DbDep, cache: CacheDep):
    """Mark a finding `reviewed`, `accepted_risk` or `false_positive` with a `note`; a new version of its mark,
    by the caller (reviewers and admins). `orchestrace audit --fail-on` no longer fails on a finding marked
    accepted_risk or false_positive."""
    body = await json_object(request)
    mark, note = triage.checked(body)
    by = acting_reviewer(request, body).get("reviewer") or reviewer_of(request)
    [finding] = await run_in_threadpool(triage.mark_findings, db, cache, trace_id, [finding_id], mark, note, by)
    return finding


@router.get("/traces/{trace_id}/findings", include_in_schema=False, dependencies=[AnyViewer])
def read_findings_page(request: Request, trace_id: TraceId, db: DbDep, cache: CacheDep, by: str = "rule"):
    """The findings grouped by rule (or by source agent), how many remain, a mark form per finding and per group."""
    by = by if by in BY else "rule"
    context = triage.triage_page(triage.trace_findings(db, cache, trace_id), by)
    return render(request, "findings.html", context | {"trace_id": trace_id, "marks": MARKS})


@router.post("/traces/{trace_id}/findings/mark", include_in_schema=False,
             dependencies=[Reviewer, Depends(require_csrf)])
async def mark_from_page(request: Request, trace_id: TraceId, db: DbDep, cache: CacheDep):
    """The page's forms: `finding` (repeated: one finding, or every unmarked one of a group), `mark`, `note`;
    back to the page where they were sent from."""
    form = await request.form()
    mark, note = triage.checked({"mark": form.get("mark"), "note": form.get("note", "")})
    ids = [str(i) for i in form.getlist("finding")]
    if ids:
        await run_in_threadpool(triage.mark_findings, db, cache, trace_id, ids, mark, note, reviewer_of(request))
    by = form.get("by") if form.get("by") in BY else "rule"
    anchor = f"#{ids[0]}" if len(ids) == 1 else ""
    return RedirectResponse(f"/traces/{quote(trace_id, safe='')}/findings?by={by}{anchor}", status_code=303)
