"""Writes of traces: each request's traces stored whole in one transaction, events and edges in bulk.

Rows reach DuckDB as Arrow tables built with as few passes over the parsed objects as possible: on a
bulk load every pass over 20,000 scattered event dicts costs milliseconds in cache misses alone. pyarrow
reads the column properties of each event straight from its dict; only `extra` and `key_order` need a
Python step per event; counts and maxima per trace are aggregated by DuckDB.
"""

from collections.abc import Callable
from datetime import datetime
from itertools import chain, repeat
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc

from app.domain.analysis import ANALYSIS_VERSION
from app.domain.jsontext import dumps
from app.domain.metrics import tokens_of
from app.domain.refusals import Refusal
from app.store import analyst
from app.store.db import Database, utc_now
from app.store.gcpause import paused_gc
from app.store.lists import registered
from app.store.sql import execute
from app.store.traces import TEAM_MEMBER_EVENT, index_traces

# Event properties with their own column, in the order an event is rebuilt; the rest go to `extra`.
EVENT_COLUMN_KEYS = ("id", "t", "type", "agent", "role", "from", "to", "tool", "content_ref", "trusted")
EVENT_COLUMNS = set(EVENT_COLUMN_KEYS)
EXACT_FLOAT_INT = 2**53
BIGINT_LIMIT = 2**63  # the `tokens` column holds the integers below it, and above its negative
TOKEN_KEYS = frozenset(("tokens", "tokens_in", "tokens_out"))  # what an event's token count is made of (tokens_of)
_STRING = pa.string()
# The column properties but `t`, as pyarrow reads them from each event dict (absent keys become null).
_EVENT_STRUCT = pa.struct([(key, pa.bool_() if key == "trusted" else _STRING)
                           for key in EVENT_COLUMN_KEYS if key != "t"])
_EDGE_STRUCT = pa.struct([("src", _STRING), ("dst", _STRING), ("type", _STRING)])
_ID, _SRC, _DST = itemgetter("id"), itemgetter("src"), itemgetter("dst")
# Events from which a trace's edge ends are found by Arrow rather than a dict (see _end_positions): below, the
# calls into Arrow cost more than the dict.
LARGE_TRACE_EVENTS = 2_000
# Stored analysis columns beside the whole metrics, in trace_metrics' order
ANALYSIS_COLUMNS = ("critical_path_steps", "critical_path_s", "parallelism_speedup", "max_concurrency", "spawn_depth",
                    "protocol_overhead")
# The analysed traces of a write that still are as they were read
_STILL_AS_READ = """
    SELECT a.trace_id FROM analysed a JOIN traces t ON t.trace_id = a.trace_id AND t.ingested_at = a.ingested_at
"""
_TRACE_COUNTS = """
    SELECT trace_id, count(DISTINCT agent) FILTER (WHERE """ + TEAM_MEMBER_EVENT + """) AS n_agents, max(t) AS t_max
    FROM bulk_events GROUP BY trace_id
"""


class TracesExist(Refusal):
    """Some trace ids are already stored and the caller asked neither to replace nor to skip them."""

    status = 409

    def __init__(self, trace_ids: list[str]):
        self.trace_ids = trace_ids
        super().__init__(f"already stored: {', '.join(trace_ids)} (use ?replace=true to replace)")

    def details(self) -> dict:
        return {"trace_ids": self.trace_ids}


