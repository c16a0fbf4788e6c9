"""A stored trace as ATIF-v1.8 (Harbor's Agent Trajectory Interchange Format), one document per trace.

One root trajectory, with every sub-agent's trajectory embedded in its spawner's `subagent_trajectories` and
named by `trajectory_id` from the spawning step (ATIF's embedded form): one self-contained file, which
harbor's models validate whole and the ATIF importer reads back. Any valid trace exports; a trace imported
from ATIF exports to the same agents, steps and tokens.

- Agents: each agent that acts (not a tool answering, not `user` or `system`), and each agent an agent spawns,
  has a trajectory (one that never acts has a single empty step, `llm_call_count: 0`). The root is
  the earliest agent no one spawns; an agent's trajectory sits under the agent that first spawns it; agents
  no one reaches that way sit under the root, named by no step. The root's `agent.name` is its agent id;
  a sub-agent's is its role (else its id up to `#`) and its `trajectory_id` its agent id. `agent.version` is
  the trace's `system`; each trajectory shares the trace id as `session_id` (one run).
- Steps, in time order, each `timestamp` the run's start plus the event's t (the start is recovered from an
  event that kept its source `timestamp`, as the ATIF importer keeps it; else 1970-01-01): a model call or
  an agent's own act becomes an `agent` step (tokens_in/tokens_out as prompt/completion tokens, `tokens`
  alone as `metrics.extra.total_tokens`; an act that is no model call, such as an aggregate or a despawn,
  has `llm_call_count: 0`); a message to an agent from a person, or from another agent without tokens of
  its own, is a `user` step of the receiver; `system` messages and safety events are `system` steps.
- A tool_call is a tool call of its agent's latest agent step (a new one, `llm_call_count: 0`, when the
  latest step is not an agent's); its tool_result, found by its `tool_dependency` edge, an observation result
  answering it. A spawn is a tool call too (its `tool`, else `spawn_agent`; spawns sharing a `tool_call_id`
  are one call) whose result names the sub-agent's trajectory (`subagent_trajectory_ref`) and holds what its
  `return` carried; a spawn without a call id names it from a result of the step it happened in, as ATIF
  writes a delegation without a tool call. An `aggregate` fed by the returns of one call's spawns is that
  result's content.
- Message text, reasoning, arguments and results come from each event's `content` where it was kept (a
  model call's `{"output": ...}` parts, text, or JSON text of anything else), else its `summary`.
- `final_metrics` of each trajectory count its own steps only: sub-agents' tokens are in their own
  trajectories (the root's `notes` say so). The root's `extra` holds the task id, the rewards and the
  trace's costs, metrics and topology; every step's and result's `extra.orchestrace` the event ids they
  come from, and a step the event's numeric `reward`.
"""

import json
import re
from collections import defaultdict
from datetime import datetime, timedelta, timezone

from app.domain.metrics import is_team_act

SCHEMA_VERSION = "ATIF-v1.8"
USER, SYSTEM = "user", "system"
SPAWN_TOOL = "spawn_agent"
UNKNOWN_VERSION = "unknown"
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
SYSTEM_TYPES = ("safety_event",)
PERSON_TYPES = ("human_intervention",)
FOLDED_INTO_CALLS = ("tool_call", "spawn")
NOT_MODEL_CALLS = ("aggregate", "despawn", "return", "spawn", "tool_call", "tool_result")
MODEL_CALL_SIDES = frozenset({"system", "input", "output"})  # a model call's content, as the importers keep it
TEXT_TYPES = frozenset({"text", "output_text"})
REASONING_TYPES = frozenset({"reasoning", "thinking"})
CALL_TYPES = frozenset({"tool_call", "tool_use", "function_call"})  # written as the step's tool calls instead
STEP_KEYS = ("step_id", "timestamp", "source", "model_name", "message", "reasoning_content", "tool_calls",
             "observation", "metrics", "llm_call_count", "extra")  # in the order harbor writes them
RESULT_KEYS = ("source_call_id", "content", "subagent_trajectory_ref", "extra")
ATIF_SUFFIX = re.compile(r" \(ATIF-[^)]*\)$")  # the schema version the ATIF importer adds to `system`
NOTES = "final_metrics count each trajectory's own steps; sub-agents' tokens are in their own trajectories."


def to_atif(trace: dict) -> dict:
    """The trace as one ATIF-v1.8 root trajectory, sub-agents embedded (see the module docstring)."""
    return _Export(trace).document()


