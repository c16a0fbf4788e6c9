"""Moving a store between a DuckDB file and a DuckLake (issue 16): what `orchestrace migrate-store` does.

Both stores have one schema (migrations/) and their ids are made by the app, so a move is, per table, one
`INSERT INTO t (columns) SELECT columns FROM source.t` that DuckDB runs itself, with the source attached
read-only to the target's connection. Every table goes in one transaction on the target: all rows with
their ids, or none. `schema_migrations` is not copied: migrating the target fills it.
"""

from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from app.store import lake
from app.store.db import Database

SOURCE = "migrate_source"  # the source's name in the target's connection
OWN_TABLES = ("schema_migrations",)  # filled by each store's own migrations


class TransferError(Exception):
    """A move refused (nothing written to the target) or rolled back; the message says why."""


@dataclass
class Transfer:
    """What a move did: rows per table (counted on the target after the commit, equal to the source's)."""

    migration: str
    rows: dict[str, int]
    source_migrations: list[str] = field(default_factory=list)  # applied to the source to bring it up to date


def move_store(source: str, target: str, lake_data: str | None, migrations_dir: Path) -> Transfer:
    """Copy every table and row of the store `source` into the empty store `target`; exactly one of the two is
    a DuckLake URL, whose Parquet data is in `lake_data`. The source is migrated first (a file must not be
    held by a running server), and so is the target; a target holding any row is refused."""
    if lake.is_lake_url(source) == lake.is_lake_url(target):
        raise TransferError("one of the two stores must be a DuckLake (ducklake:postgres:<libpq connection "
                            "string>) and the other a DuckDB file; to copy a file, use `orchestrace backup`")
    if not lake.is_lake_url(source) and not Path(source).is_file():
        raise TransferError(f"no database at {source}")
    into = _open(target, lake_data)
    try:
        _refuse_filled(into, target)
        applied = _migrate_source(source, lake_data, migrations_dir)
        into.migrate(migrations_dir)
        _attach(into, source, lake_data)
        try:
            return Transfer(_check_same_schema(into, source), _copy(into, source), applied)
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
    filled = {table: n for table in _tables(db, catalog) if (n := db.scalar(f"SELECT count(*) FROM {catalog}.{table}"))}
    if filled:
        held = ", ".join(f"{n} {table}" for table, n in filled.items())
        raise TransferError(f"{lake.shown(name)} is not empty ({held}); nothing was copied. Move into a new, "
                            "empty store (for a lake: a new PostgreSQL database and an empty data folder)")


def _migrate_source(source: str, lake_data: str | None, migrations_dir: Path) -> list[str]:
    """Bring the source up to date with the migrations (the names applied); refuse one that is not a store."""
    db = _open(source, lake_data)
    try:
        if "schema_migrations" not in _tables(db, _catalog(db), own=True):
            raise TransferError(f"{lake.shown(source)} is not an Orchestrace database (it has no schema_migrations)")
        return db.migrate(migrations_dir)
    finally:
        db.close()


def _attach(db: Database, source: str, lake_data: str | None) -> None:
    """Attach the source read-only beside the target (ATTACH takes no bound parameters: quotes are doubled)."""
    quoted = source.replace("'", "''")
    if lake.is_lake_url(source):
        lake.load_extensions(db.cursor())
        quoted_data = (lake_data or "").replace("'", "''")
        db.execute(f"ATTACH '{quoted}' AS {SOURCE} (DATA_PATH '{quoted_data}', READ_ONLY)")
    else:
        db.execute(f"ATTACH '{quoted}' AS {SOURCE} (READ_ONLY)")


def _catalog(db: Database) -> str:
    """The name that qualifies the store's own tables in its connection, quoted (a file's is its stem)."""
    return '"' + db.scalar("SELECT current_database()").replace('"', '""') + '"'


def _tables(db: Database, catalog: str, own: bool = False) -> list[str]:
    """The tables of `catalog`, without OWN_TABLES unless `own`."""
    names = [row["table_name"] for row in db.fetchall(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' "
        "ORDER BY table_name", [_unquoted(catalog)])]
    return names if own else [name for name in names if name not in OWN_TABLES]


def _columns(db: Database, catalog: str, table: str) -> list[str]:
    return [row["column_name"] for row in db.fetchall(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? AND schema_name = 'main' "
        "AND table_name = ? ORDER BY column_index", [_unquoted(catalog), table])]


def _unquoted(catalog: str) -> str:
    return catalog[1:-1].replace('""', '"')


def _check_same_schema(db: Database, source: str) -> str:
    """The migration both stores are at; TransferError when their migrations, tables or columns differ (a
    source written by a newer version of the app)."""
    target, source_catalog = _catalog(db), f'"{SOURCE}"'
    have, want = (db.fetchall(f"SELECT version, name FROM {catalog}.main.schema_migrations ORDER BY version")
                  for catalog in (source_catalog, target))
    if have != want:
        raise TransferError(f"{lake.shown(source)} is at migration {have[-1]['name']}, this version of Orchestrace "
                            f"at {want[-1]['name']}: move it with the version that wrote it")
    tables = _tables(db, source_catalog)
    if tables != _tables(db, target):
        raise TransferError(f"{lake.shown(source)} and the target have different tables")
    for table in tables:
        if sorted(_columns(db, source_catalog, table)) != sorted(_columns(db, target, table)):
            raise TransferError(f"the table {table} has different columns in {lake.shown(source)} and the target")
    return want[-1]["name"]


def _copy(db: Database, source: str) -> dict[str, int]:
    """Every table's rows, by column name, in one transaction; rows per table, checked against the source's
    inside the transaction (a difference rolls it back) and again once committed."""
    target, source_catalog = _catalog(db), f'"{SOURCE}"'
    tables = _tables(db, source_catalog)
    columns_of = {table: ", ".join(f'"{name}"' for name in _columns(db, target, table)) for table in tables}
    with db.transaction() as cur:
        for table, columns in columns_of.items():
            cur.execute(f"INSERT INTO {target}.main.{table} ({columns}) "
                        f"SELECT {columns} FROM {source_catalog}.main.{table}")
        _check_counts(cur, tables, target, source_catalog, source)
    cur = db.cursor()
    try:
        return _check_counts(cur, tables, target, source_catalog, source)
    finally:
        cur.close()


def _check_counts(cur, tables: list[str], target: str, source_catalog: str, source: str) -> dict[str, int]:
    counts = {}
    for table in tables:
        have, want = (cur.execute(f"SELECT count(*) FROM {catalog}.main.{table}").fetchone()[0]
                      for catalog in (target, source_catalog))
        if have != want:
            raise TransferError(f"the copy of {table} holds {have} rows, {lake.shown(source)} {want}")
        counts[table] = have
    return counts
