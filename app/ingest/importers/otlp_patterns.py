"""How real frameworks lay out a multi-agent run in spans, recovered before the GenAI mapping walks the tree.

The mapping (IMPORTERS.md §1) reads agents from nesting: a sub-agent's span sits below its caller's.
Frameworks often say it otherwise; each rule below rewrites the span tree, or notes on a span what the
walk must do, so that the walk needs no framework knowledge:
- Control transfers, one mechanism for every framework: a call whose target is another agent of the run
  hands control to that agent's next run. The call is a tool named `transfer_to_X`, `handoff_to_X`,
  `transfer_back_to_X` or `handoff to X` (any spelling of X: `Research Expert` is `research_expert`), a
  generic transfer tool (`transfer_to_agent`, `handoff_to_agent`, `handoff`) naming the target in any
  argument, a `handoff` span or a `gen_ai.agent.handoff.target` (`.to`, `gen_ai.handoff.to_agent`)
  attribute, or a transfer a model's output asks for that no tool span answers (a middleware that
  short-circuits it). The agent that handed off is done with that run; where the target runs (a sibling,
  or inside the caller's span) does not matter. Runs with no agent above them (side by side under a
  workflow, graph, swarm or executor span) that nothing else explains run after the runs that ended last
  before them (a fan-in waits for several).
- Instances: the runs of one agent (its id, else its name) are one instance with one lane; only runs that
  overlap in time, and are not a transfer's target, get instances of their own. A later run continues
  the lane: the walk gives it a message from whoever passed control, never a second spawn.
- Agents named only in step inputs (LlamaIndex's AgentWorkflow: `current_agent_name` in each step's
  input, no agent span): consecutive steps of one agent, and the spans between them, are one run.
- A model span that shows no answer beside a sibling that does is the request's preparation, not a call.
- LangGraph: agents are the graph's top-level nodes that call a model (`langgraph_node` metadata, as
  OpenInference or LangSmith write it); ReAct `agent` / `call_agent` spans inside them only structure.
- Workflow roots: an OpenInference AGENT span with no agent name of its own above named agents (the Agents
  SDK trace) is the workflow, not an agent.
- CrewAI: "Delegate work to coworker" / "Ask question to coworker" tool spans run the coworker named in
  their input without a span of its own: one is made, holding the tool's children, with the tool's input
  and output as the run's.
- Flat parenting (OpenLLMetry puts every agent under the workflow span): an agent that no handoff
  explains and that runs inside another agent's tool call was delegated by that tool; model and tool
  spans left directly under a workflow belong to the innermost agent running at the time.
- LangGraph raises `ParentCommand` to hand control to the parent graph; LangSmith marks those spans
  ERROR. They are control flow, not errors.
- Content as span events (the GenAI conventions before `gen_ai.input.messages`; Strands): a tool span's
  `gen_ai.tool.message` and `gen_ai.choice` are its arguments and result, anyone else's message events its
  input messages and its choices its output messages.
- AutoGen writes a tool's arguments and result only into its runtime messages (a FunctionCall and a
  FunctionExecutionResult naming the call id): they become the tool span's GenAI attributes.
"""

import json
import math
import re
from bisect import bisect_left, bisect_right

TRANSFER_TO = re.compile(r"^(?:transfer|handoff|hand_off)(?:_back)?_to_(.+)$", re.IGNORECASE)
TRANSFER_BARE = re.compile(r"^(?:transfer|handoff|hand_off)$", re.IGNORECASE)
HANDOFF_TOOL = re.compile(r"^handoff to (.+)$")  # OpenInference's span for an Agents SDK handoff
HANDOFF_ATTR = re.compile(r"^gen_ai\.(?:agent\.)?handoff\.(?:target|to|to_agent)(?:\.name|\.id)?$")
CURRENT_AGENT = re.compile(r"current_agent(?:_name)?['\"]?\s*[=:]\s*['\"]([^'\"]{1,200})['\"]")
USAGE_EVIDENCE = ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.usage.prompt_tokens",
                  "gen_ai.usage.completion_tokens")