class _Trajectory:
    """One agent's trajectory in the making."""

    def __init__(self, key: str, role: str):
        self.key, self.role = key, role
        self.steps: list[dict] = []
        self.children: list[_Trajectory] = []
        self.model: str | None = None

    def agent_step(self, time: str | None, ids: dict, dispatch: bool) -> dict:
        """A new agent step; `dispatch` marks one that is no model call (llm_call_count 0)."""
        step = _step(time, "agent", "", ids)
        if dispatch:
            step["llm_call_count"] = 0
        self.steps.append(step)
        return step

    def current_agent_step(self, time: str | None, ids: dict) -> dict:
        if self.steps and self.steps[-1]["source"] == "agent":
            return self.steps[-1]
        return self.agent_step(time, ids, dispatch=True)


class _Export:
    def __init__(self, trace: dict):
        self.trace = trace
        order = sorted(range(len(trace["events"])), key=lambda i: (_seconds(trace["events"][i].get("t")), i))
        self.events = [trace["events"][i] for i in order]
        self.by_id = {event["id"]: event for event in self.events}
        self.into: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
        self.out: dict[str, list[str]] = defaultdict(list)
        for edge in trace.get("edges", ()):
            self.into[edge["dst"]][edge["type"]].append(edge["src"])
            self.out[edge["src"]].append(edge["dst"])
        self.origin = _origin(self.events)
        self.lanes: dict[str, _Trajectory] = {}
        self.root: _Trajectory | None = None
        self.calls: dict[str, tuple[dict, dict]] = {}  # tool_call event id -> (step, its tool call)
        self.group_results: dict[tuple[str, str], dict] = {}  # (agent, tool_call_id) -> a delegation's result
        self.last_spawn: dict[str, dict] = {}  # agent -> the result of the latest spawn that started it
        self.return_results: dict[str, dict] = {}  # return event id -> the result it went into

    def document(self) -> dict:
        self._lanes()
        for event in self.events:
            self._place(event)
        return self._trajectory(self.root, is_root=True)

    # agents ---------------------------------------------------------------------------------------------------

    def _lanes(self) -> None:
        """A trajectory per acting agent, each under the agent that first spawned it (or the root)."""
        order: list[str] = []
        spawner: dict[str, str] = {}
        roles: dict[str, str] = {}
        for event in self.events:
            agent = event["agent"]
            if is_team_act(event) and agent not in (USER, SYSTEM) and agent not in roles:
                order.append(agent)
                roles[agent] = ""
            if agent in roles and not roles[agent] and isinstance(event.get("role"), str) and event["role"]:
                roles[agent] = event["role"]
            child = event.get("to")
            if event["type"] == "spawn" and agent in roles and isinstance(child, str) and child \
                    and child not in roles and child not in (USER, SYSTEM):
                order.append(child)  # spawned, and maybe never acting: a trajectory all the same
                roles[child] = event["child_role"] if isinstance(event.get("child_role"), str) else ""
        for event in self.events:
            child = event.get("to")
            if event["type"] == "spawn" and isinstance(child, str) and child in roles and child not in spawner \
                    and event["agent"] in roles and event["agent"] != child:
                spawner[child] = event["agent"]
        if not order:  # only tool answers or people: the first agent named carries the steps
            order = [self.events[0]["agent"]]
            roles[order[0]] = ""
        for key in order:
            self.lanes[key] = _Trajectory(key, roles[key] or key.split("#")[0] or key)
        root_key = next((key for key in order if key not in spawner), order[0])
        self.root = self.lanes[root_key]
        placed, queue = {root_key}, [root_key]
        while len(placed) < len(order):
            while queue:
                parent = queue.pop(0)
                for key in order:
                    if key not in placed and spawner.get(key) == parent:
                        self.lanes[parent].children.append(self.lanes[key])
                        placed.add(key)
                        queue.append(key)
            orphan = next((key for key in order if key not in placed), None)
            if orphan is not None:  # spawned by no agent, or within a cycle of spawns: under the root
                self.root.children.append(self.lanes[orphan])
                placed.add(orphan)
                queue.append(orphan)

    def _lane(self, agent) -> _Trajectory:
        return self.lanes.get(agent, self.root)

    # events to steps ---------------------------------------------------------------------------------------------

    def _place(self, event: dict) -> None:
        kind, agent = event["type"], event["agent"]
        time, ids = self._timestamp(event), {"event_id": event["id"], "type": kind}
        metered = _has_tokens(event) and agent in self.lanes and kind != "tool_result"
        if metered:  # a model call, whatever else the event is: its own agent step keeps its tokens
            self._act(event, time, ids)
        if kind == "tool_result":
            self._tool_result(event, time, ids)
        elif kind == "return":
            if not self._returned(event) and not metered:
                self._act(event, time, ids)
        elif kind == "aggregate":
            if not metered and not self._aggregated(event):
                self._act(event, time, ids)
        elif kind == "tool_call" and agent in self.lanes:
            self._tool_call(event, time, ids)
        elif kind == "spawn" and agent in self.lanes:
            self._spawn(event, time, ids)
        elif metered:
            return
        elif agent not in self.lanes or kind in PERSON_TYPES or self._heard(event):
            receiver = event.get("to") if event.get("to") in self.lanes else agent
            source = SYSTEM if agent == SYSTEM or kind in SYSTEM_TYPES else USER
            self._lane(receiver).steps.append(self._said(event, source, time, ids))
        elif kind in SYSTEM_TYPES:
            self._lane(agent).steps.append(self._said(event, SYSTEM, time, ids))
        else:
            self._act(event, time, ids)

    def _heard(self, event: dict) -> bool:
        """A message from one agent to another that is no model call of the sender's: the receiver's prompt."""
        to = event.get("to")
        return event["type"] == "message" and to in self.lanes and to != event["agent"] and not _has_tokens(event)

    def _said(self, event: dict, source: str, time: str | None, ids: dict) -> dict:
        if event["agent"] not in (USER, SYSTEM):
            ids = {**ids, "from": event["agent"]}
        step = _step(time, source, _message(event)[0], ids)
        if _number(event.get("reward")):
            step["extra"]["reward"] = event["reward"]
        return step

    def _act(self, event: dict, time: str | None, ids: dict) -> None:
        lane = self._lane(event["agent"])
        model_call = event["type"] not in NOT_MODEL_CALLS or _has_tokens(event)
        step = lane.agent_step(time, ids, dispatch=not model_call)
        if event["type"] in FOLDED_INTO_CALLS:  # its content is the call's arguments: the step says its summary
            message, reasoning = (event["summary"] if isinstance(event.get("summary"), str) else ""), None
        else:
            message, reasoning = _message(event)
        step["message"] = message
        if model_call:
            if reasoning:
                step["reasoning_content"] = reasoning
            metrics = _metrics(event)
            if metrics:
                step["metrics"] = metrics
            model = event.get("model")
            if isinstance(model, str) and model:
                step["model_name"] = model
                lane.model = lane.model or model
        if _number(event.get("reward")):
            step["extra"]["reward"] = event["reward"]

    def _tool_call(self, event: dict, time: str | None, ids: dict) -> None:
        step = self._lane(event["agent"]).current_agent_step(time, ids)
        call = _call(event, event.get("tool"))
        step.setdefault("tool_calls", []).append(call)
        self.calls[event["id"]] = (step, call)

    def _tool_result(self, event: dict, time: str | None, ids: dict) -> None:
        result = {"extra": {"orchestrace": ids}}
        content = _result_content(event)
        if content is not None:
            result["content"] = content
        called = next((self.calls[src] for src in self.into[event["id"]].get("tool_dependency", ())
                       if src in self.calls), None)
        if called is not None:
            step, call = called
            result["source_call_id"] = call["tool_call_id"]
        else:  # an answer no call of ours asked for: on the step of the agent it feeds, else the root's
            fed = next((self.by_id[dst]["agent"] for dst in self.out[event["id"]] if dst in self.by_id), None)
            lane = self._lane(fed)
            step = lane.steps[-1] if lane.steps else lane.agent_step(time, ids, dispatch=True)
        _observe(step, result)

    def _spawn(self, event: dict, time: str | None, ids: dict) -> None:
        lane = self._lane(event["agent"])
        child = self.lanes.get(event.get("to"))
        call_id = event.get("tool_call_id") if isinstance(event.get("tool_call_id"), str) else None
        group = (event["agent"], call_id) if call_id else None
        result = self.group_results.get(group) if group else None
        if result is None:
            result = {"extra": {"orchestrace": {"spawns": []}}}
            if call_id or child is None:
                step = lane.current_agent_step(time, ids)
                call = _call(event, event.get("tool") or SPAWN_TOOL)
                step.setdefault("tool_calls", []).append(call)
                result["source_call_id"] = call["tool_call_id"]
            else:
                step = lane.steps[-1] if lane.steps else lane.agent_step(time, ids, dispatch=True)
            _observe(step, result)
            if group:
                self.group_results[group] = result
        result["extra"]["orchestrace"]["spawns"].append(event["id"])
        if child is not None:
            result.setdefault("subagent_trajectory_ref", []).append(
                {"trajectory_id": child.key, "extra": {"agent_name": child.role}})
        if isinstance(event.get("to"), str):
            self.last_spawn[event["to"]] = result

    def _returned(self, event: dict) -> bool:
        """A return into the result of the spawn that started its agent (the latest one before it)."""
        result = self.last_spawn.get(event["agent"])
        if result is None:
            return False
        self.return_results[event["id"]] = result
        result["extra"]["orchestrace"].setdefault("returns", []).append(event["id"])
        if len(result.get("subagent_trajectory_ref", ())) <= 1 and "content" not in result:
            content = _result_content(event)
            if content is not None:
                result["content"] = content
        return True

    def _aggregated(self, event: dict) -> bool:
        """An aggregate fed only by the returns of one delegation's spawns: that result's content."""
        feeding = [src for kind in ("aggregate", "return") for src in self.into[event["id"]].get(kind, ())]
        results = {id(self.return_results.get(src)): self.return_results.get(src) for src in feeding}
        if len(results) != 1 or None in results.values() or not feeding:
            return False
        result = next(iter(results.values()))
        result["extra"]["orchestrace"]["aggregate"] = event["id"]
        content = _result_content(event)
        if content is not None:
            result["content"] = content
        return True

    def _timestamp(self, event: dict) -> str | None:
        try:
            moment = self.origin + timedelta(seconds=_seconds(event.get("t")))
        except OverflowError:
            return None
        return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")

    # documents -------------------------------------------------------------------------------------------------

    def _trajectory(self, lane: _Trajectory, is_root: bool) -> dict:
        trace = self.trace
        steps = lane.steps or [_step(None, "agent", "", {"agent": lane.key})]
        if not lane.steps:
            steps[0]["llm_call_count"] = 0
        for number, step in enumerate(steps, 1):
            step["step_id"] = number
        steps = [{key: step[key] for key in STEP_KEYS if key in step} for step in steps]
        for step in steps:
            if "observation" in step:
                step["observation"]["results"] = [{key: result[key] for key in RESULT_KEYS if key in result}
                                                  for result in step["observation"]["results"]]
        agent = {"name": lane.key if is_root else lane.role, "version": _version(trace.get("system"), self.root.key)}
        if lane.model:
            agent["model_name"] = lane.model
        doc = {"schema_version": SCHEMA_VERSION, "session_id": trace["trace_id"], "trajectory_id":
               trace["trace_id"] if is_root else lane.key, "agent": agent, "steps": steps,
               "final_metrics": _final_metrics(steps)}
        if is_root:
            doc["notes"] = NOTES
            doc["extra"] = {"task_id": trace["task_id"], "rewards": dict(trace.get("rewards") or {}),
                            "orchestrace": {key: trace[key] for key in ("trace_id", "topology", "costs", "metrics")
                                            if key in trace}}
        if lane.children:
            doc["subagent_trajectories"] = [self._trajectory(child, False) for child in lane.children]
        return doc


