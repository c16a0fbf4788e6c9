"""A file's tables are stored in row groups of ROW_GROUP_ROWS (issue 30, part 3): a request's many events are
written compressed by their own transaction rather than logged and compressed again by a checkpoint, and a checkpoint
re-compresses at most that many rows of a table. The file stays a plain DuckDB file, and one made before (DuckDB's
default row groups) is read and written on."""

import os

import duckdb

from app.store.db import ROW_GROUP_ROWS, Database


def row_groups(cur, table: str) -> list[int]:
    """Rows per stored row group of a table."""
    return [n for (n,) in cur.execute(
        "SELECT max(count) FROM pragma_storage_info(?) WHERE column_id = 0 GROUP BY row_group_id ORDER BY row_group_id",
        [table]).fetchall()]


def test_a_large_insert_goes_to_the_file_in_small_row_groups_not_to_the_log(tmp_path):
    path = tmp_path / "store.duckdb"
    db = Database(path)
    try:
        db.execute("CREATE TABLE wide (k BIGINT, text VARCHAR)")
        rows = 100_000  # a request of 1,000 rollouts has 37,000 events and 63,000 edges
        db.write(lambda cur: cur.execute(f"INSERT INTO wide SELECT range, 'row ' || range FROM range({rows})"))
        log = path.with_name(path.name + ".wal")
        assert (log.stat().st_size if log.exists() else 0) < 100_000  # its rows are not logged (~2 MB)
        assert db.scalar("SELECT count(*) FROM wide") == rows
        assert db.scalar("SELECT current_database()") == "store"  # the name DuckDB gives the file, as before
    finally:
        db.close()
    with duckdb.connect(str(path)) as plain:  # DuckDB alone reads what the store wrote
        assert plain.execute("SELECT count(*), max(k) FROM wide").fetchone() == (rows, rows - 1)
        assert max(row_groups(plain, "wide")) <= ROW_GROUP_ROWS


def test_a_file_made_with_duckdbs_default_row_groups_is_read_and_written_on(tmp_path):
    path = tmp_path / "old.duckdb"
    with duckdb.connect(str(path)) as plain:
        plain.execute("CREATE TABLE old AS SELECT range AS k FROM range(300000)")
        assert max(row_groups(plain, "old")) > ROW_GROUP_ROWS
    db = Database(path)
    try:
        db.write(lambda cur: cur.execute("INSERT INTO old SELECT range FROM range(300000, 300010)"))
        assert db.scalar("SELECT count(*) FROM old") == 300010
    finally:
        db.close()
    assert not os.path.exists(f"{path}.wal") or os.path.getsize(f"{path}.wal") == 0  # closed: all in the file


def test_two_stores_of_one_file_in_one_process_share_it_until_the_last_closes(tmp_path):
    """As DuckDB's connect shares one database per file in a process (the CLI's demo loads the samples, then serves)."""
    first = Database(tmp_path / "shared.duckdb")
    second = Database(str(tmp_path / ".." / tmp_path.name / "shared.duckdb"))  # the same file, named otherwise
    first.execute("CREATE TABLE t (k INTEGER)")
    second.write(lambda cur: cur.execute("INSERT INTO t VALUES (1)"))
    first.close()
    first.close()  # a second close does nothing
    assert second.scalar("SELECT count(*) FROM t") == 1
    second.close()
    assert not os.path.exists(tmp_path / "shared.duckdb.wal")  # the last close folded the log into the file
    with duckdb.connect(str(tmp_path / "shared.duckdb")) as plain:
        assert plain.execute("SELECT k FROM t").fetchall() == [(1,)]
