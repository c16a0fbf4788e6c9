"""What every importer shares: its result, its refusal, private content references, and span trees."""

import hashlib
from dataclasses import dataclass, field

from app.domain.refusals import Refusal


@dataclass
class ImportResult:
    """Orchestration traces made from one source document, and what could not be mapped."""

    traces: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


SHOWN_CHARS = 40


class ImportFailed(Refusal, ValueError):
    """A source document that cannot be imported at all; the message names the line or span."""

    status = 422


def show(value) -> str:
    """A short repr of a source value for warnings and errors: the value is untrusted and may be huge."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def content_ref(content) -> str:
    """A stable hash of message or tool content: deployment traces carry user data, kept out by default."""
    text = content if isinstance(content, str) else repr(content)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def span_tree(spans: list, trace_id: str, warnings: list[str], parent_field: str) -> list:
    """Put each span (with unique `id`) under its parent (`parent`, `children`); returns the roots in the
    order given. A span whose parent is not in the document is a root, with a warning; a cycle of parents
    refuses the document, naming a span in it and its `parent_field`."""
    by_id = {span.id: span for span in spans}
    roots = []
    orphans = 0
    for span in spans:
        parent = by_id.get(span.parent_id) if span.parent_id else None
        if parent is None:
            orphans += span.parent_id is not None
            roots.append(span)
        else:
            span.parent = parent
            parent.children.append(span)
    if orphans:
        warnings.append(f"trace {trace_id}: {orphans} span(s) whose parent is not in the document read as roots")
    reachable = set()
    stack = list(roots)
    while stack:
        span = stack.pop()
        reachable.add(span.id)
        stack.extend(span.children)
    if len(reachable) < len(by_id):
        stuck = next(span for span in spans if span.id not in reachable)
        raise ImportFailed(f"{stuck.location()}: {parent_field} {stuck.parent_id} is part of a cycle")
    return roots