def _version(system, root: str) -> str:
    """The agent version in a trace's `system`: what follows the root agent's name, without the schema version
    the ATIF importer adds (`coordinator 1.0.0 (ATIF-v1.8)` -> `1.0.0`); the whole system otherwise."""
    if not isinstance(system, str) or not system:
        return UNKNOWN_VERSION
    version = ATIF_SUFFIX.sub("", system)
    version = version.removeprefix(root + " ") if version != root else ""
    return version or UNKNOWN_VERSION


def _step(time: str | None, source: str, message, ids: dict) -> dict:
    step = {"step_id": 0, "source": source, "message": message, "extra": {"orchestrace": ids}}
    if time is not None:
        step["timestamp"] = time
    return step


def _observe(step: dict, result: dict) -> None:
    step.setdefault("observation", {"results": []})["results"].append(result)


def _call(event: dict, tool) -> dict:
    call_id = event.get("tool_call_id")
    content = event.get("content")
    arguments = content if isinstance(content, dict) else {} if content is None else {"input": content}
    return {"tool_call_id": call_id if isinstance(call_id, str) and call_id else event["id"],
            "function_name": tool if isinstance(tool, str) and tool else "tool", "arguments": arguments,
            "extra": {"orchestrace": {"event_id": event["id"], "type": event["type"]}}}


