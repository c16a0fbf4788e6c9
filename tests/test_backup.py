"""`orchestrace backup` and `restore`: a backup taken through the server holding the database, restored into
a fresh file, serves the same traces, label history and papers at the same migration level; refusals name
the files."""

import json
import os
import stat
import threading
import urllib.error
import urllib.request

import duckdb
import pytest
from conftest import make_trace, post_json, running_server
from fastapi.testclient import TestClient
from test_papers import POOL_CSV

import app.store.backup
from app.cli import main
from app.main import create_app
from app.settings import Settings
from app.store.backup import BackupError, backup
from app.store.db import Database

BASE_URL = "http://127.0.0.1"  # a Host the server answers to
LABEL = {"trace_id": "a", "event_id": "e2", "reviewer": "ada"}
READS = ("/api/traces/a", "/api/traces/b", "/api/annotations?history=true", "/api/papers/export",
         "/api/papers/export?kind=tags")


def populate(db_path) -> None:
    """Two traces, a label in two versions and a paper pool with a reviewer's tag."""
    with TestClient(create_app(Settings(db=db_path)), base_url=BASE_URL) as client:
        for trace_id in ("a", "b"):
            assert post_json(client, make_trace(trace_id)).status_code == 201
        for credit in (0.5, -0.25):
            assert client.post("/api/annotations", json=LABEL | {"credit": credit}).status_code == 201
        assert client.post("/api/papers/import", content=POOL_CSV,
                           headers={"Content-Type": "text/csv"}).status_code == 200
        tagged = client.post("/api/papers/magrpo/tags", json={"reviewer": "ada", "reward_type": "hybrid"})
        assert tagged.status_code == 201


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def migrations(db_path) -> list[tuple]:
    conn = duckdb.connect(str(db_path), read_only=True)
    try:
        return conn.execute("SELECT * FROM schema_migrations ORDER BY version").fetchall()
    finally:
        conn.close()


def trace_ids(db_path) -> list[str]:
    conn = duckdb.connect(str(db_path), read_only=True)
    try:
        return [row[0] for row in conn.execute("SELECT trace_id FROM traces ORDER BY trace_id").fetchall()]
    finally:
        conn.close()


def test_backup_through_the_running_server_restores_every_trace_label_and_paper(tmp_path, capsys):
    db, copy, restored = tmp_path / "live.duckdb", tmp_path / "backups" / "copy.duckdb", tmp_path / "new.duckdb"
    copy.parent.mkdir()
    populate(db)
    with running_server(db) as url:
        assert post(f"{url}/api/annotations", LABEL | {"credit": 1})[0] == 201  # a third version, by the server
        served = {path: urllib.request.urlopen(url + path).read() for path in READS}
        assert main(["backup", str(copy), "--db", str(db), "--server", url]) == 0
        out = capsys.readouterr()
        assert f"{db} is held by a running server; asking {url} to write the backup" in out.err
        assert f"wrote backup {copy} of {db} (by the server at {url})" in out.out
        assert "2 traces, 3 annotations, 4 papers" in out.out

        assert main(["backup", str(copy), "--db", str(db), "--server", url]) == 1
        assert f"error: {copy} already exists; pass --force to replace it" in capsys.readouterr().err
        assert main(["backup", str(copy), "--db", str(db), "--server", url, "--force"]) == 0
        assert "(by the server at" in capsys.readouterr().out  # the server still holds the file after a backup
        assert post(f"{url}/api/backup", {"path": "copy.duckdb"}) == (  # a bare name: in the backup folder
            409, {"error": f"{copy} already exists; pass --force to replace it"})
        assert main(["restore", str(copy), "--db", str(db), "--force"]) == 1
        assert f"error: {db} is held by a running process (is `orchestrace serve` running?)" in capsys.readouterr().err
    assert migrations(copy) == migrations(db)

    assert main(["restore", str(copy), "--db", str(restored)]) == 0
    out = capsys.readouterr().out
    assert f"restored {restored} from {copy}" in out and "before-restore" not in out
    with TestClient(create_app(Settings(db=restored)), base_url=BASE_URL) as client:
        assert {path: client.get(path).content for path in READS} == served
        versions = [(v["version"], v["credit"]) for v in client.get("/api/annotations?history=true").json()["items"]]
        assert versions == [(1, 0.5), (2, -0.25), (3, 1)]
    assert migrations(restored) == migrations(db)  # the app found nothing to migrate


