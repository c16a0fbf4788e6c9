"""Stored analyses (trace_metrics, audit_findings): whether a trace's is fresh, and replacing it."""

import json

import pyarrow as pa

from app.store.db import Database
from app.store.lists import registered
from app.store.sql import execute
from app.store.writes import trace_locks


def analysis_state(db: Database, trace_id: str, version: int) -> dict | None:
    """The trace's ingest time, its stored metrics, and whether they are `fresh` (of this ingest and this analysis
    version); None when there is no such trace."""
    return db.fetchone(
        "SELECT t.ingested_at, m.metrics, m.ingested_at = t.ingested_at AND m.analysis_version = ? AS fresh "
        "FROM traces t "
        "LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id WHERE t.trace_id = ?", [version, trace_id])


def replace_analysis(db: Database, trace_id: str, ingested_at, version: int, metrics: dict, counts: dict,
                     findings: list[dict]) -> None:
    """Keep the analysis of the trace as ingested at `ingested_at` (read before the trace was), made by analysis
    `version`, with its finding `counts` by severity; unless the trace has been replaced since, here or by another
    instance: stamped with the newer time, it would pass as fresh."""

    def replace(cur) -> None:
        if execute(cur, "SELECT count(*) FROM traces WHERE trace_id = ? AND ingested_at = ?",
                   [trace_id, ingested_at]).fetchone()[0] == 0:
            return
        execute(cur, "DELETE FROM trace_metrics WHERE trace_id = ?", [trace_id])
        execute(cur, "DELETE FROM audit_findings WHERE trace_id = ?", [trace_id])
        execute(cur, "INSERT INTO trace_metrics (trace_id, ingested_at, metrics, critical_path_steps, "
                "critical_path_s, parallelism_speedup, max_concurrency, spawn_depth, protocol_overhead, errors, "
                "warnings, infos, analysis_version) "
                "SELECT trace_id, ingested_at, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM traces WHERE trace_id = ?",
                [json.dumps(metrics), metrics["critical_path_steps"], metrics["critical_path_s"],
                 metrics["parallelism_speedup"], metrics["max_concurrency"], metrics["spawn_depth"],
                 metrics["protocol_overhead"], counts["error"], counts["warning"], counts["info"], version,
                 trace_id])
        if findings:
            with registered(cur, "finding_rows", seq=pa.array(range(len(findings)), pa.int32()),
                            rule=[f["rule"] for f in findings], severity=[f["severity"] for f in findings],
                            message=[f["message"] for f in findings],
                            events=[json.dumps(f["events"]) for f in findings]):
                execute(cur, "INSERT INTO audit_findings (trace_id, seq, rule, severity, message, events) "
                        "SELECT ?, seq, rule, severity, message, events FROM finding_rows", [trace_id])

    # Two instances analysing one trace at once take turns (both may find none stored, and insert one each).
    db.write(replace, trace_locks([trace_id]))


def read_findings(db: Database, trace_id: str) -> list[dict]:
    rows = db.fetchall("SELECT rule, severity, message, events FROM audit_findings WHERE trace_id = ? ORDER BY seq",
                       [trace_id])
    return [row | {"events": json.loads(row["events"])} for row in rows]


def traces_needing_analysis(db: Database, version: int) -> list[str]:
    """Traces without a stored analysis of this ingest and this analysis version."""
    return [r["trace_id"] for r in db.fetchall(
        "SELECT t.trace_id FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id "
        "WHERE m.trace_id IS NULL OR m.ingested_at <> t.ingested_at OR m.analysis_version <> ? "
        "ORDER BY t.trace_id", [version])]


def audit_matrix(db: Database) -> list[dict]:
    """Per trace: finding counts by rule, with the severity totals."""
    rows = db.fetchall(
        "SELECT m.trace_id, m.errors, m.warnings, m.infos, f.rule, count(f.rule) AS n "
        "FROM trace_metrics m LEFT JOIN audit_findings f ON f.trace_id = m.trace_id "
        "GROUP BY ALL ORDER BY m.trace_id")
    out: dict[str, dict] = {}
    for r in rows:
        entry = out.setdefault(r["trace_id"], {"trace_id": r["trace_id"], "error": r["errors"],
                                               "warning": r["warnings"], "info": r["infos"], "rules": {}})
        if r["rule"]:
            entry["rules"][r["rule"]] = r["n"]
    return list(out.values())


def corpus_points(db: Database) -> list[dict]:
    """One row per analysed trace with the measures the dashboard plots."""
    rows = db.fetchall(
        "SELECT t.trace_id, t.system, t.topology, t.n_agents AS agents, t.tokens, t.wall_clock_s, t.rewards, "
        "m.critical_path_steps, m.parallelism_speedup, m.errors, m.warnings, m.infos "
        "FROM traces t JOIN trace_metrics m ON m.trace_id = t.trace_id AND m.ingested_at = t.ingested_at "
        "ORDER BY t.trace_id")
    return [row | {"rewards": json.loads(row["rewards"])} for row in rows]


def findings_by_rule(db: Database) -> dict[str, int]:
    return {r["rule"]: r["n"] for r in db.fetchall(
        "SELECT rule, count(*) AS n FROM audit_findings GROUP BY rule ORDER BY n DESC, rule")}
