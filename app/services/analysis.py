"""Metrics and audit findings of stored traces: computed once per ingest of a trace, then read back.

The pure functions live in metrics.py and audit.py; this module stores their results so the trace
list, the corpus audit and the dashboard can sort and count without recomputing.
"""

import json

from app.domain.audit import SEVERITIES, audit
from app.domain.credit import RULES, assign, correlation, rollup
from app.domain.metrics import TraceGraph, analyse_graph, compute_metrics
from app.services.cache import TraceCache
from app.store import queries
from app.store.db import Database
from app.store.writes import trace_locks

COMPUTED_PREFIX = "computed credit: "
# Bump when a metric or an audit rule changes: stored analyses of an older version are made again.
# 1: orphan_return spares the root answering the user and a handoff's successor; no costs.messages check.
# 2: untrusted_flow reports once per untrusted source with its reach, not once per path; agents (and their
#    lifetimes, concurrency and work) are team members only, not `user` nor people stepping in.
ANALYSIS_VERSION = 2


def stored_trace(db: Database, cache: TraceCache, trace_id: str) -> dict | None:
    """The whole trace, read once per ingest and kept in the cache for the analyses."""
    version = queries.trace_version(db, trace_id)
    if version is None:
        return None
    return cache.get_or_build(("trace", trace_id, version), lambda: queries.read_trace(db, trace_id))


def stored_graph(db: Database, cache: TraceCache, trace_id: str) -> TraceGraph | None:
    """The trace's indexes (see analyse_graph), built once per ingest: the metrics, the audit and every
    credit rule and roll-up share them instead of each building its own."""
    version = queries.trace_version(db, trace_id)
    if version is None:
        return None
    return cache.get_or_build(("graph", trace_id, version),
                              lambda: analyse_graph(stored_trace(db, cache, trace_id)))


def ensure_analysis(db: Database, cache: TraceCache, trace_id: str) -> dict | None:
    """{"metrics", "findings"} of a trace, computing and storing them when missing or stale."""
    row = db.fetchone(
        "SELECT t.ingested_at, m.metrics, m.ingested_at = t.ingested_at AND m.analysis_version = ? AS fresh "
        "FROM traces t "
        "LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id WHERE t.trace_id = ?", [ANALYSIS_VERSION, trace_id])
    if row is None:
        return None
    if row["fresh"]:
        return {"metrics": json.loads(row["metrics"]), "findings": queries.read_findings(db, trace_id)}
    trace = stored_trace(db, cache, trace_id)
    g = stored_graph(db, cache, trace_id)
    metrics = compute_metrics(trace, g)
    findings = audit(trace, g)
    store_analysis(db, trace_id, row["ingested_at"], metrics, findings)
    return {"metrics": metrics, "findings": findings}


def store_analysis(db: Database, trace_id: str, version, metrics: dict, findings: list[dict]) -> None:
    """Keep the analysis of the trace as ingested at `version` (read before the trace was), unless the trace
    has been replaced since, here or by another instance: stamped with the newer time, it would pass as fresh."""
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITIES}

    def replace(cur) -> None:
        if cur.execute("SELECT count(*) FROM traces WHERE trace_id = ? AND ingested_at = ?",
                       [trace_id, version]).fetchone()[0] == 0:
            return
        cur.execute("DELETE FROM trace_metrics WHERE trace_id = ?", [trace_id])
        cur.execute("DELETE FROM audit_findings WHERE trace_id = ?", [trace_id])
        cur.execute(
            "INSERT INTO trace_metrics (trace_id, ingested_at, metrics, critical_path_steps, critical_path_s, "
            "parallelism_speedup, max_concurrency, spawn_depth, protocol_overhead, errors, warnings, infos, "
            "analysis_version) SELECT trace_id, ingested_at, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? "
            "FROM traces WHERE trace_id = ?",
            [json.dumps(metrics), metrics["critical_path_steps"], metrics["critical_path_s"],
             metrics["parallelism_speedup"], metrics["max_concurrency"], metrics["spawn_depth"],
             metrics["protocol_overhead"], counts["error"], counts["warning"], counts["info"], ANALYSIS_VERSION,
             trace_id])
        if findings:
            cur.executemany("INSERT INTO audit_findings VALUES (?, ?, ?, ?, ?, ?)",
                            [[trace_id, k, f["rule"], f["severity"], f["message"], json.dumps(f["events"])]
                             for k, f in enumerate(findings)])

    # Two instances analysing one trace at once take turns (both may find none stored, and insert one each).
    db.write(replace, trace_locks([trace_id]))


def ensure_all(db: Database, cache: TraceCache) -> int:
    """Analyse every trace whose stored analysis is missing or stale; returns how many were computed."""
    stale = queries.traces_needing_analysis(db, ANALYSIS_VERSION)
    for trace_id in stale:
        ensure_analysis(db, cache, trace_id)
    return len(stale)


def computed_credit(db: Database, cache: TraceCache, trace_id: str, rule: str, channel: str) -> list[float]:
    """A reward channel's value spread over the events by `rule` (see credit.assign); cached per trace."""
    # The version before the trace: read after it, a replace in between would key the old credit as new.
    version = queries.trace_version(db, trace_id)
    trace = stored_trace(db, cache, trace_id)
    if rule not in RULES:
        raise ValueError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    if channel not in trace["rewards"]:
        raise ValueError(f"channel: trace '{trace_id}' has no reward channel {channel!r}; "
                         f"it has {', '.join(trace['rewards']) or 'none'}")
    return cache.get_or_build(("credit", trace_id, version, rule, channel),
                              lambda: assign(trace, rule, trace["rewards"][channel], stored_graph(db, cache, trace_id)))


def computed_channel_names(trace_rewards: dict) -> list[str]:
    """Overlay names of every rule applied to every reward channel, e.g. "computed credit: causal × team"."""
    return [f"{COMPUTED_PREFIX}{rule} × {channel}" for channel in trace_rewards for rule in RULES]


def parse_computed(name: str) -> tuple[str, str] | None:
    """(rule, channel) of a computed-credit overlay name, or None for any other name."""
    if not name.startswith(COMPUTED_PREFIX) or " × " not in name:
        return None
    rule, channel = name[len(COMPUTED_PREFIX):].split(" × ", 1)
    return rule, channel


def credit_report(db: Database, cache: TraceCache, trace_id: str, values: list, human_mean: list | None) -> dict:
    """Roll-up of per-event credit to the eight units, and its correlation with human mean credit."""
    trace = stored_trace(db, cache, trace_id)
    return {"rollup": rollup(trace, values, stored_graph(db, cache, trace_id)),
            "human_correlation": correlation(values, human_mean) if human_mean else {"n": 0, "pearson": None}}