MESSAGE_EVENTS = {"gen_ai.system.message": "system", "gen_ai.user.message": "user",
                  "gen_ai.assistant.message": "assistant", "gen_ai.tool.message": "tool"}
CHOICE_EVENT = "gen_ai.choice"
TRANSFER_WORD = re.compile(r"transfer|hand_?off", re.IGNORECASE)
TARGET_KEY = re.compile(r"agent|target|^to|recipient|member|name", re.IGNORECASE)
COWORKER_TOOLS = ("Delegate work to coworker", "Ask question to coworker")
MAX_PAYLOAD_DEPTH = 16
LANGGRAPH_SKIP = {"tools", "__start__", "__end__", "should_continue", "agent", "call_agent", "call_model"}


def _str(attrs: dict, key: str) -> str | None:
    value = attrs.get(key)
    if type(value) is dict:
        value = value.get("stringValue")
    return value if isinstance(value, str) and value else None


def _json(attrs: dict, key: str):
    text = _str(attrs, key)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _descendants(span):
    stack = list(span.children)
    while stack:
        child = stack.pop()
        yield child
        stack.extend(child.children)


def _ancestors(span):
    span = span.parent
    while span is not None:
        yield span
        span = span.parent


def _start(span) -> int:
    return span.start


def _move(span, new_parent) -> None:
    """Put `span` under `new_parent`, keeping children in start order."""
    if span.parent is not None:
        span.parent.children.remove(span)
    span.parent = new_parent
    new_parent.children.append(span)
    new_parent.children.sort(key=_start)


def langgraph_node(span) -> str | None:
    """The LangGraph node a span ran in, from OpenInference's `metadata` JSON or LangSmith's flattened keys."""
    node = _str(span.attrs, "langsmith.metadata.langgraph_node")
    if node is None and "metadata" in span.attrs:
        meta = _json(span.attrs, "metadata")
        node = meta.get("langgraph_node") if isinstance(meta, dict) else None
    return node


def apply(spans: list, roots: list, ops) -> None:
    """Rewrite the span tree of one trace (see the module docstring); `ops` names the span operations."""
    for span in spans:
        if len(span.children) > 1:
            span.children.sort(key=_start)
        if span.error and _control_flow(span):
            span.error = False
    _nested_duplicates(roots, ops)
    _langgraph_agents(spans, roots, ops)
    _workflow_roots(spans, ops)
    _event_messages(spans, ops)
    _named_steps(spans, ops)
    _prepared_calls(spans, ops)
    _coworkers(spans, ops)
    _runtime_tool_io(spans, ops)
    _transfers(spans, ops)
    _instances(spans, ops)
    _flat_parenting(spans, ops)
    _successions(spans, ops)


def _nested_duplicates(roots: list, ops) -> None:
    """A model call (or a run of the same tool) inside another: the same call seen by two instrumentations
    (a framework's own spans and a provider SDK's, say). The outer one stands for both."""
    stack = [(root, False, None) for root in roots]  # (span, inside a model call, name of the tool it is in)
    while stack:
        span, in_call, in_tool = stack.pop()
        if span.op is ops.INFERENCE:
            if in_call:
                span.op, span.operation = ops.STRUCTURE, "duplicate"
            in_call = True
        elif span.op is ops.TOOL:
            name = _str(span.attrs, "gen_ai.tool.name")
            if in_tool is not None and name == in_tool:
                span.op, span.operation = ops.STRUCTURE, "duplicate"
            in_tool = name
        for child in span.children:
            stack.append((child, in_call, in_tool))


