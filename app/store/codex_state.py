"""Codex's state database (`$CODEX_HOME/state_<n>.sqlite`), read through the standard library's sqlite3: the one
database the app reads besides its store, so its SQL lives here with the rest. Read-only; sqlite3.Error is left to
the importer (app/ingest/importers/codex.py), which names the file."""

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

Error = sqlite3.Error
WAL_MODE = b"\x02\x02"  # header bytes 18-19 of a database in write-ahead-log mode
ROLLBACK_MODE = b"\x01\x01"


def serialized(path: Path) -> bytes:
    """The database at `path` as the bytes of one file, its write-ahead log folded in (Codex keeps it in WAL mode,
    so the main file alone can miss the latest spawn edges)."""
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as source, \
            closing(sqlite3.connect(":memory:")) as copy:
        source.backup(copy)
        return copy.serialize()


def opens(path: Path) -> bool:
    """Whether the file at `path` opens read-only as a database (else its bytes are read instead: see `opened`)."""
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return True
    except sqlite3.Error:
        return False


@contextmanager
def opened(db: Path | bytes) -> Iterator[sqlite3.Connection]:
    """A connection to the database at a path (read-only) or in bytes (a WAL-mode file read as a rollback-journal
    one: its log is not in the bytes), closed after."""
    if isinstance(db, Path):
        connection = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)
    else:
        data = db[:18] + ROLLBACK_MODE + db[20:] if db[18:20] == WAL_MODE else db
        connection = sqlite3.connect(":memory:")
        try:
            connection.deserialize(data)
        except BaseException:
            connection.close()
            raise
    with closing(connection):
        connection.row_factory = sqlite3.Row
        yield connection


def tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def spawn_edges(connection: sqlite3.Connection) -> Iterator[tuple]:
    """(parent thread, child thread) of each row of thread_spawn_edges."""
    for row in connection.execute("SELECT parent_thread_id, child_thread_id FROM thread_spawn_edges"):
        yield row[0], row[1]


def threads(connection: sqlite3.Connection) -> Iterator[dict]:
    """Every row of `threads`, whatever its columns (they change with Codex's versions)."""
    for row in connection.execute("SELECT * FROM threads"):
        yield dict(row)
