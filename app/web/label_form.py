"""The label form's context, shared by the trace page (the selected event) and the labelling routes."""

import uuid

from app.domain.refusals import NotFound
from app.domain.taxonomy import (
    COUNTERFACTUAL_ANSWERS,
    CREDIT_UNITS,
    LABEL_FIELDS,
    REWARD_FAMILIES,
    STOP_ANSWERS,
    STOP_EVENT_TYPES,
    SUBDECISIONS,
)
from app.services import labels, queues
from app.store import queries


def queue_context(db, queue_id: str | None, trace_id: str, event_id: str) -> dict | None:
    """The review queue the form saves in (its rubric and where this item stands), when the event is one of
    its items; None otherwise (no queue asked, an unknown queue, or an event outside it)."""
    if not queue_id:
        return None
    try:
        queue = queues.load(db, queue_id)
    except NotFound:
        return None
    item = next((row for row in queries.queue_items_of_event(db, trace_id, event_id)
                 if row["queue_id"] == queue_id), None)
    if item is None:
        return None
    return {"id": queue["id"], "name": queue["name"], "fields": queue["fields"], "required": queue["required"],
            "item_id": item["item_id"], "items": queries.queue_item_count(db, queue_id)}


def label_context(db, trace_id: str, event_id: str, reviewer: str | None, queue_id: str | None = None,
                  **extra) -> dict:
    """What the label form needs: the reviewer's current label, the fields to ask (all, or a queue's rubric),
    vocabularies, a fresh request id, progress."""
    current = labels.list_labels(db, trace_id, event_id, reviewer) if reviewer else []
    queue = queue_context(db, queue_id, trace_id, event_id)
    identity = queries.event_identity(db, trace_id, event_id)
    return {
        "label": current[0] if current else None,
        "label_is_empty": current[0]["empty"] if current else True,
        "label_event": event_id,
        "label_trace": trace_id,
        "label_versions": queries.event_label_versions(db, trace_id, event_id),
        "reward_families": REWARD_FAMILIES,
        "credit_units": CREDIT_UNITS,
        "subdecisions": SUBDECISIONS,
        "counterfactual_answers": COUNTERFACTUAL_ANSWERS,
        "stop_answers": STOP_ANSWERS,
        "stop_applies": identity is not None and identity["type"] in STOP_EVENT_TYPES,
        "queue": queue,
        "asked": queue["fields"] if queue else LABEL_FIELDS,
        "request_id": uuid.uuid4().hex,
        "progress": labels.progress(db, trace_id, reviewer),
    } | extra
