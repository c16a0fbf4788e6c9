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
