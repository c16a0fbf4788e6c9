"""Reads of a DuckLake shared through PostgreSQL (issue 30): a read the catalog's latest snapshot has answered before
is answered again without running (its rows as they were: a snapshot is the whole state of the lake), and runs
again once a commit, on this instance or another, changes a table it names (any table, when the lake's log of
snapshots cannot tell). Each thread reads on a cursor of its own, kept; a write's
cursor is kept for the next write, also after one that failed. Rows the catalog keeps for small inserts are moved
into Parquet files once writes pause. Runs whenever PostgreSQL is installed."""

import json
import re
import shutil
import threading
import time
from pathlib import Path

import pytest

from app.domain.generate import generate_swarm
from app.services import labels
from app.store import db as db_module
from app.store import lake as lake_module
from app.store import traces as trace_store
from app.store.db import Database
from app.store.sql import traced_statements
from app.store.writes import store_traces

REVIEWERS = "SELECT name, created_at FROM reviewers ORDER BY name"


@pytest.fixture
def lake(migrated_lake, tmp_path):
    """A fresh copy of the migrated lake: its URL and data folder."""
    with migrated_lake.copy(tmp_path / "lake") as url:
        yield url, str(tmp_path / "lake")


@pytest.fixture
def instances(lake):
    """Two instances on one lake."""
    first, second = Database(*lake), Database(*lake)
    yield first, second
    first.close()
    second.close()


def add(db: Database, name: str) -> None:
    db.write(lambda cur: cur.execute("INSERT INTO reviewers VALUES (?, now())", [name]))


def statements(read) -> list[str]:
    with traced_statements() as ran:
        read()
    return [sql for sql, *_ in ran]


def test_a_read_at_an_unchanged_snapshot_is_answered_without_running(instances):
    first, _ = instances
    add(first, "ada")
    rows = first.fetchall(REVIEWERS)
    again = statements(lambda: first.fetchall(REVIEWERS))
    assert first.fetchall(REVIEWERS) == rows and [r["name"] for r in rows] == ["ada"]
    assert len(again) == 1 and again[0].startswith("SELECT * FROM postgres_query")  # the catalog's snapshot


def test_a_commit_on_either_instance_makes_the_read_run_again(instances):
    first, second = instances
    add(first, "ada")
    assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada"]
    add(second, "bob")
    assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob"]
    add(first, "cy")
    assert first.scalar("SELECT count(*) FROM reviewers") == 3
    assert [r["name"] for r in second.fetchall(REVIEWERS)] == ["ada", "bob", "cy"]


def test_a_read_through_execute_is_kept_as_fetchall_reads_are(instances):
    first, second = instances
    add(first, "ada")
    assert first.execute(REVIEWERS).fetchall() == [tuple(row.values()) for row in first.fetchall(REVIEWERS)]
    again = statements(lambda: first.execute(REVIEWERS).fetchone())
    assert len(again) == 1 and again[0].startswith("SELECT * FROM postgres_query")
    rows = first.execute(REVIEWERS)
    assert rows.fetchone()[0] == "ada" and rows.fetchone() is None and rows.fetchall() == []
    add(second, "bob")
    assert [name for name, _ in first.execute(REVIEWERS).fetchall()] == ["ada", "bob"]


# the latest snapshot, alone or with the log since the kept reads' (lake.look)
LOOK = re.compile(r"SELECT \* FROM postgres_query\('lake_locks', 'SELECT [^']*max\(snapshot_id\)")
LOG = "ducklake_snapshot_changes"


def test_a_request_looks_at_the_snapshot_once_and_again_after_its_own_commit(instances):
    first, second = instances
    add(first, "ada")
    with db_module.one_look():
        ran = statements(lambda: (first.fetchall(REVIEWERS), first.scalar("SELECT count(*) FROM reviewers"),
                                  first.fetchall(REVIEWERS)))
        assert sum(bool(LOOK.match(sql)) for sql in ran) == 1, ran
        add(second, "bob")  # another instance commits during the request: its reads stay as of its look
        assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada"]
        add(first, "cy")  # this process commits: the request looks again and sees both
        ran = statements(lambda: first.fetchall(REVIEWERS))
        assert sum(bool(LOOK.match(sql)) for sql in ran) == 1
        assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob", "cy"]
    with db_module.one_look():  # the next request sees what committed before it
        add(second, "dee")
        assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob", "cy", "dee"]


