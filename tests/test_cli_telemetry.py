"""Claude Code's and Codex's own OpenTelemetry through the real routes: their log events on `POST /v1/logs` build
one live trace per session (Claude Code) or root thread (Codex), growing batch by batch, retries adding nothing;
their spans on `POST /v1/traces` are counted skipped, covered by that trace. Bodies as the CLIs sent them
(tests/fixtures/cli_telemetry/, recorded by generators/cli_telemetry.py)."""

import gzip
import json
from collections import Counter
from pathlib import Path

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceResponse,
)

from app.ingest.importers import cli_telemetry, codex
from app.ingest.importers.otlp_logs import decode_logs_request
from app.ingest.importers.otlp_protobuf import decode_request

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLAUDE = FIXTURES / "cli_telemetry" / "claude_code" / "2.1.332"
CODEX = FIXTURES / "cli_telemetry" / "codex" / "0.171.0"
CODEX_ROLLOUTS = FIXTURES / "codex" / "0.171.0" / "multi_agent_v1"  # the same scripted scenario, another run
PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}
SESSION = "06a59f49-df92-4d9e-89c0-cc2f80c52c65"
CLAUDE_TRACE = f"claude-code-otel-{SESSION}"
CHILD = "general-purpose#a1564c4940fad49c4"
ROOT_THREAD = "01a21bac-5af7-7a01-97bf-313cff5f6050"
ALPHA_THREAD = "01a21bac-5c1c-7e81-8157-3020e1bce4b6"
CODEX_TRACE = f"codex-otel-{ROOT_THREAD}"


def logs(folder: Path) -> list[Path]:
    return sorted(folder.glob("logs-*.pb"))


def records(doc: dict) -> list[dict]:
    return [r for rl in doc["resourceLogs"] for sl in rl["scopeLogs"] for r in sl["logRecords"]]


def post_logs(client, path: Path) -> ExportLogsServiceResponse:
    answer = client.post("/v1/logs", content=path.read_bytes(), headers=PROTOBUF)
    assert answer.status_code == 200, answer.text
    response = ExportLogsServiceResponse()
    response.ParseFromString(answer.content)
    return response


def stored(client) -> list[str]:
    return [t["trace_id"] for t in client.get("/api/traces").json()["items"]]


def lanes(trace: dict) -> set[str]:
    return {e["agent"] for e in trace["events"]}


def claude_code_total_tokens() -> int:
    """What the CLI itself reported using (its `--output-format json` result's modelUsage)."""
    usage = json.loads(json.loads((CLAUDE / "run.json").read_text())["stdout"])["modelUsage"]
    return sum(u["inputTokens"] + u["cacheReadInputTokens"] + u["cacheCreationInputTokens"] + u["outputTokens"]
               for u in usage.values())


def test_claude_code_logs_batch_by_batch_make_one_growing_trace(client, app):
    first, *rest = logs(CLAUDE)
    post_logs(client, first)
    app.state.live.flush()
    assert stored(client) == [CLAUDE_TRACE]
    early = client.get(f"/api/traces/{CLAUDE_TRACE}").json()
    for path in rest:
        unused = [r for r in records(decode_logs_request(path.read_bytes()))
                  if isinstance(cli_telemetry.sort_record({}, {}, r), str)]
        assert post_logs(client, path).partial_success.rejected_log_records == len(unused)
    app.state.live.flush()
    assert stored(client) == [CLAUDE_TRACE]
    trace = client.get(f"/api/traces/{CLAUDE_TRACE}").json()
    assert len(trace["events"]) > len(early["events"])
    assert trace["system"] == "claude-code 2.1.332" and lanes(trace) == {"user", "main", CHILD, "Bash"}
    spawn = next(e for e in trace["events"] if e["type"] == "spawn")
    assert spawn["agent"] == "main" and spawn["to"] == CHILD
    (call,) = [e for e in trace["events"] if e["type"] == "tool_call"]
    assert call["agent"] == CHILD and call["tool"] == "Bash"
    assert trace["costs"]["tokens"] == claude_code_total_tokens() == 715
    status = client.get(f"/api/traces/{CLAUDE_TRACE}/live").json()
    assert status["source"] == cli_telemetry.CLAUDE_CODE and status["build_error"] is None
    log = client.get("/api/ingest-log").json()["items"]
    assert all(i["endpoint"] == "POST /v1/logs" and i["received"] == i["used"] + i["skipped"] for i in log)
    assert {r["reason"] for i in log for r in i["reasons"]} == {
        "claude_code.plugin_loaded: makes no trace event", "claude_code.managed_settings_resolved: makes no trace event"}


def test_a_retried_logs_batch_adds_nothing(client, app):
    for path in logs(CLAUDE):
        post_logs(client, path)
    app.state.live.flush()
    before = client.get(f"/api/traces/{CLAUDE_TRACE}").json()
    for path in logs(CLAUDE):
        post_logs(client, path)
    app.state.live.flush()
    assert client.get(f"/api/traces/{CLAUDE_TRACE}").json() == before
    retries = client.get("/api/ingest-log").json()["items"][:len(logs(CLAUDE))]
    assert all(i["used"] == 0 and i["duplicates"] == i["received"] - i["skipped"] > 0 for i in retries)


def test_claude_code_logs_as_gzip_json_give_the_same_trace(client, app):
    for path in logs(CLAUDE):
        body = gzip.compress(json.dumps(decode_logs_request(path.read_bytes())).encode())
        answer = client.post("/v1/logs", content=body, headers=JSON | {"Content-Encoding": "gzip"})
        assert answer.status_code == 200
    app.state.live.flush()
    trace = client.get(f"/api/traces/{CLAUDE_TRACE}").json()
    direct, _ = cli_telemetry.import_logs([decode_logs_request(p.read_bytes()) for p in logs(CLAUDE)])
    assert trace["events"] == direct.traces[0]["events"] and trace["costs"] == direct.traces[0]["costs"]


