"""Import ATIF trajectories (Harbor's Agent Trajectory Interchange Format, ATIF-v1.0 to v1.8): one orchestration
trace per root trajectory.

Input is the trajectory documents of one upload: a main `trajectory.json` and any sub-agent trajectory files
given alongside it (with their file names, which `subagent_trajectory_ref.trajectory_path` names). A trajectory
is `{schema_version: "ATIF-v1.x", session_id, trajectory_id, agent: {name, version, model_name}, steps: [...],
final_metrics, extra, subagent_trajectories: [...], continued_trajectory_ref}`; a step is `{step_id, timestamp,
source: user|system|agent, message, reasoning_content, tool_calls: [{tool_call_id, function_name, arguments}],
observation: {results: [{source_call_id, content, subagent_trajectory_ref: [{trajectory_id, trajectory_path,
session_id}]}]}, metrics: {prompt_tokens, completion_tokens, cached_tokens, cost_usd}, llm_call_count,
is_copied_context, extra}`.

Choices where ATIF is silent, made for an auditor who wants to trace every event back to a step:
- Agents (lanes): the root trajectory's agent is `agent.name` (role `lead`); a sub-agent is
  `<name>#<trajectory_id>` (IMPORTERS.md §0 instance naming; a trajectory_id already of the form `<name>#...`
  is the instance name itself, as the exporter writes it), else `#<session_id>`, else `#<its file name>`,
  where the name, also its role, is the spawning ref's `extra.agent_name` (harbor's Qwen Code and Muse
  converters name the sub-agent there, all their sub-agents sharing one `agent.name`), else `agent.name`.
  A continuation (`continued_trajectory_ref`, a file given alongside) goes on in the same lane.
- Who prompts a trajectory: a `user` step is a `message` from the person (`user`) to the root, and from the
  spawning agent to a sub-agent (its task, as the spawner wrote it); a `system` step is a `message` from
  `system`. Each gets a `message` edge into the lane's next model step.
- An `agent` step is one model call, at the step's time: an `orchestrator_decision` when it asks for a tool and
  its agent spawns anywhere in the trace (§0), else a `message` (`to` = the model). Its content is
  `{"output": {"role": "assistant", "parts": [...]}}`: the reasoning, the message (a text part, or its content
  parts as ATIF wrote them) and the tool calls it asked for.
- A tool call becomes a `tool_call` of the calling lane (`tool` = function_name, `tool_call_id`, content = the
  arguments), with a `causal` edge from its step; the observation result answering it (`source_call_id`) is a
  `tool_result` whose agent is the tool (content = the result), with `tool_dependency` from the call and
  `causal` into the lane's next model step. A result naming no call (or one the step did not make: a warning)
  is a `tool_result` of the `environment`.
- Delegation: a result carrying `subagent_trajectory_ref` spawns each trajectory it names: a `spawn` event of
  the calling lane (`to` = the sub-agent; `tool` and content = the delegating call's name and arguments, where
  there is one) with a `causal` edge from the step and a `spawn` edge to the sub-agent's first event; the
  sub-agent's steps; then its `return` (agent = the sub-agent, `to` = the caller, content = the result the
  caller received) at the sub-agent's last step, with a `return` edge into the caller's next model step. A
  result naming two or more sub-agents ends in an `aggregate` of the caller (content = the result) with an
  `aggregate` edge from each return (§0 fan-out). A ref resolves by `trajectory_id` among the embedded
  `subagent_trajectories` (the step's own trajectory first, then its ancestors', then any), else by
  `trajectory_path` against the names of the files given, else by `trajectory_id` against those files;
  `session_id` is informational in ATIF and never resolves. A ref that resolves to nothing is a warning
  naming it (the spawn stays, with `missing_trajectory`); a trajectory named twice is walked once (warning);
  refs that lead back into a trajectory being walked refuse the upload, naming the step. An embedded
  trajectory no ref names is spawned by its parent at its first step (warning).
- Tokens, counted once. `costs.tokens` sums `prompt_tokens + completion_tokens` of the steps of every
  trajectory in the trace, each trajectory once, never an aggregate on top: ATIF's `prompt_tokens` already
  include `cached_tokens` (kept as `cached_tokens` on the event and summed in
  `metrics.cache_read_input_tokens`). `final_metrics` totals are aggregates, and writers differ on whether a
  root's include its sub-agents' (harbor's terminus-2, Qwen Code and Muse converters fold them in), so they
  are never added. A trajectory none of whose steps carry metrics counts its own `final_metrics` instead,
  less what its sub-agents' trajectories count when its total covers them (total >= theirs, prompt and
  completion each): that total is read as including them, else as its own. Those tokens go on the lane's last
  model step with `tokens_from: "final_metrics"`. A trajectory with step metrics whose `final_metrics` matches
  neither its steps nor its steps plus its sub-agents' gets a warning (unless a sub-agent's file is missing);
  the steps win. Steps marked
  `is_copied_context` (context copied from an earlier trajectory) make no event and count nothing (warning
  with their number). `total_tokens` in a step's `metrics.extra` counts as `tokens` where the step has no
  prompt or completion count (the exporter writes it for a trace event that had only `tokens`).
  The root's reported total (prompt + completion of its `final_metrics`) is kept as
  `metrics.reported_total_tokens`.
- `costs.messages` counts LLM calls (a step's `llm_call_count`, else 1 per agent step); `costs.tool_calls` the
  `tool_call` events (delegations are spawns); `costs.usd` the steps' `cost_usd`, else the root's
  `final_metrics.total_cost_usd` (ATIF: "including cost for subagents").
- Rewards: ATIF has no reward field; harbor keeps a trial's rewards (`VerifierResult.rewards`) beside the
  trajectory. Where a trajectory's `extra` carries them they are read: the root's `extra.rewards` (name ->
  number) and `extra.reward` become the trace's rewards; a sub-agent's go on its return (`reward`,
  `rewards`), a step's `extra.reward` on its event. A value that is not a number is a warning.
- task_id: the root's `extra.task_id`, `extra.task_name` or `extra.task`, else its session_id, trajectory_id,
  else the document's hash. trace_id: `atif-` + the root's session_id (else trajectory_id, else a hash of the
  document; the document's hash also when the id cannot name a trace), the prefix written once (a trajectory
  exported from such a trace imports to the same id). system: `<agent.name> <agent.version>
  (<schema_version>)`. topology from the spawn depth.
- Time: t from each step's ISO-8601 `timestamp` (naive ones are UTC). A step without one takes the time of the
  step before it in the walk (sub-agents inside their spawning step); with none at all every event is at
  t = 0, in the order of the steps (warning). Events keep `step_id`, `timestamp`, `trajectory_id`,
  `tool_call_id` and `atif_path`, the JSON path of their step (`trajectory.json: steps[3]`).
- Not mapped, silently: token ids and logprobs (training data, not review), tool definitions, notes, other
  `extra` keys. Fields ATIF does not define are skipped with one warning naming them.
- Refused (ImportFailed naming the JSON path): a document or step that is not an object, a top-level document
  without an `ATIF-` schema_version, missing or empty steps, an unknown step source, tool calls, observations,
  results or refs of the wrong shape, a ref naming neither trajectory_id nor trajectory_path, a token count that
  is not a whole number >= 0, a timestamp that is not ISO-8601.
"""

