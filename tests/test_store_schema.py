"""One schema for both stores (issue 16): no primary keys, unique constraints, sequences or indexes, which a
DuckLake catalog refuses; ids made by the app; migration 0013 brings files made before to the same schema.
Migrations 0015, 0016 and 0017 keep the rows stored before them."""

import re
from pathlib import Path

import duckdb
import pytest
from conftest import make_trace, post_json

from app.settings import Settings
from app.store import ingest_log as log_store
from app.store import keys, writes
from app.store import live as live_store
from app.store.db import Database
from app.store.traces import read_trace

LEGACY_MIGRATIONS = Path(__file__).resolve().parent / "fixtures" / "legacy_migrations"
REPO = Path(__file__).resolve().parent.parent
# SQL a DuckLake catalog refuses (CHECK too), and the two ways of relying on a constraint at insert time.
LAKE_REFUSES = re.compile(r"PRIMARY KEY|UNIQUE|CHECK ?\(|CREATE SEQUENCE|nextval|CREATE (UNIQUE )?INDEX|"
                          r"INSERT OR|ON CONFLICT|RETURNING [a-z{]")


def schema(conn: duckdb.DuckDBPyConnection) -> dict:
    """Columns (with type, nullability, default, in order), constraints, sequences and indexes of a database."""
    return {
        "columns": conn.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = 'main' ORDER BY 1, 2").fetchall(),
        "constraints": conn.execute(
            "SELECT table_name, constraint_type FROM duckdb_constraints() "
            "WHERE constraint_type NOT IN ('NOT NULL') ORDER BY 1, 2").fetchall(),
        "sequences": conn.execute("SELECT sequence_name FROM duckdb_sequences()").fetchall(),
        "indexes": conn.execute("SELECT index_name FROM duckdb_indexes()").fetchall(),
    }


def legacy_migrations(folder: Path) -> Path:
    """The migrations as shipped before 0013: the fixture keeps only the files 0013's change edited, the rest
    are today's files up to 0012."""
    folder.mkdir()
    for shipped in sorted(Settings().migrations_dir.glob("00*.sql")):
        if shipped.name < "0013":
            old = LEGACY_MIGRATIONS / shipped.name
            (folder / shipped.name).write_text((old if old.exists() else shipped).read_text())
    return folder


def legacy_database(path: Path) -> Database:
    """A file as the app made it before 0013: its runner's table and migrations, with rows in every keyed table."""
    db = Database(path)
    db.execute("CREATE TABLE schema_migrations "
               "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)")
    db.migrate(legacy_migrations(path.parent / "legacy_migrations"))
    db.execute("INSERT INTO traces VALUES ('t1', 'task', NULL, NULL, '{}', '{}', NULL, 0, 0, 0, 0, 0, 0, now())")
    db.execute("INSERT INTO annotations (trace_id, event_id, reviewer, version, note, created_at) "
               "VALUES ('t1', 'e1', 'ada', 1, 'first', now()), ('t1', 'e1', 'ada', 2, 'second', now())")
    db.execute("INSERT INTO paper_tags (key, reviewer, version, created_at) VALUES ('p1', 'ada', 1, now())")
    db.execute("INSERT INTO reviewers VALUES ('ada', now())")
    return db


def test_a_file_made_before_0013_gets_the_schema_of_a_new_one_and_keeps_its_rows(tmp_path):
    old = legacy_database(tmp_path / "old.duckdb")
    assert schema(old._conn)["constraints"] and schema(old._conn)["sequences"]
    assert old.migrate(Settings().migrations_dir)[0] == "0013_no_constraints.sql"  # then any later ones
    new = Database(tmp_path / "new.duckdb")
    new.migrate(Settings().migrations_dir)
    assert schema(old._conn) == schema(new._conn)
    assert old.fetchall("SELECT annotation_id, version, note FROM annotations ORDER BY version") == [
        {"annotation_id": 1, "version": 1, "note": "first"}, {"annotation_id": 2, "version": 2, "note": "second"}]
    assert old.scalar("SELECT tag_id FROM paper_tags") == 1
    assert old.scalar("SELECT count(*) FROM traces") == old.scalar("SELECT count(*) FROM reviewers") == 1
    assert [row["version"] for row in old.fetchall("SELECT version FROM schema_migrations ORDER BY version")] == \
        [int(path.name[:4]) for path in sorted(Settings().migrations_dir.glob("00*.sql"))]