def test_backup_without_a_server_then_restore_over_the_database_keeps_the_one_replaced(tmp_path, capsys):
    db, copy = tmp_path / "db.duckdb", tmp_path / "copy.duckdb"
    kept = tmp_path / "db.duckdb.before-restore"
    populate(db)
    assert main(["backup", str(copy), "--db", str(db)]) == 0
    assert f"wrote backup {copy} of {db}: " in capsys.readouterr().out
    with TestClient(create_app(Settings(db=db)), base_url=BASE_URL) as client:
        assert post_json(client, make_trace("c")).status_code == 201  # the database moves on

    assert main(["restore", str(copy), "--db", str(db)]) == 1
    assert f"error: {db} already exists; pass --force to replace it (it is kept as {kept})" in capsys.readouterr().err
    assert main(["restore", str(copy), "--db", str(db), "--force"]) == 0
    assert f"the database it replaced is kept as {kept}" in capsys.readouterr().out
    assert (trace_ids(db), trace_ids(kept)) == (["a", "b"], ["a", "b", "c"])
    assert main(["restore", str(copy), "--db", str(db), "--force"]) == 1
    assert f"error: {kept} already exists (from an earlier restore); move it away first" in capsys.readouterr().err
    assert main(["backup", str(db), "--db", str(db), "--force"]) == 1
    assert f"error: {db} is the database itself" in capsys.readouterr().err


