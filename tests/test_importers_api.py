"""Industrial formats through the ingest paths: detection by content, the API, /v1/traces, the CLI."""

import copy
import gc
import io
import json
import random
import tarfile
import urllib.request
import zipfile
from pathlib import Path

import pytest
from conftest import BASE_URL, make_trace, running_server
from fastapi.testclient import TestClient

from app.cli import main
from app.domain.audit import audit
from app.ingest.documents import DocumentError, Upload
from app.ingest.importers import _records, convert, detect, subagent_uploads
from app.ingest.importers.common import ImportFailed
from app.main import create_app
from app.settings import Settings

FIXTURES = Path(__file__).resolve().parent / "fixtures"
OTLP = FIXTURES / "otlp" / "pydantic_ai_delegation.json"
AGENTS = FIXTURES / "openai_agents" / "agent_as_tool.json"
SESSION = FIXTURES / "claude_code" / "parallel.jsonl"


def session_files() -> list[tuple[str, bytes]]:
    return [("parallel.jsonl", SESSION.read_bytes())] + [(u.source, u.data) for u in subagent_uploads(SESSION)]


@pytest.mark.parametrize("path, expected", [(OTLP, "otlp"), (AGENTS, "openai_agents"), (SESSION, "claude_code")])
def test_format_is_recognised_from_content_not_name(path, expected):
    assert detect(_records(path.read_bytes())[0]) == expected
    assert detect(_records(json.dumps(make_trace()).encode())[0]) == "orchestrace"
    renamed = convert([Upload("whatever.txt", path.read_bytes())])
    assert renamed.traces and all(t["trace_id"] for t in renamed.traces)


def test_otlp_and_agents_sdk_through_the_api(client):
    otlp = client.post("/api/traces", content=OTLP.read_bytes(), headers={"Content-Type": "application/json"})
    assert otlp.status_code == 201, otlp.text
    trace_id = otlp.json()["ingested"][0]
    assert trace_id.startswith("otlp-") and isinstance(otlp.json()["warnings"], list)
    again = client.post("/api/traces", content=OTLP.read_bytes(), headers={"Content-Type": "application/json"})
    assert again.status_code == 409  # same trace id: idempotent re-import needs replace
    assert client.post("/api/traces?replace=true", content=OTLP.read_bytes()).status_code == 201
    agents = client.post("/api/traces", params={"format": "openai_agents"}, content=AGENTS.read_bytes())
    assert agents.status_code == 201 and agents.json()["ingested"][0].startswith("openai-agents-")
    stored = client.get(f"/api/traces/{trace_id}").json()
    assert {"spawn", "tool_call", "tool_result", "return"} <= {e["type"] for e in stored["events"]}
    wrong = client.post("/api/traces", params={"format": "otlp"}, content=json.dumps(make_trace()))
    assert wrong.status_code == 422


def stored_events(client, answer) -> list[dict]:
    assert answer.status_code == 201, answer.text
    return [e for trace_id in answer.json()["ingested"] for e in client.get(f"/api/traces/{trace_id}").json()["events"]]


def test_an_upload_keeps_content_unless_it_asks_for_hashes(client):
    multipart = [("file", (name, data, "application/octet-stream")) for name, data in session_files()]
    for send in ({"content": OTLP.read_bytes()}, {"content": AGENTS.read_bytes()}, {"files": multipart}):
        kept = stored_events(client, client.post("/api/traces", params={"replace": "true"}, **send))
        assert any("content" in e for e in kept)
        hashed = stored_events(client, client.post("/api/traces", params={"replace": "true", "content": "hash"},
                                                   **send))
        assert not any("content" in e for e in hashed)
        assert [{k: v for k, v in e.items() if k != "content"} for e in kept] == hashed
    # a script written when content had to be asked for still works: keeping is the default now
    old = client.post("/api/traces", params={"replace": "true", "keep_content": "true"}, content=OTLP.read_bytes())
    assert any("content" in e for e in stored_events(client, old))
    wrong = client.post("/api/traces", params={"content": "all"}, content=OTLP.read_bytes())
    assert wrong.status_code == 422 and "content" in wrong.text


