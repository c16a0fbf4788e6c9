"""`orchestrace migrate-store` (issue 16): a DuckDB file store, filled through the app's own paths, moved into a
DuckLake on a throwaway PostgreSQL with every row and id, served from there; and moved back. These run in the
plain `pytest` run (one PostgreSQL cluster for the session) and are skipped only when PostgreSQL is missing."""

import io
import json
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from conftest import BASE_URL, SERVER_START_TIMEOUT_S, free_port, make_trace, wait_until_up
from fastapi.testclient import TestClient
from test_papers import EXCLUDED_CSV, POOL_CSV
from users_file import copy_with_users

from app.cli import main
from app.ingest.documents import Upload
from app.ingest.pipeline import ingest
from app.main import create_app
from app.services import accounts, labels, papers, queues
from app.settings import Settings
from app.store import writes
from app.store.db import Database
from app.store.writes import store_traces
from app.web.security import SESSION_COOKIE, session_cookie_value

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parent.parent
TRACE = "sample-centralized-001"
PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def source(tmp_path_factory, migrated_file) -> dict:
    """A file store with rows in most tables: traces with their analysis, labels with history, a review queue
    labelled and adjudicated, papers with tags, users with a token and a session, the signing key."""
    settings = Settings(db=copy_with_users(tmp_path_factory.mktemp("file") / "orchestrace.duckdb", migrated_file,
                                           tmp_path_factory.getbasetemp(), {"ada": "admin", "rita": "reviewer"},
                                           PASSWORD))
    db = Database(settings.db)
    db.migrate(settings.migrations_dir)
    ingest(db, [Upload(p.name, p.read_bytes()) for p in sorted(settings.sample_dir.glob("*.json"))])
    ada = accounts.User("ada", "admin")
    token = accounts.create_token(db, "ada", "exporter")
    session = accounts.start_session(db, ada)
    key = accounts.secret_key(db, None)
    for credit in (0.5, -0.25):
        labels.save_label(db, {"trace_id": TRACE, "event_id": "e001", "reviewer": "ada", "credit": credit})
    queue = queues.create_queue(db, {"name": "decisions", "filter": {"trace_ids": [TRACE],
                                     "event_types": ["orchestrator_decision"]}, "reviewers": ["rita"]}, "ada")
    item = queues.next_item(db, queue["id"], "rita")
    labels.save_label(db, {"trace_id": item["trace_id"], "event_id": item["event_id"], "reviewer": "rita",
                           "credit": 1.0, "queue_id": queue["id"]})
    queues.adjudicate(db, queue["id"], item["item_id"], "ada", {"credit": 0.75}, "settled")
    papers.import_csv(db, POOL_CSV)
    papers.import_csv(db, EXCLUDED_CSV)
    papers.save_tags(db, "magrpo", {"reviewer": "rita", "reward_type": "shared"})
    rows = table_rows(db)
    db.close()
    return {"path": settings.db, "token": token, "cookie": session_cookie_value(key, session), "rows": rows}


def table_rows(db: Database) -> dict[str, list[tuple]]:
    """Every row of every table but schema_migrations, in one order."""
    names = [row["table_name"] for row in db.fetchall(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() "
        "AND table_name <> 'schema_migrations' ORDER BY table_name")]
    return {name: db.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall() for name in names}


@pytest.fixture(scope="module")
def lake(postgres, tmp_path_factory) -> Settings:
    """A new, empty lake: its own catalog database and data folder."""
    return Settings(db=f"ducklake:postgres:{postgres.new_database()}",
                    lake_data=str(tmp_path_factory.mktemp("lake") / "data"), auth="required")


def run(*argv: str) -> tuple[int, str, str]:
    """Exit code, standard output and error of one `orchestrace` command, run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def moved(source, lake) -> tuple[int, str, str]:
    """The source moved into the lake by the command, once for the module: what it answered."""
    return run("migrate-store", "--from", str(source["path"]), "--to", str(lake.db), "--lake-data", lake.lake_data)


def open_lake(lake: Settings) -> Database:
    return Database(lake.db, lake.lake_data)


@pytest.fixture(scope="module")
def lake_db(lake, moved):
    """One connection to the moved lake for the module's reads: a connection's first read of every table asks the
    catalog for each table's files (seconds on a lake; a second read a tenth of that), and each transaction reads
    the lake's latest snapshot, so writes by other connections and processes are seen."""
    db = open_lake(lake)
    yield db
    db.close()


