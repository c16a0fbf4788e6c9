"""Import a Kimi CLI session folder: one trace per session, the main agent and each sub-agent as lanes.

kimi-cli (recorded with 1.52.0, `tests/fixtures/kimi/`) writes `~/.kimi/sessions/<work dir hash>/<session id>/`:
`wire.jsonl` (the UI event stream: a `{"type": "metadata", "protocol_version"}` line, then records
`{timestamp, message: {type, payload}}`), `context.jsonl` (the model's history), `state.json`, and one
`subagents/<agent id>/` folder per agent its `Agent` tool started, with the same two files, `meta.json` and
`prompt.txt`. The main wire also carries every sub-agent event again as `SubagentEvent {parent_tool_call_id,
agent_id, subagent_type, event}`: those copies are read only for a sub-agent whose folder is missing (with a
warning), so nothing is counted twice.

The mapping (choices where the taxonomy does not speak):
- Agents: `main` (role `lead`); a sub-agent is `<subagent_type>#<agent id>` (role its type). The user is `user`;
  what the harness itself asks of a sub-agent after its first turn (a `TurnBegin` with text it wrote, e.g. asking
  for a longer summary) comes from `system`.
- Model calls: a `StepBegin` opens one; its `ContentPart`s (text, think) and `ToolCall`s are its output, content
  `{"output": [...]}`; the next `StatusUpdate` carrying `token_usage` closes it with `tokens_in` = input_other +
  input_cache_read + input_cache_creation and `tokens_out` = output (per call, as the wire reports it). It is an
  `orchestrator_decision` when it calls `Agent`, else a `message`.
- Tools: a `ToolCall` is a `tool_call` on the calling lane (content its parsed arguments), its `ToolResult` a
  `tool_result` of the tool (content the `return_value`, `error` from `is_error`); edges causal model call ->
  call, tool_dependency call -> result, causal result -> the agent's next model call.
- Delegation: an `Agent` call is a `spawn` (agent = caller, `to` = the sub-agent, content its arguments) with a
  `spawn` edge to the sub-agent's first event; its `ToolResult` is the sub-agent's `return` (content the output)
  into the caller's next model call; two or more returns read by the same call meet in an `aggregate`.
  The sub-agent is joined to its call by `parent_tool_call_id` (SubagentEvent), else by the `agent_id:` line of
  the call's result.
- task_id is the session id; system "kimi-cli (wire <protocol_version>)"; topology `harness`.
- Refused (ImportFailed naming file and line): a line that is not JSON, a record not of the wire's shape, an empty
  wire. Skipped with a warning: record types this mapping does not know, results for unknown calls.
"""

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from app.ingest.documents import decode
from app.ingest.importers.common import (
    Batch,
    ContentPolicy,
    Format,
    ImportFailed,
    ImportResult,
    TraceBuilder,
    keeps,
    next_at,
    put_content,
    ref,
    show,
)

MAIN, USER, SYSTEM, MODEL = "main", "user", "system", "model"
LEAD_ROLE = "lead"
AGENT_TOOL = "Agent"
WIRE, CONTEXT = "wire.jsonl", "context.jsonl"
QUIET = frozenset({"TurnEnd", "StatusUpdate", "CompactionBegin", "CompactionEnd", "ApprovalRequest",
                   "ApprovalResponse", "ToolCallPart", "StepInterrupted", "SteerInput", "PlanDisplay",
                   "ToolCallRequest", "HookTriggered", "HookResolved", "Notification", "BtwBegin", "BtwEnd"})
AGENT_ID = re.compile(r"^agent_id:\s*(\S+)", re.MULTILINE)
T_PLACES = 3


def looks_like_kimi(records: list) -> bool:
    """True when the records are a Kimi wire: a `metadata` line with a `protocol_version`, then records
    `{timestamp, message: {type, payload}}`."""
    head = records[:5]
    if not head or not all(isinstance(r, dict) for r in head):
        return False
    if head[0].get("type") == "metadata" and "protocol_version" in head[0]:
        head = head[1:]
        if not head:
            return True
    return all(isinstance(r.get("message"), dict) and isinstance(r["message"].get("type"), str)
               and "timestamp" in r for r in head)