def rollout_trace() -> dict:
    files = {str(p): p.read_bytes() for p in CODEX_ROLLOUTS.glob("rollout-*.jsonl")}
    (trace,) = codex.import_rollouts(files).traces
    return trace


def shape(trace: dict) -> dict:
    """What two runs of one scripted scenario share: lanes by role, event and edge counts, tokens."""
    roles = Counter(e["type"] if e["agent"] in ("main", "user") or e["type"] == "tool_result"
                    else f"sub:{e['type']}" for e in trace["events"]
                    if e["type"] not in ("message", "orchestrator_decision"))
    calls = Counter("main" if e["agent"] == "main" else "sub" for e in trace["events"] if "tokens_in" in e)
    return {"events": roles, "model_calls": calls, "lanes": len(lanes(trace)), "tokens": trace["costs"]["tokens"],
            "tool_calls": trace["costs"]["tool_calls"], "messages": trace["costs"]["messages"],
            "edges": Counter(e["type"] for e in trace["edges"] if e["type"] != "causal")}


def test_codex_logs_make_one_trace_per_root_thread_as_its_rollouts_do(client, app):
    for path in logs(CODEX):
        post_logs(client, path)
    app.state.live.flush()
    assert stored(client) == [CODEX_TRACE]
    trace = client.get(f"/api/traces/{CODEX_TRACE}").json()
    assert trace["system"] == "codex 0.171.0" and trace["metrics"]["threads"] == 3
    assert lanes(trace) == {"user", "main", "subagent#Poincare", "subagent#Cicero", "exec_command", "wait_agent",
                            "close_agent"}
    spawns = [e for e in trace["events"] if e["type"] == "spawn"]
    assert [(s["agent"], s["to"]) for s in spawns] == [("main", "subagent#Poincare"), ("main", "subagent#Cicero")]
    calls = [e for e in trace["events"] if e["type"] == "tool_call" and e["tool"] == "exec_command"]
    assert sorted(c["agent"] for c in calls) == ["subagent#Cicero", "subagent#Poincare"]
    assert [e["content"] for e in trace["events"] if e["type"] == "message" and e["agent"] == "user"] == [
        "Check the shell twice in parallel: spawn two sub-agents, one per check."]
    # the scripted scenario answers with the same usage every run: the rollouts' trace has the same shape
    assert shape(trace) == shape(rollout_trace())
    assert trace["costs"]["tokens"] == 20890 and trace["costs"]["messages"] == 8


def test_codex_sub_agent_received_before_its_spawn_joins_the_root_trace(client, app):
    """A sub-agent's first records may come in a batch before the one with the spawn that names it: its trace
    built meanwhile is taken into the root's, and removed."""
    docs = [decode_logs_request(p.read_bytes()) for p in logs(CODEX)]
    alpha = {"resourceLogs": [{**rl, "scopeLogs": [{**sl, "logRecords": [
        r for r in sl["logRecords"] if cli_telemetry.attributes(r)["conversation.id"] == ALPHA_THREAD]}
        for sl in rl["scopeLogs"]]} for doc in docs for rl in doc["resourceLogs"]]}
    assert client.post("/v1/logs", content=json.dumps(alpha), headers=JSON).status_code == 200
    app.state.live.flush()
    assert stored(client) == [f"codex-otel-{ALPHA_THREAD}"]
    for path in logs(CODEX):
        post_logs(client, path)
    app.state.live.flush()
    assert stored(client) == [CODEX_TRACE]
    assert client.get(f"/api/traces/codex-otel-{ALPHA_THREAD}/live").status_code == 404
    trace = client.get(f"/api/traces/{CODEX_TRACE}").json()
    direct, _ = cli_telemetry.import_logs(docs)
    assert trace["events"] == direct.traces[0]["events"]


def test_the_clis_spans_are_counted_as_covered_by_their_logs_trace(client, app):
    """Claude Code's spans would build a second trace of the session (2 traces, one per interaction), Codex's
    are its internals: neither makes a trace; each span is counted skipped naming the trace its logs build."""
    for folder, n_spans, reason in ((CLAUDE, 13, f"({CLAUDE_TRACE})"), (CODEX, 1742, "codex-otel-<root thread>")):
        total = 0
        for path in sorted(folder.glob("traces-*.pb")):
            spans = sum(len(ss["spans"]) for rs in decode_request(path.read_bytes())["resourceSpans"]
                        for ss in rs["scopeSpans"])
            total += spans
            answer = client.post("/v1/traces", content=path.read_bytes(), headers=PROTOBUF)
            assert answer.status_code == 200
            response = ExportTraceServiceResponse()
            response.ParseFromString(answer.content)
            assert response.partial_success.rejected_spans == spans
            assert reason in response.partial_success.error_message
        assert total == n_spans
    app.state.live.flush()
    assert stored(client) == []


def test_the_clis_spans_uploaded_as_a_file_make_no_trace_and_say_where_their_session_comes_from(client):
    """The same rule on an upload: a dump of the CLIs' spans is no second trace of the session."""
    for folder, reason in ((CLAUDE, CLAUDE_TRACE), (CODEX, "codex-otel-<root thread>")):
        docs = [decode_request(p.read_bytes()) for p in sorted(folder.glob("traces-*.pb"))]
        body = json.dumps({"resourceSpans": [rs for doc in docs for rs in doc["resourceSpans"]]})
        answer = client.post("/api/traces", content=body, headers=JSON)
        assert answer.status_code == 201 and answer.json()["ingested"] == []
        assert any(reason in w and "POST /v1/logs" in w for w in answer.json()["warnings"])
    assert stored(client) == []
