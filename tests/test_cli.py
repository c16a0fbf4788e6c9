"""The `orchestrace` CLI, run in-process against a real DuckDB file, and against real servers."""

import gzip
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import free_port, make_trace, running_server

from app import cli
from app.cli import RecordingServer, address_file, main
from app.ingest.importers import load_session_dir
from app.ingest.importers.claude_code import import_session
from app.store import ingest_log as log_store
from app.store import traces as trace_store
from app.store.db import Database

pytestmark = pytest.mark.heavy

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOLDER_CODE = ("import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); con.execute('CREATE TABLE IF NOT EXISTS "
               "held (x INT)'); print('ok', flush=True); time.sleep(60)")


@pytest.fixture
def env_db(tmp_path, monkeypatch):
    path = tmp_path / "cli.duckdb"
    monkeypatch.setenv("ORCHESTRACE_DB", str(path))
    return path


def write(path, payload) -> str:
    path.write_text(json.dumps(payload))
    return str(path)


def stored(path) -> list[str]:
    db = Database(path)
    try:
        return [r["trace_id"] for r in db.fetchall("SELECT trace_id FROM traces ORDER BY trace_id")]
    finally:
        db.close()


def served(url: str) -> list[str]:
    return [t["trace_id"] for t in json.load(urllib.request.urlopen(f"{url}/api/traces"))["items"]]


