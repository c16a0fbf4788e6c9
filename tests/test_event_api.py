"""`GET /api/traces/{trace_id}/events/{event_id}`: one event as ingested, with what it said, its position and its
edges, each naming the event at the other end."""

import json
from pathlib import Path

from conftest import SMALL_TRACE, make_trace, post_json

from app.ingest.importers.common import CONTENT_CAP_BYTES

FIXTURES = Path(__file__).resolve().parent / "fixtures"
OTLP = FIXTURES / "otlp" / "pydantic_ai_delegation.json"


def test_an_event_as_ingested_with_its_position_and_its_edges(client):
    events = [dict(e) for e in SMALL_TRACE["events"]]
    events[2]["big"] = 2**70
    trace = make_trace(events=events)
    assert post_json(client, trace).status_code == 201
    answer = client.get("/api/traces/t-small/events/e3")
    assert answer.status_code == 200
    body = answer.json()
    assert body["trace_id"] == "t-small" and body["seq"] == 2
    assert body["event"] == trace["events"][2]  # every property, extra ones too, integers of any size exact
    assert json.dumps(body["event"]).index('"credit"') < json.dumps(body["event"]).index('"tags"')  # key order kept
    assert body["edges"] == {
        "incoming": [{"type": "spawn", "event": {"id": "e2", "type": "spawn", "agent": "lead"}}],
        "outgoing": [{"type": "tool_dependency", "event": {"id": "e4", "type": "tool_result", "agent": "web.search"}}],
    }
    alone = client.get("/api/traces/t-small/events/e6").json()
    assert alone["seq"] == 5 and alone["edges"] == {
        "incoming": [{"type": "return", "event": {"id": "e5", "type": "return", "agent": "worker"}}], "outgoing": []}


def test_what_an_imported_event_said_is_in_its_content(client):
    answer = client.post("/api/traces", content=OTLP.read_bytes(), headers={"Content-Type": "application/json"})
    trace_id = answer.json()["ingested"][0]
    events = client.get(f"/api/traces/{trace_id}").json()["events"]
    result = next(e for e in events if e["type"] == "tool_result" and e["tool"] == "search")
    body = client.get(f"/api/traces/{trace_id}/events/{result['id']}").json()
    assert body["event"]["content"] == "results for a" and body["event"]["content_ref"].startswith("sha256:")
    assert [(edge["type"], edge["event"]["type"]) for edge in body["edges"]["incoming"]] == [
        ("tool_dependency", "tool_call")]
    decision = next(e for e in events if e["type"] == "orchestrator_decision")
    said = client.get(f"/api/traces/{trace_id}/events/{decision['id']}").json()["event"]["content"]
    assert said["input"][0]["parts"][0]["content"] == "write a report"
    assert [part["name"] for part in said["output"][0]["parts"]] == ["ask_researcher", "ask_writer"]


def test_a_cut_content_says_so(client):
    doc = json.loads(OTLP.read_text())
    span = next(s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
                if s["name"] == "execute_tool search")
    result = next(a for a in span["attributes"] if a["key"] == "gen_ai.tool.call.result")
    result["value"] = {"stringValue": "long " * CONTENT_CAP_BYTES}
    answer = client.post("/api/traces", content=json.dumps(doc), headers={"Content-Type": "application/json"})
    trace_id = answer.json()["ingested"][0]
    event = next(e for e in client.get(f"/api/traces/{trace_id}").json()["events"]
                 if e["type"] == "tool_result" and e["tool"] == "search")
    body = client.get(f"/api/traces/{trace_id}/events/{event['id']}").json()["event"]
    assert body["content_cut"] == {"limit_bytes": CONTENT_CAP_BYTES, "original_bytes": 5 * CONTENT_CAP_BYTES + 2}
    assert body["content"].startswith("long long") and body["content"].endswith("…")
    assert len(json.dumps(body["content"], ensure_ascii=False).encode()) <= CONTENT_CAP_BYTES


def test_an_unknown_trace_or_event_is_404_naming_it(client):
    assert post_json(client, make_trace()).status_code == 201
    no_trace = client.get("/api/traces/nope/events/e1")
    assert no_trace.status_code == 404 and "nope" in no_trace.json()["error"]
    no_event = client.get("/api/traces/t-small/events/e99")
    assert no_event.status_code == 404
    assert no_event.json()["error"] == "no event with id 'e99' in trace 't-small'"


def test_the_openapi_description_names_the_answers(client):
    route = client.get("/openapi.json").json()["paths"]["/api/traces/{trace_id}/events/{event_id}"]["get"]
    assert {"200", "404", "401"} <= set(route["responses"])
    answer = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer["required"] == ["trace_id", "seq", "event", "edges"]
