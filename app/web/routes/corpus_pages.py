"""Corpus-wide pages: the audit table (traces × rules) and the dashboard of charts across traces."""

from fastapi import APIRouter, Request

from app.domain import charts
from app.domain.audit import RULES, SEVERITIES, SUMMARIES
from app.store import analysis as analysis_store
from app.web.access import AnyViewer
from app.web.deps import DbDep
from app.web.render import render

router = APIRouter(include_in_schema=False)


def audit_rows(db, sort: str = "-error") -> list[dict]:
    """Traces × rules with counts, as stored when the traces were; sort by a rule, a severity or the trace id."""
    rows = analysis_store.audit_matrix(db)
    key = sort.lstrip("-")
    reverse = sort.startswith("-")
    if key in RULES:
        rows.sort(key=lambda r: (r["rules"].get(key, 0), r["trace_id"]), reverse=reverse)
    elif key in ("error", "warning", "info"):
        rows.sort(key=lambda r: (r[key], r["trace_id"]), reverse=reverse)
    else:
        rows.sort(key=lambda r: r["trace_id"], reverse=reverse)
    return rows


def rule_totals(rows: list[dict]) -> list[dict]:
    """Per rule with findings: its severity, findings and traces across the corpus; errors first, then most."""
    totals = [{"rule": rule, "severity": severity, "summary": SUMMARIES[rule],
               "findings": sum(r["rules"].get(rule, 0) for r in rows),
               "traces": sum(1 for r in rows if r["rules"].get(rule))} for rule, severity in RULES.items()]
    return sorted((t for t in totals if t["findings"]),
                  key=lambda t: (SEVERITIES.index(t["severity"]), -t["findings"], t["rule"]))


@router.get("/audit", dependencies=[AnyViewer])
def read_audit_page(request: Request, db: DbDep, sort: str = "-error"):
    """Findings by rule across the corpus, then traces × the rules that found anything."""
    rows = audit_rows(db, sort)
    totals = rule_totals(rows)
    found = {t["rule"] for t in totals}
    return render(request, "audit.html", {
        "rows": rows, "totals": totals, "sort": sort, "summaries": SUMMARIES,
        "rules": {rule: severity for rule, severity in RULES.items() if rule in found},
        "quiet_rules": [rule for rule in RULES if rule not in found]})


@router.get("/dashboard", dependencies=[AnyViewer])
def read_dashboard(request: Request, db: DbDep):
    """Charts across all traces; every point links to its trace."""
    points = analysis_store.corpus_points(db)
    ids = [p["trace_id"] for p in points]
    figures = {}
    channels = sorted({c for p in points for c in p["rewards"]})
    for channel in channels:
        have = [p for p in points if channel in p["rewards"]]
        figures[f"reward-{channel}"] = charts.scatter(
            f"reward '{channel}' vs agents", [p["agents"] for p in have], [p["rewards"][channel] for p in have],
            "agents", channel, ids=[p["trace_id"] for p in have], links=True)
    figures["tokens-speedup"] = charts.scatter("tokens vs parallelism speedup", [p["parallelism_speedup"] for p in points],
                                               [p["tokens"] for p in points], "parallelism speedup", "tokens",
                                               ids=ids, links=True)
    figures["steps-wall"] = charts.scatter("critical steps vs wall clock", [p["wall_clock_s"] for p in points],
                                           [p["critical_path_steps"] for p in points], "wall clock s",
                                           "critical steps", ids=ids, links=True)
    figures["by-topology"] = charts.bar_chart("traces by topology", _count(p["topology"] or "(none)" for p in points))
    figures["by-system"] = charts.bar_chart("traces by system", _count(p["system"] or "(none)" for p in points))
    figures["findings"] = charts.bar_chart("audit findings by rule", analysis_store.findings_by_rule(db))
    return render(request, "dashboard.html", {"figures": figures, "channels": channels, "n_traces": len(points)})


def _count(values) -> dict[str, int]:
    counts: dict[str, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))
