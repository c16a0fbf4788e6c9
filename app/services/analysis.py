"""Metrics and audit findings of stored traces: computed once per ingest of a trace, then read back.

The pure functions live in metrics.py and audit.py; this module keeps their results (through
app/store/analysis.py) so the trace list, the corpus audit and the dashboard can sort and count without
recomputing.
"""

import hashlib
import json

from app.domain.audit import AUDIT_RULES, MAX_FINDINGS_PER_RULE, SEVERITIES, Rule, audit
from app.domain.credit import RULES, assign, correlation, rollup
from app.domain.metrics import TraceGraph, analyse_graph, compute_metrics
from app.services.cache import TraceCache
from app.store import analysis as analysis_store
from app.store import traces as trace_store
from app.store.db import Database

COMPUTED_PREFIX = "computed credit: "
# Raise when what compute_metrics measures changes (2: agents, and their lifetimes, concurrency and work, are
# team members only, not `user` nor people stepping in). Each audit rule has a version of its own.
METRICS_VERSION = 2
VERSION_RANGE = 2**31 - 1  # trace_metrics.analysis_version is a 32-bit INTEGER, 0 (its default) never analysed


def analysis_version(rules: tuple[Rule, ...] = AUDIT_RULES, metrics_version: int = METRICS_VERSION) -> int:
    """What makes a stored analysis, as one number: the metrics' version, the findings kept per rule and every
    audit rule's name and version in audit order, hashed. Adding, removing, reordering or changing a rule changes
    it, and a trace whose stored analysis has another number is analysed again."""
    made_by = json.dumps([metrics_version, MAX_FINDINGS_PER_RULE, [[rule.name, rule.version] for rule in rules]])
    return int.from_bytes(hashlib.sha256(made_by.encode()).digest()[:8], "big") % VERSION_RANGE + 1


ANALYSIS_VERSION = analysis_version()


def stored_trace(db: Database, cache: TraceCache, trace_id: str) -> dict | None:
    """The whole trace, read once per ingest and kept in the cache for the analyses."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None
    return cache.get_or_build(("trace", trace_id, version), lambda: trace_store.read_trace(db, trace_id))


def stored_graph(db: Database, cache: TraceCache, trace_id: str) -> TraceGraph | None:
    """The trace's indexes (see analyse_graph), built once per ingest: the metrics, the audit and every
    credit rule and roll-up share them instead of each building its own."""
    version = trace_store.trace_version(db, trace_id)
    if version is None:
        return None
    return cache.get_or_build(("graph", trace_id, version),
                              lambda: analyse_graph(stored_trace(db, cache, trace_id)))


def ensure_analysis(db: Database, cache: TraceCache, trace_id: str) -> dict | None:
    """{"metrics", "findings"} of a trace, computing and storing them when missing or stale."""
    state = analysis_store.analysis_state(db, trace_id, ANALYSIS_VERSION)
    if state is None:
        return None
    if state["fresh"]:
        return {"metrics": json.loads(state["metrics"]), "findings": analysis_store.read_findings(db, trace_id)}
    trace = stored_trace(db, cache, trace_id)
    g = stored_graph(db, cache, trace_id)
    metrics = compute_metrics(trace, g)
    findings = audit(trace, g)
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITIES}
    analysis_store.replace_analysis(db, trace_id, state["ingested_at"], ANALYSIS_VERSION, metrics, counts, findings)
    return {"metrics": metrics, "findings": findings}


def ensure_all(db: Database, cache: TraceCache) -> int:
    """Analyse every trace whose stored analysis is missing or stale; returns how many were computed."""
    stale = analysis_store.traces_needing_analysis(db, ANALYSIS_VERSION)
    for trace_id in stale:
        ensure_analysis(db, cache, trace_id)
    return len(stale)


def computed_credit(db: Database, cache: TraceCache, trace_id: str, rule: str, channel: str) -> list[float]:
    """A reward channel's value spread over the events by `rule` (see credit.assign); cached per trace."""
    # The version before the trace: read after it, a replace in between would key the old credit as new.
    version = trace_store.trace_version(db, trace_id)
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
