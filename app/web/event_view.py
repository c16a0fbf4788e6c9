"""What the workspace shows of an event beside the label form: its facts, what it said (its content as a
conversation, or as pretty-printed JSON), what it answers and what came just before and after on its lane."""

from app.domain.conversation import conversation
from app.store import traces as trace_store
from app.web.render import pretty_json


def content_view(event: dict) -> dict:
    """The event's content for display: `messages` when it reads as a conversation, else `json` text; the
    cut the importer made (`cut`) and the source's reference (`ref`), each None when absent."""
    content = event.get("content")
    messages = conversation(content) if content is not None else None
    text = None
    if content is not None and messages is None:
        text = content if isinstance(content, str) else pretty_json(content)
    cut = event.get("content_cut")
    return {"messages": messages, "json": text, "cut": cut if isinstance(cut, dict) else None,
            "ref": event.get("content_ref"), "present": content is not None}


def event_view(db, trace_id: str, event_id: str) -> dict:
    """The event (None when the trace lacks it) with its edges, lane neighbours and content view."""
    selected = trace_store.read_event(db, trace_id, event_id)
    if selected is None:
        return {"selected": None}
    return {"selected": selected, "selected_edges": trace_store.read_event_edges(db, trace_id, event_id),
            "selected_neighbours": trace_store.lane_neighbours(db, trace_id, event_id),
            "content": content_view(selected["event"])}
