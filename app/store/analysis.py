"""Stored analyses (trace_metrics, audit_findings): whether a trace's is fresh, and replacing it."""

import json

from app.store.db import Database
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
    rows = db.fetchall("SELECT rule, severity, message, events FROM audit_findings WHERE trace_id = ? ORDER BY seq",
                       [trace_id])
    return [row | {"events": json.loads(row["events"])} for row in rows]


def traces_needing_analysis(db: Database, version: int) -> list[dict]:
    """{trace_id, ingested_at} of the traces without a stored analysis of this ingest and this analysis version."""
    return db.fetchall(
        "SELECT t.trace_id, t.ingested_at FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id "
        "WHERE m.trace_id IS NULL OR m.ingested_at <> t.ingested_at OR m.analysis_version <> ? "
        "ORDER BY t.trace_id", [version])


def analyses_version(db: Database) -> tuple:
    """What changes whenever stored analyses are (with their findings): their number, latest trace ingest and the
    sum of their analysis versions (a pass for a new version raises it with each batch)."""
    return tuple(db.execute("SELECT count(*), max(ingested_at), sum(analysis_version) FROM trace_metrics").fetchone())


# Sort keys of the audit table besides a rule's name (its findings in the trace).
AUDIT_SORTS = {"trace_id": "m.trace_id", "error": "m.errors", "warning": "m.warnings", "info": "m.infos"}
AUDIT_PAGE = """
    WITH page AS (
        SELECT m.trace_id, m.errors, m.warnings, m.infos, {key} AS key
        FROM trace_metrics m
        LEFT JOIN (SELECT trace_id, count(*) AS n FROM audit_findings WHERE rule = ? GROUP BY trace_id) r
               ON r.trace_id = m.trace_id
        ORDER BY key {order}, m.trace_id {order} LIMIT ? OFFSET ?)
    SELECT page.trace_id, page.errors, page.warnings, page.infos, f.rule, count(f.rule) AS n
    FROM page LEFT JOIN audit_findings f ON f.trace_id = page.trace_id
    GROUP BY ALL ORDER BY any_value(page.key) {order}, page.trace_id {order}
"""


def audit_page(db: Database, sort: str, limit: int, offset: int) -> tuple[list[dict], int]:
    """One page of the audited traces with their finding counts by rule and severity totals, sorted by `sort` (a
    key of AUDIT_SORTS or a rule, - first for descending), and how many traces were audited."""
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    rule = None if key in AUDIT_SORTS else key
    sql = AUDIT_PAGE.format(key=AUDIT_SORTS.get(key, "coalesce(r.n, 0)"), order="DESC" if descending else "ASC")
    out: dict[str, dict] = {}
    for r in db.fetchall(sql, [rule, limit, offset]):
        entry = out.setdefault(r["trace_id"], {"trace_id": r["trace_id"], "error": r["errors"],
                                               "warning": r["warnings"], "info": r["infos"], "rules": {}})
        if r["rule"]:
            entry["rules"][r["rule"]] = r["n"]
    return list(out.values()), db.scalar("SELECT count(*) FROM trace_metrics")


def rule_totals(db: Database) -> dict[str, dict]:
    """Per rule with findings: its findings and the traces they are in, across the corpus."""
    return {r["rule"]: r for r in db.fetchall(
        "SELECT rule, count(*) AS findings, count(DISTINCT trace_id) AS traces FROM audit_findings GROUP BY rule")}


def findings_by_rule(db: Database) -> dict[str, int]:
    return {r["rule"]: r["n"] for r in db.fetchall(
        "SELECT rule, count(*) AS n FROM audit_findings GROUP BY rule ORDER BY n DESC, rule")}