def store_traces(db: Database, traces: list[dict], existing: str = "error",
                 then: Callable[[object, list[str], set[str]], None] | None = None,
                 analyses_after: bool = False) -> tuple[list[str], list[str]]:
    """Store valid traces in one transaction; `existing` is "error", "replace" or "skip". `then(cursor,
    stored ids, ids that were stored before)` runs last in the same transaction (e.g. to log the receipt), again
    when a lost commit makes the write run again. `analyses_after`: their analyses go in a write of their own once
    the traces are committed, so the traces (and what `then` wrote) are seen without waiting for the analysis
    worker; meanwhile a trace reads as one not analysed yet does (services.analysis.ensure_analysis makes it on view).

    Returns (stored ids, skipped ids). Raises TracesExist when `existing` is "error" and any id is taken.
    """
    ids = [trace["trace_id"] for trace in traces]
    if existing == "error":  # said before any work; the write checks again, for the ids stored meanwhile
        with db.cursor() as cur:
            _refuse_taken(ids, _taken(cur, ids))
    # in a worker process, while this one writes; after, sent once the traces are committed (the sending is
    # this process's work, ~0.1 s of a 30,000-event trace)
    analysed = None if analyses_after else analyst.start(traces)

    def store(cur) -> tuple[list[str], datetime]:
        taken = _taken(cur, ids)
        if existing == "error":
            _refuse_taken(ids, taken)
        kept = [trace for trace in traces if trace["trace_id"] not in taken] if existing == "skip" else traces
        if taken and existing != "skip":
            _delete(cur, sorted(taken))
        stored = [trace["trace_id"] for trace in kept]
        ingested_at = utc_now()
        if kept:
            _insert(cur, kept, ingested_at, *rows if len(kept) == len(traces) else _rows_of(rows, stored))
            if analyses_after:
                index_traces(cur, stored, new=True)
            else:
                insert_analyses(cur, {i: analyses[i] for i in stored})
        if then is not None:
            then(cur, stored, taken)
        return stored, ingested_at

    with paused_gc():
        # The events' and edges' rows are made, and the analyses waited for, before the write: a write holds the
        # store's one writer's lock, and other users' writes (label saves) would wait for all of it (1,000
        # rollouts: ~1 s, most of it the analysis).
        rows = _event_and_edge_tables(traces) if traces else ()
        analyses = analysed() if analysed is not None else None
        stored, ingested_at = db.write(store, trace_locks(ids))
        if analyses_after and stored:
            analyses = analyst.analyse_traces([trace for trace in traces if trace["trace_id"] in stored])
            # a trace replaced since (by another instance, or a later build) is skipped: it has its own analysis
            db.write(lambda cur: insert_analyses(cur, {i: analyses[i] for i in stored},
                                                 dict.fromkeys(stored, ingested_at)), trace_locks(stored))
    kept = set(stored)
    return stored, [i for i in ids if i not in kept]


def trace_locks(trace_ids: list[str]) -> list[tuple]:
    """What a write of these traces holds on a shared lake: one id is stored once, by one instance at a time."""
    return [("trace", trace_id) for trace_id in trace_ids]


def delete_trace(db: Database, trace_id: str) -> bool:
    """Remove a trace with its events, edges and stored analysis; False when no such trace."""
    def delete(cur) -> bool:
        if not execute(cur, "SELECT count(*) FROM traces WHERE trace_id = ?", [trace_id]).fetchone()[0]:
            return False
        _delete(cur, [trace_id])
        return True

    return db.write(delete, trace_locks([trace_id]))


def reviewer_lock(name: str) -> tuple:
    """What a write that may add reviewer `name`, or a version of their label or tag, holds on a shared lake:
    names are unique, and a reviewer's versions of one label are 1..n, by checks made inside the write."""
    return ("reviewer", name)


def add_reviewer(cur, name: str, created_at) -> None:
    """Record a reviewer name unless it is known (see add_reviewers)."""
    add_reviewers(cur, [name], created_at)


def add_reviewers(cur, names: list[str], created_at) -> None:
    """Record the reviewer names that are not known, in one statement however many (on a lake a statement per name
    cost 20-40 ms each, 1.5 s for a group of 50 new reviewers' saves); names are unique by this check, made inside
    a write that holds reviewer_lock of each name."""
    execute(cur, "INSERT INTO reviewers SELECT name, $2 FROM (SELECT DISTINCT unnest($1::VARCHAR[]) AS name) n "
                 "WHERE NOT EXISTS (SELECT 1 FROM reviewers r WHERE r.name = n.name)", [list(names), created_at])


