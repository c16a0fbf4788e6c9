"""HTML pages: the trace list with upload, and the trace page with graph, inspector and events table."""

from urllib.parse import quote

from fastapi import APIRouter, BackgroundTasks, Depends, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.domain import charts
from app.domain.audit import RULES as AUDIT_RULES
from app.domain.audit import SEVERITIES, group_by_rule
from app.domain.credit import RULES
from app.domain.figure import spawn_tree
from app.domain.metrics import reported_differences
from app.domain.overlays import describe
from app.domain.paging import fetch_page
from app.domain.refusals import Refusal, status_of
from app.domain.taxonomy import EVENT_TYPES
from app.ingest.pipeline import InvalidTraces, ingest
from app.services import analysis, diff, graph, labels, live
from app.store import labels as label_store
from app.store import traces as trace_store
from app.store.db import stored_utc
from app.store.writes import TracesExist
from app.web.access import AnyViewer, Reviewer, may_call, replace_refusal
from app.web.browser import require_csrf, reviewer_of
from app.web.deps import CacheDep, CorpusDep, DbDep, SettingsDep, TraceId, Viewer
from app.web.event_view import content_view
from app.web.label_form import label_context
from app.web.render import is_htmx, render
from app.web.requests import read_uploads
from app.web.security import Forbidden

router = APIRouter(include_in_schema=False)

TRACES_PER_PAGE = 25
EVENTS_PER_PAGE = 50
DEFAULT_TRACE_SORT = "-ingested_at"


REWARD_COLUMNS = 3  # reward channels the trace list shows unless the reader picks: the table fits 1440 px


def shown_channels(channels: list[str], picked: list[str], items: list[dict], sort: str) -> list[str]:
    """The reward channels the trace list shows as columns: those picked (in corpus order), else the channels most
    traces of the page report, up to REWARD_COLUMNS; the channel it is sorted by always."""
    shown = [c for c in channels if c in picked]  # a channel no trace reports is no column
    if not shown:
        counts = {c: sum(c in t["rewards"] for t in items) for c in channels}
        shown = sorted((c for c in channels if counts[c]), key=lambda c: (-counts[c], channels.index(c)))
        shown = [c for c in channels if c in shown[:REWARD_COLUMNS]]
    by = sort.lstrip("-")
    if by.startswith("reward:") and by[len("reward:"):] in channels and by[len("reward:"):] not in shown:
        shown.append(by[len("reward:"):])
    return shown


def trace_list_context(db, facts, asked: dict, sort, page, reviewer=None) -> dict:
    """The trace list's page for the filters as asked (see trace_store.parse_filters): filters or a sort a request
    names badly are left out and said (`refused`)."""
    refused = []
    try:
        filters = trace_store.parse_filters(**{k: v for k, v in asked.items() if k != "rewards"})
    except ValueError as exc:
        refused.append(str(exc))
        filters = trace_store.TraceFilters()
    try:
        trace_store.parse_sort(sort)
    except ValueError as exc:
        refused.append(str(exc))
        sort = DEFAULT_TRACE_SORT
    (items, total, page, pages), facets = db.together(
        lambda: fetch_page(page, TRACES_PER_PAGE,
                           lambda limit, offset: trace_store.list_traces(db, filters, sort, limit, offset)),
        facts.trace_facets)
    channels = facets["reward_channels"]
    ids = [t["trace_id"] for t in items]
    labelled, receiving = db.together(lambda: label_store.label_progress(db, reviewer, ids),
                                      lambda: live.receiving_trace_ids(db, ids))
    texts = [text for text in asked.get("ranges", ()) if text]
    return {"items": items, "total": total, "page": page, "pages": pages, "sort": sort, "refused": refused,
            "filters": {key: asked.get(key) or "" for key in ("q", "system", "topology", "task", "finding")},
            "filtered": filters != trace_store.TraceFilters(), "rules": AUDIT_RULES,
            "ranges": [{"text": text, "key": key, "low": low, "high": high, "others": texts[:i] + texts[i + 1:]}
                       for i, (text, (key, low, high)) in enumerate(zip(texts, filters.ranges))],
            "facets": facets,
            "shown_channels": shown_channels(channels, asked.get("rewards") or [], items, sort),
            "labelled": labelled, "receiving": receiving}


@router.get("/", dependencies=[AnyViewer])
def read_trace_list(request: Request, db: DbDep, facts: CorpusDep, q: str | None = None, system: str | None = None,
                    topology: str | None = None, task: str | None = None, finding: str | None = None,
                    ranges: list[str] = Query([], alias="range"), sort: str = DEFAULT_TRACE_SORT, page: int = 1,
                    deleted: str | None = None, rewards: list[str] = Query([], alias="reward")):
    """The trace list; `deleted` (where the trace page's delete control lands) says what became of its labels;
    `reward` (repeated) picks the reward channels shown as columns."""
    asked = {"q": q, "system": system, "topology": topology, "task": task, "finding": finding, "ranges": ranges,
             "rewards": rewards}
    context = trace_list_context(db, facts, asked, sort, page, reviewer_of(request))
    if deleted and not trace_store.trace_exists(db, deleted):
        context["deleted"] = {"trace_id": deleted, "labels": label_store.label_count(db, deleted)}
    return render(request, "trace_list.html", context, fragments=("_trace_table.html",))


