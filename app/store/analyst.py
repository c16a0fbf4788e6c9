"""Analyses made in a worker process, beside the write that stores their traces.

Why a process: the analysis (app/domain/analysis.py) is Python from end to end, and in one of the server's threads
it would hold the GIL every other request needs, so a million-event trace's analysis would stall every label save
for its whole length, and a request of 1,000 rollouts would analyse on the core that parses and stores it. In a
process of its own it runs on the other core while the server goes on. Traces travel to it in pieces of at most
PIECE_EVENTS events, so no single pickling holds the GIL for long either; a piece goes as its JSON text, which
orjson writes ten times faster than pickle writes the dicts (1,000 rollouts: 45 ms against 0.5 s of the server's
core), and msgspec reads back in the worker. A server that has stored all else of a request and still waits takes
back the pieces of whole traces the worker has not begun (of SHARE_EVENTS at most: a larger trace is left to the
worker) and analyses them itself: its core is idle by then (1,000 rollouts waited about a third of their time for
the worker), and such a piece holds the GIL no longer than the request's own parsing. Stored traces analysed again
travel as the Arrow tables DuckDB reads them into, and the worker analyses their columns (analyse_tables). When the
worker cannot be had (it died, or processes cannot be started here), the analysis runs in the calling thread: slower for
others, never lost.

A request's bytes may go to the worker before this process has read them (`reading_ahead`): the worker reads them
by the same function meanwhile, and when the traces this process stores are exactly the values that function gave
here (the very objects, in order), their pieces go as positions in what the worker read, not as JSON again. The
analysis then begins while the request is read and validated (1,000 rollouts: about 0.3 s earlier), and this
process writes no piece (about 40 ms of its core).
"""

import logging
import multiprocessing
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from operator import is_

import msgspec
import orjson
import pyarrow as pa

from app.domain.analysis import analyse
from app.domain.metrics import TraceGraph
from app.domain.validation import finite_throughout
from app.store.traces import graphs_from_tables

PIECE_EVENTS = 20_000  # events (and as many edges) per piece sent to the worker
# Events and edges of whole traces analysed as one task: small enough that the worker and the server, sharing the
# last pieces of a request, end close together; large enough that a task's round trip costs little beside it.
SHARE_EVENTS = 2_000
_JSON_NULL = b"null"  # in a piece's text: maybe a float that is not finite (see _packed)
PARENT_CHECK_S = 1.0  # how often the worker looks whether the server that started it is still there
log = logging.getLogger("orchestrace")

_lock = threading.Lock()
_pool: ProcessPoolExecutor | None = None
WORKER_NICENESS = 10  # added to the server's: the worker runs when the server's requests leave a core free
_received: dict[str, list | dict] = {}  # in the worker: traces (or tables) arriving piece by piece, by request
_DECODER = msgspec.json.Decoder()
# Bodies up to this size are sent ahead (see reading_ahead): the worker then holds one parsed copy of the request.
AHEAD_MAX_BYTES = 64 * 1024**2


@dataclass
class Ahead:
    """Bytes sent to the worker to be read there (under `key`), and what the same reading gave here, once known."""

    key: str
    read_here: list | None = None

    def holds(self, traces: list[dict]) -> bool:
        """Whether these traces are, in order, the very values read here from the bytes sent."""
        values = self.read_here
        return values is not None and len(values) == len(traces) and all(map(is_, values, traces))


_ahead: ContextVar[Ahead | None] = ContextVar("analysis_ahead", default=None)


@contextmanager
def reading_ahead(data: bytes, read: Callable[[bytes], list | None]) -> Iterator[Ahead | None]:
    """Within: the worker reads `data` by `read` (an importable function) while this process reads it too. Once the
    caller gives the returned Ahead's `read_here` the values `read(data)` gave here, `start` of exactly those traces
    sends their positions (see Ahead.holds). None, and nothing sent, for a body past AHEAD_MAX_BYTES or without a
    worker. What the worker read is dropped on leaving."""
    ahead = None
    if len(data) <= AHEAD_MAX_BYTES:
        try:
            ahead = Ahead(uuid.uuid4().hex)
            _worker().submit(_read, ahead.key, read, data)
        except (BrokenProcessPool, OSError, RuntimeError) as exc:
            _discard(exc)
            ahead = None
    token = _ahead.set(ahead)
    try:
        yield ahead
    finally:
        _ahead.reset(token)
        pool = _pool
        if ahead is not None and pool is not None:
            try:
                pool.submit(_forget, ahead.key)  # after its analyses: one worker takes tasks in order
            except (BrokenProcessPool, RuntimeError):
                pass  # a new worker holds nothing of it


def analyse_traces(traces: list[dict]) -> dict[str, dict]:
    """{trace id: analyse(trace)} of every trace, made in the worker process (or here, failing that)."""
    return start(traces)()