def twins(traces: dict[str, list], ops) -> dict[str, str]:
    """Traces that another trace of the document already holds: the same model calls (token counts), at
    overlapping times, from other instrumentations (scopes), as when two instrumentations of one run each
    start a trace. Maps dropped -> kept."""
    signatures = {}
    if len(traces) < 2:
        return {}
    for trace_id, spans in traces.items():
        calls = sorted((_str_int(s.attrs, "gen_ai.usage.input_tokens"), _str_int(s.attrs, "gen_ai.usage.output_tokens"))
                       for s in spans if s.op is ops.INFERENCE)
        if calls:
            signatures[trace_id] = (tuple(calls), min(s.start for s in spans), max(s.end for s in spans), len(spans),
                                    {s.scope for s in spans})
    dropped: dict[str, str] = {}
    ids = sorted(signatures, key=lambda t: -signatures[t][3])  # the fuller tree first
    for i, kept in enumerate(ids):
        if kept in dropped:
            continue
        calls, start, end, _, scopes = signatures[kept]
        for other in ids[i + 1:]:
            o_calls, o_start, o_end, _, o_scopes = signatures[other]
            if other not in dropped and o_calls == calls and o_start < end and start < o_end \
                    and not scopes & o_scopes:
                dropped[other] = kept
    return dropped


def _str_int(attrs: dict, key: str):
    value = attrs.get(key)
    return str(value.get("intValue", value.get("doubleValue", ""))) if type(value) is dict else str(value)


def _control_flow(span) -> bool:
    for event in span.span_events:
        if isinstance(event, dict) and event.get("name") == "exception":
            for kv in event.get("attributes") or ():
                value = kv.get("value", {}) if isinstance(kv, dict) else {}
                if kv.get("key") in ("exception.type", "exception.message") and \
                        str(value.get("stringValue", "")).startswith("ParentCommand"):
                    return True
    return (span.status_message or "").startswith("ParentCommand")


def _langgraph_agents(spans: list, roots: list, ops) -> None:
    graph_roots = [r for r in roots if r.name == "LangGraph"]
    if not graph_roots:
        return
    for root in graph_roots:
        for node in root.children:
            name = langgraph_node(node)
            if name is None or name != node.name or name in LANGGRAPH_SKIP:
                continue
            if any(d.op is ops.INFERENCE for d in _descendants(node)):
                node.op, node.operation = ops.AGENT, "invoke_agent"
                node.attrs["gen_ai.agent.name"] = {"stringValue": name}
                for inner in _descendants(node):
                    if inner.op is ops.AGENT:
                        inner.op, inner.operation = ops.STRUCTURE, "chain"


def _workflow_roots(spans: list, ops) -> None:
    for span in spans:
        if span.op is ops.AGENT and "openinference.span.kind" in span.attrs and not (
                "agent.name" in span.attrs or "graph.node.id" in span.attrs) and any(
                d.op is ops.AGENT and "graph.node.id" in d.attrs for d in _descendants(span)):
            span.op, span.operation = ops.WORKFLOW, "invoke_workflow"
            span.attrs.setdefault("gen_ai.workflow.name", {"stringValue": span.name})


def _event_texts(event) -> dict[str, str]:
    """The text attributes of a span event."""
    out = {}
    for kv in event.get("attributes") or () if isinstance(event, dict) else ():
        value = kv.get("value") if isinstance(kv, dict) else None
        if isinstance(value, dict) and isinstance(value.get("stringValue"), str) and isinstance(kv.get("key"), str):
            out[kv["key"]] = value["stringValue"]
    return out


