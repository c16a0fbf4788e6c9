"""The coding CLIs' own OpenTelemetry: Claude Code's `claude_code.*` and Codex's `codex.*` OTLP log events, each
session one trace, as their transcripts (claude_code.py) and rollouts (codex.py) would give where the events allow.

Pure: from OTLP/JSON-shaped logs documents (otlp_logs.decode_logs_request, or an exporter's JSON) to an
ImportResult. `sort_record` tells, record by record, which session a record belongs to (and its stable id, so a
retried batch adds nothing) or why it makes no trace event; app.services.live keeps the records it sorts in as
parts of a live trace (sources `claude_code_otel`, keyed by session.id, and `codex_otel`, keyed by the root
thread) and builds them with `import_logs`. `span_reason` recognises the CLIs' spans on /v1/traces (see below).

Claude Code (read from what 2.1.332 sent, tests/fixtures/cli_telemetry/claude_code/2.1.332/): every record's body
is `claude_code.<event>`, its attributes carry `session.id`, `event.name`, `event.timestamp` (ISO-8601),
`event.sequence`, `prompt.id`, and on a sub-agent's records `agent_id`.
- one trace per `session.id`, id `claude-code-otel-<session>`, system "claude-code <service.version>",
  topology `harness`; t from `event.timestamp` (else the record's time), ties kept in `event.sequence` order.
- agents: records without `agent_id` are `main`; a sub-agent is `<agent.name or agent_type>#<agent_id>`.
- `user_prompt` -> `message` user -> main (`content_ref` = hash of prompt.id: the prompt text is redacted
  unless OTEL_LOG_USER_PROMPTS is set).
- `api_request` -> `message` agent -> model at its start (event time - `duration_ms`: it is logged when the
  response ended), `orchestrator_decision` when it asked for a tool and its agent spawns; `causal` edge to each
  tool call or spawn of its agent that follows it before the agent's next call; `tokens_in` = input + cache_read +
  cache_creation tokens, `tokens_out` = output tokens (Anthropic's input excludes cache tokens, as in §2).
- `tool_decision` of `Agent`/`Task` -> `spawn` (agent = caller); the sub-agent is the next agent_id first seen
  after it; `spawn` edge to the child's first event. Any other `tool_decision` -> `tool_call`
  (`tool`, `content_ref` = tool_use_id); `decision: reject` adds `human_intervention`.
- `tool_result` -> `tool_result` (agent = the tool, error when `success` is not true), `tool_dependency`
  from its call. An `Agent` call's result is structural (the sub-agent may run async): no event.
- `subagent_completed` -> `return` (agent = child, `to` = its caller), `tool_dependency` spawn -> return.
- `api_error` -> `safety_event`. `assistant_response` joins its api_request (no event of its own).
- Other events (plugin_loaded, managed_settings_resolved, ...) make no event: counted skipped by name.

Codex (read from what 0.171.0 sent, tests/fixtures/cli_telemetry/codex/0.171.0/, the multi_agent_v1 scenario of
tests/fixtures/codex/0.171.0/): records carry no body; `event.name` is `codex.<event>`, and `conversation.id`
names the thread (a sub-agent is a thread of its own), `event.timestamp` the time. One trace per root thread, id
`codex-otel-<thread>`, system "codex <app.version>", topology `harness`; a thread is a sub-agent of the thread
whose `spawn_agent` result names it (`{"agent_id": <thread>, "nickname"}`, multi-agent v1; v2 names a task path,
not a thread, so its sub-agents stay traces of their own).
- agents: the root thread is `main`; a sub-agent `subagent#<nickname>` (else its thread id), as codex.py.
- `user_prompt` of the root -> `message` user -> main (content the prompt when Codex logged it,
  `log_user_prompt`); a sub-agent's is its task, which its spawn carries: no event.
- a model call is the `sse_event` `response.completed` carrying token counts (Codex logs a second one without):
  `message` agent -> model at the thread's `api_request` before it (logged when the response began; its
  `duration_ms` may hold a wait for sub-agents before the request, so it is not subtracted),
  `tokens_in` = input tokens (cached included, as OpenAI counts them), `tokens_out` = output tokens; cached and
  reasoning tokens summed in `metrics`. `orchestrator_decision` as for Claude Code. The reasoning summary is not
  logged (only its stream deltas, skipped), so a call is not a decision for having reasoned, as it is in codex.py.
- `tool_result` (logged when the tool returned, with `duration_ms`, `arguments`, `output`, `success`) -> a
  `tool_call` on the calling agent's lane at its start and the `tool_result` (agent = the tool, error when
  `success` is not true or the output says it exited non-zero), `tool_dependency` between them, `causal` from the
  model call that asked and into the agent's next one. `spawn_agent` -> `spawn` (to the child, `nickname`,
  `thread_id`), `spawn` edge to the child's first event, no result event. A `wait_agent` result naming children
  completed -> each child's `return` (at the child's last event, `to` the caller) into that result: one gets a `return` edge, several an `aggregate` event of the caller with `aggregate` edges.
  `tool_decision` joins its result; one not approved adds `human_intervention`.
- Other events (conversation_starts, startup_phase, turn_ttft, the other sse_event kinds) make no event.

Spans (`span_reason`): Claude Code's `claude_code.*` spans and Codex's `codex_*` service spans repeat what their
log events say (Claude Code's model calls and tools; Codex's internals, some 1,700 spans for the fixture's run),
and would otherwise build a second trace of the same session (Claude Code) or be refused as no agent span
(Codex). They are counted skipped, naming the logs-based trace that covers them.
"""

