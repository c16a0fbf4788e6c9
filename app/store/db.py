"""The database: one connection per process, a cursor per call or ORM session, migrations.

The store is an embedded DuckDB file or, for several app instances at once, a DuckLake (app/store/lake.py): a
catalog in PostgreSQL with Parquet data in a shared folder, attached to an in-memory DuckDB.

Every write goes through `Database.write`: one transaction, run again when its lake commit loses to another
instance's, holding locks on what it keeps unique (a trace id, a reviewer's label versions). Within a process
`write_lock` serialises writers; across the instances on a lake, PostgreSQL advisory locks do (lake.held).

All SQL passes through `execute` (or `Database.execute`, which calls it): the one place that runs a statement,
logs it with its time (ORCHESTRACE_TRACE_SQL logs every one) and adds it to the trace of the request that ran it,
when that request asked for one (`traced_statements`). Store modules by resource hold the literal SQL.
"""

import contextvars
import copy
import importlib.util
import os
import random
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from app.store import lake
from app.store.keys import natural_id
from app.store.sql import execute, log


def _mark_pandas_absent() -> None:
    """DuckDB 1.5.5 tries `import pandas` about four times for every statement with parameters; without pandas
    installed each try searched sys.path again (~1 ms a statement, 0.25 s of a 20,000-span live trace's
    batches). Marked absent (None in sys.modules, which `import` and importlib.util.find_spec both read as not
    installed), each try fails at once. An installed pandas is left alone. With numpy installed, pyarrow looks for
    pandas once, by a Cython import that would take that None for the module itself and fail every pa.array():
    it looks first, and finds none."""
    if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
        pa.array([])
        sys.modules["pandas"] = None


_mark_pandas_absent()

MIGRATION_NAME = re.compile(r"^(\d{4})_[\w-]+\.sql$")
COMMIT_TRIES = 6  # a write that loses to other instances' commits this often in a row gives up
COMMIT_BACKOFF_S = 0.02  # first pause before a retry, doubled each time, with jitter so instances do not collide again
T = TypeVar("T")
SCHEMA_LOCK = ("schema",)  # held by whoever migrates a lake
# A file's write-ahead log is folded into the file (a checkpoint) by a thread of its own: once it passes
# CHECKPOINT_WAL_BYTES (DuckDB's own threshold) and no write has committed for CHECKPOINT_QUIET_S, or at once past
# CHECKPOINT_FORCE_BYTES, should writes never pause. DuckDB would fold it inside the commit that passed the
# threshold, making that writer wait (0.1-0.4 s at 16 MB); a writer now waits only when it meets the thread at
# work. Past WAL_LIMIT DuckDB still folds it itself.
CHECKPOINT_WAL_BYTES = 16 * 1024**2
CHECKPOINT_FORCE_BYTES = 64 * 1024**2
CHECKPOINT_QUIET_S = 1.0
CHECKPOINT_RETRY_S = 5.0
WAL_LIMIT = "256MB"
# A file's tables are stored in row groups of this many rows (DuckDB's default is 122,880). An insert of at least a
# row group's rows is written compressed to the file by its own transaction (DuckDB's optimistic writes), not to the
# log, and a checkpoint re-compresses the last, partial row group of each table it folds: at the default size, up to
# 122,880 rows of events and of edges each time. Ten requests of 1,000 rollouts each (37,000 events, 63,000 edges),
# each followed by a checkpoint: checkpoints of 0.3 to 1.6 s (8.7 s in all, holding `write_lock`, so a label save
# meanwhile waited) at the default, 0.08 to 0.41 s (2.5 s) at this size, the file no larger (38 MB against 45) and
# scans no slower. A multiple of DuckDB's vector of 2,048 rows.
ROW_GROUP_ROWS = 16_384
# A lake keeps the rows of a small insert (up to DuckLake's data_inlining_row_limit, 10 rows) in its PostgreSQL
# catalog, and every scan of a table copies all of that table's such rows from there, unfiltered: after 100,000
# label saves each save's read of the annotations would copy 100,000 rows. Once FLUSH_COMMITS commits were made by
# this instance and none for CHECKPOINT_QUIET_S (or at once past FLUSH_FORCE_COMMITS), a thread of its own moves
# them into Parquet files (ducklake_flush_inlined_data), as the checkpointer folds a file's log.
FLUSH_COMMITS = 200
FLUSH_FORCE_COMMITS = 2_000
# Reads of a lake shared through PostgreSQL are kept by statement, parameters and the catalog snapshot they read
# (see Database._rows): at most SNAPSHOT_READS, each of at most SNAPSHOT_READ_ROWS rows. When the lake's snapshot
# moves, only the reads of the tables its commits changed are dropped (lake.changed_tables): a label save leaves
# the corpus pages' reads of the traces kept. A statement calling a function whose result changes with the moment
# is never kept, nor any read while another database is attached (its state is not the lake's).
SNAPSHOT_READS = 256
SNAPSHOT_READ_ROWS = 1_000
# Threads a lake's `together` runs reads on besides the caller's: a page's independent reads at a new snapshot each
# wait on DuckLake's catalog round trips (~15-30 ms a table), which overlap on threads as they do not one by one.
TOGETHER_THREADS = 3
# On a lake that several instances may write, how often an instance asks the catalog for its latest snapshot, so that
# work registered with `when_writes_pause` (the corpus pages' facts) is done after other instances' commits too: a
# round trip of about 1 ms once a second, where a page first viewed after another instance's ingest would otherwise
# build those facts while its user waits.
LAKE_WATCH_S = 1.0
# Within `one_look` (a web request), a lake's latest snapshot is asked once per Database: the request's reads are
# answered as of that look, and asked again after the request's own commit. A look is a PostgreSQL round trip of
# 1 ms idle and 10-25 ms while the process is busy (a page made 4-5, which were most of its time on a lake). A
# commit outside any request (a build, an analysis stored) brings the kept reads up to it itself (`_committed`):
# a page viewed meanwhile neither looks again (right after an ingest, its background commits cost the trace list a
# second look) nor reads the rows of a write it waited for from before it.
_looks: ContextVar[dict | None] = ContextVar("lake_looks", default=None)
READ_SQL = re.compile(r"\s*(SELECT|WITH|FROM)\b", re.IGNORECASE)
ATTACHING = re.compile(r"\s*(ATTACH|DETACH)\b", re.IGNORECASE)
VOLATILE_SQL = re.compile(r"\b(now|current_timestamp|current_date|current_time|today|get_current_time|random|"
                          r"uuid|gen_random_uuid)\b", re.IGNORECASE)


