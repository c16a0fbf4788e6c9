"""Import OpenAI Codex CLI session rollouts: one trace per root thread, its sub-agent threads as spawned agents.

Codex writes one rollout per thread, `~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`, of records
`{timestamp, type, payload}` (0.171.0 adds `ordinal`). A sub-agent is a thread of its own whose `session_meta`
names its parent: `source.subagent.thread_spawn = {parent_thread_id, depth, agent_path, agent_nickname,
agent_role}` (and `parent_thread_id` at the top of the payload). Both multi-agent layouts are read:
- v1 (feature `multi_agent`; tools `spawn_agent`, `send_input`, `wait_agent`, `close_agent`, `resume_agent` in the
  `multi_agent_v1` namespace): the spawn call's output names the child (`{"agent_id": <thread id>, "nickname"}`);
  a result reaches the parent in a `wait_agent` output (`{"status": {<thread id>: {"completed": <text>}}}`) or a
  `<subagent_notification>` user message.
- v2 (feature `multi_agent_v2`; tools `spawn_agent`, `followup_task`, `send_message`, `wait_agent`,
  `interrupt_agent`, `list_agents` in the `collaboration` namespace): the spawn output names a task path
  (`{"task_name": "/root/alpha"}`, the child's `agent_path`); a result reaches the parent as an `agent_message`
  item (`author` the child's path, text `Message Type: FINAL_ANSWER`). The parent -> child edges are also kept in
  the state database (`$CODEX_HOME/state_<n>.sqlite`, table `thread_spawn_edges(parent_thread_id,
  child_thread_id, status)`; `threads` holds nickname, role, agent path and rollout path), which this module reads
  with the standard library when given; a thread whose `session_meta` names no parent takes it from there.
A spawn call is joined to its child by the child's thread id in the call's output, else by Codex's own
`item_completed` event for the call (`CollabAgentToolCall.receiver_thread_ids`, `SubAgentActivity.agent_thread_id`),
else by the task path, else in order among the parent's children.

The mapping (IMPORTERS.md §0 where it speaks; choices where it does not):
- Agents: the root thread is `main` (role `lead`); a sub-agent is `<role>#<name>`, role = `agent_role` (else
  `subagent`), name = its agent path below `/root/` (v2), else its nickname (v1), else its thread id; human input is
  `user`; compaction is `system`. A `tool_result` belongs to the tool (`agent` = tool name), as in the published
  example trace and the Claude Code importer; MCP tools are named `<namespace>__<tool>` (`mcp__fixture__lookup`).
- Model calls: one event per model response: the run of output items (`reasoning`, assistant `message`,
  `function_call`, `custom_tool_call`, other `*_call`) up to the `token_count` (or `token_usage_record`) Codex writes
  after it, or up to the next input. It sits at its first item's time, `from` the agent `to` the model of the turn
  (`turn_context.model`), content `{"output": [the items as written]}`, `response_id` where a token_usage_record
  names it. It is an `orchestrator_decision` when it carries a reasoning item (the model's stated deliberation) or,
  per §0, asks for a tool while its agent spawns somewhere in the trace; otherwise a `message`.
- Tokens: each `event_msg` `token_count` reports the thread's running `total_token_usage`; the growth since the
  thread's previous count (its `last_token_usage` when the total went down) goes on the model call it closes
  (else the thread's last call). So `costs.tokens` is the sum over threads of Codex's last reported total, a
  repeated count adds nothing, and each call carries `tokens_in` = input tokens (cached ones included, as OpenAI
  counts them) and `tokens_out` = output tokens (reasoning included). Cached input and reasoning output tokens are
  summed in `metrics`.
- Tools: `function_call` / `custom_tool_call` (exec_command, apply_patch, MCP tools, ...) is a `tool_call` on the
  calling agent's lane, content its arguments (parsed JSON) or input text; its `*_output` is the `tool_result`,
  content the output as written, `error: true` when Codex's own completion event says it failed (status `failed`,
  a non-zero exit code, an MCP `isError`) or the output says `Process exited with code N` / `Exit code: N` with N
  non-zero. Edges: `causal` call -> tool_call, `tool_dependency` tool_call -> tool_result, `causal` tool_result ->
  the agent's next model call. A hosted `web_search_call` is a tool_call without result.
- Delegation: `spawn_agent` is the `spawn` (agent = caller, `to` = child; content its arguments; `thread_id`,
  `nickname`, `agent_path`, `depth` of the child), `spawn` edge to the child's first event; its output (the child's
  id) makes no event. `send_input` / `send_message` / `followup_task` are `message` events caller -> child. Other
  collaboration tools (`wait_agent`, `close_agent`, `list_agents`, ...) are tool calls. A child's `task_complete` is
  its `return` (agent = child, `to` = caller, content `last_agent_message`). It lands where the parent's model
  could first read it: a `wait_agent` result naming it completed (that tool_result), or a `<subagent_notification>`
  user message or a FINAL_ANSWER `agent_message` in the parent's rollout (the parent's next model call after that
  record); Codex's `SubAgentActivity` completed event, which only its UI reads, counts when neither exists. One
  return into a receiver gets a `return` edge; two or more get an `aggregate` event of the caller (at the last
  return) with an `aggregate` edge from each and a `causal` edge into the receiver. A child closed (`close_agent`)
  or aborted (`turn_aborted`) before returning gets a `despawn`.
- Messages: the user's messages in the root thread are `message` user -> main with a `message` edge into the next
  model call. What Codex injects (environment context, AGENTS.md instructions, developer messages, sub-agent
  notifications) makes no event; a sub-agent's task prompt is covered by its spawn.
- Compaction: a `compacted` record is a `message` system -> agent (role and kind `compaction`, content the summary,
  `replacement_items` the size of the history that replaced the old one); the model call that wrote the summary (an
  answer made only of text the summary ends with) is marked `kind: "compaction"` and gets a `causal` edge into it.
- Interruptions and errors: `turn_aborted` in the root thread is a `human_intervention` (kind = its reason); an
  `event_msg` `error` is a `safety_event` (kind `api_error`) with `safety_flow` into the agent's next model call.
- Every event keeps `thread_id`, `turn_id` where known, `call_id` for tools, and `line` ("rollout-...jsonl:17").
- task_id is the root thread id (never prompt text); system "codex <cli_version>"; topology `harness`.
  `costs.messages` counts model calls, `costs.tool_calls` tool_call events, `wall_clock_s` spans every timestamped
  record of the trace's rollouts; `metrics.turn_duration_s` sums the turns' `duration_ms`.
- Refused (ImportFailed, naming the file and line): a line that is not JSON or gives a key twice, an empty file, a
  file without a `session_meta` naming a thread, a state database that is not SQLite, threads whose parents form
  a cycle. Skipped with a warning naming the first line: record types, response item types and records this
  mapping does not know, records without a valid timestamp, tool outputs for unknown calls. `event_msg` mirrors
  the UI stream in dozens of variants; those not used above are skipped without a word. The same thread in two
  files keeps the first, with a warning.
"""