def import_session(wire: str, context: str | None, subagents: dict[str, str], content_policy: ContentPolicy = "keep",
                   session_id: str | None = None) -> ImportResult:
    """One trace from a session's main wire text, its context (read for nothing the wire lacks, kept for the
    signature's sake) and its sub-agents' wire texts by agent id."""
    result = ImportResult()
    main = _parse(wire, WIRE)
    subs = {agent_id: _parse(text, f"subagents/{agent_id}/{WIRE}") for agent_id, text in subagents.items()}
    trace = _Trace(keeps(content_policy), result.warnings)
    try:
        result.traces.append(trace.build(main, subs, session_id or ref(wire).removeprefix("sha256:")))
    except ImportFailed:
        raise
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ImportFailed(f"{trace.where}: record not as Kimi writes it ({type(exc).__name__}: "
                           f"{show(str(exc))})") from exc
    return result


@dataclass
class _Wire:
    name: str
    protocol: str | None
    records: list[tuple[int, float, str, object]]  # (line, timestamp, type, payload)


def _parse(text: str, name: str) -> _Wire:
    records, protocol = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            raise ImportFailed(f"{name}:{number}: not JSON") from None
        if isinstance(record, dict) and record.get("type") == "metadata":
            protocol = record.get("protocol_version")
            continue
        message = record.get("message") if isinstance(record, dict) else None
        stamp = record.get("timestamp") if isinstance(record, dict) else None
        if not isinstance(message, dict) or not isinstance(message.get("type"), str) \
                or isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp < 0:
            raise ImportFailed(f"{name}:{number}: not a Kimi wire record ({{timestamp, message: {{type, payload}}}})")
        records.append((number, float(stamp), message["type"], message.get("payload")))
    if not records:
        raise ImportFailed(f"{name}: no wire records")
    return _Wire(name, protocol, records)


@dataclass
class _Lane:
    key: str
    role: str
    parent: str | None = None
    spawn_call: str | None = None
    calls: list[int] = field(default_factory=list)  # model call event indexes


