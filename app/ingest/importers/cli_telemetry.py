"""The coding CLIs' own OpenTelemetry: Claude Code's `claude_code.*` OTLP log events as one trace per session.

Pure: from OTLP/JSON-shaped logs documents (otlp_logs.decode_logs_request, or an exporter's JSON) to an
ImportResult. Read from what Claude Code 2.1.332 sent (tests/fixtures/cli_telemetry/claude_code/2.1.332/):
every record's body is `claude_code.<event>`, its attributes carry `session.id`, `event.name`,
`event.timestamp` (ISO-8601), `event.sequence`, `prompt.id`, and on a sub-agent's records `agent_id`.

Mapping (as the transcript importer, claude_code.py, would give where the events allow):
- one trace per `session.id`, id `claude-code-otel-<session>`, system "claude-code <service.version>",
  topology `harness`; t from `event.timestamp` (else the record's time), ties kept in `event.sequence` order.
- agents: records without `agent_id` are `main`; a sub-agent is `<agent.name or agent_type>#<agent_id>`.
- `user_prompt` -> `message` user -> main (`content_ref` = hash of prompt.id: the prompt text is redacted
  unless OTEL_LOG_USER_PROMPTS is set).
- `api_request` -> `message` agent -> model at its start (event time - `duration_ms`: it is logged when the
  response ended), `orchestrator_decision` when it asked for a tool and its agent spawns; `causal` edge to each
  tool call or spawn of its agent that follows it before the agent's next call; `tokens_in` = input + cache_read + cache_creation tokens,
  `tokens_out` = output tokens (Anthropic's input excludes cache tokens, as in §2).
- `tool_decision` of `Agent`/`Task` -> `spawn` (agent = caller); the sub-agent is the next agent_id first seen
  after it; `spawn` edge to the child's first event. Any other `tool_decision` -> `tool_call`
  (`tool`, `content_ref` = tool_use_id); `decision: reject` adds `human_intervention`.
- `tool_result` -> `tool_result` (agent = the tool, error when `success` is not true), `tool_dependency`
  from its call. An `Agent` call's result is structural (the sub-agent may run async): no event.
- `subagent_completed` -> `return` (agent = child, `to` = its caller), `tool_dependency` spawn -> return.
- `api_error` -> `safety_event`. `assistant_response` joins its api_request (no event of its own).
- Other events (plugin_loaded, managed_settings_resolved, ...) make no event: counted in `skipped` by name.
"""

import json
from collections import Counter
from datetime import datetime

from app.ingest.importers.common import ImportResult, TraceBuilder, ref
from app.ingest.importers.otlp_logs import iter_records

MAIN, USER = "main", "user"
DELEGATING = frozenset({"Agent", "Task"})
PREFIX = "claude_code."
JOINED = frozenset({"assistant_response"})  # known events folded into another
MAPPED = frozenset({"user_prompt", "api_request", "tool_decision", "tool_result", "subagent_completed",
                    "api_error"}) | JOINED


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


def attributes(record: dict) -> dict:
    out = {}
    for kv in record.get("attributes") or []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = value_of(kv.get("value"))
    return out


def event_name(record: dict, attrs: dict) -> str | None:
    """`claude_code.<name>` from the body, eventName or the event.name attribute; None for any other record."""
    for name in (value_of(record.get("body")), record.get("eventName")):
        if isinstance(name, str) and name.startswith(PREFIX):
            return name[len(PREFIX):]
    name = attrs.get("event.name")
    return name if isinstance(name, str) and isinstance(attrs.get("session.id"), str) else None


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
    return _number(record.get("timeUnixNano")) / 1e9


def read_events(docs: list[dict]) -> tuple[dict[str, list[tuple]], Counter, dict[str, str]]:
    """Claude Code events of logs documents by session: [(time, sequence, name, attrs)], what was skipped and
    why (reason -> count), and each session's CLI version."""
    sessions: dict[str, list[tuple]] = {}
    skipped: Counter = Counter()
    versions: dict[str, str] = {}
    for doc in docs:
        for _where, resource, scope, record in iter_records(doc):
            attrs = attributes(record)
            name = event_name(record, attrs)
            session = attrs.get("session.id")
            if name is None or not isinstance(session, str):
                skipped[f"not a Claude Code event (scope {(scope or {}).get('name') or '?'})"] += 1
                continue
            sessions.setdefault(session, []).append((_time(record, attrs), _number(attrs.get("event.sequence")),
                                                    name, attrs))
            version = attributes(resource or {}).get("service.version")
            if isinstance(version, str):
                versions[session] = version
    return sessions, skipped, versions


NOT_YET_LIVE = ("Claude Code event: read by cli_telemetry, not yet built into a trace from /v1/logs "
                "(live wiring pending)")


def tally(doc: dict) -> Counter:
    """Why each record of a logs document makes no stored trace yet (reason -> count; every record counted once):
    a record of no CLI this module reads says so; a Claude Code event is read (import_logs maps it) but /v1/logs
    does not build live traces from it yet."""
    sessions, skipped, _ = read_events([doc])
    for events in sessions.values():
        for _time, _sequence, name, _attrs in events:
            skipped[NOT_YET_LIVE if name in MAPPED else f"claude_code.{name}: makes no trace event"] += 1
    return skipped


def import_logs(docs: list[dict]) -> tuple[ImportResult, Counter]:
    """Traces of the Claude Code sessions in OTLP/JSON logs documents, and the records that made none (reason ->
    count)."""
    sessions, skipped, versions = read_events(docs)
    result = ImportResult()
    for session, events in sessions.items():
        events.sort(key=lambda e: (e[0], e[1]))
        result.traces.append(_session_trace(session, events, versions.get(session), skipped, result.warnings))
    return result, skipped


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
            tool = attrs.get("tool_name") or "unknown_tool"
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
            tool = attrs.get("tool_name") or "unknown_tool"
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


def _role(attrs: dict) -> str:
    try:
        parameters = json.loads(attrs.get("tool_parameters") or "{}")
    except ValueError:
        parameters = {}
    role = parameters.get("subagent_type") if isinstance(parameters, dict) else None
    return role if isinstance(role, str) else "subagent"
