"""The OpenAI Agents SDK importer (IMPORTERS.md §3): trace and span records onto orchestration traces.

Real records come from the SDK itself, run offline on a scripted Model and captured by a
TracingProcessor; tests/fixtures/openai_agents/ keeps two such captures so the mapping is also checked
where the SDK is not installed. Odd cases use hand-written records.
"""

import copy
import json
from pathlib import Path

import pytest
from imported import edges, first_event, one, only_trace, timeline_pairs

from app.ingest.importers.common import ImportFailed
from app.ingest.importers.openai_agents import import_agents, looks_like_openai_agents
from app.ingest.importers.otlp import looks_like_otlp

FIXTURES = Path(__file__).parent / "fixtures" / "openai_agents"
TOKENS_IN, TOKENS_OUT = 10, 5  # what the scripted model reports for every call


def check_format_rules(trace: dict) -> None:
    events = trace["events"]
    ts = [e["t"] for e in events]
    assert ts == sorted(ts) and min(ts) >= 0
    assert len({e["id"] for e in events}) == len(events)
    assert all(e["span_id"].startswith("span_") and e["trace_id"].startswith("trace_") for e in events)
    assert edges(trace, "temporal") == timeline_pairs(trace)


# ---- real records: the SDK on a scripted model -------------------------------------------------

@pytest.fixture
def sdk():
    """The Agents SDK with a capturing processor in place of its default exporter (no network)."""
    agents = pytest.importorskip("agents", reason="openai-agents runs offline on a scripted Model")
    from agents.tracing import TracingProcessor, get_trace_provider, set_trace_processors

    class Capture(TracingProcessor):
        """Keeps trace.export() and span.export(), the dicts the OpenAI backend receives as {"data": [...]}."""

        def __init__(self):
            self.records = []

        def on_trace_start(self, trace):
            pass

        def on_trace_end(self, trace):
            self.records.append(trace.export())

        def on_span_start(self, span):
            pass

        def on_span_end(self, span):
            self.records.append(span.export())

        def shutdown(self):
            pass

        def force_flush(self):
            pass

    # The SDK offers no getter for its processors: keep the current ones to put them back afterwards.
    multi = getattr(get_trace_provider(), "_multi_processor", None)
    before = list(getattr(multi, "_processors", ()))
    capture = Capture()
    set_trace_processors([capture])
    yield agents, capture
    set_trace_processors(before)


