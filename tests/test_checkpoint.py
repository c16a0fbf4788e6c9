"""A DuckDB file's write-ahead log is folded into the file by a thread of the app once writes pause, not inside
the commit that made it large: no request waits for a checkpoint, and nothing committed is lost."""

import threading
import time

import pytest
from conftest import make_trace

from app.domain.jsontext import dumps
from app.ingest.documents import Upload
from app.ingest.pipeline import ingest
from app.settings import Settings
from app.store import db as store_db
from app.store.db import Database

WAIT_S = 20


def wal_size(path) -> int:
    wal = path.with_name(path.name + ".wal")
    return wal.stat().st_size if wal.exists() else 0


def store(db: Database, trace_id: str) -> None:
    trace = make_trace(trace_id, events=[{"id": f"e{i}", "t": i, "type": "message", "agent": f"a{i % 7}",
                                          "payload": "x" * 200} for i in range(400)], edges=[])
    ingest(db, [Upload("body", dumps(trace).encode())])


def folded_within(path, seconds: float, below: int) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if wal_size(path) < below:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def small_thresholds(monkeypatch):
    monkeypatch.setattr(store_db, "CHECKPOINT_WAL_BYTES", 64 * 1024)
    monkeypatch.setattr(store_db, "CHECKPOINT_QUIET_S", 0.5)
    monkeypatch.setattr(store_db, "WAL_LIMIT", "64MB")  # DuckDB itself would not fold it in these tests


def test_a_commit_leaves_the_log_large_and_it_is_folded_once_writes_pause(tmp_path, small_thresholds):
    path = tmp_path / "store.duckdb"
    db = Database(path)
    db.migrate(Settings().migrations_dir)
    try:
        store(db, "t1")
        assert wal_size(path) >= store_db.CHECKPOINT_WAL_BYTES  # the commit did not checkpoint
        assert folded_within(path, WAIT_S, store_db.CHECKPOINT_WAL_BYTES)
        assert db.scalar("SELECT n_events FROM traces WHERE trace_id = 't1'") == 400
    finally:
        db.close()
    reopened = Database(path)
    try:
        assert reopened.scalar("SELECT count(*) FROM events WHERE trace_id = 't1'") == 400
    finally:
        reopened.close()


def test_a_log_past_the_forcing_size_is_folded_even_while_writes_go_on(tmp_path, small_thresholds, monkeypatch):
    monkeypatch.setattr(store_db, "CHECKPOINT_QUIET_S", 60.0)  # writes never pause that long here
    monkeypatch.setattr(store_db, "CHECKPOINT_FORCE_BYTES", 256 * 1024)
    path = tmp_path / "store.duckdb"
    db = Database(path)
    db.migrate(Settings().migrations_dir)
    try:
        store(db, "t0")
        assert wal_size(path) >= store_db.CHECKPOINT_WAL_BYTES  # logged, not folded: no pause, below forcing
        for i in range(1, 12):  # about 1 MB of log in all: only the forcing size can have it folded
            store(db, f"t{i}")
        assert folded_within(path, WAIT_S, store_db.CHECKPOINT_FORCE_BYTES)
        assert db.scalar("SELECT count(*) FROM traces") == 12
    finally:
        db.close()


def test_closing_stops_the_thread_and_keeps_every_write(tmp_path, small_thresholds):
    path = tmp_path / "store.duckdb"
    before = set(threading.enumerate())
    db = Database(path)
    db.migrate(Settings().migrations_dir)
    store(db, "t1")
    db.close()
    assert not [t for t in threading.enumerate() if t not in before and t.name == "duckdb-checkpointer"]
    reopened = Database(path)
    try:
        assert reopened.scalar("SELECT n_events FROM traces WHERE trace_id = 't1'") == 400
    finally:
        reopened.close()
