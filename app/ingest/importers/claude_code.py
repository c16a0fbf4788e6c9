"""Import a Claude Code session transcript (IMPORTERS.md §0 and §2): one trace per session.

Input is the main `<sessionId>.jsonl` plus, in the current layout, the `<sessionId>/subagents/`
folder beside it (`agent-<agentId>.jsonl` and `agent-<agentId>.meta.json`). The older layouts are
read too: sub-agent lines inline in the main file (`isSidechain: true`), or only mirrored there as
`progress` lines with `data.type: "agent_progress"`.

Choices where the mapping is silent, made for an auditor who wants to trace every event back to a line:
- Agents: the main thread is `main` (role `lead`); a sub-agent is `<role>#<agentId>` (IMPORTERS.md §0
  instance naming), role = meta `agentType`, else the Task/Agent call's `subagent_type`. An inline
  sidechain without `agentId` takes the id of the call it answers. Human input is `user`; whatever the
  harness does on its own (compaction, hooks, API errors, task notifications) is `system`. A
  `tool_result` belongs to the tool (`agent` = tool name), as in the published example trace.
- Model calls: one event per API response (`message.id`), not per content block: a response made only
  of tool_use blocks is still a call that costs tokens. It sits at the time of the response's first
  line, so it precedes the tool calls it requested (`causal` edges). Its `content_ref` is the hash of its
  text blocks, joined; its content is `{"output": {"role": "assistant", "content": [...]}}`, every block of
  the response (text, thinking, tool_use) in the order written. `from` = the agent, `to` = the model (as OTLP).
  Per §0 it is an `orchestrator_decision` when it requests a tool and its agent spawns anywhere in the
  trace, else a `message`. A Task/Agent tool_use becomes the `spawn` (agent = caller, `to` = child);
  a tool_use becomes a `tool_call` whose `content_ref` is its tool_use id (§2).
- Sub-agents are joined to their call by meta `toolUseId`, else `toolUseResult.agentId` of the call's
  result, else (old layouts) by the delegated prompt. The sub-agent's first line (its prompt) makes no
  event. The tool_result answering the call becomes the child's `return` (`to` = caller), with
  `tool_dependency` spawn -> return. A single return gets a `return` edge into the caller's next
  response; two or more returns before that response get an `aggregate` event of the caller (at the
  last return) with an `aggregate` edge from each and a `causal` edge into the response.
- Background sub-agents (2.1.3xx runs Task/Agent calls in the background by default): the call's
  tool_result only says the agent was launched (`toolUseResult.status: "async_launched"`); it makes no
  event, and the spawn gets `background: true` and `launch_line`. The agent's return is the
  `<task-notification>` user record (`origin.kind: task-notification`) whose `<tool-use-id>` names the
  call, at that record's time, after the agent's last response: agent = child, `kind: task_notification`,
  content its `<result>`, `status` (`error` unless completed), and `<usage>` as `reported_total_tokens`,
  `total_tool_use_count`, `total_duration_ms`; edges as for any return. The same agent notifying again
  (resumed) returns again. A notification naming no delegating call is a `system` message.
- Compaction helper (`agent-acompact-*`, any `agent-a<kind>-<hex>`): its calls are agent `system`
  (role `compaction`), with a warning; its prompt and replayed context lines make no event. The
  summary it writes into the main file (`isCompactSummary`) is a `message` system -> main.
- Progress mirrors count only for a sub-agent with no transcript of its own (file or inline lines);
  they carry tool_use blocks but not text blocks, and not the sub-agent's final response.
- Tokens: per response, the largest value of each usage field over its lines (Claude Code writes usage
  while streaming; output_tokens only grows). `tokens_in` = input + cache creation + cache read,
  `tokens_out` = output; `costs.tokens` is their sum over unique message ids (§2), so it equals the sum
  over events. `toolUseResult.totalTokens` is kept on the return as `reported_total_tokens` only.
- `costs.messages` counts LLM calls (unique message ids); `costs.tool_calls` counts `tool_call` events
  (delegations are spawns). `metrics.turn_duration_s` = Σ `turn_duration.durationMs` / 1000, plus the
  cache token sums. t = 0 and `wall_clock_s` span every timestamped record of every file.
- Edges: `temporal` follows parentUuid (logicalParentUuid across compaction) within an agent's
  transcript, through records that make no event; where that finds nothing, and for agents without
  transcript lines (user, system, returns, mirrors), it links the agent's previous event in time.
  Tool agents get no timeline. Human and system messages get a `message` edge into the agent's next
  response; each tool_result a `causal` one.
- Human interventions: "[Request interrupted by user…]" text, a tool call the user rejected (next to
  its tool_result, `causal` into it), queue-operation `enqueue`/`remove`. An enqueued
  `<task-notification>` is the harness, not the user: skipped (it arrives later as a user record), and
  so is an `enqueue` before the agent's first response (`claude -p` queues its own prompt: nothing to steer).
- Safety events: stop_hook_summary with preventedContinuation or hookErrors; a PreToolUse denial
  (an error result of a call that had PreToolUse hooks and no PostToolUse/PostToolUseFailure hook);
  an API error (`isApiErrorMessage`, system `api_error`). `safety_flow` goes to the denied tool_result,
  or to the agent's next response.
- Results of WebFetch and WebSearch are `trusted: false`. Content (unless the content policy is `hash`, which
  keeps only the `content_ref` hashes; cut to common.CONTENT_CAP_BYTES): a message's text (or its blocks when
  not all text), a tool call's input, a tool result's content, a spawn's Task/Agent input (`description`,
  `prompt`, `subagent_type`), a return's result, a hook's stop reason, a queued message.
- Every event keeps its source ids where the record has them: `uuid`, `parent_uuid`,
  `logical_parent_uuid`, `session_id`, `agent_id`, `tool_use_id`, `message_id`, `request_id`,
  `source_tool_assistant_uuid`, and `line` ("main:17", "agent-a93ccab.jsonl:3").
- task_id is the session `slug` (a random name Claude Code gives the session), else the sessionId:
  never prompt text. system is "claude-code <version>", topology `harness`.
- Known records that make no event: file-history-snapshot, summary, bash/hook/waiting progress,
  compact_boundary, turn_duration, queue `dequeue`, isMeta user records; of current versions the
  bookkeeping records (`api-request`, `api-request-blob`, `api-request-shape`, `tools-used`,
  `last-prompt`, `cost-state`, `atis-latch`) and the `attachment` records of the context the harness
  adds to the model's input (QUIET_ATTACHMENTS: environment, model, date, listings, reminders...); their
  uuids still carry the parentUuid chain. Unknown record types, attachment types, system subtypes,
  progress types and content blocks are skipped with a warning naming the first line. A line that is not JSON (or
  gives a key twice in one object), or an empty file, refuses the session.
- Sub-agent files are keyed by their path under `subagents/`, workflow agents
  (`subagents/workflows/wf_<id>/agent-*.jsonl`) included; `importers.load_session_dir` and
  `importers.subagent_uploads` read a session on disk.
"""

