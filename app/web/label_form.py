"""The label form's context, shared by the trace page (the selected event) and the labelling routes."""

import uuid

from app.domain.taxonomy import CREDIT_UNITS, REWARD_FAMILIES, SUBDECISIONS
from app.services import labels


def label_context(db, trace_id: str, event_id: str, reviewer: str | None, **extra) -> dict:
    """What the label form needs: the reviewer's current label, vocabularies, a fresh request id, progress."""
    current = labels.list_labels(db, trace_id, event_id, reviewer) if reviewer else []
    versions = labels.list_labels(db, trace_id, event_id, None, history=True)
    return {
        "label": current[0] if current else None,
        "label_is_empty": current[0]["empty"] if current else True,
        "label_event": event_id,
        "label_trace": trace_id,
        "label_versions": len(versions),
        "reward_families": REWARD_FAMILIES,
        "credit_units": CREDIT_UNITS,
        "subdecisions": SUBDECISIONS,
        "request_id": uuid.uuid4().hex,
        "progress": labels.progress(db, trace_id, reviewer),
    } | extra
