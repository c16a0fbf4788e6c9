"""Traces from real frameworks: each fixture under tests/fixtures/frameworks/ was recorded by a script in
tests/fixtures/generators/ that ran the framework offline with a scripted model and its own
instrumentation and exporter. Each must give the team, delegations, tool lanes and tokens its scenario had
(expected.json, written from the scenario, not from our importer), through the live receivers, and keep what
each event's span said: every event whose span carried content keeps it, unless the server says `hash`."""

import json
from collections import Counter
from pathlib import Path

import pytest
from conftest import BASE_URL
from fastapi.testclient import TestClient

from app.domain.validation import validate_trace
from app.ingest.importers.openai_agents import import_agents
from app.ingest.importers.otlp import import_otlp
from app.ingest.importers.otlp_protobuf import decode_request
from app.main import create_app
from app.settings import Settings

FRAMEWORKS = Path(__file__).resolve().parent / "fixtures" / "frameworks"
OTLP_FIXTURES = sorted(p.name for p in FRAMEWORKS.iterdir() if list(p.glob("batch-*.pb")))
AGENTS_FIXTURES = sorted(p.name for p in FRAMEWORKS.iterdir() if list(p.glob("batch-*.json")))
NOT_AGENTS = ("user", "system")
# Both instrumentations at once: OpenInference and OpenLLMetry each start their own trace id. A document
# import keeps the fuller one; the live receiver, which builds each trace as it completes, stores both.
TWO_TRACES = {"agents_sdk_both"}


# Where each convention writes what a span took in and what it gave out (GenAI, OpenInference, OpenLLMetry,
# LangSmith, pydantic-ai; `event:` the GenAI span events Strands writes), written from the conventions, not from
# the importer.
CARRIES = {
    "input": (("gen_ai.input.messages", "gen_ai.system_instructions", "gen_ai.tool.call.arguments", "input.value",
               "traceloop.entity.input", "gen_ai.prompt", "pydantic_ai.all_messages", "event:gen_ai.system.message",
               "event:gen_ai.user.message", "event:gen_ai.assistant.message", "event:gen_ai.tool.message"),
              ("llm.input_messages.", "gen_ai.prompt.")),
    "output": (("gen_ai.output.messages", "gen_ai.tool.call.result", "output.value", "traceloop.entity.output",
                "gen_ai.completion", "final_result", "event:gen_ai.choice"),
               ("llm.output_messages.", "gen_ai.completion.")),
}
MODEL_CALLS = ("message", "orchestrator_decision")
# AutoGen's GenAI spans carry nothing: its tools' arguments and results are in the runtime's messages.
AUTOGEN_TOOLS = {"run_code": ({"code": "def add(a, b):\n    return a + b\nprint(add(2, 3))"}, 5),
                 "lint": ({"code": "def add(a, b):\n    return a + b"}, "no issues found")}
RUNTIME_CONTENT = {"autogen": AUTOGEN_TOOLS, "autogen_unwrapped": AUTOGEN_TOOLS}


def batches(name: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((FRAMEWORKS / name).glob("batch-*.pb"))]


def imported(name: str, policy: str = "keep") -> tuple[dict, dict[str, set[str]]]:
    """The fixture's trace, and the attribute keys of each of its spans by span id."""
    docs = [decode_request(body) for body in batches(name)]
    doc = {"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}
    keys = {span["spanId"]: {a["key"] for a in span.get("attributes", [])} | {
                f"event:{e['name']}" for e in span.get("events", [])}
            for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]}
    return import_otlp(doc, policy).traces[0], keys


def sides(event: dict) -> tuple[str, ...]:
    """The side of its span an event stands for: a start takes the input, an end the output, a model call both."""
    if event["type"] in ("tool_result", "aggregate", "return", "despawn"):
        return ("output",)
    if event["type"] in MODEL_CALLS and event["operation"] not in ("invoke_agent", "execute_tool"):
        return ("input", "output")
    return ("input",)


def carried(keys: set[str], side: str) -> bool:
    names, prefixes = CARRIES[side]
    return any(key in names or key.startswith(prefixes) for key in keys)


def expected(name: str) -> dict:
    return json.loads((FRAMEWORKS / name / "expected.json").read_text())


def role(agent: str) -> str:
    return agent.partition("#")[0]