import re
from bisect import bisect_right
from collections import defaultdict
from datetime import datetime
from pathlib import PurePosixPath

from app.domain.jsontext import first_problem
from app.ingest.documents import Upload, decode, strict_loads
from app.ingest.importers.common import (
    KEEP,
    UNKNOWN_TOOL,
    Batch,
    ContentPolicy,
    Format,
    ImportFailed,
    ImportResult,
    TraceBuilder,
    content_ref,
    jsonl_records,
    keeps,
    next_at,
    put_content,
    ref,
    show,
    tool_name,
)

MAIN, USER, SYSTEM = "main", "user", "system"
LEAD_ROLE = "lead"
SUBAGENT_ROLE = "subagent"  # a sidechain whose call and meta name no type
DELEGATING_TOOLS = frozenset({"Task", "Agent"})
UNTRUSTED_TOOLS = frozenset({"WebFetch", "WebSearch"})
SYNTHETIC_MODEL = "<synthetic>"
RECORD_TYPES = frozenset({"user", "assistant", "system", "summary", "progress", "file-history-snapshot",
                          "queue-operation", "attachment"})
# Bookkeeping records of current versions (2.1.3xx): the request sent, its blobs and shape, the prompt and
# tool lists, costs, latches. They make no event.
QUIET_RECORDS = frozenset({"summary", "file-history-snapshot", "api-request", "api-request-blob",
                           "api-request-shape", "tools-used", "last-prompt", "cost-state", "atis-latch"})
# Attachments are context the harness adds to the model's input (rendered as user content); these make no event.
QUIET_ATTACHMENTS = frozenset({"environment", "model", "date", "session_context", "skill_listing",
                               "agent_listing_delta", "deferred_tools_delta", "total_tokens_reminder",
                               "remote_session_change", "prompt_snapshot"})
ASYNC_LAUNCHED = "async_launched"  # toolUseResult.status of a Task/Agent call whose agent runs in the background
QUIET_PROGRESS = frozenset({"bash_progress", "waiting_for_task", "agent_progress"})
USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
INTERRUPTED = "[Request interrupted by user"
REJECTED_TEXT = "The user doesn't want to proceed with this tool use"
REJECTED_RESULT = "User rejected tool use"
TASK_NOTIFICATION = "<task-notification>"
COMMAND_NAME = "<command-name>"
HELPER_ID = re.compile(r"a([a-z][a-z_]*)-[0-9a-f]+")  # acompact-70d8e7; real agent ids are bare hex
HELPER_ROLES = {"compact": "compaction"}
POST_HOOKS = frozenset({"PostToolUse", "PostToolUseFailure"})
MS_PER_S = 1000
ID_DIGITS = 4  # e0001: at least four digits in event ids
T_PLACES = 3  # t in milliseconds, as the transcripts' timestamps


def looks_like_claude_code(first_records: list[dict]) -> bool:
    """True when the records carry Claude Code transcript fields (type, sessionId, uuid)."""
    return any(isinstance(r, dict) and isinstance(r.get("type"), str) and r["type"] in RECORD_TYPES
               and isinstance(r.get("sessionId"), str)
               and isinstance(r.get("uuid"), str) for r in first_records)


def import_session(main: str, subagents: dict[str, str] | None = None, metas: dict[str, dict] | None = None,
                   session_id: str | None = None, content_policy: ContentPolicy = KEEP) -> ImportResult:
    """One orchestration trace from a session's main transcript and its sub-agent transcripts."""
    files = [(MAIN, jsonl_records(main, MAIN))]
    files += [(name, jsonl_records(text, name)) for name, text in sorted((subagents or {}).items())]
    result = ImportResult()
    # Without a sessionId anywhere, the content names the trace, so re-imports still replace it.
    fallback_id = content_ref(main).removeprefix("sha256:")
    trace = _Session(files, metas or {}, session_id, fallback_id, keeps(content_policy), result.warnings).build()
    result.traces.append(trace)
    return result


def _uuid(record: dict) -> str | None:
    """A line's uuid; anything but text names no line."""
    uuid = record.get("uuid")
    return uuid if isinstance(uuid, str) else None


