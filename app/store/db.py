"""The embedded DuckDB database: one connection per process, a cursor per call or ORM session, migrations.

All SQL passes through `Database.execute`, which logs each statement with its time.
"""

import logging
import re
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import duckdb_engine
from sqlalchemy import Engine
from sqlalchemy.pool import NullPool
from sqlmodel import create_engine

log = logging.getLogger("orchestrace.sql")

MIGRATION_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")


def utc_now() -> datetime:
    """Now in UTC, naive: how every TIMESTAMP column of this database is written."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def iso_utc(stamp: datetime) -> str:
    """A stored TIMESTAMP as ISO 8601 with its time zone (UTC, "Z"), as every answer and export writes it."""
    return stamp.isoformat() + "Z"


def stored_utc(text: str) -> datetime:
    """ISO 8601 text (any offset; none means UTC) as a stored TIMESTAMP: naive UTC."""
    stamp = datetime.fromisoformat(text)
    return stamp.astimezone(timezone.utc).replace(tzinfo=None) if stamp.tzinfo else stamp


class MigrationsMissing(RuntimeError):
    """The migrations folder is missing or holds no migration: the schema cannot be made."""


class DatabaseLocked(RuntimeError):
    """Another process (usually a running `orchestrace serve`) holds the DuckDB file."""


class Database:
    """A DuckDB file opened once; each caller works on its own cursor, writers take `write_lock`."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = duckdb.connect(str(path))
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise DatabaseLocked(
                    f"{self.path} is in use by another process (is `orchestrace serve` running?): {exc}"
                ) from exc
            raise
        # DuckDB takes one writer at a time; serialising our own writers turns conflicts into waits.
        self.write_lock = threading.Lock()
        # The ORM's engine over this same database. A DuckDB cursor serves one call at a time, so every
        # session gets a cursor of its own, closed when the session ends (closing it ends its transaction, so
        # no reset is needed). A cursor costs about 10 us; a pool would have to be as large as the server's
        # thread pool, and the ":memory:" URL's default pool (5 per-thread connections) closes the connections
        # of other threads while they are in use.
        self.engine: Engine = create_engine(
            "duckdb:///:memory:", creator=lambda: duckdb_engine.ConnectionWrapper(self.cursor()),
            poolclass=NullPool, pool_reset_on_return=None,
        )

    def close(self) -> None:
        self.engine.dispose()
        self._conn.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self._conn.cursor()

    def execute(self, sql: str, params=None, cur: duckdb.DuckDBPyConnection | None = None):
        """Run one statement with bound parameters on `cur` (or a fresh cursor) and log its time."""
        cur = cur or self.cursor()
        start = time.perf_counter()
        result = cur.execute(sql, params) if params is not None else cur.execute(sql)
        log.debug("%.1f ms  %s  %r", (time.perf_counter() - start) * 1000, " ".join(sql.split()), params)
        return result

    def fetchall(self, sql: str, params=None) -> list[dict]:
        """Rows of a query as dicts keyed by column name."""
        cur = self.execute(sql, params)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]

    def fetchone(self, sql: str, params=None) -> dict | None:
        rows = self.fetchall(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params=None):
        row = self.execute(sql, params).fetchone()
        return row[0] if row else None

    @contextmanager
    def transaction(self):
        """A cursor inside one write transaction: committed whole or rolled back whole."""
        with self.write_lock:
            cur = self.cursor()
            cur.execute("BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    def migrate(self, migrations_dir: Path) -> list[str]:
        """Apply the numbered migrations not yet recorded in schema_migrations; return their names."""
        files = sorted(path for path in migrations_dir.glob("*.sql") if MIGRATION_NAME.match(path.name))
        if not files:
            raise MigrationsMissing(f"no migrations in {migrations_dir} (numbered NNNN_name.sql files): "
                                    "the database schema cannot be made; is the package installed whole?")
        self.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER NOT NULL, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
        )
        done = {row["version"] for row in self.fetchall("SELECT version FROM schema_migrations")}
        applied = []
        for path in files:
            match = MIGRATION_NAME.match(path.name)
            if int(match.group(1)) in done:
                continue
            with self.transaction() as cur:
                cur.execute(path.read_text())
                cur.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, now())", [int(match.group(1)), path.name]
                )
            applied.append(path.name)
        return applied