def test_a_commit_outside_the_request_neither_makes_it_look_again_nor_is_read_from_before(instances):
    first, _ = instances
    add(first, "ada")
    with db_module.one_look():
        assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada"]
        build = threading.Thread(target=add, args=(first, "bob"))  # a build or an analysis stored by a thread of
        build.start()  # its own, which the request waits for
        build.join()
        ran = statements(lambda: first.fetchall(REVIEWERS))
        assert not any(LOOK.match(sql) for sql in ran), ran
        assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob"]
    with db_module.one_look():  # and the next request reads it as kept
        assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob"]
        assert not ran_again(first, REVIEWERS)


def test_a_page_on_a_lake_looks_at_the_snapshot_once(lake, tmp_path):
    from conftest import BASE_URL
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(db=lake[0], lake_data=lake[1]))
    try:
        client = TestClient(app, base_url=BASE_URL)
        assert client.get("/api/traces").status_code == 200
        for page in ("/", "/dashboard", "/audit"):
            with traced_statements() as ran:
                assert client.get(page).status_code == 200
            reads = [sql for sql, *_ in ran]
            assert sum(bool(LOOK.match(sql)) for sql in reads) == 1, (page, reads)
    finally:
        app.state.live.close()
        app.state.db.close()


def test_a_trace_page_on_a_lake_reads_the_traces_row_once_and_its_events_page_with_their_count(lake):
    """The route's check that the trace exists, its caches' version and its number of events share one read (the
    first answers the others), and the page of events comes with how many match: each read of a lake is a catalog
    transaction."""
    from conftest import BASE_URL
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings
    from app.store import traces as trace_store

    app = create_app(Settings(db=lake[0], lake_data=lake[1]))
    try:
        client = TestClient(app, base_url=BASE_URL)
        trace = generate_swarm(12, 300, seed=3)
        assert client.post("/api/traces", json=trace).status_code == 201
        with traced_statements() as ran:
            page = client.get(f"/traces/{trace['trace_id']}", params={"type": "message"})
        reads = [sql for sql, *_ in ran]
        assert page.status_code == 200 and reads.count(trace_store.TRACE_ROW) == 1, reads
        counted = sum(event["type"] == "message" for event in trace["events"])
        assert not [sql for sql in reads if sql.startswith("SELECT count(*) FROM events")]
        assert f'<span class="count">{counted:,} events</span>' in page.text
    finally:
        app.state.live.close()
        app.state.db.close()


def test_each_lake_table_has_its_inlined_deletion_table_and_deletes_read_right(instances):
    """Made ahead (lake.DELETION_TABLES), DuckLake writes a small delete's rows into it and reads them back."""
    first, second = instances
    missing = first.scalar(
        "SELECT count(*) FROM postgres_query('lake_locks', 'SELECT table_id FROM ducklake_table t "
        "WHERE end_snapshot IS NULL AND to_regclass(''ducklake_inlined_delete_'' || table_id) IS NULL')")
    assert missing == 0
    first.write(lambda cur: cur.execute("INSERT INTO reviewers SELECT 'r' || range, now() FROM range(100)"))
    first.write(lambda cur: cur.execute("DELETE FROM reviewers WHERE name IN ('r5', 'r7')"))
    assert second.scalar("SELECT count(*) FROM reviewers") == 98
    assert second.scalar("SELECT count(*) FROM reviewers WHERE name IN ('r5', 'r7', 'r8')") == 1
    table_id = first.scalar("SELECT * FROM postgres_query('lake_locks', 'SELECT table_id FROM ducklake_table "
                            "WHERE table_name = ''reviewers'' AND end_snapshot IS NULL')")
    assert first.scalar(f"SELECT * FROM postgres_query('lake_locks', "
                        f"'SELECT count(*) FROM ducklake_inlined_delete_{table_id}')") == 2


def test_rows_changed_by_a_caller_are_not_what_the_next_read_gets(instances):
    first, _ = instances
    add(first, "ada")
    sql = "SELECT name, [name, 'x'] AS tags FROM reviewers"
    rows = first.fetchall(sql)
    rows[0]["name"] = "changed"
    rows[0]["tags"].append("changed")
    assert first.fetchall(sql) == [{"name": "ada", "tags": ["ada", "x"]}]