def check(trace: dict, want: dict, name: str) -> None:
    """The scenario's team (one lane per agent), who passed control to whom (a spawn the first time an agent
    gets control, a handoff message each later time, in order), delegations, fan-ins, tools on the calling
    agent's lane, tokens, and no edge running backwards in time."""
    assert validate_trace(trace) == []
    events = trace["events"]
    instances = {e["agent"] for e in events if e["type"] != "tool_result" and e["agent"] not in NOT_AGENTS}
    assert Counter(role(a) for a in instances) == Counter(want["team"]), name
    spawns = Counter((role(e["agent"]), role(e["to"])) for e in events
                     if e["type"] == "spawn" and e["agent"] not in NOT_AGENTS)
    assert spawns == Counter(tuple(pair) for pair in want["spawns"]), name
    handoffs = [[role(e["agent"]), role(e["to"])] for e in events if e["type"] == "message" and e.get("handoff")]
    assert handoffs == want["handoffs"], name
    if "delegations" in want:
        passes = [[role(e["agent"]), role(e["to"])] for e in events if e["agent"] not in NOT_AGENTS
                  and (e["type"] == "spawn" or e["type"] == "message" and e.get("resumed")) and not e.get("handoff")]
        assert passes == want["delegations"], name
    by_id = {e["id"]: e for e in events}
    for agent, upstream in want.get("fan_in", {}).items():
        first = next(e["id"] for e in events if e["type"] != "tool_result" and role(e["agent"]) == agent)
        into = {role(by_id[edge["src"]]["agent"]) for edge in trace["edges"] if edge["dst"] == first}
        assert set(upstream) <= into, name
    assert [e for e in trace["edges"] if by_id[e["src"]]["t"] > by_id[e["dst"]]["t"]] == [], name
    lanes = {e["tool"]: role(e["agent"]) for e in events if e["type"] == "tool_call"}
    assert {tool: lanes.get(tool) for tool in want["tools"]} == want["tools"], name
    assert trace["costs"]["tokens"] == want["tokens"], name


@pytest.mark.parametrize("name", OTLP_FIXTURES)
def test_each_framework_gives_its_team_delegations_tool_lanes_and_tokens(name):
    docs = [decode_request(body) for body in batches(name)]
    result = import_otlp({"resourceSpans": [rs for doc in docs for rs in doc["resourceSpans"]]})
    assert len(result.traces) == 1, f"{name}: {[t['trace_id'] for t in result.traces]} {result.warnings}"
    check(result.traces[0], expected(name), name)
    if name in TWO_TRACES:
        assert any("two instrumentations of one run" in w for w in result.warnings)


