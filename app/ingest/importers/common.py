"""What every importer shares: its result, its refusal, content references and the content kept (its policy
and its cap), span trees, and the builder that turns events and links into a trace's numbered events and edges."""

import hashlib
import json
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from operator import itemgetter
from typing import Literal

from app.domain.jsontext import dumps, dumps_bytes
from app.domain.refusals import Refusal
from app.domain.validation import MAX_DEPTH
from app.ingest.documents import DocumentError, exact_lines, fast_lines


@dataclass
class ImportResult:
    """Orchestration traces made from one source document, and what could not be mapped."""

    traces: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


SHOWN_CHARS = 40
UNKNOWN_TOOL = "unknown_tool"  # a tool's name when its record gives none: a tool result's lane is named after it


class ImportFailed(Refusal, ValueError):
    """A source document that cannot be imported at all; the message names the line or span."""

    status = 422


def tool_name(value) -> str:
    """A tool's name as its record gives it, UNKNOWN_TOOL when that is no string or an empty one (an event's
    agent must be a non-empty string, and a tool result's agent is its tool)."""
    return value if isinstance(value, str) and value else UNKNOWN_TOOL


def show(value) -> str:
    """A short repr of a source value for warnings and errors: the value is untrusted and may be huge."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def content_ref(content) -> str:
    """A stable hash of message or tool content: what an event said, by reference, also where the content itself
    is not kept (the `hash` policy)."""
    text = content if isinstance(content, str) else repr(content)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def ref(content) -> str:
    """content_ref of text or of structured content (canonical JSON, so equal content hashes equally)."""
    if not isinstance(content, str):
        content = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return content_ref(content)


# What an importer keeps of the messages, tool arguments and results a source carried: the content itself
# (`keep`, the default: a reviewer judges an event by what it said), or only its `content_ref` hash (`hash`,
# for teams whose traces carry user data they may not store).
ContentPolicy = Literal["keep", "hash"]
KEEP, HASH = "keep", "hash"
CONTENT_CAP_BYTES = 64 * 1024  # the largest `content` of one event, as compact UTF-8 JSON
CUT_MARK = "…"  # ends a string the cap shortened
CUT_CHARS_BEFORE_ITEMS = 200  # strings keep this much before arrays and objects lose items to the cap
MAX_JSON_BYTES_PER_CHAR = 6  # a control character written as \u001f


def keeps(policy: ContentPolicy) -> bool:
    """Whether content is kept under a policy: only `hash` withholds it."""
    return policy != HASH


def strictest(*policies: ContentPolicy) -> ContentPolicy:
    """The policy that keeps least: a server's `hash` cannot be overridden by a request asking to keep."""
    return HASH if HASH in policies else KEEP


def put_content(props: dict, value) -> None:
    """`value` onto an event's properties as `content`, within CONTENT_CAP_BYTES: larger content is cut
    (see `cut`) and `content_cut` records the cap and the size it had, as compact UTF-8 JSON. Parts nested
    deeper than an event property may be (validation's MAX_DEPTH) are kept as their JSON text."""
    if type(value) is str and len(value) <= CONTENT_CAP_BYTES // MAX_JSON_BYTES_PER_CHAR:
        props["content"] = value  # short text fits whatever its characters: no need to write it out
        return
    value = _within_depth(value, MAX_DEPTH)
    size = len(dumps_bytes(value))
    if size <= CONTENT_CAP_BYTES:
        props["content"] = value
        return
    props["content"] = cut(value, CONTENT_CAP_BYTES)
    props["content_cut"] = {"limit_bytes": CONTENT_CAP_BYTES, "original_bytes": size}


def cut(value, limit: int):
    """`value` made to fit `limit` bytes of JSON, keeping its shape: every string longer than some length is
    shortened to it (ending in CUT_MARK), the longest length that fits; when even strings cut to nothing do not
    fit, strings keep CUT_CHARS_BEFORE_ITEMS and arrays and objects only their first items, as many as fit.
    A new value: the source is left as it was."""
    def fits(chars: int, items: int | None) -> bool:
        return len(dumps_bytes(_shortened(value, chars, items))) <= limit

    longest = _longest_string(value)
    if fits(0, None):
        return _shortened(value, _most(lambda chars: fits(chars, None), longest), None)
    chars = min(longest, CUT_CHARS_BEFORE_ITEMS)
    return _shortened(value, chars, _most(lambda items: fits(chars, items), _most_items(value)))


def _most(fits, high: int) -> int:
    """The largest n in 0..high with fits(n), given fits(0) and that fits only turns false as n grows."""
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def _shortened(value, chars: int, items: int | None):
    if type(value) is str:
        return value if len(value) <= chars else value[:chars] + CUT_MARK
    if type(value) is list:
        return [_shortened(item, chars, items) for item in (value if items is None else value[:items])]
    if type(value) is dict:
        pairs = value.items() if items is None else islice(value.items(), items)
        return {key: _shortened(item, chars, items) for key, item in pairs}
    return value