def _seconds(stamp) -> float | None:
    """Seconds since the epoch of an ISO-8601 timestamp, or None."""
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _blocks(content) -> list[dict]:
    """Message content as a list of blocks; a plain string is one text block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _text(content) -> str:
    """The text of message or tool content."""
    return "\n".join(block.get("text", "") for block in _blocks(content)
                     if block.get("type") == "text" and isinstance(block.get("text"), str))


class _Lines:
    """One file's parentUuid tree, and the events its lines made for the line's own agent."""

    __slots__ = ("parents", "first", "last", "memo")

    def __init__(self):
        self.parents: dict[str, str | None] = {}
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.memo: dict[str, int | None] = {}

    def nearest(self, uuid: str | None) -> int | None:
        """The last own event of uuid's line or, failing that, of its nearest ancestor's."""
        path = []
        on_path = set()
        found = None
        while uuid is not None and uuid not in on_path:
            if uuid in self.memo:
                found = self.memo[uuid]
                break
            if uuid in self.last:
                found = self.last[uuid]
                break
            path.append(uuid)
            on_path.add(uuid)
            uuid = self.parents.get(uuid)
        for seen in path:
            self.memo[seen] = found
        return found


class _Child:
    """A sub-agent (or helper) instance and where its lines come from."""

    __slots__ = ("agent_id", "key", "role", "call_id", "prompt", "helper", "source")

    def __init__(self, agent_id: str, source: str, prompt: str | None = None, helper: str | None = None):
        self.agent_id, self.source, self.prompt, self.helper = agent_id, source, prompt, helper
        self.key = self.role = None
        self.call_id: str | None = None


class _Stream:
    """The records of one agent read from one file (or from progress mirrors)."""

    __slots__ = ("name", "key", "role", "agent_id", "lines", "child", "helper")

    def __init__(self, name: str, key: str, role: str, lines: _Lines | None, child: _Child | None = None):
        self.name, self.key, self.role, self.lines, self.child = name, key, role, lines, child
        self.agent_id = child.agent_id if child is not None and child.helper is None else None
        self.helper = child is not None and child.helper is not None


class _Response:
    """The events and usage of one API response, whatever number of lines it was written as."""

    __slots__ = ("index", "counted", "usage", "texts", "blocks", "asks")

    def __init__(self, index: int, counted: bool):
        self.index, self.counted = index, counted
        self.usage = [0] * len(USAGE_FIELDS)
        self.texts: list[str] = []
        self.blocks: list[dict] = []  # every content block, as written
        self.asks = False  # requested at least one tool

    def take(self, usage) -> None:
        if not isinstance(usage, dict):
            return
        for k, field in enumerate(USAGE_FIELDS):
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool) and value > self.usage[k]:
                self.usage[k] = value


class _Session:
    """Maps the records of one session onto one orchestration trace."""

    def __init__(self, files: list[tuple[str, list[tuple[int, dict]]]], metas: dict[str, dict],
                 session_id: str | None, fallback_id: str, keep: bool, warnings: list[str]):
        self.files, self.keep, self.warnings, self.fallback_id = files, keep, warnings, fallback_id
        self.metas = {_agent_id(name, ".meta.json"): meta for name, meta in metas.items() if isinstance(meta, dict)}
        self.session_id = session_id
        self.b = TraceBuilder()  # times in seconds since the epoch
        self.all_lines: list[_Lines] = []
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.odd: dict[tuple[str, str], list[int]] = {}  # (file, what) -> [first line, count]
        # What the pre-scan learns.
        self.tool_names: dict[str, str] = {}
        self.calls: dict[str, dict] = {}  # delegating tool_use id -> input
        self.result_agent: dict[str, str] = {}  # delegating tool_use id -> toolUseResult.agentId
        self.mirrors: dict[str, list[tuple[int, dict]]] = {}  # parentToolUseID -> (line, progress record)
        self.inline: dict[str, _Child] = {}  # uuid of an inline sidechain line -> its child
        self.inline_children: list[_Child] = []
        self.children: list[_Child] = []
        self.call_child: dict[str, _Child] = {}
        # Linking state.
        self.responses: dict[tuple[str, str], _Response] = {}
        self.response_times: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.counted_ids: set[str] = set()
        self.call_event: dict[str, int] = {}
        self.spawn_event: dict[str, int] = {}
        self.spawners: set[str] = set()
        self.returns: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.to_next: list[tuple[int, str, float, str]] = []  # (src, agent, time, edge type)
        self.guards: list[tuple[int, _Lines, str | None]] = []
        self.compactions: list[tuple[float, int]] = []
        self.summaries: list[tuple[float, int]] = []
        self.hooks: dict[str, set[str]] = defaultdict(set)
        self.pre_hooks: dict[str, tuple[float, str | None]] = {}
        self.errors: list[tuple[str, int, str]] = []  # (tool_use id, tool_result event, caller)
        self.roles: dict[str, str] = {MAIN: LEAD_ROLE}
        self.turn_ms = 0
        self.llm_calls = 0
        self.tool_calls = 0

    # ---- the whole session -------------------------------------------------------------------

    def build(self) -> dict:
        self._scan()
        self._join()
        main_lines = _Lines()
        self.all_lines.append(main_lines)
        main_stream = _Stream(MAIN, MAIN, LEAD_ROLE, main_lines)
        inline_streams: dict[int, _Stream] = {}
        for number, record in self.files[0][1]:
            sidechain = isinstance(record, dict) and record.get("isSidechain") is True
            child = self.inline.get(_uuid(record)) if sidechain else None
            stream = main_stream
            if child is not None and child.key is None:
                continue  # lines of a sub-agent whose own transcript file is imported
            if child is not None:
                stream = inline_streams.get(id(child))
                if stream is None:
                    stream = inline_streams[id(child)] = _Stream(MAIN, child.key, child.role, main_lines, child)
            self._record(stream, number, record)
        by_file = {child.source: child for child in self.children}
        for name, records in self.files[1:]:
            child = by_file[name]
            lines = _Lines()
            self.all_lines.append(lines)
            stream = _Stream(name, child.key, child.role, lines, child)
            for number, record in records:
                self._record(stream, number, record)
        for child in self.children:
            if child.source == "mirrors":
                self._mirrored(child)
        return self._finish()

    def _scan(self) -> None:
        """Learn tool names, delegating calls, their results' agent ids, inline sidechains and mirrors."""
        main_records = self.files[0][1]
        roots: dict[str, str] = {}  # inline sidechain uuid -> uuid of its root line
        groups: dict[str, _Child] = {}
        for name, records in self.files:
            for number, record in records:
                if not isinstance(record, dict):
                    continue
                kind = record.get("type")
                if kind == "assistant":
                    self._scan_message(record)
                elif kind == "user":
                    self._scan_result(record)
                elif kind == "progress" and name == MAIN:
                    data = record.get("data")
                    if isinstance(data, dict) and data.get("type") == "agent_progress":
                        inner = data.get("message")
                        if isinstance(inner, dict) and inner.get("type") == "assistant":
                            self._scan_message(inner)
                        call = record.get("parentToolUseID")
                        if isinstance(call, str) and isinstance(inner, dict):
                            self.mirrors.setdefault(call, []).append((number, record))
        for number, record in main_records:
            if not isinstance(record, dict) or record.get("isSidechain") is not True:
                continue
            uuid, parent = record.get("uuid"), record.get("parentUuid")
            if not isinstance(uuid, str):
                continue
            parent = parent if isinstance(parent, str) else None  # anything else names no line
            root = roots[uuid] = roots.get(parent, uuid)
            agent_id = record.get("agentId")
            group_key = f"id:{agent_id}" if isinstance(agent_id, str) and agent_id else f"root:{root}"
            child = groups.get(group_key)
            if child is None:
                child = groups[group_key] = _Child(agent_id if group_key.startswith("id:") else None, "inline",
                                                   _prompt(record) if parent is None else None)
            self.inline[uuid] = child
        self.inline_children = list(groups.values())

    def _scan_message(self, record: dict) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            return
        for block in _blocks(message.get("content")):
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                name = tool_name(block.get("name"))
                self.tool_names[block["id"]] = name
                if name in DELEGATING_TOOLS:
                    self.calls[block["id"]] = block.get("input") if isinstance(block.get("input"), dict) else {}

    def _scan_result(self, record: dict) -> None:
        outcome = record.get("toolUseResult")
        message = record.get("message")
        if not isinstance(outcome, dict) or not isinstance(outcome.get("agentId"), str) \
                or not isinstance(message, dict):
            return
        for block in _blocks(message.get("content")):
            call = block.get("tool_use_id")
            if block.get("type") == "tool_result" and isinstance(call, str) and call in self.calls:
                self.result_agent[block["tool_use_id"]] = outcome["agentId"]

    def _join(self) -> None:
        """Find every sub-agent, the call that spawned it, its role and its agent key."""
        by_result = {agent_id: call for call, agent_id in self.result_agent.items()}
        for name, records in self.files[1:]:
            agent_id = _agent_id(name, ".jsonl")
            helper = HELPER_ID.fullmatch(agent_id)
            meta = self.metas.pop(agent_id, {})
            first = next((r for _, r in records if isinstance(r, dict) and r.get("type") == "user"), {})
            child = _Child(agent_id, name, _prompt(first) if first.get("parentUuid") is None else None,
                           helper.group(1) if helper and not meta.get("toolUseId") else None)
            self.children.append(child)
            if child.helper is not None:
                child.key, child.role = SYSTEM, HELPER_ROLES.get(child.helper, child.helper)
                what = "context-compaction helper" if child.helper == "compact" else f"helper agent '{child.helper}'"
                self.warnings.append(f"{name}: {what} mapped to agent 'system'")
                continue
            sessions = {r["sessionId"] for _, r in records if isinstance(r, dict) and isinstance(r.get("sessionId"), str)}
            mine = self._main_session()
            if mine and sessions - {mine}:
                self.warnings.append(f"{name}: sessionId {sorted(sessions - {mine})[0]} is not the main "
                                     f"session's ({mine})")
            call = meta.get("toolUseId") if isinstance(meta.get("toolUseId"), str) else by_result.get(agent_id)
            self._attach(child, call, meta.get("agentType"))
        for agent_id in self.metas:
            self.warnings.append(f"agent-{agent_id}.meta.json: no transcript agent-{agent_id}.jsonl beside it")
        file_ids = {child.agent_id for child in self.children}
        for child in self.inline_children:
            if child.agent_id in file_ids:
                self.warnings.append(f"main: inline sidechain lines of agent {child.agent_id} skipped: "
                                     "its own transcript file is imported")
                continue
            self.children.append(child)
            self._attach(child, by_result.get(child.agent_id) if child.agent_id else None, None)
        known = {child.agent_id for child in self.children if child.agent_id}
        for call, mirrored in self.mirrors.items():
            if call in self.call_child:
                continue
            data = mirrored[0][1].get("data")
            agent_id = data.get("agentId") if isinstance(data.get("agentId"), str) else self.result_agent.get(call)
            if agent_id in known:
                continue
            child = _Child(agent_id or call, "mirrors")
            self.children.append(child)
            self._attach(child, call, None)
        for child in self.children:
            if child.helper is None and child.call_id is None:
                self.warnings.append(f"{child.source if child.source != 'inline' else 'main'}: no Task/Agent call "
                                     f"found for sub-agent {child.agent_id}; it has no spawn")

    def _attach(self, child: _Child, call: str | None, agent_type) -> None:
        """Join a child to its call (by id, else by its prompt) and name it."""
        if call is None or call in self.call_child:
            call = next((c for c, given in self.calls.items() if c not in self.call_child and child.prompt
                         and given.get("prompt") == child.prompt), None)
        given = self.calls.get(call, {}) if call else {}
        if call is not None:
            child.call_id = call
            self.call_child[call] = child
        if child.agent_id is None:
            child.agent_id = call or f"sidechain-{len(self.children)}"
        role = agent_type if isinstance(agent_type, str) and agent_type else given.get("subagent_type")
        child.role = role if isinstance(role, str) and role else SUBAGENT_ROLE
        child.key = f"{child.role}#{child.agent_id}"
        self.roles[child.key] = child.role

    def _main_session(self) -> str | None:
        if self.session_id is None:
            self.session_id = next((r["sessionId"] for _, r in self.files[0][1]
                                    if isinstance(r, dict) and isinstance(r.get("sessionId"), str)), None)
        return self.session_id

    # ---- records -------------------------------------------------------------------------------

    def _record(self, stream: _Stream, number: int, record) -> None:
        if not isinstance(record, dict):
            self._odd(stream.name, number, "not a JSON object, skipped")
            return
        kind = record.get("type")
        time = _seconds(record.get("timestamp"))
        if time is not None:
            self.first_time = time if self.first_time is None else min(self.first_time, time)
            self.last_time = time if self.last_time is None else max(self.last_time, time)
        uuid = record.get("uuid")
        if stream.lines is not None and isinstance(uuid, str):
            parent = record.get("parentUuid") or record.get("logicalParentUuid")
            stream.lines.parents[uuid] = parent if isinstance(parent, str) else None
        if isinstance(kind, str) and kind in QUIET_RECORDS:
            return
        if not isinstance(kind, str) or kind not in RECORD_TYPES:
            self._odd(stream.name, number, f"unknown record type {show(kind)}, skipped")
            return
        if time is None:
            self._odd(stream.name, number, "record without a valid timestamp, skipped")
            return
        if kind == "assistant":
            self._assistant(stream, number, record, time)
        elif kind == "user":
            self._user(stream, number, record, time)
        elif kind == "system":
            self._system(stream, number, record, time)
        elif kind == "progress":
            self._progress(stream, number, record, time)
        elif kind == "attachment":
            attachment = record.get("attachment")
            what = attachment.get("type") if isinstance(attachment, dict) else None
            if not isinstance(what, str) or what not in QUIET_ATTACHMENTS:
                self._odd(stream.name, number, f"attachment type {show(what)} not mapped")
        else:
            self._queue(stream, number, record, time)

    def _assistant(self, stream: _Stream, number: int, record: dict, time: float) -> None:
        message = record.get("message")
        if not isinstance(message, dict):
            self._odd(stream.name, number, "assistant record without a message, skipped")
            return
        blocks = _blocks(message.get("content"))
        model = message.get("model") if isinstance(message.get("model"), str) else None
        source = self._source(stream, number, record)
        if model == SYNTHETIC_MODEL or record.get("isApiErrorMessage"):
            self._synthetic(stream, record, time, blocks, source)
            return
        message_id = message.get("id") if isinstance(message.get("id"), str) else None
        key = (stream.key, message_id or f"{stream.name}:{number}")
        response = self.responses.get(key)
        if response is None:
            props = {"role": stream.role, "from": stream.key}
            if model:
                props["to"] = props["model"] = model
            if message_id:
                props["message_id"] = message_id
            if isinstance(record.get("requestId"), str):
                props["request_id"] = record["requestId"]
            props.update(source)
            index = self._event(time, "message", stream.key, props, stream, record)
            counted = message_id is None or message_id not in self.counted_ids
            if not counted:
                self._odd(stream.name, number, f"message id {message_id} already counted in another "
                                               "transcript; its tokens are not counted again")
            response = self.responses[key] = _Response(index, counted)
            self.response_times[stream.key].append((time, index))
            if counted:
                self.llm_calls += 1
            if message_id:
                self.counted_ids.add(message_id)
            if stream.child is not None and stream.child.helper == "compact":
                self.compactions.append((time, index))
        response.take(message.get("usage"))
        for block in blocks:
            kind = block.get("type")
            if kind == "text":
                response.texts.append(block.get("text") if isinstance(block.get("text"), str) else "")
            elif kind == "tool_use":
                self._tool_use(stream, record, time, block, response, source)
            elif kind not in ("thinking", "redacted_thinking"):
                self._odd(stream.name, number, f"content block type {kind!r} not mapped")
                continue
            response.blocks.append(block)

    def _synthetic(self, stream: _Stream, record: dict, time: float, blocks: list[dict], source: dict) -> None:
        """A message Claude Code wrote itself: an API error is a safety event, anything else a message."""
        text = _text(blocks)
        if record.get("isApiErrorMessage") or record.get("error"):
            props = {"role": "api", "to": stream.key, "kind": "api_error", **source}
            self._content(props, text)
            index = self._event(time, "safety_event", SYSTEM, props)
            self.to_next.append((index, stream.key, time, "safety_flow"))
            return
        props = {"role": stream.role, "from": stream.key, "synthetic": True, **source}
        self._content(props, text)
        self._event(time, "message", stream.key, props, stream, record)

    def _tool_use(self, stream: _Stream, record: dict, time: float, block: dict, response: _Response,
                  source: dict) -> None:
        call = block.get("id") if isinstance(block.get("id"), str) else None
        name = tool_name(block.get("name"))
        given = block.get("input")
        if name in DELEGATING_TOOLS:
            given = given if isinstance(given, dict) else {}
            child = self.call_child.get(call)
            role = child.role if child is not None else given.get("subagent_type")
            props = {"role": role if isinstance(role, str) and role else SUBAGENT_ROLE, "from": stream.key}
            if child is not None:
                props["to"] = child.key
            props["tool"] = name
            if isinstance(given.get("subagent_type"), str):
                props["subagent_type"] = given["subagent_type"]
            if given.get("prompt") is not None:
                props["content_ref"] = ref(given["prompt"])
            if call:
                props["tool_use_id"] = call
            props.update(source)
            if self.keep and given:
                put_content(props, given)
            index = self._event(time, "spawn", stream.key, props, stream, record)
            self.spawners.add(stream.key)
            if child is not None:
                self.b.link_to_first(index, child.key, "spawn")
            if call:
                self.spawn_event[call] = index
        else:
            props = {"role": stream.role, "tool": name}
            if call:
                props["content_ref"] = props["tool_use_id"] = call
            props.update(source)
            if self.keep and given is not None:
                put_content(props, given)
            index = self._event(time, "tool_call", stream.key, props, stream, record)
            self.tool_calls += 1
        self.b.link(response.index, index, "causal")
        response.asks = True
        if call:
            self.call_event[call] = index

    def _user(self, stream: _Stream, number: int, record: dict, time: float) -> None:
        if stream.helper:
            return  # the helper's prompt and the parent context it replays
        message = record.get("message")
        if not isinstance(message, dict):
            self._odd(stream.name, number, "user record without a message, skipped")
            return
        source = self._source(stream, number, record)
        texts = []
        for block in _blocks(message.get("content")):
            kind = block.get("type")
            if kind == "tool_result":
                self._tool_result(stream, number, record, time, block, source)
            elif kind in ("text", "image", "document"):
                texts.append(block)
            else:
                self._odd(stream.name, number, f"content block type {kind!r} not mapped")
        if not texts or record.get("isMeta") is True:
            return
        if stream.child is not None and (stream.lines is None or record.get("parentUuid") is None):
            return  # the delegated prompt, covered by the spawn
        text = _text(texts)
        content = text if all(block.get("type") == "text" for block in texts) else texts
        if record.get("isCompactSummary") is True:
            props = {"role": HELPER_ROLES["compact"], "from": SYSTEM, "to": stream.key, "kind": "compact_summary"}
            index = self._message(time, SYSTEM, props, source, content, stream.key)
            self.summaries.append((time, index))
        elif text.startswith(INTERRUPTED):
            props = {"role": USER, "from": USER, "to": stream.key, "kind": "interrupt", **source}
            self._content(props, content)
            self._event(time, "human_intervention", USER, props)
        elif text.lstrip().startswith(TASK_NOTIFICATION):
            call = _tag(text, "tool-use-id")
            if call in self.call_child and call in self.spawn_event:
                self._notified_return(stream, time, text, call, source)
                return
            props = {"role": "harness", "from": SYSTEM, "to": stream.key, "kind": "task_notification"}
            self._message(time, SYSTEM, props, source, content, stream.key)
        else:
            props = {"role": USER, "from": USER, "to": stream.key}
            if text.lstrip().startswith(("<command-name>", "<command-message>")):
                props["kind"] = "command"
            self._message(time, USER, props, source, content, stream.key)

    def _notified_return(self, stream: _Stream, time: float, text: str, call: str, source: dict) -> None:
        """A background agent's task notification (`<tool-use-id>` of its Task/Agent call): its return, with
        `<result>` as content and the figures of `<usage>`."""
        child = self.call_child[call]
        props = {"role": child.role, "from": child.key, "to": stream.key, "tool_use_id": call, **source,
                 "agent_id": child.agent_id, "kind": "task_notification"}
        status = _tag(text, "status")
        if status:
            props["status"] = status
            if status not in ("completed",):
                props["error"] = True
        for tag, name in (("subagent_tokens", "reported_total_tokens"), ("tool_uses", "total_tool_use_count"),
                          ("duration_ms", "total_duration_ms")):
            value = _tag(text, tag)
            if value is not None and value.isdigit():
                props[name] = int(value)
        result = _tag(text, "result")
        self._content(props, result if result is not None else text)
        index = self._event(time, "return", child.key, props)
        self.b.link(self.spawn_event[call], index, "tool_dependency")
        self.returns[stream.key].append((time, index))

    def _message(self, time: float, agent: str, props: dict, source: dict, content, to: str) -> int:
        """A message to an agent, with a message edge into that agent's next response."""
        props.update(source)
        self._content(props, content)
        index = self._event(time, "message", agent, props)
        self.to_next.append((index, to, time, "message"))
        return index

    def _tool_result(self, stream: _Stream, number: int, record: dict, time: float, block: dict,
                     source: dict) -> None:
        call = block.get("tool_use_id") if isinstance(block.get("tool_use_id"), str) else None
        content = block.get("content")
        failed = block.get("is_error") is True
        outcome = record.get("toolUseResult")
        ids = {"tool_use_id": call} if call else {}
        ids.update(source)
        if isinstance(record.get("sourceToolAssistantUUID"), str):
            ids["source_tool_assistant_uuid"] = record["sourceToolAssistantUUID"]
        child = self.call_child.get(call)
        if child is not None and call in self.spawn_event and isinstance(outcome, dict) \
                and outcome.get("status") == ASYNC_LAUNCHED:
            spawn = self.b.props[self.spawn_event[call]]  # the agent runs on: its return is a task notification
            spawn["background"] = True
            spawn["launch_line"] = source["line"]
            return
        if child is not None and call in self.spawn_event:
            props = {"role": child.role, "from": child.key, "to": stream.key, **ids, "agent_id": child.agent_id}
            if isinstance(outcome, dict):
                for field, name in (("status", "status"), ("totalDurationMs", "total_duration_ms"),
                                    ("totalTokens", "reported_total_tokens"),
                                    ("totalToolUseCount", "total_tool_use_count")):
                    if isinstance(outcome.get(field), (str, int, float)) and not isinstance(outcome[field], bool):
                        props[name] = outcome[field]
            if failed:
                props["error"] = True
            self._content(props, content)
            index = self._event(time, "return", child.key, props)
            self.b.link(self.spawn_event[call], index, "tool_dependency")
            self.returns[stream.key].append((time, index))
            return
        tool = self.tool_names.get(call)
        if tool is None:
            self._odd(stream.name, number, "tool_result for a tool_use id not in the transcripts")
            tool = UNKNOWN_TOOL
        rejected = failed and (outcome == REJECTED_RESULT or _text(content).startswith(REJECTED_TEXT))
        if rejected:
            props = {"role": USER, "from": USER, "to": stream.key, "kind": "tool_rejected", **ids}
            intervention = self._event(time, "human_intervention", USER, props)
        props = {"tool": tool, **ids}
        if failed:
            props["error"] = True
        if tool in UNTRUSTED_TOOLS:
            props["trusted"] = False
        self._content(props, content)
        index = self._event(time, "tool_result", tool, props)
        if rejected:
            self.b.link(intervention, index, "causal")
        elif failed and call:
            self.errors.append((call, index, stream.key))
        if call in self.call_event:
            self.b.link(self.call_event[call], index, "tool_dependency")
        self.to_next.append((index, stream.key, time, "causal"))

    def _system(self, stream: _Stream, number: int, record: dict, time: float) -> None:
        subtype = record.get("subtype")
        if subtype == "turn_duration":
            if isinstance(record.get("durationMs"), (int, float)) and not isinstance(record["durationMs"], bool):
                self.turn_ms += record["durationMs"]
        elif subtype == "stop_hook_summary":
            errors = record.get("hookErrors")
            if record.get("preventedContinuation") is True or errors:
                props = {"role": "hook", "to": stream.key, "kind": "stop_hook",
                         "prevented_continuation": record.get("preventedContinuation") is True,
                         "hook_errors": len(errors) if isinstance(errors, list) else 0,
                         **self._source(stream, number, record)}
                if isinstance(record.get("stopReason"), str) and record["stopReason"]:
                    self._content(props, record["stopReason"])
                index = self._event(time, "safety_event", SYSTEM, props)
                if stream.lines is not None:
                    self.guards.append((index, stream.lines, stream.lines.parents.get(_uuid(record))))
                self.to_next.append((index, stream.key, time, "safety_flow"))
        elif subtype == "api_error":
            props = {"role": "api", "to": stream.key, "kind": "api_error", **self._source(stream, number, record)}
            if isinstance(record.get("retryAttempt"), int):
                props["retry_attempt"] = record["retryAttempt"]
            index = self._event(time, "safety_event", SYSTEM, props)
            self.to_next.append((index, stream.key, time, "safety_flow"))
        elif subtype == "local_command":
            content = record.get("content")
            if isinstance(content, str) and COMMAND_NAME in content:
                props = {"role": USER, "from": USER, "to": stream.key, "kind": "command"}
                self._message(time, USER, props, self._source(stream, number, record), content, stream.key)
        elif subtype != "compact_boundary":  # compaction is followed through logicalParentUuid
            self._odd(stream.name, number, f"system subtype {subtype!r} not mapped")

    def _progress(self, stream: _Stream, number: int, record: dict, time: float) -> None:
        data = record.get("data")
        kind = data.get("type") if isinstance(data, dict) else None
        if kind == "hook_progress":
            call = record.get("toolUseID") or record.get("parentToolUseID")
            event = data.get("hookEvent")
            if isinstance(call, str) and isinstance(event, str):
                self.hooks[call].add(event)
                if event == "PreToolUse":
                    self.pre_hooks[call] = (time, data.get("hookName") if isinstance(data.get("hookName"), str)
                                            else None)
        elif not isinstance(kind, str) or kind not in QUIET_PROGRESS:
            self._odd(stream.name, number, f"progress type {show(kind)} not mapped")

    def _queue(self, stream: _Stream, number: int, record: dict, time: float) -> None:
        """The user steering while the agent works: a queued message, or one taken back."""
        operation = record.get("operation")
        content = record.get("content")
        if operation == "enqueue" and isinstance(content, str) and content.lstrip().startswith(TASK_NOTIFICATION):
            return
        if operation == "enqueue" and not self.response_times.get(stream.key):
            return  # queued before the agent answered anything (`claude -p` queues its prompt): not steering
        if operation in ("enqueue", "remove"):
            props = {"role": USER, "from": USER, "to": stream.key, "kind": f"queue_{operation}",
                     **self._source(stream, number, record)}
            if content is not None:
                self._content(props, content)
            self._event(time, "human_intervention", USER, props)

    def _mirrored(self, child: _Child) -> None:
        """A sub-agent known only from agent_progress mirrors: each mirrored message once."""
        stream = _Stream(MAIN, child.key, child.role, None, child)
        seen = set()
        for number, record in self.mirrors.get(child.call_id, ()):
            inner = record["data"]["message"]
            uuid = inner.get("uuid")
            if uuid in seen:
                continue
            seen.add(uuid)
            line = {**inner, "sessionId": record.get("sessionId"), "isSidechain": True}
            if inner.get("type") in ("user", "assistant"):
                self._record(stream, number, line)

    # ---- events and edges ----------------------------------------------------------------------

    def _source(self, stream: _Stream, number: int, record: dict) -> dict:
        """The source identifiers of a record, as event properties."""
        props = {}
        for field, name in (("uuid", "uuid"), ("parentUuid", "parent_uuid"),
                            ("logicalParentUuid", "logical_parent_uuid"), ("sessionId", "session_id")):
            if isinstance(record.get(field), str):
                props[name] = record[field]
        if stream.agent_id:
            props["agent_id"] = stream.agent_id
        props["line"] = f"{stream.name}:{number}"
        return props

    def _content(self, props: dict, value) -> None:
        if value is None:
            return
        props["content_ref"] = ref(value)
        if self.keep:
            put_content(props, value)

    def _event(self, time: float, type_: str, agent: str, props: dict, stream: _Stream | None = None,
               record: dict | None = None) -> int:
        """Append an event; one made by a transcript line for that line's agent joins the parentUuid tree."""
        uuid = record.get("uuid") if record is not None else None
        chained = stream is not None and stream.lines is not None and agent == stream.key and isinstance(uuid, str)
        index = self.b.add(time, type_, agent, props, chained)
        if chained:
            lines = stream.lines
            if uuid in lines.last:
                self.b.link(lines.last[uuid], index, "temporal")
            else:
                lines.first[uuid] = index
            lines.last[uuid] = index
        return index

    def _odd(self, name: str, number: int, what: str) -> None:
        seen = self.odd.setdefault((name, what), [number, 0])
        seen[1] += 1

    def _finish(self) -> dict:
        if not self.b.times:
            raise ImportFailed("main: no user, assistant or system record to import")
        for response in self.responses.values():
            self._close(response)
        starts = {}
        for agent, entries in self.response_times.items():
            entries.sort()
            starts[agent] = ([t for t, _ in entries], [i for _, i in entries])
        self._denials()
        for index, lines, parent in self.guards:
            guarded = lines.nearest(parent)
            if guarded is not None:
                self.b.link(guarded, index, "causal")
        self.compactions.sort()
        compaction_times = [t for t, _ in self.compactions]
        for time, index in self.summaries:
            k = bisect_right(compaction_times, time)
            if k:
                self.b.link(self.compactions[k - 1][1], index, "causal")
        self._aggregate(starts)
        for src, agent, time, type_ in self.to_next:
            nxt = next_at(starts, agent, time)
            if nxt is not None:
                self.b.link(src, nxt, type_)
        self._join_chains()
        origin = self.first_time
        events, edges = self.b.finish(origin, places=T_PLACES, min_digits=ID_DIGITS)
        session = self._main_session()
        if session is None:
            self.warnings.append(f"main: no sessionId in the records; the session is named {self.fallback_id}")
            session = self.fallback_id
        trace = {
            "trace_id": f"claude-code-{session}",
            "task_id": self._task_id() or session,
            "system": self._system_name(),
            "topology": "harness",
            "events": events,
            "edges": edges,
            "rewards": {},
            "costs": {
                "tokens": sum(e.get("tokens_in", 0) + e.get("tokens_out", 0) for e in events),
                "wall_clock_s": round(self.last_time - origin, 3),
                "tool_calls": self.tool_calls,
                "messages": self.llm_calls,
            },
            "metrics": self._metrics(),
        }
        for (name, what), (number, count) in self.odd.items():
            self.warnings.append(f"{name} line {number}: {what}" + (f" ({count} records)" if count > 1 else ""))
        return trace

    def _close(self, response: _Response) -> None:
        """Tokens, content and type of a response, once all its lines are read."""
        props = self.b.props[response.index]
        if response.counted:
            usage = response.usage
            props["tokens_in"] = usage[0] + usage[1] + usage[2]
            props["tokens_out"] = usage[3]
        text = "\n".join(response.texts)
        if text.strip():
            props["content_ref"] = ref(text)
        if self.keep and response.blocks:
            put_content(props, {"output": {"role": "assistant", "content": response.blocks}})
        if response.asks and self.b.agents[response.index] in self.spawners:
            self.b.types[response.index] = "orchestrator_decision"

    def _denials(self) -> None:
        """An error result of a call whose PreToolUse hooks ran but no PostToolUse hook did: a denial."""
        for call, result, caller in self.errors:
            if call not in self.pre_hooks or self.hooks[call] & POST_HOOKS:
                continue
            time, hook = self.pre_hooks[call]
            props = {"role": "hook", "to": caller, "kind": "pre_tool_use_denied", "tool_use_id": call}
            if hook:
                props["hook"] = hook
            index = self._event(time, "safety_event", SYSTEM, props)
            if call in self.call_event:
                self.b.link(self.call_event[call], index, "causal")
            self.b.link(index, result, "safety_flow")

    def _aggregate(self, starts: dict) -> None:
        """Returns into the caller's next response; two or more before it meet in an aggregate."""
        for caller, returned in self.returns.items():
            by_next: dict[int | None, list[tuple[float, int]]] = {}
            for time, index in sorted(returned):
                by_next.setdefault(next_at(starts, caller, time), []).append((time, index))
            for nxt, group in by_next.items():
                if len(group) == 1:
                    if nxt is not None:
                        self.b.link(group[0][1], nxt, "return")
                    continue
                props = {"role": self.roles.get(caller, SUBAGENT_ROLE), "inputs": len(group),
                         "tool_use_ids": [self.b.props[i].get("tool_use_id") for _, i in group]}
                index = self._event(group[-1][0], "aggregate", caller, props)
                for _, returned_index in group:
                    self.b.link(returned_index, index, "aggregate")
                if nxt is not None:
                    self.b.link(index, nxt, "causal")

    def _join_chains(self) -> None:
        """Link the first event of each line to its nearest ancestor line's event of the same agent; a first
        event with none joins its agent's timeline in time order instead."""
        agents, chained = self.b.agents, self.b.chained
        for lines in self.all_lines:
            for uuid, first in lines.first.items():
                previous = lines.nearest(lines.parents.get(uuid))
                if previous is not None and agents[previous] == agents[first]:
                    self.b.link(previous, first, "temporal")
                else:
                    chained.discard(first)

    def _metrics(self) -> dict:
        metrics = {"turn_duration_s": self.turn_ms / MS_PER_S, "cache_read_input_tokens": 0,
                   "cache_creation_input_tokens": 0}
        for response in self.responses.values():
            if response.counted:
                metrics["cache_creation_input_tokens"] += response.usage[1]
                metrics["cache_read_input_tokens"] += response.usage[2]
        return metrics

    def _task_id(self) -> str | None:
        slug = next((r["slug"] for _, r in self.files[0][1] if isinstance(r, dict) and isinstance(r.get("slug"), str)
                     and r["slug"]), None)
        return slug or self._main_session()

    def _system_name(self) -> str:
        version = next((r["version"] for _, records in self.files for _, r in records
                        if isinstance(r, dict) and isinstance(r.get("version"), str)), None)
        return f"claude-code {version}" if version else "claude-code"