def test_reads_of_the_moment_and_large_reads_run_every_time(instances, monkeypatch):
    first, _ = instances
    add(first, "ada")
    volatile = "SELECT name, epoch_ms(now()) AS at FROM reviewers"
    first.fetchall(volatile)
    assert any(sql == volatile for sql in statements(lambda: first.fetchall(volatile)))
    monkeypatch.setattr(db_module, "SNAPSHOT_READ_ROWS", 0)
    first.fetchall(REVIEWERS)
    assert REVIEWERS in statements(lambda: first.fetchall(REVIEWERS))
    first.fetchall(REVIEWERS, keep_rows=1)  # a caller may keep more rows than the rule's
    assert REVIEWERS not in statements(lambda: first.fetchall(REVIEWERS, keep_rows=1))


def test_each_thread_reads_on_a_cursor_of_its_own(instances):
    first, _ = instances
    add(first, "ada")
    before = len(first._all_readers)  # the writer's thread looked after its commit
    counts, barrier = [], threading.Barrier(4)

    def read() -> None:
        barrier.wait()
        counts.extend(first.scalar("SELECT count(*) FROM reviewers WHERE name <> ?", [str(n)]) for n in range(5))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counts == [1] * 20 and len(first._all_readers) - before == 8  # a cursor in the lake and one to look, each


@pytest.mark.parametrize("store", ["file", "lake"])
def test_a_write_after_one_that_failed_commits(store, lake, migrated_file, tmp_path):
    if store == "file":
        shutil.copyfile(migrated_file, tmp_path / "file.duckdb")
    db = Database(tmp_path / "file.duckdb") if store == "file" else Database(*lake)
    try:
        def fail(cur):
            cur.execute("INSERT INTO reviewers VALUES ('lost', now())")
            raise ValueError("no")

        with pytest.raises(ValueError):
            db.write(fail)
        add(db, "ada")
        assert [r["name"] for r in db.fetchall(REVIEWERS)] == ["ada"]
    finally:
        db.close()


def test_reads_run_every_time_while_another_database_is_attached(instances, tmp_path):
    """migrate-store attaches its source: what it reads there is not the lake's state."""
    first, _ = instances
    add(first, "ada")
    first.execute(f"ATTACH '{tmp_path / 'other.duckdb'}' AS other")
    first.fetchall(REVIEWERS)
    assert REVIEWERS in statements(lambda: first.fetchall(REVIEWERS))
    first.execute("DETACH other")
    first.fetchall(REVIEWERS)
    assert REVIEWERS not in statements(lambda: first.fetchall(REVIEWERS))


def test_rows_kept_in_the_catalog_move_to_parquet_once_writes_pause(lake, monkeypatch):
    monkeypatch.setattr(db_module, "FLUSH_COMMITS", 3)
    monkeypatch.setattr(db_module, "CHECKPOINT_QUIET_S", 0.2)
    first, second = Database(*lake), Database(*lake)
    try:
        files = "SELECT count(*) FROM ducklake_list_files('lake', 'reviewers')"
        for name in ("ada", "bob", "cy", "dee"):
            add(first, name)  # each insert is small: DuckLake keeps its row in the catalog
        deadline = time.monotonic() + 30
        while not first.scalar(files) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first.scalar(files) >= 1  # written to a Parquet file
        assert [row["name"] for row in second.fetchall(REVIEWERS)] == ["ada", "bob", "cy", "dee"]
        add(second, "eve")
        assert [row["name"] for row in first.fetchall(REVIEWERS)] == ["ada", "bob", "cy", "dee", "eve"]
    finally:
        first.close()
        second.close()


def test_a_group_of_label_saves_is_kept_in_the_catalog(lake):
    db = Database(*lake)
    try:
        assert db.scalar("SELECT value FROM ducklake_options('lake') WHERE option_name = 'data_inlining_row_limit' "
                         "AND scope_entry LIKE '%annotations'") == str(lake_module.INLINED_ROWS["annotations"])
        db.write(lambda cur: cur.execute("INSERT INTO events (trace_id, seq, event_id, t, t_is_int, type, agent) "
                                         "VALUES ('t', 0, 'e', 0, true, 'tool_call', 'a')"))
        saves = [labels._Save("t", "e", f"r{n:02d}", {"credit": 0.5}, "human", None, None, None)
                 for n in range(labels.SAVES_TOGETHER)]
        assert all(created for _, created in labels.save_labels(db, saves))
        assert db.scalar("SELECT count(*) FROM ducklake_list_files('lake', 'annotations')") == 0
        assert db.scalar("SELECT count(*) FROM annotations") == labels.SAVES_TOGETHER
    finally:
        db.close()


