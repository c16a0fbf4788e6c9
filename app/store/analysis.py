"""Stored analyses (trace_metrics, audit_findings): whether a trace's is fresh, and replacing it."""

import json

from app.store.db import Database
from app.store.sql import one_of
from app.store.writes import insert_analyses, trace_locks


def analysis_state(db: Database, trace_id: str, version: int) -> dict | None:
    """The trace's ingest time, its stored metrics, and whether they are `fresh` (of this ingest and this analysis
    version); None when there is no such trace."""
    return db.fetchone(
        "SELECT t.ingested_at, m.metrics, m.ingested_at = t.ingested_at AND m.analysis_version = ? AS fresh "
        "FROM traces t "
        "LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id WHERE t.trace_id = ?", [version, trace_id])


def replace_analyses(db: Database, analyses: dict[str, dict], read_at: dict) -> list[str]:
    """Keep the analyses (see app/domain/analysis.py analyse) of traces as ingested at `read_at[trace_id]` (read
    before the traces were), in one write; a trace replaced since, here or by another instance, is skipped: stamped
    with the newer time, its analysis would pass as fresh. Returns the ids stored."""
    # Two instances analysing one trace at once take turns (both may find none stored, and insert one each).
    return db.write(lambda cur: insert_analyses(cur, analyses, read_at), trace_locks(list(analyses)))


def read_findings(db: Database, trace_id: str) -> list[dict]:
    return read_findings_in(db, [trace_id]).get(trace_id, [])


def read_findings_in(db: Database, trace_ids: list[str]) -> dict[str, list[dict]]:
    """The stored findings of these traces in one read, by trace id in their order (a trace with none left out)."""
    traces, params = one_of("trace_id", "traces", trace_ids)
    rows = db.execute("SELECT trace_id, rule, severity, message, events FROM audit_findings "
                      f"WHERE {traces} ORDER BY trace_id, seq", params).fetchall()
    found: dict[str, list[dict]] = {}
    for trace_id, rule, severity, message, events in rows:
        found.setdefault(trace_id, []).append({"rule": rule, "severity": severity, "message": message,
                                               "events": json.loads(events)})
    return found


def analysis_states(db: Database, trace_ids: list[str], version: int) -> dict[str, dict]:
    """analysis_state of each of these traces that is stored, by id, in one read."""
    traces, params = one_of("t.trace_id", "traces", trace_ids)
    return {row.pop("trace_id"): row for row in db.fetchall(
        "SELECT t.trace_id, t.ingested_at, m.metrics, "
        "m.ingested_at = t.ingested_at AND m.analysis_version = $version AS fresh "
        f"FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id WHERE {traces}",
        params | {"version": version})}


def traces_needing_analysis(db: Database, version: int) -> list[dict]:
    """{trace_id, ingested_at} of the traces without a stored analysis of this ingest and this analysis version."""
    return db.fetchall(
        "SELECT t.trace_id, t.ingested_at FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id "
        "WHERE m.trace_id IS NULL OR m.ingested_at <> t.ingested_at OR m.analysis_version <> ? "
        "ORDER BY t.trace_id", [version])


def analyses_version(db: Database) -> tuple:
    """What changes whenever stored analyses are, with their findings (Database.version): off a shared lake, their
    number, latest trace ingest and the sum of their analysis versions (a pass for a new version raises it with
    each batch)."""
    return db.version("SELECT count(*), max(ingested_at), sum(analysis_version) FROM trace_metrics")