def _loaded(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _event_messages(spans: list, ops) -> None:
    """Content written as span events (the GenAI conventions before `gen_ai.input.messages`, as Strands
    writes them: `gen_ai.{system,user,assistant,tool}.message` with `content`, `gen_ai.choice` with `message`)
    becomes the span's GenAI attributes: a tool's arguments and result, anyone else's input and output messages."""
    for span in spans:
        if not span.span_events or span.op is None:
            continue
        said, answered = [], []
        for event in span.span_events:
            name = event.get("name") if isinstance(event, dict) else None
            texts = _event_texts(event) if name in MESSAGE_EVENTS or name == CHOICE_EVENT else {}
            if name in MESSAGE_EVENTS and "content" in texts:
                said.append((MESSAGE_EVENTS[name], texts["content"]))
            elif name == CHOICE_EVENT and "message" in texts:
                answered.append(texts["message"])
        if span.op is ops.TOOL:
            pairs = (("gen_ai.tool.call.arguments", said[-1][1] if said else None),
                     ("gen_ai.tool.call.result", answered[-1] if answered else None))
        else:
            pairs = (("gen_ai.input.messages", json.dumps([{"role": role, "content": _loaded(text)}
                                                           for role, text in said]) if said else None),
                     ("gen_ai.output.messages", json.dumps([{"role": "assistant", "content": _loaded(text)}
                                                            for text in answered]) if answered else None))
        for key, value in pairs:
            if value is not None and key not in span.attrs:
                span.attrs[key] = {"stringValue": value}


def _step_agent(span) -> str | None:
    """The agent a workflow step says it runs for (`current_agent_name` in its input, as JSON or a repr)."""
    text = _str(span.attrs, "input.value") or _str(span.attrs, "traceloop.entity.input")
    if text is None or "current_agent" not in text:
        return None
    match = CURRENT_AGENT.search(text)
    return match[1] if match else None


def _named_steps(spans: list, ops) -> None:
    """Workflows without agent spans (LlamaIndex's AgentWorkflow) name the agent each step runs for in the
    step's input: consecutive steps of one agent, and the spans between them, become one run of that agent."""
    if any(s.op is ops.AGENT for s in spans):
        return
    named = sorted(((s, name) for s in spans if s.op is None or s.op is ops.STRUCTURE
                    if (name := _step_agent(s)) is not None), key=lambda pair: pair[0].start)
    by_parent: dict[int, list] = {}
    for step, name in named:
        if step.parent is not None:
            by_parent.setdefault(id(step.parent), []).append((step, name))
    for steps in by_parent.values():
        parent = steps[0][0].parent
        runs = []  # [first step, agent name]
        for step, name in steps:
            if not runs or runs[-1][1] != name:
                runs.append([step, name])
        siblings = sorted(parent.children, key=_start)
        for i, (first, name) in enumerate(runs):
            until = runs[i + 1][0].start if i + 1 < len(runs) else math.inf
            members = [c for c in siblings if first.start <= c.start < until]
            attrs = {"gen_ai.agent.name": {"stringValue": name}}
            if "input.value" in first.attrs:  # the run's input is its first step's, its output its last step's
                attrs["input.value"] = first.attrs["input.value"]
            last = max(members, key=lambda c: c.end)
            if "output.value" in last.attrs:
                attrs["output.value"] = last.attrs["output.value"]
            run = ops.make_span(first, first.id, "invoke_agent", attrs)
            run.end = last.end
            for child in members:
                _move(child, run)
            _move(run, parent)
            spans.append(run)


def _answered(span) -> bool:
    """Whether a model span shows an answer: usage, or output messages in any convention (OpenInference's,
    OpenLLMetry's and LangSmith's completions, GenAI's), not only a step's `output.value`."""
    attrs = span.attrs
    if any(key in attrs for key in USAGE_EVIDENCE):
        return True
    output = attrs.get("gen_ai.output.messages")
    return (output is not None and output is not attrs.get("output.value")) or \
        any(type(key) is str and key.startswith(("llm.output_messages.", "gen_ai.completion")) for key in attrs)


def _prepared_calls(spans: list, ops) -> None:
    """A model span that shows no answer beside a sibling model span that does (a client's request
    preparation, traced as a call of its own) is not a call."""
    for span in spans:
        if span.op is ops.INFERENCE and span.parent is not None and not _answered(span) and any(
                c is not span and c.op is ops.INFERENCE and _answered(c) for c in span.parent.children):
            span.op, span.operation = ops.STRUCTURE, "prepare"


def _coworkers(spans: list, ops) -> None:
    for tool in [s for s in spans if s.op is ops.TOOL and s.name.startswith(COWORKER_TOOLS)]:
        if _str(tool.attrs, "gen_ai.tool.name") not in COWORKER_TOOLS:
            continue
        arguments = _json(tool.attrs, "gen_ai.tool.call.arguments")
        coworker = arguments.get("coworker") if isinstance(arguments, dict) else None
        if not isinstance(coworker, str) or not coworker.strip():
            continue
        run = {"gen_ai.agent.name": {"stringValue": coworker.strip()}}
        for source, target in (("gen_ai.tool.call.arguments", "gen_ai.input.messages"),
                               ("gen_ai.tool.call.result", "gen_ai.output.messages")):
            if source in tool.attrs:
                run[target] = tool.attrs[source]
        agent = ops.make_span(tool, tool.id, "invoke_agent", run)
        for child in list(tool.children):
            _move(child, agent)
        _move(agent, tool)
        spans.append(agent)


def _runtime_tool_io(spans: list, ops) -> None:
    messages = [span for span in spans if "message" in span.attrs and span.name.startswith("autogen ")]
    if not messages:  # not AutoGen's runtime: no tool span is asked for its call id
        return
    tools: dict[str, list] = {}
    for span in spans:
        call_id = _str(span.attrs, "gen_ai.tool.call.id") if span.op is ops.TOOL else None
        if call_id:
            tools.setdefault(call_id, []).append(span)
    if not tools:
        return
    for span in messages:
        for call_id, key, value in _tool_io(_json(span.attrs, "message")):
            for tool in tools.get(call_id, ()):
                tool.attrs.setdefault(key, {"stringValue": value if isinstance(value, str) else json.dumps(value)})


def _tool_io(payload, depth: int = 0):
    """(call id, GenAI attribute, value) of each tool call (`id`, `name`, `arguments`) and tool result
    (`call_id`, `content`) anywhere in an AutoGen payload."""
    if depth > MAX_PAYLOAD_DEPTH:
        return
    if isinstance(payload, dict):
        if isinstance(payload.get("id"), str) and "name" in payload and "arguments" in payload:
            yield payload["id"], "gen_ai.tool.call.arguments", payload["arguments"]
        elif isinstance(payload.get("call_id"), str) and "content" in payload:
            yield payload["call_id"], "gen_ai.tool.call.result", payload["content"]
        payload = payload.values()
    if isinstance(payload, (list, type({}.values()))):
        for item in payload:
            if isinstance(item, (dict, list)):
                yield from _tool_io(item, depth + 1)


def run_name(span) -> str:
    """The agent an agent span runs: its `gen_ai.agent.name`, else the span name after the operation."""
    return _str(span.attrs, "gen_ai.agent.name") or span.name.partition(" ")[2] or "agent"


def _norm(name: str) -> str:
    """An agent name as tool names spell it (`Research Expert` is `research_expert`)."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def _named_agent(arguments, agents: dict[str, str], depth: int = 0) -> str | None:
    """The first agent of the run named by a string anywhere in a tool's arguments (keys that say agent,
    target or to first)."""
    if depth > MAX_PAYLOAD_DEPTH:
        return None
    if isinstance(arguments, str):
        return agents.get(_norm(arguments))
    if isinstance(arguments, dict):
        values = sorted(arguments.items(), key=lambda kv: not TARGET_KEY.search(str(kv[0])))
        arguments = [value for _, value in values]
    for value in arguments if isinstance(arguments, list) else ():
        found = _named_agent(value, agents, depth + 1)
        if found is not None:
            return found
    return None


def transfer_target(tool: str, arguments, agents: dict[str, str]) -> str | None:
    """The agent a tool call hands control to, by the tool's name (`transfer_to_X`, `handoff_to_X`,
    `transfer_back_to_X`, `handoff to X`) or, for a generic transfer tool (`transfer_to_agent`, `handoff`),
    by its arguments (or a function giving them, called only then); None for any other tool. `agents` maps
    normalised names to the run's agent names."""
    match = TRANSFER_TO.match(tool) or HANDOFF_TOOL.match(tool)
    if match is not None and _norm(match[1]) in agents:
        return agents[_norm(match[1])]
    if match is None and not TRANSFER_BARE.match(tool):
        return None
    return _named_agent(arguments() if callable(arguments) else arguments, agents)


