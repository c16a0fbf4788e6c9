"""Rollout groups (traces sharing a task, a system or a topology) in JSON and as pages: each group's reward spread,
and one group's rollouts ranked by advantage. A group key may hold '/': the path takes the rest of the URL
(`{key:path}`), the key URL-encoded or not."""

from urllib.parse import quote

from fastapi import APIRouter, Query, Request

from app.domain.groups import (
    STATS,
    parse_group_sort,
    ranked,
    spread_marks,
    structure_figures,
)
from app.domain.paging import MAX_OFFSET, fetch_page
from app.services import groups
from app.store import groups as group_store
from app.web.access import AnyViewer
from app.web.apidoc import (
    COUNT,
    INVALID,
    NUMBER,
    OBJECT,
    READ_REFUSALS,
    TEXT,
    object_schema,
    reply,
)
from app.web.deps import DbDep
from app.web.render import render
from app.web.responses import JsonBody

router = APIRouter(tags=["groups"])

DEFAULT_BY = "task_id"
DEFAULT_SORT = "key"
By = Query(DEFAULT_BY, description=f"the field a group's traces share: one of {', '.join(group_store.GROUP_BY)}")
STATS_SCHEMA = {"type": "object", "description": "channel -> {mean, std (population), min, max}",
                "additionalProperties": object_schema({stat: NUMBER for stat in STATS}, *STATS)}
GROUP = object_schema({"key": TEXT, "n": COUNT, "rewards": STATS_SCHEMA}, "key", "n", "rewards")
MAYBE_NUMBER = {"type": ["number", "null"]}
ROLLOUT = object_schema({
    "trace_id": TEXT, "rewards": OBJECT, "advantage": {"type": "object", "additionalProperties": NUMBER},
    "agents": COUNT, "events": COUNT, "spawns": {"type": ["integer", "null"]},
    "critical_steps": {"type": ["integer", "null"]}, "parallel_speedup": MAYBE_NUMBER},
    "trace_id", "rewards", "advantage")
BAD_PARAMETER = {400: reply("`by` names no group key (a reward channel, an unknown field) or `sort` no sort key "
                            "(the parameter is named in `parameter`), or the Host header names a host this server "
                            "does not answer to", object_schema({"error": TEXT, "parameter": TEXT}, "error"))}


@router.get("/api/groups", dependencies=[AnyViewer], responses=READ_REFUSALS | BAD_PARAMETER | INVALID | {
    200: reply("one page of groups with their reward statistics, and how many groups there are",
               object_schema({"groups": {"type": "array", "items": GROUP}, "total": COUNT}, "groups", "total"))})
def read_groups(db: DbDep, by: str = By,
                sort: str = Query(DEFAULT_SORT, description="key, n or <mean|std|min|max>:<channel>; - first for "
                                                             "descending"),
                limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0, le=MAX_OFFSET)):
    """Groups of traces sharing `by`, each with its size and its rewards' statistics per channel."""
    page, total = groups.list_groups(db, by, sort, limit, offset)
    return JsonBody({"groups": page, "total": total})


@router.get("/api/groups/{key:path}", dependencies=[AnyViewer], responses=READ_REFUSALS | BAD_PARAMETER | {
    404: reply("no trace has this key"),
    200: reply("the group's rollouts, each with its advantage per reward channel", object_schema(
        {"key": TEXT, "n": COUNT, "rewards": STATS_SCHEMA, "rollouts": {"type": "array", "items": ROLLOUT}},
        "key", "n", "rollouts"))})
def read_group(key: str, db: DbDep, by: str = By):
    """One group's rollouts in id order, each with its advantage per channel: (r - mean) / std within the group
    (population std), 0 when the std is 0."""
    return JsonBody(groups.read_group(db, by, key))


GROUPS_PER_PAGE = 50
ROLLOUTS_PER_PAGE = 50


@router.get("/groups", dependencies=[AnyViewer], include_in_schema=False)
def read_groups_page(request: Request, db: DbDep, by: str = DEFAULT_BY, sort: str = DEFAULT_SORT, page: int = 1):
    """The groups of traces sharing `by`, a page at a time, each group's reward spread on every channel drawn on
    the channel's scale across the corpus."""
    by = by if by in group_store.GROUP_BY else DEFAULT_BY  # a hand-edited link shows the default, as /audit does
    sort = sort if valid_sort(sort) else DEFAULT_SORT
    (rows, total, page, pages), extents = db.together(  # side by side on a lake
        lambda: fetch_page(page, GROUPS_PER_PAGE,
                           lambda limit, offset: groups.list_groups(db, by, sort, limit, offset)),
        lambda: group_store.channel_extents(db))
    for row in rows:
        row["marks"] = {channel: spread_marks(stats, *extents[channel]) for channel, stats in row["rewards"].items()}
    return render(request, "groups.html", {
        "rows": rows, "total": total, "page": page, "pages": pages, "rows_per_page": GROUPS_PER_PAGE,
        "by": by, "group_by": group_store.GROUP_BY, "sort": sort, "channels": sorted(extents), "extents": extents},
        fragments=("_group_rows.html",))


@router.get("/groups/{key:path}", dependencies=[AnyViewer], include_in_schema=False)
def read_group_page(request: Request, key: str, db: DbDep, by: str = DEFAULT_BY, channel: str | None = None,
                    page: int = 1):
    """One group: its reward statistics, its structure plotted against a channel's reward, and its rollouts ranked
    by their advantage on that channel, any two of them picked for a diff."""
    group = groups.read_group(db, by, key)
    channels = sorted(group["rewards"])
    channel = channel if channel in channels else (channels[0] if channels else None)
    rollouts = ranked(group["rollouts"], channel)
    rows, total, page, pages = fetch_page(
        page, ROLLOUTS_PER_PAGE, lambda limit, offset: (rollouts[offset:offset + limit], len(rollouts)))
    return render(request, "group_detail.html", {
        "group": group, "by": by, "channel": channel, "channels": channels, "rows": rows, "total": total,
        "page": page, "pages": pages, "first_rank": (page - 1) * ROLLOUTS_PER_PAGE + 1,
        "best": rollouts[0]["trace_id"], "worst": rollouts[-1]["trace_id"],
        "adv_scale": max((abs(r["advantage"].get(channel, 0.0)) for r in rollouts), default=0.0),
        "path": f"/groups/{quote(key, safe='')}",
        "figures": structure_figures(group["rollouts"], channel) if channel else {}},
        fragments=("_group_rollouts.html",))


def valid_sort(sort: str) -> bool:
    try:
        parse_group_sort(sort)
    except ValueError:
        return False
    return True
