"""DuckLake (issue 16): a catalog in PostgreSQL, the data as Parquet files in a shared folder.

The `ducklake` and `postgres` extensions come from PyPI packages (the `lake` extra), built for exactly the
pinned DuckDB version, and are installed from those packages' files: nothing is downloaded at run time.
"""

import re
from contextlib import contextmanager

import duckdb

from app.store.sql import execute

LAKE_PREFIX = "ducklake:"
POSTGRES_CATALOG = "postgres:"
LAKE_EXTENSIONS = ("postgres", "ducklake")
LAKE_ALIAS = "lake"
LOCKS_ALIAS = "lake_locks"
ATTACH_LOCK = 1  # an advisory lock key (app keys are hashes, almost never this one)
LIBPQ_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")
SETTINGS = {
    # A commit that lost the race for the next snapshot to another writer's is retried by DuckLake when the two
    # do not conflict (appends never do), after 50-100% of this wait, growing 1.5 times a retry: 100 ms by default,
    # longer than the whole write it makes wait.
    "ducklake_retry_wait_ms": "5",
    # A lake's Parquet files never change: their footers are read once, not by every query.
    "parquet_metadata_cache": "true",
}
# Tables whose inserts of up to this many rows DuckLake keeps in its catalog (10 by default) rather than writing a
# Parquet file of each: a group of label saves is one insert of up to services/labels.SAVES_TOGETHER rows. Kept rows
# move to Parquet files in bulk later (db._InlineFlusher).
INLINED_ROWS = {"annotations": 50}

# DuckLake keeps rows deleted from a table's Parquet files in a catalog table of that table's, made at its first
# such delete. Until it exists, every lake transaction at a new snapshot asks whether it does, for each table it
# reads, and learns that it does not from a failed query (two PostgreSQL catalog introspections and a DuckDB error:
# a third of a label save's catalog time). Made empty ahead, as DuckLake (format 1.0) makes it, it is known to
# exist once per process, and reading it is one small query.
DELETION_TABLES = (
    "DO $$ DECLARE t bigint; BEGIN "
    "FOR t IN SELECT table_id FROM ducklake_table WHERE end_snapshot IS NULL LOOP "
    "EXECUTE format(''CREATE TABLE IF NOT EXISTS ducklake_inlined_delete_%s "
    "(file_id BIGINT, row_id BIGINT, begin_snapshot BIGINT)'', t); END LOOP; END $$")

# The kinds of change in DuckLake's snapshot log (`changes_made`, "kind:value,...") that change the rows of one table,
# named by its id; any other kind may change what any statement reads.
ROW_CHANGES = frozenset({"inserted_into_table", "deleted_from_table", "inlined_insert", "inlined_delete",
                         "flushed_inlined", "inline_flush", "compacted_table", "merge_adjacent", "rewrite_delete"})
CHANGE = re.compile(r'([a-z_]+):((?:"(?:[^"]|"")*"|[^,"])*)(?:,|$)')


class LakeUnavailable(RuntimeError):
    """A DuckLake URL was given but the extension packages are missing or do not match this DuckDB."""


def is_lake_url(db: str) -> bool:
    """A DuckLake store (`ducklake:postgres:<libpq connection string>`) rather than a DuckDB file path."""
    return str(db).startswith(LAKE_PREFIX)


def load_extensions(conn: duckdb.DuckDBPyConnection) -> None:
    """Install the lake's extensions from their PyPI packages into DuckDB's extension folder, then load them."""
    try:
        from duckdb_extensions import import_extension
    except ImportError as exc:
        raise LakeUnavailable("a DuckLake store needs the `lake` extra: pip install 'orchestrace[lake]'") from exc
    conn.execute("SET autoinstall_known_extensions = false")
    for name in LAKE_EXTENSIONS:
        try:
            import_extension(name, con=conn)
            conn.execute(f"LOAD {name}")
        except (ImportError, duckdb.Error) as exc:
            raise LakeUnavailable(f"the DuckDB extension {name!r} for DuckDB {duckdb.__version__} could not be "
                                  f"loaded (the duckdb-extension-* packages must match DuckDB's version): {exc}"
                                  ) from exc