import json
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

from app.ingest.importers.common import (
    KEEP,
    ContentPolicy,
    ImportResult,
    TraceBuilder,
    keeps,
    put_content,
    ref,
    tool_name,
)
from app.ingest.importers.otlp_logs import iter_records

CLAUDE_CODE, CODEX = "claude_code_otel", "codex_otel"  # live sources
SOURCES = (CLAUDE_CODE, CODEX)
TRACE_ID_PREFIXES = {CLAUDE_CODE: "claude-code-otel-", CODEX: "codex-otel-"}
MAIN, USER = "main", "user"
DELEGATING = frozenset({"Agent", "Task"})
PREFIX, CODEX_PREFIX = "claude_code.", "codex."
JOINED = frozenset({"assistant_response"})  # known events folded into another
MAPPED = frozenset({"user_prompt", "api_request", "tool_decision", "tool_result", "subagent_completed",
                    "api_error"}) | JOINED
CODEX_MAPPED = frozenset({"user_prompt", "api_request", "tool_decision", "tool_result"})
COMPLETED = "response.completed"
SPAWN_TOOL, WAIT_TOOL = "spawn_agent", "wait_agent"
APPROVED = frozenset({"approved", "approved_for_session", "approved_execpolicy_amendment"})
EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
CLAUDE_SPANS_SCOPE = "com.anthropic.claude_code.tracing"
CODEX_SERVICE_PREFIX = "codex_"  # Codex's originators: codex_exec, codex_cli_rs, ...
MS_PER_S = 1000


@dataclass(frozen=True)
class Sorted:
    """Where a log record goes: its live source, session (Claude Code's session.id, Codex's thread), stable id,
    and the threads it names as spawned by its own (Codex's spawn_agent result)."""

    source: str
    session: str
    id: str
    children: tuple[str, ...] = ()


def value_of(any_value):
    """The plain value of an OTLP/JSON AnyValue (scalars only; lists and maps as their JSON-shaped dict)."""
    if not isinstance(any_value, dict) or not any_value:
        return None
    key, value = next(iter(any_value.items()))
    if key == "intValue":
        try:
            return int(value)
        except (TypeError, ValueError):
            return None
    return value


