"""Triage of a trace's audit findings: a stable id per finding, the marks a reviewer sets on one, and which marks
take a finding out of what still fails an audit. Pure."""

import hashlib
import json

MARKS = ("reviewed", "accepted_risk", "false_positive")
# Marked so, a finding no longer fails `orchestrace audit --fail-on` nor counts as remaining: a person has judged it
DISMISSED = ("accepted_risk", "false_positive")


def finding_id(finding: dict) -> str:
    """The same finding's id whenever the same trace is analysed again: its rule and the events it names (its
    message when it names none: a count, a cost disagreement)."""
    what = finding["events"] or finding["message"]
    return "f-" + hashlib.sha256(json.dumps([finding["rule"], what]).encode()).hexdigest()[:16]


def with_ids(findings: list[dict]) -> list[dict]:
    """The findings, each with its id (a repeat of the same rule and events numbered after the first)."""
    seen: dict[str, int] = {}
    out = []
    for f in findings:
        base = finding_id(f)
        seen[base] = seen.get(base, 0) + 1
        out.append(f | {"id": base if seen[base] == 1 else f"{base}-{seen[base]}"})
    return out


def remaining(findings: list[dict]) -> list[dict]:
    """The findings nobody has marked yet."""
    return [f for f in findings if f.get("mark") is None]


def failing(findings: list[dict]) -> list[dict]:
    """The findings that still fail an audit: all but those marked accepted_risk or false_positive."""
    return [f for f in findings if (f.get("mark") or {}).get("mark") not in DISMISSED]


def grouped(findings: list[dict], by: str) -> list[dict]:
    """Findings grouped by `rule` or by source `agent` (the agent of their first event), largest groups first."""
    groups: dict[str, list[dict]] = {}
    for f in findings:
        groups.setdefault(f[by] or "(no event)", []).append(f)
    return [{"key": key, "findings": members, "remaining": len(remaining(members))}
            for key, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