def scripted_model(agents, name: str, turns: list[list]):
    """A Model answering from a script, recording a generation span as the Chat Completions model does."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.tracing import generation_span
    from agents.usage import Usage

    class Scripted(Model):
        def __init__(self):
            self.turns = list(turns)

        async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                               tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
            output = self.turns.pop(0)
            messages = input if isinstance(input, list) else [{"role": "user", "content": input}]
            with generation_span(model=name, input=messages) as span:
                span.span_data.output = [item.model_dump() for item in output]
                span.span_data.usage = {"input_tokens": TOKENS_IN, "output_tokens": TOKENS_OUT}
            usage = Usage(requests=1, input_tokens=TOKENS_IN, output_tokens=TOKENS_OUT,
                          total_tokens=TOKENS_IN + TOKENS_OUT)
            return ModelResponse(output=output, usage=usage, response_id=None)

        def stream_response(self, *args, **kwargs):
            raise NotImplementedError("the tests do not stream")

    return Scripted()


def run_delegation(agents) -> None:
    """A lead delegating to two sub-agents as tools (agent as tool); each calls a tool of its own."""
    from agents.testing.model import assistant_message, function_call

    @agents.function_tool
    def search(q: str) -> str:
        return f"results for {q}"

    @agents.function_tool
    def draft(topic: str) -> str:
        return f"draft on {topic}"

    researcher = agents.Agent(name="researcher", tools=[search], model=scripted_model(agents, "model-r", [
        [function_call("search", {"q": "x"}, call_id="call_search")], [assistant_message("found")]]))
    writer = agents.Agent(name="writer", tools=[draft], model=scripted_model(agents, "model-w", [
        [function_call("draft", {"topic": "x"}, call_id="call_draft")], [assistant_message("drafted")]]))
    lead = agents.Agent(
        name="lead",
        tools=[researcher.as_tool("ask_researcher", "research"), writer.as_tool("ask_writer", "write")],
        model=scripted_model(agents, "model-l", [
            [function_call("ask_researcher", {"input": "x"}, call_id="call_r"),
             function_call("ask_writer", {"input": "x"}, call_id="call_w")],
            [assistant_message("report")]]))
    agents.Runner.run_sync(lead, "write a report")


def run_handoff(agents) -> None:
    """Triage hands off to billing; an input guardrail on triage, an output guardrail on billing."""
    from agents.testing.model import assistant_message, function_call

    @agents.input_guardrail
    async def no_secrets(ctx, agent, user_input):
        return agents.GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    @agents.output_guardrail
    async def polite(ctx, agent, output):
        return agents.GuardrailFunctionOutput(output_info=None, tripwire_triggered=False)

    @agents.function_tool
    def refund(order: str) -> str:
        return "refunded"

    billing = agents.Agent(name="billing", tools=[refund], output_guardrails=[polite], model=scripted_model(
        agents, "model-b", [[function_call("refund", {"order": "7"}, call_id="call_refund")],
                            [assistant_message("refund done")]]))
    triage = agents.Agent(name="triage", handoffs=[billing], input_guardrails=[no_secrets], model=scripted_model(
        agents, "model-t", [[function_call("transfer_to_billing", {}, call_id="call_transfer")]]))
    with agents.trace("support", group_id="conversation-1", metadata={"task_id": "ticket-42"}):
        agents.Runner.run_sync(triage, "refund order 7")


def capture(sdk, run) -> dict:
    agents, capturing = sdk
    run(agents)
    return {"data": capturing.records}


def recorded(name: str) -> dict:
    """A capture of openai-agents 0.24 running the scenario of the same name."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def check_delegation(doc: dict) -> None:
    result = import_agents(doc)
    assert result.warnings == []
    trace = only_trace(result)
    check_format_rules(trace)
    trace_record = one(r for r in doc["data"] if r["object"] == "trace")
    assert trace["trace_id"] == f"openai-agents-{trace_record['id']}"
    assert trace["task_id"] == "Agent workflow" and trace["system"] == "openai-agents"
    assert trace["topology"] == "centralized"
    events = trace["events"]
    causal = edges(trace, "causal")

    request = events[0]
    assert request["type"] == "message" and request["from"] == "user"
    lead = request["to"]
    assert lead.startswith("lead#span_")
    spawns = [e for e in events if e["type"] == "spawn"]
    assert sorted(e["role"] for e in spawns) == ["researcher", "writer"]
    for spawn in spawns:
        child, tool = spawn["to"], f"ask_{spawn['role']}"
        assert spawn["agent"] == lead and child.startswith(spawn["role"] + "#span_")
        call = one(e for e in events if e["type"] == "tool_call" and e["tool"] == tool)
        answer = one(e for e in events if e["type"] == "tool_result" and e["tool"] == tool)
        returned = one(e for e in events if e["type"] == "return" and e["agent"] == child)
        assert call["tool_call_id"] == f"call_{spawn['role'][0]}"  # recovered from the lead's generation
        assert (call["id"], spawn["id"]) in causal
        assert (spawn["id"], first_event(trace, child)["id"]) in edges(trace, "spawn")
        assert returned["to"] == lead and (returned["id"], answer["id"]) in edges(trace, "return")
    assert one(e for e in events if e["type"] == "return" and e["agent"] == lead)["to"] == "user"

    calls = [e for e in events if e["type"] == "tool_call"]
    assert {e["tool_call_id"] for e in calls} == {"call_r", "call_w", "call_search", "call_draft"}
    by_id = {e["id"]: e for e in events}
    assert {(by_id[s]["span_id"], by_id[d]["span_id"]) for s, d in edges(trace, "tool_dependency")} == \
        {(e["span_id"], e["span_id"]) for e in calls}
    generations = [e for e in events if e.get("span_type") == "generation"]
    for call in calls:
        assert any((g["id"], call["id"]) in causal and g["agent"] == call["agent"] for g in generations)
    assert [e["agent"] for e in events if e["type"] == "orchestrator_decision"] == [lead]
    assert trace["costs"]["tokens"] == len(generations) * (TOKENS_IN + TOKENS_OUT) == 90
    assert trace["costs"]["messages"] == 6 and trace["costs"]["tool_calls"] == 4
    assert all(g["tokens_in"] == TOKENS_IN and g["tokens_out"] == TOKENS_OUT for g in generations)