def _transfer_name(tool: str) -> bool:
    """Whether transfer_target may find a target for a tool of this name (else None, whatever its arguments)."""
    return bool(TRANSFER_TO.match(tool) or HANDOFF_TOOL.match(tool) or TRANSFER_BARE.match(tool))


def _transfer_word(text: str) -> bool:
    """TRANSFER_WORD.search(text), sooner: a match holds one of these in lower case (the long s matches s when
    case is ignored), which most texts do not."""
    low = text.lower()
    return ("transfer" in low or "tranſfer" in low or "handoff" in low or "hand_off" in low) \
        and TRANSFER_WORD.search(text) is not None


def _requested_calls(span) -> list[tuple[str | None, str, object]]:
    """(call id, tool name, arguments) of the tool calls a model span's output messages ask for."""
    text = _str(span.attrs, "gen_ai.output.messages")
    if text is None or not _transfer_word(text):  # most outputs ask for no transfer: not parsed
        return []
    output = _json(span.attrs, "gen_ai.output.messages")
    calls = []
    for message in output if isinstance(output, list) else ():
        for part in message.get("parts", ()) if isinstance(message, dict) else ():
            if isinstance(part, dict) and part.get("type") == "tool_call" and isinstance(part.get("name"), str):
                arguments = part.get("arguments")
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments)
                    except ValueError:
                        pass
                calls.append((part.get("id"), part["name"], arguments))
    return calls


