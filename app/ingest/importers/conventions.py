"""Span conventions other than OpenTelemetry GenAI, read as GenAI before the mapping runs.

Real frameworks emit one of three conventions besides (or instead of) `gen_ai.*`:
- OpenInference (Arize Phoenix; the only instrumentation of smolagents and CrewAI):
  `openinference.span.kind` AGENT / CHAIN / LLM / TOOL / RETRIEVER / EMBEDDING / RERANKER / GUARDRAIL /
  EVALUATOR, `llm.token_count.prompt|completion`, `llm.model_name`, `tool.name`, `agent.name`,
  `graph.node.id`, `input.value` / `output.value`, and tool calls flattened as
  `llm.output_messages.<i>.message.tool_calls.<j>.tool_call.{id,function.name}`.
- OpenLLMetry / Traceloop: `traceloop.span.kind` workflow / agent / tool / task, mostly beside `gen_ai.*`.
- LangSmith's OTel mode: `gen_ai.*` plus `langsmith.span.kind` (chain spans have operation `chain`).

`translate` returns the GenAI operation a span stands for and adds the `gen_ai.*` attributes the
mapping reads (never overwriting ones the span has). Spans that only structure a run (chains, steps,
tasks) get the operation `chain`: transparent, and not reported as unknown. `unflatten` regroups the
messages OpenInference (`llm.input_messages.<i>.message.*`) and OpenLLMetry (`gen_ai.prompt.<i>.*`) flatten
into attributes, for the content an event keeps.
"""

import json
import re

OI_KIND = "openinference.span.kind"
TRACELOOP_KIND = "traceloop.span.kind"
CHAIN = "chain"

OI_OPERATIONS = {"AGENT": "invoke_agent", "LLM": "chat", "TOOL": "execute_tool", "RETRIEVER": "retrieval",
                 "EMBEDDING": "embeddings", "RERANKER": "retrieval", "CHAIN": CHAIN, "GUARDRAIL": CHAIN,
                 "EVALUATOR": CHAIN, "UNKNOWN": CHAIN}
TRACELOOP_OPERATIONS = {"workflow": "invoke_workflow", "agent": "invoke_agent", "tool": "execute_tool",
                        "task": CHAIN}
OI_ALIASES = (("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
              ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
              ("llm.model_name", "gen_ai.request.model"),
              ("tool.name", "gen_ai.tool.name"),
              ("tool_call.id", "gen_ai.tool.call.id"),
              ("tool_call.function.arguments", "gen_ai.tool.call.arguments"),
              ("session.id", "gen_ai.conversation.id"))
TOOL_CALL = re.compile(r"llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\.(id|function\.name)$")
# Span name suffixes of agent runs: smolagents `<name>.run`, CrewAI `<role>._execute_core`, `<role>.execute`.
AGENT_NAME_SUFFIX = re.compile(r"\.(run|_execute_core|execute_task|execute)$")


def _string(value) -> str | None:
    if type(value) is dict:
        value = value.get("stringValue")
    return value if isinstance(value, str) and value else None


def translate(name: str, attrs: dict) -> str | None:
    """The GenAI operation of a span in another convention (None when it is in none we read); adds
    `gen_ai.*` aliases to `attrs`."""
    kind = _string(attrs.get(OI_KIND))
    if kind is not None:
        return _openinference(name, attrs, kind.upper())
    kind = _string(attrs.get(TRACELOOP_KIND))
    if kind is not None:
        return _string(attrs.get("gen_ai.operation.name")) or TRACELOOP_OPERATIONS.get(kind, CHAIN)
    return None


def _openinference(name: str, attrs: dict, kind: str) -> str:
    for source, target in OI_ALIASES:
        if source in attrs and target not in attrs:
            attrs[target] = attrs[source]
    if kind == "AGENT" and "gen_ai.agent.name" not in attrs:
        agent = _string(attrs.get("agent.name")) or _string(attrs.get("graph.node.id")) or \
            AGENT_NAME_SUFFIX.sub("", name)
        attrs["gen_ai.agent.name"] = {"stringValue": agent}
    elif kind == "LLM" and "gen_ai.output.messages" not in attrs:
        calls = _tool_calls(attrs)
        if calls:
            attrs["gen_ai.output.messages"] = {"stringValue": json.dumps([{"role": "assistant", "parts": calls}])}
    if "input.value" in attrs:
        target = "gen_ai.tool.call.arguments" if kind == "TOOL" else "gen_ai.input.messages"
        attrs.setdefault(target, attrs["input.value"])
    if "output.value" in attrs:
        target = "gen_ai.tool.call.result" if kind == "TOOL" else "gen_ai.output.messages"
        attrs.setdefault(target, attrs["output.value"])
    return OI_OPERATIONS.get(kind, CHAIN)


def _tool_calls(attrs: dict) -> list[dict]:
    """The tool calls of an OpenInference LLM span as GenAI message parts (ids and names)."""
    calls: dict[tuple[int, int], dict] = {}
    for key, value in attrs.items():
        if key.startswith("llm.output_messages.") and "tool_calls" in key:
            match = TOOL_CALL.match(key)
            if match:
                part = calls.setdefault((int(match[1]), int(match[2])), {"type": "tool_call"})
                part["id" if match[3] == "id" else "name"] = _string(value)
    return [calls[k] for k in sorted(calls)]


def unflatten(pairs: dict):
    """Flattened attributes under one prefix (`0.message.role`, `0.message.tool_calls.1.tool_call.id`, ...) as
    the nested value they flatten: a level whose keys are all numbers is a list, in their order."""
    root: dict = {}
    for key, value in pairs.items():
        node = root
        *steps, last = key.split(".")
        for step in steps:
            child = node.get(step)
            if type(child) is not dict:
                child = node[step] = {}
            node = child
        if type(node.get(last)) is not dict:
            node[last] = value
    return _listed(root)


def _listed(node):
    if type(node) is not dict:
        return node
    items = {key: _listed(value) for key, value in node.items()}
    if items and all(key.isdecimal() for key in items):
        return [items[key] for key in sorted(items, key=int)]
    return items