def _metrics(event: dict) -> dict:
    metrics, extra = {}, {}
    for key, field in (("tokens_in", "prompt_tokens"), ("tokens_out", "completion_tokens"),
                       ("cached_tokens", "cached_tokens")):
        value = event.get(key)
        if _whole(value):
            metrics[field] = int(value)
        elif _number(value):
            extra[key] = value
    if _whole(event.get("tokens")) and "prompt_tokens" not in metrics and "completion_tokens" not in metrics:
        extra["total_tokens"] = int(event["tokens"])
    if _number(event.get("cost_usd")):
        metrics["cost_usd"] = float(event["cost_usd"])
    if extra:
        metrics["extra"] = extra
    return metrics


def _final_metrics(steps: list[dict]) -> dict:
    metered = [step["metrics"] for step in steps if "metrics" in step]
    final = {"total_steps": len(steps)}
    for field, total in (("prompt_tokens", "total_prompt_tokens"), ("completion_tokens", "total_completion_tokens"),
                         ("cached_tokens", "total_cached_tokens")):
        if any(field in metrics for metrics in metered):
            final[total] = sum(metrics.get(field, 0) for metrics in metered)
    if any("cost_usd" in metrics for metrics in metered):
        final["total_cost_usd"] = sum(metrics.get("cost_usd", 0.0) for metrics in metered)
    return final