@contextmanager
def held(path):
    """The DuckDB file held open by another process that is no Orchestrace server."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER_CODE, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_validate_reports_each_problem_and_exit_code(tmp_path, capsys):
    good = write(tmp_path / "good.json", make_trace("g"))
    bad_trace = make_trace("b")
    bad_trace["events"][3]["type"] = "spawnn"
    bad_trace["costs"]["tokens"] = -5
    bad = write(tmp_path / "bad.json", bad_trace)
    assert main(["validate", good]) == 0
    assert "1 valid trace" in capsys.readouterr().out
    assert main(["validate", good, bad]) == 1
    out = capsys.readouterr().out
    assert "events[3].type: 'spawnn' is not one of" in out
    assert "costs.tokens: -5 is below 0" in out
    (tmp_path / "broken.json").write_text('{"trace_id": ')
    assert main(["validate", str(tmp_path / "broken.json")]) == 1
    assert "line 1, column" in capsys.readouterr().out


def test_ingest_files_folders_and_stdin_with_summary(tmp_path, env_db, monkeypatch, capsys):
    folder = tmp_path / "traces"
    folder.mkdir()
    write(folder / "a.json", make_trace("a"))
    (folder / "b.jsonl").write_text(json.dumps(make_trace("b")) + "\n" + json.dumps(make_trace("c")))
    (folder / "notes.txt").write_text("not a trace")
    bad = make_trace("bad")
    bad["edges"][0]["dst"] = "e99"
    write(folder / "bad.json", bad)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(json.dumps(make_trace("s")).encode())))
    assert main(["ingest", str(folder), "-"]) == 1  # one file refused
    out = capsys.readouterr().out
    assert f"ingested 4 trace(s) into {env_db}, skipped 0 already stored, refused 1 file(s)" in out
    assert "edges[0].dst: 'e99' is not an event id" in out
    assert stored(env_db) == ["a", "b", "c", "s"]


def test_ingest_skips_existing_unless_replace(tmp_path, env_db, capsys):
    path = write(tmp_path / "a.json", make_trace("a"))
    assert main(["ingest", path]) == 0
    assert main(["ingest", path]) == 0
    assert "skipped a: already stored" in capsys.readouterr().out
    write(tmp_path / "a.json", make_trace("a", task_id="changed"))
    assert main(["ingest", path, "--replace"]) == 0
    db = Database(env_db)
    assert db.scalar("SELECT task_id FROM traces") == "changed"
    log, total = log_store.list_ingest_log(db, trace_id="a")
    assert total == 3 and [(r["created"], r["extended"], r["repeated"]) for r in log] == [
        ([], ["a"], []), ([], [], ["a"]), (["a"], [], [])]  # newest first: replaced, skipped, stored
    db.close()


def test_server_always_gets_the_traces_when_named(tmp_path, capsys):
    """--server sends there even when the database file is free: the file is neither written nor made."""
    path = write(tmp_path / "a.json", make_trace("a"))
    served_db, local_db = tmp_path / "served.duckdb", tmp_path / "local.duckdb"
    with running_server(served_db) as url:
        assert main(["ingest", "--db", str(local_db), "--server", url, path]) == 0
        out = capsys.readouterr()
        assert f"ingested 1 trace(s) into {url}," in out.out
        assert f"posting to {url} (--server), the server of {served_db}" in out.err
        assert served(url) == ["a"] and not local_db.exists()


def test_a_locked_database_is_reached_through_the_address_its_server_records(tmp_path, env_db, capsys):
    path = write(tmp_path / "a.json", make_trace("a"))
    with running_server(env_db) as url:
        assert address_file(env_db).read_text() == url + "\n"
        assert main(["ingest", path]) == 0
        out = capsys.readouterr()
        assert f"{env_db} is held by a running server; posting to {url}" in out.err
        assert f"ingested 1 trace(s) into {url}," in out.out
        assert served(url) == ["a"]
    assert not address_file(env_db).exists()  # removed when the server stops
    assert stored(env_db) == ["a"]


def test_a_locked_database_without_a_live_server_says_what_to_do(tmp_path, env_db, capsys):
    path = write(tmp_path / "a.json", make_trace("a"))
    record = address_file(env_db)
    with held(env_db):
        assert main(["ingest", path]) == 2
        err = capsys.readouterr().err
        assert f"{env_db} is held by another process, and no server recorded its address beside it ({record})" in err
        assert "pass --server URL" in err
        record.write_text("http://127.0.0.1:9\n")  # a server killed before it could remove its record
        assert main(["ingest", path]) == 2
        err = capsys.readouterr().err
        assert f"{record} names http://127.0.0.1:9, but no server answers there" in err
        assert "a stale record, not trusted" in err
        with running_server(tmp_path / "other.duckdb") as url:  # an answer, but for another file
            record.write_text(url + "\n")
            assert main(["ingest", path]) == 2
            assert f"but the server there holds {tmp_path / 'other.duckdb'}" in capsys.readouterr().err
    assert main(["ingest", path, "--server", "http://127.0.0.1:9"]) == 2
    assert "no Orchestrace server answers at http://127.0.0.1:9" in capsys.readouterr().err
    db = Database(env_db)
    assert db.fetchall("SELECT table_name FROM information_schema.tables") == [{"table_name": "held"}]  # untouched
    db.close()


def test_serve_records_the_url_it_listens_at(tmp_path, monkeypatch):
    """Port 0 lets the system pick: the record holds the port really bound, on loopback for a wildcard host."""
    db = tmp_path / "s.duckdb"
    seen = []

    async def stop_at_once(self):
        seen.append(address_file(db).read_text())
        self.should_exit = True

    monkeypatch.setattr(RecordingServer, "main_loop", stop_at_once)
    monkeypatch.setattr(sys, "stdin", io.StringIO("a long password\n"))
    assert main(["users", "add", "ada", "--role", "admin", "--password-stdin", "--db", str(db)]) == 0  # not loopback
    assert main(["serve", "--db", str(db), "--host", "0.0.0.0", "--port", "0"]) == 0
    assert seen[0].startswith("http://127.0.0.1:") and not seen[0].endswith(":0\n")
    assert not address_file(db).exists()


def test_generate_is_deterministic_and_ingestable(tmp_path, env_db, capsys):
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert main(["generate", "--agents", "20", "--events", "300", "--seed", "3", "-o", str(one)]) == 0
    assert main(["generate", "--agents", "20", "--events", "300", "--seed", "3", "-o", str(two)]) == 0
    assert one.read_bytes() == two.read_bytes()
    assert len(json.loads(one.read_text())["events"]) == 300
    assert main(["validate", str(one)]) == 0
    assert main(["ingest", str(one)]) == 0


def test_migrate_applies_once(env_db, capsys):
    assert main(["migrate"]) == 0
    assert "0001_initial.sql" in capsys.readouterr().out
    assert main(["migrate", "--db", str(env_db)]) == 0
    assert "applied 0 migration(s)" in capsys.readouterr().out


def test_missing_path_is_a_clear_error(env_db):
    with pytest.raises(SystemExit, match="no such file or folder"):
        main(["ingest", "/nonexistent/trace.json"])


def test_demo_loads_samples_once_then_serves(env_db, monkeypatch, capsys):
    served = []

    def run(self):
        served.append((self.config.host, self.config.port))
        self.started = True

    monkeypatch.setattr(RecordingServer, "run", run)
    port = free_port()  # a port in use is refused before serving
    assert main(["demo", "--port", str(port)]) == 0
    first = capsys.readouterr().out
    assert main(["demo", "--port", str(port)]) == 0
    second = capsys.readouterr().out
    assert f"sample traces in {env_db}: 6 loaded, 0 already there" in first and "0 loaded, 6 already there" in second
    assert served == [("127.0.0.1", port)] * 2
    assert len(stored(env_db)) == 6


def test_papers_import_reports_rows_and_refusals(tmp_path, env_db, capsys):
    from test_papers import EXCLUDED_CSV, POOL_CSV

    (tmp_path / "pool.csv").write_bytes(POOL_CSV)
    (tmp_path / "excluded.csv").write_bytes(EXCLUDED_CSV)
    (tmp_path / "bad.csv").write_bytes(POOL_CSV.replace(b"shared", b"sharde"))
    assert main(["papers", "import", str(tmp_path / "pool.csv"), str(tmp_path / "excluded.csv")]) == 0
    out = capsys.readouterr().out
    assert f"imported 4 papers row(s) into {env_db}" in out and "imported 2 excluded row(s)" in out
    assert main(["papers", "import", str(tmp_path / "bad.csv")]) == 1
    out = capsys.readouterr().out
    assert f"refused, nothing imported into {env_db}" in out and "line 2, reward_type: 'sharde' is not one of" in out


def test_papers_import_and_audit_go_through_the_server_holding_the_database(tmp_path, env_db, capsys):
    from test_papers import EXCLUDED_CSV, POOL_CSV

    (tmp_path / "pool.csv").write_bytes(POOL_CSV)
    (tmp_path / "excluded.csv").write_bytes(EXCLUDED_CSV)
    (tmp_path / "bad.csv").write_bytes(POOL_CSV.replace(b"shared", b"sharde"))
    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    assert main(["ingest", write(tmp_path / "a.json", [make_trace("clean"), late])]) == 0
    capsys.readouterr()
    assert main(["audit", "--all", "--format", "json"]) == 0
    local = capsys.readouterr().out
    with running_server(env_db) as url:
        assert main(["papers", "import", str(tmp_path / "pool.csv"), str(tmp_path / "excluded.csv")]) == 0
        out = capsys.readouterr()
        assert f"{env_db} is held by a running server; posting to {url}" in out.err
        assert f"imported 4 papers row(s) into {url}" in out.out and f"imported 2 excluded row(s) into {url}" in out.out
        assert main(["papers", "import", "--server", url, str(tmp_path / "bad.csv")]) == 1
        out = capsys.readouterr().out
        assert f"refused, nothing imported into {url}" in out and "line 2, reward_type: 'sharde' is not one of" in out
        assert main(["audit", "--all", "--format", "json"]) == 0
        out = capsys.readouterr()
        assert f"{env_db} is held by a running server; asking {url} for the findings" in out.err
        assert out.out == local
        assert main(["audit", "late", "nope", "--server", url, "--fail-on", "error"]) == 2
        out = capsys.readouterr()
        assert "time_order" in out.out and f"error: no trace with id 'nope' in {url}" in out.err
    db = Database(env_db)
    assert db.scalar("SELECT count(*) FROM papers") == 4
    db.close()


def test_the_empty_papers_page_advises_commands_that_reach_this_server(client):
    page = client.get("/papers").text
    assert "orchestrace papers import --server http://127.0.0.1 papers.csv" in page
    assert "http://127.0.0.1/api/papers/import" in page and ":8000" not in page


def claude_session(folder: Path) -> Path:
    """The parallel fixture session with one sub-agent moved where workflow agents live."""
    shutil.copy(FIXTURES / "claude_code" / "parallel.jsonl", folder / "parallel.jsonl")
    shutil.copytree(FIXTURES / "claude_code" / "parallel", folder / "parallel")
    workflow = folder / "parallel" / "subagents" / "workflows" / "wf_1"
    workflow.mkdir(parents=True)
    for name in ("agent-bbb2222.jsonl", "agent-bbb2222.meta.json"):
        (folder / "parallel" / "subagents" / name).rename(workflow / name)
    return folder / "parallel.jsonl"


def test_import_reads_a_claude_code_session_with_workflow_agents_as_the_importer_does(tmp_path, env_db, capsys):
    session = claude_session(tmp_path)
    expected = json.loads(json.dumps(import_session(*load_session_dir(session)).traces[0]))
    assert any(e.get("line", "").startswith("workflows/wf_1/agent-bbb2222.jsonl:") for e in expected["events"])
    assert main(["import", str(tmp_path)]) == 0  # the folder: the session and, with it, every sub-agent file
    assert "ingested 1 trace(s)" in capsys.readouterr().out
    assert main(["import", "--replace", str(session)]) == 0  # the session file brings its folder
    assert "ingested 1 trace(s)" in capsys.readouterr().out
    db = Database(env_db)
    try:
        assert trace_store.read_trace(db, expected["trace_id"]) == expected
    finally:
        db.close()


def test_audit_formats_and_exit_codes(tmp_path, env_db, capsys):
    clean = make_trace("clean")
    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})  # back in time: an error
    assert main(["ingest", write(tmp_path / "a.json", [clean, late])]) == 0
    capsys.readouterr()
    assert main(["audit", "clean", "--fail-on", "error"]) == 0
    assert main(["audit", "--all", "--fail-on", "error"]) == 1
    table = capsys.readouterr().out
    assert "time_order" in table and "late" in table
    assert main(["audit", "late", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert any(f["rule"] == "time_order" and f["severity"] == "error" for f in report["traces"][0]["findings"])
    assert main(["audit", "late", "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("trace_id,finding_id,rule,severity,agent,message,events,mark,note")
    assert main(["audit", "nope"]) == 2
    clean_warning = make_trace("warned")
    assert main(["ingest", write(tmp_path / "b.json", clean_warning)]) == 0
    assert main(["audit", "warned", "--fail-on", "warning"]) == 1  # e5 and e6 are cut off: disconnected


@pytest.mark.parametrize("flags, server_policy, kept", [([], None, True), (["--content", "hash"], None, False),
                                                        ([], "hash", False)])
def test_import_keeps_what_events_said_unless_hashes_are_asked_or_the_policy(tmp_path, monkeypatch, capsys, flags,
                                                                             server_policy, kept):
    fixture = Path(__file__).parent / "fixtures" / "otlp" / "pydantic_ai_delegation.json"
    db_path = tmp_path / "content.duckdb"
    if server_policy:
        monkeypatch.setenv("ORCHESTRACE_CONTENT", server_policy)
    assert main(["import", "--db", str(db_path), *flags, str(fixture)]) == 0
    db = Database(db_path)
    try:
        (trace_id,) = trace_store.trace_ids(db)
        events = trace_store.read_events(db, trace_id)
    finally:
        db.close()
    assert any("content" in event for event in events) is kept
    assert all("content_ref" in event for event in events if event["type"] == "tool_call")


@pytest.mark.parametrize("folder, traces, agents", [
    ("codex/0.171.0/multi_agent_v1", 1, 3), ("codex/0.171.0/multi_agent_v2", 1, 3),
    ("atif/team_v1_8", 1, 3), ("kimi/1.52.0/session", 1, 4)])  # Kimi: the harness prompts sub-agents as `system`
def test_import_reads_a_codex_session_tree_or_an_atif_trajectory_with_its_sub_agent_files(tmp_path, capsys, folder,
                                                                                          traces, agents):
    db_path, session = tmp_path / "import.duckdb", tmp_path / "session"
    shutil.copytree(Path(__file__).parent / "fixtures" / folder, session,
                    ignore=shutil.ignore_patterns("expected.json"))  # the recording's notes, not a trace
    assert main(["import", "--db", str(db_path), str(session)]) == 0
    db = Database(db_path)
    try:
        ids = trace_store.trace_ids(db)
        assert len(ids) == traces, capsys.readouterr().out
        assert trace_store.read_trace_summary(db, ids[0])["agents"] == agents
    finally:
        db.close()


def test_validate_reads_every_format_the_registry_knows(capsys):
    fixture = Path(__file__).parent / "fixtures" / "otlp" / "pydantic_ai_delegation.json"
    assert main(["validate", str(fixture)]) == 0  # an OTLP file is imported, then checked, not read as ours
    assert "1 valid trace(s)" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_a_taken_port_is_one_line_naming_it_and_how_to_pick_another(tmp_path, capsys, command):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert main([command, "--db", str(tmp_path / "x.duckdb"), "--port", str(port)]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert f"port {port} on 127.0.0.1 is already in use" in line
    assert f"make demo PORT={port + 100}" in line and "ORCHESTRACE_PORT=" in line and "--port" in line
    assert not (tmp_path / "x.duckdb").exists()  # refused before anything was set up


def test_make_demo_installs_only_what_serving_needs_and_takes_the_port_asked():
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    root = Path(__file__).resolve().parent.parent

    clean = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}  # under make test

    def dry(*args, env=None) -> str:
        return subprocess.run([make, "-n", "-B", "--no-print-directory", *args], cwd=root, capture_output=True,
                              text=True, check=True, env=env or clean).stdout

    plan = dry("demo")
    assert "pip install" in plan and "[test]" not in plan and "harbor" not in plan
    assert plan.strip().splitlines()[-1].endswith("--port 8000")
    assert dry("demo", "PORT=8100").strip().splitlines()[-1].endswith("--port 8100")
    assert dry("demo", env=clean | {"ORCHESTRACE_PORT": "8123"}).strip().splitlines()[-1].endswith("--port 8123")
    assert "[test]" in dry("install")


def test_audit_fail_on_ignores_findings_a_reviewer_dismissed(tmp_path, env_db, capsys):
    from app.services.cache import TraceCache
    from app.services.triage import mark_findings, trace_findings

    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})  # back in time: an error
    assert main(["ingest", write(tmp_path / "a.json", [late])]) == 0
    assert main(["audit", "late", "--fail-on", "error"]) == 1
    db = Database(env_db)
    try:
        errors = [f["id"] for f in trace_findings(db, TraceCache(), "late") if f["severity"] == "error"]
        mark_findings(db, TraceCache(), "late", errors, "reviewed", "seen, still wrong", "ada")
    finally:
        db.close()
    assert main(["audit", "late", "--fail-on", "error"]) == 1  # reviewed is not dismissed
    db = Database(env_db)
    try:
        mark_findings(db, TraceCache(), "late", errors, "accepted_risk", "clock skew of the exporter", "ada")
    finally:
        db.close()
    capsys.readouterr()
    assert main(["audit", "late", "--fail-on", "error"]) == 0
    assert "dismissed" in capsys.readouterr().out
    assert main(["audit", "late", "--format", "json"]) == 0
    [found] = [f for f in json.loads(capsys.readouterr().out)["traces"][0]["findings"] if f["id"] == errors[0]]
    assert found["mark"]["mark"] == "accepted_risk" and found["mark"]["note"] == "clock skew of the exporter"


@pytest.mark.parametrize("replace", [False, True])
def test_ingest_of_many_files_stores_them_together_and_a_repeated_trace_id_as_if_one_file_at_a_time(
        tmp_path, env_db, monkeypatch, capsys, replace):
    """A folder of rollout files goes into the store in a few writes, not one a file; a refused file is refused
    alone; a trace id given again by a later file is skipped, or replaces the first with --replace, as storing one
    file after the other did."""
    monkeypatch.setattr(cli, "STORED_TOGETHER", (3, 200_000))  # writes of at most 3 traces
    folder = tmp_path / "rollouts"
    folder.mkdir()
    for i in range(7):
        write(folder / f"r{i}.json", make_trace(f"r{i}"))
    write(folder / "r1b.json", make_trace("r1", task_id="again"))  # r1 again, next after it
    bad = make_trace("bad")
    bad["edges"][0]["dst"] = "e99"
    write(folder / "r3a.json", bad)
    assert main(["ingest", str(folder), *(["--replace"] if replace else [])]) == 1
    out = capsys.readouterr().out
    assert f"ingested {8 if replace else 7} trace(s) into {env_db}, skipped {0 if replace else 1} already stored, " \
           "refused 1 file(s)" in out
    db = Database(env_db)
    assert stored(env_db) == [f"r{i}" for i in range(7)]
    assert db.scalar("SELECT task_id FROM traces WHERE trace_id = 'r1'") == ("again" if replace else "task-1")
    receipts = log_store.list_ingest_log(db, limit=100)[0]
    # newest first: r4 r5 r6; the bad file, refused while r1 again, r2 and r3 waited; r0 r1 (stored when r1 came again)
    assert [(r["outcome"], r["used"]) for r in receipts] == [
        ("ok", 3), ("ok" if replace else "partial", 3 if replace else 2), ("refused", 0), ("ok", 2)]
    db.close()


def test_ingest_into_a_store_keeps_the_lanes_of_a_large_trace_as_an_upload_does(tmp_path, env_db):
    """A trace of more than LOD_ABOVE events is drawn from lanes kept per event; the server keeps them once an upload
    has answered, and so does the command, so that the trace's first view does not wait for them."""
    from app.domain.generate import generate_swarm
    from app.services import graph
    from app.store import lod as lod_store

    large = generate_swarm(50, graph.LOD_ABOVE + 1, seed=2)
    write(tmp_path / "large.json", large)
    write(tmp_path / "small.json", make_trace("small"))
    assert main(["ingest", str(tmp_path / "large.json"), str(tmp_path / "small.json")]) == 0
    db = Database(env_db)
    assert lod_store.lod_ready(db, large["trace_id"])
    assert db.scalar("SELECT count(*) FROM lod_events WHERE trace_id = ?", [large["trace_id"]]) == graph.LOD_ABOVE + 1
    assert not lod_store.lod_ready(db, "small")  # a small trace is drawn whole: nothing to keep
    db.close()