def _tool_arguments(span):
    arguments = _json(span.attrs, "gen_ai.tool.call.arguments")
    return arguments if arguments is not None else _json(span.attrs, "input.value")


def _handoff_attribute(span) -> str | None:
    """The target a span's handoff attributes name (`gen_ai.agent.handoff.target.name` and kin)."""
    for key in span.attrs:
        if type(key) is str and "handoff" in key and HANDOFF_ATTR.match(key):
            return _str(span.attrs, key)
    return None


def _unless_said(spans: list, ops, transfers: list, implied: list) -> None:
    """Add to `transfers` each transfer `implied` by a model's output, unless a tool or handoff span of the same
    turn (until the agent's next model call) says it."""
    turns: dict[int, list[int]] = {}  # each agent's model call starts
    for span in spans:
        if span.op is ops.INFERENCE:
            turns.setdefault(id(_agent_of(span, ops)), []).append(span.start)
    said: dict[int, list[int]] = {}
    for time, span, _ in transfers:
        said.setdefault(id(_agent_of(span, ops)), []).append(time)
    for starts in (*turns.values(), *said.values()):
        starts.sort()
    for time, call, target in implied:
        agent = id(_agent_of(call, ops))
        starts = turns[agent]
        following = bisect_right(starts, call.start)
        until = starts[following] if following < len(starts) else math.inf
        times = said.get(agent, ())
        first = bisect_left(times, call.start)
        if not (first < len(times) and times[first] < until):
            transfers.append((time, call, target))


