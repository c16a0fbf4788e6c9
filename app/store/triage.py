"""What findings triage reads and writes: reviewers' marks on a trace's audit findings (versioned rows, the current
one the highest), and the agent each finding comes from."""

from app.store.db import Database
from app.store.sql import current, execute, one_of

CURRENT = current("trace_id", "finding_id")


def current_marks_in(db: Database, trace_ids: list[str]) -> dict[str, dict[str, dict]]:
    """{trace id: {finding id: {"mark", "note", "by", "at"}}}: each marked finding's current mark, of these traces
    in one read (a trace with none left out)."""
    traces, params = one_of("trace_id", "traces", trace_ids)
    rows = db.fetchall("SELECT trace_id, finding_id, mark, note, marked_by, marked_at FROM finding_marks "
                       f"WHERE {traces}" + CURRENT, params)
    marks: dict[str, dict[str, dict]] = {}
    for row in rows:
        marks.setdefault(row["trace_id"], {})[row["finding_id"]] = {
            "mark": row["mark"], "note": row["note"], "by": row["marked_by"], "at": row["marked_at"]}
    return marks


def event_agents(db: Database, trace_ids: list[str], event_ids: list[str]) -> dict[tuple[str, str], str]:
    """{(trace id, event id): its agent} of the events of these traces with these ids, in one read."""
    if not event_ids:
        return {}
    traces, params = one_of("trace_id", "traces", trace_ids)
    rows = db.execute(f"SELECT trace_id, event_id, agent FROM events WHERE {traces} "
                      "AND event_id IN (SELECT unnest($events))", params | {"events": event_ids}).fetchall()
    return {(trace_id, event_id): agent for trace_id, event_id, agent in rows}


def mark_lock(trace_id: str) -> tuple:
    """What a write of marks on a trace's findings holds on a shared lake: versions are 1..n by a read inside it."""
    return ("finding marks", trace_id)


def insert_marks(cur, trace_id: str, finding_ids: list[str], mark: str, note: str, by: str | None, at) -> None:
    """A new version of the mark of each finding, in one statement."""
    execute(cur, """
        INSERT INTO finding_marks (trace_id, finding_id, version, mark, note, marked_by, marked_at)
        SELECT ?, f.id, coalesce(max(m.version), 0) + 1, ?, ?, ?, ?
        FROM (SELECT unnest(?) AS id) f LEFT JOIN finding_marks m ON m.trace_id = ? AND m.finding_id = f.id
        GROUP BY f.id""", [trace_id, mark, note, by, at, finding_ids, trace_id])