import json
import re
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike
from pathlib import Path, PurePosixPath

from app.ingest.importers.common import (
    KEEP,
    UNKNOWN_TOOL,
    Batch,
    ContentPolicy,
    Format,
    ImportFailed,
    ImportResult,
    TraceBuilder,
    jsonl_records,
    keeps,
    next_at,
    put_content,
    ref,
    show,
    tool_name,
)
from app.store import codex_state

MAIN, USER, SYSTEM = "main", "user", "system"
LEAD_ROLE, SUBAGENT_ROLE, COMPACTION = "lead", "subagent", "compaction"
RECORD_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state",
                          "token_usage_record", "inter_agent_communication_metadata"})
QUIET_RECORDS = frozenset({"world_state", "inter_agent_communication_metadata"})
OUTPUT_ITEMS = frozenset({"message", "reasoning", "function_call", "custom_tool_call", "local_shell_call",
                          "web_search_call", "tool_search_call", "image_generation_call"})
CALL_ITEMS = OUTPUT_ITEMS - {"message", "reasoning"}
RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
QUIET_ITEMS = frozenset({"ghost_snapshot", "other", "compaction", "compaction_summary"})
SPAWN_TOOL = "spawn_agent"
MESSAGE_TOOLS = frozenset({"send_input", "send_message", "followup_task"})
CLOSE_TOOL, WAIT_TOOL = "close_agent", "wait_agent"
FINAL_STATES = frozenset({"completed", "errored", "shutdown"})
UNTRUSTED_TOOLS = frozenset({"web_search"})
HARNESS_PREFIXES = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<subagent_notification>",
                    "<turn_aborted>", "<permissions instructions>", "<skill>", "<collaboration_mode>")
NOTIFICATION = "<subagent_notification>"
FINAL_ANSWER = "Message Type: FINAL_ANSWER"
EXIT_CODE = re.compile(r"(?:Process exited with code|Exit code:)\s*(-?\d+)")
SQLITE_MAGIC = b"SQLite format 3\x00"
MS_PER_S = 1000
ID_DIGITS = 4
T_PLACES = 3


def looks_like_codex(records: list) -> bool:
    """True when the first records are Codex rollout records (`type` and `payload`) and one is a `session_meta`
    naming its thread."""
    head = records[:5]
    return bool(head) and all(isinstance(r, dict) and isinstance(r.get("type"), str) and "payload" in r
                              for r in head) \
        and any(r["type"] == "session_meta" and isinstance(r["payload"], dict)
                and isinstance(r["payload"].get("id"), str) for r in head)


def is_state_db(data: bytes) -> bool:
    """True for a SQLite database file (a Codex state database is one)."""
    return data[:len(SQLITE_MAGIC)] == SQLITE_MAGIC


def session_files(folder: Path) -> tuple[list[Path], Path | None]:
    """The rollouts under a folder (a CODEX_HOME, its `sessions/`, or any folder below it) and the state database
    that goes with them: the newest `state_<n>.sqlite` in the folder or in the CODEX_HOME holding its `sessions/`."""
    folder = Path(folder)
    rollouts = sorted(path for path in folder.rglob("rollout-*.jsonl") if path.is_file())
    homes = [folder] + [parent.parent for parent in (folder, *folder.parents) if parent.name == "sessions"]
    for home in homes:
        databases = sorted(home.glob("state_*.sqlite"), key=lambda path: (_state_number(path), path.name))
        if databases:
            return rollouts, databases[-1]
    return rollouts, None


def session_groups(rollouts: list[Path]) -> list[list[Path]]:
    """Rollout files grouped by session tree, in the order given: Codex writes the root session's id into every
    sub-agent's `session_meta.session_id`, so one tree is one group (one upload), read from the first line alone.
    A file whose first line names no session is a group of its own (the import then says what is wrong)."""
    groups: dict[str, list[Path]] = {}
    for path in rollouts:
        try:
            with open(path, "rb") as file:
                first = json.loads(file.readline())
            payload = first.get("payload") if isinstance(first, dict) else None
            session = payload.get("session_id") or payload.get("id") if isinstance(payload, dict) else None
        except (OSError, ValueError, RecursionError):
            session = None
        groups.setdefault(session if isinstance(session, str) and session else f"file:{path}", []).append(path)
    return list(groups.values())


def _state_number(path: Path) -> int:
    number = path.stem.removeprefix("state_")
    return int(number) if number.isdigit() else -1


def state_db_bytes(path: Path) -> bytes:
    """A state database on disk as the bytes of one file, its write-ahead log folded in: for an upload.
    ImportFailed names the file."""
    path = Path(path)
    try:
        return codex_state.serialized(path)
    except codex_state.Error as exc:
        raise ImportFailed(f"{path.name}: not a readable SQLite database ({exc})") from None


def import_rollouts(rollouts: Mapping[str, str | bytes], state_db: bytes | str | PathLike | None = None,
                    content_policy: ContentPolicy = KEEP, state_db_name: str | None = None) -> ImportResult:
    """Traces from the rollout files of one upload (name -> text or bytes), with the state database's bytes or path
    when given; one trace per root thread."""
    result = ImportResult()
    try:
        threads = _threads(rollouts, result.warnings)
        if state_db is not None:
            name = state_db_name or (Path(state_db).name if isinstance(state_db, (str, PathLike)) else "state database")
            _apply_state(threads, _read_state(state_db, name), name, result.warnings)
        for root in _forest(threads, result.warnings):
            trace = _Trace(root, keeps(content_policy), result.warnings)
            try:
                result.traces.append(trace.build())
            except ImportFailed:
                raise
            except (TypeError, ValueError, KeyError, AttributeError, IndexError) as exc:  # a record of unforeseen shape
                raise ImportFailed(f"{trace.where}: record not as Codex writes it ({type(exc).__name__}: "
                                   f"{show(str(exc))})") from exc
    except RecursionError:  # a value nested deeper than Python's stack
        raise ImportFailed("arrays and objects nested too deeply to read") from None
    return result