def check_handoff(doc: dict) -> None:
    result = import_agents(doc)
    assert result.warnings == []
    trace = only_trace(result)
    check_format_rules(trace)
    assert trace["task_id"] == "ticket-42"  # metadata.task_id before group_id and workflow_name
    assert trace["topology"] == "unknown"  # a handoff replaces an agent; nobody delegated
    events = trace["events"]
    triage = events[0]["to"]
    spawn = one(e for e in events if e["type"] == "spawn")
    billing = spawn["to"]
    assert spawn["agent"] == triage and spawn["handoff"] is True and billing.startswith("billing#span_")
    decision = one(e for e in events if e["type"] == "orchestrator_decision")
    assert decision["agent"] == triage and (decision["id"], spawn["id"]) in edges(trace, "causal")
    assert (spawn["id"], first_event(trace, billing)["id"]) in edges(trace, "spawn")
    gone = one(e for e in events if e["type"] == "despawn")
    assert gone["agent"] == triage and gone["handoff_to"] == billing and "to" not in gone
    returned = one(e for e in events if e["type"] == "return")
    assert returned["agent"] == billing and returned["to"] == "user"  # the run's caller, after the handoff
    guard_in, guard_out = (one(e for e in events if e.get("guardrail") == name) for name in ("no_secrets", "polite"))
    assert guard_in["type"] == guard_out["type"] == "safety_event" and guard_in["triggered"] is False
    assert guard_in["agent"] == triage and guard_out["agent"] == billing
    assert edges(trace, "safety_flow") == {(guard_in["id"], decision["id"]), (guard_out["id"], returned["id"])}
    assert trace["costs"] == {"tokens": 45, "wall_clock_s": trace["costs"]["wall_clock_s"], "tool_calls": 1,
                              "messages": 3}


def test_agents_as_tools(sdk):
    check_delegation(capture(sdk, run_delegation))


def test_recorded_agents_as_tools():
    check_delegation(recorded("agent_as_tool"))


def test_handoff_and_guardrails(sdk):
    check_handoff(capture(sdk, run_handoff))


def test_recorded_handoff_and_guardrails():
    check_handoff(recorded("handoff_guardrails"))


def test_a_tripped_guardrail_despawns_its_agent(sdk):
    agents, capturing = sdk
    from agents.testing.model import assistant_message

    @agents.input_guardrail
    async def blocker(ctx, agent, user_input):
        return agents.GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

    guarded = agents.Agent(name="guarded", input_guardrails=[blocker],
                           model=scripted_model(agents, "model-g", [[assistant_message("never")]]))
    with pytest.raises(agents.InputGuardrailTripwireTriggered):
        agents.Runner.run_sync(guarded, "something bad")
    trace = only_trace(import_agents({"data": capturing.records}))
    guard = one(e for e in trace["events"] if e["type"] == "safety_event")
    gone = one(e for e in trace["events"] if e["type"] == "despawn")
    assert guard["triggered"] is True and gone["tripwire"] is True and gone["agent"] == guard["agent"]
    assert edges(trace, "safety_flow") == {(guard["id"], gone["id"])}
    assert not any(e["type"] == "return" for e in trace["events"])


def test_a_tool_running_two_agents_aggregates_and_rewards_come_from_custom_spans(sdk):
    agents, capturing = sdk
    from agents.testing.model import assistant_message, function_call
    from agents.tracing import custom_span, speech_group_span

    def critic(n: int):
        return agents.Agent(name="critic", model=scripted_model(agents, "model-c", [[assistant_message(f"ok{n}")]]))

    @agents.function_tool
    async def panel(topic: str) -> str:
        first = await agents.Runner.run(critic(1), topic)
        second = await agents.Runner.run(critic(2), topic)
        return first.final_output + second.final_output

    @agents.function_tool
    def broken(x: str) -> str:
        raise RuntimeError("boom")

    lead = agents.Agent(name="lead", tools=[panel, broken], model=scripted_model(agents, "model-l", [
        [function_call("panel", {"topic": "t"}, call_id="call_panel"), function_call("broken", {"x": "1"},
                                                                                       call_id="call_broken")],
        [assistant_message("done")]]))
    with agents.trace("review"):
        agents.Runner.run_sync(lead, "go")
        with custom_span("judge", {"score": 0.75}):
            pass
        with custom_span("note", {"text": "no number here"}):
            pass
        with speech_group_span(input="hello"):
            pass
    result = import_agents({"data": capturing.records})
    trace = only_trace(result)
    check_format_rules(trace)
    trace_id = trace["trace_id"].removeprefix("openai-agents-")
    assert sorted(result.warnings) == [f"trace {trace_id}: 1 custom span(s) 'note' without a numeric value skipped",
                                       f"trace {trace_id}: 1 span(s) of type 'speech_group' skipped"]
    assert trace["rewards"] == {"judge": 0.75} and trace["task_id"] == "review"
    events = trace["events"]
    aggregate = one(e for e in events if e["type"] == "aggregate")
    assert aggregate["tool"] == "panel" and aggregate["agent"].startswith("lead#") and aggregate["inputs"] == 2
    critics = [e for e in events if e["type"] == "return" and e["role"] == "critic"]
    assert edges(trace, "aggregate") == {(e["id"], aggregate["id"]) for e in critics} and len(critics) == 2
    failed = one(e for e in events if e["type"] == "tool_result" and e["tool"] == "broken")
    assert failed["error"] is True and failed["error_message"].startswith("Error running tool")
    assert trace["costs"]["tokens"] == 4 * (TOKENS_IN + TOKENS_OUT)  # the critics' runs count too