def test_every_table_arrives_in_the_lake_with_its_rows_and_ids(source, lake, moved, lake_db):
    code, out, err = moved
    assert code == 0, err
    assert sum(bool(rows) for rows in source["rows"].values()) >= 18  # the source is not mostly empty
    for table, rows in source["rows"].items():
        assert f"  {table} " in out and f" {len(rows)}\n" in out.split(f"  {table} ", 1)[1][:40]
    assert table_rows(lake_db) == source["rows"]
    assert lake_db.scalar("SELECT max(name) FROM schema_migrations") == max(
        p.name for p in lake.migrations_dir.glob("0*.sql"))


def test_the_app_over_the_lake_serves_the_moved_traces_labels_token_and_session(source, lake, moved):
    assert moved[0] == 0, moved[2]
    bearer = {"Authorization": f"Bearer {source['token']}"}
    with TestClient(create_app(lake), base_url=BASE_URL) as client:  # no configured key: the moved one signs
        assert client.get(f"/api/traces/{TRACE}", headers=bearer).json()["trace_id"] == TRACE
        assert client.get("/api/traces", headers=bearer).json()["total"] == 6
        history = client.get("/api/annotations", params={"trace_id": TRACE, "history": "true"},
                             headers=bearer).json()["items"]
        ids = {row[0] for row in source["rows"]["annotations"] if row[1] == TRACE}
        assert {label["annotation_id"] for label in history} == ids and len(ids) == 3
        assert client.get(f"/traces/{TRACE}", headers=bearer).status_code == 200
        assert client.get("/api/traces").status_code == 401
        client.cookies.set(SESSION_COOKIE, source["cookie"])
        assert client.get("/api/traces").status_code == 200  # signed in before the move, still signed in