def analyse_tables(heads: list[dict], events: pa.Table, edges: pa.Table) -> dict[str, dict]:
    """analyse_traces of stored traces given as read_trace_tables reads them: the worker analyses their columns
    (graphs_from_tables), so no process builds an event dict, and this one holds the GIL for little of it: the
    tables travel in slices of PIECE_EVENTS rows, each as Arrow IPC bytes (_ipc)."""
    try:
        pool = _worker()
        key = uuid.uuid4().hex
        futures = [pool.submit(_receive_table, key, "heads", heads)]
        for name, table in (("events", events), ("edges", edges)):
            futures += [pool.submit(_receive_table, key, name, _ipc(table.slice(lo, PIECE_EVENTS)))
                        for lo in range(0, table.num_rows, PIECE_EVENTS)]
        futures.append(pool.submit(_analyse_tables_received, key))
        return futures[-1].result()
    except (BrokenProcessPool, OSError, RuntimeError) as exc:
        _discard(exc)
        return _graphs_here(graphs_from_tables(heads, events, edges))


def start(traces: list[dict]):
    """Send the traces to the worker now; the returned function waits for their analyses (the same each call).
    Called when this thread has nothing else to do for the request, it first analyses here, the last first, every
    piece of whole traces the worker has not finished (see _send): a worker at its low priority on a busy machine
    may take seconds over a piece this thread makes in milliseconds."""
    ahead = _ahead.get()
    try:
        pieces, rest = _send_positions(ahead.key, traces) if ahead and ahead.holds(traces) else _send(traces)
    except (BrokenProcessPool, OSError, RuntimeError) as exc:
        _discard(exc)
        return lambda: _here(traces)
    made: list[dict[str, dict]] = []

    def wait() -> dict[str, dict]:
        if not made:
            made.append(_gather(traces, pieces, rest))
        return made[0]

    return wait


def _gather(traces: list[dict], pieces: list[tuple[Future, list[dict], int]], rest: list[Future]) -> dict[str, dict]:
    """The analyses of start's pieces: those the worker has not finished made here, the others the worker's."""
    analyses: dict[str, dict] = {}
    here = set()
    try:
        for k in reversed(range(len(pieces))):
            future, batch, size = pieces[k]
            if future.done():  # the worker takes its tasks in order: all before this one are done too
                break
            if size > SHARE_EVENTS:  # one trace this large: left to the worker
                continue
            # not cancelled: Python 3.11's pool, when its worker dies, fails on a cancelled future it still holds
            # and leaves the futures after it unanswered for good; the worker makes the piece again, at its priority
            analyses |= _here(batch)
            here.add(k)
        for k, (future, batch, _) in enumerate(pieces):
            if k not in here:
                made = future.result()
                analyses |= _here(batch) if made is None else made  # None: the worker could not read ahead
        if rest:
            analyses |= rest[-1].result()
    except BrokenProcessPool as exc:
        _discard(exc)
        return _here(traces)
    return {trace["trace_id"]: analyses[trace["trace_id"]] for trace in traces}


def _here(traces: list[dict]) -> dict[str, dict]:
    return {trace["trace_id"]: analyse(trace) for trace in traces}


def _graphs_here(graphs: list[tuple[dict, TraceGraph]]) -> dict[str, dict]:
    return {trace["trace_id"]: analyse(trace, g) for trace, g in graphs}


def _send(traces: list[dict]) -> tuple[list[tuple[Future, list[dict], int]], list[Future]]:
    """Submit the traces: whole ones together in pieces of about SHARE_EVENTS events and edges, each analysed as
    one task (so that a piece the worker has not finished can be made here instead), and a trace larger than
    PIECE_EVENTS alone in slices, which the worker puts back together in order (one worker takes its tasks as they
    were sent) and analyses last. Returns the pieces' futures with their traces and sizes, and the other futures."""
    pool = _worker()
    key = uuid.uuid4().hex
    pieces, rest, batch, size = [], [], [], 0

    def flush() -> None:
        nonlocal batch, size
        if batch:
            pieces.append((pool.submit(_analyse_piece, _packed(batch)), batch, size))
        batch, size = [], 0

    for trace in traces:
        n = len(trace["events"]) + len(trace["edges"])
        if n > PIECE_EVENTS:
            head = {name: value for name, value in trace.items() if name not in ("events", "edges")}
            rest.append(pool.submit(_receive, key, [head | {"events": [], "edges": []}]))
            for name in ("events", "edges"):
                items = trace[name]
                for lo in range(0, len(items), PIECE_EVENTS):
                    rest.append(pool.submit(_receive, key, [], name, _packed(items[lo:lo + PIECE_EVENTS])))
            continue
        if size + n > SHARE_EVENTS:
            flush()
        batch.append(trace)
        size += n
    flush()
    if rest:
        rest.append(pool.submit(_analyse_received, key))
    return pieces, rest