def test_content_is_kept_unless_the_policy_is_hash():
    doc = recorded("agent_as_tool")
    hashed = only_trace(import_agents(doc, "hash"))
    assert "results for x" in json.dumps(doc) and "results for x" not in json.dumps(hashed)
    assert all("content" not in e for e in hashed["events"])
    results = [e for e in hashed["events"] if e["type"] == "tool_result"]
    assert all(e["content_ref"].startswith("sha256:") for e in results)
    kept = only_trace(import_agents(doc))
    search = one(e for e in kept["events"] if e["type"] == "tool_result" and e["tool"] == "search")
    assert search["content"] == "results for x"
    assert one(e for e in kept["events"] if e["type"] == "tool_call" and e["tool"] == "search")["content"] == \
        '{"q":"x"}'  # as the SDK recorded it
    generations = [r["span_data"] for r in doc["data"] if r.get("span_data", {}).get("type") == "generation"]
    calls = [e for e in kept["events"] if e.get("span_type") == "generation"]
    assert sorted(json.dumps(e["content"], sort_keys=True) for e in calls) == \
        sorted(json.dumps({"input": g["input"], "output": g["output"]}, sort_keys=True) for g in generations)
    assert [{k: v for k, v in e.items() if k != "content"} for e in kept["events"]] == hashed["events"]


def test_a_handoff_s_spawn_keeps_the_transfer_call_s_arguments():
    doc = recorded("handoff_guardrails")
    spawn = one(e for e in only_trace(import_agents(doc))["events"] if e["type"] == "spawn")
    assert spawn["handoff"] is True and spawn["content"] == "{}"  # transfer_to_billing's arguments, as sent
    assert "content" not in one(e for e in only_trace(import_agents(doc, "hash"))["events"] if e["type"] == "spawn")
    records = copy.deepcopy(doc)
    for record in records["data"]:
        data = record.get("span_data", {})
        for item in data.get("output") or () if data.get("type") == "generation" else ():
            if item.get("name") == "transfer_to_billing":
                item["arguments"] = '{"reason": "a refund"}'
    spawn = one(e for e in only_trace(import_agents(records))["events"] if e["type"] == "spawn")
    assert spawn["content"] == '{"reason": "a refund"}'


def test_record_lists_in_any_order_give_the_same_trace():
    doc = recorded("handoff_guardrails")
    expected = import_agents(doc).traces
    assert import_agents(list(reversed(doc["data"]))).traces == expected
    # a processor that exports spans at start too sends each span twice; the ended record wins
    started = [dict(r, ended_at=None) for r in doc["data"] if r["object"] == "trace.span"]
    assert import_agents(started + doc["data"]).traces == expected


# ---- hand-written records: the odd cases -------------------------------------------------------

def span_record(span_id: str, span_data: dict, parent: str | None = None, start: str = "00.000100",
                end: str = "00.000200", trace: str = "trace_1") -> dict:
    return {"object": "trace.span", "id": span_id, "trace_id": trace, "parent_id": parent,
            "started_at": f"2026-01-01T00:00:{start}+00:00", "ended_at": f"2026-01-01T00:00:{end}+00:00",
            "span_data": span_data, "error": None}