def _longest_string(value) -> int:
    stack, longest = [value], 0
    while stack:
        value = stack.pop()
        if type(value) is str:
            longest = max(longest, len(value))
        elif type(value) is list:
            stack += value
        elif type(value) is dict:
            stack += value.values()
    return longest


def _most_items(value) -> int:
    stack, most = [value], 0
    while stack:
        value = stack.pop()
        if type(value) is list:
            most = max(most, len(value))
            stack += value
        elif type(value) is dict:
            most = max(most, len(value))
            stack += value.values()
    return most


def _within_depth(value, levels: int):
    """`value` with every array or object nested deeper than `levels` replaced by its JSON text; `value`
    itself when nothing is that deep (the common case: one walk over its arrays and objects, no copy)."""
    level = [value] if type(value) is list or type(value) is dict else []
    for _ in range(levels):
        level = [item for node in level for item in (node if type(node) is list else node.values())
                 if type(item) is list or type(item) is dict]
        if not level:
            return value
    return _flattened_below(value, levels) if level else value


def _flattened_below(value, levels: int):
    if type(value) is not list and type(value) is not dict:
        return value
    if levels == 0:
        return dumps(value)
    if type(value) is list:
        return [_flattened_below(item, levels - 1) for item in value]
    return {key: _flattened_below(item, levels - 1) for key, item in value.items()}


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
        self._to_next: list[tuple[int, str, str]] = []

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

    def link_to_next(self, src: int, agent: str, type_: str) -> None:
        """Link src to the first event of agent after it in time order (an instance resumed later: never an
        edge back to its first event)."""
        self._to_next.append((src, agent, type_))

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
        if self._to_next:
            lanes: dict[str, list[int]] = {}  # each agent's events, as places in time order
            for place, i in enumerate(order):
                if types[i] != "tool_result":
                    lanes.setdefault(agents[i], []).append(place)
            for src, agent, type_ in self._to_next:
                lane = lanes.get(agent, ())
                after = bisect_right(lane, rank[src])
                if after < len(lane):
                    edges.append((src, order[lane[after]], type_))
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


def next_at(starts: dict[str, tuple[list, list]], agent: str, time) -> int | None:
    """The index of `agent`'s first model call at or after `time`, from its (times, indexes) sorted by time:
    where an answer (a tool's result, a sub-agent's return) is first read."""
    entry = starts.get(agent)
    if entry is None:
        return None
    times, indexes = entry
    k = bisect_left(times, time)
    return indexes[k] if k < len(indexes) else None


@dataclass
class Batch:
    """What one upload holds of a format: its documents (each file with its parsed records, or None where the
    format reads the text itself) and the companion files read with them (a sub-agent transcript, a state
    database), as `convert` hands them to the format."""

    documents: list[tuple] = field(default_factory=list)  # (Upload, records | None)
    companions: list = field(default_factory=list)  # Upload
    max_bytes: int = 0

    def merge(self, result: ImportResult, part: ImportResult, source: str = "") -> None:
        """Add one conversion's traces to `result`, its warnings named by `source`."""
        result.traces += part.traces
        result.warnings += [f"{source}: {w}" if source else w for w in part.warnings]


@dataclass(frozen=True)
class Format:
    """An importable format, declared once by its module as `FORMAT`: the registry (app.ingest.importers) finds
    it there, and detection, `--format`, `?format=`, `orchestrace validate` and the docs read it. `detect` sees a
    document's parsed records; `companion` claims a file that is read with the format's documents rather than as
    one; `convert` turns every document and companion of one upload into traces; `order` is the order formats
    are tried in; `parsed` is False for a format whose importer reads the text itself."""

    name: str
    summary: str
    detect: Callable[[list], bool]
    convert: Callable[[Batch, str], ImportResult]
    order: int
    companion: Callable = lambda upload: False
    parsed: bool = True


def jsonl_records(text: str, name: str) -> list[tuple[int, object]]:
    """(line number, record) for every non-blank line of a transcript or rollout; a line that is not JSON, or gives
    a key twice in one object, refuses the file naming it and the line."""
    text = text.lstrip("\ufeff")
    records = fast_lines(text.encode("utf-8", "surrogatepass"))
    if records is None:  # the exact reading, which also marks a key given twice
        try:
            records, problem = exact_lines(text)
        except DocumentError as exc:
            raise ImportFailed(f"{name} {exc}") from None
        if problem is not None:
            raise ImportFailed(f"{name} {problem}")
    if not records:
        raise ImportFailed(f"{name}: empty file")
    return records