def _agent_id(name: str, suffix: str) -> str:
    """The agent id in a transcript or meta file name: agent-a93ccab.jsonl -> a93ccab."""
    base = PurePosixPath(name).name
    base = base[: -len(suffix)] if base.endswith(suffix) else base
    return base[len("agent-"):] if base.startswith("agent-") else base


def _tag(text: str, name: str) -> str | None:
    """The text inside the first <name>...</name> of a harness message, stripped; None without one."""
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return found.group(1).strip() if found else None


def _prompt(record: dict) -> str | None:
    """The text of a sub-agent's first (prompt) line."""
    message = record.get("message")
    return _text(message.get("content")) or None if isinstance(message, dict) else None


SUBAGENTS = "subagents"  # a Claude Code session's `<session>/subagents/` folder


def is_subagent_file(name: str) -> bool:
    """A Claude Code sub-agent transcript (agent-<id>.jsonl) or its meta file (agent-<id>.meta.json)."""
    path = PurePosixPath(name.split(":")[-1])
    return path.name.startswith("agent-") and (path.name.endswith(".jsonl") or path.name.endswith(".meta.json"))


def session_companions(session: Upload, helpers: list[Upload], n_sessions: int) -> dict[str, Upload]:
    """A session's sub-agent files keyed by their path under `<session>/subagents/`; for a lone session
    without such paths, all of them, keyed by file name."""
    folder = f"{PurePosixPath(session.source.split(':')[-1]).stem}/{SUBAGENTS}/"
    inside = {h.source.split(folder, 1)[1]: h for h in helpers if folder in h.source}
    if inside or n_sessions > 1:
        return inside
    return {PurePosixPath(h.source.split(":")[-1]).name: h for h in helpers}