def small_run() -> list[dict]:
    return [
        {"object": "trace", "id": "trace_1", "workflow_name": "flow", "group_id": "g-7", "metadata": None},
        span_record("span_agent", {"type": "agent", "name": "solo"}, start="00.000000", end="01.000000"),
        span_record("span_gen", {"type": "generation", "model": "m", "output": [],
                                 "usage": {"prompt_tokens": 3, "completion_tokens": 4}}, "span_agent"),
    ]


def test_hand_written_run_times_and_chat_completions_usage():
    trace = only_trace(import_agents(small_run()))
    assert trace["task_id"] == "g-7"  # group_id, without metadata.task_id
    assert [(e["t"], e["type"]) for e in trace["events"]] == [(0.0, "message"), (0.0002, "message"), (1.0, "return")]
    assert trace["costs"] == {"tokens": 7, "wall_clock_s": 1.0, "tool_calls": 0, "messages": 1}


def test_unknown_types_records_and_missing_parents_are_warnings():
    records = small_run() + [
        span_record("span_voice", {"type": "transcription", "model": "w"}, "span_agent"),
        span_record("span_lost", {"type": "generation", "output": [], "usage": None}, "span_gone"),
        {"object": "something.else"},
    ]
    result = import_agents({"data": records})
    assert sorted(result.warnings) == sorted([
        "1 record(s) that are neither traces nor spans skipped",
        "trace trace_1: 1 span(s) whose parent is not in the document read as roots",
        "trace trace_1: 1 span(s) of type 'transcription' skipped",
    ])
    lost = one(e for e in only_trace(result)["events"] if e["span_id"] == "span_lost")
    assert lost["agent"] == "flow"  # outside any agent span: the workflow acts


def test_agent_and_handoff_names_of_other_json_types_are_not_matched():
    doc = json.loads((FIXTURES / "handoff_guardrails.json").read_text())
    spans = [r for r in doc["data"] if r.get("object") == "trace.span"]
    next(s for s in spans if s["span_data"]["type"] == "handoff")["span_data"]["to_agent"] = {"name": "billing"}
    result = import_agents(doc)
    assert any("no agent span of {'name': 'billing'} after this handoff" in w for w in result.warnings)
    next(s for s in spans if s["span_data"]["type"] == "agent")["span_data"]["name"] = ["triage"]
    assert only_trace(import_agents(doc))


def test_a_trace_without_its_trace_record_uses_its_id():
    result = import_agents(small_run()[1:])
    assert only_trace(result)["task_id"] == "trace_1"
    assert result.warnings == ["trace trace_1: no trace record; the trace id serves as task_id"]


def test_task_usage_above_the_generations_warns():
    records = small_run() + [span_record("span_task", {"type": "custom", "name": "task", "data": {
        "sdk_span_type": "task", "usage": {"input_tokens": 30, "output_tokens": 20}}}, start="00.000000",
        end="01.000000")]
    records[1]["parent_id"] = "span_task"
    result = import_agents(records)
    assert result.warnings == ["trace trace_1: the task spans count 50 tokens but the generations only 7 "
                               "(generation spans missing?); costs.tokens keeps the generations' sum"]


WHERE = r"data\[2\] \(span span_gen\)"


@pytest.mark.parametrize("change, message", [
    ({"started_at": "yesterday"}, WHERE + r": started_at 'yesterday' is not an ISO-8601 time"),
    ({"started_at": None}, WHERE + r": started_at None is missing"),
    ({"ended_at": "2025-01-01T00:00:00+00:00"}, WHERE + r": ended_at 2025-01-01T00:00:00\+00:00 is before"),
    ({"ended_at": None}, WHERE + r": ended_at is missing \(the span never ended\)"),
    ({"span_data": "generation"}, WHERE + r": span_data 'generation' is not an object"),
    ({"parent_id": 5}, WHERE + r": parent_id 5 is not a string"),
    ({"error": "bad"}, WHERE + r": error 'bad' is not an object"),
    ({"id": ""}, r"data\[2\]: id '' is missing or not a string"),
    ({"trace_id": None}, WHERE + r": trace_id None is missing or not a string"),
    ({"span_data": {"type": "generation", "usage": {"input_tokens": -1}}},
     WHERE + r": usage.input_tokens -1 is not a token count"),
])
def test_malformed_records_are_refused_naming_the_span(change, message):
    records = small_run()
    records[2].update(change)
    with pytest.raises(ImportFailed, match=message):
        import_agents({"data": records})


