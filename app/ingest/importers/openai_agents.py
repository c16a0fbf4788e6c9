"""Import OpenAI Agents SDK traces (IMPORTERS.md §0 and §3): one orchestration trace per trace id.

Input is what a `TracingProcessor` sees: `trace.export()` and `span.export()` dicts, either as the
backend payload `{"data": [...]}`, as a list (e.g. JSON Lines), or as one record.

Choices where the mapping is silent, made for an auditor who wants to trace every event back to a span:
- Event ids are `e1`, `e2`, ... in time order (zero-padded); events keep `span_id`, `parent_span_id`,
  `trace_id` and `span_type`, plus `tool_call_id` (recovered from the requesting generation),
  `response_id`, `handoff_to`, `guardrail` where they apply.
- Agent instance: `<name>#<span id>`, role `<name>`. A `tool_result` has the tool as its agent (as in
  the synthetic traces); temporal edges chain the acting agents only.
- Root runs: the user's `message` gets a `message` edge into the root agent's first event.
- The agent that ends a run returns to whoever started the run (`user`, or the agent whose tool ran
  it), also after handoffs: the agent that handed off is gone (`despawn`, `handoff_to`).
- A handoff target is spawned by the agent that handed off, with `handoff: true`. It takes that agent's
  place, so it keeps its spawn depth: only delegation (agent-as-tool, nesting) deepens the topology.
  Control handed back to an agent that ran before (its earlier run ended first) continues that agent's lane:
  a `message` (`handoff`, `resumed`) linked to its next event, never a second spawn; the earlier run, which
  handed off and runs again, has no despawn.
  The handoff span is matched to the earliest unclaimed agent span of `to_agent` that starts after it,
  preferring the sibling of the agent that handed off.
- A `function` span's requesting generation: the latest earlier generation of its agent with an
  unclaimed function call of the same name and equal arguments; else one of the same name; else the
  agent's latest generation that ended before the tool started. A handoff's decision is the agent's
  latest generation before the handoff, preferring one that calls `transfer_to_*`.
- Input guardrails sit under a `turn` span, output guardrails directly under their agent span (0.24);
  without turn spans (older SDKs) a guardrail that starts after one of its agent's generations ended
  checks output. A guardrail event is at the guardrail's end. A triggered guardrail also ends its
  agent in a despawn (`tripwire: true`); an input guardrail with no decision after it guards that
  despawn.
- Custom spans other than the SDK's `task`/`turn`: each numeric value in `data` is a reward named
  after the span (`<name>.<key>` when there are several; when a name repeats the latest wins, with a
  warning). Custom spans without one, and span types the mapping does not name (`transcription`,
  `speech`, `speech_group`, ...), are skipped with a warning.
- Content: `content_ref` is the hash of a generation's output, of a tool's result, of a tool call's
  arguments (its call id when recovered, as for OTLP), of a handoff's `transfer_to_*` arguments. Unless the
  content policy is `hash`, `content` keeps what the SDK recorded (cut to common.CONTENT_CAP_BYTES): a
  generation's `{"input", "output"}`, a function's input and output, an MCP listing's result, and on a
  handoff's spawn the arguments of the `transfer_to_*` call that asked for it. A `response` span records
  only its response id: its content stays with OpenAI.
- Tokens: `usage.input_tokens + output_tokens` of `generation`/`response` spans (`prompt_tokens`/
  `completion_tokens` accepted). The root `task` span's usage includes agent-as-tool runs (they share
  the caller's usage) but not a separate `Runner.run` inside a tool, so it may fall short of the sum;
  a warning only when it exceeds the sum, which means generation spans are missing.
  Cached input tokens (`input_tokens_details.cached_tokens`) go to `metrics.cache_read_input_tokens`.
- Times are ISO-8601 (naive ones are read as UTC); t = 0 and `wall_clock_s` span all spans of the trace.
  `costs.messages` counts LLM calls (generation and response spans), decisions included; `tool_calls`
  counts function and mcp_tools spans.
- A span exported twice (at start and at end) keeps the record that has `ended_at`; other repeats are
  skipped with a warning. A trace without a trace record gets its trace id as task_id (warning). A trace
  with no event-producing span is skipped with a warning; a document without spans gives no trace.
- task_id: `metadata.task_id`, else `group_id`, else `workflow_name`; system: `openai-agents`.
"""

