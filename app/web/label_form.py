"""The label form's context, shared by the trace page (the selected event), the labelling routes and the queue
workspace: which declared fields it asks (all, or a queue's rubric), and what the reviewer may see beside it."""

import uuid

from app.domain.label_fields import FIELDS, LabelError
from app.domain.refusals import NotFound
from app.services import labels, queues
from app.store import labels as label_store
from app.store import queues as queue_store
from app.store import traces as trace_store

FORM_TAG_SEPARATOR = ","  # the tags box takes comma-separated tags


def queue_context(db, queue_id: str | None, trace_id: str, event_id: str) -> dict | None:
    """The review queue the form saves in (its rubric and where this item stands), when the event is one of
    its items; None otherwise (no queue asked, an unknown queue, or an event outside it)."""
    if not queue_id:
        return None
    try:
        queue = queues.load(db, queue_id)
    except NotFound:
        return None
    item = next((row for row in queue_store.queue_items_of_event(db, trace_id, event_id)
                 if row["queue_id"] == queue_id), None)
    if item is None:
        return None
    return {"id": queue["id"], "name": queue["name"], "fields": queue["fields"], "required": queue["required"],
            "item_id": item["item_id"], "items": queue_store.queue_item_count(db, queue_id), "blind": queue["blind"]}


def label_context(db, trace_id: str, event_id: str, reviewer: str | None, queue_id: str | None = None,
                  event_type: str | None = None, workspace: bool = False, **extra) -> dict:
    """What the label form needs: the reviewer's current label, the declared fields it asks (those that apply
    to the event, of the queue's rubric in a queue), other reviewers' labels as far as the reviewer may see
    them, a fresh request id; on the trace page (not in a queue `workspace`), its history and progress."""
    on_event = labels.list_labels(db, reviewer, trace_id, event_id)
    current = [label for label in on_event if label["reviewer"] == reviewer] if reviewer else []
    queue = queue_context(db, queue_id, trace_id, event_id)
    if event_type is None:
        identity = trace_store.event_identity(db, trace_id, event_id)
        event_type = identity["type"] if identity else None
    asked = queue["fields"] if queue else [f.name for f in FIELDS]
    context = {
        "label": current[0] if current else None,
        "label_is_empty": current[0]["empty"] if current else True,
        "label_event": event_id,
        "label_trace": trace_id,
        "fields": [f for f in FIELDS if f.name in asked and f.in_form and f.applies(event_type)],
        "others": [label for label in on_event if label["reviewer"] != reviewer and not label["empty"]],
        "queue": queue,
        "request_id": uuid.uuid4().hex,
        "workspace": workspace,
    }
    if not workspace:
        context["label_versions"] = label_store.event_label_versions(db, reviewer, trace_id, event_id)
        context["progress"] = labels.progress(db, trace_id, reviewer)
    return context | extra


def form_values(form) -> dict:
    """The declared fields the form showed (its `asked` list), read from their controls, so a field it did not
    show keeps its value; a number that is not one is a field error, not a 500."""
    asked = set((form.get("asked") or "").split(",")) if form.get("asked") else {f.name for f in FIELDS if f.in_form}
    values = {}
    for declared in FIELDS:
        if declared.name in asked:
            raw = form.get(declared.name)
            values[declared.name] = declared.from_text(raw if isinstance(raw, str) else None, FORM_TAG_SEPARATOR)
            if declared.kind == "number" and isinstance(values[declared.name], str):
                raise LabelError(declared.name, f"{values[declared.name]!r} is not a number")
    return values
