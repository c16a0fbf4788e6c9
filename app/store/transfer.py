"""Moving a store between a DuckDB file and a DuckLake (issue 16): what `orchestrace migrate-store` does.

Both stores have one schema (migrations/) and their ids are made by the app, so a move is, per table, one
`INSERT INTO t (columns) SELECT columns FROM source.t` that DuckDB runs itself, with the source attached
read-only to the target's connection. Every table goes in one transaction on the target: all rows with
their ids, or none. `schema_migrations` is not copied: migrating the target fills it.
"""

from dataclasses import dataclass
from pathlib import Path

import duckdb

from app.store import lake
from app.store.db import Database
from app.store.sql import execute

SOURCE = "migrate_source"  # the source's name in the target's connection
OWN_TABLES = ("schema_migrations",)  # filled by each store's own migrations


class TransferError(Exception):
    """A move refused (nothing written to the target) or rolled back; the message says why."""


@dataclass
class Transfer:
    """What a move did: rows per table (counted on the target after the commit, equal to the source's)."""

    migration: str
    rows: dict[str, int]
    applied_to_source: list[str]  # the migrations that brought the source up to date


def move_store(source: str, target: str, lake_data: str | None, migrations_dir: Path) -> Transfer:
    """Copy every table and row of the store `source` into the empty store `target`; exactly one of the two is
    a DuckLake URL, whose Parquet data is in `lake_data`. Both are migrated first (a file must not be held by a
    running server: DatabaseLocked); a target holding any row is refused before anything is written."""
    if lake.is_lake_url(source) == lake.is_lake_url(target):
        raise TransferError("one of the two stores must be a DuckLake (ducklake:postgres:<libpq connection "
                            "string>) and the other a DuckDB file; to copy a file, use `orchestrace backup`")
    if not lake.is_lake_url(source) and not Path(source).is_file():
        raise TransferError(f"no database at {source}")
    origin = _open(source, lake_data)
    try:
        if "schema_migrations" not in _schema(origin, _catalog(origin)):
            raise TransferError(f"{lake.shown(source)} is not an Orchestrace database (it has no schema_migrations)")
        into = _open(target, lake_data)
    except BaseException:
        origin.close()
        raise
    try:
        try:
            _refuse_filled(into, target)
            applied = origin.migrate(migrations_dir)
        finally:
            origin.close()  # before it is attached read-only below
        into.migrate(migrations_dir)
        _attach(into, source, lake_data)
        try:
            migration = _check_same_schema(into, source)
            return Transfer(migration, _copy(into, source), applied)
        finally:
            into.execute(f"DETACH {SOURCE}")
    finally:
        into.close()


def _open(store: str, lake_data: str | None) -> Database:
    try:
        return Database(store, lake_data)
    except duckdb.Error as exc:  # a lake's catalog that cannot be reached; DatabaseLocked passes on
        raise TransferError(f"cannot open {lake.shown(store)}: {lake.shown(str(exc))}") from exc


def _refuse_filled(db: Database, name: str) -> None:
    """Refuse a target that holds rows: a move would mix two stores' traces, labels, users and signing keys."""
    catalog = _catalog(db)
    tables = [table for table in _schema(db, catalog) if table not in OWN_TABLES]
    filled = {table: n for table, n in _counts(db.execute, catalog, tables).items() if n}
    if filled:
        held = ", ".join(f"{n} {table}" for table, n in filled.items())
        raise TransferError(f"{lake.shown(name)} is not empty ({held}); nothing was copied. Move into a new, "
                            "empty store (for a lake: a new PostgreSQL database and an empty data folder)")


def _attach(db: Database, source: str, lake_data: str | None) -> None:
    """Attach the source read-only beside the target (ATTACH takes no bound parameters: quotes are doubled)."""
    quoted = source.replace("'", "''")
    if lake.is_lake_url(source):
        with db.cursor() as cur:
            lake.load_extensions(cur)
        quoted_data = (lake_data or "").replace("'", "''")
        db.execute(f"ATTACH '{quoted}' AS {SOURCE} (DATA_PATH '{quoted_data}', READ_ONLY)")
    else:
        db.execute(f"ATTACH '{quoted}' AS {SOURCE} (READ_ONLY)")


def _catalog(db: Database) -> str:
    """The name of the store's own catalog in its connection (a file's is its stem, a lake's `lake`)."""
    return db.scalar("SELECT current_database()")


def _schema(db: Database, catalog: str) -> dict[str, list[str]]:
    """The tables of `catalog` with their columns in order, by table name; one query (on a lake, each query
    asks PostgreSQL)."""
    tables: dict[str, list[str]] = {}
    for row in db.fetchall("SELECT table_name, column_name FROM duckdb_columns() WHERE database_name = ? "
                           "AND schema_name = 'main' ORDER BY table_name, column_index", [catalog]):
        tables.setdefault(row["table_name"], []).append(row["column_name"])
    return tables


def _counts(execute, catalog: str, tables: list[str]) -> dict[str, int]:
    """Rows per table of `catalog`, in one query run by `execute`."""
    if not tables:
        return {}
    union = " UNION ALL ".join(f"SELECT {i}, count(*) FROM {_name(catalog, table)}"
                               for i, table in enumerate(tables))
    return {tables[i]: n for i, n in execute(union).fetchall()}


def _name(catalog: str, table: str) -> str:
    return f'"{catalog}".main."{table}"'


def _check_same_schema(db: Database, source: str) -> str:
    """The migration both stores are at; TransferError when their migrations, tables or columns differ (a
    source written by another version of the app)."""
    target = _catalog(db)
    have, want = (db.fetchall(f"SELECT version, name FROM {_name(catalog, 'schema_migrations')} ORDER BY version")
                  for catalog in (SOURCE, target))
    if have != want:
        raise TransferError(f"{lake.shown(source)} is at migration {have[-1]['name']}, this version of Orchestrace "
                            f"at {want[-1]['name']}: move it with the version that wrote it")
    theirs, ours = _schema(db, SOURCE), _schema(db, target)
    differ = sorted(t for t in theirs.keys() | ours.keys() if sorted(theirs.get(t, [])) != sorted(ours.get(t, [])))
    if differ:
        raise TransferError(f"the tables {', '.join(differ)} differ between {lake.shown(source)} and the target")
    return want[-1]["name"]


def _copy(db: Database, source: str) -> dict[str, int]:
    """Every table's rows, by column name, in one transaction; rows per table, checked against the source's
    inside the transaction (a difference rolls it back) and again once committed."""
    target = _catalog(db)
    columns = {table: names for table, names in _schema(db, target).items() if table not in OWN_TABLES}
    tables = list(columns)
    with db.transaction() as cur:
        for table, names in columns.items():
            listed = ", ".join(f'"{name}"' for name in names)
            execute(cur, f"INSERT INTO {_name(target, table)} ({listed}) SELECT {listed} FROM {_name(SOURCE, table)}")
        _check_counts(cur.execute, target, tables, source)
    return _check_counts(db.execute, target, tables, source)


def _check_counts(execute, target: str, tables: list[str], source: str) -> dict[str, int]:
    """Rows per table of the target; TransferError when a table's count differs from the source's."""
    have, want = (_counts(execute, catalog, tables) for catalog in (target, SOURCE))
    for table in tables:
        if have[table] != want[table]:
            raise TransferError(f"the copy of {table} holds {have[table]} rows, {lake.shown(source)} {want[table]}")
    return have