from bisect import bisect_left
from datetime import datetime, timedelta, timezone

import orjson

from app.domain.validation import trace_id_error
from app.ingest.importers.common import (
    KEEP,
    Batch,
    ContentPolicy,
    Format,
    ImportFailed,
    ImportResult,
    TraceBuilder,
    keeps,
    put_content,
    ref,
    show,
    span_tree,
)
from app.ingest.importers.otlp import topology
from app.store.gcpause import paused_gc

SYSTEM = "openai-agents"
USER = "user"
MICROS_PER_S = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ONE_MICROSECOND = timedelta(microseconds=1)
TRACE, SPAN = "trace", "trace.span"
TRACE_ID_PREFIX = "openai-agents-"  # + the SDK's trace id: the stored trace's id
STRUCTURAL = ("task", "turn")  # custom spans the SDK writes around runs and turns
HANDOFF_TOOL_PREFIX = "transfer_to_"
DETECT_RECORDS = 5  # records looked at to recognise the format


def looks_like_openai_agents(doc) -> bool:
    """True for Agents SDK trace records: {"data": [...]}, a list of them, or one record."""
    if isinstance(doc, dict) and "data" in doc:
        doc = doc["data"]
    elif isinstance(doc, dict):
        return doc.get("object") in (TRACE, SPAN)
    if not isinstance(doc, list) or not doc:
        return False
    probe = doc[:DETECT_RECORDS]
    return all(isinstance(r, dict) for r in probe) and any(r.get("object") in (TRACE, SPAN) for r in probe)


def import_agents(doc, content_policy: ContentPolicy = KEEP) -> ImportResult:
    """Orchestration traces from Agents SDK trace records, one per trace id, in order of appearance."""
    if isinstance(doc, dict) and "data" in doc:
        records, prefix = doc["data"], "data"
    elif isinstance(doc, dict):
        records, prefix = [doc], "record"
    else:
        records, prefix = doc, ""
    if not isinstance(records, list):
        raise ImportFailed("not OpenAI Agents SDK trace records: expected {\"data\": [...]} or a list of records")
    result = ImportResult()
    with paused_gc():
        meta, by_trace = _read_records(records, prefix, result.warnings)
        for trace_id, spans in by_trace.items():
            trace = _Trace(trace_id, meta.get(trace_id), spans, content_policy, result.warnings).build()
            if trace is not None:
                result.traces.append(trace)
    for trace_id in meta.keys() - by_trace.keys():
        result.warnings.append(f"trace {trace_id}: a trace record without spans, skipped")
    if not by_trace and not meta:
        result.warnings.append("the document has no trace records")
    return result


def record_problem(record, where: str) -> str | None:
    """Why one exported record cannot be used (naming it), or None for a usable trace or span record."""
    try:
        if not isinstance(record, dict):
            raise ImportFailed(f"{where}: {show(record)} is not an object")
        kind = record.get("object")
        if kind == TRACE:
            _stored_id(_nonempty(record, "id", where), where)
        elif kind == SPAN:
            span = _read_span(record, where, 0)
            _stored_id(_nonempty(record, "trace_id", f"{where} (span {span.id})"), f"{where} (span {span.id})")
            if span.end is None:
                raise ImportFailed(f"{span.location()}: ended_at is missing (the span never ended)")
        else:
            raise ImportFailed(f"{where}: object {show(kind)} is neither 'trace' nor 'trace.span'")
    except ImportFailed as exc:
        return str(exc)
    return None


class _Span:
    """One span record, and what the walk learns about it."""

    __slots__ = ("where", "order", "id", "parent_id", "start", "end", "type", "data", "error", "children",
                 "parent", "agent", "first", "last", "returns", "spawned", "call_id")

    def __init__(self, where: str, order: int, span_id: str, parent_id, start: int, end: int, data: dict, error):
        self.where, self.order, self.id, self.parent_id = where, order, span_id, parent_id
        self.start, self.end, self.data, self.error = start, end, data, error
        self.type = data.get("type")
        self.children: list[_Span] = []
        self.parent: _Span | None = None
        self.agent: _Agent | None = None
        self.first = self.last = None  # event indices
        self.returns: list[int] = []  # returns of the runs this function span started
        self.spawned = 0  # agents this function span started
        self.call_id: str | None = None  # recovered from the generation that asked for this function

    def location(self) -> str:
        return f"{self.where} (span {self.id})"