def attach_lake(conn: duckdb.DuckDBPyConnection, url: str, data_path: str) -> bool:
    """Attach the lake at `url` with its Parquet files under `data_path` and make it the default catalog;
    whether writes can take advisory locks on it (see `attach_locks`)."""
    load_extensions(conn)
    for name, value in SETTINGS.items():  # constants
        conn.execute(f"SET GLOBAL {name} = {value}")
    locking = attach_locks(conn, url)
    # ATTACH takes no bound parameters; both strings come from the operator's settings, quotes doubled.
    quoted_url, quoted_data = (value.replace("'", "''") for value in (url, data_path))
    # The first ATTACH makes the catalog's tables: instances starting together on a new lake take turns.
    with held(conn, [ATTACH_LOCK] if locking else []):
        conn.execute(f"ATTACH '{quoted_url}' AS {LAKE_ALIAS} (DATA_PATH '{quoted_data}')")
    conn.execute(f"USE {LAKE_ALIAS}")
    return locking


def attach_locks(conn: duckdb.DuckDBPyConnection, url: str) -> bool:
    """Attach the lake's PostgreSQL catalog a second time, as a plain PostgreSQL database, for advisory locks
    (see `held`); False for a catalog that is not PostgreSQL (only one process can use such a lake)."""
    libpq = url.removeprefix(LAKE_PREFIX)
    if not libpq.startswith(POSTGRES_CATALOG):
        return False
    quoted = libpq.removeprefix(POSTGRES_CATALOG).replace("'", "''")
    conn.execute(f"ATTACH '{quoted}' AS {LOCKS_ALIAS} (TYPE postgres)")
    return True


@contextmanager
def held(conn: duckdb.DuckDBPyConnection, keys: list[int]):
    """PostgreSQL advisory locks on `keys` (none: nothing is done), held in a transaction on a cursor of their
    own until the block ends.

    DuckLake has no unique keys, and a lake transaction does not see rows another instance has not committed
    yet, so two instances checking "is this taken?" at once both find it free. Holding a lock on what must be
    unique from before the lake transaction starts until after it commits makes the second instance wait,
    then start its snapshot with the first one's rows in it. Keys are taken in one statement, in order, so two
    writes that want the same keys never hold one each.
    """
    if not keys:
        yield
        return
    listed = ", ".join(str(int(key)) for key in sorted(set(keys)))
    cur = conn.cursor()  # starts in the in-memory catalog: its transaction does not touch the lake
    execute(cur, "BEGIN TRANSACTION")
    try:
        execute(cur, f"SELECT * FROM postgres_query('{LOCKS_ALIAS}', 'SELECT count(pg_advisory_xact_lock(k)) "
                    f"FROM (SELECT unnest(ARRAY[{listed}]::bigint[]) AS k ORDER BY k) AS keys')").fetchall()
        yield
    finally:
        execute(cur, "ROLLBACK")  # ends the PostgreSQL transaction, which releases the locks
        cur.close()


def snapshot_id(cur: duckdb.DuckDBPyConnection) -> int | None:
    """The lake's latest committed snapshot, from its PostgreSQL catalog directly (see `attach_locks`): one query
    (4 round trips with the pool's), where a read of the lake starts a catalog transaction and reads each table's
    files and stats (10 to 90). Its rows are all taken (fetchall): a result left open keeps the cursor's transaction
    open, and with it a PostgreSQL connection "idle in transaction", out of the pool. With a kept cursor per
    thread, those took the pool's 4 connections, and every look then opened one of its own: 4.4 ms, not 1.5."""
    return execute(cur, f"SELECT * FROM postgres_query('{LOCKS_ALIAS}', "
                        "'SELECT max(snapshot_id) FROM ducklake_snapshot')").fetchall()[0][0]


def table_names(cur: duckdb.DuckDBPyConnection) -> dict[int, str]:
    """The lake's current tables by id, from its PostgreSQL catalog directly (see `snapshot_id`)."""
    rows = execute(cur, f"SELECT * FROM postgres_query('{LOCKS_ALIAS}', "
                        "'SELECT table_id, table_name FROM ducklake_table WHERE end_snapshot IS NULL')").fetchall()
    return dict(rows)