def _message(event: dict) -> tuple[str | list, str | None]:
    """An event's text for a step's message, as ATIF takes it (text, or text content parts), and its reasoning."""
    content = event.get("content")
    if isinstance(content, dict) and "output" in content and content.keys() <= MODEL_CALL_SIDES:
        return _model_output(content["output"])
    if content is None or content == "":
        summary = event.get("summary")
        return (summary if isinstance(summary, str) else ""), None
    return _text_or_parts(content), None


def _model_output(output) -> tuple[str | list, str | None]:
    """What a model answered, in the shapes the importers keep (GenAI parts, as the ATIF importer writes them;
    chat and Anthropic messages; text): its text, or its text content parts, and its reasoning. Anything else
    is its JSON text."""
    texts, content_parts, reasoning, unread = [], [], [], False
    for message in output if isinstance(output, list) else [output]:
        blocks = message
        if isinstance(message, dict):
            blocks = message.get("parts") if isinstance(message.get("parts"), list) else message.get("content")
        for block in blocks if isinstance(blocks, list) else [blocks]:
            if isinstance(block, str):
                texts.append(block)
            elif not isinstance(block, dict):
                unread |= block is not None
            elif block.get("type") in REASONING_TYPES:
                text = next((block[key] for key in ("content", "thinking", "text") if isinstance(block.get(key), str)),
                            None)
                unread |= text is None
                reasoning += [text] if text else []
            elif block.get("type") in TEXT_TYPES and isinstance(block.get("content"), str):
                texts.append(block["content"])
            elif block.get("type") in TEXT_TYPES and isinstance(block.get("text"), str):
                content_parts.append({"type": "text", "text": block["text"]})
            elif block.get("type") not in CALL_TYPES:
                unread = True
    if unread and not texts and not content_parts:
        return json.dumps(output, ensure_ascii=False, default=str), ("\n".join(reasoning) or None)
    message = content_parts if content_parts and not texts else "\n".join(texts)
    return message, ("\n".join(reasoning) or None)


def _text_or_parts(content) -> str | list:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(
            isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
            for part in content):
        return [{"type": "text", "text": part["text"]} for part in content]
    return json.dumps(content, ensure_ascii=False, default=str)


def _result_content(event: dict):
    content = event.get("content")
    if content is None or content == "":
        summary = event.get("summary")
        return summary if isinstance(summary, str) and summary else None
    return _text_or_parts(content)


def _origin(events: list[dict]) -> datetime:
    """The run's start: an event's source timestamp less its t, else the epoch."""
    for event in events:
        stamp = event.get("timestamp")
        if isinstance(stamp, str):
            try:
                moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
                return moment - timedelta(seconds=_seconds(event.get("t")))
            except (ValueError, OverflowError):
                continue
    return EPOCH


def _seconds(t) -> float:
    return float(t) if _number(t) else 0.0


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and value not in (float("inf"), float("-inf"))


def _whole(value) -> bool:
    if isinstance(value, int):
        return not isinstance(value, bool)
    return _number(value) and value.is_integer()


def _has_tokens(event: dict) -> bool:
    return any(_number(event.get(key)) for key in ("tokens", "tokens_in", "tokens_out"))