def migrated_before(path: Path, version: str) -> Database:
    """A database file made by the migrations before `version` (e.g. "0015")."""
    folder = path.parent / f"before_{version}"
    folder.mkdir()
    for shipped in sorted(Settings().migrations_dir.glob("00*.sql")):
        if shipped.name < version:
            (folder / shipped.name).write_text(shipped.read_text())
    db = Database(path)
    db.migrate(folder)
    return db


def unapplied(db: Database, version: str, table: str, columns: list[str]) -> list[str]:
    """The migrations a store applies once migration `version`, which added these columns to `table`, is undone (the
    columns dropped, the migration unrecorded), as an older version left the store."""
    db.execute(f"CREATE TABLE {table}_before AS SELECT * EXCLUDE ({', '.join(columns)}) FROM {table}")
    db.execute(f"DROP TABLE {table}")
    db.execute(f"ALTER TABLE {table}_before RENAME TO {table}")
    db.execute("DELETE FROM schema_migrations WHERE version = ?", [int(version)])
    return db.migrate(Settings().migrations_dir)


def written_before(tmp_path: Path, version: str, traces: list[dict], monkeypatch) -> tuple[Database, Database]:
    """The traces written by the app as it was before `version` (the events and edges with the columns a file made
    by the migrations before it has), that file then migrated; and the same traces written now into a new file."""
    old = migrated_before(tmp_path / "old.duckdb", version)
    kept = {table: [row["column_name"] for row in old.fetchall(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index", [table])]
        for table in ("events", "edges")}
    event_table, edge_table = writes._event_table, writes._edge_table
    monkeypatch.setattr(writes, "_event_table", lambda traces: event_table(traces).select(kept["events"]))
    monkeypatch.setattr(writes, "_edge_table", lambda traces, ids: edge_table(traces, ids).select(kept["edges"]))
    writes.store_traces(old, traces)
    monkeypatch.undo()
    assert old.migrate(Settings().migrations_dir)[0].startswith(version)  # and any after it
    new = Database(tmp_path / "new.duckdb")
    new.migrate(Settings().migrations_dir)
    writes.store_traces(new, traces)
    return old, new


def test_events_stored_before_0015_keep_their_key_order(tmp_path):
    """Before 0015 a key order was a VARCHAR[]; the migration rewrites it as the JSON text read now."""
    db = migrated_before(tmp_path / "old.duckdb", "0015")
    db.execute("INSERT INTO traces VALUES ('t1', 'task', NULL, NULL, '{}', '{\"tokens\": 0, \"wall_clock_s\": 0}', "
               "NULL, 2, 0, 1, 1, 0, 0, now())")
    db.execute("INSERT INTO events VALUES ('t1', 0, 'e1', 0, true, 'tool_call', 'a', NULL, NULL, NULL, 'grep', NULL, "
               "NULL, '{\"note\": \"x\"}', ['note', 't', 'tool', 'id', 'type', 'agent']), "
               "('t1', 1, 'e2', 1.5, false, 'stop', 'a', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    assert db.migrate(Settings().migrations_dir)[0] == "0015_key_order_as_text.sql"
    events = read_trace(db, "t1")["events"]
    assert [list(event.items()) for event in events] == [
        [("note", "x"), ("t", 0), ("tool", "grep"), ("id", "e1"), ("type", "tool_call"), ("agent", "a")],
        [("id", "e2"), ("t", 1.5), ("type", "stop"), ("agent", "a")]]


def test_receipts_logged_before_0016_are_kept_and_name_no_repeats(tmp_path):
    db = migrated_before(tmp_path / "old.duckdb", "0016")
    db.execute("INSERT INTO ingest_log VALUES ('r1', now(), 'POST /v1/traces', 'otlp/json', 'spans', 3, 2, 1, 0, "
               "'[]', '[\"otlp-1\"]', '[]', 200, NULL)")
    assert db.migrate(Settings().migrations_dir)[0] == "0016_ingest_log_repeats.sql"
    (receipt,), total = log_store.list_ingest_log(db, trace_id="otlp-1")
    assert total == 1 and receipt["id"] == "r1" and receipt["created"] == ["otlp-1"] and receipt["repeated"] == []
    assert (receipt["received"], receipt["used"], receipt["duplicates"]) == (3, 2, 1)


def test_live_traces_built_before_0017_keep_their_status_with_no_warnings(tmp_path):
    db = migrated_before(tmp_path / "old.duckdb", "0017")
    db.execute("INSERT INTO live_traces VALUES ('otlp', 'ab', 'otlp-ab', 7, true, '2026-11-01 10:00:00', "
               "'2026-11-01 10:00:05', '2026-11-01 10:00:06', 'no agent, model or tool activity')")
    assert db.migrate(Settings().migrations_dir)[0] == "0017_live_build_warnings.sql"
    status = live_store.live_status(db, "otlp-ab")
    assert (status["status"], status["received"], status["build_error"], status["build_warnings"]) == (
        "complete", 7, "no agent, model or tool activity", [])


def test_the_schema_has_nothing_a_lake_refuses(tmp_path):
    db = Database(tmp_path / "db.duckdb")
    db.migrate(Settings().migrations_dir)
    found = schema(db._conn)
    assert found["constraints"] == found["sequences"] == found["indexes"] == []
    not_null = {(row[0], row[2]) for row in found["columns"] if row[4] == "NO"}
    assert {("traces", "trace_id"), ("annotations", "annotation_id"), ("trace_metrics", "analysis_version"),
            ("schema_migrations", "version")} <= not_null


@pytest.mark.parametrize("path", [*sorted((REPO / "migrations").glob("*.sql")), *sorted((REPO / "app").rglob("*.py"))],
                         ids=lambda path: str(path.relative_to(REPO)))
def test_no_sql_a_lake_refuses(path):
    """Only 0013 names a sequence: it drops the ones files made before it have."""
    text = path.read_text()
    if path.name.startswith("0013_"):
        text = text.replace("DROP SEQUENCE IF EXISTS", "")
    assert not LAKE_REFUSES.findall(text)


def test_ids_are_hashes_of_natural_keys_below_2_to_the_53():
    one = keys.natural_id("t1", "e1", "ada", 1)
    assert one == keys.natural_id("t1", "e1", "ada", 1) != keys.natural_id("t1", "e1", "ada", 2)
    assert 0 <= one < 2**keys.ID_BITS
    assert keys.new_row_id(lambda _: False, "t1", "e1", "ada", 1) == one
    assert keys.new_row_id(lambda candidate: candidate == one, "t1", "e1", "ada", 1) == \
        keys.natural_id("t1", "e1", "ada", 1, 1)


def test_a_saved_label_and_a_tag_get_their_natural_ids_and_reviewers_stay_unique(client, db):
    assert post_json(client, make_trace("lab")).status_code == 201
    for note in ("a", "b"):
        saved = client.post("/api/annotations", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada",
                                                      "note": note})
        assert saved.status_code == 201
    assert saved.json()["annotation_id"] == keys.natural_id("lab", "e2", "ada", 2)
    assert db.fetchall("SELECT name FROM reviewers") == [{"name": "ada"}]


def test_a_file_from_a_newer_duckdb_is_refused_with_the_way_to_bring_it_over(tmp_path, monkeypatch, capsys):
    """Before the pin the app installed DuckDB 2.0, whose files 1.5.5 cannot read; EXPORT/IMPORT DATABASE can."""
    from app import cli
    from app.store import db as db_module

    attach = db_module.execute

    def newer(cur, sql, params=None):  # DuckDB's own error for such a file, raised as the store attaches it
        if sql.startswith("ATTACH"):
            raise duckdb.IOException("Trying to read a database file with version number 999, but we can only read "
                                     "versions between 64 and 68.\nThe database file was created with an newer "
                                     "version of DuckDB.")
        return attach(cur, sql, params)

    monkeypatch.setattr(db_module, "execute", newer)
    assert cli.main(["migrate", "--db", str(tmp_path / "new.duckdb")]) == 2
    message = capsys.readouterr().err
    assert "EXPORT DATABASE" in message and "IMPORT DATABASE" in message and duckdb.__version__ in message