def _transfers(spans: list, ops) -> None:
    """Each call that passes control to another agent of the run (a transfer tool, by its name or its
    arguments; a `handoff` span or attribute; a transfer asked for only in a model's output, as when a
    middleware answers it without a tool span) marks the target's next run with `handoff`, and the agent
    that handed off."""
    agents = sorted((s for s in spans if s.op is ops.AGENT), key=_start)
    if len(agents) < 2:
        return
    names = {_norm(run_name(a)): run_name(a) for a in agents}
    tools = [s for s in spans if s.op is ops.TOOL]
    called = None  # the tool spans' call ids, read once a model's output asks for a transfer
    plain = set()  # tool names that hand control to no one, whatever the arguments (asked once each)
    transfers = []  # (time, the span that asks for it, target name or "" for any agent)
    implied = []  # the same, asked for only in a model's output
    for span in spans:
        target = None
        if span.op is ops.TOOL:
            name = _str(span.attrs, "gen_ai.tool.name") or span.name
            if name not in plain:
                target = transfer_target(name, lambda: _tool_arguments(span), names)
                if target is not None:
                    transfers.append((span.start, span, target))
                    if HANDOFF_TOOL.match(name):
                        span.op, span.operation = ops.STRUCTURE, "handoff"  # the SDK's handoff, not a function tool
                    continue
                if not _transfer_name(name):
                    plain.add(name)
        elif span.op is ops.INFERENCE:
            for call_id, name, arguments in _requested_calls(span):
                target = transfer_target(name, arguments, names)
                if called is None and target is not None:
                    called = {call_id for s in tools if (call_id := _str(s.attrs, "gen_ai.tool.call.id"))}
                if target is not None and (call_id is None or call_id not in called):
                    implied.append((span.end, span, target))
        target = _handoff_attribute(span)
        if target is not None or span.operation == "handoff":
            transfers.append((span.start, span, names.get(_norm(target or ""), "")))
    if implied:
        _unless_said(spans, ops, transfers, implied)
    starts = [a.start for a in agents]
    for time, span, target in sorted(transfers, key=lambda t: t[0]):
        source = _agent_of(span, ops) if span.op is not ops.AGENT else span
        if source is None:
            continue
        run = next((a for a in agents[bisect_left(starts, time):] if a.handoff is None and a is not source
                    and run_name(a) != run_name(source) and (not target or run_name(a) == target)), None)
        if run is not None:
            run.handoff = (source, span)
            source.handed_off = True
    for span in agents:
        parent_name = _str(span.attrs, "graph.node.parent_id")
        if span.handoff is None and parent_name:
            source = next((a for a in reversed(agents) if a.start <= span.start and a is not span
                           and run_name(a) == parent_name and a not in _ancestors(span)), None)
            if source is not None and source.end <= span.start:
                span.handoff = (source, None)
                source.handed_off = True


def _instance_key(span) -> str:
    """What makes runs one agent instance: the LangGraph node, else the agent id, else the agent name."""
    node = langgraph_node(span) if span.operation == "invoke_agent" else None
    if node is not None and span.parent is not None and span.parent.name == "LangGraph":
        return f"langgraph:{node}"
    agent_id = _str(span.attrs, "gen_ai.agent.id")
    return f"id:{agent_id}" if agent_id else f"name:{run_name(span)}"


def _instances(spans: list, ops) -> None:
    """The runs of one agent are one instance (one lane) unless they overlap in time: only truly concurrent
    runs get instances of their own. A run that control was handed to continues its agent's instance even
    inside that agent's earlier run (frameworks that run a transfer's target within the caller's span)."""
    instances: dict[str, list[list]] = {}  # key -> [first run, latest run, latest end]
    for span in sorted((s for s in spans if s.op is ops.AGENT), key=_start):
        if span.resumes is not None:
            continue
        key = _instance_key(span)
        mine = instances.setdefault(key, [])
        free = next((inst for inst in reversed(mine) if inst[2] <= span.start or span.handoff is not None), None)
        if free is None:
            mine.append([span, span, span.end])
            continue
        span.resumes = free[0]
        free[1].resumed_later = True
        free[1], free[2] = span, max(free[2], span.end)


def _successions(spans: list, ops) -> None:
    """Agent runs side by side under one workflow, graph or swarm, with nothing else saying how control
    came to them, run after their predecessors: the runs the messages that woke them came from (span links,
    as workflow executors have them), else the runs that ended last before them. Two or more make a fan-in:
    the last to end hands over and the others join."""
    groups: dict[int, list] = {}
    for span in spans:
        if span.op is ops.AGENT and _agent_of(span, ops) is None:
            root = span
            while root.parent is not None:
                root = root.parent
            groups.setdefault(id(root), []).append(span)
    by_id = {span.id: span for span in spans} if any(span.links for span in spans) else {}
    for runs in groups.values():
        if len(runs) < 2:
            continue
        by_end = sorted(runs, key=lambda r: r.end)
        ends = [r.end for r in by_end]
        latest: list[tuple] = []  # the two latest starts among by_end[:i + 1], for each i
        for r in by_end:
            top = sorted((*(latest[-1] if latest else ()), (r.start, id(r))), reverse=True)[:2]
            latest.append(tuple(top))
        for run in sorted(runs, key=_start):
            if run.handoff is not None:
                continue
            n = bisect_right(ends, run.start)  # by_end[:n] ended before `run` started
            if not n:
                continue
            last = _linked_runs(run, runs, by_id)
            if not last:  # r ran last before `run` unless another of them started after r ended
                last = [r for r in by_end[bisect_left(ends, latest[n - 1][-1][0]):n]
                        if not any(other != id(r) and start >= r.end for start, other in latest[n - 1])]
            last.sort(key=lambda r: r.end)  # the last to end completed the fan-in: it hands over
            run.handoff = (last[-1], None)
            run.joined = last[:-1]
            for source in last:
                source.handed_off = True


