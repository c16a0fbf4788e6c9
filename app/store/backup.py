"""Backups of the DuckDB file taken while the app runs, and restores of them.

A backup is a byte copy of the file made right after a CHECKPOINT, under the write lock: the file then holds
every committed write and no writer can change it until the copy ends. Readers never wait; writers wait for
the copy only (measured: 0.1 s for a 130 MB file, 0.3 to 0.5 s for 500 MB), where DuckDB's `COPY FROM DATABASE`
re-encodes every row (9 s for 130 MB alone, 35 s for 500 MB while a reviewer saves labels). The copy is the
database as it is, so it carries every table, `schema_migrations` with them.

Backups go to one folder (ORCHESTRACE_BACKUP_DIR, by default `backups` beside the database file): a relative
name is written there, and the server writes nowhere else, so an admin's request cannot put a file wherever the
server may write. A backup never goes onto the database file or its write-ahead log, even with force, and is
readable by its owner only (0600): it holds password and token hashes and the key that signs sessions.
"""

import os
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import suppress
from pathlib import Path

import duckdb

from app.store.db import Database, DatabaseLocked

CHECKPOINT_PATIENCE_S = 10.0
CHECKPOINT_RETRY_S = 0.05
COUNTED_TABLES = ("traces", "annotations", "papers")  # named in the messages, so a user sees what was kept
BACKUP_MODE = 0o600
FOLDER_MODE = 0o700
DEFAULT_FOLDER = "backups"  # beside the database file, unless ORCHESTRACE_BACKUP_DIR names another