def _read_records(records: list, prefix: str, warnings: list[str]) -> tuple[dict, dict[str, list[_Span]]]:
    """Trace records by id, and span records grouped by trace in order of appearance."""
    meta: dict[str, dict] = {}
    by_trace: dict[str, dict[str, _Span]] = {}
    unknown = 0
    for i, record in enumerate(records):
        where = f"{prefix}[{i}]"
        if not isinstance(record, dict):
            raise ImportFailed(f"{where}: {show(record)} is not an object")
        kind = record.get("object")
        if kind == TRACE:
            meta[_nonempty(record, "id", where)] = record
        elif kind == SPAN:
            span = _read_span(record, where, i)
            trace_id = _nonempty(record, "trace_id", f"{where} (span {span.id})")
            spans = by_trace.setdefault(trace_id, {})
            seen = spans.get(span.id)
            if seen is None or seen.end is None:
                spans[span.id] = span
            elif span.end is not None:
                warnings.append(f"{span.location()}: span exported twice in trace {trace_id}, skipped")
        else:
            unknown += 1
    if unknown:
        warnings.append(f"{unknown} record(s) that are neither traces nor spans skipped")
    for trace_id, spans in by_trace.items():
        for span in spans.values():
            if span.end is None:
                raise ImportFailed(f"{span.location()}: ended_at is missing (the span never ended)")
    return meta, {trace_id: list(spans.values()) for trace_id, spans in by_trace.items()}


def _stored_id(trace_id: str, where: str) -> None:
    """Refuse an SDK trace id that cannot name a stored trace (app.domain.validation's trace id rule)."""
    error = trace_id_error(TRACE_ID_PREFIX + trace_id)
    if error:
        raise ImportFailed(f"{where}: trace id: {error}")


