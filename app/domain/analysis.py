"""One trace's stored analysis: its metrics, its audit findings and their counts by severity, and the version
number that says which metrics and rules made them. Pure, like the metrics and the audit it runs."""

import hashlib
import json

from app.domain.audit import AUDIT_RULES, MAX_FINDINGS_PER_RULE, SEVERITIES, Rule, audit
from app.domain.metrics import TraceGraph, analyse_graph, compute_metrics

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


def analyse(trace: dict, g: TraceGraph | None = None) -> dict:
    """{"metrics", "findings", "counts"} of one trace; counts are its findings by severity."""
    g = g or analyse_graph(trace)
    findings = audit(trace, g)
    counts = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        counts[f["severity"]] += 1
    return {"metrics": compute_metrics(trace, g), "findings": findings, "counts": counts}
