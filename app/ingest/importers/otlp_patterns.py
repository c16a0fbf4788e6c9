"""How real frameworks lay out a multi-agent run in spans, recovered before the GenAI mapping walks the tree.

The mapping (IMPORTERS.md §1) reads agents from nesting: a sub-agent's span sits below its caller's.
Frameworks often say it otherwise; each rule below rewrites the span tree, or notes on a span what the
walk must do, so that the walk needs no framework knowledge:
- Handoffs: the target agent runs as a sibling of the agent that handed off. The handoff is read from an
  OpenAI Agents SDK handoff span (OpenInference `handoff to X` tool span, or OpenLLMetry's `handoff`
  operation), an OpenInference `graph.node.parent_id`, or a `transfer_to_<agent>` tool call (OpenAI
  Agents, AutoGen Swarm, LangGraph). The target is the first run of that agent starting after it. In a
  LangGraph graph a transfer is a delegation (the worker comes back to the supervisor); elsewhere the
  agent that handed off is done (despawn).
- Instances that resume: the runs of one LangGraph node, and AutoGen turns sharing a `gen_ai.agent.id`,
  are one agent instance with one lane, one start and one end.
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
- AutoGen writes a tool's arguments and result only into its runtime messages (a FunctionCall and a
  FunctionExecutionResult naming the call id): they become the tool span's GenAI attributes.
"""

import json
import re

TRANSFER = re.compile(r"^transfer_to_(.+)$")
HANDOFF_TOOL = re.compile(r"^handoff to (.+)$")
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
    _coworkers(spans, ops)
    _runtime_tool_io(spans, ops)
    _resumed_instances(spans, ops)
    _handoffs(spans, ops)
    _flat_parenting(spans, ops)


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
    tools: dict[str, list] = {}
    for span in spans:
        call_id = _str(span.attrs, "gen_ai.tool.call.id") if span.op is ops.TOOL else None
        if call_id:
            tools.setdefault(call_id, []).append(span)
    if not tools:
        return
    for span in spans:
        if "message" in span.attrs and span.name.startswith("autogen "):
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


def _instance_key(span) -> str | None:
    node = langgraph_node(span) if span.operation == "invoke_agent" else None
    if node is not None and span.parent is not None and span.parent.name == "LangGraph":
        return f"langgraph:{node}"
    agent_id = _str(span.attrs, "gen_ai.agent.id")
    if agent_id and _str(span.attrs, "gen_ai.system") == "autogen":
        return f"autogen:{agent_id}"
    return None


def _resumed_instances(spans: list, ops) -> None:
    first: dict[str, object] = {}
    last: dict[str, object] = {}
    for span in sorted((s for s in spans if s.op is ops.AGENT), key=_start):
        key = _instance_key(span)
        if key is None:
            continue
        if key in first:
            span.resumes = first[key]
            last[key].resumed_later = True
        else:
            first[key] = span
        last[key] = span


def _handoffs(spans: list, ops) -> None:
    agents = sorted((s for s in spans if s.op is ops.AGENT), key=_start)
    if len(agents) < 2:
        return
    for span in sorted((s for s in spans if s.op is ops.TOOL or s.operation == "handoff"), key=_start):
        target_name = delegation = None
        name = _str(span.attrs, "gen_ai.tool.name") or ""
        if span.op is ops.TOOL:
            name = name or span.name
            match = TRANSFER.match(name) or HANDOFF_TOOL.match(name)
            if match:
                target_name = match[1]
        elif span.operation == "handoff":
            target_name = _str(span.attrs, "gen_ai.handoff.to_agent") or ""
        if target_name is None:
            continue
        source = _agent_of(span, ops)
        if source is None:
            continue
        target = next((a for a in agents if a.start >= span.start and a.handoff is None and a is not source
                       and a.resumes is not source and source not in _ancestors(a)
                       and (not target_name or _agent_name(a) == target_name)), None)
        if target is None:
            continue
        delegation = langgraph_node(target) is not None
        target.handoff = (source, span if span.op is ops.TOOL else None, "delegation" if delegation else "handoff")
        if not delegation:
            source.handed_off = True
        if span.op is ops.TOOL and HANDOFF_TOOL.match(name):
            span.op, span.operation = ops.STRUCTURE, "handoff"  # the SDK's handoff, not a function tool
    for span in agents:
        parent_name = _str(span.attrs, "graph.node.parent_id")
        if span.handoff is None and parent_name:
            source = next((a for a in reversed(agents) if a.start <= span.start and a is not span
                           and _agent_name(a) == parent_name and a not in _ancestors(span)), None)
            if source is not None and source.end <= span.start:
                span.handoff = (source, None, "handoff")
                source.handed_off = True


def _agent_name(span) -> str | None:
    return _str(span.attrs, "gen_ai.agent.name")


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
