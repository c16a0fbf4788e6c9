"""What every importer shares: its result, its refusal, private content references, span trees, and the
builder that turns events and links into a trace's numbered events and edges."""

import hashlib
import json
from dataclasses import dataclass, field
from operator import itemgetter

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


def ref(content) -> str:
    """content_ref of text or of structured content (canonical JSON, so equal content hashes equally)."""
    if not isinstance(content, str):
        content = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return content_ref(content)


_ENDS = itemgetter(0, 1)


class TraceBuilder:
    """Events and edges of one trace in the making; ids follow time order, given at the end.

    Each agent's events make a timeline of `temporal` edges in time order. Tool results have none (a tool
    serves independent calls); an event added `chained` is linked by the importer itself (Claude Code's
    parentUuid chains) and only marks where its agent's timeline stands."""

    def __init__(self):
        # One entry per event; the event dict is made once, in finish, with id and t first.
        self.times: list = []  # source time, in the importer's unit
        self.types: list[str] = []
        self.agents: list[str] = []
        self.props: list[dict] = []
        self.chained: set[int] = set()
        self.edges: list[tuple[int, int, str]] = []
        self._to_first: list[tuple[int, str, str]] = []

    def add(self, time, type_: str, agent: str, props: dict, chained: bool = False) -> int:
        """Append an event; returns its index for linking and for changing it later."""
        self.times.append(time)
        self.types.append(type_)
        self.agents.append(agent)
        self.props.append(props)
        index = len(self.times) - 1
        if chained:
            self.chained.add(index)
        return index

    def link(self, src: int, dst: int, type_: str) -> None:
        self.edges.append((src, dst, type_))

    def link_to_first(self, src: int, agent: str, type_: str) -> None:
        """Link src to the first event of agent, known once events are in time order."""
        self._to_first.append((src, agent, type_))

    def finish(self, origin, per_second: int = 1, places: int | None = None,
               min_digits: int = 1) -> tuple[list[dict], list[dict]]:
        """Events in time order (stable) with ids (`e` and at least `min_digits` digits) and t in seconds
        from origin (rounded to `places` when given); deduplicated edges (temporal ones added), in the order
        of their ends."""
        times, types, agents, props, chained = self.times, self.types, self.agents, self.props, self.chained
        n = len(times)
        order = sorted(range(n), key=times.__getitem__)
        rank = [0] * n
        for place, i in enumerate(order):
            rank[i] = place
        width = max(min_digits, len(str(n)))
        names = [f"e{place:0{width}d}" for place in range(1, n + 1)]
        seconds = [(times[i] - origin) / per_second for i in order]
        if places is not None:
            seconds = [round(t, places) for t in seconds]
        events = [{"id": name, "t": t, "type": types[i], "agent": agents[i], **props[i]}
                  for name, t, i in zip(names, seconds, order)]
        edges = self.edges
        last: dict[str, int] = {}
        first: dict[str, int] = {}
        for i in order:
            if types[i] == "tool_result":
                continue
            agent = agents[i]
            previous = last.get(agent)
            if previous is None:
                first[agent] = i
            elif i not in chained:
                edges.append((previous, i, "temporal"))
            last[agent] = i
        for src, agent, type_ in self._to_first:
            dst = first.get(agent)
            if dst is not None:
                edges.append((src, dst, type_))
        ranked = [(rank[src], rank[dst], type_) for src, dst, type_ in dict.fromkeys(edges) if src != dst]
        ranked.sort(key=_ENDS)  # stable: edges between the same two events keep the order they were made in
        return events, [{"src": names[src], "dst": names[dst], "type": type_} for src, dst, type_ in ranked]


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
