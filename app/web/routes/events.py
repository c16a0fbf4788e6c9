"""JSON API of one event: its properties, its content and its edges."""

from fastapi import APIRouter

from app.domain.refusals import NotFound
from app.store import traces as trace_store
from app.web.access import AnyViewer
from app.web.apidoc import COUNT, OBJECT, READ_REFUSALS, TEXT, object_schema, reply
from app.web.deps import DbDep, TraceId
from app.web.responses import JsonBody

router = APIRouter(prefix="/api", tags=["events"])

OTHER_EVENT = object_schema({"id": TEXT, "type": TEXT, "agent": TEXT}, "id", "type", "agent")
EDGE_TO = object_schema({"type": TEXT, "event": OTHER_EVENT}, "type", "event")
EDGES = {"type": "array", "items": EDGE_TO}
EVENT_ANSWER = object_schema({
    "trace_id": TEXT, "seq": COUNT,
    "event": {**object_schema({"id": TEXT, "t": {"type": "number"}, "type": TEXT, "agent": TEXT, "content": {},
                               "content_cut": OBJECT}, "id", "t", "type", "agent"),
              "description": "every property as ingested; `content` where the importer kept what the event said, "
                             "`content_cut` ({limit_bytes, original_bytes}) where it cut it"},
    "edges": object_schema({"incoming": EDGES, "outgoing": EDGES}, "incoming", "outgoing")},
    "trace_id", "seq", "event", "edges")


@router.get("/traces/{trace_id}/events/{event_id}", dependencies=[AnyViewer], responses=READ_REFUSALS | {
    200: reply("the event, its position and its edges", EVENT_ANSWER),
    404: reply("no trace with this id, or no event with this id in the trace")})
def read_event(trace_id: TraceId, event_id: str, db: DbDep):
    """One event as ingested (with `content` where its importer kept what it said), its position in the trace
    (`seq`, from 0 in trace order) and its edges in and out, each with the event at the other end."""
    found = trace_store.read_event(db, trace_id, event_id)
    if found is None:
        raise NotFound(f"no event with id '{event_id}' in trace '{trace_id}'",
                       what=f"event '{event_id}' of trace '{trace_id}'")
    edges = trace_store.read_event_edges(db, trace_id, event_id)
    return JsonBody({"trace_id": trace_id, "seq": found["seq"], "event": found["event"], "edges": {
        side: [{"type": edge["type"], "event": {"id": edge["other_id"], "type": edge["other_type"],
                                                "agent": edge["other_agent"]}} for edge in edges[side]]
        for side in ("incoming", "outgoing")}})