NO_FILE = ("No file chosen: choose one or more .json, .jsonl or .gz files with the file button, or drop them "
           "on the dashed box, then press Upload.")


@router.post("/upload", dependencies=[Reviewer, Depends(require_csrf)])
async def create_upload(request: Request, db: DbDep, facts: CorpusDep, settings: SettingsDep,
                        background: BackgroundTasks, replace: bool = False):
    """The upload form: ingest the files, then show what was stored or every reason it was refused; ids
    stored already are offered for replacing (the same files posted again with replace=true), which is an
    admin's. A large trace's lanes are kept once the page has answered, as after POST /api/traces."""
    result: dict = {"ingested": [], "errors": [], "error": None, "warnings": [], "taken": [], "orphaned": [],
                    "replace": replace, "may_replace": replace_refusal(request) is None}
    try:
        if replace and (refused := replace_refusal(request)):
            raise Forbidden(refused)
        uploads = await read_uploads(request)
        result["ingested"], _, result["warnings"], events = await run_in_threadpool(
            ingest, db, uploads, "replace" if replace else "error", settings.max_body_bytes,
            content_policy=settings.content, endpoint="POST /upload")
        background.add_task(graph.prepare_lod, db, events)
        status = 201
    except HTTPException as exc:  # read_uploads refuses a form sent with no file chosen
        result["error"], status = NO_FILE, exc.status_code
    except Refusal as exc:  # unreadable, invalid, an id taken, too large: each says what and where
        result["error"], status = str(exc), status_of(exc)
        result["errors"] = exc.errors if isinstance(exc, InvalidTraces) else []
        result["taken"] = exc.trace_ids if isinstance(exc, TracesExist) else []
    if replace:  # labels of events the new version lacks are kept, orphaned: say so
        result["orphaned"] = [o for trace_id in result["ingested"]
                              for o in label_store.orphaned_labels(db, reviewer_of(request), trace_id)]
    context = trace_list_context(db, facts, {}, DEFAULT_TRACE_SORT, 1, reviewer_of(request))
    context["upload"] = result
    return render(request, "trace_list.html", context, fragments=("_upload_result.html",), status_code=status)


def nest_spawn_tree(events: list[dict], counts: dict[str, int]) -> list[dict]:
    """The spawn tree as nested nodes (agent, role, events, children) for the collapsible panel."""
    order, parents, roles = spawn_tree(events)
    nodes = {a: {"agent": a, "role": roles[a], "events": counts.get(a, 0), "children": []} for a in order}
    roots = []
    for agent in order:
        parent = parents.get(agent)
        (nodes[parent]["children"] if parent in nodes else roots).append(nodes[agent])
    return roots


def split_lanes(rows: list[dict]) -> dict:
    """The agent facet's rows as agents (team members) and the other lanes, with "9 tools", "1 person"."""
    others = [row for row in rows if row["kind"] != "agent"]
    tools = sum(row["kind"] == "tool" for row in others)
    people = len(others) - tools
    words = ([f"{tools} tool" + ("" if tools == 1 else "s")] if tools else []) + (
        [f"{people} " + ("person" if people == 1 else "people")] if people else [])
    return {"agents": [row for row in rows if row["kind"] == "agent"], "others": others, "other_words": words}


@router.get("/traces/{trace_id}", dependencies=[AnyViewer])
def read_trace_page(request: Request, trace_id: TraceId, db: DbDep, cache: CacheDep, event: str | None = None,
                    type: str | None = None, agent: str | None = None, role: str | None = None,
                    sort: str = "seq", page: int = 1, queue: str | None = None):
    summary = trace_store.read_trace_summary(db, trace_id)
    reviewer = reviewer_of(request)
    # Every read but the summary's needs none of the others' rows: on a lake, where each waits on its catalog round
    # trips, they run side by side (a first open of a large trace read six one after the other).
    reads = {
        "events": lambda: fetch_page(page, EVENTS_PER_PAGE, lambda limit, offset: trace_store.list_events(
            db, trace_id, type, agent, role, sort, limit, offset)),
        "facets": lambda: trace_store.event_facets(db, trace_id),
        "live": lambda: live.live_status(db, trace_id),
        "progress": lambda: labels.progress(db, trace_id, reviewer),
        "compare_with": lambda: diff.compare_candidates(db, summary),
        "skeleton": lambda: graph.skeleton_events(db, cache, trace_id, stored_utc(summary["ingested_at"])),
    }
    if summary["events"] <= graph.LOD_ABOVE:  # a large trace's channels come after its graph (trace.js): reading
        reads["channels"] = lambda: graph.overlay_channels(db, cache, reviewer, trace_id)  # every event takes seconds
    if event:
        reads |= {"selected": lambda: trace_store.read_event(db, trace_id, event),
                  "selected_edges": lambda: trace_store.read_event_edges(db, trace_id, event),
                  "selected_neighbours": lambda: trace_store.lane_neighbours(db, trace_id, event)}
    if may_delete(request, trace_id):
        reads["label_versions"] = lambda: label_store.label_count(db, trace_id)
    read = dict(zip(reads, db.together(*reads.values())))
    rows, total, page, pages = read.pop("events")
    facets, skeleton = read["facets"], read.pop("skeleton")
    selected = read.get("selected")
    context = read | {
        "trace": summary,
        "lanes": split_lanes(facets["agent"]),
        "event_types": EVENT_TYPES,
        "events": {"rows": rows, "total": total, "page": page, "pages": pages,
                   "sort": sort, "filters": {"type": type or "", "agent": agent or "", "role": role or ""}},
        "selected": selected,
        "selected_edges": read.get("selected_edges") if selected else None,
        "selected_neighbours": read.get("selected_neighbours") if selected else None,
        "missing_event": event if event and not selected else None,
        "content": content_view(selected["event"]) if selected else None,
        "channels": describe(read["channels"]) if "channels" in read else None,
        "computed_channels": analysis.computed_channel_names(summary["rewards"]),
        "tree": cache.get_or_build(("tree", trace_id, summary["ingested_at"]), lambda: nest_spawn_tree(
            skeleton, {row["value"]: row["n"] for row in facets["agent"]})),
    }
    if selected:
        context |= label_context(db, trace_id, selected["event"]["id"], reviewer, queue)
    return render(request, "trace_detail.html", context,
                  fragments=("_events_table.html", "_event_inspector.html"))