def test_restore_refuses_a_file_that_is_not_a_backup_and_leaves_nothing_behind(tmp_path, capsys):
    target = tmp_path / "db.duckdb"
    text, plain = tmp_path / "notes.txt", tmp_path / "plain.duckdb"
    text.write_text("not a database")
    duckdb.connect(str(plain)).execute("CREATE TABLE t (i INTEGER)").close()
    for source, reason in ((tmp_path / "missing.duckdb", "no such file"), (text, "is not a DuckDB database"),
                           (plain, "has no schema_migrations table")):
        assert main(["restore", str(source), "--db", str(target)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {source}") and reason in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "plain.duckdb"]


def test_backup_waits_out_a_transaction_that_blocks_the_checkpoint(tmp_path):
    """DuckDB refuses to CHECKPOINT while a transaction older than a committed catalog change runs."""
    db = Database(tmp_path / "db.duckdb")
    db.migrate(Settings().migrations_dir)
    reader = db.cursor()
    reader.execute("BEGIN TRANSACTION")
    reader.execute("SELECT count(*) FROM traces").fetchall()
    db.execute("CREATE TABLE scratch AS SELECT 1 AS i")
    written = threading.Event()
    threading.Timer(0.1, lambda: (db.execute("INSERT INTO scratch VALUES (2)"), written.set())).start()
    threading.Timer(0.3, reader.execute, ["COMMIT"]).start()
    try:
        result = backup(db, tmp_path / "copy.duckdb")
        wrote_during_the_wait = written.is_set()  # before the transaction ended, the backup could not be done
    finally:
        db.close()
    assert result["migration"] == migrations(tmp_path / "db.duckdb")[-1][1]
    assert wrote_during_the_wait  # it waited, letting writers go in between
    copy = duckdb.connect(str(tmp_path / "copy.duckdb"))
    assert copy.execute("SELECT count(*) FROM scratch").fetchone()[0] == 2  # the write is in the backup
    copy.close()


def test_backup_refuses_a_copy_that_a_writer_outside_the_lock_changed(tmp_path, monkeypatch):
    db = Database(tmp_path / "db.duckdb")
    db.migrate(Settings().migrations_dir)
    copy_in_child = app.store.backup._copy_in_child

    def copy_then_write(source, target):
        copy_in_child(source, target)
        db.cursor().execute("CREATE TABLE sneaked AS SELECT 1 AS i; CHECKPOINT")

    monkeypatch.setattr(app.store.backup, "_copy_in_child", copy_then_write)
    try:
        with pytest.raises(BackupError, match="changed during the copy") as refused:
            backup(db, tmp_path / "copy.duckdb")
    finally:
        db.close()
    assert refused.value.status == 503 and sorted(p.name for p in tmp_path.iterdir()) == ["db.duckdb"]


def test_the_server_writes_backups_in_its_folder_only_owner_readable_and_never_onto_the_database(tmp_path):
    db = tmp_path / "db.duckdb"
    folder, outside = tmp_path / "backups", tmp_path / "outside"
    outside.mkdir()
    populate(db)
    with TestClient(create_app(Settings(db=db)), base_url=BASE_URL) as client:
        old_umask = os.umask(0)  # a permissive umask: the backup is 0600 all the same
        try:
            made = client.post("/api/backup", json={"path": "nightly.duckdb"})
        finally:
            os.umask(old_umask)
        assert made.status_code == 201 and made.json()["path"] == str(folder / "nightly.duckdb")
        assert stat.S_IMODE((folder / "nightly.duckdb").stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # made for the first backup
        (folder / "link").symlink_to(outside)
        for path, words in ((str(outside / "x.duckdb"), "is outside the backup folder"),
                            ("../x.duckdb", "is outside the backup folder"),
                            ("link/x.duckdb", "is outside the backup folder"),
                            (str(db), "is outside the backup folder"),
                            ("x\x00.duckdb", "holds a NUL character"),
                            ("x\n.duckdb", "holds the control character U+000A"),
                            ("", "the path is empty"), ("sub/", "names a folder"),
                            ("missing/x.duckdb", f"{folder / 'missing'} is not a folder")):
            answer = client.post("/api/backup", json={"path": path, "force": True})
            assert answer.status_code == 422 and words in answer.json()["error"], (path, answer.json())
        surrogate = client.post("/api/backup", content=b'{"path": "x\\ud800.duckdb"}',
                                headers={"Content-Type": "application/json"})
        assert surrogate.status_code == 422 and "lone surrogate" in surrogate.json()["error"]
    assert sorted(p.name for p in folder.iterdir()) == ["link", "nightly.duckdb"] and not list(outside.iterdir())

    beside = create_app(Settings(db=db, backup_dir=tmp_path))  # a folder that holds the database too
    with TestClient(beside, base_url=BASE_URL) as client:
        for name, what in (("db.duckdb", "the database itself"), ("db.duckdb.wal", "the database's write-ahead log")):
            answer = client.post("/api/backup", json={"path": name, "force": True})
            assert answer.status_code == 422 and f"is {what}" in answer.json()["error"]
    assert trace_ids(db) == ["a", "b"]


def test_the_command_line_writes_a_bare_name_in_the_backup_folder(tmp_path, monkeypatch, capsys):
    db = tmp_path / "db.duckdb"
    populate(db)
    assert main(["backup", "copy.duckdb", "--db", str(db)]) == 0
    written = tmp_path / "backups" / "copy.duckdb"
    assert f"wrote backup {written} of {db}" in capsys.readouterr().out
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    monkeypatch.setenv("ORCHESTRACE_BACKUP_DIR", str(tmp_path / "elsewhere"))
    assert main(["backup", "copy.duckdb", "--db", str(db)]) == 0
    assert (tmp_path / "elsewhere" / "copy.duckdb").exists()
    assert main(["backup", f"{db}.wal", "--db", str(db), "--force"]) == 1
    assert "is the database's write-ahead log" in capsys.readouterr().err
