"""The `orchestrace` CLI, run in-process against a real DuckDB file."""

import io
import json
import subprocess
import sys

import pytest
from conftest import make_trace

from app.cli import main
from app.store.db import Database


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
    assert "ingested 4 trace(s), skipped 0 already stored, refused 1 file(s)" in out
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
    db.close()


def test_ingest_says_when_a_server_holds_the_database(tmp_path, env_db, capsys):
    path = write(tmp_path / "a.json", make_trace("a"))
    holder_code = ("import duckdb, sys, time; con = duckdb.connect(sys.argv[1]); con.execute('CREATE TABLE held (x INT)'); "
                   "print('ok', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", holder_code, str(env_db)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ok"
        code = main(["ingest", path, "--server", "http://127.0.0.1:9"])
    finally:
        holder.kill()
        holder.wait()
    assert code == 2
    err = capsys.readouterr().err
    assert "held by a running server" in err and "no server answers at http://127.0.0.1:9" in err


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
    import uvicorn

    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, host, port: served.append((host, port)))
    assert main(["demo", "--port", "8123"]) == 0
    first = capsys.readouterr().out
    assert main(["demo", "--port", "8123"]) == 0
    second = capsys.readouterr().out
    assert "6 loaded, 0 already there" in first and "0 loaded, 6 already there" in second
    assert served == [("127.0.0.1", 8123)] * 2
    assert len(stored(env_db)) == 6


def test_papers_import_reports_rows_and_refusals(tmp_path, env_db, capsys):
    from test_papers import EXCLUDED_CSV, POOL_CSV

    (tmp_path / "pool.csv").write_bytes(POOL_CSV)
    (tmp_path / "excluded.csv").write_bytes(EXCLUDED_CSV)
    (tmp_path / "bad.csv").write_bytes(POOL_CSV.replace(b"shared", b"sharde"))
    assert main(["papers", "import", str(tmp_path / "pool.csv"), str(tmp_path / "excluded.csv")]) == 0
    out = capsys.readouterr().out
    assert "imported 4 papers row(s)" in out and "imported 2 excluded row(s)" in out
    assert main(["papers", "import", str(tmp_path / "bad.csv")]) == 1
    assert "line 2, reward_type: 'sharde' is not one of" in capsys.readouterr().out


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
    assert capsys.readouterr().out.startswith("trace_id,rule,severity,message,events")
    assert main(["audit", "nope"]) == 2
    clean_warning = make_trace("warned")
    assert main(["ingest", write(tmp_path / "b.json", clean_warning)]) == 0
    assert main(["audit", "warned", "--fail-on", "warning"]) == 1  # e5 and e6 are cut off: disconnected