def test_work_done_when_writes_pause_is_done_after_another_instances_commit_too(instances, monkeypatch):
    monkeypatch.setattr(db_module, "LAKE_WATCH_S", 0.05)
    monkeypatch.setattr(db_module, "CHECKPOINT_QUIET_S", 0.05)
    first, second = instances
    seen, ran = [], threading.Event()

    def work():
        seen.append([row["name"] for row in second.fetchall(REVIEWERS)])
        ran.set()

    second.when_writes_pause(work, "reading the reviewers")
    time.sleep(0.3)  # a few looks at an unchanged lake: nothing to do
    assert not ran.is_set()
    add(first, "ada")  # committed by the other instance: no commit of `second` makes the work due
    assert ran.wait(10), "the work was not done after the other instance's commit"
    assert seen[-1] == ["ada"]


TRACES = "SELECT count(*) FROM traces"
BOTH = "SELECT count(*) FROM reviewers r, traces t WHERE r.name <> t.trace_id"
NO_TABLE = "SELECT 42 AS answer"


def ran_again(db: Database, sql: str) -> bool:
    return sql in statements(lambda: db.fetchall(sql))


def test_a_commit_drops_the_kept_reads_of_the_tables_it_changed_and_keeps_the_others(instances):
    first, second = instances
    add(first, "ada")
    for sql in (REVIEWERS, TRACES, BOTH, NO_TABLE):
        first.fetchall(sql)
    add(second, "bob")  # another instance changes the reviewers only
    assert not ran_again(first, TRACES)
    assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob"]
    assert ran_again(first, BOTH) and ran_again(first, NO_TABLE)  # a read of any table it changed; of none: any
    store_traces(second, [generate_swarm(3, 12, seed=1) | {"trace_id": "t1"}])
    assert not ran_again(first, REVIEWERS)
    assert first.scalar(TRACES) == 1 and first.scalar(BOTH) == 2


def test_a_read_after_a_commit_asks_the_catalog_once_for_the_snapshot_and_what_changed(instances):
    """The first read after another instance's commit learns the latest snapshot and which tables the commits since
    the kept reads changed in one catalog query, then keeps what they did not change."""
    first, second = instances
    add(first, "ada")
    for sql in (REVIEWERS, TRACES):
        first.fetchall(sql)
    add(second, "bob")
    add(second, "cy")
    ran = statements(lambda: first.fetchall(TRACES))
    assert len(ran) == 1 and LOOK.match(ran[0]) and LOG in ran[0], ran  # kept: the commits changed the reviewers
    assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob", "cy"]  # read again
    with db_module.one_look():  # a request's look is the same one question
        store_traces(second, [generate_swarm(3, 12, seed=1) | {"trace_id": "t1"}])
        ran = statements(lambda: (first.fetchall(REVIEWERS), first.scalar(TRACES)))
        assert sum(bool(LOOK.match(sql)) for sql in ran) == 1 and sum(LOG in sql for sql in ran) == 1, ran
        assert REVIEWERS not in ran and TRACES in ran and first.scalar(TRACES) == 1