def _nonempty(record: dict, key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise ImportFailed(f"{where}: {key} {show(value)} is missing or not a string")
    return value


def _read_span(record: dict, where: str, order: int) -> _Span:
    span_id = _nonempty(record, "id", where)
    where_span = f"{where} (span {span_id})"
    parent_id = record.get("parent_id")
    if parent_id is not None and not isinstance(parent_id, str):
        raise ImportFailed(f"{where_span}: parent_id {show(parent_id)} is not a string")
    data = record.get("span_data")
    if not isinstance(data, dict):
        raise ImportFailed(f"{where_span}: span_data {show(data)} is not an object")
    error = record.get("error")
    if error is not None and not isinstance(error, dict):
        raise ImportFailed(f"{where_span}: error {show(error)} is not an object")
    start = _micros(record.get("started_at"), "started_at", where_span)
    ended = record.get("ended_at")
    end = None if ended is None else _micros(ended, "ended_at", where_span)
    if end is not None and end < start:
        raise ImportFailed(f"{where_span}: ended_at {ended} is before started_at {record['started_at']}")
    return _Span(where, order, span_id, parent_id or None, start, end, data, error)


def _micros(value, field: str, where: str) -> int:
    """Microseconds since the epoch of an ISO-8601 time."""
    if not isinstance(value, str):
        raise ImportFailed(f"{where}: {field} {show(value)} is missing or not a string")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ImportFailed(f"{where}: {field} {show(value)} is not an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - EPOCH) // ONE_MICROSECOND


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and value not in (float("inf"), float("-inf"))


def _tokens(usage, *keys: str) -> int | None:
    """A token count from the first present key of a usage dict."""
    if not isinstance(usage, dict):
        return None
    for key in keys:
        value = usage.get(key)
        if value is not None:
            if not _number(value) or value < 0:
                raise ValueError(f"usage.{key} {show(value)} is not a token count")
            return int(value)
    return None


def _function_calls(output) -> list[list]:
    """[name, call_id, arguments, claimed] of each function call in a generation's output, in the shapes
    the SDK writes: Responses items, Chat Completions messages, or whole Response dumps."""
    calls = []
    for item in output if isinstance(output, list) else ():
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":
            calls.append([item.get("name"), item.get("call_id"), item.get("arguments"), False])
        for tool_call in item.get("tool_calls") or ():
            function = tool_call.get("function") if isinstance(tool_call, dict) else None
            if isinstance(function, dict):
                calls.append([function.get("name"), tool_call.get("id"), function.get("arguments"), False])
        if isinstance(item.get("output"), list):
            calls += _function_calls(item["output"])
    return calls


def _checks_input(guardrail: _Span, calls: list[list]) -> bool:
    """An input guardrail: under a turn (0.24), or, in older layouts, before any generation of its agent ended."""
    parent = guardrail.parent
    if parent is not None and parent.type == "custom" and parent.data.get("name") == "turn":
        return True
    return not any(call[1] <= guardrail.start for call in calls)


def _empty(value) -> bool:
    return value is None or value == "" or value == []


def _same_arguments(a, b) -> bool:
    if a == b:
        return True
    try:
        return orjson.loads(a) == orjson.loads(b)
    except (TypeError, orjson.JSONDecodeError):
        return False


class _Agent:
    """One agent instance (one agent span) and what its events need to be linked."""

    __slots__ = ("key", "role", "span", "depth", "spawns", "caller", "run_tool", "handoff", "handed_from",
                 "tripwire", "calls", "tools", "guardrails", "nested_returns", "end", "resumes", "resumed_later")

    def __init__(self, key: str, role: str, span: _Span | None):
        self.key, self.role, self.span = key, role, span
        self.depth = 0
        self.spawns = False
        self.caller: _Agent | None = None  # who started the run this agent works in; None for the user
        self.run_tool: _Span | None = None  # the function span that started that run, if any
        self.handoff: tuple[_Span, _Agent] | None = None  # handed off: (handoff span, target)
        self.handed_from: tuple[_Span, _Agent] | None = None
        self.tripwire = False
        self.calls: list[list] = []  # [start, end, event index, function calls, asks for tools]
        self.tools: list[_Span] = []
        self.guardrails: list[tuple[int, _Span]] = []  # (event index, guardrail span)
        self.nested_returns: list[tuple[int, int]] = []  # (time, return event) of directly nested agents
        self.end: int | None = None  # its return or despawn event
        self.resumes = self.resumed_later = False  # a run handed back to an agent that ran before: one lane


class _Trace:
    """Maps the spans of one trace id onto one orchestration trace."""

    def __init__(self, trace_id: str, meta: dict | None, spans: list[_Span], content_policy: ContentPolicy,
                 warnings: list[str]):
        self.trace_id = trace_id
        self.meta = meta or {}
        self.spans = spans
        self.keep = keeps(content_policy)
        self.warnings = warnings
        self.b = TraceBuilder()
        self.agents: list[_Agent] = []
        self.fallback: _Agent | None = None
        self.tokens = 0
        self.llm_calls = 0
        self.tool_calls = 0
        self.cached_tokens: int | None = None
        self.task_tokens: int | None = None
        self.rewards: dict[str, float] = {}
        self.skipped: dict[str, int] = {}
        if meta is None:
            warnings.append(f"trace {trace_id}: no trace record; the trace id serves as task_id")

    def build(self) -> dict | None:
        roots = self._tree()
        self._match_handoffs()
        for root in roots:
            self._walk(root)
        for what, count in self.skipped.items():
            self.warnings.append(f"trace {self.trace_id}: {count} {what} skipped")
        if not self.b.times:
            self.warnings.append(f"trace {self.trace_id}: no span that maps to an event, skipped")
            return None
        self._link_agents()
        if self.task_tokens is not None and self.task_tokens > self.tokens:
            self.warnings.append(f"trace {self.trace_id}: the task spans count {self.task_tokens} tokens but the "
                                 f"generations only {self.tokens} (generation spans missing?); costs.tokens keeps "
                                 "the generations' sum")
        origin = min(span.start for span in self.spans)
        events, edges = self.b.finish(origin, MICROS_PER_S)
        metadata = self.meta.get("metadata") if isinstance(self.meta.get("metadata"), dict) else {}
        task_id = next((str(v) for v in (metadata.get("task_id"), self.meta.get("group_id"),
                                         self.meta.get("workflow_name"), self.trace_id) if v), self.trace_id)
        metrics = {} if self.cached_tokens is None else {"cache_read_input_tokens": self.cached_tokens}
        return {
            "trace_id": TRACE_ID_PREFIX + self.trace_id,
            "task_id": task_id,
            "system": SYSTEM,
            "topology": topology(max((agent.depth for agent in self.agents), default=0)),
            "events": events,
            "edges": edges,
            "rewards": self.rewards,
            "costs": {
                "tokens": self.tokens,
                "wall_clock_s": (max(span.end for span in self.spans) - origin) / MICROS_PER_S,
                "tool_calls": self.tool_calls,
                "messages": self.llm_calls,
            },
            "metrics": metrics,
        }

    def _tree(self) -> list[_Span]:
        """Children under parents in start order; the roots. Agent instances are made here."""
        roots = span_tree(self.spans, self.trace_id, self.warnings, "parent_id")
        for span in self.spans:
            span.children.sort(key=lambda child: (child.start, child.order))
            if span.type == "agent":
                name = span.data.get("name") or "agent"
                span.agent = _Agent(f"{name}#{span.id}", str(name), span)
                self.agents.append(span.agent)
        roots.sort(key=lambda root: (root.start, root.order))
        return roots

    def _owner(self, span: _Span) -> _Agent:
        """The agent a span works for: its nearest agent span, itself included."""
        node = span
        while node is not None and node.type != "agent":
            node = node.parent
        if node is not None:
            return node.agent
        if self.fallback is None:
            name = str(self.meta.get("workflow_name") or "agent")
            self.fallback = _Agent(name, name, None)
            self.agents.append(self.fallback)
        return self.fallback

    def _match_handoffs(self) -> None:
        """Pair each handoff span with the agent span it handed control to."""
        claimed = set()
        by_name: dict = {}
        for span in sorted((s for s in self.spans if s.type == "agent"), key=lambda s: (s.start, s.order)):
            name = span.data.get("name")
            if isinstance(name, str):
                by_name.setdefault(name, []).append(span)
        for handoff in sorted((s for s in self.spans if s.type == "handoff"), key=lambda s: (s.start, s.order)):
            source = self._owner(handoff)
            target_name = handoff.data.get("to_agent")
            candidates = [span for span in (by_name.get(target_name, ()) if isinstance(target_name, str) else ())
                          if span.start >= handoff.start and span.id not in claimed and span.agent is not source]
            siblings = [span for span in candidates if source.span is not None and span.parent is source.span.parent]
            chosen = (siblings or candidates or [None])[0]
            if chosen is None:
                self.warnings.append(f"{handoff.location()}: no agent span of {show(target_name)} after this "
                                     "handoff; no spawn recorded")
                continue
            claimed.add(chosen.id)
            earlier = [span for span in by_name[target_name] if span.end <= chosen.start and span is not chosen]
            if earlier:  # control handed back to an agent that ran before: its lane goes on, no second spawn
                chosen.agent.key, chosen.agent.resumes = earlier[-1].agent.key, True
                earlier[-1].agent.resumed_later = True
            source.handoff = (handoff, chosen.agent)
            source.spawns = True
            chosen.agent.handed_from = (handoff, source)

    def _walk(self, root: _Span) -> None:
        """Start-side events before the children, end-side events after them (ties keep that order)."""
        stack: list[tuple[_Span, bool]] = [(root, False)]
        while stack:
            span, leaving = stack.pop()
            try:
                if leaving:
                    self._leave(span)
                    continue
                self._enter(span)
            except ValueError as e:
                raise ImportFailed(f"{span.location()}: {e}") from None
            stack.append((span, True))
            stack.extend((child, False) for child in reversed(span.children))

    def _tag(self, props: dict, span: _Span) -> dict:
        """props with the source identifiers of the span added."""
        props["span_id"] = span.id
        if span.parent_id:
            props["parent_span_id"] = span.parent_id
        props["trace_id"] = self.trace_id
        props["span_type"] = span.type
        return props

    def _content(self, props: dict, value, kept=None) -> None:
        """The hash of `value` onto an event's properties, and, unless the policy is hash, `kept` (else `value`)."""
        if not _empty(value):
            props["content_ref"] = ref(value)
        kept = value if kept is None else kept
        if self.keep and not _empty(kept):
            put_content(props, kept)

    def _error(self, props: dict, span: _Span) -> None:
        if span.error is not None:
            props["error"] = True
            message = span.error.get("message")
            if message:
                props["error_message"] = str(message)

    def _enter(self, span: _Span) -> None:
        kind = span.type
        if kind == "agent":
            self._enter_agent(span)
        elif kind in ("function", "mcp_tools"):
            self._enter_tool(span)
        elif kind == "custom":
            self._custom(span)
        elif kind not in ("generation", "response", "handoff", "guardrail"):
            self._skip(f"span(s) of type {show(kind)}")

    def _leave(self, span: _Span) -> None:
        kind = span.type
        if kind == "agent":
            self._leave_agent(span)
        elif kind in ("generation", "response"):
            self._model_call(span)
        elif kind in ("function", "mcp_tools"):
            self._leave_tool(span)
        elif kind == "guardrail":
            self._guardrail(span)

    def _enter_agent(self, span: _Span) -> None:
        agent = span.agent
        if agent.handed_from is not None:
            handoff, source = agent.handed_from
            agent.caller, agent.run_tool, agent.depth = source.caller, source.run_tool, source.depth
            props = self._tag({"role": agent.role, "to": agent.key, "handoff": True}, handoff)
            props["agent_span_id"] = span.id
            if agent.resumes:
                props.update({"from": source.key, "resumed": True})
                span.first = self.b.add(handoff.end, "message", source.key, props)
                self.b.link_to_next(span.first, agent.key, "message")
            else:
                span.first = self.b.add(handoff.end, "spawn", source.key, props)
                self.b.link_to_first(span.first, agent.key, "spawn")
            return
        above = span.parent
        while above is not None and above.type == "custom":
            above = above.parent
        if above is None:
            props = self._tag({"role": USER, "from": USER, "to": agent.key}, span)
            span.first = self.b.add(span.start, "message", USER, props)
            self.b.link_to_first(span.first, agent.key, "message")
            return
        caller = self._owner(above)
        agent.caller, agent.depth = caller, caller.depth + 1
        caller.spawns = True
        props = self._tag({"role": agent.role, "to": agent.key}, span)
        span.first = self.b.add(span.start, "spawn", caller.key, props)
        self.b.link_to_first(span.first, agent.key, "spawn")
        if above.type == "function":
            agent.run_tool = above
            above.spawned += 1
            self.b.link(above.first, span.first, "causal")

    def _leave_agent(self, span: _Span) -> None:
        agent = span.agent
        props = {"role": agent.role}
        if agent.handoff is not None and agent.resumed_later and not agent.tripwire:
            return  # it handed control on and runs again later: its lane ends there
        if agent.handoff is not None or agent.tripwire:
            if agent.handoff is not None:
                props["handoff_to"] = agent.handoff[1].key
            if agent.tripwire:
                props["tripwire"] = True
            self._error(props, span)
            agent.end = self.b.add(span.end, "despawn", agent.key, self._tag(props, span))
            return
        caller = agent.caller
        props.update({"from": agent.key, "to": caller.key if caller else USER})
        self._error(props, span)
        agent.end = self.b.add(span.end, "return", agent.key, self._tag(props, span))
        if agent.run_tool is not None:
            agent.run_tool.returns.append(agent.end)
        elif caller is not None:
            caller.nested_returns.append((span.end, agent.end))

    def _model_call(self, span: _Span) -> None:
        agent, data = self._owner(span), span.data
        props = {"role": agent.role, "from": agent.key}
        model = data.get("model")
        if model:
            props["to"] = str(model)
        output = data.get("output")
        exchange = {side: data[side] for side in ("input", "output") if not _empty(data.get(side))}
        self._content(props, output, exchange or None)
        self._tag(props, span)
        if model:
            props["model"] = str(model)
        if data.get("response_id"):
            props["response_id"] = data["response_id"]
        usage = data.get("usage")
        tokens_in = _tokens(usage, "input_tokens", "prompt_tokens")
        tokens_out = _tokens(usage, "output_tokens", "completion_tokens")
        for key, value in (("tokens_in", tokens_in), ("tokens_out", tokens_out)):
            if value is not None:
                props[key] = value
                self.tokens += value
        details = usage.get("input_tokens_details") if isinstance(usage, dict) else None
        cached = _tokens(details, "cached_tokens")
        if cached is not None:
            self.cached_tokens = (self.cached_tokens or 0) + cached
        self._error(props, span)
        self.llm_calls += 1
        span.last = self.b.add(span.end, "message", agent.key, props)
        agent.calls.append([span.start, span.end, span.last, _function_calls(output), False])

    def _enter_tool(self, span: _Span) -> None:
        agent, data = self._owner(span), span.data
        if span.type == "function":
            tool = str(data.get("name") or "function")
            props = {"role": agent.role, "tool": tool}
            self._content(props, data.get("input"))
        else:
            tool = "mcp_tools"
            props = {"role": agent.role, "tool": tool}
            if data.get("server"):
                props["mcp_server"] = str(data["server"])
        self._tag(props, span)
        self.tool_calls += 1
        span.first = self.b.add(span.start, "tool_call", agent.key, props)
        agent.tools.append(span)

    def _leave_tool(self, span: _Span) -> None:
        data = span.data
        tool = str(data.get("name") or "function") if span.type == "function" else "mcp_tools"
        props = {"tool": tool}
        self._content(props, data.get("output") if span.type == "function" else data.get("result"))
        self._tag(props, span)
        self._error(props, span)
        span.last = self.b.add(span.end, "tool_result", tool, props)
        self.b.link(span.first, span.last, "tool_dependency")

    def _guardrail(self, span: _Span) -> None:
        agent, data = self._owner(span), span.data
        triggered = data.get("triggered") is True
        props = self._tag({"role": agent.role, "guardrail": str(data.get("name") or "guardrail"),
                           "triggered": triggered}, span)
        self._error(props, span)
        agent.guardrails.append((self.b.add(span.end, "safety_event", agent.key, props), span))
        if triggered:
            agent.tripwire = True

    def _custom(self, span: _Span) -> None:
        data = span.data.get("data") if isinstance(span.data.get("data"), dict) else {}
        name = str(span.data.get("name") or "custom")
        if name in STRUCTURAL or data.get("sdk_span_type") in STRUCTURAL:
            if name == "task" and not self._inside_task(span):
                tokens = [_tokens(data.get("usage"), key) for key in ("input_tokens", "output_tokens")]
                if any(value is not None for value in tokens):
                    self.task_tokens = (self.task_tokens or 0) + sum(value or 0 for value in tokens)
            return
        numbers = {key: value for key, value in data.items() if _number(value)}
        if not numbers:
            self._skip(f"custom span(s) {show(name)} without a numeric value")
        for key, value in numbers.items():
            reward = name if len(numbers) == 1 else f"{name}.{key}"
            if reward in self.rewards:
                self.warnings.append(f"trace {self.trace_id}: reward {show(reward)} given more than once; "
                                     "the latest value is kept")
            self.rewards[reward] = value

    def _skip(self, what: str) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + 1

    @staticmethod
    def _inside_task(span: _Span) -> bool:
        node = span.parent
        while node is not None:
            if node.type == "custom" and node.data.get("name") == "task":
                return True
            node = node.parent
        return False

    def _link_agents(self) -> None:
        """Generation -> tool_call, tool_result -> next generation, handoffs, guardrails, returns; then
        decide which generations are orchestrator decisions."""
        b = self.b
        for agent in self.agents:
            calls = sorted(agent.calls, key=lambda call: call[1])  # by end
            by_start = sorted(agent.calls, key=lambda call: call[0])
            starts = [call[0] for call in by_start]

            def next_call(time: int) -> int | None:
                """The event of the agent's first generation that starts at or after time."""
                place = bisect_left(starts, time)
                return by_start[place][2] if place < len(by_start) else None

            for tool in agent.tools:
                source = self._requester(calls, tool)
                if source is not None:
                    b.link(source[2], tool.first, "causal")
                end = self._tool_end(tool, agent)
                following = next_call(tool.end)
                if following is not None:
                    b.link(end, following, "causal")
            for time, returned in agent.nested_returns:
                following = next_call(time)
                if following is not None:
                    b.link(returned, following, "return")
            if agent.handoff is not None:
                handoff, target = agent.handoff
                earlier = [call for call in calls if call[1] <= handoff.start]
                asking = [call for call in earlier
                          if any(str(fc[0]).startswith(HANDOFF_TOOL_PREFIX) for fc in call[3])]
                decision = (asking or earlier or [None])[-1]
                if decision is not None and target.span.first is not None:
                    decision[4] = True
                    b.link(decision[2], target.span.first, "causal")
                    self._transfer_content(decision, target)
            for index, guardrail in agent.guardrails:
                # A tripped input guardrail stops the agent before its first decision: it guards the despawn.
                guarded = by_start[0][2] if _checks_input(guardrail, calls) and by_start else agent.end
                if guarded is not None:
                    b.link(index, guarded, "safety_flow")
            for call in calls:
                hands_off = any(str(fc[0]).startswith(HANDOFF_TOOL_PREFIX) for fc in call[3])
                if hands_off or (agent.spawns and (call[4] or call[3])):
                    b.types[call[2]] = "orchestrator_decision"

    def _transfer_content(self, decision: list, target: _Agent) -> None:
        """A handoff's spawn keeps the arguments of the `transfer_to_*` call that asked for it (the SDK names
        the tool after the target, in lower case with `_` for spaces)."""
        transfers = [fc for fc in decision[3] if str(fc[0]).startswith(HANDOFF_TOOL_PREFIX)]
        named = HANDOFF_TOOL_PREFIX + target.role.lower().replace(" ", "_")
        call = next((fc for fc in transfers if fc[0] == named), transfers[0] if transfers else None)
        if call is not None:
            self._content(self.b.props[target.span.first], call[2])

    @staticmethod
    def _requester(calls: list[list], tool: _Span) -> list | None:
        """The generation that asked for this tool run (see the module docstring); records the call id."""
        earlier = [call for call in calls if call[1] <= tool.start]
        if tool.type == "function":
            name, arguments = tool.data.get("name"), tool.data.get("input")
            for exact in (True, False):
                for call in reversed(earlier):
                    for fc in call[3]:
                        if not fc[3] and fc[0] == name and (not exact or _same_arguments(fc[2], arguments)):
                            fc[3] = call[4] = True
                            tool.call_id = fc[1] or None
                            return call
        if earlier:
            earlier[-1][4] = True
            return earlier[-1]
        return None

    def _tool_end(self, tool: _Span, agent: _Agent) -> int:
        """A function that started two or more agent runs ends in an aggregate of their returns; the
        recovered call id goes onto the tool call."""
        b = self.b
        if tool.call_id:
            props = b.props[tool.first]
            props["content_ref"] = props["tool_call_id"] = tool.call_id
        end = tool.last
        if tool.spawned >= 2:
            b.types[end], b.agents[end] = "aggregate", agent.key
            b.props[end] = {"role": agent.role, **b.props[end], "inputs": tool.spawned}
        for returned in tool.returns:
            b.link(returned, end, "aggregate" if tool.spawned >= 2 else "return")
        return end


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Each document of the upload: an exporter's `{"data": [...]}` batch, or the records themselves."""
    result = ImportResult()
    for upload, records in batch.documents:
        doc = records[0] if len(records) == 1 and isinstance(records[0], dict) and "data" in records[0] else records
        batch.merge(result, import_agents(doc, content_policy), upload.source)
    return result


FORMAT = Format("openai_agents", "OpenAI Agents SDK trace exports (its BackendSpanExporter's batches, or their records)",
                lambda records: (len(records) == 1 and looks_like_openai_agents(records[0]))
                or looks_like_openai_agents(records), _convert, 20)
