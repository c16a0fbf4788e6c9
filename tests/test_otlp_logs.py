"""`POST /v1/logs` (OTLP/HTTP logs, protobuf and JSON) on the bodies Claude Code 2.1.332 itself exported
(tests/fixtures/cli_telemetry/claude_code/, recorded by generators/cli_telemetry.py), and the mapping of its
`claude_code.*` log events onto one trace per session (app.ingest.importers.cli_telemetry). The live traces they
build, and Codex's, are tested in test_cli_telemetry.py."""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from app.ingest.importers import cli_telemetry
from app.ingest.importers.otlp_logs import decode_logs_request
from app.ingest.importers.otlp_protobuf import decode_request
from app.ingest.pipeline import problems_of

CLAUDE = Path(__file__).resolve().parent / "fixtures" / "cli_telemetry" / "claude_code" / "2.1.332"
LOGS = sorted(CLAUDE.glob("logs-*.pb"))
TRACES = sorted(CLAUDE.glob("traces-*.pb"))
PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
SESSION = "06a59f49-df92-4d9e-89c0-cc2f80c52c65"
CHILD = "general-purpose#a1564c4940fad49c4"
CODEX = CLAUDE.parent.parent / "codex" / "0.171.0"


def records(doc: dict) -> list[dict]:
    return [r for rl in doc["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]


def names(doc: dict) -> list[str]:
    return [r["body"]["stringValue"] for r in records(doc)]


def unused(doc: dict) -> Counter:
    """Why each record of a logs document that no trace uses is not used."""
    return Counter(reason for r in records(doc)
                   if isinstance(reason := cli_telemetry.sort_record({}, {}, r), str))


def all_docs() -> list[dict]:
    return [decode_logs_request(path.read_bytes()) for path in LOGS]


def test_fixture_is_what_claude_code_sent():
    """Three log batches and a trace batch, every record a `claude_code.*` event of one session."""
    assert len(LOGS) == 3 and len(TRACES) == 1
    docs = all_docs()
    events = Counter(name for doc in docs for name in names(doc))
    assert events["claude_code.api_request"] == 5 and events["claude_code.user_prompt"] == 2
    assert events["claude_code.tool_decision"] == events["claude_code.tool_result"] == 2
    assert events["claude_code.subagent_completed"] == 1
    assert {cli_telemetry.attributes(r)["session.id"] for doc in docs for r in records(doc)} == {SESSION}
    spans = [s["name"] for rs in decode_request(TRACES[0].read_bytes())["resourceSpans"]
             for ss in rs["scopeSpans"] for s in ss["spans"]]
    assert {"claude_code.interaction", "claude_code.llm_request", "claude_code.tool"} <= set(spans)


def test_mapping_one_trace_per_session_with_the_subagent_as_a_lane():
    result, skipped = cli_telemetry.import_logs(all_docs())
    assert problems_of(result.traces) == [] and result.warnings == []
    (trace,) = result.traces
    assert trace["trace_id"] == f"claude-code-otel-{SESSION}" and trace["system"] == "claude-code 2.1.332"
    events = trace["events"]
    assert {e["agent"] for e in events} == {"user", "main", CHILD, "Bash"}
    spawn = next(e for e in events if e["type"] == "spawn")
    assert spawn["agent"] == "main" and spawn["to"] == CHILD and spawn["role"] == "general-purpose"
    ret = next(e for e in events if e["type"] == "return")
    assert ret["agent"] == CHILD and ret["to"] == "main" and ret["reported_total_tokens"] == 145
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["agent"] == CHILD and call["tool"] == "Bash" and call["content_ref"] == "toolu_bash_01"
    result_event = next(e for e in events if e["type"] == "tool_result")
    assert result_event["agent"] == "Bash" and result_event["error"] is False
    # tokens as the transcript gives them: input + cache read + cache creation, and output, per model call
    calls = [e for e in events if e["type"] in ("message", "orchestrator_decision") and e["agent"] != "user"]
    assert len(calls) == 5 and trace["costs"]["messages"] == 5 and trace["costs"]["tool_calls"] == 1
    assert [c["tokens_in"] for c in calls] == [131, 133, 132, 134, 135]
    assert trace["costs"]["tokens"] == sum(c["tokens_in"] + c["tokens_out"] for c in calls) == 715
    assert next(c for c in calls if c["agent"] == "main")["type"] == "orchestrator_decision"
    by_id = {e["id"]: e for e in events}
    edges = {(by_id[e["src"]]["type"], by_id[e["dst"]]["type"], e["type"]) for e in trace["edges"]}
    assert {("spawn", "message", "spawn"), ("spawn", "return", "tool_dependency"),
            ("tool_call", "tool_result", "tool_dependency"), ("orchestrator_decision", "spawn", "causal"),
            ("message", "tool_call", "causal")} <= edges
    assert skipped == Counter({"claude_code.plugin_loaded: makes no trace event": 4,
                               "claude_code.managed_settings_resolved: makes no trace event": 1})


def test_mapping_reads_batches_in_any_order():
    forward, _ = cli_telemetry.import_logs(all_docs())
    backward, _ = cli_telemetry.import_logs(all_docs()[::-1])
    assert forward.traces == backward.traces


def test_logs_protobuf_answered_with_partial_success_and_logged(client):
    total = 0
    for path in LOGS:
        answer = client.post("/v1/logs", content=path.read_bytes(), headers=PROTOBUF)
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/x-protobuf"
        response = ExportLogsServiceResponse()
        response.ParseFromString(answer.content)
        doc = decode_logs_request(path.read_bytes())
        total += len(records(doc))
        assert response.partial_success.rejected_log_records == sum(unused(doc).values())
    log = client.get("/api/ingest-log").json()
    assert log["total"] == len(LOGS)
    assert sum(item["received"] for item in log["items"]) == total
    assert sum(item["used"] + item["skipped"] for item in log["items"]) == total
    first = log["items"][-1]
    assert first["endpoint"] == "POST /v1/logs" and first["format"] == "otlp/protobuf" and first["unit"] == "records"
    assert {r["reason"] for r in first["reasons"]} == set(unused(decode_logs_request(LOGS[0].read_bytes())))


def test_logs_json_and_gzip(client):
    doc = decode_logs_request(LOGS[1].read_bytes())
    body = gzip.compress(json.dumps(doc).encode())
    answer = client.post("/v1/logs", content=body, headers=JSON | {"Content-Encoding": "gzip"})
    assert answer.status_code == 200
    assert unused(doc) == Counter() and answer.json()["partialSuccess"] == {}  # every record of it is used
    assert answer.json()["ingested"] == [f"claude-code-otel-{SESSION}"]
    other = {"resourceLogs": [{"resource": {}, "scopeLogs": [{"scope": {"name": "some.app"}, "logRecords": [
        {"timeUnixNano": "1", "body": {"stringValue": "hello"}}]}]}]}
    answer = client.post("/v1/logs", content=json.dumps(other), headers=JSON)
    assert answer.json()["partialSuccess"] == {"rejectedLogRecords": "1",
                                               "errorMessage": "1 records: not a Claude Code or Codex event (scope some.app)"}
    pb = ParseDict(other, ExportLogsServiceRequest()).SerializeToString()
    assert client.post("/v1/logs", content=pb, headers=PROTOBUF).status_code == 200


@pytest.mark.parametrize("body, headers, status", [
    (b"\xff\xff\xff", PROTOBUF, 400),
    (b"{}", JSON, 400),
    (b"not json", JSON, 400),
    (b"{}", {"Content-Type": "text/plain"}, 415),
    (b"{}", JSON | {"Content-Encoding": "br"}, 415),
])
def test_logs_refusals_are_logged(client, body, headers, status):
    answer = client.post("/v1/logs", content=body, headers=headers)
    assert answer.status_code == status
    entry = client.get("/api/ingest-log").json()["items"][0]
    assert entry["endpoint"] == "POST /v1/logs" and entry["status"] == status


def test_logs_body_limit(app, client):
    app.state.settings.max_body_bytes = 100
    body = gzip.compress(LOGS[1].read_bytes())
    assert len(body) < 100 * 100
    answer = client.post("/v1/logs", content=body, headers=PROTOBUF | {"Content-Encoding": "gzip"})
    assert answer.status_code == 413


def test_codex_logs_not_used_are_counted_not_dropped(client):
    """Codex 0.171.0's own export (codex.* events, scope codex_otel.log_only): every record is received, and
    those the mapping does not use (its stream's deltas, startup phases, ...) are skipped, each with why."""
    paths = sorted(CODEX.glob("logs-*.pb"))
    assert paths and sorted(CODEX.glob("traces-*.pb"))
    total = 0
    for path in paths:
        doc = decode_logs_request(path.read_bytes())
        assert {cli_telemetry.attributes(r)["event.name"] for r in records(doc)} >= {"codex.sse_event"}
        total += len(records(doc))
        answer = client.post("/v1/logs", content=path.read_bytes(), headers=PROTOBUF)
        response = ExportLogsServiceResponse()
        response.ParseFromString(answer.content)
        assert response.partial_success.rejected_log_records == sum(unused(doc).values()) > 0
        assert "codex.sse_event response.output_item.added: makes no trace event" in \
            response.partial_success.error_message
    items = client.get("/api/ingest-log").json()["items"]
    assert sum(item["received"] for item in items) == sum(item["used"] + item["skipped"] for item in items) == total


@pytest.mark.parametrize("body, where", [({"resourceLogs": [[None, None]]}, "resourceLogs[0]"),
                                         ({"resourceLogs": [{"scopeLogs": [7]}]}, "resourceLogs[0].scopeLogs[0]"),
                                         ({"resourceLogs": [{"scopeLogs": [{"logRecords": ["x"]}]}]},
                                          "resourceLogs[0].scopeLogs[0].logRecords[0]")])
def test_a_logs_body_that_is_not_an_export_request_is_refused_naming_where(client, body, where):
    answer = client.post("/v1/logs", json=body)
    assert answer.status_code in (400, 422) and where in answer.text