class _Trace:
    def __init__(self, keep: bool, warnings: list[str]):
        self.keep, self.warnings = keep, warnings
        self.b = TraceBuilder()
        self.where = WIRE
        self.tool_calls: dict[str, tuple[int, str, str]] = {}  # call id -> (event, tool, lane)
        self.spawns: dict[str, int] = {}  # Agent call id -> spawn event
        self.returns: list[tuple[int, str]] = []  # (return event, receiving lane)
        self.messages: list[tuple[int, str, float]] = []  # (message, receiving lane, time)
        self.pending: list[tuple] = []  # Agent results: (time, call id, output, caller, where)
        self.results_after: list[tuple[int, str, float]] = []  # (tool_result, lane, time) -> next model call
        self.tokens_in = self.tokens_out = self.cached = 0
        self.unknown: dict[str, str] = {}
        self.times: list[float] = []

    def _content(self, props: dict, value) -> dict:
        props["content_ref"] = ref(value)
        if self.keep:
            put_content(props, value)
        return props

    def build(self, main: _Wire, subs: dict[str, _Wire], session_id: str) -> dict:
        copies: dict[str, list] = defaultdict(list)
        links: dict[str, tuple[str, str]] = {}  # agent id -> (parent call id, subagent type)
        for line, stamp, kind, payload in main.records:
            if kind == "SubagentEvent":
                agent_id = payload["agent_id"]
                links.setdefault(agent_id, (payload.get("parent_tool_call_id"), payload.get("subagent_type")))
                inner = payload["event"]
                copies[agent_id].append((line, stamp, inner["type"], inner.get("payload")))
        lanes = {MAIN: _Lane(MAIN, LEAD_ROLE)}
        self._read(main, lanes[MAIN], lanes)
        for agent_id in sorted(set(subs) | set(copies), key=lambda a: (a not in links, a)):
            call_id, kind = links.get(agent_id, (None, None))
            lane = _Lane(f"{kind or 'subagent'}#{agent_id}", kind or "subagent", spawn_call=call_id)
            lanes[lane.key] = lane
            if agent_id in subs:
                wire = subs[agent_id]
            else:
                self.warnings.append(f"{WIRE}: sub-agent {agent_id} has no folder; read from its SubagentEvent "
                                     "copies in the main wire")
                wire = _Wire(WIRE, main.protocol, copies[agent_id])
            self._read(wire, lane, lanes)
        self._delegation(lanes)
        self._answers(lanes)
        for kind, where in self.unknown.items():
            self.warnings.append(f"{where}: record type {kind} skipped")
        origin = min(self.times)
        events, edges = self.b.finish(origin, places=T_PLACES)
        tool_calls = sum(1 for e in events if e["type"] == "tool_call")
        model_calls = sum(len(lane.calls) for lane in lanes.values())
        return {
            "trace_id": f"kimi-{session_id}", "task_id": session_id,
            "system": f"kimi-cli (wire {main.protocol})" if main.protocol else "kimi-cli",
            "topology": "harness", "events": events, "edges": edges, "rewards": {},
            "costs": {"tokens": self.tokens_in + self.tokens_out, "wall_clock_s": round(max(self.times) - origin,
                                                                                       T_PLACES),
                      "tool_calls": tool_calls, "messages": model_calls},
            "metrics": {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                        "cached_input_tokens": self.cached},
        }

    def _read(self, wire: _Wire, lane: _Lane, lanes: dict[str, _Lane]) -> None:
        agent, call, output, turns = lane.key, None, [], 0
        for line, stamp, kind, payload in wire.records:
            self.where = f"{wire.name}:{line}"
            where = {"line": self.where}
            self.times.append(stamp)
            if kind == "SubagentEvent":
                continue
            if kind == "TurnBegin":
                turns += 1
                text = payload.get("user_input") if isinstance(payload, dict) else None
                if lane.key == MAIN or turns > 1:
                    sender = USER if lane.key == MAIN else SYSTEM
                    props = self._content({"from": sender, "to": agent, **where}, text)
                    # the harness speaks in each sub-agent's conversation apart: no timeline across them
                    sent = self.b.add(stamp, "message", sender, props, chained=sender == SYSTEM)
                    self.messages.append((sent, agent, stamp))
            elif kind == "StepBegin":
                output = []
                call = self.b.add(stamp, "message", agent, {"from": agent, "to": MODEL, "step": payload.get("n"),
                                                             **where})
                lane.calls.append(call)
            elif kind == "ContentPart":
                output.append(payload)
                self._set_output(call, output)
            elif kind == "ToolCall":
                output.append(payload)
                self._set_output(call, output)
                self._tool_call(stamp, payload, lane, call, where)
            elif kind == "ToolResult":
                self._tool_result(stamp, payload, lane, lanes, where)
            elif kind == "StatusUpdate":
                usage = payload.get("token_usage") if isinstance(payload, dict) else None
                if usage and call is not None:
                    cached = usage.get("input_cache_read", 0) or 0
                    tokens_in = (usage.get("input_other", 0) or 0) + cached + (usage.get("input_cache_creation", 0)
                                                                               or 0)
                    tokens_out = usage.get("output", 0) or 0
                    props = self.b.props[call]
                    props["tokens_in"], props["tokens_out"] = tokens_in, tokens_out
                    props["message_id"] = payload.get("message_id")
                    self.tokens_in += tokens_in
                    self.tokens_out += tokens_out
                    self.cached += cached
                    call = None
            elif kind not in QUIET:
                self.unknown.setdefault(kind, self.where)

    def _set_output(self, call: int | None, output: list) -> None:
        if call is None:
            return
        props = self.b.props[call]
        self._content(props, {"output": list(output)})

    def _tool_call(self, stamp: float, payload: dict, lane: _Lane, call: int | None, where: dict) -> None:
        call_id, function = payload["id"], payload["function"]
        name, arguments = function["name"], function.get("arguments")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass  # the model wrote arguments that are not JSON: kept as written
        if name == AGENT_TOOL:
            index = self.b.add(stamp, "spawn", lane.key, self._content({"tool": name, "call_id": call_id, **where},
                                                                       arguments))
            self.spawns[call_id] = index
            if call is not None:
                self.b.types[call] = "orchestrator_decision"
        else:
            index = self.b.add(stamp, "tool_call", lane.key, self._content({"tool": name, "call_id": call_id,
                                                                            **where}, arguments))
        self.tool_calls[call_id] = (index, name, lane.key)
        if call is not None:
            self.b.link(call, index, "causal")

    def _tool_result(self, stamp: float, payload: dict, lane: _Lane, lanes: dict[str, _Lane], where: dict) -> None:
        call_id = payload["tool_call_id"]
        known = self.tool_calls.get(call_id)
        if known is None:
            self.warnings.append(f"{self.where}: result for unknown tool call {show(call_id)} skipped")
            return
        index, tool, caller = known
        value = payload.get("return_value")
        if tool == AGENT_TOOL:  # the sub-agent's return, made once every lane is read
            output = value.get("output") if isinstance(value, dict) else value
            self.pending.append((stamp, call_id, output, caller, where))
            return
        props = self._content({"tool": tool, "call_id": call_id, **where}, value)
        if isinstance(value, dict) and value.get("is_error"):
            props["error"] = True
        result = self.b.add(stamp, "tool_result", tool, props)
        self.b.link(index, result, "tool_dependency")
        self.results_after.append((result, caller, stamp))

    def _return(self, stamp: float, child: _Lane, caller: str, output, call_id: str, where: dict) -> None:
        props = self._content({"from": child.key, "to": caller, "call_id": call_id, **where}, output)
        self.returns.append((self.b.add(stamp, "return", child.key, props), caller))

    def _delegation(self, lanes: dict[str, _Lane]) -> None:
        for stamp, call_id, output, caller, where in self.pending:
            found = AGENT_ID.search(output) if isinstance(output, str) else None
            child = next((l for l in lanes.values() if l.spawn_call == call_id
                          or (found and l.key.endswith(f"#{found.group(1)}"))), None)
            if child is None:
                self.warnings.append(f"{where['line']}: Agent result names no sub-agent in the session")
                continue
            child.spawn_call = call_id
            self._return(stamp, child, caller, output, call_id, where)
        for lane in lanes.values():
            if lane.key == MAIN:
                continue
            spawn = self.spawns.get(lane.spawn_call)
            if spawn is None:
                self.warnings.append(f"sub-agent {lane.key}: no Agent call in the main wire started it")
                continue
            lane.parent = self.b.agents[spawn]
            self.b.props[spawn]["to"] = lane.key
            self.b.link_to_first(spawn, lane.key, "spawn")

    def _answers(self, lanes: dict[str, _Lane]) -> None:
        starts = {}
        for lane in lanes.values():
            pairs = sorted((self.b.times[i], i) for i in lane.calls)
            starts[lane.key] = ([t for t, _ in pairs], [i for _, i in pairs])
        for result, caller, stamp in self.results_after:
            target = next_at(starts, caller, stamp)
            if target is not None:
                self.b.link(result, target, "causal")
        for sent, receiver, stamp in self.messages:
            target = next_at(starts, receiver, stamp)
            if target is not None:
                self.b.link(sent, target, "message")
        by_target: dict[int | None, list[int]] = defaultdict(list)
        receivers: dict[int | None, str] = {}
        for ret, caller in self.returns:
            target = next_at(starts, caller, self.b.times[ret])
            by_target[target].append(ret)
            receivers[target] = caller
        for target, rets in by_target.items():
            if len(rets) == 1:
                if target is not None:
                    self.b.link(rets[0], target, "return")
                continue
            last = max(self.b.times[r] for r in rets)
            aggregate = self.b.add(last, "aggregate", receivers[target], {"inputs": len(rets)})
            for ret in rets:
                self.b.link(ret, aggregate, "aggregate")
            if target is not None:
                self.b.link(aggregate, target, "causal")


