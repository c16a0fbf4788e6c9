"""The structural diff of two traces: GET /api/diff (JSON) and the /diff page (its permalink is its URL)."""

from fastapi import APIRouter, Query, Request

from app.services import diff as diff_service
from app.web.access import AnyViewer
from app.web.apidoc import COUNT, MAYBE_TEXT, NUMBER, OBJECT, READ_REFUSALS, TEXT, TEXTS, object_schema, reply
from app.web.deps import CacheDep, DbDep
from app.web.render import is_htmx, render

router = APIRouter()

OP = object_schema({"op": {"enum": ["same", "changed", "only_a", "only_b"]}, "a": MAYBE_TEXT, "b": MAYBE_TEXT},
                   "op", "a", "b")
DIFF = object_schema({
    "a": TEXT, "b": TEXT,
    "agents": object_schema({"only_a": TEXTS, "only_b": TEXTS, "both": {"type": "array", "items": object_schema(
        {"a": TEXT, "b": TEXT, "by": {"enum": ["name", "tree"]}}, "a", "b", "by")}}, "only_a", "only_b", "both"),
    "lanes": {"type": "array", "items": object_schema({
        "agent": TEXT, "agent_a": MAYBE_TEXT, "agent_b": MAYBE_TEXT,
        "match": {"enum": ["name", "tree", "only_a", "only_b"]}, "ops": {"type": "array", "items": OP}},
        "agent", "ops")},
    "first_divergence": object_schema({"a": MAYBE_TEXT, "b": MAYBE_TEXT}, "a", "b"),
    "summary": object_schema({"agents_a": COUNT, "agents_b": COUNT, "matched_by_name": COUNT,
                              "matched_by_tree": COUNT, "only_a": COUNT, "only_b": COUNT, "steps": OBJECT,
                              "similarity": NUMBER, "identical": {"type": "boolean"}}),
}, "a", "b", "agents", "lanes", "first_divergence", "summary")
A = Query(description="the trace compared (A)")
B = Query(description="the trace it is compared with (B)")


@router.get("/api/diff", tags=["traces"], dependencies=[AnyViewer],
            responses=READ_REFUSALS | {200: reply("the structural diff of trace a against trace b", DIFF),
                                       404: reply("a or b names no trace")})
def read_diff(db: DbDep, cache: CacheDep, a: str = A, b: str = B):
    """Agents matched by name, else by their place in the spawn tree (roles on the path from the root and order
    among siblings of that role); each matched agent's steps aligned (longest common subsequence over type, tool
    and target agent; a step whose type matches but whose tool or target differs is `changed`); the first
    divergence is the earliest step, by time since its run's start, that is not `same`."""
    return diff_service.trace_diff(db, cache, a, b)


@router.get("/diff", include_in_schema=False, dependencies=[AnyViewer])
def read_diff_page(request: Request, db: DbDep, cache: CacheDep, a: str = A, b: str = B, rewards: str = "shown"):
    """The diff page; asked by htmx (a review workspace loading it beside its form), its body only. `rewards=hidden`
    leaves the runs' rewards out (a review queue judging the runs blind to their scores)."""
    context = diff_service.diff_page(db, cache, a, b) | {"hide_rewards": rewards == "hidden"}
    if is_htmx(request):
        return render(request, "_diff_view.html", context)
    return render(request, "diff.html", context)