from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath

from app.domain.validation import trace_id_error
from app.ingest.importers.common import (
    KEEP,
    UNKNOWN_TOOL,
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
)
from app.ingest.importers.otlp import topology

SCHEMA_PREFIX = "ATIF-"
TRACE_ID_PREFIX = "atif-"
USER, SYSTEM, ENVIRONMENT = "user", "system", "environment"
LEAD_ROLE = "lead"
SOURCES = ("system", "user", "agent")
DETECT_RECORDS = 5  # records looked at to recognise the format
MICROS_PER_S = 1_000_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ONE_MICROSECOND = timedelta(microseconds=1)
MAX_COUNT = 2**53  # a token count must stay exact in a double
MAX_TOTAL = 2**63  # costs.tokens is stored in a 64-bit column

# The fields each ATIF object defines (harbor 0.25's models, ATIF-v1.8); others are reported once.
FIELDS = {
    "trajectory": {"schema_version", "session_id", "trajectory_id", "agent", "steps", "notes", "final_metrics",
                   "continued_trajectory_ref", "extra", "subagent_trajectories"},
    "agent": {"name", "version", "model_name", "tool_definitions", "extra"},
    "step": {"step_id", "timestamp", "source", "model_name", "reasoning_effort", "message", "reasoning_content",
             "tool_calls", "observation", "metrics", "is_copied_context", "llm_call_count", "extra"},
    "tool_call": {"tool_call_id", "function_name", "arguments", "extra"},
    "observation": {"results"},
    "result": {"source_call_id", "content", "subagent_trajectory_ref", "extra"},
    "ref": {"trajectory_id", "session_id", "trajectory_path", "extra"},
    "metrics": {"prompt_tokens", "completion_tokens", "cached_tokens", "cost_usd", "prompt_token_ids",
                "completion_token_ids", "logprobs", "extra"},
    "final_metrics": {"total_prompt_tokens", "total_completion_tokens", "total_cached_tokens", "total_cost_usd",
                      "total_steps", "extra"},
}


def looks_like_atif(records: list) -> bool:
    """True for ATIF trajectories: objects whose schema_version starts with `ATIF-` (the document as a list of
    its JSON values, as detection reads it)."""
    probe = records[:DETECT_RECORDS] if isinstance(records, list) else []
    return bool(probe) and all(isinstance(r, dict) and isinstance(r.get("schema_version"), str)
                               and r["schema_version"].startswith(SCHEMA_PREFIX) for r in probe)


def referenced_paths(doc) -> list[str]:
    """The files a trajectory names, to read alongside it: the `trajectory_path` of its sub-agent refs (its
    embedded trajectories' too) and its `continued_trajectory_ref`, in document order, once each. Tolerant:
    what is not where ATIF puts it is not named (the import says what is wrong)."""
    found: dict[str, None] = {}
    stack = [doc]
    while stack:
        node = stack.pop()
        if not isinstance(node, dict):
            continue
        if isinstance(node.get("continued_trajectory_ref"), str):
            found[node["continued_trajectory_ref"]] = None
        for step in node.get("steps") if isinstance(node.get("steps"), list) else ():
            observation = step.get("observation") if isinstance(step, dict) else None
            results = observation.get("results") if isinstance(observation, dict) else None
            for result in results if isinstance(results, list) else ():
                refs = result.get("subagent_trajectory_ref") if isinstance(result, dict) else None
                for r in refs if isinstance(refs, list) else ():
                    if isinstance(r, dict) and isinstance(r.get("trajectory_path"), str):
                        found[r["trajectory_path"]] = None
        embedded = node.get("subagent_trajectories")
        stack += reversed(embedded) if isinstance(embedded, list) else ()
    return list(found)


def import_atif(docs: list[dict], content_policy: ContentPolicy = KEEP,
                names: list[str] | None = None) -> ImportResult:
    """Orchestration traces from the ATIF documents of one upload, one per root trajectory (a document no ref
    or continuation names); `names` are the documents' file names, which path refs resolve against."""
    if not isinstance(docs, list):
        raise ImportFailed(f"not ATIF trajectories: expected a list of documents, got {show(docs)}")
    if names is not None and len(names) != len(docs):
        raise ImportFailed(f"{len(names)} file names for {len(docs)} ATIF documents")
    result = ImportResult()
    try:
        upload = _Upload(docs, names, result.warnings)
        used: dict[str, int] = {}
        for root in upload.roots():
            trace = _Trace(upload, root, keeps(content_policy), result.warnings).build()
            if trace is None:
                continue
            seen = used.get(trace["trace_id"], 0)
            used[trace["trace_id"]] = seen + 1
            if seen:
                trace["trace_id"] += f"-{seen + 1}"
            result.traces.append(trace)
    except RecursionError:
        raise ImportFailed("ATIF sub-agent trajectories nested too deeply to read") from None
    if upload.unknown:
        result.warnings.append("fields ATIF does not define, skipped: " + ", ".join(sorted(upload.unknown)))
    return result