SUBAGENTS = "subagents"  # a session folder's `subagents/<id>/` folders
WIRE = "wire.jsonl"


def is_subagent_wire(source: str) -> bool:
    """A sub-agent's wire, `<session>/subagents/<id>/wire.jsonl`: read with its session's main wire."""
    parts = PurePosixPath(source.split(":")[-1]).parts
    return len(parts) >= 3 and parts[-1] == WIRE and parts[-3] == SUBAGENTS


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Each session of the upload: its main wire with the sub-agent wires under its folder (with one session,
    all of them)."""
    if batch.companions and not batch.documents:
        raise ImportFailed(f"{batch.companions[0].source}: a Kimi sub-agent's wire without its session's wire.jsonl")
    result = ImportResult()
    for upload, _ in batch.documents:
        folder = PurePosixPath(upload.source.split(":")[-1]).parent
        mine = [c for c in batch.companions if PurePosixPath(c.source.split(":")[-1]).parent.parent.parent == folder]
        mine = mine or (batch.companions if len(batch.documents) == 1 else [])
        subagents = {PurePosixPath(c.source.split(":")[-1]).parent.name: decode(c.data, c.source, batch.max_bytes)
                     for c in mine}
        batch.merge(result, import_session(decode(upload.data, upload.source, batch.max_bytes), None, subagents,
                                           content_policy, session_id=folder.name or None), upload.source)
    return result


FORMAT = Format("kimi", "Kimi CLI session folders (wire.jsonl, with subagents/<id>/wire.jsonl)",
                lambda records: looks_like_kimi(records[:20]), _convert, 45,
                companion=lambda upload: is_subagent_wire(upload.source))