def look(cur: duckdb.DuckDBPyConnection, after: int | None) -> tuple[int | None, list[tuple] | None]:
    """The lake's latest snapshot and, when `after` is given, DuckLake's log of what each snapshot after it did up
    to that one (as `snapshot_log`), in one catalog query: a page's first read after a commit would otherwise ask
    twice, one round trip of 5-10 ms after the other while the process is busy."""
    if after is None:
        return snapshot_id(cur), None
    # the latest snapshot is the row without a change: each logged one has some ('' at least)
    rows = execute(cur, f"SELECT * FROM postgres_query('{LOCKS_ALIAS}', 'SELECT max(snapshot_id), NULL "
                        "FROM ducklake_snapshot UNION ALL SELECT snapshot_id, coalesce(changes_made, '''') "
                        f"FROM ducklake_snapshot_changes WHERE snapshot_id > {int(after)}')").fetchall()
    latest = next(snapshot for snapshot, made in rows if made is None)
    # one statement reads one state of the catalog: the log holds no snapshot after `latest`
    return latest, [(snapshot, made) for snapshot, made in rows if made is not None]


def snapshot_log(cur: duckdb.DuckDBPyConnection, after: int, upto: int) -> list[tuple]:
    """DuckLake's log of what each snapshot after `after` up to `upto` did: (snapshot_id, changes_made) rows."""
    return execute(cur, f"SELECT * FROM postgres_query('{LOCKS_ALIAS}', 'SELECT snapshot_id, changes_made "
                        f"FROM ducklake_snapshot_changes WHERE snapshot_id > {int(after)} "
                        f"AND snapshot_id <= {int(upto)}')").fetchall()


def changed_tables(log: list[tuple], after: int, upto: int, names: dict[int, str]) -> set[str] | None:
    """The names of the tables (`names`: table_names) whose rows the snapshots after `after` up to `upto` changed,
    from their `log` (snapshot_log); None when one did anything else (a table made, dropped or altered: what any
    statement reads may differ) or the log lacks a snapshot (expired)."""
    if len(log) != upto - after:
        return None
    changed: set[str] = set()
    for _, made in log:
        made = made or ""
        changes = list(CHANGE.finditer(made))
        if sum(len(change[0]) for change in changes) != len(made):  # a change of a shape not known here
            return None
        for change in changes:
            kind, value = change[1], change[2]
            if kind not in ROW_CHANGES or not value.isdigit() or int(value) not in names:
                return None
            changed.add(names[int(value)])
    return changed


def make_deletion_tables(conn: duckdb.DuckDBPyConnection) -> None:
    """The empty inlined-deletion table of each of the lake's tables that has none (see DELETION_TABLES); on a
    PostgreSQL catalog only, by whoever holds the schema's lock."""
    cur = conn.cursor()  # in the in-memory catalog: no lake transaction
    try:
        execute(cur, f"CALL postgres_execute('{LOCKS_ALIAS}', '{DELETION_TABLES}')")
    finally:
        cur.close()


def set_inlining(cur: duckdb.DuckDBPyConnection) -> None:
    """Set the lake's INLINED_ROWS (an option DuckLake keeps in the catalog), in a write."""
    for table, rows in INLINED_ROWS.items():  # constants
        execute(cur, f"CALL ducklake_set_option('{LAKE_ALIAS}', 'data_inlining_row_limit', {int(rows)}, "
                     f"table_name => '{table}')")


def use_lake(cur: duckdb.DuckDBPyConnection) -> None:
    """Make the lake the default catalog of a cursor (each cursor has its own)."""
    execute(cur, f"USE {LAKE_ALIAS}")


def is_commit_conflict(exc: duckdb.Error) -> bool:
    """A commit refused because another client committed a conflicting change first: retrying may succeed."""
    return "Failed to commit DuckLake transaction" in str(exc)


def shown(db: str) -> str:
    """The store as answers and messages name it: a lake URL without its password."""
    return LIBPQ_PASSWORD.sub(r"\1***", str(db))
