"""Traces from real frameworks: each fixture under tests/fixtures/frameworks/ was recorded by a script in
tests/fixtures/generators/ that ran the framework offline with a scripted model and its own
instrumentation and exporter. Each must give the team, delegations, tool lanes and tokens its scenario had
(expected.json, written from the scenario, not from our importer), through the live receivers."""

import json
from collections import Counter
from pathlib import Path

import pytest

from app.domain.validation import validate_trace
from app.ingest.importers.otlp import import_otlp
from app.ingest.importers.otlp_protobuf import decode_request

FRAMEWORKS = Path(__file__).resolve().parent / "fixtures" / "frameworks"
OTLP_FIXTURES = sorted(p.name for p in FRAMEWORKS.iterdir() if list(p.glob("batch-*.pb")))
AGENTS_FIXTURES = sorted(p.name for p in FRAMEWORKS.iterdir() if list(p.glob("batch-*.json")))
NOT_AGENTS = ("user", "system")
# Both instrumentations at once: OpenInference and OpenLLMetry each start their own trace id. A document
# import keeps the fuller one; the live receiver, which builds each trace as it completes, stores both.
TWO_TRACES = {"agents_sdk_both"}


def batches(name: str) -> list[bytes]:
    return [p.read_bytes() for p in sorted((FRAMEWORKS / name).glob("batch-*.pb"))]


def expected(name: str) -> dict:
    return json.loads((FRAMEWORKS / name / "expected.json").read_text())


def role(agent: str) -> str:
    return agent.partition("#")[0]


def check(trace: dict, want: dict, name: str) -> None:
    assert validate_trace(trace) == []
    events = trace["events"]
    instances = {e["agent"] for e in events if e["type"] != "tool_result" and e["agent"] not in NOT_AGENTS}
    assert Counter(role(a) for a in instances) == Counter(want["team"]), name
    spawns = Counter((role(e["agent"]), role(e["to"])) for e in events
                     if e["type"] == "spawn" and e["agent"] not in NOT_AGENTS)
    assert spawns == Counter(tuple(pair) for pair in want["spawns"]), name
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