def test_a_server_whose_policy_is_hash_keeps_none_whatever_an_upload_asks(tmp_path):
    app = create_app(Settings(db=tmp_path / "hash.duckdb", content="hash"))
    try:
        with TestClient(app, base_url=BASE_URL) as client:
            for params in ({}, {"content": "keep"}, {"keep_content": "true"}):
                answer = client.post("/api/traces", params={"replace": "true", **params}, content=OTLP.read_bytes())
                events = stored_events(client, answer)
                assert events and not any("content" in e for e in events)
                assert any(e.get("content_ref", "").startswith("sha256:") for e in events)
    finally:
        app.state.db.close()


def test_claude_code_session_as_multipart_zip_and_tar(client):
    files = [("file", (name, data, "application/octet-stream")) for name, data in session_files()]
    response = client.post("/api/traces", files=files)
    assert response.status_code == 201, response.text
    trace = client.get(f"/api/traces/{response.json()['ingested'][0]}").json()
    assert trace["topology"] == "harness"
    spawned = {e["to"] for e in trace["events"] if e["type"] == "spawn"}
    agents = {e["agent"] for e in trace["events"]}
    assert len(spawned) == 2 and spawned <= agents
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        for name, data in session_files():
            archive.writestr(name, data)
    as_zip = client.post("/api/traces?replace=true", files={"file": ("session.zip", zipped.getvalue())})
    assert as_zip.status_code == 201 and as_zip.json()["ingested"] == response.json()["ingested"]
    tarred = io.BytesIO()
    with tarfile.open(fileobj=tarred, mode="w:gz") as archive:
        for name, data in session_files():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    as_tar = client.post("/api/traces?replace=true", content=tarred.getvalue())
    assert as_tar.status_code == 201 and as_tar.json()["ingested"] == response.json()["ingested"]
    assert client.get(f"/api/traces/{response.json()['ingested'][0]}").json() == trace