# Reading: every document checked and indexed before any trace is built --------------------------------------

class _Ref:
    __slots__ = ("where", "trajectory_id", "path", "session_id", "extra")

    def __init__(self, where: str, trajectory_id, path, session_id, extra):
        self.where, self.trajectory_id, self.path, self.session_id, self.extra = \
            where, trajectory_id, path, session_id, extra

    def named(self) -> str:
        return " / ".join(f"{key} {value!r}" for key, value in (("trajectory_path", self.path),
                                                                 ("trajectory_id", self.trajectory_id)) if value)


class _Result:
    __slots__ = ("where", "call_id", "content", "refs", "extra")

    def __init__(self, where: str, call_id, content, refs: list[_Ref], extra):
        self.where, self.call_id, self.content, self.refs, self.extra = where, call_id, content, refs, extra


class _Step:
    __slots__ = ("where", "step_id", "time", "timestamp", "source", "model", "message", "reasoning", "calls",
                 "results", "metrics", "llm_calls", "copied", "extra")


class _Trajectory:
    __slots__ = ("where", "name", "doc", "version", "session_id", "trajectory_id", "agent_name", "agent_version",
                 "model", "steps", "final", "extra", "embedded", "parent", "continued")


class _Upload:
    """The documents of one upload, read and indexed: top-level trajectories, every embedded one by id, the
    files by name."""

    def __init__(self, docs: list, names: list[str] | None, warnings: list[str]):
        self.warnings = warnings
        self.unknown: set[str] = set()
        self.missing = 0  # refs that resolved to nothing: totals that include them cannot be checked
        self.tops: list[_Trajectory] = []
        self.all: list[_Trajectory] = []
        for i, doc in enumerate(docs):
            name = names[i] if names is not None else None
            where = f"{name}:" if name else f"docs[{i}]"
            if not isinstance(doc, dict):
                raise ImportFailed(f"{_place(where)}: {show(doc)} is not an object (an ATIF trajectory)")
            version = doc.get("schema_version")
            if not isinstance(version, str) or not version.startswith(SCHEMA_PREFIX):
                raise ImportFailed(f"{_at(where, 'schema_version')}: {show(version)} is not an ATIF version "
                                   "('ATIF-v1.x')")
            self.tops.append(self._read(doc, where, name, None))
        self.by_file: dict[str, _Trajectory] = {}
        for t in self.tops:
            if t.name:
                self.by_file.setdefault(_basename(t.name), t)
        self.by_id: dict[str, _Trajectory] = {}
        for trajectory in self.all:
            if trajectory.trajectory_id is not None and trajectory.trajectory_id not in self.by_id:
                self.by_id[trajectory.trajectory_id] = trajectory

    def roots(self) -> list[_Trajectory]:
        """The top-level trajectories no ref or continuation names, in the order given."""
        named = set()
        for trajectory in self.all:
            for step in trajectory.steps:
                for result in step.results:
                    for r in result.refs:
                        target = self.resolve(r, trajectory, warn=False)
                        if target is not None:
                            named.add(id(target))
            if trajectory.continued is not None:
                target = self.by_file.get(_basename(trajectory.continued))
                if target is not None:
                    named.add(id(target))
        roots = [t for t in self.tops if id(t) not in named]
        if not roots and self.tops:
            raise ImportFailed(f"{_place(self.tops[0].where)}: every document is named by a sub-agent ref or a "
                               "continuation (a cycle): no root trajectory")
        return roots

    def resolve(self, r: _Ref, owner: _Trajectory, warn: bool = True) -> "_Trajectory | None":
        """The trajectory a ref names (see the module docstring), or None."""
        if r.trajectory_id is not None:
            node = owner
            while node is not None:
                found = next((t for t in node.embedded if t.trajectory_id == r.trajectory_id), None)
                if found is not None:
                    return found
                node = node.parent
        if r.path is not None:
            found = self.by_file.get(_basename(r.path))
            if found is not None:
                return found
        if r.trajectory_id is not None and r.trajectory_id in self.by_id:
            return self.by_id[r.trajectory_id]
        if warn:
            self.missing += 1
            self.warnings.append(f"{r.where}: sub-agent trajectory {r.named()} is not in the upload (give its file "
                                 "alongside); the spawn is kept without its steps")
        return None

    def _read(self, doc, where: str, name: str | None, parent: "_Trajectory | None") -> _Trajectory:
        if not isinstance(doc, dict):
            raise ImportFailed(f"{_place(where)}: {show(doc)} is not an object (an ATIF trajectory)")
        self._fields(doc, "trajectory")
        t = _Trajectory()
        t.where, t.name, t.doc, t.parent = where, name, doc, parent
        version = doc.get("schema_version")
        if version is not None and (not isinstance(version, str) or not version.startswith(SCHEMA_PREFIX)):
            raise ImportFailed(f"{_at(where, 'schema_version')}: {show(version)} is not an ATIF version")
        t.version = version or (parent.version if parent else "ATIF")
        t.session_id = _text(doc, "session_id", where)
        t.trajectory_id = _text(doc, "trajectory_id", where)
        t.continued = _text(doc, "continued_trajectory_ref", where)
        agent = doc.get("agent")
        if not isinstance(agent, dict):
            raise ImportFailed(f"{_at(where, 'agent')}: {show(agent)} is missing or not an object")
        self._fields(agent, "agent")
        agent_where = _at(where, "agent")
        name_value = agent.get("name")
        if not isinstance(name_value, str):
            raise ImportFailed(f"{agent_where}.name: {show(name_value)} is missing or not a string")
        t.agent_name = name_value or "agent"
        t.agent_version = _text(agent, "version", agent_where) or ""
        t.model = _text(agent, "model_name", agent_where)
        t.extra = _object(doc, "extra", where)
        t.final = self._final(doc.get("final_metrics"), _at(where, "final_metrics"))
        steps = doc.get("steps")
        if not isinstance(steps, list) or not steps:
            raise ImportFailed(f"{_at(where, 'steps')}: {show(steps)} is missing, empty or not an array")
        t.steps = [self._step(step, f"{_at(where, 'steps')}[{i}]") for i, step in enumerate(steps)]
        self.all.append(t)
        embedded = doc.get("subagent_trajectories")
        if embedded is not None and not isinstance(embedded, list):
            raise ImportFailed(f"{_at(where, 'subagent_trajectories')}: {show(embedded)} is not an array")
        t.embedded = []
        seen = set()
        for i, sub in enumerate(embedded or ()):
            child = self._read(sub, f"{_at(where, 'subagent_trajectories')}[{i}]", None, t)
            if child.trajectory_id is not None and child.trajectory_id in seen:
                self.warnings.append(f"{child.where}: trajectory_id {child.trajectory_id!r} given twice among its "
                                     "siblings; refs find the first")
            seen.add(child.trajectory_id)
            t.embedded.append(child)
        return t

    def _step(self, raw, where: str) -> _Step:
        if not isinstance(raw, dict):
            raise ImportFailed(f"{where}: {show(raw)} is not an object (an ATIF step)")
        self._fields(raw, "step")
        step = _Step()
        step.where = where
        step_id = raw.get("step_id")
        step.step_id = step_id if isinstance(step_id, int) and not isinstance(step_id, bool) else None
        step.timestamp = _text(raw, "timestamp", where)
        step.time = None if step.timestamp is None else _micros(step.timestamp, f"{where}.timestamp")
        step.source = raw.get("source")
        if step.source not in SOURCES:
            raise ImportFailed(f"{where}.source: {show(step.source)} is not one of {', '.join(SOURCES)}")
        step.model = _text(raw, "model_name", where)
        step.message = raw.get("message")
        step.reasoning = raw.get("reasoning_content")
        step.extra = _object(raw, "extra", where)
        copied = raw.get("is_copied_context")
        step.copied = copied is True
        llm_calls = raw.get("llm_call_count")
        if llm_calls is not None and not _count(llm_calls):
            raise ImportFailed(f"{where}.llm_call_count: {show(llm_calls)} is not a whole number >= 0")
        step.llm_calls = llm_calls
        step.calls = []
        calls = raw.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise ImportFailed(f"{where}.tool_calls: {show(calls)} is not an array")
        for i, call in enumerate(calls or ()):
            call_where = f"{where}.tool_calls[{i}]"
            if not isinstance(call, dict):
                raise ImportFailed(f"{call_where}: {show(call)} is not an object (a tool call)")
            self._fields(call, "tool_call")
            for key in ("tool_call_id", "function_name"):
                if not isinstance(call.get(key), str):
                    raise ImportFailed(f"{call_where}.{key}: {show(call.get(key))} is missing or not a string")
            if not call["function_name"]:  # ATIF allows it; a lane named "" is no agent
                self.warnings.append(f"{call_where}.function_name: empty, read as {UNKNOWN_TOOL!r}")
                call = {**call, "function_name": UNKNOWN_TOOL}
            step.calls.append(call)
        step.results = self._observation(raw.get("observation"), f"{where}.observation")
        step.metrics = self._metrics(raw.get("metrics"), f"{where}.metrics")
        return step

    def _observation(self, raw, where: str) -> list[_Result]:
        if raw is None:
            return []
        if not isinstance(raw, dict):
            raise ImportFailed(f"{where}: {show(raw)} is not an object (an observation)")
        self._fields(raw, "observation")
        results = raw.get("results")
        if not isinstance(results, list):
            raise ImportFailed(f"{where}.results: {show(results)} is missing or not an array")
        out = []
        for i, result in enumerate(results):
            result_where = f"{where}.results[{i}]"
            if not isinstance(result, dict):
                raise ImportFailed(f"{result_where}: {show(result)} is not an object (an observation result)")
            self._fields(result, "result")
            refs_raw = result.get("subagent_trajectory_ref")
            if refs_raw is not None and not isinstance(refs_raw, list):
                raise ImportFailed(f"{result_where}.subagent_trajectory_ref: {show(refs_raw)} is not an array")
            refs = []
            for j, r in enumerate(refs_raw or ()):
                ref_where = f"{result_where}.subagent_trajectory_ref[{j}]"
                if not isinstance(r, dict):
                    raise ImportFailed(f"{ref_where}: {show(r)} is not an object (a sub-agent trajectory ref)")
                self._fields(r, "ref")
                trajectory_id, path = _text(r, "trajectory_id", ref_where), _text(r, "trajectory_path", ref_where)
                if trajectory_id is None and path is None:
                    raise ImportFailed(f"{ref_where}: names neither trajectory_id nor trajectory_path (session_id "
                                       "alone does not resolve a sub-agent)")
                refs.append(_Ref(ref_where, trajectory_id, path, _text(r, "session_id", ref_where),
                                 _object(r, "extra", ref_where)))
            out.append(_Result(result_where, _text(result, "source_call_id", result_where), result.get("content"),
                               refs, _object(result, "extra", result_where)))
        return out

    def _metrics(self, raw, where: str) -> dict | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise ImportFailed(f"{where}: {show(raw)} is not an object (step metrics)")
        self._fields(raw, "metrics")
        out = {}
        for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            value = raw.get(key)
            if value is not None:
                out[key] = _token_count(value, f"{where}.{key}")
        extra = _object(raw, "extra", where)
        total = extra.get("total_tokens") if extra else None
        if total is not None:
            out["total_tokens"] = _token_count(total, f"{where}.extra.total_tokens")
        cost = raw.get("cost_usd")
        if cost is not None:
            if not _number(cost):
                raise ImportFailed(f"{where}.cost_usd: {show(cost)} is not a number")
            out["cost_usd"] = cost
        return out

    def _final(self, raw, where: str) -> dict | None:
        if raw is None:
            return None
        if not isinstance(raw, dict):
            raise ImportFailed(f"{where}: {show(raw)} is not an object (final metrics)")
        self._fields(raw, "final_metrics")
        out = {}
        for key in ("total_prompt_tokens", "total_completion_tokens", "total_cached_tokens"):
            value = raw.get(key)
            if value is not None:
                out[key] = _token_count(value, f"{where}.{key}")
        cost = raw.get("total_cost_usd")
        if cost is not None:
            if not _number(cost):
                raise ImportFailed(f"{where}.total_cost_usd: {show(cost)} is not a number")
            out["total_cost_usd"] = cost
        return out

    def _fields(self, raw: dict, kind: str) -> None:
        for key in raw.keys() - FIELDS[kind]:
            self.unknown.add(f"{kind}.{key}" if isinstance(key, str) else f"{kind}.{show(key)}")