def insert_row(cur, table: str, row: dict) -> None:
    """One row into `table` (a constant of the caller's), its columns named by `row`'s keys."""
    execute(cur, f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def replace_rows(cur, table: str, key: str, rows: list[dict]) -> None:
    """Rows of `table` replacing the stored ones with the same `key` (no table has a unique key to upsert on)."""
    if not rows:
        return
    with registered(cur, "replaced_keys", key=[row[key] for row in rows]):
        execute(cur, f"DELETE FROM {table} WHERE {key} IN (SELECT key FROM replaced_keys)")
    bulk = pa.Table.from_pylist(rows)
    cur.register("bulk_rows", bulk)
    try:
        names = ", ".join(bulk.column_names)
        execute(cur, f"INSERT INTO {table} ({names}) SELECT {names} FROM bulk_rows")
    finally:
        cur.unregister("bulk_rows")


def insert_analyses(cur, analyses: dict[str, dict], read_at: dict | None = None,
                    version: int = ANALYSIS_VERSION) -> list[str]:
    """Store the analyses (see app/domain/analysis.py analyse) of many traces at once, replacing theirs; a trace
    is skipped unless it is still the version ingested at `read_at[trace_id]` (when given: it was read before
    this write, and may have been replaced since). Without `read_at` the traces are stored in this write, which
    has none of theirs, so none is looked for: five statements fewer. Returns the ids stored."""
    ids = list(analyses)
    results = [analyses[i] for i in ids]
    metrics = [result["metrics"] for result in results]
    columns = {key: [m[key] for m in metrics] for key in ANALYSIS_COLUMNS}
    findings = [(trace_id, seq, f) for trace_id, result in zip(ids, results)
                for seq, f in enumerate(result["findings"])]
    analysed = pa.table({
        "trace_id": pa.array(ids, _STRING),
        "ingested_at": pa.array([read_at[i] for i in ids] if read_at else [None] * len(ids), pa.timestamp("us")),
        "metrics": pa.array(list(map(dumps, metrics)), _STRING),
        "critical_path_steps": pa.array(columns["critical_path_steps"], pa.int32()),
        "critical_path_s": pa.array(columns["critical_path_s"], pa.float64()),
        "parallelism_speedup": pa.array(columns["parallelism_speedup"], pa.float64()),
        "max_concurrency": pa.array(columns["max_concurrency"], pa.int32()),
        "spawn_depth": pa.array(columns["spawn_depth"], pa.int32()),
        "protocol_overhead": pa.array(columns["protocol_overhead"], pa.float64()),
        **{f"{severity}s": pa.array([r["counts"][severity] for r in results], pa.int32())
           for severity in ("error", "warning", "info")},
    })
    finding_rows = pa.table({
        "trace_id": pa.array([trace_id for trace_id, _, _ in findings], _STRING),
        "seq": pa.array([seq for _, seq, _ in findings], pa.int32()),
        "rule": pa.array([f["rule"] for _, _, f in findings], _STRING),
        "severity": pa.array([f["severity"] for _, _, f in findings], _STRING),
        "message": pa.array([f["message"] for _, _, f in findings], _STRING),
        "events": pa.array([dumps(f["events"]) for _, _, f in findings], _STRING),
    })
    cur.register("analysed", analysed)
    cur.register("finding_rows", finding_rows)
    try:
        if read_at is None:
            stored, kept = ids, ""
        else:
            stored = [row[0] for row in execute(cur, _STILL_AS_READ).fetchall()]
            kept = " WHERE {}trace_id IN (" + _STILL_AS_READ + ")"
            execute(cur, "DELETE FROM trace_metrics" + kept.format(""))
            execute(cur, "DELETE FROM audit_findings" + kept.format(""))
        execute(cur, "INSERT INTO trace_metrics (trace_id, ingested_at, metrics, critical_path_steps, critical_path_s, "
                "parallelism_speedup, max_concurrency, spawn_depth, protocol_overhead, errors, warnings, infos, "
                "analysis_version) "
                "SELECT t.trace_id, t.ingested_at, a.metrics, a.critical_path_steps, a.critical_path_s, "
                "a.parallelism_speedup, a.max_concurrency, a.spawn_depth, a.protocol_overhead, a.errors, a.warnings, "
                "a.infos, ? FROM analysed a JOIN traces t ON t.trace_id = a.trace_id" + kept.format("a."), [version])
        execute(cur, "INSERT INTO audit_findings (trace_id, seq, rule, severity, message, events) "
                "SELECT trace_id, seq, rule, severity, message, events FROM finding_rows" + kept.format(""))
    finally:
        cur.unregister("analysed")
        cur.unregister("finding_rows")
    index_traces(cur, stored, new=read_at is None)
    return stored


def _delete(cur, trace_ids: list[str]) -> None:
    with registered(cur, "gone_ids", trace_id=trace_ids):
        for table in ("events", "edges", "trace_metrics", "audit_findings", "lod_events", "lod_edges", "traces"):
            execute(cur, f"DELETE FROM {table} WHERE trace_id IN (SELECT trace_id FROM gone_ids)")
    index_traces(cur, trace_ids)


def _insert(cur, traces: list[dict], ingested_at, events: pa.Table, edges: pa.Table) -> None:
    """Insert the rows of traces, and their events and edges (made by _event_and_edge_tables); a trace's n_agents
    and t_max come from its events."""
    bulk = {"bulk_traces": _trace_table(traces, ingested_at), "bulk_events": events, "bulk_edges": edges}
    for name, table in bulk.items():
        cur.register(name, table)
    try:
        names = ", ".join(bulk["bulk_traces"].column_names)
        execute(cur, f"INSERT INTO traces ({names}, n_agents, t_max) "
                    f"SELECT {names}, n_agents, t_max FROM bulk_traces JOIN ({_TRACE_COUNTS}) USING (trace_id)")
        for table in ("events", "edges"):
            names = ", ".join(bulk[f"bulk_{table}"].column_names)
            execute(cur, f"INSERT INTO {table} ({names}) SELECT {names} FROM bulk_{table}")
    finally:
        for name in bulk:
            cur.unregister(name)


def _event_and_edge_tables(traces: list[dict]) -> tuple[pa.Table, pa.Table]:
    events = _event_table(traces)
    return events, _edge_table(traces, events["event_id"].combine_chunks())


def _rows_of(tables: tuple[pa.Table, ...], trace_ids: list[str]) -> tuple[pa.Table, ...]:
    """The rows of these traces only (the others were skipped: stored already)."""
    wanted = pa.array(trace_ids, _STRING)
    return tuple(table.filter(pc.is_in(table["trace_id"], value_set=wanted)) for table in tables)


def _taken(cur, ids: list[str]) -> set[str]:
    """Which of these trace ids are stored."""
    with registered(cur, "sent_ids", trace_id=ids):
        return {row[0] for row in execute(
            cur, "SELECT trace_id FROM traces WHERE trace_id IN (SELECT trace_id FROM sent_ids)").fetchall()}


def _refuse_taken(ids: list[str], taken: set[str]) -> None:
    if taken:
        raise TracesExist([i for i in ids if i in taken])


def _trace_table(traces: list[dict], ingested_at) -> pa.Table:
    """The `traces` columns but n_agents and t_max; pyarrow types the costs, which may be ints beyond a double."""
    costs = [trace["costs"] for trace in traces]
    return pa.table({
        "trace_id": [trace["trace_id"] for trace in traces],
        "task_id": [trace["task_id"] for trace in traces],
        "system": [trace.get("system") for trace in traces],
        "topology": [trace.get("topology") for trace in traces],
        "rewards": [dumps(trace["rewards"]) for trace in traces],
        "costs": list(map(dumps, costs)),
        "metrics": [dumps(trace["metrics"]) if "metrics" in trace else None for trace in traces],
        "n_events": [len(trace["events"]) for trace in traces],
        "n_edges": [len(trace["edges"]) for trace in traces],
        "tokens": list(map(itemgetter("tokens"), costs)),
        "wall_clock_s": list(map(itemgetter("wall_clock_s"), costs)),
        "ingested_at": [ingested_at] * len(traces),
    })


def _event_table(traces: list[dict]) -> pa.Table:
    """Every event of every trace in document order, with its trace id and position."""
    events = list(chain.from_iterable(trace["events"] for trace in traces))
    ts = list(map(itemgetter("t"), events))
    extra, numbers, key_orders, tokens, exact = _extras(events, ts)
    event_id, type_, agent, role, from_, to, tool, content_ref, trusted = pa.array(events, _EVENT_STRUCT).flatten()
    return pa.table({
        **_positions(traces, "events"),
        "event_id": event_id,
        "t": _doubles(ts),
        "t_is_int": pa.array([type(t) is int for t in ts], pa.bool_()),
        "type": type_, "agent": agent, "role": role, "from_agent": from_, "to_agent": to, "tool": tool,
        "content_ref": content_ref, "trusted": trusted,
        "extra": pa.array(extra, _STRING),
        # Events share few key layouts: each names its layout, whose key order is written once.
        "key_order": pa.DictionaryArray.from_arrays(pa.array(numbers, pa.int32()), pa.array(key_orders, _STRING)),
        "tokens": pa.array(tokens, pa.int64()),
        "numbers": pa.array(exact, _STRING),
    })


def _positions(traces: list[dict], key: str) -> dict[str, pa.Array]:
    """The trace id and the position in its trace of every event (or edge)."""
    counts = [len(trace[key]) for trace in traces]
    return {
        "trace_id": pa.array(list(chain.from_iterable(map(repeat, (t["trace_id"] for t in traces), counts))),
                             _STRING),
        "seq": pa.array(list(chain.from_iterable(map(range, counts))), pa.int32()),
    }


def _extras(events: list[dict], ts: list) -> tuple[list, list[int], list, list, list]:
    """Per event, the JSON of its other properties (None when none), the number of its key layout, its token count
    when an integer of 64 bits and its `extra` again when the columns do not hold its numbers exactly (migration
    0028: what the analysis reads, without decoding `extra`); per layout, its key order as JSON text, None when that
    is columns-then-extra (the order an event is rebuilt in)."""
    extra, numbers, key_orders = [], [], []
    tokens = [None] * len(events)
    odd = []  # events whose `extra` the analysis reads: a token count not in `tokens`, an exact `t`
    # keys -> (layout number, the column keys to drop from a copy of the event (none when no others remain),
    # whether it has a token count)
    layouts: dict[tuple, tuple[int, tuple, bool]] = {}
    for i, ev in enumerate(events):
        keys = tuple(ev)
        layout = layouts.get(keys)
        if layout is None:
            others = tuple(k for k in keys if k not in EVENT_COLUMNS)
            rebuilt = tuple(k for k in EVENT_COLUMN_KEYS if k in keys) + others
            columns = tuple(k for k in keys if k in EVENT_COLUMNS) if others else ()
            layout = layouts[keys] = (len(key_orders), columns, not TOKEN_KEYS.isdisjoint(others))
            key_orders.append(None if rebuilt == keys else dumps(keys))
        number, columns, counted = layout
        numbers.append(number)
        if columns:  # copying and dropping the few column keys beats building the rest key by key
            other = ev.copy()
            for key in columns:
                del other[key]
            extra.append(dumps(other))
        else:
            extra.append(None)
        if counted:
            count = tokens_of(ev.get("tokens"), ev.get("tokens_in"), ev.get("tokens_out"))
            if type(count) is int and -BIGINT_LIMIT <= count < BIGINT_LIMIT:
                tokens[i] = count
            elif count is not None:
                odd.append(i)
    if max(map(abs, ts)) > EXACT_FLOAT_INT:  # a DOUBLE holds it rounded: keep the exact integer in `extra`
        for i, (ev, t) in enumerate(zip(events, ts)):
            if type(t) is int and abs(t) > EXACT_FLOAT_INT:
                extra[i] = dumps({**{k: v for k, v in ev.items() if k not in EVENT_COLUMNS}, "t": t})
                odd.append(i)
    exact = [None] * len(events)
    for i in odd:
        exact[i] = extra[i]
    return extra, numbers, key_orders, tokens, exact


def _doubles(ts: list) -> pa.Array:
    """`t` as DOUBLE for sorting and plotting: rounded when an integer is beyond 2**53 (validation keeps
    integers below 2**63, and `extra` keeps the exact one)."""
    try:
        return pa.array(ts, pa.float64())
    except pa.ArrowInvalid:  # an integer that a double holds only rounded
        return pa.array(list(map(float, ts)), pa.float64())


def _edge_table(traces: list[dict], event_ids: pa.Array) -> pa.Table:
    """Every edge of every trace in document order, with its trace id, position and its ends' positions (given
    `event_ids`, the ids of the traces' events in _event_table's order)."""
    edges = list(chain.from_iterable(trace["edges"] for trace in traces))
    src, dst, type_ = pa.array(edges, _EDGE_STRUCT).flatten()
    src_position, dst_position = _end_positions(traces, event_ids, src, dst)
    return pa.table({**_positions(traces, "edges"), "src": src, "dst": dst, "type": type_,
                     "src_position": src_position, "dst_position": dst_position})


def _end_positions(traces: list[dict], event_ids: pa.Array, src: pa.Array, dst: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Per edge, the positions of its src and dst among its trace's events (an event's `seq`): the last of an id
    given twice, as the analysis takes it, null for an id no event has. Stored, they spare every read of the edges
    a join to the events (migration 0027). A small trace's are looked up in a dict of its ids; a large one's by
    Arrow, in one hash table built in C++ (a dict of 1,000,000 ids and 1,700,000 edges' lookups took 3 s, Arrow 1)."""
    done: tuple[list, list] = ([], [])  # arrays of positions, in trace order
    small: tuple[list, list] = ([], [])  # positions of the small traces since the last array

    def close_small() -> None:
        for arrays, positions in zip(done, small):
            if positions:
                arrays.append(pa.array(positions, pa.int32()))
                positions.clear()

    event_at = edge_at = 0
    for trace in traces:
        events, edges = trace["events"], trace["edges"]
        n, m = len(events), len(edges)
        if n < LARGE_TRACE_EVENTS:
            place = dict(zip(map(_ID, events), range(n))).get  # a later event of an id replaces the earlier
            for positions, end in zip(small, (_SRC, _DST)):
                positions += map(place, map(end, edges))
        elif m:
            close_small()
            last_first = event_ids.slice(event_at, n)[::-1]  # index_in finds an id's first place: here, its last
            for arrays, ends in zip(done, (src, dst)):
                found = pc.index_in(ends.slice(edge_at, m), value_set=last_first)
                arrays.append(pc.subtract(n - 1, found).cast(pa.int32()))
        event_at, edge_at = event_at + n, edge_at + m
    close_small()
    return tuple(pa.concat_arrays(arrays) if arrays else pa.array([], pa.int32()) for arrays in done)