@contextmanager
def one_look() -> Iterator[None]:
    """Reads in this block (a request) see a lake as of its first look, or of this process's last commit."""
    token = _looks.set({})
    try:
        yield
    finally:
        _looks.reset(token)


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


class DatabaseTooNew(RuntimeError):
    """The DuckDB file was written by a newer DuckDB than the pinned one (before the pin, 2.x was installed)."""


class CommitConflict(RuntimeError):
    """A lake commit lost to another instance's (DuckLake detected the conflict); the whole write may be retried."""


class Database:
    """A DuckDB file (or a DuckLake) opened once; each caller works on its own cursor, writers take `write_lock`."""

    def __init__(self, path: Path | str, lake_data: str | None = None):
        self.is_lake = lake.is_lake_url(str(path))
        # A lake URL is a libpq string, which a Path would mangle (`//` made `/`, a trailing `/` dropped).
        self.path = str(path) if self.is_lake else Path(path)
        # A file's absolute path and catalog name, attached to an in-memory DuckDB (see _connect_file)
        self._file: str | None = None
        self._home: str | None = None
        self.locking = False  # whether writes take the lake's advisory locks (several instances may write)
        if self.is_lake:
            if not lake_data:
                raise lake.LakeUnavailable("a DuckLake store needs ORCHESTRACE_LAKE_DATA: the folder of its data")
            self._conn = duckdb.connect(config=_config())
            self.locking = lake.attach_lake(self._conn, self.path, lake_data)
        else:
            if str(path) != ":memory:":
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = self._connect_file(str(path))
        # DuckDB takes one writer at a time; serialising our own writers turns conflicts into waits.
        self.write_lock = threading.Lock()
        self._writer: duckdb.DuckDBPyConnection | None = None  # the cursor of the write under write_lock, kept
        self._readers = threading.local()  # each thread's cursor for reads taken whole at once (see `_reader`)
        self._all_readers: list[duckdb.DuckDBPyConnection] = []
        self._readers_lock = threading.Lock()
        # kept reads: (statement, parameters) -> (column names, rows, the lake's tables it names, or None: any)
        self._snapshot_reads: OrderedDict[tuple, tuple[list[str], list[tuple], frozenset | None]] = OrderedDict()
        self._snapshot = None  # the catalog snapshot the kept reads are valid at
        # the latest snapshot seen to change each table, and any table (a change the log could not tell): changed_at
        self._changed_at: dict[str, int] = {}
        self._any_changed_at: int | None = None
        self._tables: tuple[dict[int, str], re.Pattern] | None = None  # the lake's tables by id, and their names
        self._attached = 0  # databases attached besides the store's own (migrate-store's source)
        self._snapshot_lock = threading.Lock()
        self._catch_up_lock = threading.Lock()  # held by the one thread asking the catalog's log (see _catch_up)
        self._together: ThreadPoolExecutor | None = None  # a lake's threads for `together`, made when first needed
        self._together_lock = threading.Lock()
        # Work done on threads of their own when writes pause: a file's checkpoint, a lake's flush, `when_writes_pause`
        self._pausing: list[_WhenWritesPause] = [_InlineFlusher(self)] if self.is_lake \
            else [] if str(path) == ":memory:" else [_Checkpointer(self)]

    def _connect_file(self, path: str) -> duckdb.DuckDBPyConnection:
        """A connection to the file, attached with ROW_GROUP_ROWS (an option of ATTACH, not of connect) under the name
        connect gives it (its stem) and used by default; `cursor` points each cursor at it. Databases of one file in
        one process share its attachment, as connect shares one DuckDB per file (a file attached twice is refused)."""
        if path == ":memory:":
            return duckdb.connect(path, config=_config())
        try:
            conn, self._home = _attached_files.open(os.path.abspath(path))
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise DatabaseLocked(
                    f"{self.path} is in use by another process (is `orchestrace serve` running?): {exc}"
                ) from exc
            if "newer version of DuckDB" in str(exc):
                raise DatabaseTooNew(
                    f"{self.path} was written by a newer DuckDB than this app's {duckdb.__version__}. Export it with "
                    "that DuckDB (`EXPORT DATABASE 'folder'`), import the folder into a new file with this one "
                    f"(`IMPORT DATABASE 'folder'`) and point ORCHESTRACE_DB at the new file: {exc}") from exc
            raise
        self._file = os.path.abspath(path)
        return conn

    def close(self) -> None:
        for worker in self._pausing:
            worker.stop()
        if self._together is not None:
            self._together.shutdown()
        if self._writer is not None:
            self._writer.close()
        with self._readers_lock:
            for cur in self._all_readers:
                cur.close()
        self._conn.close()
        if self._file is not None:  # once: closing a closed Database does nothing, as DuckDB's close
            _attached_files.close(self._file)
            self._file = None

    def when_writes_pause(self, work: Callable[[], None], what: str) -> None:
        """Run `work` on a thread of its own once writes pause after a commit (CHECKPOINT_QUIET_S), each time they do
        (a failure is logged and tried again CHECKPOINT_RETRY_S later): this process's commits and, on a lake that
        other instances may write, theirs too (seen within LAKE_WATCH_S). Registered before any request is served:
        the list is not guarded."""
        after = _AfterWrites(self, work, what)
        self._pausing.append(after)
        if self.locking:
            self._pausing.append(_LakeWatcher(self, after))

    def cursor(self) -> duckdb.DuckDBPyConnection:
        cur = self._conn.cursor()
        # a cursor starts in the connection's default catalog, not the attached lake or file
        if self.is_lake:
            lake.use_lake(cur)
        elif self._home is not None:
            _use(cur, self._home)
        return cur

    def execute(self, sql: str, params=None, cur: duckdb.DuckDBPyConnection | None = None):
        """Run one statement with bound parameters on `cur`: `execute`. Without `cur`, a read's rows are taken
        at once (`Rows`: what fetchall and fetchone give), as `fetchall`'s are, so that a lake may answer it from
        kept rows; any other statement runs on a fresh cursor."""
        if cur is None and READ_SQL.match(sql):
            return Rows(*self._rows(sql, params))
        result = execute(cur or self.cursor(), sql, params)
        attaching = ATTACHING.match(sql)
        if attaching:
            self._attached += 1 if attaching[1].upper() == "ATTACH" else -1
        return result

    def together(self, *calls: Callable[[], T]) -> list[T]:
        """What each call (reads of this store that need none of the others') returns, in order. On a lake, side by
        side: the caller's thread runs the first, TOGETHER_THREADS threads the others, each in a copy of the caller's
        context (a request's one look). Elsewhere, and within a call (whose thread must not wait for the same
        threads), one after the other: a file answers a read at once. The first failure is raised once all ended."""
        if not self.is_lake or len(calls) < 2 or getattr(self._readers, "alongside", False):
            return [call() for call in calls]
        with self._together_lock:
            if self._together is None:
                self._together = ThreadPoolExecutor(TOGETHER_THREADS, "lake-reads", self._alongside)
        if self.locking and _looks.get() is not None:
            self._catch_up(*self._latest())  # the request's one look, before its reads would each take it at once
        futures = [self._together.submit(contextvars.copy_context().run, call) for call in calls[1:]]
        try:
            first = calls[0]()
        finally:
            wait(futures)
        return [first, *(future.result() for future in futures)]

    def _alongside(self) -> None:
        """Marks a `together` thread, whose own `together` calls run one after the other."""
        self._readers.alongside = True

    def reader(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor for the reads whose rows are taken before they return (fetchall, fetchone,
        scalar, arrow, and a store's read that registers its lists on it for one statement), kept: a lake cursor's
        USE costs catalog round trips, as many as a small query's (a large trace's figure made two)."""
        cur = getattr(self._readers, "cur", None)
        if cur is None:
            cur = self._readers.cur = self.cursor()
            with self._readers_lock:
                self._all_readers.append(cur)
        return cur

    def _looker(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor for asking the catalog its latest snapshot (lake.snapshot_id), kept. It stays in the
        in-memory catalog: on a cursor in the lake the question would start a lake transaction too, which reads
        the snapshot itself (as many round trips again)."""
        cur = getattr(self._readers, "looker", None)
        if cur is None:
            cur = self._readers.looker = self._conn.cursor()
            with self._readers_lock:
                self._all_readers.append(cur)
        return cur

    def arrow(self, sql: str, params=None) -> pa.Table:
        """A query's rows as an Arrow table: DuckDB fills it without holding the GIL, where rows as Python tuples
        are made one by one under it."""
        return self.execute(sql, params, self.reader()).to_arrow_table()

    def fetchall(self, sql: str, params=None, keep_rows: int | None = None) -> list[dict]:
        """Rows of a query as dicts keyed by column name; `keep_rows` as for _rows."""
        names, rows = self._rows(sql, params, keep_rows)
        return [dict(zip(names, row)) for row in rows]

    def fetchone(self, sql: str, params=None) -> dict | None:
        rows = self.fetchall(sql, params)
        return rows[0] if rows else None

    def scalar(self, sql: str, params=None):
        rows = self._rows(sql, params)[1]
        return rows[0][0] if rows else None

    def _rows(self, sql: str, params=None, keep_rows: int | None = None) -> tuple[list[str], list[tuple]]:
        """Column names and rows of a query. On a lake shared through PostgreSQL, those the same statement and
        parameters gave, when kept: kept reads hold at the catalog's latest snapshot (`_catch_up`), so they are what
        the query would give now, without the catalog transaction and the reads of each table's files and stats
        that running it again costs (see SNAPSHOT_READS). Kept when at most `keep_rows` (SNAPSHOT_READ_ROWS
        unless the caller says why it keeps more)."""
        key = _read_key(sql, params) if self.locking and not self._attached and not VOLATILE_SQL.search(sql) \
            else None
        if key is None:
            return self._run(sql, params)
        snapshot, told = self._latest()
        self._catch_up(snapshot, told)
        with self._snapshot_lock:
            kept = self._snapshot_reads.get(key)
            if kept is not None:
                self._snapshot_reads.move_to_end(key)
        if kept is not None:
            names, rows, _ = kept
            return (names, copy.deepcopy(rows)) if _nested(rows) else (names, rows)
        names, rows = self._run(sql, params)
        # Kept only when no commit came between the two looks (the query then read `snapshot`), or in a request
        # (one look): rows kept under a snapshot are then at least as new as it, never older.
        if len(rows) <= (SNAPSHOT_READ_ROWS if keep_rows is None else keep_rows) and (_looks.get() is not None
                                                or lake.snapshot_id(self._looker()) == snapshot):
            kept = (names, copy.deepcopy(rows) if _nested(rows) else rows, self._tables_named(sql))
            with self._snapshot_lock:
                if snapshot == self._snapshot:
                    self._snapshot_reads[key] = kept
                    while len(self._snapshot_reads) > SNAPSHOT_READS:
                        self._snapshot_reads.popitem(last=False)
        return names, rows

    def _catch_up(self, snapshot: int | None, told: tuple[int, list] | None = None) -> None:
        """Make the kept reads hold at `snapshot`, when it is later than theirs: drop those of the tables its commits
        changed, or all of them when the catalog's log cannot tell (lake.changed_tables). The log comes with the
        look that found `snapshot` (`told`: the snapshot it starts after, and its rows) when that is still the kept
        reads' snapshot, or is asked now. One thread asks the log at a time: the others, reading at once
        (`together`), wait for its answer rather than ask it again. A request that looked earlier leaves them as
        they are: rows as new as its look or newer."""
        with self._catch_up_lock:
            kept_at = self._snapshot
            if snapshot == kept_at or (snapshot is not None and kept_at is not None and snapshot < kept_at):
                return
            asked = snapshot is not None and kept_at is not None  # the log tells the reads to drop, and changed_at
            changed = None
            if asked:
                logged = told[1] if told is not None and told[0] == kept_at \
                    else lake.snapshot_log(self._looker(), kept_at, snapshot)
                changed = lake.changed_tables(logged, kept_at, snapshot, self._lake_tables()[0])
            with self._snapshot_lock:
                if changed is None:
                    self._snapshot_reads.clear()
                    self._any_changed_at = snapshot
                    if asked:  # a table may have been made or dropped: the tables are asked again when next needed
                        self._tables = None
                else:
                    changed = {name.lower() for name in changed}
                    self._changed_at |= dict.fromkeys(changed, snapshot)
                    for key in [key for key, (*_, tables) in self._snapshot_reads.items()
                                if tables is None or not tables.isdisjoint(changed)]:
                        del self._snapshot_reads[key]
                self._snapshot = snapshot

    def version(self, sql: str) -> tuple:
        """What changes whenever the tables `sql` reads do (a cache's key): on a lake shared through PostgreSQL, the
        latest snapshot whose commits changed them (changed_at), which costs no read where a read of them is a
        catalog transaction (8-25 ms); elsewhere, or before the lake's log tells, the row `sql` reads (say, their
        number and latest time)."""
        tables = self._tables_named(sql) if self.locking else None
        at = None if tables is None else self.changed_at(*tables)
        return ("snapshot", at) if at is not None else tuple(self.execute(sql).fetchone())

    def changed_at(self, *tables: str) -> int | None:
        """On a lake shared through PostgreSQL, the latest snapshot whose commits changed any of `tables`, as the
        lake's log tells it up to the request's look (a snapshot the log could not tell about counts as changing
        every table); None before the lake has a snapshot."""
        self._catch_up(*self._latest())
        with self._snapshot_lock:
            if self._any_changed_at is None:
                return None
            return max([self._any_changed_at, *(self._changed_at.get(table.lower(), -1) for table in tables)])

    def _lake_tables(self) -> tuple[dict[int, str], re.Pattern]:
        """The lake's tables by id (lake.table_names), and a pattern finding their names in a statement; kept."""
        tables = self._tables
        if tables is None:
            names = lake.table_names(self._looker())
            words = "|".join(sorted(map(re.escape, names.values()), key=len, reverse=True)) or "(?!)"
            tables = self._tables = (names, re.compile(rf"\b({words})\b", re.IGNORECASE))
        return tables

    def _tables_named(self, sql: str) -> frozenset | None:
        """The lake's tables a statement names (more than it reads when a column shares a table's name, which only
        drops its kept rows more often); None when it names none: it may read anything."""
        named = frozenset(name.lower() for name in self._lake_tables()[1].findall(sql))
        return named or None

    def _latest(self) -> tuple[int | None, tuple[int, list] | None]:
        """The lake's latest snapshot: asked (`_look`), or within `one_look` the one its request saw since its last
        commit; with what the look was told of the log, if it asked."""
        looks = _looks.get()
        if looks is not None and id(self) in looks:
            return looks[id(self)], None
        snapshot, told = self._look()
        if looks is not None:
            looks[id(self)] = snapshot
        return snapshot, told

    def _look(self) -> tuple[int | None, tuple[int, list] | None]:
        """The lake's latest snapshot and, once the kept reads have a snapshot, the catalog's log since it (the
        snapshot it starts after, and its rows), asked at once (lake.look)."""
        with self._snapshot_lock:
            after = self._snapshot
        snapshot, logged = lake.look(self._looker(), after)
        return snapshot, None if logged is None else (after, logged)

    def _committed(self) -> None:
        """After a commit on a shared lake: within a request, its next read looks again (and reads its own write);
        outside one, the kept reads are brought up to the lake's latest snapshot now, so that a request that waited
        for this write reads it without looking again. Were that to fail, every kept read is dropped: the commit
        stands, and is not to be reported failed (its caller would write again)."""
        looks = _looks.get()
        if looks is not None:
            looks.pop(id(self), None)
            return
        try:
            self._catch_up(*self._look())
        except Exception:
            log.warning("bringing the kept reads up to a commit failed: all dropped", exc_info=True)
            with self._catch_up_lock, self._snapshot_lock:
                self._snapshot_reads.clear()
                self._snapshot = None

    def _run(self, sql: str, params=None) -> tuple[list[str], list[tuple]]:
        cur = self.execute(sql, params, self.reader())
        return [d[0] for d in cur.description], cur.fetchall()

    @contextmanager
    def transaction(self, locks: Iterable[tuple] = ()):
        """A cursor inside one write transaction: committed whole or rolled back whole. On a lake shared by
        several instances, `locks` (tuples naming what the write keeps unique, e.g. ("trace", id)) are held
        from before it reads until after it commits (see lake.held); a file has one writer, `write_lock`."""
        keys = [natural_id("lock", *parts) for parts in locks] if self.locking else []
        committed = False
        with self.write_lock, lake.held(self._conn, keys):
            # One write at a time: its cursor is kept for the next (a lake cursor's first USE costs a catalog
            # round trip), unless ending its transaction failed, which may leave it in any state.
            cur, self._writer = self._writer or self.cursor(), None
            execute(cur, "BEGIN TRANSACTION")
            try:
                yield cur
            except BaseException:
                try:
                    execute(cur, "ROLLBACK")
                except BaseException:
                    cur.close()
                    raise
                self._writer = cur
                raise
            try:
                execute(cur, "COMMIT")
            except duckdb.TransactionException as exc:
                cur.close()
                if lake.is_commit_conflict(exc):
                    raise CommitConflict(str(exc)) from exc
                raise
            except BaseException:
                cur.close()
                raise
            self._writer = cur
            committed = True
            for worker in self._pausing:
                worker.wrote()
        if committed and self.locking:
            self._committed()

    def write(self, work: Callable[[duckdb.DuckDBPyConnection], T], locks: Iterable[tuple] = ()) -> T:
        """`work(cur)` inside one write transaction holding `locks` (see `transaction`), run again (after a
        growing pause) while its commit loses to another instance's; CommitConflict when it still does after
        COMMIT_TRIES. `work` may run more than once: it must change nothing but the database."""
        locks = list(locks)
        for attempt in range(COMMIT_TRIES):
            try:
                with self.transaction(locks) as cur:
                    return work(cur)
            except CommitConflict:
                if attempt == COMMIT_TRIES - 1:
                    raise
                time.sleep(COMMIT_BACKOFF_S * 2**attempt * (1 + random.random()))
        raise AssertionError("unreachable")

    def migrate(self, migrations_dir: Path) -> list[str]:
        """Apply the numbered migrations not yet recorded in schema_migrations; return their names."""
        files = sorted(path for path in migrations_dir.glob("*.sql") if MIGRATION_NAME.match(path.name))
        if not files:
            raise MigrationsMissing(f"no migrations in {migrations_dir} (numbered NNNN_name.sql files): "
                                    "the database schema cannot be made; is the package installed whole?")
        # Instances starting together on one lake take turns, each seeing what the one before it applied.
        self.write(lambda cur: execute(cur,
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER NOT NULL, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"), [SCHEMA_LOCK])
        done = {row["version"] for row in self.fetchall("SELECT version FROM schema_migrations")}
        applied = []
        for path in files:
            if int(MIGRATION_NAME.match(path.name).group(1)) in done:
                continue
            if self.write(lambda cur, path=path: _apply_migration(cur, path), [SCHEMA_LOCK]):
                applied.append(path.name)
        if self.is_lake:
            self.write(lake.set_inlining, [SCHEMA_LOCK])
        if self.locking:
            with lake.held(self._conn, [natural_id("lock", *SCHEMA_LOCK)]):
                lake.make_deletion_tables(self._conn)
        return applied


def duckdb_threads() -> int:
    """DuckDB's threads: the cores this process may use but the one the analysis worker takes (app/store/analyst.py),
    at least one. At DuckDB's default, a thread a core, its second thread on two cores compressed and committed
    beside the worker and the request's own thread: a request of 1,000 rollouts took ~12% more CPU and longer
    (issue 30, part 3), and a stored 1,000,000-event trace read no faster."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, cores - 1)


def _config() -> dict:
    return {"threads": duckdb_threads()}


@dataclass
class _Attached:
    base: duckdb.DuckDBPyConnection  # the in-memory DuckDB the file is attached to
    home: str  # the file's catalog name
    users: int = 0  # the Databases using it


class _AttachedFiles:
    """The files this process has attached (see Database._connect_file), each once, with how many Databases use it;
    detached, which folds its log into it, when the last one closes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._files: dict[str, _Attached] = {}  # by absolute path

    def open(self, path: str) -> tuple[duckdb.DuckDBPyConnection, str]:
        """A connection of its own to the DuckDB holding the file, used in the file's catalog; and that name."""
        with self._lock:
            attached = self._files.get(path)
            if attached is None:
                base = duckdb.connect(config=_config())
                try:
                    quoted = path.replace("'", "''")  # ATTACH takes no bound parameters
                    execute(base, f"ATTACH '{quoted}' (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")
                    home = execute(base, "SELECT database_name FROM duckdb_databases() WHERE path IS NOT NULL"
                                   ).fetchone()[0]
                except BaseException:
                    base.close()
                    raise
                attached = self._files[path] = _Attached(base, home)
            attached.users += 1
            conn = attached.base.cursor()
            _use(conn, attached.home)
            return conn, attached.home

    def close(self, path: str) -> None:
        with self._lock:
            attached = self._files[path]
            attached.users -= 1
            if not attached.users:
                del self._files[path]
                attached.base.close()


_attached_files = _AttachedFiles()


def _use(cur: duckdb.DuckDBPyConnection, catalog: str) -> None:
    name = catalog.replace('"', '""')
    execute(cur, f'USE "{name}"')


class Rows:
    """A read's rows, taken whole when it ran, as a DuckDB cursor gives them (`Database.execute`)."""

    def __init__(self, names: list[str], rows: list[tuple]):
        self.description = [(name,) for name in names]
        self._rows = rows
        self._taken = 0

    def fetchall(self) -> list[tuple]:
        rows, self._taken = self._rows[self._taken:], len(self._rows)
        return rows

    def fetchone(self) -> tuple | None:
        if self._taken == len(self._rows):
            return None
        self._taken += 1
        return self._rows[self._taken - 1]


def _nested(rows: list[tuple]) -> bool:
    """Whether rows hold values a caller could change in place (lists, structs, maps): kept rows are copied."""
    return any(isinstance(value, list | dict) for row in rows for value in row)


def _read_key(sql: str, params) -> tuple | None:
    """A statement and its parameters as a key; None when a parameter cannot be one."""
    def frozen(value):
        return tuple(map(frozen, value)) if isinstance(value, list | tuple) else value

    try:
        values = tuple(sorted((k, frozen(v)) for k, v in params.items())) if isinstance(params, dict) \
            else frozen(params or ())
        hash(values)
    except TypeError:
        return None
    return sql, values


class _WhenWritesPause:
    """Work a thread of its own does for a Database once `_wrote` made it due and no write has committed for
    CHECKPOINT_QUIET_S, or at once when urgent, so that no request waits for it; after a failure (`_fails`), again
    once CHECKPOINT_RETRY_S have passed."""

    name = what = ""
    _fails: tuple[type[BaseException], ...] = (duckdb.Error,)

    def __init__(self, db: Database):
        self._db = db
        self._last_write = time.monotonic()
        self._due = self._urgent = False
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def _wrote(self, due: bool, urgent: bool) -> None:
        """A write committed: note when, and whether the work is due (urgent: without waiting for a pause)."""
        with self._changed:
            self._last_write = time.monotonic()
            if due and not self._due or urgent and not self._urgent:
                self._due, self._urgent = True, urgent
                self._changed.notify()

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify()
        self._thread.join()

    def _work(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._stopping:
                    wait = self._last_write + CHECKPOINT_QUIET_S - time.monotonic()
                    if self._due and (wait <= 0 or self._urgent):
                        break
                    self._changed.wait(wait if self._due else None)
                if self._stopping:
                    return  # closing the connection checkpoints; a lake's inlined rows stay readable
                self._due = self._urgent = False
            try:
                self._work()
            except self._fails as exc:  # e.g. a transaction older than a schema change is still open
                log.warning("%s deferred by %.0f s: %s", self.what, CHECKPOINT_RETRY_S, exc)
                with self._changed:  # tried again once the retry pause has passed
                    self._due, self._urgent = True, False
                    self._last_write = time.monotonic() + CHECKPOINT_RETRY_S - CHECKPOINT_QUIET_S


class _Checkpointer(_WhenWritesPause):
    """Folds a file's write-ahead log into the file when it has grown and writes pause (see CHECKPOINT_WAL_BYTES).
    It holds `write_lock` meanwhile; readers go on."""

    name, what = "duckdb-checkpointer", "checkpoint"

    def __init__(self, db: Database):
        self._wal = Path(f"{db.path}.wal")
        execute(db._conn, f"SET checkpoint_threshold = '{WAL_LIMIT}'")
        super().__init__(db)

    def wrote(self) -> None:
        try:
            size = self._wal.stat().st_size
        except OSError:  # no log: everything is in the file
            size = 0
        self._wrote(size >= CHECKPOINT_WAL_BYTES, size >= CHECKPOINT_FORCE_BYTES)

    def _work(self) -> None:
        with self._db.write_lock:
            self._db.execute("CHECKPOINT")


class _InlineFlusher(_WhenWritesPause):
    """Moves the rows a lake keeps in its catalog into Parquet files once this instance has made FLUSH_COMMITS
    commits and writes pause (see FLUSH_COMMITS). The flush is a write like any other: it waits for `write_lock`,
    and is run again when its commit loses to another instance's."""

    name, what = "ducklake-flusher", "moving a lake's inlined rows to Parquet"
    _fails = (duckdb.Error, CommitConflict)

    def __init__(self, db: Database):
        self._commits = 0  # since the last flush began
        super().__init__(db)

    def wrote(self) -> None:
        with self._changed:
            self._commits += 1
            commits = self._commits
        self._wrote(commits >= FLUSH_COMMITS, commits >= FLUSH_FORCE_COMMITS)

    def _work(self) -> None:
        with self._changed:
            self._commits = 0
        self._db.write(lambda cur: execute(cur, f"CALL ducklake_flush_inlined_data('{lake.LAKE_ALIAS}')").fetchall())



class _AfterWrites(_WhenWritesPause):
    """`work` that any commit makes due, done once writes pause (see Database.when_writes_pause)."""

    name = "after-writes"
    _fails = (Exception,)  # the work is the app's: its failure must not end the thread

    def __init__(self, db: Database, work: Callable[[], None], what: str):
        self._do, self.what = work, what
        super().__init__(db)

    def wrote(self) -> None:
        self._wrote(True, False)

    def _work(self) -> None:
        self._do()


class _LakeWatcher:
    """Makes `after`'s work due whenever the lake's latest snapshot moves, whoever committed it (another instance's
    commits reach no `wrote` of this process): it asks the catalog every LAKE_WATCH_S."""

    def __init__(self, db: Database, after: _AfterWrites):
        self._db, self._after = db, after
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lake-watcher", daemon=True)
        self._thread.start()

    def wrote(self) -> None:
        """This process's commits make the work due by themselves (see Database.transaction)."""

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()

    def _run(self) -> None:
        cur = self._db._conn.cursor()  # in the in-memory catalog, as Database._looker's (no lake transaction)
        seen = None
        try:
            while not self._stopping.wait(LAKE_WATCH_S):
                try:
                    latest = lake.snapshot_id(cur)
                except duckdb.Error as exc:  # the catalog is unreachable for now: asked again next time
                    log.warning("asking the lake for its latest snapshot failed: %s", exc)
                    continue
                if seen is not None and latest != seen:
                    self._after.wrote()
                seen = latest
        finally:
            cur.close()


def _apply_migration(cur: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Apply one migration and record it; False when it is recorded already (another instance applied it)."""
    version = int(MIGRATION_NAME.match(path.name).group(1))
    if execute(cur, "SELECT count(*) FROM schema_migrations WHERE version = ?", [version]).fetchone()[0]:
        return False
    execute(cur, path.read_text())
    execute(cur, "INSERT INTO schema_migrations VALUES (?, ?, now())", [version, path.name])
    return True