def read_session(session: Upload, helpers: dict[str, Upload], max_bytes: int) -> tuple[str, dict, dict]:
    """The main transcript's text, and the sub-agent transcripts' texts and metas by their keys."""
    subagents = {name: decode(h.data, h.source, max_bytes) for name, h in helpers.items() if name.endswith(".jsonl")}
    metas = {name: _json(h) for name, h in helpers.items() if name.endswith(".json")}
    return decode(session.data, session.source, max_bytes), subagents, metas


def _json(upload: Upload):
    try:
        value = strict_loads(upload.data)
    except ValueError as exc:
        raise ImportFailed(f"{upload.source}: not JSON ({exc})") from exc
    problem = first_problem(value)
    if problem is not None:
        raise ImportFailed(f"{upload.source}: {problem}")
    return value


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Each session of the upload with its sub-agent transcripts and metas (the companions under its folder)."""
    if batch.companions and not batch.documents:
        raise ImportFailed("sub-agent transcripts without their session's main .jsonl file")
    result = ImportResult()
    sessions = [upload for upload, _ in batch.documents]
    for session in sessions:
        main, subagents, metas = read_session(session, session_companions(session, batch.companions, len(sessions)),
                                              batch.max_bytes)
        stem = PurePosixPath(session.source.split(":")[-1]).stem
        batch.merge(result, import_session(main, subagents, metas, None, content_policy), session.source or stem)
    return result


FORMAT = Format("claude_code", "Claude Code session transcripts (<session>.jsonl) with their subagents/ folder",
                lambda records: all(isinstance(r, dict) for r in records[:20]) and looks_like_claude_code(records[:20]),
                _convert, 50, companion=lambda upload: is_subagent_file(upload.source), parsed=False)