def _send_positions(key: str, traces: list[dict]) -> tuple[list[tuple[Future, list[dict], int]], list[Future]]:
    """_send of traces the worker has read ahead under `key`: each piece (about SHARE_EVENTS events and edges, or
    one larger trace) goes as its positions in them."""
    pool = _worker()
    pieces, lo, size = [], 0, 0
    for hi, trace in enumerate(traces):
        n = len(trace["events"]) + len(trace["edges"])
        if hi > lo and size + n > SHARE_EVENTS:
            pieces.append((pool.submit(_analyse_positions, key, lo, hi), traces[lo:hi], size))
            lo, size = hi, 0
        size += n
    if lo < len(traces):
        pieces.append((pool.submit(_analyse_positions, key, lo, len(traces)), traces[lo:], size))
    return pieces, []


def _packed(items: list) -> bytes | list:
    """The items as JSON text, or as they are (pickled) when that text would not read back equal: orjson refuses
    integers past 64 bits, lone surrogates and nesting past its depth, and writes a float that is not finite as
    null (searched for only when the text has a null)."""
    try:
        text = orjson.dumps(items)
    except orjson.JSONEncodeError:
        return items
    return items if _JSON_NULL in text and not finite_throughout(items) else text


def _unpacked(items: bytes | list) -> list:
    return _DECODER.decode(items) if isinstance(items, bytes) else items


def _receive(key: str, traces: bytes | list[dict], name: str | None = None, items: bytes | list | None = None) -> None:
    """In the worker: whole traces, or more `name` items (events, edges) of the last trace received."""
    received = _received.setdefault(key, [])
    received += _unpacked(traces)
    if name is not None:
        received[-1][name].extend(_unpacked(items))


def _analyse_piece(traces: bytes | list[dict]) -> dict[str, dict]:
    return _here(_unpacked(traces))


def _analyse_received(key: str) -> dict[str, dict]:
    return _here(_received.pop(key))


def _read(key: str, read: Callable[[bytes], list | None], data: bytes) -> None:
    """In the worker: the values of a request's bytes, read as the server reads them (None if that fails)."""
    try:
        _received[key] = read(data)
    except Exception:  # the server's reading words the fault; positions in this request are analysed there
        _received[key] = None


def _analyse_positions(key: str, lo: int, hi: int) -> dict[str, dict] | None:
    """In the worker: analyses of the traces at lo:hi of what it read ahead, or None when it read nothing."""
    values = _received.get(key)
    return None if values is None else _here(values[lo:hi])


def _forget(key: str) -> None:
    _received.pop(key, None)


def _ipc(table: pa.Table) -> bytes:
    """The table as an Arrow IPC stream, written without the GIL. Pickled, a slice of a table carries its columns'
    whole buffers (a 20,000-row slice of a 100,000-event table: 12 MB, not 2.5) and holds the GIL while it copies
    them (35 ms a slice, in the pool's feeder thread: the saves of other users waited)."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _receive_table(key: str, name: str, part: list[dict] | bytes) -> None:
    """In the worker: the heads, or a slice of the events or edges table (see _ipc), of a read_trace_tables batch."""
    if isinstance(part, bytes):
        part = pa.ipc.open_stream(part).read_all()
    _received.setdefault(key, {"heads": [], "events": [], "edges": []})[name].append(part)


def _analyse_tables_received(key: str) -> dict[str, dict]:
    parts = _received.pop(key)
    heads = [head for chunk in parts["heads"] for head in chunk]
    return _graphs_here(graphs_from_tables(heads, *(pa.concat_tables(parts[name]) for name in ("events", "edges"))))


def start_worker() -> None:
    """Start the worker process now (a server's start), not on the first analysis: its start imports the app, about
    a second of a core, which the first request that analyses would otherwise wait for."""
    try:
        _worker().submit(int)  # the pool starts its process on its first task
    except (BrokenProcessPool, OSError, RuntimeError) as exc:
        _discard(exc)


def _worker() -> ProcessPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ProcessPoolExecutor(max_workers=1, mp_context=_NicerContext(),
                                        initializer=_follow, initargs=(os.getpid(),))
        return _pool


class _NicerProcess(multiprocessing.context.SpawnProcess):
    """A worker that yields the processor to the server (WORKER_NICENESS) from its first instant: a background
    analysis of a large trace takes a core for seconds, and on a machine of two, reviewers' saves waited for it.
    Set by the server once it is started, not by the worker itself: its start (importing the app, about a second
    of a core, on a server's first analysis) ran at the server's priority."""

    def start(self) -> None:
        super().start()
        os.setpriority(os.PRIO_PROCESS, self.pid, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICENESS)


class _NicerContext(multiprocessing.context.SpawnContext):
    # spawn: a fork of a process running DuckDB's threads may inherit its locks held
    Process = _NicerProcess


def _follow(parent: int) -> None:
    """In the worker: end with the server that started it, even one killed with no chance to stop its pool (a
    server's process exit stops it too; one worker serves every app the process makes, as tests make many)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_CHECK_S)
        os._exit(0)

    threading.Thread(target=watch, name="follow-server", daemon=True).start()


def _discard(exc: BaseException) -> None:
    """Forget a broken worker (the next analysis starts another) and say why this one runs here."""
    global _pool
    log.warning("analysis worker unavailable (%s): analysing in the server's own process", exc)
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
