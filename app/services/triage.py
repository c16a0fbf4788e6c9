"""Findings triage (issue 32): a trace's audit findings with stable ids, their source agent and current mark;
reviewers mark them (one, or a whole group) `reviewed`, `accepted_risk` or `false_positive` with a note."""

from app.domain.refusals import NotFound, Refusal
from app.domain.triage import MARKS, failing, grouped, remaining, with_ids
from app.services import analysis
from app.services.cache import TraceCache
from app.store import traces as trace_store
from app.store import triage as triage_store
from app.store.db import Database, iso_utc, utc_now

MAX_NOTE = 2000


class MarkError(Refusal):
    """A mark that cannot be stored as sent; `field` names what is wrong."""

    status = 422

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")

    def details(self) -> dict:
        return {"field": self.field}


def trace_findings(db: Database, cache: TraceCache, trace_id: str) -> list[dict]:
    """Every finding of the trace's audit: {"id", "rule", "severity", "agent", "events", "message", "mark"}."""
    found = findings_of(db, cache, [trace_id]).get(trace_id)
    if found is None:
        raise NotFound(f"no trace with id '{trace_id}'", what=f"trace '{trace_id}'")
    return found


def findings_page(db: Database, cache: TraceCache, limit: int, offset: int) -> dict:
    """The findings of a page of every stored trace, in trace id order: {"items": [{"trace_id", "findings",
    "remaining"}], "total"} (a trace deleted while the page is read is left out)."""
    trace_ids, total = trace_store.trace_id_page(db, limit, offset)
    return {"items": _items(trace_ids, findings_of(db, cache, trace_ids)), "total": total}


def named_findings(db: Database, cache: TraceCache, trace_ids: list[str]) -> dict:
    """The findings of these traces, in the order named: {"items": [...], "missing": the ids not stored}."""
    trace_ids = list(dict.fromkeys(trace_ids))
    found = findings_of(db, cache, trace_ids)
    return {"items": _items(trace_ids, found), "missing": [trace_id for trace_id in trace_ids if trace_id not in found]}


def _items(trace_ids: list[str], found: dict[str, list[dict]]) -> list[dict]:
    return [{"trace_id": trace_id, "findings": found[trace_id], "remaining": len(remaining(found[trace_id]))}
            for trace_id in trace_ids if trace_id in found]


def findings_of(db: Database, cache: TraceCache, trace_ids: list[str]) -> dict[str, list[dict]]:
    """trace_findings of each of these traces that is stored, by id, in a few reads whatever their number (an
    audit of every trace of a corpus read four a trace)."""
    findings = {trace_id: with_ids(found) for trace_id, found in analysis.findings_of(db, cache, trace_ids).items()}
    firsts = sorted({f["events"][0] for found in findings.values() for f in found if f["events"]})
    agents, marks = db.together(lambda: triage_store.event_agents(db, list(findings), firsts),  # side by side
                                lambda: triage_store.current_marks_in(db, list(findings)))
    return {trace_id: [{"id": f["id"], "rule": f["rule"], "severity": f["severity"],
                        "agent": agents.get((trace_id, f["events"][0])) if f["events"] else None,
                        "events": f["events"], "message": f["message"],
                        "mark": _shown(marks.get(trace_id, {}).get(f["id"]))} for f in found]
            for trace_id, found in findings.items()}


def _shown(mark: dict | None) -> dict | None:
    return None if mark is None else mark | {"at": iso_utc(mark["at"])}


def checked(body: dict) -> tuple[str, str]:
    """(mark, note) of a mark's body, or MarkError naming the field."""
    mark, note = body.get("mark"), body.get("note", "")
    if mark not in MARKS:
        raise MarkError("mark", f"must be one of {', '.join(MARKS)}")
    if note is None:
        note = ""
    if not isinstance(note, str) or len(note) > MAX_NOTE:
        raise MarkError("note", f"must be text of at most {MAX_NOTE} characters")
    return mark, note


def mark_findings(db: Database, cache: TraceCache, trace_id: str, finding_ids: list[str], mark: str, note: str,
                  by: str | None) -> list[dict]:
    """Mark these findings of the trace (NotFound naming an id that is none of its findings); returns them."""
    findings = {f["id"]: f for f in trace_findings(db, cache, trace_id)}
    unknown = [i for i in finding_ids if i not in findings]
    if unknown:
        raise NotFound(f"trace '{trace_id}' has no finding with id '{unknown[0]}'", what=f"finding '{unknown[0]}'")
    at = utc_now()
    db.write(lambda cur: triage_store.insert_marks(cur, trace_id, finding_ids, mark, note, by, at),
             [triage_store.mark_lock(trace_id)])
    shown = {"mark": mark, "note": note, "by": by, "at": iso_utc(at)}
    return [findings[i] | {"mark": shown} for i in finding_ids]


def triage_page(findings: list[dict], by: str) -> dict:
    """What the findings page shows: the findings grouped by rule or by source agent, with how many remain."""
    return {"groups": grouped(findings, by), "by": by, "total": len(findings),
            "remaining": len(remaining(findings)),
            "dismissed": len(findings) - len(failing(findings))}
