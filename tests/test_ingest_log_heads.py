"""Migration 0026 gives the receipts stored before it each list's count and first ids, which the ingest log's pages
read (app/store/ingest_log.py LISTED), so that they list what they listed before."""

from pathlib import Path

from app.ingest import log

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
HEADS = ", ".join(f"{name}_count, {name}_head" for name in ("created", "extended", "repeated"))


def test_the_migration_gives_stored_receipts_their_counts_and_first_ids(client, db):
    log.record(db, log.Receipt("POST /api/traces", "orchestrace", "traces", received=150, used=150,
                               created=[f"t{i:04d}" for i in range(150)], repeated=["old"]))
    log.record(db, log.Receipt("orchestrace ingest", "orchestrace", "traces").refused(422, "invalid"))
    listed = client.get("/api/ingest-log").json()
    db.execute(f"CREATE TABLE log_0025 AS SELECT * EXCLUDE ({HEADS}) FROM ingest_log")  # as 0016 made it
    db.execute("DROP TABLE ingest_log")
    db.execute("ALTER TABLE log_0025 RENAME TO ingest_log")
    db.execute("DELETE FROM schema_migrations WHERE version = 26")
    assert db.migrate(MIGRATIONS) == ["0026_ingest_log_heads.sql"]
    assert client.get("/api/ingest-log").json() == listed
    assert [len(item["created"]) for item in listed["items"]] == [0, 100]
    assert [item["created_count"] for item in listed["items"]] == [0, 150]