def _linked_runs(run, runs: list, by_id: dict) -> list:
    """The runs that the messages causing `run` came from: span links on the run or the spans above it
    (a workflow executor linked to the `message.send` that woke it) lead to the run that ended last before
    the linked span, under the linked span's nearest ancestor holding one."""
    found = []
    span = run
    while span is not None and by_id:
        for _, linked_id in span.links:
            linked = by_id.get(linked_id)
            holder = linked
            while holder is not None:
                done = [r for r in runs if r is not run and r.end <= linked.start
                        and (r is holder or holder in _ancestors(r))]
                if done:
                    found.append(max(done, key=lambda r: r.end))
                    break
                holder = holder.parent
        span = span.parent
    return list(dict.fromkeys(found))


def _agent_of(span, ops):
    return next((a for a in _ancestors(span) if a.op is ops.AGENT), None)


def _flat_parenting(spans: list, ops) -> None:
    workflows = [s for s in spans if s.op is ops.WORKFLOW]
    for workflow in workflows:
        agents = [c for c in workflow.children if c.op is ops.AGENT]
        tools = [s for s in spans if s.op is ops.TOOL and _agent_of(s, ops) is not None]
        for agent in agents:
            if agent.handoff is not None or agent.resumes is not None:
                continue
            holder = _tightest((t for t in tools if t.start <= agent.start and agent.end <= t.end
                                and _agent_of(t, ops) is not agent), agent)
            if holder is not None:
                _move(agent, holder)
        for child in list(workflow.children):
            if child.op in (ops.INFERENCE, ops.TOOL, ops.TOOLISH):
                holder = _tightest((a for a in spans if a.op is ops.AGENT and a.start <= child.start
                                    and child.end <= a.end), child)
                if holder is not None:
                    _move(child, holder)


def _tightest(candidates, span):
    best = None
    for candidate in candidates:
        if candidate is not span and (best is None or candidate.end - candidate.start < best.end - best.start):
            best = candidate
    return best


def reported_tokens(spans: list) -> int | None:
    """Tokens a run reports outside model-call spans, for runs whose model calls have no span: the usage
    of AutoGen's runtime messages (each message counted once, though delivered to several agents) or
    a CrewAI crew's `token_usage` summary. None when neither is there."""
    autogen: dict[str, int] = {}
    summary = None
    for span in spans:
        if "message" in span.attrs and span.name.startswith("autogen "):
            for message in _with_usage(_json(span.attrs, "message")):
                usage = message["models_usage"]
                autogen[message["id"]] = _whole(usage.get("prompt_tokens")) + _whole(usage.get("completion_tokens"))
        elif span.parent is None and "output.value" in span.attrs:
            output = _json(span.attrs, "output.value")
            usage = output.get("token_usage") if isinstance(output, dict) else None
            if isinstance(usage, dict) and _whole(usage.get("total_tokens")):
                summary = _whole(usage["total_tokens"])
    if autogen:
        return sum(autogen.values())
    return summary


def _with_usage(payload, depth: int = 0):
    """The messages (objects with an `id` and a `models_usage` object) anywhere in an AutoGen payload."""
    if depth > MAX_PAYLOAD_DEPTH:
        return
    if isinstance(payload, dict):
        if isinstance(payload.get("models_usage"), dict) and isinstance(payload.get("id"), str):
            yield payload
        payload = payload.values()
    if isinstance(payload, (list, type({}.values()))):
        for item in payload:
            if isinstance(item, (dict, list)):
                yield from _with_usage(item, depth + 1)


def _whole(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