# ---- files, threads and the tree ------------------------------------------------------------------


@dataclass
class _Thread:
    """One rollout: a thread of the session tree."""

    name: str
    records: list[tuple[int, object]]
    id: str
    meta: dict
    meta_line: int
    parent: str | None = None
    depth: int | None = None
    nickname: str | None = None
    role: str | None = None
    path: str | None = None
    children: list["_Thread"] = field(default_factory=list)
    key: str = MAIN


def _threads(rollouts: Mapping[str, str | bytes], warnings: list[str]) -> list[_Thread]:
    threads: dict[str, _Thread] = {}
    for source, data in rollouts.items():
        name = PurePosixPath(str(source).split(":")[-1]).name or str(source)
        records = _parse(data, name)
        found = next(((n, r) for n, r in records if isinstance(r, dict) and r.get("type") == "session_meta"), None)
        if found is None:
            raise ImportFailed(f"{name}: no session_meta record: not a Codex rollout")
        number, record = found
        meta = record.get("payload")
        if not isinstance(meta, dict) or not isinstance(meta.get("id"), str) or not meta["id"]:
            raise ImportFailed(f"{name} line {number}: session_meta without a thread id (payload.id)")
        thread = _Thread(name, records, meta["id"], meta, number)
        spawn = _thread_spawn(meta)
        parent = spawn.get("parent_thread_id") or meta.get("parent_thread_id")
        thread.parent = parent if isinstance(parent, str) and parent else None
        thread.depth = spawn.get("depth") if isinstance(spawn.get("depth"), int) else None
        thread.nickname = _text_or_none(spawn.get("agent_nickname")) or _text_or_none(meta.get("agent_nickname"))
        thread.role = _text_or_none(spawn.get("agent_role")) or _text_or_none(meta.get("agent_role"))
        thread.path = _text_or_none(spawn.get("agent_path")) or _text_or_none(meta.get("agent_path"))
        if thread.id in threads:
            warnings.append(f"{name}: thread {thread.id} is also in {threads[thread.id].name}; this file is skipped")
            continue
        threads[thread.id] = thread
    return list(threads.values())


def _parse(data: str | bytes, name: str) -> list[tuple[int, object]]:
    """(line number, record) of every non-blank line; a line that is not JSON, or gives a key twice, refuses it."""
    if isinstance(data, str):
        text = data.lstrip("\ufeff")
    else:
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise ImportFailed(f"{name}: not UTF-8 text (byte {exc.start})") from None
    return jsonl_records(text, name)