def may_delete(request: Request, trace_id: str) -> bool:
    """Whether this browser may delete the trace through the JSON API (the page offers it only then): what the
    DELETE route declares lets the caller call it."""
    return may_call(request, "DELETE", f"/api/traces/{quote(trace_id, safe='')}")


@router.get("/traces/{trace_id}/analysis", dependencies=[AnyViewer])
def read_analysis_panel(request: Request, trace_id: TraceId, db: DbDep, cache: CacheDep):
    """Metrics, deployment envelope and audit findings of a trace, loaded after the page (htmx)."""
    if not is_htmx(request):
        return panel_on_page(trace_id, "analysis-panel")
    result = analysis.ensure_analysis(db, cache, trace_id)
    metrics = result["metrics"]
    figures = {"envelope": charts.envelope_chart(metrics["spawns"], metrics["tool_calls"], metrics["events"])}
    return render(request, "_analysis_panel.html", {
        "trace_id": trace_id, "metrics": metrics, "figures": figures,
        "reported": reported_differences(trace_store.read_trace_summary(db, trace_id), metrics),
        "severity_counts": {s: sum(f["severity"] == s for f in result["findings"]) for s in SEVERITIES},
        "rule_groups": group_by_rule(result["findings"])})


@router.get("/traces/{trace_id}/credit", dependencies=[AnyViewer])
def read_credit_panel(request: Request, trace_id: TraceId, db: DbDep, cache: CacheDep, viewer: Viewer,
                      rule: str = "causal", channel: str | None = None):
    """Computed credit rolled up to the eight credit units, beside the reviewers' mean credit."""
    if not is_htmx(request):
        return panel_on_page(trace_id, "credit-panel")
    trace = analysis.stored_trace(db, cache, trace_id)
    channels = list(trace["rewards"])
    channel = channel if channel in channels else (channels[0] if channels else None)
    context = {"trace_id": trace_id, "rules": RULES, "rule": rule if rule in RULES else "causal",
               "channels": channels, "channel": channel, "figures": {}}
    if channel is not None:
        values = analysis.computed_credit(db, cache, trace_id, context["rule"], channel)
        human = (graph.overlay_channels(db, cache, viewer, trace_id) or {}).get(graph.HUMAN_MEAN)
        report = analysis.credit_report(db, cache, trace_id, values, human)
        context |= report
        context["figures"] = {f"rollup-{unit}": charts.rollup_chart(f"credit by {unit}", report["rollup"][unit])
                              for unit in ("agent", "role")}
        if human:
            pairs = [(c, h, e["id"]) for c, h, e in zip(values, human, trace["events"]) if h is not None]
            # what keeps a correlation from being computed over two or more pairs: a side that does not vary
            context["constant"] = [side for side, k in (("human mean credit", 1), ("computed credit", 0))
                                   if len({p[k] for p in pairs if p[0] is not None}) == 1]
            context["figures"]["human-vs-computed"] = charts.scatter(
                "human mean credit vs computed", [p[0] for p in pairs], [p[1] for p in pairs],
                f"computed ({context['rule']} × {channel})", "human mean", names=[p[2] for p in pairs])
    return render(request, "_credit_panel.html", context)


def panel_on_page(trace_id: str, panel: str) -> RedirectResponse:
    """A panel's URL opened directly (a link, a reload) shows the trace page, where the panel loads."""
    response = RedirectResponse(f"/traces/{quote(trace_id, safe='')}#{panel}", status_code=303)
    response.headers["Vary"] = "HX-Request"
    return response