def attributes(record) -> dict:
    """The attributes of a record, span or resource as a plain dict (nothing when they are not a list)."""
    pairs = record.get("attributes") if isinstance(record, dict) else None
    out = {}
    for kv in pairs if isinstance(pairs, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = value_of(kv.get("value"))
    return out


def event_name(record: dict, attrs: dict) -> str | None:
    """`claude_code.<name>` from the body, eventName or the event.name attribute; None for any other record."""
    for name in (value_of(record.get("body")), record.get("eventName")):
        if isinstance(name, str) and name.startswith(PREFIX):
            return name[len(PREFIX):]
    name = attrs.get("event.name")
    if isinstance(name, str) and name.startswith(CODEX_PREFIX):
        return None
    return name if isinstance(name, str) and isinstance(attrs.get("session.id"), str) else None


def codex_event_name(attrs: dict) -> str | None:
    """`<name>` of a Codex record (event.name `codex.<name>` with a conversation.id); None for any other."""
    name = attrs.get("event.name")
    if isinstance(name, str) and name.startswith(CODEX_PREFIX) and isinstance(attrs.get("conversation.id"), str):
        return name[len(CODEX_PREFIX):]
    return None


def _number(value) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0


def _time(record: dict, attrs: dict) -> float:
    stamp = attrs.get("event.timestamp")
    if isinstance(stamp, str):
        try:
            return datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            pass
    return _number(record.get("timeUnixNano") or record.get("observedTimeUnixNano")) / 1e9


def _json(text):
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


def spawned_thread(attrs: dict) -> str | None:
    """The thread a Codex spawn_agent result names (multi-agent v1: `{"agent_id": <thread>, ...}`)."""
    if attrs.get("tool_name") != SPAWN_TOOL:
        return None
    output = _json(attrs.get("output"))
    child = output.get("agent_id") if isinstance(output, dict) else None
    return child if isinstance(child, str) else None


def _codex_used(name: str, attrs: dict) -> str | None:
    """Why a Codex event makes no trace event; None when the mapping uses it."""
    if name in CODEX_MAPPED:
        return None
    if name == "sse_event":
        kind = attrs.get("event.kind")
        if kind == COMPLETED and "input_token_count" in attrs:
            return None
        if kind == COMPLETED:
            return "codex.sse_event response.completed without token counts: its twin with them is the model call"
        return f"codex.sse_event {kind}: makes no trace event"
    return f"codex.{name}: makes no trace event"


def sort_record(resource: dict, scope: dict, record: dict) -> Sorted | str:
    """The session a log record belongs to and its stable id, or why no trace uses it."""
    attrs = attributes(record)
    name = event_name(record, attrs)
    session = attrs.get("session.id")
    if name is not None and isinstance(session, str):
        if name not in MAPPED:
            return f"claude_code.{name}: makes no trace event"
        stamp = attrs.get("event.timestamp") or record.get("timeUnixNano")
        return Sorted(CLAUDE_CODE, session, f"{attrs.get('event.sequence')}:{name}:{stamp}")
    name = codex_event_name(attrs)
    if name is None:
        return f"not a Claude Code or Codex event (scope {_name(scope) or '?'})"
    reason = _codex_used(name, attrs)
    if reason:
        return reason
    thread = attrs["conversation.id"]
    # Codex numbers nothing: a record is told apart by when it was observed and what it says
    identity = ref([name, _number(record.get("observedTimeUnixNano")), _number(record.get("timeUnixNano")),
                    sorted(attrs.items(), key=lambda kv: kv[0])])
    child = spawned_thread(attrs)
    return Sorted(CODEX, thread, f"{name}:{identity}", (child,) if child else ())


def span_reason(resource: dict, scope: dict, span: dict) -> str | None:
    """Why a span on /v1/traces is one of a coding CLI's, whose session its log events build; None otherwise."""
    resource_attrs = attributes(resource)
    name = _name(span)
    if _name(scope) == CLAUDE_SPANS_SCOPE or (isinstance(name, str) and name.startswith(PREFIX)
                                             and resource_attrs.get("service.name") == "claude-code"):
        session = attributes(span).get("session.id")
        trace = f"{TRACE_ID_PREFIXES[CLAUDE_CODE]}{session}" if isinstance(session, str) else "its session's trace"
        return (f"Claude Code span: its session is built from Claude Code's log events on POST /v1/logs "
                f"({trace}), which say what its spans say")
    service = resource_attrs.get("service.name")
    if isinstance(service, str) and service.startswith(CODEX_SERVICE_PREFIX):
        return ("Codex span: its session is built from Codex's log events on POST /v1/logs (codex-otel-<root "
                "thread>); its spans trace Codex's internals")
    return None


def _name(scope_or_span):
    return scope_or_span.get("name") if isinstance(scope_or_span, dict) else None


def read_records(docs: list[dict]) -> tuple[dict[tuple[str, str], list[tuple]], Counter, dict[tuple[str, str], str],
                                            dict[str, str]]:
    """The records of logs documents by (source, session): [(time, sequence, name, attrs)] without repeats, what
    was skipped and why (reason -> count), each session's CLI version, and Codex's spawned threads (child ->
    parent)."""
    sessions: dict[tuple[str, str], dict[str, tuple]] = {}
    skipped: Counter = Counter()
    versions: dict[tuple[str, str], str] = {}
    parents: dict[str, str] = {}
    for doc in docs:
        for _where, resource, scope, record in iter_records(doc):
            where = sort_record(resource, scope, record)
            if isinstance(where, str):
                skipped[where] += 1
                continue
            attrs = attributes(record)
            key = (where.source, where.session)
            if where.source == CLAUDE_CODE:
                name, sequence = event_name(record, attrs), _number(attrs.get("event.sequence"))
                version = attributes(resource or {}).get("service.version")
            else:
                name, sequence = codex_event_name(attrs), _number(record.get("observedTimeUnixNano"))
                version = attrs.get("app.version")
            sessions.setdefault(key, {})[where.id] = (_time(record, attrs), sequence, name, attrs)
            parents.update(dict.fromkeys(where.children, where.session))
            if isinstance(version, str):
                versions[key] = version
    return {key: list(events.values()) for key, events in sessions.items()}, skipped, versions, parents


def import_logs(docs: list[dict], content_policy: ContentPolicy = KEEP) -> tuple[ImportResult, Counter]:
    """Traces of the Claude Code sessions and Codex root threads in OTLP/JSON logs documents, and the records that
    made none (reason -> count)."""
    sessions, skipped, versions, parents = read_records(docs)
    result = ImportResult()
    for events in sessions.values():
        events.sort(key=lambda e: (e[0], e[1]))
    for (source, session), events in sessions.items():
        if source == CLAUDE_CODE:
            result.traces.append(_session_trace(session, events, versions.get((source, session)), skipped,
                                                result.warnings))
    threads = {session: events for (source, session), events in sessions.items() if source == CODEX}
    for root in threads:
        if _root_of(root, parents) == root:
            tree = {t: events for t, events in threads.items() if _root_of(t, parents) == root}
            result.traces.append(_CodexTrace(root, tree, parents, versions.get((CODEX, root)),
                                             keeps(content_policy)).build())
    return result, skipped


def _root_of(thread: str, parents: dict[str, str]) -> str:
    seen = {thread}
    while thread in parents and parents[thread] not in seen:
        thread = parents[thread]
        seen.add(thread)
    return thread


def _session_trace(session: str, events: list[tuple], version: str | None, skipped: Counter,
                   warnings: list[str]) -> dict:
    roles: dict[str, str] = {}
    for _t, _s, _name, attrs in events:
        agent_id = attrs.get("agent_id")
        role = attrs.get("agent.name") or attrs.get("agent_type")
        if isinstance(agent_id, str) and isinstance(role, str):
            roles.setdefault(agent_id, role)

    def agent_of(attrs: dict) -> str:
        agent_id = attrs.get("agent_id")
        if not isinstance(agent_id, str):
            return MAIN
        return f"{roles.get(agent_id, 'subagent')}#{agent_id}"

    b = TraceBuilder()
    calls: dict[str, int] = {}  # tool_use_id -> tool_call or spawn event
    pending_spawns: list[tuple[int, str]] = []  # spawns whose child is not seen yet: (event, caller)
    children: dict[str, tuple[int, str]] = {}  # child agent -> (spawn event, caller)
    api_calls: dict[str, list[tuple[float, int]]] = {}  # agent -> (start, event) of its model calls
    requests: list[tuple[float, str, int]] = []  # (time, agent, event) of tool calls and spawns
    llm_calls = tool_calls = 0
    for time, sequence, name, attrs in events:
        agent = agent_of(attrs)
        if agent != MAIN and agent not in children and pending_spawns:
            spawn, caller = pending_spawns.pop(0)
            children[agent] = (spawn, caller)
            b.props[spawn]["to"] = agent
            b.link_to_first(spawn, agent, "spawn")
        source = {"session_id": session, "sequence": sequence}
        for key in ("prompt.id", "tool_use_id", "request_id", "agent_id"):
            if isinstance(attrs.get(key), str):
                source[key.replace(".", "_")] = attrs[key]
        if name == "user_prompt":
            b.add(time, "message", USER, {"from": USER, "to": MAIN,
                                          "content_ref": ref(attrs.get("prompt.id") or sequence), **source})
        elif name == "api_request":
            llm_calls += 1
            tokens_in = sum(_number(attrs.get(k)) for k in ("input_tokens", "cache_read_tokens",
                                                             "cache_creation_tokens"))
            start = time - _number(attrs.get("duration_ms")) / 1000  # logged when the response ended
            api_calls.setdefault(agent, []).append((start, b.add(start, "message", agent, {
                "from": agent, "to": attrs.get("model") or "model",
                                           "tokens_in": tokens_in, "tokens_out": _number(attrs.get("output_tokens")),
                **source})))
        elif name == "tool_decision":
            tool = tool_name(attrs.get("tool_name"))
            if tool in DELEGATING:
                index = b.add(time, "spawn", agent, {"from": agent, "to": None, "role": _role(attrs), **source})
                pending_spawns.append((index, agent))
            else:
                tool_calls += 1
                index = b.add(time, "tool_call", agent, {"tool": tool, "content_ref": attrs.get("tool_use_id")
                                                         or ref(sequence), **source})
            requests.append((time, agent, index))
            if isinstance(attrs.get("tool_use_id"), str):
                calls[attrs["tool_use_id"]] = index
            if attrs.get("decision") == "reject":
                b.link(index, b.add(time, "human_intervention", USER, {"decision": "reject", **source}), "causal")
        elif name == "tool_result":
            tool = tool_name(attrs.get("tool_name"))
            if tool in DELEGATING:
                continue  # the sub-agent's return is subagent_completed
            index = b.add(time, "tool_result", tool, {"tool": tool, "error": str(attrs.get("success")).lower()
                                                      != "true", "content_ref": attrs.get("tool_use_id")
                                                      or ref(sequence), **source})
            call = calls.get(attrs.get("tool_use_id"))
            if call is not None:
                b.link(call, index, "tool_dependency")
        elif name == "subagent_completed":
            spawn, caller = children.get(agent, (None, MAIN))
            index = b.add(time, "return", agent, {"from": agent, "to": caller,
                                                  "reported_total_tokens": _number(attrs.get("total_tokens")),
                                                  **source})
            if spawn is not None:
                b.link(spawn, index, "tool_dependency")
        elif name == "api_error":
            b.add(time, "safety_event", agent, {"kind": "api_error", "error": True, **source})
        elif name not in MAPPED:
            skipped[f"claude_code.{name}: makes no trace event"] += 1
    for index, _caller in pending_spawns:
        b.props[index]["to"] = "unknown"
        warnings.append(f"session {session}: a delegation whose sub-agent sent no event")
    spawning = {b.agents[i] for i, type_ in enumerate(b.types) if type_ == "spawn"}
    for time, agent, index in requests:  # the model call that asked for it: the agent's latest one started before
        asked = [i for start, i in api_calls.get(agent, []) if start <= time]
        if asked:
            b.link(asked[-1], index, "causal")
            if agent in spawning:
                b.types[asked[-1]] = "orchestrator_decision"
    origin = min(b.times) if b.times else events[0][0]
    trace_events, edges = b.finish(origin, places=3, min_digits=4)
    return {
        "trace_id": f"claude-code-otel-{session}",
        "task_id": session,
        "system": f"claude-code {version}" if version else "claude-code",
        "topology": "harness",
        "events": trace_events,
        "edges": edges,
        "rewards": {},
        "costs": {"tokens": sum(e.get("tokens_in", 0) + e.get("tokens_out", 0) for e in trace_events),
                  "wall_clock_s": round(max(b.times, default=origin) - origin, 3), "tool_calls": tool_calls,
                  "messages": llm_calls},
        "metrics": {},
    }




class _CodexTrace:
    """One Codex root thread and its sub-agent threads, as one trace."""

    def __init__(self, root: str, threads: dict[str, list[tuple]], parents: dict[str, str], version: str | None,
                 keep: bool):
        self.root, self.threads, self.parents, self.version, self.keep = root, threads, parents, version, keep
        self.b = TraceBuilder()
        self.lanes = {root: MAIN}
        self.spawns: dict[str, int] = {}  # child thread -> its spawn event
        self.calls: dict[str, list[tuple[float, int]]] = {}  # agent -> (start, event) of its model calls
        self.requests: list[tuple[float, str, int]] = []  # (time, agent, event) of tool calls and spawns
        self.results: list[tuple[float, str, int]] = []  # (time, calling agent, event) of tool results
        self.waits: list[tuple[float, str, int, dict]] = []  # wait_agent results: (time, caller, event, status)
        self.metrics = Counter()
        self.tool_calls = 0

    def build(self) -> dict:
        for thread, events in self.threads.items():  # children are named in their parents' spawn results
            for _t, _s, name, attrs in events:
                child = spawned_thread(attrs) if name == "tool_result" else None
                if child:
                    nickname = (_json(attrs.get("output")) or {}).get("nickname")
                    self.lanes[child] = f"subagent#{nickname if isinstance(nickname, str) else child}"
        for thread, events in self.threads.items():
            self._thread(thread, events)
        self._returns()
        b = self.b
        spawning = {b.agents[i] for i, type_ in enumerate(b.types) if type_ == "spawn"}
        for time, agent, index in self.requests:  # the model call that asked: the agent's latest one before
            asked = [i for start, i in self.calls.get(agent, []) if start <= time]
            if asked:
                b.link(asked[-1], index, "causal")
                if agent in spawning:
                    b.types[asked[-1]] = "orchestrator_decision"
        for time, agent, index in self.results:  # and the call that read the result: the agent's next one
            read = [i for start, i in self.calls.get(agent, []) if start >= time]
            if read:
                b.link(index, read[0], "causal")
        origin = min(b.times) if b.times else 0
        trace_events, edges = b.finish(origin, places=3, min_digits=4)
        return {
            "trace_id": TRACE_ID_PREFIXES[CODEX] + self.root,
            "task_id": self.root,
            "system": f"codex {self.version}" if self.version else "codex",
            "topology": "harness",
            "events": trace_events,
            "edges": edges,
            "rewards": {},
            "costs": {"tokens": sum(e.get("tokens_in", 0) + e.get("tokens_out", 0) for e in trace_events),
                      "wall_clock_s": round(max(b.times, default=origin) - origin, 3),
                      "tool_calls": self.tool_calls, "messages": sum(len(c) for c in self.calls.values())},
            "metrics": {**self.metrics, "threads": len(self.threads)},
        }

    def _lane(self, thread: str) -> str:
        return self.lanes.get(thread, f"subagent#{thread}")

    def _content(self, props: dict, value) -> dict:
        if value is not None:
            props["content_ref"] = ref(value)
            if self.keep:
                put_content(props, value)
        return props

    def _thread(self, thread: str, events: list[tuple]) -> None:
        b, agent = self.b, self._lane(thread)
        starts: list[float] = []  # this thread's api_request starts not yet matched to a response
        decisions: dict[str, str] = {}  # call_id -> decision
        for time, _sequence, name, attrs in events:
            source = {"thread_id": thread}
            if name == "user_prompt" and thread == self.root:
                index = b.add(time, "message", USER, self._content({"from": USER, "to": MAIN, **source},
                                                                     attrs.get("prompt")))
                b.link_to_next(index, MAIN, "message")
            elif name == "api_request":
                starts.append(time)  # the response began: its duration_ms may hold a wait before the request
            elif name == "sse_event":
                start = starts.pop(0) if starts else time
                index = b.add(start, "message", agent, {
                    "from": agent, "to": attrs.get("model") or "model", "tokens_in": _number(attrs.get("input_token_count")),
                    "tokens_out": _number(attrs.get("output_token_count")), **source})
                self.calls.setdefault(agent, []).append((start, index))
                self.metrics["cached_input_tokens"] += _number(attrs.get("cached_token_count"))
                self.metrics["reasoning_output_tokens"] += _number(attrs.get("reasoning_token_count"))
            elif name == "tool_decision":
                decisions[attrs.get("call_id")] = attrs.get("decision")
            elif name == "tool_result":
                self._tool(time, agent, attrs, decisions.get(attrs.get("call_id")), source)

    def _tool(self, time: float, agent: str, attrs: dict, decision, source: dict) -> None:
        b = self.b
        start = time - _number(attrs.get("duration_ms")) / MS_PER_S
        tool = tool_name(attrs.get("tool_name"))
        if attrs.get("mcp_server"):
            tool = f"{attrs.get('tool_namespace') or attrs['mcp_server']}__{tool}"
        source = {**source, "call_id": attrs.get("call_id")}
        child = spawned_thread(attrs)
        if child:
            nickname = (_json(attrs.get("output")) or {}).get("nickname")
            index = b.add(start, "spawn", agent, self._content({
                "from": agent, "to": self._lane(child), "role": "subagent", "tool": tool, "nickname": nickname,
                "child_thread_id": child, **source}, _json(attrs.get("arguments"))))
            b.link_to_first(index, self._lane(child), "spawn")
            self.spawns[child] = index
            self.requests.append((start, agent, index))
            return
        self.tool_calls += 1
        call = b.add(start, "tool_call", agent, self._content({"tool": tool, **source},
                                                              _json(attrs.get("arguments")) or attrs.get("arguments")))
        self.requests.append((start, agent, call))
        if decision is not None and decision not in APPROVED:
            b.link(call, b.add(start, "human_intervention", USER, {"decision": decision, **source}), "causal")
        output = attrs.get("output")
        exit_code = EXIT_CODE.search(output) if isinstance(output, str) else None
        error = str(attrs.get("success")).lower() != "true" or bool(exit_code and int(exit_code.group(1)))
        result = b.add(time, "tool_result", tool, self._content({"tool": tool, "error": error, **source}, output))
        b.link(call, result, "tool_dependency")
        self.results.append((time, agent, result))
        status = (_json(output) or {}).get("status") if tool == WAIT_TOOL else None
        if isinstance(status, dict):
            self.waits.append((time, agent, result, status))

    def _returns(self) -> None:
        """Children a wait_agent result names completed return into it, at their last event (codex.py's rule)."""
        b, returned = self.b, set()
        last = {thread: max(e[0] for e in events) for thread, events in self.threads.items() if events}
        for time, caller, result, status in self.waits:
            returns = []
            for child, state in status.items():
                if child in returned or child not in self.spawns or not isinstance(state, dict) \
                        or not {"completed", "errored"} & set(state):
                    continue
                returned.add(child)
                lane = self._lane(child)
                index = b.add(min(last.get(child, time), time), "return", lane, self._content(
                    {"from": lane, "to": caller, "thread_id": child}, state.get("completed")))
                returns.append(index)
            if len(returns) == 1:
                b.link(returns[0], result, "return")
            elif returns:
                aggregate = b.add(max(b.times[i] for i in returns), "aggregate", caller, {"thread_id": self.root})
                for index in returns:
                    b.link(index, aggregate, "aggregate")
                b.link(aggregate, result, "causal")


def _role(attrs: dict) -> str:
    try:
        parameters = json.loads(attrs.get("tool_parameters") or "{}")
    except ValueError:
        parameters = {}
    role = parameters.get("subagent_type") if isinstance(parameters, dict) else None
    return role if isinstance(role, str) else "subagent"