@contextmanager
def instances(lake: Settings, folder, count: int):
    """`count` real `orchestrace serve` processes over the lake, on free ports, run in `folder`; their URLs."""
    env = os.environ | {"ORCHESTRACE_DB": str(lake.db), "ORCHESTRACE_LAKE_DATA": lake.lake_data,
                        "ORCHESTRACE_AUTH": lake.auth}
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(count)]
    procs = [subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--port", url.rpartition(":")[2]], cwd=folder,
                              env=env | {"PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for url in urls]
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        for proc, url in zip(procs, urls):
            wait_until_up(proc, url, deadline)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


def call(url: str, headers: dict, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers | {"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def test_two_instances_serve_the_moved_lake_and_see_each_others_labels(source, lake, moved, lake_db, tmp_path):
    """What docs/scale-out.md promises: any instance answers any request, a session included (no sticky
    sessions), and a label saved through one is read through the other at once."""
    assert moved[0] == 0, moved[2]
    bearer = {"Authorization": f"Bearer {source['token']}"}
    session = {"Cookie": f"{SESSION_COOKIE}={source['cookie']}"}
    with instances(lake, tmp_path, 2) as (first, second):
        saved = call(f"{first}/api/annotations", bearer,
                     {"trace_id": TRACE, "event_id": "e002", "reviewer": "ada", "credit": 0.25})
        labels_seen = call(f"{second}/api/annotations?trace_id={TRACE}&event_id=e002", session)["items"]
        assert [label["annotation_id"] for label in labels_seen] == [saved["annotation_id"]]
        # the module's connection, opened before, sees it too: the tests reading through it read the lake as it is
        assert lake_db.scalar("SELECT count(*) FROM annotations WHERE annotation_id = ?", [saved["annotation_id"]]) == 1
        assert call(f"{first}/api/traces", session)["total"] == call(f"{second}/api/traces", bearer)["total"] == 6
        assert list(tmp_path.iterdir()) == []  # no `<db>.server` record: it would name the lake's libpq string


def test_a_lake_that_holds_rows_is_refused_and_left_as_it_was(source, lake, moved, lake_db):
    assert moved[0] == 0, moved[2]
    before = table_rows(lake_db)
    code, out, err = run("migrate-store", "--from", str(source["path"]), "--to", str(lake.db),
                         "--lake-data", lake.lake_data)
    assert code == 2 and "is not empty" in err and "nothing was copied" in err and out == ""
    assert table_rows(lake_db) == before


def test_a_lake_moves_back_into_a_new_file(lake, moved, lake_db, tmp_path):
    assert moved[0] == 0, moved[2]
    back = tmp_path / "back.duckdb"
    code, out, err = run("migrate-store", "--from", str(lake.db), "--to", str(back), "--lake-data", lake.lake_data)
    assert code == 0, err
    in_lake = table_rows(lake_db)
    db = Database(back)
    try:
        assert table_rows(db) == in_lake
    finally:
        db.close()


def test_an_older_file_is_brought_up_to_date_first_and_no_message_shows_the_password(postgres, tmp_path,
                                                                                       monkeypatch):
    """A file made before the last migration is migrated, then moved; the lake's password (the throwaway
    cluster trusts every local connection, so it takes any) is never printed, here or by the commands used
    on the lake afterwards; `migrate` makes the lake's signing key before any instance starts."""
    old = tmp_path / "old.duckdb"
    shipped = Settings().migrations_dir
    earlier = tmp_path / "migrations"
    earlier.mkdir()
    last = max(shipped.glob("0*.sql"))
    for path in shipped.glob("0*.sql"):
        if path != last:
            (earlier / path.name).write_text(path.read_text())
    db = Database(old)
    db.migrate(earlier)
    # the trace tables only (this app's ingest log may be newer), their events as the app wrote them then: with only
    # the columns the older file has (0028 added their token counts and exact numbers)
    had = {row["column_name"] for row in db.fetchall("SELECT column_name FROM duckdb_columns() "
                                                      "WHERE table_name = 'events'")}
    event_table = writes._event_table

    def as_then(traces):
        table = event_table(traces)
        return table.select([name for name in table.column_names if name in had])

    monkeypatch.setattr(writes, "_event_table", as_then)
    store_traces(db, [make_trace("t-old")])
    monkeypatch.undo()
    db.close()
    url = f"ducklake:postgres:{postgres.new_database()} password=s3cret"
    code, out, err = run("migrate-store", "--from", str(old), "--to", url, "--lake-data", str(tmp_path / "data"))
    assert code == 0, err
    assert f"brought {old} up to date first: {last.name}" in out and "password=***" in out
    (tmp_path / "new.json").write_text(json.dumps(make_trace("t-new")))
    monkeypatch.setenv("ORCHESTRACE_LAKE_DATA", str(tmp_path / "data"))
    ingested = run("ingest", "--db", url, str(tmp_path / "new.json"))
    assert ingested[0] == 0 and "ingested 1 trace(s) into ducklake:postgres:" in ingested[1]
    audited = run("audit", "--db", url, "--all", "--format", "json")
    assert [t["trace_id"] for t in json.loads(audited[1])["traces"]] == ["t-new", "t-old"]
    migrated = run("migrate", "--db", url)
    assert "s3cret" not in out + err + "".join(ingested[1:]) + audited[2] + "".join(migrated[1:])
    db = Database(url, str(tmp_path / "data"))
    try:  # the file never served, so had no signing key: `migrate` made the one every instance will read
        assert db.scalar("SELECT count(*) FROM app_secrets WHERE name = 'signing_key'") == 1
    finally:
        db.close()


def test_a_missing_source_is_refused_before_the_lake_is_opened(tmp_path):
    code, out, err = run("migrate-store", "--from", str(tmp_path / "nope.duckdb"),
                         "--to", "ducklake:postgres:dbname=unreachable host=256.0.0.1", "--lake-data", str(tmp_path))
    assert code == 2 and err == f"error: no database at {tmp_path / 'nope.duckdb'}\n"


def test_a_file_held_by_another_process_is_refused(source, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; held = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); sys.stdin.read()", str(source["path"])],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        code, out, err = run("migrate-store", "--from", str(source["path"]),
                             "--to", "ducklake:postgres:dbname=unused", "--lake-data", str(tmp_path))
    finally:
        holder.communicate("")
    assert code == 2 and "in use by another process" in err and "orchestrace serve" in err


def test_two_files_or_two_lakes_are_refused(tmp_path):
    code, _, err = run("migrate-store", "--from", str(tmp_path / "a.duckdb"), "--to", str(tmp_path / "b.duckdb"))
    assert code == 2 and "orchestrace backup" in err


def test_a_lake_without_its_data_folder_is_refused(monkeypatch, tmp_path):
    monkeypatch.delenv("ORCHESTRACE_LAKE_DATA", raising=False)
    code, _, err = run("migrate-store", "--from", str(tmp_path / "a.duckdb"), "--to", "ducklake:postgres:dbname=x")
    assert code == 2 and "--lake-data" in err


def test_the_readme_documents_the_command_and_links_the_scale_out_guide():
    readme = (ROOT / "README.md").read_text()
    assert "`orchestrace migrate-store --from FILE --to URL" in readme and "(docs/scale-out.md)" in readme
    assert "## Figures" in (ROOT / "docs" / "scale-out.md").read_text()
