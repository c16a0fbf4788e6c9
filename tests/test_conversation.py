"""domain.conversation: what an event said, read as messages of parts, on the content the importers keep from the
recorded frameworks (tests/fixtures) and on each shape the module names."""

import copy
import json
import random
from pathlib import Path

import pytest

from app.domain.conversation import conversation
from app.ingest.importers import load_session_dir
from app.ingest.importers.claude_code import import_session
from app.ingest.importers.openai_agents import import_agents
from app.ingest.importers.otlp import import_otlp
from app.ingest.importers.otlp_protobuf import decode_request

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FRAMEWORKS = FIXTURES / "frameworks"
PART_KEYS = {"text": {"kind", "text"}, "tool_call": {"kind", "name", "arguments", "id"},
             "tool_result": {"kind", "id", "result"}, "thinking": {"kind", "text"}, "data": {"kind", "value"}}
MODEL_CALLS = ("message", "orchestrator_decision")


def fixture_traces() -> dict[str, dict]:
    """Every recorded fixture, imported as the app imports it."""
    traces = {}
    for folder in sorted(FRAMEWORKS.iterdir()):
        bodies = sorted(folder.glob("batch-*.pb"))
        if bodies:
            docs = [decode_request(body.read_bytes()) for body in bodies]
            traces[folder.name] = import_otlp({"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}).traces[0]
        posts = sorted(folder.glob("batch-*.json"))
        if posts:
            traces[folder.name] = import_agents([r for p in posts for r in json.loads(p.read_text())["data"]]).traces[0]
    for path in sorted((FIXTURES / "openai_agents").glob("*.json")):
        traces[f"openai_agents/{path.stem}"] = import_agents(json.loads(path.read_text())).traces[0]
    for path in sorted((FIXTURES / "otlp").glob("*.json")):
        traces[f"otlp/{path.stem}"] = import_otlp(json.loads(path.read_text())).traces[0]
    for path in sorted((FIXTURES / "claude_code").glob("*.jsonl")):
        traces[f"claude_code/{path.stem}"] = import_session(*load_session_dir(path)).traces[0]
    return traces


TRACES = fixture_traces()


def well_formed(messages: list[dict]) -> None:
    assert messages
    for message in messages:
        assert set(message) == {"role", "parts"} and isinstance(message["role"], str) and message["parts"]
        for part in message["parts"]:
            assert set(part) == PART_KEYS[part["kind"]], part
            if part["kind"] in ("text", "thinking"):
                assert isinstance(part["text"], str)
            if part["kind"] == "tool_call":
                assert isinstance(part["name"], str)
            if part["kind"] in ("tool_call", "tool_result"):
                assert part["id"] is None or isinstance(part["id"], str)


def is_model_call(event: dict) -> bool:
    """A model call of any importer: a GenAI chat span, an Agents SDK generation, a Claude Code response."""
    return event["type"] in MODEL_CALLS and (event.get("span_type") == "generation" or "message_id" in event or (
        event.get("operation") not in (None, "invoke_agent") and "span_type" not in event))


@pytest.mark.parametrize("name", sorted(TRACES))
def test_every_kept_content_of_every_fixture_reads_as_messages_or_as_not_a_conversation(name):
    events = [e for e in TRACES[name]["events"] if "content" in e]
    read = {e["id"]: conversation(e["content"]) for e in events}
    for messages in read.values():
        if messages is not None:
            well_formed(messages)
    calls = [e for e in events if is_model_call(e)]
    for call in calls:  # what a model was asked and what it answered is a conversation, the answer last
        assert read[call["id"]] is not None, (name, call["id"])
        assert read[call["id"]][-1]["role"] == "assistant", (name, call["id"])
    assert any(read.values()) or name.startswith("agents_sdk_native") or name == "autogen", name


def parts_of(name: str, match) -> list[tuple]:
    event = next(e for e in TRACES[name]["events"] if match(e))
    return [(m["role"], p["kind"], p.get("text") or p.get("name") or p.get("result"))
            for m in conversation(event["content"]) for p in m["parts"]]


def test_otel_genai_parts_from_pydantic_ai():
    said = parts_of("pydantic_ai", lambda e: e["type"] == "orchestrator_decision")
    assert said == [("user", "text", "write a report"), ("assistant", "tool_call", "ask_researcher"),
                    ("assistant", "tool_call", "ask_writer")]
    call = conversation(next(e for e in TRACES["pydantic_ai"]["events"] if e["type"] == "orchestrator_decision")[
        "content"])[1]["parts"][0]
    assert call["arguments"] == {"q": "a"} and call["id"] == "pyd_ai_tool_call_id__ask_researcher"
    answered = parts_of("pydantic_ai", lambda e: e["type"] == "message" and e.get("operation") == "chat"
                        and "tool_call_response" in json.dumps(e["content"]))
    assert ("user", "tool_result", "results for a") in answered  # pydantic-ai names the response `result`


def test_openinference_messages_and_responses_items_of_the_agents_sdk():
    for name in ("agents_sdk_openinference", "agents_sdk_openllmetry"):
        said = parts_of(name, lambda e: e["type"] == "message" and e.get("tool") is None
                        and "Storm" in json.dumps(e.get("content")))
        assert said[:2] == [("system", "text", "Research shipping delays with the search tool."),
                            ("user", "text", "Why is order A-1001 late?")]
        assert ("assistant", "tool_call", "search") in said and said[-1][0] == "assistant"
    said = parts_of("openai_agents/handoff_guardrails", lambda e: e.get("span_type") == "generation"
                    and "refund done" in json.dumps(e["content"]))
    assert said == [("user", "text", "refund order 7"), ("assistant", "tool_call", "transfer_to_billing"),
                    ("tool", "tool_result", {"assistant": "billing"}), ("assistant", "tool_call", "refund"),
                    ("tool", "tool_result", "refunded"), ("assistant", "text", "refund done")]


def test_langchain_messages_from_langsmith_and_openinference():
    for name in ("langgraph_langsmith_otel", "langgraph_openinference"):
        said = parts_of(name, lambda e: e["type"] == "orchestrator_decision")
        assert said == [("system", "text", "Delegate to research_expert and math_expert."),
                        ("user", "text", "How many moons has Mars? And 2+3, 4*5?"),
                        ("assistant", "tool_call", "transfer_to_research_expert")], name
    returned = parts_of("langgraph_langsmith_otel", lambda e: e["type"] in ("return", "despawn") and e["role"] == "research_expert")
    assert returned[0] == ("assistant", "text", "Mars has 2 moons.")
    result = parts_of("langgraph_langsmith_otel", lambda e: e["type"] == "tool_result" and e["tool"] == "web_search")
    assert result == [("tool", "tool_result", "2 moons: Phobos, Deimos.")]


def test_anthropic_blocks_from_claude_code():
    said = parts_of("claude_code/parallel", lambda e: e.get("message_id") == "msg_A")
    assert said == [("assistant", "text", "I'll look at both modules in parallel."), ("assistant", "tool_call", "Task"),
                    ("assistant", "tool_call", "Task")]
    assert parts_of("claude_code/parallel", lambda e: e["agent"] == "user") == [
        ("", "text", "Compare the parser and the lexer modules.")]  # the content says no speaker
    assert conversation(next(e for e in TRACES["claude_code/parallel"]["events"] if e["type"] == "spawn")[
        "content"]) is None  # a Task call's input is not a conversation: shown as JSON


def test_tool_arguments_and_records_are_not_conversations():
    for content in ({"q": "a"}, '{"order_id": "A-1001"}', [{"id": 1, "name": "x"}], 5, None, True, "", "  ",
                    {"input": {"q": 1}}, [], {}, [[{"q": 1}]]):
        assert conversation(content) is None, content


@pytest.mark.parametrize("content, expected", [
    ("plain words", [{"role": "", "parts": [{"kind": "text", "text": "plain words"}]}]),
    ([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "done"}],
     [{"role": "user", "parts": [{"kind": "text", "text": "hi"}]},
      {"role": "assistant", "parts": [{"kind": "tool_call", "name": "f", "arguments": {"x": 1}, "id": "c1"}]},
      {"role": "tool", "parts": [{"kind": "tool_result", "id": "c1", "result": "done"}]}]),
    ({"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                       {"type": "text", "text": "yes"},
                                       {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
     [{"role": "assistant", "parts": [{"kind": "thinking", "text": "hmm"}, {"kind": "text", "text": "yes"},
                                      {"kind": "tool_call", "name": "Bash", "arguments": {"command": "ls"},
                                       "id": "t1"}]}]),
    ([{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.py"}]}],
     [{"role": "", "parts": [{"kind": "tool_result", "id": "t1", "result": "a.py"}]}]),
    ([{"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
      {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c2", "output": "[1, 2]"},
      {"type": "web_search_call", "id": "w", "status": "completed"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}],
     [{"role": "assistant", "parts": [{"kind": "thinking", "text": "plan"}]},
      {"role": "assistant", "parts": [{"kind": "tool_call", "name": "g", "arguments": {}, "id": "c2"}]},
      {"role": "tool", "parts": [{"kind": "tool_result", "id": "c2", "result": [1, 2]}]},
      {"role": "assistant", "parts": [{"kind": "data", "value": {"type": "web_search_call", "id": "w",
                                                                   "status": "completed"}}]},
      {"role": "assistant", "parts": [{"kind": "text", "text": "ok"}]}]),
    ({"system": "Be brief.", "input": "2+2?", "output": [{"role": "assistant", "parts": [
        {"type": "text", "content": "4"}, {"type": "image", "uri": "x"}]}]},
     [{"role": "system", "parts": [{"kind": "text", "text": "Be brief."}]},
      {"role": "user", "parts": [{"kind": "text", "text": "2+2?"}]},
      {"role": "assistant", "parts": [{"kind": "text", "text": "4"}, {"kind": "data", "value": {"type": "image",
                                                                                              "uri": "x"}}]}]),
    ({"input": [{"role": "user", "content": "go"}], "output": {"graph": "__parent__"}},
     [{"role": "user", "parts": [{"kind": "text", "text": "go"}]},
      {"role": "assistant", "parts": [{"kind": "data", "value": {"graph": "__parent__"}}]}]),
    ([{"message": {"role": "assistant", "tool_calls": [{"tool_call": {"id": "c3", "function": {
        "name": "h", "arguments": "not json"}}}]}}],
     [{"role": "assistant", "parts": [{"kind": "tool_call", "name": "h", "arguments": "not json", "id": "c3"}]}]),
    ({"generations": [[{"text": "", "message": {"lc": 1, "type": "constructor",
                                                 "id": ["langchain", "schema", "messages", "AIMessage"],
                                                 "kwargs": {"content": "hello", "type": "ai"}}}]]},
     [{"role": "assistant", "parts": [{"kind": "text", "text": "hello"}]}]),
    ('[{"role": "user", "parts": [{"type": "text", "content": "as JSON text"}]}]',
     [{"role": "user", "parts": [{"kind": "text", "text": "as JSON text"}]}]),
])
def test_each_shape(content, expected):
    assert conversation(content) == expected


def test_odd_values_anywhere_in_fixture_content_never_raise():
    rng = random.Random(11)
    odd = [None, 0, 1.5, "", "x", [], {}, True, [1], {"a": 1}, {"type": "text"}, {"role": 5}, "{", "[[["]
    contents = [e["content"] for trace in TRACES.values() for e in trace["events"] if "content" in e]
    for _ in range(600):
        content = copy.deepcopy(rng.choice(contents))
        holder = {"content": content}
        places = [(holder, "content")]
        stack = [content]
        while stack:
            value = stack.pop()
            children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
            for key, child in children:
                places.append((value, key))
                stack.append(child)
        for parent, key in rng.sample(places, min(len(places), rng.randint(1, 3))):
            parent[key] = copy.deepcopy(rng.choice(odd))
        messages = conversation(holder["content"])
        if messages is not None:
            well_formed(messages)