def _at(where: str, key: str) -> str:
    """A JSON path below a document's location (`trajectory.json: steps`, `docs[0].steps`)."""
    return f"{where} {key}" if where.endswith(":") else f"{where}.{key}"


def _place(where: str) -> str:
    """A document's location for a message: its file name, or docs[i]."""
    return where.removesuffix(":")


def _basename(path: str) -> str:
    return PurePosixPath(path.split(":")[-1].replace("\\", "/")).name


def _text(raw: dict, key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise ImportFailed(f"{_at(where, key)}: {show(value)} is not a string")
    return value


def _object(raw: dict, key: str, where: str) -> dict | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, dict):
        raise ImportFailed(f"{_at(where, key)}: {show(value)} is not an object")
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and value not in (float("inf"), float("-inf"))


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _token_count(value, where: str) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not _count(value) or value >= MAX_COUNT:
        raise ImportFailed(f"{where}: {show(value)} is not a token count (a whole number >= 0, below 2**53)")
    return value


def _micros(value: str, where: str) -> int:
    """Microseconds since the epoch of an ISO-8601 time (naive times are UTC)."""
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ImportFailed(f"{where}: {show(value)} is not an ISO-8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - EPOCH) // ONE_MICROSECOND


# Building: one trace per root -------------------------------------------------------------------------------

class _Lane:
    """One agent instance: a trajectory (and its continuations) and what its events need to be linked."""

    __slots__ = ("key", "role", "trajectory", "depth", "spawns", "children", "model_steps", "requests",
                 "prompt", "completion", "metered", "end")

    def __init__(self, key: str, role: str, trajectory: _Trajectory, depth: int):
        self.key, self.role, self.trajectory, self.depth = key, role, trajectory, depth
        self.spawns = False
        self.children: list[_Lane] = []
        self.model_steps: list[tuple[int, _Step]] = []  # (event index, step) of its agent steps
        self.requests: list[int] = []  # model steps that asked for a tool or a sub-agent
        self.prompt = self.completion = 0  # tokens its own steps count
        self.metered = False  # whether any of its steps carries a token count
        self.end = 0  # time of its last step


class _Trace:
    """Maps one root trajectory and the sub-agent trajectories it reaches onto one orchestration trace."""

    def __init__(self, upload: _Upload, root: _Trajectory, keep: bool, warnings: list[str]):
        self.upload, self.root, self.keep, self.warnings = upload, root, keep, warnings
        self.b = TraceBuilder()
        self.lanes: list[_Lane] = []
        self.keys: set[str] = set()
        self.walking: set[int] = set()
        self.walked: dict[int, _Lane] = {}
        self.clock: int | None = None  # the last step time met in the walk
        self.timed = False
        self.tool_calls = self.llm_calls = 0
        self.cached: int | None = None
        self.usd: float | None = None
        self.copied = 0

    def build(self) -> dict | None:
        root = self.root
        lane = self._lane(root, None, 0)
        self._walk(root, lane, USER)
        self._final_tokens(lane)
        for each in self.lanes:
            if each.spawns:
                for index in each.requests:
                    self.b.types[index] = "orchestrator_decision"
        if self.copied:
            self.warnings.append(f"{_place(root.where)}: {self.copied} step(s) copied from earlier context "
                                 "(is_copied_context) make no event and count no tokens")
        if not self.timed:
            self.warnings.append(f"{_place(root.where)}: no step has a timestamp: every event is at t = 0, in step "
                                 "order")
        if not self.b.times:
            self.warnings.append(f"{_place(root.where)}: no step that maps to an event; no trace")
            return None
        times = self.b.times
        origin = min(times)
        events, edges = self.b.finish(origin, MICROS_PER_S)
        tokens = sum(self._event_tokens(event) for event in events)
        if tokens >= MAX_TOTAL:
            raise ImportFailed(f"{_place(root.where)}: the steps count {tokens} tokens in all, more than a trace can "
                               "store")
        costs = {"tokens": tokens, "wall_clock_s": (max(times) - origin) / MICROS_PER_S,
                 "tool_calls": self.tool_calls, "messages": self.llm_calls}
        usd = self.usd if self.usd is not None else (root.final or {}).get("total_cost_usd")
        if usd is not None and usd >= 0:
            costs["usd"] = usd
        metrics = {}
        if self.cached is not None:
            metrics["cache_read_input_tokens"] = self.cached
        if root.final and ("total_prompt_tokens" in root.final or "total_completion_tokens" in root.final):
            metrics["reported_total_tokens"] = root.final.get("total_prompt_tokens", 0) + \
                root.final.get("total_completion_tokens", 0)
        identity = self._identity(root)
        extra = root.extra or {}
        task_id = next((value for value in (extra.get("task_id"), extra.get("task_name"), extra.get("task"),
                                            root.session_id, root.trajectory_id)
                        if isinstance(value, str) and value), identity)
        system = " ".join(part for part in (root.agent_name, root.agent_version) if part)
        return {
            "trace_id": identity if identity.startswith(TRACE_ID_PREFIX) else TRACE_ID_PREFIX + identity,
            "task_id": task_id,
            "system": f"{system} ({root.version})",
            "topology": topology(max(each.depth for each in self.lanes)),
            "events": events,
            "edges": edges,
            "rewards": self._rewards(extra, root.where),
            "costs": costs,
            "metrics": metrics,
        }

    def _identity(self, root: _Trajectory) -> str:
        """The trace id's body: the root's session_id, else its trajectory_id, else its document's hash (also
        when the id cannot name a trace: a trace id is part of URLs and file names)."""
        digest = ref(root.doc).removeprefix("sha256:")
        for key, value in (("session_id", root.session_id), ("trajectory_id", root.trajectory_id)):
            if value:
                problem = trace_id_error(value if value.startswith(TRACE_ID_PREFIX) else TRACE_ID_PREFIX + value)
                if problem is None:
                    return value
                self.warnings.append(f"{_at(root.where, key)}: cannot name a trace ({problem}); the document's "
                                     f"hash {digest} does")
                return digest
        return digest

    # lanes and the walk ----------------------------------------------------------------------------------

    def _lane(self, trajectory: _Trajectory, parent: _Lane | None, depth: int, alias: str | None = None) -> _Lane:
        name = alias or trajectory.agent_name
        if parent is None:
            key, role = name, LEAD_ROLE
        else:
            instance = trajectory.trajectory_id or trajectory.session_id or \
                (_basename(trajectory.name).removesuffix(".json") if trajectory.name else None) or \
                str(len(self.lanes))
            key, role = (instance if instance.startswith(name + "#") else f"{name}#{instance}"), name
        unique, n = key, 1
        while unique in self.keys or unique in (USER, SYSTEM, ENVIRONMENT):
            n += 1
            unique = f"{key}-{n}"
        self.keys.add(unique)
        lane = _Lane(unique, role, trajectory, depth)
        self.lanes.append(lane)
        self.walked[id(trajectory)] = lane
        if parent is not None:
            parent.children.append(lane)
        return lane

    def _time(self, step: _Step) -> int:
        if step.time is not None:
            self.timed = True
            self.clock = step.time
        return self.clock if self.clock is not None else 0

    def _walk(self, trajectory: _Trajectory, lane: _Lane, prompter: str) -> None:
        """Every step of a trajectory and of its continuations, sub-agents inside the steps that spawn them."""
        pending: list[tuple[int, str]] = []  # events to link into the lane's next model step
        node, chain = trajectory, [trajectory]
        while node is not None:
            self.walking.add(id(node))
            for step in node.steps:
                if step.copied:
                    self.copied += 1
                    continue
                self._step(step, node, lane, prompter, pending)
            self._unreferenced(node, lane)
            node = self._continuation(node, chain)
        self.walking.difference_update(id(node) for node in chain)

    def _continuation(self, node: _Trajectory, chain: list[_Trajectory]) -> _Trajectory | None:
        """The file that continues a trajectory (`continued_trajectory_ref`), appended to `chain`; None at the end."""
        if node.continued is None:
            return None
        following = self.upload.by_file.get(_basename(node.continued))
        if following is None:
            self.warnings.append(f"{_at(node.where, 'continued_trajectory_ref')}: the continuation "
                                 f"{node.continued!r} is not in the upload; the trajectory ends here")
            return None
        if any(following is each for each in chain) or id(following) in self.walked:
            raise ImportFailed(f"{_at(node.where, 'continued_trajectory_ref')}: {node.continued!r} continues a "
                               "trajectory already read (a cycle of continuations)")
        chain.append(following)
        self.walked[id(following)] = self.walked[id(node)]
        return following

    def _step(self, step: _Step, trajectory: _Trajectory, lane: _Lane, prompter: str,
              pending: list[tuple[int, str]]) -> None:
        time = self._time(step)
        lane.end = max(lane.end, time)
        b = self.b
        if step.source == "agent":
            index = self._model_step(step, trajectory, lane, time)
            for src, type_ in pending:
                b.link(src, index, type_)
            pending.clear()
        else:
            sender = prompter if step.source == "user" else SYSTEM
            props = {"role": USER if sender == USER else SYSTEM if sender == SYSTEM else self._role_of(sender),
                     "from": sender, "to": lane.key}
            self._content(props, step.message)
            index = b.add(time, "message", sender, self._tag(props, step, trajectory, own=True))
            pending.append((index, "message"))
        self._observation(step, trajectory, lane, index, time, pending)

    def _model_step(self, step: _Step, trajectory: _Trajectory, lane: _Lane, time: int) -> int:
        model = step.model or trajectory.model
        props = {"role": lane.role, "from": lane.key}
        if model:
            props["to"] = model
        parts = []
        if isinstance(step.reasoning, str) and step.reasoning:
            parts.append({"type": "reasoning", "content": step.reasoning})
        if isinstance(step.message, str):
            if step.message:
                parts.append({"type": "text", "content": step.message})
        elif isinstance(step.message, list):
            parts += step.message
        elif step.message is not None:
            parts.append(step.message)
        parts += [{"type": "tool_call", "id": call["tool_call_id"], "name": call["function_name"],
                   "arguments": call.get("arguments")} for call in step.calls]
        self._content(props, {"output": {"role": "assistant", "parts": parts}} if parts else None)
        if model:
            props["model"] = model
        metrics = step.metrics or {}
        lane.metered |= bool({"prompt_tokens", "completion_tokens", "total_tokens"} & metrics.keys())
        if "prompt_tokens" in metrics:
            props["tokens_in"] = metrics["prompt_tokens"]
            lane.prompt += metrics["prompt_tokens"]
        if "completion_tokens" in metrics:
            props["tokens_out"] = metrics["completion_tokens"]
            lane.completion += metrics["completion_tokens"]
        if "total_tokens" in metrics and "prompt_tokens" not in metrics and "completion_tokens" not in metrics:
            props["tokens"] = metrics["total_tokens"]
            lane.completion += metrics["total_tokens"]
        if "cached_tokens" in metrics:
            props["cached_tokens"] = metrics["cached_tokens"]
            self.cached = (self.cached or 0) + metrics["cached_tokens"]
        if "cost_usd" in metrics:
            props["cost_usd"] = metrics["cost_usd"]
            self.usd = (self.usd or 0) + metrics["cost_usd"]
        if step.llm_calls is not None:
            props["llm_call_count"] = step.llm_calls
        self.llm_calls += 1 if step.llm_calls is None else step.llm_calls
        index = self.b.add(time, "message", lane.key, self._tag(props, step, trajectory, own=True))
        lane.model_steps.append((index, step))
        if step.calls or any(result.refs for result in step.results):
            lane.requests.append(index)
        return index

    def _observation(self, step: _Step, trajectory: _Trajectory, lane: _Lane, index: int, time: int,
                     pending: list[tuple[int, str]]) -> None:
        """Tool calls, their results, and the sub-agents each result names."""
        b = self.b
        calls = {call["tool_call_id"]: call for call in step.calls}
        delegating = {result.call_id for result in step.results if result.refs and result.call_id in calls}
        call_events = {}
        model_step = step.source == "agent"
        for call in step.calls:
            if call["tool_call_id"] in delegating:
                continue
            props = {"role": lane.role, "tool": call["function_name"], "tool_call_id": call["tool_call_id"]}
            self._content(props, call.get("arguments"))
            event = b.add(time, "tool_call", lane.key, self._tag(props, step, trajectory))
            self.tool_calls += 1
            if model_step:
                b.link(index, event, "causal")
            call_events.setdefault(call["tool_call_id"], event)
        for result in step.results:
            call = calls.get(result.call_id) if result.call_id is not None else None
            if result.call_id is not None and call is None:
                self.warnings.append(f"{result.where}.source_call_id: {result.call_id!r} is not a tool call of its "
                                     "step; read as the environment's answer")
            if result.refs:
                self._delegation(result, call, step, trajectory, lane, index if model_step else None, time, pending)
                continue
            tool = call["function_name"] if call is not None else ENVIRONMENT
            props = {"tool": tool}
            if call is not None:
                props["tool_call_id"] = result.call_id
            self._content(props, result.content)
            event = b.add(time, "tool_result", tool, self._tag(props, step, trajectory, result.where))
            if call is not None and result.call_id in call_events:
                b.link(call_events[result.call_id], event, "tool_dependency")
            pending.append((event, "causal"))

    def _delegation(self, result: _Result, call: dict | None, step: _Step, trajectory: _Trajectory, lane: _Lane,
                    model_index: int | None, time: int, pending: list[tuple[int, str]]) -> None:
        b = self.b
        lane.spawns = True
        returns = []
        for n, r in enumerate(result.refs):
            child = self.upload.resolve(r, trajectory)
            if child is not None and id(child) in self.walking:
                raise ImportFailed(f"{r.where}: {r.named()} is a trajectory that contains this step (a cycle of "
                                   "sub-agent refs)")
            known = self.walked.get(id(child)) if child is not None else None
            if known is not None:
                self.warnings.append(f"{r.where}: {r.named()} was spawned already; its steps are read once")
            if child is None:
                name = (r.extra or {}).get("agent_name") if isinstance((r.extra or {}).get("agent_name"), str) else None
                child_key = f"{name or 'subagent'}#{r.trajectory_id or _basename(r.path or '')}"
                child_lane, child_role = None, name or "subagent"
            else:
                alias = (r.extra or {}).get("agent_name")
                child_lane = known or self._lane(child, lane, lane.depth + 1, alias if isinstance(alias, str) and alias
                                                 else None)
                child_key, child_role = child_lane.key, child_lane.role
            props = {"role": lane.role, "to": child_key, "child_role": child_role}
            if call is not None:
                props.update({"tool": call["function_name"], "tool_call_id": call["tool_call_id"]})
                if n == 0:
                    self._content(props, call.get("arguments"))
            if child is None:
                props["missing_trajectory"] = r.path or r.trajectory_id
            if r.session_id is not None:
                props["child_session_id"] = r.session_id
            spawn = b.add(time, "spawn", lane.key, self._tag(props, step, trajectory, r.where))
            if model_index is not None:
                b.link(model_index, spawn, "causal")
            if child_lane is None or known is not None:
                if child_lane is not None:
                    b.link_to_first(spawn, child_lane.key, "spawn")
                continue
            b.link_to_first(spawn, child_lane.key, "spawn")
            self.clock = time if self.clock is None else max(self.clock, time)
            self._walk(child, child_lane, lane.key)
            end = max(child_lane.end, time)
            props = {"role": child_lane.role, "from": child_lane.key, "to": lane.key}
            if len(result.refs) == 1:
                self._content(props, result.content)
            self._child_rewards(props, child)
            returns.append(b.add(end, "return", child_lane.key, self._tag(props, step, trajectory, result.where)))
            self.clock = max(self.clock or 0, end)
        if not returns:
            return
        if len(result.refs) == 1:
            pending.append((returns[0], "return"))
            return
        props = {"role": lane.role, "inputs": len(returns)}
        self._content(props, result.content)
        end = max(b.times[i] for i in returns)
        aggregate = b.add(end, "aggregate", lane.key, self._tag(props, step, trajectory, result.where))
        for returned in returns:
            b.link(returned, aggregate, "aggregate")
        pending.append((aggregate, "causal"))

    def _unreferenced(self, trajectory: _Trajectory, lane: _Lane) -> None:
        """Embedded trajectories no ref named: spawned by their parent at their first step."""
        for child in trajectory.embedded:
            if id(child) in self.walked:
                continue
            self.warnings.append(f"{child.where}: no step refers to this sub-agent trajectory; it is spawned by its "
                                 "parent at its first step")
            first = next((s.time for s in child.steps if s.time is not None), None)
            time = first if first is not None else (self.clock or 0)
            child_lane = self._lane(child, lane, lane.depth + 1)
            lane.spawns = True
            props = {"role": lane.role, "to": child_lane.key, "child_role": child_lane.role, "unreferenced": True}
            spawn = self.b.add(time, "spawn", lane.key, props)
            self.b.link_to_first(spawn, child_lane.key, "spawn")
            self._walk(child, child_lane, lane.key)
            props = {"role": child_lane.role, "from": child_lane.key, "to": lane.key}
            self._child_rewards(props, child)
            self.b.add(max(child_lane.end, time), "return", child_lane.key, props)

    def _role_of(self, key: str) -> str:
        return next((lane.role for lane in self.lanes if lane.key == key), key)

    # tokens, rewards, content --------------------------------------------------------------------------------

    def _final_tokens(self, lane: _Lane) -> tuple[int, int]:
        """Tokens of a lane and of the sub-agents below it, (prompt, completion), counting a trajectory's
        final_metrics only where its steps carry none (module docstring)."""
        below_prompt = below_completion = 0
        for child in lane.children:
            prompt, completion = self._final_tokens(child)
            below_prompt += prompt
            below_completion += completion
        final = lane.trajectory.final or {}
        reported = ("total_prompt_tokens" in final or "total_completion_tokens" in final)
        f_prompt, f_completion = final.get("total_prompt_tokens", 0), final.get("total_completion_tokens", 0)
        if lane.metered and reported and not self.upload.missing:
            own, total = lane.prompt + lane.completion, f_prompt + f_completion
            if total not in (own, own + below_prompt + below_completion):
                self.warnings.append(f"{_at(lane.trajectory.where, 'final_metrics')}: its total {total} matches "
                                     f"neither its steps ({own}) nor its steps and sub-agents "
                                     f"({own + below_prompt + below_completion}); the steps' counts are kept")
        elif reported and lane.model_steps:
            if (below_prompt or below_completion) and f_prompt >= below_prompt and f_completion >= below_completion:
                f_prompt, f_completion = f_prompt - below_prompt, f_completion - below_completion
            index = lane.model_steps[-1][0]
            props = self.b.props[index]
            props.update({"tokens_in": f_prompt, "tokens_out": f_completion, "tokens_from": "final_metrics"})
            lane.prompt, lane.completion = f_prompt, f_completion
        elif reported:
            self.warnings.append(f"{_at(lane.trajectory.where, 'final_metrics')}: a trajectory without agent steps; "
                                 "its totals are not counted")
        return lane.prompt + below_prompt, lane.completion + below_completion

    @staticmethod
    def _event_tokens(event: dict) -> int:
        return event.get("tokens_in", 0) + event.get("tokens_out", 0) + event.get("tokens", 0)

    def _rewards(self, extra: dict, where: str) -> dict:
        rewards = {}
        named = extra.get("rewards")
        if isinstance(named, dict):
            for name, value in named.items():
                if _number(value):
                    rewards[str(name)] = value
                else:
                    self.warnings.append(f"{_at(where, 'extra')}.rewards.{name}: {show(value)} is not a number; "
                                         "skipped")
        elif named is not None:
            self.warnings.append(f"{_at(where, 'extra')}.rewards: {show(named)} is not an object of numbers; skipped")
        single = extra.get("reward")
        if _number(single):
            rewards.setdefault("reward", single)
        elif single is not None:
            self.warnings.append(f"{_at(where, 'extra')}.reward: {show(single)} is not a number; skipped")
        return rewards

    def _child_rewards(self, props: dict, child: _Trajectory) -> None:
        extra = child.extra or {}
        if "reward" not in extra and "rewards" not in extra:
            return
        rewards = self._rewards(extra, child.where)
        if "reward" in rewards:
            props["reward"] = rewards.pop("reward")
        if rewards:
            props["rewards"] = rewards

    @staticmethod
    def _tag(props: dict, step: _Step, trajectory: _Trajectory, where: str | None = None, own: bool = False) -> dict:
        """props with the source identifiers of the step added; the step's own event (`own`) also keeps its
        timestamp (its t is that time) and its reward."""
        if step.step_id is not None:
            props["step_id"] = step.step_id
        if own and step.timestamp is not None:
            props["timestamp"] = step.timestamp
        if trajectory.trajectory_id is not None:
            props["trajectory_id"] = trajectory.trajectory_id
        props["atif_path"] = where or step.where
        reward = (step.extra or {}).get("reward")
        if own and _number(reward):
            props["reward"] = reward
        return props

    def _content(self, props: dict, value) -> None:
        """The hash of `value` onto an event's properties, and, unless the policy is hash, `value` itself."""
        if value is None or value == "" or value == []:
            return
        props["content_ref"] = ref(value)
        if self.keep:
            put_content(props, value)


def _convert(batch: Batch, content_policy: ContentPolicy) -> ImportResult:
    """Every trajectory document of the upload together: sub-agents' files are named by path from the main one."""
    documents = [(upload.source, doc) for upload, records in batch.documents for doc in records]
    return import_atif([doc for _, doc in documents], content_policy, [source for source, _ in documents])


FORMAT = Format("atif", "ATIF trajectories (Harbor, Terminal-Bench), with the sub-agent files they name",
                looks_like_atif, _convert, 30)