def _thread_spawn(meta: dict) -> dict:
    source = meta.get("source")
    sub = source.get("subagent") if isinstance(source, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    return spawn if isinstance(spawn, dict) else {}


def _final(state) -> bool:
    """Whether an agent status Codex reports (`{"completed": text}`, `"shutdown"`, ...) is an end."""
    if isinstance(state, dict):
        return bool(state.keys() & FINAL_STATES)
    return isinstance(state, str) and state in FINAL_STATES


def _kind(value: dict) -> str | None:
    """A record's or item's `type`, when it is text."""
    kind = value.get("type")
    return kind if isinstance(kind, str) else None


def _text_or_none(value) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class _State:
    """What a state database says about threads."""

    parents: dict[str, str] = field(default_factory=dict)  # child thread -> parent thread
    rows: dict[str, dict] = field(default_factory=dict)  # thread id -> its `threads` row


def _read_state(db: bytes | str | PathLike, name: str) -> _State:
    """Spawn edges and thread rows of a Codex state database (app/store/codex_state.py reads it)."""
    if isinstance(db, (str, PathLike)):
        path = Path(db)
        if codex_state.opens(path):
            db = path
        else:
            try:
                db = path.read_bytes()
            except OSError as exc:
                raise ImportFailed(f"{name}: cannot read the state database ({exc.strerror})") from None
    if not isinstance(db, Path):
        db = bytes(db)
        if not is_state_db(db):
            raise ImportFailed(f"{name}: not a SQLite database")
    try:
        with codex_state.opened(db) as connection:
            tables = codex_state.tables(connection)
            state = _State()
            if "thread_spawn_edges" in tables:
                for parent, child in codex_state.spawn_edges(connection):
                    if isinstance(parent, str) and isinstance(child, str):
                        state.parents[child] = parent
            if "threads" in tables:
                for row in codex_state.threads(connection):
                    if isinstance(row.get("id"), str):
                        state.rows[row["id"]] = row
    except codex_state.Error as exc:
        raise ImportFailed(f"{name}: not a readable SQLite database ({exc})") from None
    if not {"thread_spawn_edges", "threads"} & tables:
        raise ImportFailed(f"{name}: neither a thread_spawn_edges nor a threads table: not a Codex state database")
    return state


def _apply_state(threads: list[_Thread], state: _State, name: str, warnings: list[str]) -> None:
    """Parents the rollouts do not name, and names they lack, from the state database."""
    for thread in threads:
        parent = state.parents.get(thread.id)
        row = state.rows.get(thread.id, {})
        if parent is None and isinstance(row.get("source"), str):
            try:
                source = json.loads(row["source"])
            except ValueError:
                source = None
            parent = _thread_spawn({"source": source}).get("parent_thread_id") if isinstance(source, dict) else None
        if parent and thread.parent is None:
            thread.parent = parent
        elif parent and parent != thread.parent:
            warnings.append(f"{name}: thread {thread.id}'s parent is {parent}, its rollout {thread.name} says "
                            f"{thread.parent}; the rollout is followed")
        thread.nickname = thread.nickname or _text_or_none(row.get("agent_nickname"))
        thread.role = thread.role or _text_or_none(row.get("agent_role"))
        thread.path = thread.path or _text_or_none(row.get("agent_path"))
    known = {thread.id for thread in threads}
    missing = sorted(child for child, parent in state.parents.items() if parent in known and child not in known)
    if missing:
        warnings.append(f"{name}: {len(missing)} spawned thread(s) without a rollout in the upload "
                        f"(first {missing[0]})")


def _forest(threads: list[_Thread], warnings: list[str]) -> list[_Thread]:
    """The root threads, each with its descendants under `children` (in the order they started)."""
    by_id = {thread.id: thread for thread in threads}
    roots = []
    for thread in threads:
        parent = by_id.get(thread.parent) if thread.parent else None
        if parent is None:
            if thread.parent:
                warnings.append(f"{thread.name}: parent thread {thread.parent} is not in the upload; the thread is "
                                "imported as a trace of its own")
            roots.append(thread)
        else:
            parent.children.append(thread)
    reachable, stack = set(), list(roots)
    while stack:
        thread = stack.pop()
        reachable.add(thread.id)
        stack += thread.children
    if len(reachable) < len(threads):
        stuck = next(thread for thread in threads if thread.id not in reachable)
        raise ImportFailed(f"{stuck.name} line {stuck.meta_line}: parent thread {stuck.parent} is part of a cycle")
    for thread in threads:
        thread.children.sort(key=lambda child: (str(child.meta.get("timestamp", "")), child.id))
    return sorted(roots, key=lambda root: (str(root.meta.get("timestamp", "")), root.id))


def _seconds(stamp) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def _json(text):
    """JSON text parsed, else the text itself."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _message_text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(part.get("text", "") for part in content
                   if isinstance(part, dict) and isinstance(part.get("text"), str))


def _clean(item: dict) -> dict:
    """A response item as written, without Codex's internal passthrough metadata."""
    return {key: value for key, value in item.items() if key != "internal_chat_message_metadata_passthrough"}


# ---- one trace ------------------------------------------------------------------------------------


class _Call:
    """One model response being read: its event and what it said."""

    __slots__ = ("asks", "calls", "index", "items", "reasons", "tokens", "tool_outputs")

    def __init__(self, index: int):
        self.index = index
        self.items: list[dict] = []
        self.asks = self.reasons = self.tokens = self.tool_outputs = False
        self.calls: set[str] = set()


@dataclass
class _Usage:
    input: int = 0
    output: int = 0
    cached: int = 0
    reasoning: int = 0


@dataclass
class _Receipt:
    """Where a child's result reached its parent: a wait result's event, or a record of the parent's rollout (then
    the parent's next model call). `seen` is False for Codex's UI events, which the model never reads."""

    time: float
    line: int
    event: int | None
    seen: bool = True


class _Trace:
    """Maps a root thread and its descendants onto one orchestration trace."""

    def __init__(self, root: _Thread, keep: bool, warnings: list[str]):
        self.root, self.keep, self.warnings = root, keep, warnings
        self.threads: list[_Thread] = []
        stack = [root]
        while stack:
            thread = stack.pop(0)
            self.threads.append(thread)
            stack += thread.children
        self.by_id = {thread.id: thread for thread in self.threads}
        self.b = TraceBuilder()  # times in seconds since the epoch
        self.where = f"{root.name} line {root.meta_line}"
        self.first_time: float | None = None
        self.last_time: float | None = None
        self.oddities: dict[tuple[str, str], list[int]] = {}  # (file, what) -> [first line, count]
        self.roles: dict[str, str] = {MAIN: LEAD_ROLE}
        # What the scan learns.
        self.tools: dict[str, str] = {}  # call id -> tool name
        self.spawn_child: dict[str, _Thread] = {}  # spawn call id -> child thread
        self.outcomes: dict[str, bool] = {}  # call id -> failed, from Codex's completion events
        self.spawners: set[str] = set()
        # What the walk makes.
        self.model_calls: dict[str, list[tuple[float, int]]] = defaultdict(list)  # agent -> (time, event)
        self.call_lines: dict[str, list[tuple[int, int]]] = defaultdict(list)  # agent -> (line, event), in order
        self.to_next: list[tuple[int, str, float, str]] = []  # (src, agent, time, edge type)
        self.call_event: dict[str, int] = {}
        self.returns: dict[str, list[tuple[float, int]]] = defaultdict(list)  # child key -> (time, return event)
        self.receipts: dict[str, list[_Receipt]] = defaultdict(list)  # child key -> where results reached the parent
        self.closes: list[tuple[float, str, int]] = []  # (time, child key, close tool_call event)
        self.aborted: list[tuple[float, _Thread, int, str]] = []
        self.usage = _Usage()
        self.llm_calls = self.tool_calls = 0
        self.turn_ms = 0

    def build(self) -> dict:
        self._name_agents()
        for thread in self.threads:
            self._scan(thread)
        for thread in self.threads:
            self._join(thread)
        for thread in self.threads:
            _Walk(self, thread).run()
        return self._finish()

    # ---- agents and joins ------------------------------------------------------------------------

    def _name_agents(self) -> None:
        taken = {MAIN, USER, SYSTEM}
        for thread in self.threads[1:]:
            role = thread.role or SUBAGENT_ROLE
            name = (thread.path.removeprefix("/root/").strip("/") if thread.path else None) or thread.nickname \
                or thread.id
            key = f"{role}#{name}"
            if key in taken:
                key = f"{key}-{thread.id[-6:]}"
            taken.add(key)
            thread.key = key
            self.roles[key] = role

    def _scan(self, thread: _Thread) -> None:
        """Tool names by call id, Codex's completion outcomes, and which calls started which threads."""
        for _, record in thread.records:
            if not isinstance(record, dict) or not isinstance(record.get("payload"), dict):
                continue
            payload = record["payload"]
            if record.get("type") == "response_item" and _kind(payload) in CALL_ITEMS:
                call = payload.get("call_id")
                if isinstance(call, str):
                    self.tools[call] = _tool_name(payload)
            elif record.get("type") == "event_msg":
                self._scan_event(payload)

    def _scan_event(self, payload: dict) -> None:
        kind = payload.get("type")
        item = payload.get("item") if kind == "item_completed" else None
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            failed = item.get("status") == "failed" or (isinstance(item.get("exit_code"), int)
                                                        and item["exit_code"] != 0)
            result = item.get("result")
            if isinstance(result, dict) and result.get("isError") is True:
                failed = True
            if "status" in item or "exit_code" in item or isinstance(result, dict):
                self.outcomes[item["id"]] = failed
        elif kind == "exec_command_end" and isinstance(payload.get("call_id"), str):
            self.outcomes[payload["call_id"]] = payload.get("exit_code") not in (0, None)
        elif kind == "patch_apply_end" and isinstance(payload.get("call_id"), str):
            self.outcomes[payload["call_id"]] = payload.get("success") is False
        elif kind == "mcp_tool_call_end" and isinstance(payload.get("call_id"), str):
            result = payload.get("result")
            self.outcomes[payload["call_id"]] = isinstance(result, dict) and (
                "Err" in result or (isinstance(result.get("Ok"), dict) and result["Ok"].get("isError") is True))

    def _join(self, parent: _Thread) -> None:
        """Each child of `parent` to the spawn call that started it."""
        calls, announced = [], {}
        for _, record in parent.records:
            payload = record.get("payload") if isinstance(record, dict) else None
            if not isinstance(payload, dict):
                continue
            if record.get("type") == "response_item" and payload.get("type") == "function_call" \
                    and payload.get("name") == SPAWN_TOOL and isinstance(payload.get("call_id"), str):
                calls.append(payload["call_id"])
            elif record.get("type") == "response_item" and payload.get("type") == "function_call_output":
                answer = _json(payload.get("output"))
                if isinstance(answer, dict) and isinstance(payload.get("call_id"), str):
                    for field_ in ("agent_id", "task_name"):
                        if isinstance(answer.get(field_), str):
                            announced.setdefault(payload["call_id"], []).append(answer[field_])
            elif record.get("type") == "event_msg" and payload.get("type") == "item_completed":
                item = payload.get("item")
                if isinstance(item, dict) and isinstance(item.get("id"), str):
                    ids = item.get("receiver_thread_ids") if item.get("tool") == SPAWN_TOOL else None
                    if item.get("type") == "SubAgentActivity" and item.get("kind") == "started":
                        ids = [item.get("agent_thread_id")]
                    for thread_id in ids if isinstance(ids, list) else ():
                        if isinstance(thread_id, str):
                            announced.setdefault(item["id"], []).append(thread_id)
        children = {child.id: child for child in parent.children}
        by_path = {child.path: child for child in parent.children if child.path}
        joined = set()
        for call in calls:
            for named in announced.get(call, ()):
                child = children.get(named) or by_path.get(named) or by_path.get(f"/root/{named}")
                if child is not None and child.id not in joined:
                    self.spawn_child[call] = child
                    joined.add(child.id)
                    break
        left = [child for child in parent.children if child.id not in joined]
        for call in calls:
            if call not in self.spawn_child and left:
                self.spawn_child[call] = left.pop(0)
        for child in left:
            self.warnings.append(f"{child.name}: no spawn_agent call of thread {parent.id} found for this sub-agent; "
                                 "it has no spawn")
        unjoined = [call for call in calls if call not in self.spawn_child]
        if unjoined:
            self.warnings.append(f"{parent.name}: {len(unjoined)} spawn_agent call(s) whose sub-agent's rollout is not "
                                 f"in the upload (first {unjoined[0]}); their spawns name no agent")
        if calls:
            self.spawners.add(parent.key)

    def child_named(self, parent: _Thread, target) -> _Thread | None:
        """A child of `parent` by thread id, nickname or agent path (canonical or relative)."""
        if not isinstance(target, str):
            return None
        for child in parent.children:
            if target in (child.id, child.nickname, child.path) or (child.path and child.path.endswith("/" + target)):
                return child
        return None

    # ---- events ----------------------------------------------------------------------------------

    def seen(self, time: float) -> None:
        self.first_time = time if self.first_time is None else min(self.first_time, time)
        self.last_time = time if self.last_time is None else max(self.last_time, time)

    def odd(self, name: str, number: int, what: str) -> None:
        seen = self.oddities.setdefault((name, what), [number, 0])
        seen[1] += 1

    def content(self, props: dict, value) -> None:
        if value is None:
            return
        props["content_ref"] = ref(value)
        if self.keep:
            put_content(props, value)

    def event(self, time: float, type_: str, agent: str, props: dict) -> int:
        return self.b.add(time, type_, agent, props)

    def _finish(self) -> dict:
        if not self.b.times:
            raise ImportFailed(f"{self.root.name}: no model call, tool call or message to import")
        starts = {}
        for agent, entries in self.model_calls.items():
            entries.sort()
            starts[agent] = ([t for t, _ in entries], [i for _, i in entries])
        self._returns()
        self._despawns()
        for src, agent, time, type_ in self.to_next:
            nxt = next_at(starts, agent, time)
            if nxt is not None:
                self.b.link(src, nxt, type_)
        events, edges = self.b.finish(self.first_time, places=T_PLACES, min_digits=ID_DIGITS)
        version = self.root.meta.get("cli_version")
        trace = {
            "trace_id": f"codex-{self.root.id}",
            "task_id": self.root.id,
            "system": f"codex {version}" if isinstance(version, str) and version else "codex",
            "topology": "harness",
            "events": events,
            "edges": edges,
            "rewards": {},
            "costs": {
                "tokens": self.usage.input + self.usage.output,
                "wall_clock_s": round(self.last_time - self.first_time, 3),
                "tool_calls": self.tool_calls,
                "messages": self.llm_calls,
            },
            "metrics": {
                "turn_duration_s": self.turn_ms / MS_PER_S,
                "cached_input_tokens": self.usage.cached,
                "reasoning_output_tokens": self.usage.reasoning,
                "threads": len(self.threads),
            },
        }
        for (name, what), (number, count) in self.oddities.items():
            self.warnings.append(f"{name} line {number}: {what}" + (f" ({count} records)" if count > 1 else ""))
        return trace

    def _returns(self) -> None:
        """Each return into where the parent could first read it; several into one place meet in an aggregate."""
        into: dict[int, list[tuple[float, int]]] = defaultdict(list)
        caller: dict[int, str] = {}
        for child_key, returned in self.returns.items():
            receipts = self.receipts.get(child_key, [])
            used: set[int] = set()
            parent = self.b.props[returned[0][1]]["to"]
            order = sorted(range(len(receipts)), key=lambda k: (not receipts[k].seen, receipts[k].time))
            for time, index in sorted(returned):
                pick = next((k for k in order if k not in used and receipts[k].time >= time), None)
                if pick is None:
                    pick = next((k for k in order if k not in used), None)
                if pick is None:
                    continue
                used.add(pick)
                receipt = receipts[pick]
                target = receipt.event
                if target is None:  # the parent's next model call in its rollout (lines are in order)
                    calls = self.call_lines.get(parent, [])
                    k = bisect_right(calls, (receipt.line, len(self.b.times)))
                    target = calls[k][1] if k < len(calls) else None
                if target is not None:
                    into[target].append((time, index))
                    caller[target] = parent
        for target, group in into.items():
            if len(group) == 1:
                self.b.link(group[0][1], target, "return")
                continue
            group.sort()
            props = {"role": self.roles.get(caller[target], LEAD_ROLE), "inputs": len(group),
                     "thread_id": self.b.props[target].get("thread_id")}
            index = self.event(group[-1][0], "aggregate", caller[target], props)
            for _, returned_index in group:
                self.b.link(returned_index, index, "aggregate")
            self.b.link(index, target, "causal")

    def _despawns(self) -> None:
        """A child whose turn was aborted, or that was closed before it returned, ends in a despawn."""
        ended = set()
        for time, thread, number, reason in sorted(self.aborted, key=lambda entry: entry[0]):
            props = {"role": self.roles[thread.key], "from": thread.key, "to": self.by_id[thread.parent].key,
                     "kind": "aborted", "reason": reason, "thread_id": thread.id, "line": f"{thread.name}:{number}"}
            self.event(time, "despawn", thread.key, props)
            ended.add(thread.key)
        for time, child_key, close in self.closes:
            if child_key in ended or any(t <= time for t, _ in self.returns.get(child_key, [])):
                continue
            props = {"role": self.roles[child_key], "from": child_key, "to": self.b.agents[close], "kind": "closed",
                     "call_id": self.b.props[close].get("call_id")}
            index = self.event(time, "despawn", child_key, props)
            self.b.link(close, index, "causal")
            ended.add(child_key)


def _tool_name(item: dict) -> str:
    """A call item's tool: its name, MCP tools qualified by their namespace (`mcp__server__tool`)."""
    kind = item.get("type")
    if kind == "local_shell_call":
        return "local_shell"
    if kind in ("web_search_call", "tool_search_call", "image_generation_call"):
        return kind.removesuffix("_call")
    name = tool_name(item.get("name"))
    namespace = item.get("namespace")
    if isinstance(namespace, str) and namespace.startswith("mcp__") and not name.startswith("mcp__"):
        return f"{namespace}__{name}"
    return name


class _Walk:
    """The records of one thread, in order, made into events."""

    def __init__(self, trace: _Trace, thread: _Thread):
        self.t, self.thread = trace, thread
        self.key = thread.key
        self.role = trace.roles[thread.key]
        self.child = thread is not trace.root
        self.parent_key = trace.by_id[thread.parent].key if self.child else None
        self.model: str | None = None
        self.turn: str | None = None
        self.open: _Call | None = None
        self.last: _Call | None = None  # the last call closed, until a token count is given to it
        self.calls: list[_Call] = []
        self.total: _Usage | None = None
        self.number = 0

    def run(self) -> None:
        name = self.thread.name
        for number, record in self.thread.records:
            self.number = number
            self.t.where = f"{name} line {number}"
            if not isinstance(record, dict):
                self.t.odd(name, number, "not a JSON object, skipped")
                continue
            kind = record.get("type")
            if not isinstance(kind, str) or kind not in RECORD_TYPES:
                self.t.odd(name, number, f"unknown record type {show(kind)}, skipped")
                continue
            time = _seconds(record.get("timestamp"))
            if time is None:
                self.t.odd(name, number, "record without a valid timestamp, skipped")
                continue
            self.t.seen(time)
            payload = record.get("payload")
            if not isinstance(payload, dict):
                self.t.odd(name, number, f"{kind} record without a payload object, skipped")
                continue
            if kind == "response_item":
                self._item(payload, time)
            elif kind == "event_msg":
                self._event_msg(payload, time)
            elif kind == "turn_context":
                self._close()
                self.model = _text_or_none(payload.get("model")) or self.model
                self.turn = _text_or_none(payload.get("turn_id")) or self.turn
            elif kind == "compacted":
                self._compacted(payload, time)
            elif kind == "token_usage_record":
                target = self.open or self.last
                if target is not None and isinstance(payload.get("response_id"), str):
                    self.t.b.props[target.index].setdefault("response_id", payload["response_id"])
                self._close()
        self._close()

    def _source(self, item: dict | None = None) -> dict:
        props = {"thread_id": self.thread.id}
        meta = item.get("internal_chat_message_metadata_passthrough") if item else None
        turn = meta.get("turn_id") if isinstance(meta, dict) and isinstance(meta.get("turn_id"), str) else self.turn
        if turn:
            props["turn_id"] = turn
        props["line"] = f"{self.thread.name}:{self.number}"
        return props

    # ---- response items --------------------------------------------------------------------------

    def _item(self, item: dict, time: float) -> None:
        kind = _kind(item)
        if kind in OUTPUT_ITEMS and not (kind == "message" and item.get("role") != "assistant"):
            self._output(item, time)
        elif kind == "message":
            self._close()
            self._input_message(item, time)
        elif kind in RESULT_ITEMS:
            self._result(item, time)
        elif kind == "agent_message":
            self._agent_message(item, time)
        elif kind not in QUIET_ITEMS:
            self.t.odd(self.thread.name, self.number, f"response item type {show(kind)} not mapped, skipped")

    def _output(self, item: dict, time: float) -> None:
        call = self.open
        if call is not None and call.tool_outputs:
            self._close()  # an output after the results of this call's tools: the next response
            call = None
        if call is None:
            props = {"role": self.role, "from": self.key}
            if self.model:
                props["to"] = props["model"] = self.model
            props.update(self._source(item))
            index = self.t.event(time, "message", self.key, props)
            call = self.open = _Call(index)
            self.calls.append(call)
            self.t.model_calls[self.key].append((time, index))
            self.t.call_lines[self.key].append((self.number, index))
            self.t.llm_calls += 1
        call.items.append(_clean(item))
        kind = item.get("type")
        if kind == "reasoning":
            call.reasons = True
        elif kind in CALL_ITEMS:
            call.asks = True
            self._tool_call(item, time, call)

    def _tool_call(self, item: dict, time: float, call: _Call) -> None:
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        tool = _tool_name(item)
        given = _json(item.get("arguments")) if "arguments" in item else item.get("input", item.get("action"))
        props = {"role": self.role, "tool": tool}
        if call_id:
            props["call_id"] = call_id
            call.calls.add(call_id)
        if isinstance(item.get("namespace"), str):
            props["namespace"] = item["namespace"]
        props.update(self._source(item))
        child = self.t.spawn_child.get(call_id) if tool == SPAWN_TOOL and call_id else None
        if tool == SPAWN_TOOL:
            props = {**props, "role": self.t.roles[child.key] if child else SUBAGENT_ROLE, "from": self.key}
            if child is not None:
                props["to"] = child.key
                props["child_thread_id"] = child.id
                for name, value in (("nickname", child.nickname), ("agent_path", child.path), ("depth", child.depth)):
                    if value is not None:
                        props[name] = value
            self.t.content(props, given)
            index = self.t.event(time, "spawn", self.key, props)
            if child is not None:
                self.t.b.link_to_first(index, child.key, "spawn")
        elif tool in MESSAGE_TOOLS:
            target = given.get("target") if isinstance(given, dict) else None
            child = self.t.child_named(self.thread, target)
            props = {"from": self.key, "to": child.key if child else (target if isinstance(target, str) else None),
                     **props}
            if props["to"] is None:
                del props["to"]
            self.t.content(props, given)
            index = self.t.event(time, "message", self.key, props)
            if child is not None:
                self.t.to_next.append((index, child.key, time, "message"))
        else:
            if item.get("type") == "web_search_call":
                props["hosted"] = True
            self.t.content(props, given)
            index = self.t.event(time, "tool_call", self.key, props)
            self.t.tool_calls += 1
            if tool == CLOSE_TOOL:
                target = given.get("target") if isinstance(given, dict) else None
                child = self.t.child_named(self.thread, target)
                if child is not None:
                    self.t.closes.append((time, child.key, index))
        self.t.b.link(call.index, index, "causal")
        if call_id:
            self.t.call_event[call_id] = index

    def _result(self, item: dict, time: float) -> None:
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else None
        if self.open is not None and call_id in self.open.calls:
            self.open.tool_outputs = True
        if call_id in self.t.spawn_child:
            return  # the spawn's answer (the child's id): the spawn stands for it
        tool = self.t.tools.get(call_id) if call_id else None
        if tool is None:
            self.t.odd(self.thread.name, self.number, f"{item.get('type')} for a call id not in the rollouts")
            tool = UNKNOWN_TOOL
        output = item.get("output")
        props = {"tool": tool}
        if call_id:
            props["call_id"] = call_id
        props.update(self._source(item))
        failed = self.t.outcomes.get(call_id) if call_id else None
        if failed is None:
            found = EXIT_CODE.search(output) if isinstance(output, str) else None
            failed = found is not None and found.group(1) != "0"
            if isinstance(output, dict) and output.get("success") is False:
                failed = True
        if failed:
            props["error"] = True
        if tool in UNTRUSTED_TOOLS:
            props["trusted"] = False
        self.t.content(props, _json(output) if tool == WAIT_TOOL else output)
        index = self.t.event(time, "tool_result", tool, props)
        if call_id in self.t.call_event:
            self.t.b.link(self.t.call_event[call_id], index, "tool_dependency")
        self.t.to_next.append((index, self.key, time, "causal"))
        if tool == WAIT_TOOL:
            self._wait_receipts(_json(output), time, index)

    def _wait_receipts(self, answer, time: float, index: int) -> None:
        status = answer.get("status") if isinstance(answer, dict) else None
        for target, state in status.items() if isinstance(status, dict) else ():
            child = self.t.child_named(self.thread, target)
            if _final(state) and child is not None:
                self.t.receipts[child.key].append(_Receipt(time, self.number, index))

    def _input_message(self, item: dict, time: float) -> None:
        role = item.get("role")
        text = _message_text(item.get("content"))
        stripped = text.lstrip()
        if stripped.startswith(NOTIFICATION):
            self._notification(stripped, time)
            return
        if role != "user" or self.child or self._injected(item, stripped):
            return
        props = {"role": USER, "from": USER, "to": self.key, **self._source(item)}
        content = item.get("content")
        only_text = not isinstance(content, list) or all(isinstance(part, dict) and part.get("type") in (
            "input_text", "text") for part in content)
        self.t.content(props, text if only_text else content)
        index = self.t.event(time, "message", USER, props)
        self.t.to_next.append((index, self.key, time, "message"))

    @staticmethod
    def _injected(item: dict, text: str) -> bool:
        """A user-role message Codex wrote itself (context, instructions, notifications)."""
        meta = item.get("internal_chat_message_metadata_passthrough")
        kinds = meta.get("content_item_kinds") if isinstance(meta, dict) else None
        if isinstance(kinds, list) and kinds and all(isinstance(k, str) for k in kinds):
            return not any(k.startswith("user.") for k in kinds)
        return text.startswith(HARNESS_PREFIXES)

    def _notification(self, text: str, time: float) -> None:
        body = text.removeprefix(NOTIFICATION).split("</subagent_notification>")[0]
        note = _json(body.strip())
        status = note.get("status") if isinstance(note, dict) else None
        child = self.t.child_named(self.thread, note.get("agent_path")) if isinstance(note, dict) else None
        if _final(status) and child is not None:
            self.t.receipts[child.key].append(_Receipt(time, self.number, None))

    def _agent_message(self, item: dict, time: float) -> None:
        """v2 inter-agent mail: a child's final answer arriving here is a receipt; anything else is covered by the
        sender's call (a task prompt by its spawn, a message by its send_message / followup_task)."""
        if FINAL_ANSWER not in _message_text(item.get("content")):
            return
        child = self.t.child_named(self.thread, item.get("author"))
        if child is not None:
            self.t.receipts[child.key].append(_Receipt(time, self.number, None))

    # ---- event messages --------------------------------------------------------------------------

    def _event_msg(self, payload: dict, time: float) -> None:
        kind = payload.get("type")
        if kind == "token_count":
            self._tokens(payload.get("info"))
        elif kind in ("task_started", "turn_started"):
            self._close()
        elif kind in ("task_complete", "turn_complete"):
            self._close()
            if isinstance(payload.get("duration_ms"), (int, float)) and not isinstance(payload["duration_ms"], bool):
                self.t.turn_ms += payload["duration_ms"]
            if self.child:
                self._return(payload, time)
        elif kind == "turn_aborted":
            self._close()
            reason = payload.get("reason") if isinstance(payload.get("reason"), str) else "aborted"
            if self.child:
                self.t.aborted.append((time, self.thread, self.number, reason))
            else:
                props = {"role": USER, "from": USER, "to": self.key, "kind": reason, **self._source()}
                self.t.event(time, "human_intervention", USER, props)
        elif kind == "error":
            props = {"role": "api", "to": self.key, "kind": "api_error", **self._source()}
            self.t.content(props, payload.get("message"))
            index = self.t.event(time, "safety_event", SYSTEM, props)
            self.t.to_next.append((index, self.key, time, "safety_flow"))
        elif kind == "item_completed":
            item = payload.get("item")
            if isinstance(item, dict) and item.get("type") == "SubAgentActivity" and item.get("kind") == "completed":
                child = self.t.child_named(self.thread, item.get("agent_thread_id"))
                if child is not None:  # Codex's UI learns it here; the model only from a notification or a wait
                    self.t.receipts[child.key].append(_Receipt(time, self.number, None, seen=False))

    def _return(self, payload: dict, time: float) -> None:
        props = {"role": self.role, "from": self.key, "to": self.parent_key, "thread_id": self.thread.id}
        if isinstance(payload.get("turn_id"), str):
            props["turn_id"] = payload["turn_id"]
        props["line"] = f"{self.thread.name}:{self.number}"
        self.t.content(props, payload.get("last_agent_message"))
        index = self.t.event(time, "return", self.key, props)
        self.t.returns[self.key].append((time, index))

    def _tokens(self, info) -> None:
        """The growth of the thread's running total goes on the call this count closes."""
        total = info.get("total_token_usage") if isinstance(info, dict) else None
        if not isinstance(total, dict):
            self._close()
            return
        now = _usage(total)
        before = self.total or _Usage()
        grew = _Usage(now.input - before.input, now.output - before.output, now.cached - before.cached,
                      now.reasoning - before.reasoning)
        if min(grew.input, grew.output, grew.cached, grew.reasoning) < 0:  # the total went down: a fresh count
            last = info.get("last_token_usage")
            grew = _usage(last) if isinstance(last, dict) else _Usage()
        self.total = now
        if grew.input or grew.output:
            target = self.open or self.last or (self.calls[-1] if self.calls else None)
            if target is None:
                self.t.odd(self.thread.name, self.number, "token count before any model call: counted in the "
                                                          "trace's tokens only")
                self.t.usage.input += grew.input
                self.t.usage.output += grew.output
            else:
                props = self.t.b.props[target.index]
                props["tokens_in"] = props.get("tokens_in", 0) + grew.input
                props["tokens_out"] = props.get("tokens_out", 0) + grew.output
                target.tokens = True
                self.t.usage.input += grew.input
                self.t.usage.output += grew.output
            self.t.usage.cached += grew.cached
            self.t.usage.reasoning += grew.reasoning
            self.last = None
        self._close()

    def _compacted(self, payload: dict, time: float) -> None:
        self._close()
        summary = payload.get("message") if isinstance(payload.get("message"), str) else None
        props = {"role": COMPACTION, "from": SYSTEM, "to": self.key, "kind": COMPACTION, **self._source()}
        history = payload.get("replacement_history")
        if isinstance(history, list):
            props["replacement_items"] = len(history)
        self.t.content(props, summary)
        index = self.t.event(time, "message", SYSTEM, props)
        self.t.to_next.append((index, self.key, time, "message"))
        last = self.calls[-1] if self.calls else None
        if last is not None and summary and all(i.get("type") == "message" for i in last.items):
            text = "".join(_message_text(i.get("content")) for i in last.items).strip()
            if text and summary.rstrip().endswith(text):
                self.t.b.props[last.index]["kind"] = COMPACTION
                self.t.b.link(last.index, index, "causal")

    def _close(self) -> None:
        """The open call is complete: its content and type."""
        call = self.open
        if call is None:
            return
        self.open = None
        self.last = None if call.tokens else call
        props = self.t.b.props[call.index]
        output = call.items
        props["content_ref"] = ref(output)
        if self.t.keep:
            put_content(props, {"output": output})
        if call.reasons or (call.asks and self.key in self.t.spawners):
            self.t.b.types[call.index] = "orchestrator_decision"


def _usage(value: dict) -> _Usage:
    def number(name: str) -> int:
        found = value.get(name)
        return found if isinstance(found, int) and not isinstance(found, bool) and found >= 0 else 0

    return _Usage(number("input_tokens"), number("output_tokens"), number("cached_input_tokens"),
                  number("reasoning_output_tokens"))


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Every rollout of the upload together (a session tree's threads), with its state database if sent."""
    if batch.companions and not batch.documents:
        raise ImportFailed(f"{batch.companions[0].source}: a Codex state database without the rollouts it describes")
    if len(batch.companions) > 1:
        raise ImportFailed(f"{batch.companions[1].source}: a second Codex state database; send one with the rollouts")
    state = batch.companions[0] if batch.companions else None
    return import_rollouts({upload.source: upload.data for upload, _ in batch.documents}, state.data if state else None,
                           content_policy, state.source if state else None)


FORMAT = Format("codex", "OpenAI Codex CLI session rollouts (rollout-*.jsonl), with the state database",
                lambda records: all(isinstance(r, dict) for r in records[:20]) and looks_like_codex(records[:20]),
                _convert, 40, companion=lambda upload: is_state_db(upload.data))