def test_malformed_industrial_input_is_refused_and_stores_nothing(client):
    broken = SESSION.read_text().splitlines()
    broken.insert(2, "{not json")
    response = client.post("/api/traces", params={"format": "claude_code"}, content="\n".join(broken))
    assert response.status_code == 422 and "line 3" in response.json()["error"]
    bad_otlp = json.loads(OTLP.read_text())
    bad_otlp["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = "soon"
    response = client.post("/api/traces", content=json.dumps(bad_otlp))
    assert response.status_code == 422 and "spans[0]" in response.json()["error"]
    for lines in ("1\n2", '{"resourceSpans": 1}\n{}'):
        response = client.post("/api/traces", params={"format": "otlp"}, content=lines)
        assert response.status_code == 422 and "record 1 of its JSON Lines is not an OTLP" in response.json()["error"]
    assert client.get("/api/traces").json()["total"] == 0
    assert gc.isenabled(), "an ingest that failed half-way left garbage collection paused"


def test_cli_import_reads_a_session_folder_and_other_formats(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ORCHESTRACE_DB", str(tmp_path / "cli.duckdb"))
    assert main(["import", str(SESSION), str(OTLP), str(AGENTS)]) == 0
    out = capsys.readouterr().out
    assert "ingested 3 trace(s)" in out
    assert main(["ingest", str(FIXTURES / "claude_code")]) == 0  # the folder: sessions with their sub-agents
    assert "skipped" in capsys.readouterr().out
    assert main(["import", "--format", "otlp", str(SESSION)]) == 1


def test_cli_import_that_imports_nothing_says_so_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ORCHESTRACE_DB", str(tmp_path / "cli.duckdb"))
    doc = json.loads(OTLP.read_text())
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                span["name"], span["attributes"] = "GET /health", []
    http_only = tmp_path / "http.json"
    http_only.write_text(json.dumps(doc))
    assert main(["import", str(http_only)]) == 1
    out = capsys.readouterr()
    assert "ingested 0 trace(s)" in out.out and "no agent, model or tool span" in out.out
    assert "nothing imported" in out.err
    assert main(["import", str(OTLP)]) == 0
    assert main(["import", str(OTLP)]) == 0  # already stored: skipped, which is not nothing
    assert "skipped 1 already stored" in capsys.readouterr().out


def test_cli_posts_a_session_with_its_sub_agents_to_the_server_holding_the_database(tmp_path, capsys):
    db = tmp_path / "held.duckdb"
    with running_server(db) as url:
        assert main(["import", "--db", str(db), "--server", url, str(SESSION), str(OTLP)]) == 0
        out = capsys.readouterr()
        assert "held by a running server" in out.err and "ingested 2 trace(s)" in out.out
        listed = json.load(urllib.request.urlopen(f"{url}/api/traces"))["items"]
        session = next(t for t in listed if not t["trace_id"].startswith("otlp-"))
        trace = json.load(urllib.request.urlopen(f"{url}/api/traces/{session['trace_id']}"))
        local = convert([Upload(name, data) for name, data in session_files()]).traces[0]
        assert trace == local  # the sub-agent files travelled with their session


@pytest.mark.parametrize("uploads", [
    [("delegation.json", OTLP.read_bytes())],
    [("agent_as_tool.json", AGENTS.read_bytes())],
    [("handoff.json", (FIXTURES / "openai_agents" / "handoff_guardrails.json").read_bytes())],
    session_files(),
], ids=["otlp", "agents_sdk", "agents_sdk_handoff", "claude_code"])
def test_imported_runs_audit_without_warnings(uploads):
    """The shapes IMPORTERS.md prescribes (the root answering the user, a handoff's successor answering in
    its place, LLM calls in costs.messages) are normal runs, not findings."""
    for trace in convert([Upload(name, data) for name, data in uploads]).traces:
        assert [f for f in audit(trace) if f["severity"] != "info"] == []


ODD_VALUES = [None, 0, -1, 1.5, "", "x", [], {}, True, [1], {"a": 1}, 2**70, {"stringValue": 5}, {"intValue": "x"}]


def mutated(doc, rng: random.Random):
    """`doc` with one to three values anywhere replaced by a value of another JSON type, or removed."""
    doc = copy.deepcopy(doc)
    places = []
    stack = [(doc, key) for key in (doc if isinstance(doc, dict) else range(len(doc)))]
    while stack:
        parent, key = stack.pop()
        places.append((parent, key))
        child = parent[key]
        if isinstance(child, dict):
            stack += [(child, k) for k in child]
        elif isinstance(child, list):
            stack += [(child, i) for i in range(len(child))]
    for parent, key in rng.sample(places, rng.randint(1, 3)):
        if isinstance(parent, dict) and rng.random() < 0.3:
            parent.pop(key, None)
        else:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
    return doc


def as_lines(records) -> bytes:
    return "\n".join(json.dumps(r) for r in records).encode()


@pytest.mark.parametrize("source", ["otlp", "agents_sdk", "claude_code"])
def test_odd_types_anywhere_are_warnings_or_refusals_never_crashes(source):
    """Untrusted input: whatever field holds whatever JSON type, the import either works or says why
    (ImportFailed, DocumentError: a 4xx), never a TypeError or KeyError (a 500)."""
    rng = random.Random(7)
    for _ in range(150):
        if source == "otlp":
            uploads = [Upload("x.json", json.dumps(mutated(json.loads(OTLP.read_text()), rng)).encode())]
        elif source == "agents_sdk":
            path = rng.choice([AGENTS, FIXTURES / "openai_agents" / "handoff_guardrails.json"])
            uploads = [Upload("x.json", json.dumps(mutated(json.loads(path.read_text()), rng)).encode())]
        else:
            files = session_files()
            records = [json.loads(line) for line in files[0][1].decode().splitlines() if line.strip()]
            uploads = [Upload(files[0][0], as_lines(mutated(records, rng)))] + [Upload(n, d) for n, d in files[1:]]
        try:
            convert(uploads)
        except (ImportFailed, DocumentError):
            pass
