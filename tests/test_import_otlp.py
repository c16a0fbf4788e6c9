"""The OTLP/JSON importer (IMPORTERS.md §1): OpenTelemetry GenAI spans onto orchestration traces.

Real spans come from pydantic-ai agents on its offline TestModel, exported by the OpenTelemetry SDK
and encoded by the official OTLP encoder; tests/fixtures/otlp/ keeps one such capture so the mapping
is also checked where those libraries are not installed. Odd cases use hand-written spans.
"""

import base64
import copy
import gc
import json
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from imported import edges, first_event, one, only_trace, otlp_json_of, timeline_pairs

from app.domain.validation import validate_trace
from app.ingest.importers.common import CONTENT_CAP_BYTES, ImportFailed
from app.ingest.importers.openai_agents import looks_like_openai_agents
from app.ingest.importers.otlp import NO_AGENT_SPAN, import_otlp, looks_like_otlp

FIXTURES = Path(__file__).parent / "fixtures" / "otlp"
HAND_TRACE = "5b8efff798038103d269b633813fc60c"
T0_NS = 1_700_000_000_000_000_000
NS_PER_MS = 1_000_000
BENCHMARK_SPANS = 20_000


# ---- reading results ---------------------------------------------------------------------------

def spans_of(doc: dict) -> list[dict]:
    return [span for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def attribute(span: dict, key: str):
    value = next((a["value"] for a in span.get("attributes", []) if a["key"] == key), None)
    return None if value is None else next(iter(value.values()))


def check_format_rules(trace: dict) -> None:
    """IMPORTERS.md §0 rules every imported trace keeps."""
    events = trace["events"]
    ts = [e["t"] for e in events]
    assert ts == sorted(ts) and ts[0] == 0
    assert len({e["id"] for e in events}) == len(events)
    assert all(e["span_id"] and e["trace_id"] for e in events)
    assert all(e["t"] <= trace["costs"]["wall_clock_s"] for e in events)
    assert edges(trace, "temporal") == timeline_pairs(trace)


# ---- real spans: pydantic-ai on its TestModel --------------------------------------------------

def capture_otlp(run, include_content: bool = True, hex_ids: bool = True) -> dict:
    """Run a pydantic-ai scenario with instrumentation into memory; the spans as an OTLP JSON document
    (see otlp_json_of for hex_ids)."""
    pytest.importorskip("pydantic_ai", reason="pydantic-ai-slim emits GenAI spans offline with TestModel")
    pytest.importorskip("opentelemetry.sdk", reason="opentelemetry-sdk records the spans in memory")
    pytest.importorskip("opentelemetry.exporter.otlp.proto.common.trace_encoder",
                        reason="opentelemetry-exporter-otlp-proto-common encodes OTLP")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from pydantic_ai.models.instrumented import InstrumentationSettings

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run(InstrumentationSettings(tracer_provider=provider, include_content=include_content))
    return otlp_json_of(exporter.get_finished_spans(), hex_ids)


def run_delegation(settings) -> None:
    """A lead delegating to two sub-agents through tools (agent as tool); each calls a tool of its own."""
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.test import TestModel

    researcher = Agent(TestModel(), name="researcher")
    writer = Agent(TestModel(), name="writer")
    lead = Agent(TestModel(), name="lead")

    @researcher.tool_plain
    def search(q: str) -> str:
        return f"results for {q}"

    @writer.tool_plain
    def draft(topic: str) -> str:
        return f"draft on {topic}"

    @lead.tool
    async def ask_researcher(ctx: RunContext, q: str) -> str:
        return (await researcher.run(q, usage=ctx.usage)).output

    @lead.tool
    async def ask_writer(ctx: RunContext, topic: str) -> str:
        return (await writer.run(topic, usage=ctx.usage)).output

    for agent in (researcher, writer, lead):
        agent.instrument = settings
    lead.run_sync("write a report")


def run_panel(settings) -> None:
    """One tool fans out to two critics at once; each critic delegates to a checker (two levels)."""
    import asyncio

    from pydantic_ai import Agent, RunContext
    from pydantic_ai.models.test import TestModel

    checker = Agent(TestModel(), name="checker")
    critic = Agent(TestModel(), name="critic")
    lead = Agent(TestModel(), name="lead")

    @checker.tool_plain
    def lookup(q: str) -> str:
        return "fact"

    @critic.tool
    async def verify(ctx: RunContext, claim: str) -> str:
        return (await checker.run(claim, usage=ctx.usage)).output

    @lead.tool
    async def panel(ctx: RunContext, topic: str) -> str:
        first, second = await asyncio.gather(critic.run(topic, usage=ctx.usage), critic.run(topic, usage=ctx.usage))
        return first.output + second.output

    for agent in (checker, critic, lead):
        agent.instrument = settings
    lead.run_sync("review")


@pytest.fixture(scope="module")
def delegation_doc() -> dict:
    return capture_otlp(run_delegation)


@pytest.fixture(scope="module")
def recorded_doc() -> dict:
    """The delegation scenario as captured from pydantic-ai 2.68 / opentelemetry-sdk 1.45."""
    return json.loads((FIXTURES / "pydantic_ai_delegation.json").read_text())


def check_delegation(doc: dict) -> None:
    """Spawns, returns, tool pairs, decisions and tokens of the delegation scenario."""
    result = import_otlp(doc)
    assert result.warnings == []
    trace = only_trace(result)
    check_format_rules(trace)
    spans = spans_of(doc)
    assert trace["trace_id"] == f"otlp-{spans[0]['traceId']}"
    assert trace["system"] == "pydantic-ai" and trace["topology"] == "centralized"
    events = trace["events"]
    causal, returns = edges(trace, "causal"), edges(trace, "return")

    request = events[0]
    assert request["type"] == "message" and request["agent"] == request["from"] == "user"
    lead = request["to"]
    assert lead.startswith("lead#")
    assert (request["id"], first_event(trace, lead)["id"]) in edges(trace, "message")
    assert trace["task_id"] == request["conversation_id"]

    spawns = [e for e in events if e["type"] == "spawn"]
    assert sorted(e["role"] for e in spawns) == ["researcher", "writer"]
    for spawn, tool, own_tool in ((e, f"ask_{e['role']}", {"researcher": "search", "writer": "draft"}[e["role"]])
                                  for e in spawns):
        child = spawn["to"]
        assert spawn["agent"] == lead and child.startswith(spawn["role"] + "#")
        call = one(e for e in events if e["type"] == "tool_call" and e["tool"] == tool)
        answer = one(e for e in events if e["type"] == "tool_result" and e["tool"] == tool)
        returned = one(e for e in events if e["type"] == "return" and e["agent"] == child)
        assert (call["id"], spawn["id"]) in causal
        assert (spawn["id"], first_event(trace, child)["id"]) in edges(trace, "spawn")
        assert returned["from"] == child and returned["to"] == lead
        assert (returned["id"], answer["id"]) in returns
        assert one(e for e in events if e["type"] == "tool_call" and e["agent"] == child)["tool"] == own_tool
    assert one(e for e in events if e["type"] == "return" and e["agent"] == lead)["to"] == "user"

    calls = [e for e in events if e["type"] == "tool_call"]
    by_id = {e["id"]: e for e in events}
    assert {(by_id[s]["span_id"], by_id[d]["span_id"]) for s, d in edges(trace, "tool_dependency")} == \
        {(e["span_id"], e["span_id"]) for e in calls}
    model_events = [e for e in events if e["type"] in ("orchestrator_decision", "message") and e["agent"] != "user"]
    for call in calls:  # each tool call was asked for by a model output of its own agent
        assert any((m["id"], call["id"]) in causal and m["agent"] == call["agent"] for m in model_events)
        answer = one(e for e in events if e["type"] == "tool_result" and e["span_id"] == call["span_id"])
        later = [m for m in model_events if m["agent"] == call["agent"] and m["t"] > answer["t"]]
        assert (answer["id"], later[0]["id"]) in causal  # and its result feeds the agent's next model call
    decisions = [e for e in events if e["type"] == "orchestrator_decision"]
    assert [e["agent"] for e in decisions] == [lead]  # only the spawning agent decides; the others message

    chats = [s for s in spans if attribute(s, "gen_ai.operation.name") == "chat"]
    tokens = sum(int(attribute(s, "gen_ai.usage.input_tokens")) + int(attribute(s, "gen_ai.usage.output_tokens"))
                 for s in chats)
    assert any(attribute(s, "gen_ai.aggregated_usage.input_tokens") for s in spans)  # present, and not counted
    assert trace["costs"]["tokens"] == tokens
    assert sum(e.get("tokens_in", 0) + e.get("tokens_out", 0) for e in model_events) == tokens
    assert trace["costs"]["messages"] == len(chats) == len(model_events)
    assert trace["costs"]["tool_calls"] == len(calls) == 4


def test_pydantic_ai_delegation(delegation_doc):
    check_delegation(delegation_doc)


def test_recorded_pydantic_ai_delegation(recorded_doc):
    check_delegation(recorded_doc)


def test_plain_protobuf_json_gives_the_same_trace():
    """Base64 ids and enum names (MessageToDict's defaults) decode to what OTLP/JSON proper gives."""
    plain = capture_otlp(run_delegation, hex_ids=False)
    assert plain["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["kind"].startswith("SPAN_KIND_")
    proper = copy.deepcopy(plain)
    for span in spans_of(proper):
        span["kind"] = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_CLIENT": 3}[span["kind"]]
        for key in ("traceId", "spanId", "parentSpanId"):
            if span.get(key):
                span[key] = base64.b64decode(span[key]).hex()
    assert import_otlp(plain).traces == import_otlp(proper).traces


def test_fan_out_ends_in_an_aggregate_and_two_levels_are_hierarchical():
    trace = only_trace(import_otlp(capture_otlp(run_panel, include_content=False)))
    check_format_rules(trace)
    assert trace["topology"] == "hierarchical"
    events = trace["events"]
    aggregate = one(e for e in events if e["type"] == "aggregate")
    assert aggregate["tool"] == "panel" and aggregate["agent"].startswith("lead#") and aggregate["inputs"] == 2
    critics = [e for e in events if e["type"] == "return" and e["role"] == "critic"]
    assert len({e["agent"] for e in critics}) == 2  # two instances of one agent definition
    assert {(e["id"], aggregate["id"]) for e in critics} == {pair for pair in edges(trace, "aggregate")}
    call = one(e for e in events if e["type"] == "tool_call" and e["tool"] == "panel")
    assert (call["id"], aggregate["id"]) in edges(trace, "tool_dependency")
    checker_spawns = [e for e in events if e["type"] == "spawn" and e["role"] == "checker"]
    assert {e["agent"] for e in checker_spawns} == {e["agent"] for e in critics}
    # critics spawn, so their tool-asking model calls are decisions; checkers only message
    assert {e["role"] for e in events if e["type"] == "orchestrator_decision"} == {"lead", "critic"}


def test_content_is_kept_unless_the_policy_is_hash(recorded_doc):
    hashed = only_trace(import_otlp(recorded_doc, "hash"))
    text = json.dumps(hashed)
    assert "results for" in json.dumps(recorded_doc) and "results for" not in text
    assert not {"content", "content_cut"} & {key for e in hashed["events"] for key in e}
    refs = [e["content_ref"] for e in hashed["events"] if e["type"] in ("message", "tool_result", "return")
            and "content_ref" in e]
    assert refs and all(ref.startswith("sha256:") for ref in refs)
    call = next(e for e in hashed["events"] if e["type"] == "tool_call")
    assert call["content_ref"] == call["tool_call_id"]  # a tool call points at its call id (spec)

    kept = only_trace(import_otlp(recorded_doc))
    assert kept == only_trace(import_otlp(recorded_doc, "keep"))  # keeping is the default
    search = one(e for e in kept["events"] if e["type"] == "tool_result" and e["tool"] == "search")
    assert search["content"] == "results for a"
    assert one(e for e in kept["events"] if e["type"] == "tool_call" and e["tool"] == "search")["content"] == {"q": "a"}
    decision = next(e for e in kept["events"] if e["type"] == "orchestrator_decision")
    assert decision["content"]["input"] == [{"role": "user", "parts": [{"type": "text", "content": "write a report"}]}]
    assert decision["content"]["output"][0]["parts"][0]["type"] == "tool_call"  # JSON attributes arrive parsed
    # pydantic-ai writes no input on its agent spans: the run's input is what its history starts with
    assert first_event(kept, "user")["content"] == [{"role": "user", "parts": [{"type": "text",
                                                                                 "content": "write a report"}]}]
    assert all("content" in e for e in kept["events"])  # every span of this run carried content
    assert [{k: v for k, v in e.items() if k != "content"} for e in kept["events"]] == hashed["events"]


# ---- hand-written spans: the odd cases ---------------------------------------------------------

def attr(key: str, value) -> dict:
    if isinstance(value, bool):
        encoded = {"boolValue": value}
    elif isinstance(value, int):
        encoded = {"intValue": str(value)}
    elif isinstance(value, float):
        encoded = {"doubleValue": value}
    else:
        encoded = {"stringValue": value if isinstance(value, str) else json.dumps(value)}
    return {"key": key, "value": encoded}


def span(number: int, name: str, parent: int = 0, start_ms: float = 0, end_ms: float = 1, trace: str = HAND_TRACE,
         **attrs) -> dict:
    """A span in OTLP/JSON; attribute names use __ for dots (gen_ai__agent__name)."""
    return {
        "traceId": trace, "spanId": f"{number:016x}", "parentSpanId": f"{parent:016x}" if parent else "",
        "name": name, "kind": 1, "flags": 256, "status": {},
        "startTimeUnixNano": str(T0_NS + int(start_ms * NS_PER_MS)),
        "endTimeUnixNano": str(T0_NS + int(end_ms * NS_PER_MS)),
        "attributes": [attr(key.replace("__", "."), value) for key, value in attrs.items()],
    }


def document(*spans, service: str = "svc") -> dict:
    return {"resourceSpans": [{"resource": {"attributes": [attr("service.name", service)]},
                               "scopeSpans": [{"scope": {"name": "hand", "version": "1"}, "spans": list(spans)}]}]}


def tool_output(call_id: str, name: str) -> list:
    return [{"role": "assistant", "parts": [{"type": "tool_call", "id": call_id, "name": name, "arguments": {}}]}]


def delegation_spans() -> list[dict]:
    """lead -> chat asking for `delegate` -> execute_tool -> invoke_agent worker -> chat; 0..10 ms."""
    return [
        span(1, "invoke_agent lead", 0, 0, 10, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="lead"),
        span(2, "chat m", 1, 0.5, 1, gen_ai__operation__name="chat", gen_ai__request__model="m",
             gen_ai__usage__input_tokens=10, gen_ai__usage__output_tokens=2,
             gen_ai__output__messages=tool_output("c1", "delegate")),
        span(3, "execute_tool delegate", 1, 2, 8, gen_ai__operation__name="execute_tool",
             gen_ai__tool__name="delegate", gen_ai__tool__call__id="c1"),
        span(4, "invoke_agent worker", 3, 3, 7, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="worker"),
        span(5, "chat m", 4, 4, 5, gen_ai__operation__name="chat", gen_ai__request__model="m",
             gen_ai__usage__input_tokens=5, gen_ai__usage__output_tokens=1),
        span(6, "chat m", 1, 8.5, 9, gen_ai__operation__name="chat", gen_ai__request__model="m",
             gen_ai__usage__input_tokens=20, gen_ai__usage__output_tokens=3),
    ]


def test_hand_written_delegation_times_ids_and_tokens():
    trace = only_trace(import_otlp(document(*delegation_spans())))
    check_format_rules(trace)
    assert trace["trace_id"] == f"otlp-{HAND_TRACE}" and trace["task_id"] == HAND_TRACE  # no conversation id
    assert trace["system"] == "hand"
    summary = [(e["t"], e["type"], e["agent"].split("#")[0]) for e in trace["events"]]
    assert summary == [
        (0.0, "message", "user"), (0.001, "orchestrator_decision", "lead"), (0.002, "tool_call", "lead"),
        (0.003, "spawn", "lead"), (0.005, "message", "worker"), (0.007, "return", "worker"),
        (0.008, "tool_result", "delegate"), (0.009, "message", "lead"), (0.01, "return", "lead"),
    ]
    assert trace["events"][3]["to"] == f"worker#{4:016x}"  # instance id falls back to the spanId
    assert trace["costs"] == {"tokens": 41, "wall_clock_s": 0.01, "tool_calls": 1, "messages": 3}
    assert trace["events"][1]["tokens_in"] == 10 and trace["events"][1]["tokens_out"] == 2
    assert trace["rewards"] == {} and trace["metrics"] == {}


def test_model_output_without_ids_links_to_the_latest_earlier_call():
    spans = delegation_spans()
    spans[1]["attributes"] = [a for a in spans[1]["attributes"] if a["key"] != "gen_ai.output.messages"]
    trace = only_trace(import_otlp(document(*spans)))
    decision = one(e for e in trace["events"] if e["type"] == "orchestrator_decision")
    call = one(e for e in trace["events"] if e["type"] == "tool_call")
    assert (decision["id"], call["id"]) in edges(trace, "causal")


def test_unknown_operations_and_kinds_are_warnings_and_agentless_spans_belong_to_the_service():
    spans = [
        span(1, "GET /api", 0, 0, 10),
        span(2, "chat m", 1, 1, 2, gen_ai__operation__name="chat", gen_ai__usage__input_tokens=3),
        span(3, "dance wildly", 1, 3, 4),
        span(4, "rerank docs", 1, 5, 6, gen_ai__operation__name="rerank"),
    ]
    spans[1]["kind"] = 9
    result = import_otlp(document(*spans, service="billing-api"))
    trace = only_trace(result)
    assert one(trace["events"])["agent"] == "billing-api"
    assert trace["system"] == "hand" and trace["topology"] == "unknown"
    assert trace["events"][0]["t"] == 0.002  # at the chat's end, counted from the earliest span, GenAI or not
    skipped = ": no agent, model or tool span below them"  # GET holds the chat: it gives structure, not skipped
    assert sorted(result.warnings) == sorted([
        "1 span(s) of unknown kind 9: read as INTERNAL",
        f"trace {HAND_TRACE}: 1 span(s) with unknown operation 'dance' skipped{skipped}",
        f"trace {HAND_TRACE}: 1 span(s) with unknown operation 'rerank' skipped{skipped}",
    ])


def test_an_attribute_key_given_twice_in_a_span_is_a_warning_and_the_last_value_is_read():
    spans = [span(1, "chat m", 0, 1, 2, gen_ai__operation__name="chat", gen_ai__usage__input_tokens=3)]
    spans[0]["attributes"].insert(0, attr("gen_ai.usage.input_tokens", 99))
    result = import_otlp(document(*spans))
    assert result.warnings == [
        "1 span(s) give the attribute 'gen_ai.usage.input_tokens' more than once: the last value was read"]
    assert only_trace(result)["events"][0]["tokens_in"] == 3


def test_a_trace_without_genai_spans_is_skipped_with_a_warning():
    genai = document(*delegation_spans())
    other = span(1, "GET /health", trace="0" * 31 + "1")
    genai["resourceSpans"][0]["scopeSpans"][0]["spans"].append(other)
    result = import_otlp(genai)
    assert len(result.traces) == 1
    assert f"trace {'0' * 31}1: {NO_AGENT_SPAN}, skipped" in result.warnings
    # an exporter batch may hold only such spans: nothing to import, but nothing malformed either
    assert import_otlp(document(other)).traces == []
    assert import_otlp({"resourceSpans": []}).warnings == ["the document has no spans"]


def test_one_trace_per_trace_id_in_order_of_appearance():
    second = "a" * 32
    spans = delegation_spans() + [span(n + 10, "chat m", 0, 1, 2, trace=second, gen_ai__operation__name="chat")
                                  for n in range(2)]
    result = import_otlp(document(*spans))
    assert [t["trace_id"] for t in result.traces] == [f"otlp-{HAND_TRACE}", f"otlp-{second}"]
    assert all(validate_trace(t) == [] for t in result.traces)


WHERE = r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[2\]"


@pytest.mark.parametrize("change, message", [
    ({"startTimeUnixNano": "x"}, WHERE + r" \(spanId 0000000000000003\): startTimeUnixNano 'x' is not a number"),
    ({"endTimeUnixNano": None}, WHERE + r" \(spanId 0000000000000003\): missing endTimeUnixNano"),
    ({"endTimeUnixNano": "1"}, WHERE + r" \(spanId 0000000000000003\): endTimeUnixNano 1 is before"),
    ({"startTimeUnixNano": "-5"}, WHERE + r" \(spanId 0000000000000003\): startTimeUnixNano -5 is below 0"),
    ({"spanId": None}, WHERE + r": spanId None is missing"),
    ({"spanId": "xyz"}, WHERE + r": spanId 'xyz' is neither 16 hex digits nor base64 of 8 bytes"),
    ({"traceId": "abc"}, WHERE + r" \(spanId 0000000000000003\): traceId 'abc' is neither 32 hex digits"),
    ({"parentSpanId": 7}, WHERE + r" \(spanId 0000000000000003\): parentSpanId 7 is missing or not a string"),
    ({"attributes": {"a": 1}}, WHERE + r" \(spanId 0000000000000003\): attributes must be an array"),
    ({"status": "bad"}, WHERE + r" \(spanId 0000000000000003\): status 'bad' is not an object"),
    ({"name": 5}, WHERE + r" \(spanId 0000000000000003\): name 5 is not a string"),
    ({"attributes": [attr("gen_ai.operation.name", "execute_tool"),
                     {"key": "gen_ai.tool.call.id", "value": {"intValue": "abc"}}]},
     WHERE + r" \(spanId 0000000000000003\): attribute gen_ai.tool.call.id: intValue 'abc' is not an integer"),
    ({"attributes": [{"key": "gen_ai.operation.name", "value": {"arrayValue": "x"}}]},
     WHERE + r" \(spanId 0000000000000003\): arrayValue 'x' is not an object"),
    ({"attributes": [{"key": "gen_ai.operation.name", "value": {"kvlistValue": {"values": [{}]}}}]},
     WHERE + r" \(spanId 0000000000000003\): kvlistValue .* holds an entry without a string key"),
    ({"attributes": [attr("gen_ai.operation.name", "invoke_agent"), {"key": "gen_ai.agent.name", "value": "a"}]},
     WHERE + r" \(spanId 0000000000000003\): attribute gen_ai.agent.name: 'a' is not an AnyValue object"),
])
def test_malformed_spans_are_refused_naming_the_span(change, message):
    spans = delegation_spans()
    for key, value in change.items():
        if value is None:
            del spans[2][key]
        else:
            spans[2][key] = value
    with pytest.raises(ImportFailed, match=message):
        import_otlp(document(*spans))


def test_bad_token_counts_and_shapes_are_refused():
    spans = delegation_spans()
    spans[1]["attributes"].append(attr("gen_ai.usage.input_tokens", "lots"))
    spans[1]["attributes"] = [a for a in spans[1]["attributes"]
                              if a != attr("gen_ai.usage.input_tokens", 10)]
    with pytest.raises(ImportFailed, match=r"spans\[1\] \(spanId 0000000000000002\): attribute "
                                           r"gen_ai.usage.input_tokens: 'lots' is not a token count"):
        import_otlp(document(*spans))
    for doc, message in (({"resourceSpans": [5]}, r"resourceSpans\[0\]: 5 is not an object"),
                         ({"resourceSpans": [{"scopeSpans": {}}]}, r"resourceSpans\[0\]\.scopeSpans: \{\} is not"),
                         ({"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]},
                          r"resourceSpans\[0\]\.scopeSpans\[0\]\.spans\[0\]: 1 is not an object"),
                         ({"data": []}, "not an OTLP/JSON traces document")):
        with pytest.raises(ImportFailed, match=message):
            import_otlp(doc)


def test_missing_parents_and_duplicates_are_warnings_cycles_are_refused():
    spans = delegation_spans()
    orphan = span(9, "chat m", 99, 1, 2, gen_ai__operation__name="chat")
    result = import_otlp(document(*spans, copy.deepcopy(spans[1]), orphan))
    trace = only_trace(result)
    assert result.warnings == [
        f"resourceSpans[0].scopeSpans[0].spans[6] (spanId {2:016x}): duplicate spanId in trace {HAND_TRACE}, skipped",
        f"trace {HAND_TRACE}: 1 span(s) whose parent is not in the document read as roots",
    ]
    assert trace["costs"]["messages"] == 4  # the duplicate is not counted twice
    looped = delegation_spans()
    looped[0]["parentSpanId"] = f"{4:016x}"
    with pytest.raises(ImportFailed, match=r"spans\[0\] \(spanId 0000000000000001\): parentSpanId "
                                           r"0000000000000004 is part of a cycle"):
        import_otlp(document(*looped))


def test_each_convention_s_content_is_kept_as_it_carried_it():
    """GenAI system instructions; OpenLLMetry's numbered prompts and `traceloop.entity.*`; OpenInference's
    flattened messages and tool call arguments: each read where its convention writes it."""
    spans = [
        span(1, "support.agent", 0, 0, 10, traceloop__span__kind="agent", gen_ai__agent__name="support",
             traceloop__entity__input={"inputs": {"question": "where is my order?"}},
             traceloop__entity__output={"answer": "in Leeds"}),
        span(2, "openai.chat", 1, 1, 2, gen_ai__operation__name="chat", gen_ai__request__model="m",
             gen_ai__system_instructions=[{"type": "text", "content": "Be brief."}],
             gen_ai__prompt__0__role="user", gen_ai__prompt__0__content="where is my order?",
             gen_ai__completion__0__role="assistant", gen_ai__completion__0__tool_calls__0__id="c1",
             gen_ai__completion__0__tool_calls__0__name="lookup",
             gen_ai__completion__0__tool_calls__0__arguments='{"order": "A-1"}'),
        span(3, "lookup.tool", 1, 3, 4, traceloop__span__kind="tool", gen_ai__tool__name="lookup",
             traceloop__entity__input={"order": "A-1"}, traceloop__entity__output="in Leeds"),
        span(4, "ChatModel", 1, 5, 6, openinference__span__kind="LLM", llm__model_name="m",
             input__value="raw request", llm__input_messages__0__message__role="user",
             llm__input_messages__0__message__content="where is my order?",
             llm__output_messages__0__message__role="assistant",
             llm__output_messages__0__message__contents__0__message_content__type="text",
             llm__output_messages__0__message__contents__0__message_content__text="In Leeds."),
        span(5, "search", 1, 7, 8, openinference__span__kind="TOOL", tool__name="search",
             tool_call__function__arguments='{"q": "Leeds"}', input__value="ignored: the call's arguments win",
             output__value="Leeds depot"),
    ]
    trace = only_trace(import_otlp(document(*spans)))
    events = {(e["type"], int(e["span_id"], 16)): e for e in trace["events"]}
    assert events[("message", 1)]["content"] == {"inputs": {"question": "where is my order?"}}
    assert events[("return", 1)]["content"] == {"answer": "in Leeds"}
    assert events[("message", 2)]["content"] == {
        "system": [{"type": "text", "content": "Be brief."}],
        "input": [{"role": "user", "content": "where is my order?"}],
        "output": [{"role": "assistant",
                    "tool_calls": [{"id": "c1", "name": "lookup", "arguments": '{"order": "A-1"}'}]}]}
    assert events[("tool_call", 3)]["content"] == {"order": "A-1"}
    assert events[("tool_result", 3)]["content"] == "in Leeds"
    assert events[("message", 4)]["content"] == {
        "input": [{"message": {"role": "user", "content": "where is my order?"}}],
        "output": [{"message": {"role": "assistant", "contents": [
            {"message_content": {"type": "text", "text": "In Leeds."}}]}}]}
    assert events[("tool_call", 5)]["content"] == {"q": "Leeds"}
    assert events[("tool_result", 5)]["content"] == "Leeds depot"
    assert all("content_ref" in e for e in trace["events"] if "content" in e)


def test_content_over_the_cap_is_cut_keeping_its_shape_and_says_from_what_size():
    dump = {"rows": [{"id": i, "text": f"row {i} " + "x" * 2000} for i in range(100)], "total": 100}
    huge_arguments = {"query": "q" * (3 * CONTENT_CAP_BYTES), "limit": 5}
    spans = [
        span(1, "invoke_agent a", 0, 0, 10, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="a"),
        span(2, "execute_tool dump", 1, 1, 2, gen_ai__operation__name="execute_tool", gen_ai__tool__name="dump",
             gen_ai__tool__call__arguments=huge_arguments, gen_ai__tool__call__result=dump),
        span(3, "execute_tool small", 1, 3, 4, gen_ai__operation__name="execute_tool", gen_ai__tool__name="small",
             gen_ai__tool__call__result="fine"),
    ]
    trace = only_trace(import_otlp(document(*spans)))
    result = one(e for e in trace["events"] if e["type"] == "tool_result" and e["tool"] == "dump")
    size = len(json.dumps(dump, separators=(",", ":")).encode())
    assert result["content_cut"] == {"limit_bytes": CONTENT_CAP_BYTES, "original_bytes": size} and size > 200_000
    kept = result["content"]
    assert len(json.dumps(kept, separators=(",", ":"), ensure_ascii=False).encode()) <= CONTENT_CAP_BYTES
    assert kept["total"] == 100 and len(kept["rows"]) == 100  # the same shape: every row, each one shorter
    assert all(row["id"] == i and row["text"].startswith(f"row {i} x") and row["text"].endswith("…")
               for i, row in enumerate(kept["rows"]))
    call = one(e for e in trace["events"] if e["type"] == "tool_call" and e["tool"] == "dump")
    assert call["content"]["limit"] == 5 and call["content"]["query"].startswith("qqq")
    assert call["content_cut"]["original_bytes"] > 3 * CONTENT_CAP_BYTES
    assert call["content_ref"] == one(e for e in only_trace(import_otlp(document(*spans), "hash"))["events"]
                                      if e["type"] == "tool_call" and e["tool"] == "dump")["content_ref"]
    small = one(e for e in trace["events"] if e["type"] == "tool_result" and e["tool"] == "small")
    assert small["content"] == "fine" and "content_cut" not in small


def test_content_nested_deeper_than_an_event_property_may_be_keeps_its_depths_as_text():
    deep = "leaf"
    for _ in range(100):
        deep = {"next": deep}
    trace = only_trace(import_otlp(document(
        span(1, "invoke_agent a", 0, 0, 10, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="a"),
        span(2, "execute_tool walk", 1, 1, 2, gen_ai__operation__name="execute_tool", gen_ai__tool__name="walk",
             gen_ai__tool__call__result=deep))))  # valid: a content nested 100 levels would not be
    kept, source = one(e for e in trace["events"] if e["type"] == "tool_result")["content"], deep
    for _ in range(64):
        kept, source = kept["next"], source["next"]
    assert json.loads(kept) == source  # the 65th level on, as JSON text


def test_create_agent_plan_embeddings_and_errors():
    spans = [
        span(1, "invoke_agent boss", 0, 0, 20, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="boss",
             gen_ai__agent__id="asst_1", gen_ai__conversation__id="conv-9"),
        span(2, "plan", 1, 1, 2, gen_ai__operation__name="plan"),
        span(3, "create_agent helper", 1, 3, 4, gen_ai__operation__name="create_agent",
             gen_ai__agent__name="helper", gen_ai__agent__id="asst_2"),
        span(4, "embeddings e5", 1, 5, 6, gen_ai__operation__name="embeddings", gen_ai__request__model="e5",
             gen_ai__usage__input_tokens=7),
        span(5, "execute_tool fetch", 1, 7, 8, gen_ai__operation__name="execute_tool", gen_ai__tool__name="fetch",
             error__type="TimeoutError"),
        span(6, "retrieval", 1, 9, 10, gen_ai__operation__name="retrieval", gen_ai__data_source__id="kb"),
    ]
    spans[0]["status"] = {"code": 2, "message": "gave up"}
    trace = only_trace(import_otlp(document(*spans)))
    events = {(e["type"], e.get("tool")): e for e in trace["events"]}
    assert trace["task_id"] == "conv-9"
    boss = events[("message", None)]["to"]
    assert boss == "boss#asst_1"  # gen_ai.agent.id is the instance id when no other run took it
    assert events[("orchestrator_decision", None)]["agent"] == boss
    created = events[("spawn", None)]
    assert created["agent"] == boss and created["to"] == "helper#asst_2" and created["role"] == "helper"
    assert events[("tool_call", "embeddings")]["tokens_in"] == 7 and trace["costs"]["tokens"] == 7
    assert events[("tool_result", "fetch")]["error"] is True
    assert events[("tool_result", "fetch")]["error_type"] == "TimeoutError"
    assert events[("tool_call", "retrieval")]["data_source"] == "kb"
    assert events[("return", None)]["error"] is True and events[("return", None)]["error_message"] == "gave up"
    assert trace["costs"]["tool_calls"] == 3 and trace["costs"]["messages"] == 0
    assert trace["topology"] == "centralized"


def test_runs_of_one_agent_one_after_another_are_one_instance_and_only_concurrent_runs_get_their_own():
    spans = [span(1, "invoke_agent boss", 0, 0, 20, gen_ai__operation__name="invoke_agent",
                  gen_ai__agent__name="boss")]
    for n in range(3):  # one after another: one lane, spawned once, then delegated to again
        spans.append(span(10 + n, "invoke_agent worker", 1, 1 + n, 2 + n, gen_ai__operation__name="invoke_agent",
                          gen_ai__agent__name="worker", gen_ai__agent__id="asst_w"))
    for n in range(2):  # at the same time: a lane each
        spans.append(span(20 + n, "invoke_agent scout", 1, 10, 12 + n, gen_ai__operation__name="invoke_agent",
                          gen_ai__agent__name="scout"))
    trace = only_trace(import_otlp(document(*spans)))
    events = trace["events"]
    assert [e["to"] for e in events if e["type"] == "spawn"] == ["worker#asst_w", f"scout#{20:016x}",
                                                                 f"scout#{21:016x}"]
    again = [e for e in events if e["type"] == "message" and e.get("resumed")]
    assert [(e["agent"], e["to"]) for e in again] == [(f"boss#{1:016x}", "worker#asst_w")] * 2
    assert [e["to"] for e in events if e["type"] == "return" and e["agent"] == "worker#asst_w"] == \
        [f"boss#{1:016x}"] * 3  # each delegation is answered
    by_id = {e["id"]: e for e in events}
    assert [e for e in trace["edges"] if by_id[e["src"]]["t"] > by_id[e["dst"]]["t"]] == []


def test_a_directly_nested_agent_returns_into_its_callers_next_model_call():
    spans = [
        span(1, "invoke_agent boss", 0, 0, 10, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="boss"),
        span(2, "invoke_agent aide", 1, 1, 4, gen_ai__operation__name="invoke_agent", gen_ai__agent__name="aide"),
        span(3, "chat m", 1, 5, 6, gen_ai__operation__name="chat"),
    ]
    trace = only_trace(import_otlp(document(*spans)))
    returned = one(e for e in trace["events"] if e["type"] == "return" and e["agent"].startswith("aide"))
    chat = one(e for e in trace["events"] if e["type"] == "message" and e["agent"].startswith("boss"))
    assert (returned["id"], chat["id"]) in edges(trace, "return")


def test_wrapper_usage_counts_only_where_no_model_call_does():
    remote = [span(1, "invoke_agent remote", 0, 0, 5, gen_ai__operation__name="invoke_agent",
                   gen_ai__agent__name="remote", gen_ai__usage__input_tokens=100, gen_ai__usage__output_tokens=20)]
    trace = only_trace(import_otlp(document(*remote)))
    assert trace["costs"]["tokens"] == 120 and trace["events"][-1]["tokens_in"] == 100
    local = delegation_spans()
    local[0]["attributes"].append(attr("gen_ai.aggregated_usage.input_tokens", 1000))
    assert only_trace(import_otlp(document(*local)))["costs"]["tokens"] == 41


def test_cache_tokens_are_metrics_not_extra_tokens():
    spans = delegation_spans()
    spans[1]["attributes"].append(attr("gen_ai.usage.cache_read.input_tokens", 8))
    trace = only_trace(import_otlp(document(*spans)))
    assert trace["metrics"] == {"cache_read_input_tokens": 8} and trace["costs"]["tokens"] == 41


def test_rewards_from_evaluations_annotations_and_logs():
    spans = delegation_spans()
    spans[5]["events"] = [{"timeUnixNano": str(T0_NS + 9 * NS_PER_MS), "name": "gen_ai.evaluation.result",
                           "attributes": [attr("gen_ai.evaluation.name", "relevance"),
                                          attr("gen_ai.evaluation.score.value", 0.5)]}]
    spans.append(span(7, "agentlightning.annotation", 1, 9, 9.5, **{"agentlightning.reward.0.value": 1.0,
                                                                   "agentlightning.reward.1.name": "style",
                                                                   "agentlightning.reward.1.value": 0.25}))
    doc = document(*spans)
    doc["resourceLogs"] = [{"scopeLogs": [{"logRecords": [
        {"timeUnixNano": str(T0_NS + 11 * NS_PER_MS), "eventName": "gen_ai.evaluation.result", "traceId": HAND_TRACE,
         "attributes": [attr("gen_ai.evaluation.name", "relevance"), attr("gen_ai.evaluation.score.value", 0.75)]},
    ]}]}]
    result = import_otlp(doc)
    trace = only_trace(result)
    assert trace["rewards"] == {"relevance": 0.75, "primary": 1.0, "style": 0.25}
    assert result.warnings == [f"trace {HAND_TRACE}: reward 'relevance' given more than once; the latest value "
                               "is kept"]


def test_detectors_tell_the_formats_apart():
    otlp_doc = document(*delegation_spans())
    agents_doc = {"data": [{"object": "trace", "id": "trace_1", "workflow_name": "w"}]}
    own = {"trace_id": "t", "task_id": "k", "events": [], "edges": [], "rewards": {}, "costs": {}}
    assert looks_like_otlp(otlp_doc) and looks_like_otlp({"resourceSpans": []})
    assert not any(looks_like_otlp(doc) for doc in (agents_doc, own, [otlp_doc], None, "resourceSpans"))
    assert not looks_like_openai_agents(otlp_doc)


# ---- scale -------------------------------------------------------------------------------------

def synthetic_otlp(n_spans: int, seed: int = 0) -> dict:
    """An OTLP/JSON document of about n_spans spans, shaped like real GenAI telemetry: a lead delegates
    to workers through a tool; each worker alternates chat and tool spans (3 to 12 rounds)."""
    rng = random.Random(seed)
    trace_id = f"{rng.getrandbits(128):032x}"
    spans: list[dict] = []

    def add(name: str, parent: str, start: int, end: int, attrs: dict) -> dict:
        record = {"traceId": trace_id, "spanId": f"{len(spans) + 1:016x}", "parentSpanId": parent, "name": name,
                  "kind": 1, "flags": 256, "status": {}, "startTimeUnixNano": str(start),
                  "endTimeUnixNano": str(end), "attributes": [attr(k, v) for k, v in attrs.items()]}
        spans.append(record)
        return record

    def chat(parent: str, start: int, output: list, tokens: int) -> None:
        add("chat gpt-x", parent, start, start + 3 * NS_PER_MS, {
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x", "gen_ai.output.messages": output,
            "gen_ai.usage.input_tokens": tokens, "gen_ai.usage.output_tokens": 30})

    t = T0_NS
    lead = add("invoke_agent lead", "", t, t, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "lead"})
    worker = 0
    while len(spans) < n_spans - 30:
        worker += 1
        chat(lead["spanId"], t, tool_output(f"w{worker}", "delegate"), 100)
        t += 3 * NS_PER_MS
        tool = add("execute_tool delegate", lead["spanId"], t, 0, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "delegate",
            "gen_ai.tool.call.id": f"w{worker}", "gen_ai.tool.call.arguments": {"task": worker}})
        run = add("invoke_agent worker", tool["spanId"], t, 0, {
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "worker",
            "gen_ai.agent.call.id": f"r{worker}"})
        for turn in range(rng.randint(3, 12)):
            call_id = f"c{worker}.{turn}"
            chat(run["spanId"], t, tool_output(call_id, "search"), 200 + turn)
            t += 3 * NS_PER_MS
            add("execute_tool search", run["spanId"], t, t + NS_PER_MS, {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": {"q": "x" * 20}, "gen_ai.tool.call.result": "result text " * 5})
            t += NS_PER_MS
        chat(run["spanId"], t, [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}], 300)
        t += 3 * NS_PER_MS
        run["endTimeUnixNano"] = tool["endTimeUnixNano"] = str(t)
    lead["endTimeUnixNano"] = str(t)
    rng.shuffle(spans)  # exporters send spans in batches as they end, not in tree order
    return {"resourceSpans": [{"resource": {"attributes": [attr("service.name", "bench")]},
                               "scopeSpans": [{"scope": {"name": "synthetic"}, "spans": spans}]}]}


def test_twenty_thousand_spans_import_validly_and_the_time_is_reported(capsys):
    doc = synthetic_otlp(BENCHMARK_SPANS)
    n_spans = len(spans_of(doc))
    assert BENCHMARK_SPANS - 30 <= n_spans <= BENCHMARK_SPANS
    start = time.perf_counter()
    result = import_otlp(doc)
    seconds = time.perf_counter() - start
    trace = only_trace(result)
    assert result.warnings == []
    kinds = Counter(e["type"] for e in trace["events"])
    passes = kinds["spawn"] + sum(1 for e in trace["events"] if e["type"] == "message" and e.get("resumed"))
    assert passes == kinds["return"] - 1 and kinds["tool_call"] == kinds["tool_result"]
    assert trace["costs"]["messages"] + trace["costs"]["tool_calls"] + passes + 1 == n_spans
    with capsys.disabled():
        print(f"\nimport_otlp: {n_spans} spans -> {len(trace['events'])} events, {len(trace['edges'])} edges "
              f"in {seconds:.3f} s")


def test_garbage_collection_is_back_on_after_an_import_even_a_failed_one():
    import_otlp(document(*delegation_spans()))
    assert gc.isenabled()
    with pytest.raises(ImportFailed):
        import_otlp(document(span(1, "chat", start_ms=2, end_ms=1)))
    assert gc.isenabled()
    gc.disable()
    try:
        import_otlp(document(*delegation_spans()))
        assert not gc.isenabled()  # the caller's setting is kept
    finally:
        gc.enable()


def test_an_import_leaves_no_cycles_so_its_spans_are_freed_at_once():
    """The walk links spans both ways (parent and children, an agent and its tools); left linked, every span of
    a large import would stay in memory until a full garbage collection walked them all."""
    doc = synthetic_otlp(2000, seed=3)
    gc.collect()
    gc.disable()
    try:
        result = import_otlp(doc)
        del result
        assert gc.collect() == 0  # nothing unreachable was left for the collector
    finally:
        gc.enable()


# ---- one run over several traceIds -----------------------------------------------------------------

TRACE_B, TRACE_C = "b" * 32, "c" * 32


def agent_span(number: int, name: str, parent: int, start_ms: float, end_ms: float, trace: str, **attrs) -> dict:
    return span(number, f"invoke_agent {name}", parent, start_ms, end_ms, trace, gen_ai__operation__name="invoke_agent",
                gen_ai__agent__name=name, **attrs)


def test_a_run_over_traces_joined_by_a_span_link_is_one_trace_with_the_linked_run_under_its_caller():
    lead = agent_span(1, "lead", 0, 0, 10, HAND_TRACE)
    call = span(2, "execute_tool ask", 1, 2, 8, HAND_TRACE, gen_ai__operation__name="execute_tool",
                gen_ai__tool__name="ask")
    worker = agent_span(3, "worker", 0, 3, 7, TRACE_B)
    worker["links"] = [{"traceId": HAND_TRACE, "spanId": f"{2:016x}"}]  # the message that caused this run
    result = import_otlp(document(lead, call, worker))
    assert len(result.traces) == 1
    trace = result.traces[0]
    assert trace["trace_id"] == f"otlp-{HAND_TRACE}"
    spawn = next(e for e in trace["events"] if e["type"] == "spawn")
    assert (spawn["agent"].partition("#")[0], spawn["to"].partition("#")[0]) == ("lead", "worker")
    assert {e["trace_id"] for e in trace["events"]} == {HAND_TRACE, TRACE_B}  # each event keeps its own traceId
    assert any("joined to trace" in w for w in result.warnings)


def test_traces_sharing_a_conversation_id_are_one_run_and_unrelated_traces_stay_apart():
    turn_1 = agent_span(1, "coordinator", 0, 0, 10, HAND_TRACE, gen_ai__conversation__id="conv-1")
    sub = agent_span(2, "researcher", 0, 2, 6, TRACE_B, gen_ai__conversation__id="conv-1")  # called from turn 1
    turn_2 = agent_span(3, "coordinator", 0, 20, 30, TRACE_B[:-1] + "d", gen_ai__conversation__id="conv-1")
    other = agent_span(4, "coordinator", 0, 0, 5, TRACE_C, gen_ai__conversation__id="conv-2")
    result = import_otlp(document(turn_1, sub, turn_2, other))
    assert sorted(t["trace_id"] for t in result.traces) == [f"otlp-{HAND_TRACE}", f"otlp-{TRACE_C}"]
    run = next(t for t in result.traces if t["trace_id"] == f"otlp-{HAND_TRACE}")
    lanes = {e["agent"] for e in run["events"] if e["agent"] != "user"}
    assert sorted(lane.partition("#")[0] for lane in lanes) == ["coordinator", "researcher"]  # one lane each
    spawn = next(e for e in run["events"] if e["type"] == "spawn")
    assert spawn["agent"].startswith("coordinator#") and spawn["to"].startswith("researcher#")
    by_id = {e["id"]: e for e in run["events"]}
    assert [e for e in run["edges"] if by_id[e["src"]]["t"] > by_id[e["dst"]]["t"]] == []


def test_created_agents_join_only_a_run_of_the_same_service_and_agent_id():
    created = span(1, "create_agent helper", 0, 0, 1, TRACE_B, gen_ai__operation__name="create_agent",
                   gen_ai__agent__name="helper", gen_ai__agent__id="h-1")
    other_service = document(agent_span(2, "helper", 0, 2, 5, HAND_TRACE, gen_ai__agent__id="h-1"), service="other")
    same_name_other_id = agent_span(3, "helper", 0, 2, 5, TRACE_C, gen_ai__agent__id="h-2")
    doc = document(created, same_name_other_id)
    doc["resourceSpans"] += other_service["resourceSpans"]
    traces = {t["trace_id"]: t for t in import_otlp(doc).traces}
    assert sorted(traces) == [f"otlp-{HAND_TRACE}", f"otlp-{TRACE_B}", f"otlp-{TRACE_C}"]  # the creation kept apart
    assert not any(e["type"] == "spawn" for e in traces[f"otlp-{HAND_TRACE}"]["events"] + traces[f"otlp-{TRACE_C}"]["events"])
