"""Writes on a DuckLake store that several app instances share (issue 16): a commit that loses to another
instance's is run again with backoff, and answered 503 only when it keeps losing. The lake cases run with
`pytest --store=lake` (a throwaway PostgreSQL); the retry rule itself runs on any store."""

import threading
import time
from contextlib import contextmanager

import pytest

from app.settings import Settings
from app.store import db as db_module
from app.store.db import CommitConflict, Database
from app.store.lake import shown


@pytest.fixture
def lake_settings(request, settings):
    if request.config.getoption("--store") != "lake":
        pytest.skip("a DuckLake case: run with --store=lake")
    return settings


def test_two_instances_updating_one_row_both_commit_after_a_retry(lake_settings):
    first, second = (Database(lake_settings.db, lake_settings.lake_data) for _ in range(2))
    first.migrate(lake_settings.migrations_dir)
    first.execute("INSERT INTO app_secrets VALUES ('x', '')")
    both_updated, tries = threading.Barrier(2), {"first": 0, "second": 0}

    def update(db: Database, name: str) -> None:
        def work(cur) -> None:
            tries[name] += 1
            cur.execute("UPDATE app_secrets SET value = value || ? WHERE name = 'x'", [name])
            if tries[name] == 1:
                both_updated.wait(timeout=10)  # both transactions hold an update before either commits
        db.write(work)

    threads = [threading.Thread(target=update, args=pair) for pair in ((first, "first"), (second, "second"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(tries.values()) == [1, 2]
    assert first.scalar("SELECT value FROM app_secrets WHERE name = 'x'") in ("firstsecond", "secondfirst")
    for db in (first, second):
        db.close()


def test_a_write_that_keeps_losing_gives_up_after_its_tries(db, monkeypatch):
    calls = []

    @contextmanager
    def losing(locks=()):
        calls.append(1)
        yield None
        raise CommitConflict("Failed to commit DuckLake transaction")

    monkeypatch.setattr(db, "transaction", losing)
    monkeypatch.setattr(db_module, "COMMIT_BACKOFF_S", 0)
    with pytest.raises(CommitConflict):
        db.write(lambda cur: None)
    assert len(calls) == db_module.COMMIT_TRIES


def test_a_lake_url_is_shown_without_its_password():
    assert shown("ducklake:postgres:dbname=lab host=pg password=s3cret user=app") == \
        "ducklake:postgres:dbname=lab host=pg password=*** user=app"
    assert "s3 cret" not in shown("ducklake:postgres:dbname=lab password = 's3 cret' user=app")
    assert shown("data/orchestrace.duckdb") == "data/orchestrace.duckdb"


def test_a_lake_url_survives_the_settings_intact(tmp_path):
    for url in ("ducklake:postgres:postgresql://app@db:5432/lab", "ducklake:postgres:dbname=lab host=/run//pg/"):
        assert str(Settings(db=url).db) == url
    assert Settings(db=str(tmp_path / "x.duckdb")).db == tmp_path / "x.duckdb"


def test_a_file_takes_no_lake_locks(tmp_path):
    db = Database(tmp_path / "x.duckdb")
    assert not db.locking
    db.close()


def test_a_write_holding_a_lock_makes_another_instance_wait_and_then_see_its_row(lake_settings):
    first, second = (Database(lake_settings.db, lake_settings.lake_data) for _ in range(2))
    first.migrate(lake_settings.migrations_dir)
    inside, seen = threading.Event(), []

    def slow(cur) -> None:
        cur.execute("INSERT INTO app_secrets VALUES ('k', 'first')")
        inside.set()
        time.sleep(0.5)  # the other instance's write starts meanwhile, and must wait for this commit

    def check(cur) -> None:
        seen.append(cur.execute("SELECT count(*) FROM app_secrets WHERE name = 'k'").fetchone()[0])

    writer = threading.Thread(target=first.write, args=(slow, [("secret", "k")]))
    writer.start()
    inside.wait(10)
    second.write(check, [("secret", "k")])
    writer.join()
    assert seen == [1]
    for db in (first, second):
        db.close()


def test_a_lake_is_not_backed_up_as_a_file(lake_settings, client, tmp_path):
    answer = client.post("/api/backup", json={"path": str(tmp_path / "copy.duckdb")})
    assert answer.status_code == 422 and "pg_dump" in answer.json()["error"]
    assert not (tmp_path / "copy.duckdb").exists()