def test_bad_documents_and_cycles_are_refused():
    for doc, message in (({"data": "x"}, "not OpenAI Agents SDK trace records"), (5, "not OpenAI Agents SDK"),
                         ({"data": [3]}, r"data\[0\]: 3 is not an object")):
        with pytest.raises(ImportFailed, match=message):
            import_agents(doc)
    assert import_agents([]).warnings == ["the document has no trace records"]
    only_record = import_agents([{"object": "trace", "id": "trace_9", "workflow_name": "w"}])
    assert only_record.traces == [] and only_record.warnings == ["trace trace_9: a trace record without spans, skipped"]
    looped = small_run()
    looped[1]["parent_id"] = "span_gen"
    with pytest.raises(ImportFailed, match=r"\(span span_agent\): parent_id span_gen is part of a cycle"):
        import_agents(looped)


def test_detectors_tell_the_formats_apart():
    doc = recorded("agent_as_tool")
    own = {"trace_id": "t", "task_id": "k", "events": [], "edges": [], "rewards": {}, "costs": {}}
    otlp_doc = {"resourceSpans": [{"scopeSpans": []}]}
    assert looks_like_openai_agents(doc) and looks_like_openai_agents(doc["data"])
    assert looks_like_openai_agents(doc["data"][0])  # one record, e.g. one line of a JSON Lines file
    assert not any(looks_like_openai_agents(x) for x in (otlp_doc, own, [own], [], {"data": []}, None, "data"))
    assert not looks_like_otlp(doc) and not looks_like_otlp(doc["data"])


def test_the_document_is_left_as_it_was():
    doc = recorded("handoff_guardrails")
    before = copy.deepcopy(doc)
    import_agents(doc)
    assert doc == before


def test_guardrails_without_turn_spans_are_told_apart_by_time():
    """Older SDKs put both guardrails directly under the agent span."""
    records = small_run() + [
        span_record("span_in", {"type": "guardrail", "name": "screen", "triggered": False}, "span_agent",
                    start="00.000050", end="00.000150"),
        span_record("span_out", {"type": "guardrail", "name": "tone", "triggered": False}, "span_agent",
                    start="00.000300", end="00.000400"),
    ]
    trace = only_trace(import_agents(records))
    by_guardrail = {e.get("guardrail"): e["id"] for e in trace["events"]}
    model_call = one(e["id"] for e in trace["events"] if e.get("span_type") == "generation")
    returned = one(e["id"] for e in trace["events"] if e["type"] == "return")
    assert edges(trace, "safety_flow") == {(by_guardrail["screen"], model_call), (by_guardrail["tone"], returned)}


def run_handback(agents) -> None:
    """Triage hands off to billing, billing calls a tool and hands back to triage, triage answers."""
    from agents.testing.model import assistant_message, function_call

    @agents.function_tool
    def refund(order: str) -> str:
        return "refunded"

    billing = agents.Agent(name="billing", tools=[refund], model=scripted_model(agents, "model-b", [
        [function_call("refund", {"order": "7"}, call_id="call_refund")],
        [function_call("transfer_to_triage", {}, call_id="call_back")]]))
    triage = agents.Agent(name="triage", handoffs=[billing], model=scripted_model(agents, "model-t", [
        [function_call("transfer_to_billing", {}, call_id="call_transfer")], [assistant_message("all done")]]))
    billing.handoffs = [triage]
    agents.Runner.run_sync(triage, "refund order 7")


def test_control_handed_back_continues_the_agent_s_lane_with_a_message_never_a_second_spawn(sdk):
    trace = import_agents(capture(sdk, run_handback)).traces[0]
    check_format_rules(trace)
    events = trace["events"]
    lanes = {e["agent"] for e in events if e["type"] != "tool_result" and e["agent"] != "user"}
    assert sorted(lane.partition("#")[0] for lane in lanes) == ["billing", "triage"]  # one lane each
    passes = [(e["type"], e["agent"].partition("#")[0], e["to"].partition("#")[0]) for e in events
              if e.get("handoff") and e["type"] in ("spawn", "message")]
    assert passes == [("spawn", "triage", "billing"), ("message", "billing", "triage")]
    by_id = {e["id"]: e for e in events}
    assert [e for e in trace["edges"] if by_id[e["src"]]["t"] > by_id[e["dst"]]["t"]] == []
    assert [e["type"] for e in events if e["agent"].startswith("triage#")][-1] == "return"  # answers the user
