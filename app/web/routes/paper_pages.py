"""HTML pages of the paper pool: browse with filters, one paper with tagging, the exclusion log,
corpus statistics with charts, and where reviewers (or a reviewer and the pool) disagree."""

from urllib.parse import urlparse

from fastapi import APIRouter, Depends, Request

from app.domain import charts
from app.domain.agreement import agreement
from app.domain.paging import fetch_page
from app.domain.taxonomy import PAPER_FIELDS
from app.services import papers
from app.services.labels import LabelError
from app.store import labels as label_store
from app.store import papers as paper_store
from app.web.access import AnyViewer, Reviewer
from app.web.browser import require_csrf, reviewer_of
from app.web.deps import DbDep
from app.web.render import render

router = APIRouter(include_in_schema=False)
PAPERS_PER_PAGE = 25


@router.get("/papers", dependencies=[AnyViewer])
def read_papers_page(request: Request, db: DbDep, q: str | None = None, sort: str = "position", page: int = 1):
    filters = {field: request.query_params.getlist(field) for field in PAPER_FIELDS}
    filters = {field: [v for v in values if v] for field, values in filters.items()}
    (rows, total, page, pages), pool_size = db.together(  # side by side on a lake
        lambda: fetch_page(page, PAPERS_PER_PAGE,
                           lambda limit, offset: paper_store.list_papers(db, filters, q, sort, limit, offset)),
        lambda: paper_store.pool_size(db))
    context = {"papers": rows, "total": total, "page": page, "pages": pages,
               "filters": filters, "q": q or "", "sort": sort, "fields": PAPER_FIELDS, "pool_size": pool_size}
    return render(request, "papers.html", context, fragments=("_papers_table.html",))


@router.get("/papers/excluded", dependencies=[AnyViewer])
def read_excluded_page(request: Request, db: DbDep, stage: str | None = None, source: str | None = None,
                       query_family: str | None = None):
    records, facets = db.together(lambda: paper_store.list_excluded(db, stage, source, query_family),
                                  lambda: paper_store.excluded_facets(db))  # side by side on a lake
    context = {"records": records, "facets": facets,
               "filters": {"stage": stage or "", "source": source or "", "query_family": query_family or ""}}
    return render(request, "papers_excluded.html", context, fragments=("_excluded_table.html",))


@router.get("/papers/stats", dependencies=[AnyViewer])
def read_stats_page(request: Request, db: DbDep, source: str = papers.POOL):
    sources = [papers.POOL, *papers.taggers(db)]
    source = source if source in sources else papers.POOL
    stats = papers.stats(db, source)
    figures = {f"count-{field}": charts.bar_chart(field, counts) for field, counts in stats["counts"].items()}
    for name, table in stats["crosstabs"].items():
        y_label, x_label = name.split(" x ")
        figures[f"cross-{name}"] = charts.heatmap(name, table, x_label, y_label)
    for field, counts in stats["excluded_counts"].items():
        figures[f"excluded-{field}"] = charts.bar_chart(f"excluded by {field}", counts)
    return render(request, "papers_stats.html", {"stats": stats, "figures": figures, "sources": sources})


@router.get("/papers/disagreements", dependencies=[AnyViewer])
def read_disagreements_page(request: Request, db: DbDep, reviewers: str | None = None):
    """Per controlled field, the papers where the chosen raters differ (the pool counts as a rater)."""
    everyone = [papers.POOL, *papers.taggers(db)]
    chosen = [r for r in (reviewers or ",".join(everyone)).split(",") if r in everyone]
    fields = {}
    for field in PAPER_FIELDS:
        fields[field] = {"rows": papers.disagreements(db, field, chosen),
                         "agreement": agreement(papers.ratings(db, field, chosen), chosen) if len(chosen) >= 2
                         else None}
    return render(request, "papers_disagreements.html", {"fields": fields, "everyone": everyone, "chosen": chosen})


def paper_context(db, key: str, reviewer: str | None, **extra) -> dict | None:
    paper = paper_store.read_paper(db, key)
    if paper is None:
        return None
    current = {t["reviewer"]: t for t in papers.tag_history(db, key, history=False)}
    mine = current.get(reviewer) if reviewer else None
    return {"paper": paper, "fields": PAPER_FIELDS, "tags": current, "mine": shown_tags(mine),
            "history": tag_changes(papers.tag_history(db, key)),
            "url_ok": urlparse(paper["url"]).scheme in ("http", "https"),
            "events": label_store.events_labelled_with_paper(db, reviewer, key)} | extra


@router.get("/papers/{key}", dependencies=[AnyViewer])
def read_paper_page(request: Request, key: str, db: DbDep):
    context = paper_context(db, key, reviewer_of(request))
    if context is None:
        return render(request, "not_found.html", {"what": f"paper '{key}'"}, status_code=404)
    return render(request, "paper_detail.html", context, fragments=("_paper_tags.html",))


@router.post("/papers/{key}/tags", dependencies=[Reviewer, Depends(require_csrf)])
async def save_paper_tags_form(request: Request, key: str, db: DbDep):
    """The tag form: saves, as a new version, only the fields the reviewer changed; the rest keep their
    value, so a field left on "as the pool says" keeps following the pool."""
    form = await request.form()
    reviewer = reviewer_of(request)
    status, code = None, 200
    try:
        if reviewer is None:
            raise LabelError("reviewer", "pick a reviewer name first (top right)")
        changed = changed_tags(form)
        if changed:
            saved = papers.save_tags(db, key, {"reviewer": reviewer} | changed)
            status = f"saved v{saved['version']}"
        else:
            status = "nothing changed: no new version"
    except LabelError as exc:
        status, code = str(exc), 422
    context = paper_context(db, key, reviewer, status=status, status_code=code)
    if context is None:
        return render(request, "not_found.html", {"what": f"paper '{key}'"}, status_code=404)
    return render(request, "paper_detail.html", context, fragments=("_paper_tags.html",), status_code=code)


def tag_changes(versions: list[dict]) -> list[dict]:
    """Each tag version with the fields (and note) it changed from the same reviewer's previous one."""
    previous: dict[str, dict] = {}
    rows = []
    for version in versions:
        before = previous.get(version["reviewer"], {})
        changed = [f for f in (*PAPER_FIELDS, "note") if version[f] != before.get(f, "" if f == "note" else None)]
        rows.append(version | {"changed": changed})
        previous[version["reviewer"]] = version
    return rows


def shown_tags(mine: dict | None) -> dict:
    """What the tag form shows for a reviewer: their value per field ("" follows the pool) and their note."""
    return {f: (mine[f] or "") if mine else "" for f in (*PAPER_FIELDS, "note")}


def changed_tags(form) -> dict:
    """The fields whose value differs from the one the form showed (its `was_<field>` inputs); "" is
    "as the pool says". A form without them (a hand-made post) saves every field it sends."""
    changed = {}
    for field in (*PAPER_FIELDS, "note"):
        value = form.get(field)
        if value is not None and value != form.get(f"was_{field}"):
            changed[field] = value
    return changed