class BackupError(Exception):
    """A backup or restore refused, with the reason in words; `status` is the HTTP code for the API."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


def folder_of(configured: Path | None, db_path: Path) -> Path:
    """The backup folder: the configured one, else `backups` beside the database file."""
    return Path(configured if configured is not None else Path(db_path).parent / DEFAULT_FOLDER).absolute()


def backup(db: Database, asked: str | Path, force: bool = False, folder: Path | None = None,
           anywhere: bool = False) -> dict:
    """Write a consistent copy of `db` to the file `asked` names; what was written. A relative name is a file in
    `folder` (made if missing), and an absolute path must be inside it too, unless `anywhere` (the command line
    copying a file it holds itself). The copy is made beside the target and renamed when complete, so an
    interrupted backup never leaves a partial file under the name asked for."""
    if db.is_lake:
        raise BackupError("a DuckLake store is not one file: back up its PostgreSQL catalog (pg_dump) and its data "
                          "folder instead")
    target = _target(str(asked), folder, anywhere)
    for kept, what in ((db.path, "the database itself"), (Path(f"{db.path}.wal"), "the database's write-ahead log")):
        if _same_file(target, kept):
            raise BackupError(f"{target} is {what}; name another file (not even --force writes over it)")
    if target.is_dir():
        raise BackupError(f"{target} is a folder; name a file in it")
    if target.exists() and not force:
        raise BackupError(f"{target} already exists; pass --force to replace it", status=409)
    if folder is not None and target.parent == folder:
        try:
            folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        except OSError as exc:
            raise BackupError(f"cannot make the backup folder {folder}: {exc.strerror or exc}") from exc
    if not target.parent.is_dir():
        raise BackupError(f"{target.parent} is not a folder")
    partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.partial")
    start = time.perf_counter()
    try:
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, BACKUP_MODE))  # the copy keeps its mode
        locked_s = _copy_checkpointed(db, partial)
        os.chmod(partial, BACKUP_MODE)  # exactly 0600, whatever the umask took off
        os.replace(partial, target)
    except OSError as exc:
        raise BackupError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        with suppress(FileNotFoundError):
            partial.unlink()
    return {"path": str(target), **_describe(target),
            "seconds": round(time.perf_counter() - start, 3), "writes_paused_s": round(locked_s, 3)}


def _target(asked: str, folder: Path | None, anywhere: bool) -> Path:
    """The file a backup asked for as `asked` goes to; BackupError naming what is wrong with the path."""
    if not asked.strip():
        raise BackupError("the path is empty: name a file")
    if "\x00" in asked:
        raise BackupError(f"the path {asked!r} holds a NUL character (\\x00): name a file without one")
    control = next((c for c in asked if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if control is not None:
        raise BackupError(f"the path {asked!r} holds the control character U+{ord(control):04X}: name a file "
                          "without one")
    try:
        asked.encode("utf-8")
    except UnicodeEncodeError:
        raise BackupError(f"the path {asked!r} is not valid text (it holds a lone surrogate)") from None
    if asked.endswith(("/", os.sep)):
        raise BackupError(f"{asked} names a folder; name a file in it")
    path = Path(asked)
    if folder is None:
        return path
    target = path if path.is_absolute() else folder / path
    try:
        outside = target.resolve() == folder.resolve() or not target.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError) as exc:  # a symlink loop, a name too long
        raise BackupError(f"{asked} cannot be a backup's path: {exc}") from exc
    if outside and not anywhere:
        raise BackupError(f"{asked} is outside the backup folder {folder}: the server writes backups only there "
                          "(ORCHESTRACE_BACKUP_DIR); give a file name, or a path inside it")
    return target


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (a link or another spelling of it too)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except (OSError, RuntimeError):
        return False


def _copy_checkpointed(db: Database, partial: Path) -> float:
    """Copy the file right after a checkpoint, under the write lock; the seconds writers waited. CHECKPOINT
    fails while a transaction older than a committed catalog change runs (and FORCE CHECKPOINT aborts that
    transaction before DuckDB 1.4), so it is retried, letting writers go in between."""
    deadline = time.monotonic() + CHECKPOINT_PATIENCE_S
    while True:
        with db.write_lock:
            locked = time.perf_counter()
            try:
                db.execute("CHECKPOINT")
            except duckdb.TransactionException as exc:
                if time.monotonic() > deadline:
                    raise BackupError(f"the database stayed busy for {CHECKPOINT_PATIENCE_S:.0f} s ({exc}); "
                                      "try again", status=503) from exc
            else:
                before = _stamp(db.path)
                _copy_in_child(db.path, partial)
                if _stamp(db.path) != before:  # a writer that skipped the lock made DuckDB checkpoint
                    raise BackupError("the database file changed during the copy; try again", status=503)
                return time.perf_counter() - locked
        time.sleep(CHECKPOINT_RETRY_S)


def _copy_in_child(source: Path, target: Path) -> None:
    """Copy in another process: DuckDB locks the file with fcntl, and POSIX drops a process's lock when that
    process closes any descriptor of the file, so copying here would let a second process open the database."""
    done = subprocess.run([sys.executable, "-c", "import shutil, sys; shutil.copyfile(sys.argv[1], sys.argv[2])",
                           str(source), str(target)], capture_output=True, text=True)
    if done.returncode:
        raise OSError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "the copy failed")


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _describe(path: Path, name: Path | None = None) -> dict:
    """Size, migration level and main row counts of a database file (`name` in messages); BackupError if it
    is not an Orchestrace database."""
    name = name or path
    try:
        db = Database(path)
    except duckdb.Error as exc:
        raise BackupError(f"{name} is not a DuckDB database: {exc}") from exc
    try:
        tables = {row["table_name"] for row in db.fetchall("SELECT table_name FROM duckdb_tables()")}
        if "schema_migrations" not in tables:
            raise BackupError(f"{name} has no schema_migrations table: it is not an Orchestrace database")
        migration = db.scalar("SELECT name FROM schema_migrations ORDER BY version DESC LIMIT 1")
        counts = {t: db.scalar(f"SELECT count(*) FROM {t}") for t in COUNTED_TABLES if t in tables}
    finally:
        db.close()
    return {"bytes": path.stat().st_size, "migration": migration, "rows": counts}


def restore(source: Path, target: Path, force: bool = False) -> dict:
    """Make the backup `source` the database file `target`, keeping the file replaced as TARGET.before-restore.
    The backup is copied beside `target` and checked there before the rename, so `target` is never a
    half-written or foreign file."""
    source, target = Path(source), Path(target)
    kept = target.with_name(target.name + ".before-restore")
    if not source.is_file():
        raise BackupError(f"{source}: no such file")
    if target.exists():
        try:
            Database(target).close()  # also folds a leftover write-ahead log into the file being kept
        except DatabaseLocked as exc:
            raise BackupError(f"{target} is held by a running process (is `orchestrace serve` running?); "
                              "stop it, restore, then start it again") from exc
        if not force:
            raise BackupError(f"{target} already exists; pass --force to replace it (it is kept as {kept})")
        if kept.exists():
            raise BackupError(f"{kept} already exists (from an earlier restore); move it away first")
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_name(f".{target.name}.{uuid.uuid4().hex}.restoring")
    try:
        shutil.copyfile(source, staged)
        if Path(f"{source}.wal").exists():  # a file copied from a live database: its log holds recent writes
            shutil.copyfile(f"{source}.wal", f"{staged}.wal")
        described = _describe(staged, source)  # opening folds that log into the staged copy
        replaced = target.exists()
        if replaced:
            os.replace(target, kept)
        os.replace(staged, target)
    finally:
        for leftover in (staged, Path(f"{staged}.wal")):
            with suppress(FileNotFoundError):
                leftover.unlink()
    return {"path": str(target), "source": str(source), "kept": str(kept) if replaced else None, **described}