@pytest.mark.parametrize("name", OTLP_FIXTURES)
def test_framework_batches_sent_to_v1_traces_are_stored(client, name):
    answers = [client.post("/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
               for body in batches(name)]
    assert all(a.status_code == 200 for a in answers)
    client.app.state.live.flush()
    listed = client.get("/api/traces").json()
    assert listed["total"] == (2 if name in TWO_TRACES else 1), name
    if name not in TWO_TRACES:
        trace = client.get(f"/api/traces/{listed['items'][0]['trace_id']}").json()
        check(trace, expected(name), name)
        # every span is accounted for, and each that gave nothing (no event, none below it) is named
        log = client.get("/api/ingest-log").json()["items"]
        assert all(e["received"] == e["used"] + e["duplicates"] + e["skipped"] for e in log)
        warnings = client.get(f"/api/traces/{trace['trace_id']}/live").json()["build_warnings"]
        said = " ".join(warnings + [r["reason"] for e in log for r in e["reasons"]])
        spans = [s for body in batches(name) for rs in decode_request(body)["resourceSpans"]
                 for ss in rs["scopeSpans"] for s in ss["spans"]]
        parents = {s["spanId"]: s.get("parentSpanId") for s in spans}
        giving = set()
        for event in trace["events"]:
            for span_id in (event.get("span_id"), event.get("transfer_span_id")):
                while span_id and span_id not in giving:
                    giving.add(span_id)
                    span_id = parents.get(span_id)
        for span in spans:
            if span["spanId"] not in giving:
                assert span["name"] in said or span["name"].partition(" ")[0] in said, (name, span["name"])


@pytest.mark.parametrize("name", AGENTS_FIXTURES)
def test_the_agents_sdk_exporter_batches_merge_into_one_trace(client, name):
    headers = json.loads((FRAMEWORKS / name / "headers.json").read_text())
    posts = sorted((FRAMEWORKS / name).glob("batch-*.json"))
    for path in posts:
        answer = client.post("/v1/traces/ingest", content=path.read_bytes(),
                             headers={"Content-Type": "application/json",
                                      "Authorization": headers.get("Authorization", "")})
        assert answer.status_code == 200 and answer.json()["skipped"] == []
    retry = client.post("/v1/traces/ingest", content=posts[-1].read_bytes(), headers={"Content-Type": "application/json"})
    assert retry.json()["used"] == 0 and retry.json()["duplicates"] == retry.json()["received"]
    client.app.state.live.flush()
    listed = client.get("/api/traces").json()
    assert listed["total"] == 1
    trace = client.get(f"/api/traces/{listed['items'][0]['trace_id']}").json()
    check(trace, expected(name), name)
    log = client.get("/api/ingest-log", params={"trace_id": trace["trace_id"]}).json()
    assert log["total"] == len(posts) + 1 and log["items"][0]["repeated"] == [trace["trace_id"]]  # the retry


@pytest.mark.parametrize("name", OTLP_FIXTURES)
def test_every_event_whose_span_carried_content_keeps_it(name):
    trace, keys = imported(name)
    expected = [e["id"] for e in trace["events"] if any(carried(keys.get(e.get("span_id"), set()), side)
                                                         for side in sides(e))]
    assert expected or name in RUNTIME_CONTENT, name
    assert [i for i in expected if "content" not in next(e for e in trace["events"] if e["id"] == i)] == [], name
    assert all(len(json.dumps(e["content"]).encode()) < 2**20 for e in trace["events"] if "content" in e)
    hashed = imported(name, "hash")[0]
    assert not any("content" in e for e in hashed["events"])
    assert [{k: v for k, v in e.items() if k != "content"} for e in trace["events"]] == hashed["events"]


@pytest.mark.parametrize("name", sorted(RUNTIME_CONTENT))
def test_tool_content_only_in_runtime_messages_is_found_by_call_id(name):
    events = imported(name)[0]["events"]
    for tool, (arguments, result) in RUNTIME_CONTENT[name].items():
        assert next(e for e in events if e["type"] == "tool_call" and e["tool"] == tool)["content"] == arguments
        assert next(e for e in events if e["type"] == "tool_result" and e["tool"] == tool)["content"] == result


@pytest.mark.parametrize("name", AGENTS_FIXTURES)
def test_the_agents_sdk_exporter_s_function_spans_keep_their_input_and_output(name):
    records = [r for path in sorted((FRAMEWORKS / name).glob("batch-*.json"))
               for r in json.loads(path.read_text())["data"]]
    functions = {r["span_data"]["name"]: r["span_data"] for r in records
                 if r.get("object") == "trace.span" and r["span_data"]["type"] == "function"}
    events = import_agents(records).traces[0]["events"]
    for tool, data in functions.items():
        assert next(e for e in events if e["type"] == "tool_call" and e["tool"] == tool)["content"] == data["input"]
        assert next(e for e in events if e["type"] == "tool_result" and e["tool"] == tool)["content"] == data["output"]
    # the Responses API's spans carry only a response id: those model calls have nothing to keep
    assert not any("content" in e for e in events if e["type"] in MODEL_CALLS)


def post_fixture(client, name: str) -> dict:
    """The fixture through its live receiver, as its exporter sent it; the stored trace."""
    if name in AGENTS_FIXTURES:
        for path in sorted((FRAMEWORKS / name).glob("batch-*.json")):
            assert client.post("/v1/traces/ingest", content=path.read_bytes(),
                               headers={"Content-Type": "application/json"}).status_code == 200
    else:
        for body in batches(name):
            assert client.post("/v1/traces", content=body,
                               headers={"Content-Type": "application/x-protobuf"}).status_code == 200
    client.app.state.live.flush()
    trace_id = client.get("/api/traces").json()["items"][0]["trace_id"]
    return client.get(f"/api/traces/{trace_id}").json()


@pytest.mark.parametrize("name", ["pydantic_ai", "langgraph_langsmith_otel", "agents_sdk_native"])
def test_the_live_receivers_keep_content_unless_the_server_says_hash(tmp_path, name):
    stored = {}
    for policy in ("keep", "hash"):
        app = create_app(Settings(db=tmp_path / f"{policy}.duckdb", content=policy))
        try:
            with TestClient(app, base_url=BASE_URL) as client:
                stored[policy] = post_fixture(client, name)
        finally:
            app.state.db.close()
    assert any("content" in e for e in stored["keep"]["events"])
    assert not any("content" in e for e in stored["hash"]["events"])
    assert [{k: v for k, v in e.items() if k != "content"} for e in stored["keep"]["events"]] == \
        stored["hash"]["events"]