def test_a_table_made_or_a_snapshot_expired_drops_every_kept_read(instances):
    first, second = instances
    add(first, "ada")
    first.fetchall(TRACES)
    second.write(lambda cur: cur.execute("CREATE TABLE scratch (x INTEGER)"))  # what any read reads may differ
    assert ran_again(first, TRACES)
    add(second, "bob")
    add(second, "cy")
    second.execute("CALL ducklake_expire_snapshots('lake', older_than => now())")  # the log loses those snapshots
    assert ran_again(first, TRACES)
    assert [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob", "cy"]


@pytest.fixture
def sampled(lake):
    """An app on the lake holding the sample traces: its client, and the first sample."""
    from conftest import BASE_URL
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    app = create_app(Settings(db=lake[0], lake_data=lake[1]))
    try:
        client = TestClient(app, base_url=BASE_URL)
        samples = Path(__file__).resolve().parent.parent / "sample_traces"
        docs = [json.loads(path.read_text()) for path in sorted(samples.glob("*.json"))]
        assert client.post("/api/traces", json=docs).status_code == 201
        yield client, docs[0]
    finally:
        app.state.live.close()
        app.state.db.close()


def test_after_a_label_save_the_corpus_pages_read_again_only_what_it_changed(sampled):
    """A lab on a lake: reviewers save labels while others look at the corpus pages. A save changes the labels,
    not the traces: the pages' reads of the traces stay kept, and what they show of labels is the save's."""
    client, trace = sampled
    pages = ("/", "/dashboard", "/audit")
    for page in pages:
        assert client.get(page).status_code == 200
    ones = labelled_ones(client.get("/").text, trace["trace_id"])
    label = {"trace_id": trace["trace_id"], "event_id": trace["events"][0]["id"], "reviewer": "ada",
             "credit": 0.5}
    assert client.post("/api/annotations", json=label).status_code == 201
    for page in pages:
        with traced_statements() as ran:
            answer = client.get(page)
        assert answer.status_code == 200
        corpus_reads = [sql for sql, *_ in ran
                        if re.search(r"\b(traces|trace_measures|trace_rewards|trace_metrics|audit_findings)\b",
                                     sql) and "annotations" not in sql]
        assert corpus_reads == [], (page, corpus_reads)
    assert labelled_ones(client.get("/").text, trace["trace_id"]) == ones + 1  # its row counts the label
    assert client.get("/api/annotations", params={"trace_id": trace["trace_id"]}).json()["items"][0]["credit"] \
        == 0.5


def test_after_an_ingest_the_trace_list_and_a_new_trace_read_no_label_table_again(sampled):
    """An ingest changes the traces, not the labels: the labels' counts by trace, read for every labelled trace
    rather than for the page's (which the new traces change), stay kept and still count what they did, on the trace
    list and on the new trace's page."""
    client, trace = sampled
    ones = labelled_ones(client.get("/").text, trace["trace_id"])
    label = {"trace_id": trace["trace_id"], "event_id": trace["events"][0]["id"], "reviewer": "ada",
             "credit": 0.5}
    assert client.post("/api/annotations", json=label).status_code == 201
    assert labelled_ones(client.get("/").text, trace["trace_id"]) == ones + 1
    overlays = client.get(f"/api/traces/{trace['trace_id']}/overlays").json()["channels"]
    assert {"name": "human credit: ada", "count": 1, "min": 0.5, "max": 0.5} in overlays  # its credit overlay
    new = generate_swarm(3, 12, seed=7) | {"trace_id": "arrived-later"}
    assert client.post("/api/traces", json=new).status_code == 201
    with traced_statements() as ran:
        listed = client.get("/").text
    assert "arrived-later" in listed
    assert [sql for sql, *_ in ran if re.search(r"\b(annotations|queues|queue_items)\b", sql)] == []
    assert labelled_ones(listed, trace["trace_id"]) == ones + 1
    with traced_statements() as ran:
        opened = client.get("/traces/arrived-later")
    assert opened.status_code == 200 and "It has no labels." in opened.text
    assert [sql for sql, *_ in ran if re.search(r"\b(annotations|queues|queue_items)\b", sql)] == []
    page = client.get(f"/traces/{trace['trace_id']}").text
    assert "It has <strong>1 label version</strong> (current labels on 1 event)" in page


def labelled_ones(html: str, trace_id: str) -> int:
    """Cells reading 1 in the trace list's row of a trace (its labelled-events cell is one once it has a label)."""
    row = next(row for row in html.split("<tr") if f">{trace_id}<" in row)
    return row.count('<td class="num">1</td>')


def test_threads_catching_up_at_once_ask_the_log_once_and_read_no_older_than_their_look(instances, monkeypatch):
    """Thread A asks the catalog's log what changed up to the latest snapshot while thread B, whose request looked
    at a snapshot halfway, would catch up too: B waits for A's answer and asks nothing, and both then read rows as
    new as their looks."""
    first, second = instances
    add(first, "ada")
    first.fetchall(REVIEWERS)
    assert first.scalar(TRACES) == 0
    halfway = lake_module.snapshot_id(first._looker()) + 1
    add(second, "bob")  # the snapshot halfway
    store_traces(second, [generate_swarm(3, 12, seed=1) | {"trace_id": "t1"}])
    latest = lake_module.snapshot_id(first._looker())
    asked = lake_module.snapshot_log
    calls = []
    b = threading.Thread(target=first._catch_up, args=(halfway,))

    def b_catches_up_meanwhile(cur, after, upto):
        calls.append((after, upto))
        if len(calls) == 1:
            b.start()
            time.sleep(0.3)  # B is waiting by now, or would have asked
        return asked(cur, after, upto)

    monkeypatch.setattr(lake_module, "snapshot_log", b_catches_up_meanwhile)
    first._catch_up(latest)
    b.join(10)
    assert not b.is_alive() and len(calls) == 1 and calls[0][1] == latest
    assert first.scalar(TRACES) == 1 and [r["name"] for r in first.fetchall(REVIEWERS)] == ["ada", "bob"]


def test_reads_together_run_side_by_side_on_a_lake_each_in_the_callers_context(instances):
    """A page's independent reads (Database.together) overlap their catalog round trips on threads, see the request's
    look, and give their results in order; a failure is raised once every read ended."""
    first, _ = instances
    add(first, "ada")
    parties = 1 + db_module.TOGETHER_THREADS
    meeting = threading.Barrier(parties, timeout=20)  # passed only by reads running at one time

    def read(n: int):
        meeting.wait()
        return n, first.scalar("SELECT count(*) FROM reviewers"), threading.current_thread().name

    with db_module.one_look():
        ran = statements(lambda: first.together(*(lambda n=n: read(n) for n in range(parties))))
    results = first.together(*(lambda n=n: read(n) for n in range(parties)))
    assert [(n, count) for n, count, _ in results] == [(n, 1) for n in range(parties)]
    assert len({name for *_, name in results}) == parties
    assert sum(bool(LOOK.match(sql)) for sql in ran) == 1

    ended = []

    def slow():
        time.sleep(0.3)
        ended.append("slow")

    def fails():
        raise LookupError("no such row")

    with pytest.raises(LookupError, match="no such row"):
        first.together(fails, slow)
    assert ended == ["slow"]


def test_reads_together_inside_a_read_together_run_one_by_one_on_its_thread(instances):
    """A call's own `together` does not wait for the threads every call may be holding: it runs where it is."""
    first, _ = instances
    name = lambda: threading.current_thread().name  # noqa: E731
    outer = first.together(*[lambda: (name(), first.together(*[name] * 5))] * (1 + db_module.TOGETHER_THREADS))
    for thread, inner in outer[1:]:
        assert inner == [thread] * 5


def test_reads_together_on_a_file_run_one_by_one_on_the_callers_thread(tmp_path):
    db = Database(tmp_path / "file.duckdb")
    try:
        assert db.together(*[lambda n=n: (n, threading.current_thread().name) for n in range(3)]) == \
            [(n, threading.current_thread().name) for n in range(3)]
    finally:
        db.close()


def test_reads_on_many_threads_leave_no_catalog_connection_in_a_transaction(instances):
    """Each thread keeps its cursors; a result left unread kept its transaction, and a PostgreSQL connection with
    it, open ("idle in transaction": out of the pool, and holding back PostgreSQL's cleanup). Once every pooled
    connection was held so, each look opened a connection of its own."""
    first, _ = instances
    add(first, "ada")

    def reads():
        for _ in range(3):
            first.fetchall(REVIEWERS)
            first.scalar("SELECT count(*) FROM traces")

    threads = [threading.Thread(target=reads) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(1.2)  # a write of the background (a flush) is idle in its transaction for milliseconds, not this long
    probe = first._conn.cursor()
    try:
        states = probe.execute("SELECT * FROM postgres_query('lake_locks', 'SELECT state, now() - state_change "
                               "> interval ''1 second'' AS held FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()')").fetchall()
    finally:
        probe.close()
    assert states and ("idle in transaction", True) not in states, states


def test_the_corpus_version_on_a_lake_costs_no_read_and_moves_only_with_the_traces(instances):
    """The corpus facts are kept per version of the traces (and of their analyses): on a lake that version comes
    from the log of snapshots the look already asks, not from a read of the traces (a catalog transaction)."""
    first, second = instances
    add(first, "ada")
    first.fetchall(REVIEWERS)  # a kept read: the look asks the log since it
    with db_module.one_look():
        before = trace_store.corpus_version(first)
    add(second, "bob")  # the reviewers change, not the traces
    with db_module.one_look():
        ran = statements(lambda: trace_store.corpus_version(first))
        assert trace_store.corpus_version(first) == before
    assert len(ran) == 1 and LOOK.match(ran[0]), ran  # the look alone
    store_traces(second, [generate_swarm(3, 12, seed=1) | {"trace_id": "t1"}])
    with db_module.one_look():
        after = trace_store.corpus_version(first)
    assert after != before
    add(second, "cy")
    with db_module.one_look():
        assert trace_store.corpus_version(first) == after