def test_audit_through_a_server_asks_for_many_traces_findings_a_page_at_a_time(tmp_path, env_db, monkeypatch, capsys):
    """Through a server, `audit` asks GET /api/findings for a page of traces a call (it asked for each trace's
    findings in a call of its own: 100,000 calls for a training run's rollouts); the answer is the one the command
    gives reading the file itself, whatever the page, and named traces come in calls under a bounded length."""
    traces = [make_trace(f"t{i}") for i in range(7)]
    for trace in traces[::2]:
        trace["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    assert main(["ingest", write(tmp_path / "a.json", traces)]) == 0
    named = ["t5", "nope", "t0", "t3", "t6", "t1"]
    capsys.readouterr()
    local = []
    for args in (["--all"], named):
        assert main(["audit", *args, "--format", "json"]) == (0 if args == ["--all"] else 2)
        local.append(capsys.readouterr())
    monkeypatch.setattr(cli, "AUDIT_CHUNK", 3)
    monkeypatch.setattr(cli, "FINDINGS_QUERY_CHARS", 30)  # two ids a call
    asked = []
    call = cli._call
    monkeypatch.setattr(cli, "_call", lambda args, server, path, *rest: asked.append(path) or call(args, server,
                                                                                                   path, *rest))
    with running_server(env_db):
        for args, before in zip((["--all"], named), local):
            assert main(["audit", *args, "--format", "json"]) == (0 if args == ["--all"] else 2)
            out = capsys.readouterr()
            assert out.out == before.out
            assert out.err.count("error: no trace with id") == before.err.count("error: no trace with id 'nope'") \
                == (0 if args == ["--all"] else 1)
    assert [path for path in asked if path.startswith("/api/findings")] == [
        "/api/findings?limit=3&offset=0", "/api/findings?limit=3&offset=3", "/api/findings?limit=3&offset=6",
        "/api/findings?trace_id=t5&trace_id=nope", "/api/findings?trace_id=t0&trace_id=t3",
        "/api/findings?trace_id=t6&trace_id=t1"]


@pytest.mark.parametrize("replace", [False, True])
def test_ingest_through_a_server_posts_many_files_a_request_with_what_posting_each_alone_gives(
        tmp_path, monkeypatch, capsys, replace):
    """Files plainly in our own format go to a server many in one request (100,000 rollout files were 100,000
    requests); the server stores a request all or none, so the command answers a refused or partly stored group as
    posting each file alone did: a file whose trace id is stored already skipped, an invalid one refused alone, a
    trace id given again by a later file skipped or replacing the first, another format's file posted alone."""
    folder = tmp_path / "rollouts"
    folder.mkdir()
    for i in range(7):
        write(folder / f"r{i}.json", make_trace(f"r{i}"))
    write(folder / "r1b.json", make_trace("r1", task_id="again"))
    write(folder / "r2b.json", [make_trace("pre"), make_trace("r7")])  # "pre" is stored before the ingest
    bad = make_trace("bad")
    bad["edges"][0]["dst"] = "e99"
    write(folder / "r3a.json", bad)
    shutil.copy(FIXTURES / "claude_code" / "parallel.jsonl", folder / "r4a.jsonl")  # Claude Code: alone
    (folder / "r5a.json.gz").write_bytes(gzip.compress(json.dumps(make_trace("r8")).encode()))  # compressed: alone
    runs, asked, call = [], [], cli._call
    monkeypatch.setattr(cli, "_call", lambda *a, **k: asked.append(a[2]) or call(*a, **k))
    monkeypatch.setattr(cli, "STORED_TOGETHER", (5, 200_000))
    for grouped in (False, True):  # each file alone, as before; then many a request
        monkeypatch.setattr(cli, "POSTED_TOGETHER_BYTES", 16 * 1024**2 if grouped else 0)
        db_path = tmp_path / f"{grouped}.duckdb"
        with running_server(db_path) as url:
            assert main(["ingest", "--server", url, write(tmp_path / "pre.json", make_trace("pre"))]) == 0
            capsys.readouterr()
            asked.clear()
            code = main(["ingest", "--server", url, str(folder), *(["--replace"] if replace else [])])
            runs.append((code, capsys.readouterr().out.replace(url, "URL"), len(asked)))
        db = Database(db_path)
        runs[-1] += ([trace_store.read_trace(db, trace_id) for trace_id in trace_store.trace_ids(db)],)
        db.close()
    (alone_code, alone_out, alone_calls, alone_traces), (code, out, calls, traces) = runs
    assert (code, out, traces) == (alone_code, alone_out, alone_traces)
    assert code == 1 and "refused 1 file(s)" in out and ("r3a.json" in out)
    assert calls < alone_calls == 12  # the 12 documents one by one
    assert {t["trace_id"] for t in traces} >= {f"r{i}" for i in (0, 1, 2, 3, 4, 5, 6, 8)} | {"pre"}
    assert ("r7" in {t["trace_id"] for t in traces}) == replace  # its file holds "pre": skipped whole without replace
