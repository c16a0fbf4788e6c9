"""Corpus-wide pages: the audit table (traces × rules) and the dashboard of charts across traces."""

from urllib.parse import urlencode

from fastapi import APIRouter, Request

from app.domain import charts
from app.domain.audit import RULES, SEVERITIES, SUMMARIES
from app.domain.paging import fetch_page
from app.services.corpus import corpus_fact
from app.store import corpus as corpus_store
from app.web.access import AnyViewer
from app.web.deps import CorpusDep, DbDep
from app.web.render import render

router = APIRouter(include_in_schema=False)


AUDIT_ROWS_PER_PAGE = 50
DEFAULT_AUDIT_SORT = "-error"


@corpus_fact("rule totals", analyses=True)
def rule_totals(db, _) -> dict[str, dict]:
    return corpus_store.rule_totals(db)


@router.get("/audit", dependencies=[AnyViewer])
def read_audit_page(request: Request, db: DbDep, facts: CorpusDep, sort: str = DEFAULT_AUDIT_SORT, page: int = 1):
    """Findings by rule across the corpus (errors first, then most; a corpus fact), then one page
    of traces × the rules that found anything, sorted by a rule, a severity or the trace id."""
    if sort.lstrip("-") not in (*corpus_store.AUDIT_SORTS, *RULES):
        sort = DEFAULT_AUDIT_SORT
    (rows, total, page, pages), found = db.together(
        lambda: fetch_page(page, AUDIT_ROWS_PER_PAGE,
                           lambda limit, offset: corpus_store.audit_page(db, sort, limit, offset)),
        lambda: facts.get(rule_totals))
    totals = sorted(({"rule": rule, "severity": RULES[rule], "summary": SUMMARIES[rule], **found[rule]}
                     for rule in found if rule in RULES),
                    key=lambda t: (SEVERITIES.index(t["severity"]), -t["findings"], t["rule"]))
    return render(request, "audit.html", {
        "rows": rows, "total": total, "page": page, "pages": pages, "rows_per_page": AUDIT_ROWS_PER_PAGE,
        "totals": totals, "sort": sort,
        "summaries": SUMMARIES, "rules": {rule: severity for rule, severity in RULES.items() if rule in found},
        "quiet_rules": [rule for rule in RULES if rule not in found]}, fragments=("_audit_rows.html",))


POINTS_UP_TO = 1_000  # a chart of more traces than this draws bins: the browser gets no more marks than pixels
# The dashboard's 2-D charts (name, title, x, y), the axes named by trace-list sort keys; then one per reward channel.
PLOTS = (("tokens-speedup", "tokens vs parallelism speedup", "parallelism_speedup", "tokens"),
         ("steps-wall", "critical steps vs wall clock", "wall_clock_s", "critical_path_steps"))
AXIS_LABELS = {"parallelism_speedup": "parallelism speedup", "tokens": "tokens", "wall_clock_s": "wall clock s",
               "critical_path_steps": "critical steps", "agents": "agents"}


@router.get("/dashboard", dependencies=[AnyViewer])
def read_dashboard(request: Request, facts: CorpusDep):
    """Charts across all traces, each computed by DuckDB: a point per trace linking to it while the corpus has at
    most POINTS_UP_TO traces, else counts in bins linking to the trace list filtered to them; bars link likewise.
    A corpus fact (app/services/corpus.py): built again in the background after writes."""
    context = facts.get(dashboard)
    return render(request, "dashboard.html", context | {"points_up_to": POINTS_UP_TO})


@corpus_fact("dashboard", analyses=True)
def dashboard(db, facts) -> dict:
    """The dashboard's figures, reward channels and number of traces."""
    channels = facts.reward_channels()
    plots = PLOTS + tuple((f"reward-{c}", f"reward '{c}' vs agents", "agents", f"reward:{c}") for c in channels)
    keys = sorted({key for *_, x, y in plots for key in (x, y)})
    counts = corpus_store.corpus_counts(db, keys)  # with the measures' extents: the bins need no read of their own
    n_traces = counts["traces"]
    figures = points(db, plots, keys) if n_traces <= POINTS_UP_TO else bins(db, plots, counts["extents"])
    for column in corpus_store.COUNTED:
        figures[f"by-{column}"] = charts.bar_chart(
            f"traces by {column}", {row["value"] or "(none)": row["n"] for row in counts[column]},
            links=[list_url((column, row["value"])) if row["value"] else None for row in counts[column]])
    findings = counts["findings"]
    figures["findings"] = charts.bar_chart("audit findings by rule", findings,
                                           links=[list_url(("finding", rule)) for rule in findings])
    return {"figures": figures, "channels": channels, "n_traces": n_traces}


def axis_label(key: str) -> str:
    return AXIS_LABELS.get(key, key.removeprefix("reward:"))


def points(db, plots: tuple, keys: list[str]) -> dict:
    """Each plot as a point per trace with both measures, linking to the trace."""
    rows = corpus_store.measure_rows(db, keys, POINTS_UP_TO)
    figures = {}
    for name, title, x, y in plots:
        a, b = f"x{keys.index(x)}", f"x{keys.index(y)}"
        have = [row for row in rows if row[a] is not None and row[b] is not None]
        figures[name] = charts.scatter(title, [row[a] for row in have], [row[b] for row in have], axis_label(x),
                                       axis_label(y), ids=[row["trace_id"] for row in have], links=True)
    return figures


def bins(db, plots: tuple, extents: dict[str, dict]) -> dict:
    """Each plot as its traces counted in 2-D bins on round grids over the measures' `extents` (corpus_counts), a
    bin linking to the trace list filtered to it."""
    grids = {key: charts.grid(e["low"], e["high"], e["whole"]) for key, e in extents.items() if e["n"]}
    drawn = [plot for plot in plots if plot[2] in grids and plot[3] in grids]
    counts = corpus_store.measure_bins(db, grids, [(x, y) for *_, x, y in drawn])
    figures = {}
    for (name, title, x, y), cells in zip(drawn, counts):
        links = {(i, j): list_url(("range", f"{x}:{grids[x].text(i)}:{grids[x].text(i + 1)}"),
                                  ("range", f"{y}:{grids[y].text(j)}:{grids[y].text(j + 1)}")) for i, j in cells}
        n = sum(cells.values())
        figures[name] = charts.density(f"{title}: {n:,} trace{'' if n == 1 else 's'}", grids[x], grids[y], cells,
                                       axis_label(x), axis_label(y), links)
    for name, title, x, y in plots:  # a measure no trace has: nothing to draw
        figures.setdefault(name, charts.scatter(title, [], [], axis_label(x), axis_label(y)))
    return figures


def list_url(*params: tuple[str, str]) -> str:
    """The trace list filtered by these parameters."""
    return "/?" + urlencode(params)
