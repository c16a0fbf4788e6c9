"""Trace SQL: the list and its filters and sorts, a trace's summary, events and edges rebuilt as ingested, an
event with its edges and lane neighbours, facets and search. One function per query, literal SQL, bound
parameters."""

import json
import math
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.domain import metrics
from app.domain.audit import RULES
from app.domain.jsontext import loads
from app.domain.metrics import Coded, TraceGraph, graph_from_columns, tokens_of
from app.store.db import Database, iso_utc
from app.store.gcpause import paused_gc
from app.store.lists import registered
from app.store.sql import execute, one_of, page_and_total

# Who counts as an agent, everywhere a page or the API says "agents": a team member, the `agent` of an event
# that is neither a tool answering a call (tool_result) nor a person (a human_intervention, or anything said
# by `user`, the name the importers give the person at the keyboard). Used by the stored traces.n_agents
# (app/store/writes.py) and the trace page's agent facet; its Python twin is app/domain/metrics.py is_team_act
# (the metrics' agents and lifetimes), and tests/test_analysis.py checks the two agree.
TEAM_MEMBER_EVENT = "(type NOT IN ('tool_result', 'human_intervention') AND agent <> 'user')"


# Sortable columns of the trace list, by their public names: columns of trace_measures, named alike.
TRACE_SORTS = ("trace_id", "task_id", "system", "topology", "events", "edges", "agents", "tokens", "wall_clock_s",
               "ingested_at", "critical_path_steps", "parallelism_speedup", "max_concurrency", "errors", "warnings")


# A trace's summary: its row and its stored analysis (present once analysed), as a page of the list shows it.
TRACE_SUMMARY = """
    SELECT t.trace_id, task_id, system, topology, rewards, costs, t.metrics, n_events AS events, n_edges AS edges,
           n_agents AS agents, tokens, wall_clock_s, t.ingested_at, m.critical_path_steps, m.parallelism_speedup,
           m.max_concurrency, m.errors, m.warnings
    FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id AND m.ingested_at = t.ingested_at
    WHERE t.trace_id = ?
"""


REWARD_SORT_PREFIX = "reward:"
# Keys a range filter takes besides reward:<channel>: the numeric ones of TRACE_SORTS.
RANGE_KEYS = ("events", "edges", "agents", "tokens", "wall_clock_s", "critical_path_steps", "parallelism_speedup",
              "max_concurrency", "errors", "warnings")


@dataclass(frozen=True)
class TraceFilters:
    """What the trace list shows: every field optional. `ranges` are (sort key, low or None, high or None), each
    keeping the traces with low <= value < high (see parse_range)."""
    topology: str | None = None
    system: str | None = None
    task: str | None = None
    q: str | None = None
    finding: str | None = None
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()


# What the corpus pages filter, sort, show and chart on, kept typed by index_traces so that no view reads every trace's
# rewards JSON or every finding, or joins every trace to its analysis: a row per trace with its sort keys (the
# analysis's NULL until it is stored), its rewards and its findings by rule (the list filters, sorts and shows a page
# from it alone, a chart pairs two measures of a trace and the audit page reads a trace's counts, in one row), and each
# reward channel's value as a row (a range of a channel, or its extent, reads that channel's rows alone).
INDEX_TABLES = ("trace_measures", "trace_rewards")
# The same rows filled the tables for the traces stored before them (migrations/0021, 0024). Each table is cut to the
# indexed traces before the joins: joined first, a write of 1,000 traces read (and hashed) all 100,000 analyses stored.
INDEX_MEASURES = """
    INSERT INTO trace_measures
    SELECT t.trace_id, t.task_id, t.system, t.topology, t.n_events, t.n_edges, t.n_agents, t.tokens, t.wall_clock_s,
           t.ingested_at, m.critical_path_steps, m.parallelism_speedup, m.max_concurrency, m.errors, m.warnings,
           m.infos, TRY_CAST(t.rewards AS MAP(VARCHAR, DOUBLE)),
           CASE WHEN m.trace_id IS NOT NULL THEN coalesce(f.rules, MAP {}::MAP(VARCHAR, INTEGER)) END,
           t.rewards, t.costs, t.metrics
    FROM (FROM traces WHERE trace_id IN (SELECT trace_id FROM indexed_ids)) t
    LEFT JOIN (FROM trace_metrics WHERE trace_id IN (SELECT trace_id FROM indexed_ids)) m
           ON m.trace_id = t.trace_id AND m.ingested_at = t.ingested_at
    LEFT JOIN (SELECT trace_id, map(list(rule ORDER BY rule), list(n ORDER BY rule)) AS rules
               FROM (SELECT trace_id, rule, count(*)::INTEGER AS n FROM audit_findings
                     WHERE trace_id IN (SELECT trace_id FROM indexed_ids) GROUP BY ALL)
               GROUP BY trace_id) f ON f.trace_id = t.trace_id
"""
# The rewards JSON read as a map of doubles, a row per channel (none for rewards that do not read so).
INDEX_REWARDS = """
    INSERT INTO trace_rewards (trace_id, channel, value)
    SELECT * FROM (SELECT trace_id, unnest(map_keys(r)) AS channel, unnest(map_values(r)) AS value
                   FROM (SELECT trace_id, TRY_CAST(rewards AS MAP(VARCHAR, DOUBLE)) AS r FROM traces
                         WHERE trace_id IN (SELECT trace_id FROM indexed_ids)))
    WHERE value IS NOT NULL
"""


def index_traces(cur, trace_ids: list[str], new: bool = False) -> None:
    """Make the typed rows of these traces (INDEX_TABLES) again from what is stored of them now, in the write that
    changed them (none for a trace deleted): every write of traces or of their analyses ends with this. `new`: none
    of them has rows yet (each was stored in this write, after any of its rows were deleted), so none are looked for."""
    with registered(cur, "indexed_ids", trace_id=trace_ids):
        if not new:
            for table in INDEX_TABLES:
                execute(cur, f"DELETE FROM {table} WHERE trace_id IN (SELECT trace_id FROM indexed_ids)")
        execute(cur, INDEX_MEASURES)
        execute(cur, INDEX_REWARDS)


# The filters on a trace's row of trace_measures (`x`).
TRACE_FILTER = """
    WHERE (?::VARCHAR IS NULL OR x.topology = ?)
      AND (?::VARCHAR IS NULL OR x.system = ?)
      AND (?::VARCHAR IS NULL OR x.task_id = ?)
      AND (?::VARCHAR IS NULL OR contains(lower(x.trace_id), lower(?)) OR contains(lower(x.task_id), lower(?))
           OR contains(lower(x.system), lower(?)))
      AND (?::VARCHAR IS NULL OR map_contains(x.rules, ?))
"""


# The traces with a channel's reward in a range, with it as `value`.
REWARD_ROWS = "(SELECT trace_id, value FROM trace_rewards WHERE channel = ?{bounds})"


def _where(filters: TraceFilters) -> tuple[str, list]:
    """The WHERE clause of the filters on a trace's row ("" when none filters) and its parameters (a range's key is
    a column's name, never user text)."""
    ranges = [(key, low, high) for key, low, high in filters.ranges if not key.startswith(REWARD_SORT_PREFIX)]
    texts = (filters.topology, filters.system, filters.task, filters.q, filters.finding)
    if not ranges and all(text is None for text in texts):
        return "", []
    sql, params = TRACE_FILTER, [value for value, uses in zip(texts, (2, 2, 2, 4, 2)) for _ in range(uses)]
    for key, low, high in ranges:
        if low is None and high is None:  # no bound: the traces with the value at all
            sql += f" AND x.{key} IS NOT NULL"
        for bound, comparison in ((low, ">="), (high, "<")):
            if bound is not None:
                sql += f" AND x.{key} {comparison} ?"
                params.append(bound)
    return sql, params


def _hits(filters: TraceFilters, key: str) -> tuple[str, list]:
    """The SELECT of the traces matching the filters with their sort key (`trace_id`, `sort_key`; `key` from
    parse_sort) and its parameters, from the traces' rows of trace_measures (`x`) and a relation of the traces in
    each reward range, joined; a reward range alone, sorted by its channel or the id, reads that channel's rows
    alone."""
    ranged, relations = [], []  # the reward ranges' keys, and their relations (SQL, parameters) in that order
    for name, low, high in filters.ranges:
        if name.startswith(REWARD_SORT_PREFIX):
            bounds = [(bound, comparison) for bound, comparison in ((low, ">="), (high, "<")) if bound is not None]
            ranged.append(name)
            relations.append((REWARD_ROWS.format(bounds="".join(f" AND value {c} ?" for _, c in bounds)),
                              [name.removeprefix(REWARD_SORT_PREFIX)] + [bound for bound, _ in bounds]))
    where, params = _where(filters)
    named = list(enumerate(relations))
    if where or key not in ("trace_id", *ranged) or not relations:
        base, sql, sql_params = "x", " FROM trace_measures x", []
    else:  # the first range is the base
        base, sql, sql_params, named = "r0", f" FROM {relations[0][0]} r0", list(relations[0][1]), named[1:]
    for n, (relation, relation_params) in named:
        sql += f" JOIN {relation} r{n} ON r{n}.trace_id = {base}.trace_id"
        sql_params += relation_params
    if key in ranged:  # the range's rows hold the value
        sort_key, sort_params = f"r{ranged.index(key)}.value", []
    elif key.startswith(REWARD_SORT_PREFIX):
        sort_key, sort_params = "x.rewards[?]", [key.removeprefix(REWARD_SORT_PREFIX)]
    else:
        sort_key, sort_params = f"{base}.{key}", []
    return f"SELECT {base}.trace_id, {sort_key} AS sort_key{sql}{where}", sort_params + sql_params + params


def parse_filters(topology=None, system=None, task=None, q=None, finding=None, ranges=()) -> TraceFilters:
    """The filters as a request names them (empty text filters nothing), checked: raises ValueError for a finding
    that is no audit rule or a range parse_range refuses."""
    if finding and finding not in RULES:
        raise ValueError(f"finding '{finding}' is not an audit rule; one of {', '.join(RULES)}")
    return TraceFilters(topology or None, system or None, task or None, q or None, finding or None,
                        tuple(parse_range(text) for text in ranges if text))


def parse_sort(sort: str) -> tuple[str, bool]:
    """The key of a sort such as "-events" or "reward:team" and whether it descends.

    Raises ValueError for an unknown key; user text (a channel) only ever reaches SQL as a bound parameter.
    """
    descending = sort.startswith("-")
    key = sort[1:] if descending else sort
    if key not in TRACE_SORTS and not key.startswith(REWARD_SORT_PREFIX):  # any channel name, "" included
        allowed = ", ".join(TRACE_SORTS) + ", reward:<channel>"
        raise ValueError(f"unknown sort key '{key}'; allowed: {allowed} (prefix - for descending)")
    return key, descending


def parse_range(text: str) -> tuple[str, float | None, float | None]:
    """"key:low:high" as (key, low, high), keeping the traces with low <= value < high; either bound may be empty,
    key is reward:<channel> or one of RANGE_KEYS. Raises ValueError saying what is wrong."""
    parts = text.rsplit(":", 2)
    key = parts[0]
    if len(parts) != 3 or not (key in RANGE_KEYS or key.startswith(REWARD_SORT_PREFIX)):
        raise ValueError(f"range '{text}': write key:low:high (a bound may be empty), the key one of "
                         f"{', '.join(RANGE_KEYS)} or reward:<channel>")
    try:
        low, high = (float(bound) if bound.strip() else None for bound in parts[1:])
    except ValueError:
        raise ValueError(f"range '{text}': its bounds must be numbers (or empty)") from None
    if not all(bound is None or math.isfinite(bound) for bound in (low, high)):
        raise ValueError(f"range '{text}': its bounds must be finite numbers")
    return key, low, high


def _summary(row: dict) -> dict:
    for key in ("rewards", "costs", "metrics"):
        row[key] = json.loads(row[key]) if row[key] is not None else None
    row["ingested_at"] = iso_utc(row["ingested_at"])
    return row


# The page's columns, all on the trace's row of trace_measures (`x`).
PAGE_COLUMNS = """x.trace_id, x.task_id, x.system, x.topology, x.rewards_json AS rewards, x.costs_json AS costs,
    x.metrics_json AS metrics, x.events, x.edges, x.agents, x.tokens, x.wall_clock_s, x.ingested_at,
    x.critical_path_steps, x.parallelism_speedup, x.max_concurrency, x.errors, x.warnings"""
# One page of the list and how many traces match, in one statement (one snapshot), from the traces' rows of
# trace_measures alone: DuckDB sorts the matching rows' keys and then fetches the page's rows only (its late
# materialization of a top-N over one table), where a join of the page's ids to another table scans it. An empty page
# is one row of NULLs with the count.
TRACE_PAGE = """
    SELECT c.total, p.* EXCLUDE (sort_key)
    FROM (SELECT count(*) AS total FROM trace_measures x{where}) c
    LEFT JOIN (SELECT {columns}, {sort_key} AS sort_key FROM trace_measures x{where}
               ORDER BY sort_key {order} NULLS LAST, x.trace_id LIMIT ? OFFSET ?) p ON true
    ORDER BY p.sort_key {order} NULLS LAST, p.trace_id
"""
# The same when a reward range filters: the matching traces' ids and sort keys (`hits`, the channels' reward rows
# joined: cheaper than reading every trace's map of rewards twice) are kept, counted and cut to the page, whose rows
# are then read from trace_measures.
RANGED_PAGE = """
    WITH hits AS MATERIALIZED ({hits}),
    page AS (SELECT trace_id, sort_key FROM hits ORDER BY sort_key {order} NULLS LAST, trace_id LIMIT ? OFFSET ?)
    SELECT c.total, p.* EXCLUDE (sort_key)
    FROM (SELECT count(*) AS total FROM hits) c
    LEFT JOIN (SELECT {columns}, page.sort_key FROM page JOIN trace_measures x ON x.trace_id = page.trace_id) p ON true
    ORDER BY p.sort_key {order} NULLS LAST, p.trace_id
"""


def list_traces(db: Database, filters: TraceFilters = TraceFilters(), sort="trace_id",
                limit=50, offset=0) -> tuple[list[dict], int]:
    """One page of trace summaries and the number of traces matching the filters (see parse_sort)."""
    key, descending = parse_sort(sort)
    order = "DESC" if descending else "ASC"
    if any(name.startswith(REWARD_SORT_PREFIX) for name, _, _ in filters.ranges):
        hits, params = _hits(filters, key)
        sql, params = RANGED_PAGE.format(hits=hits, order=order, columns=PAGE_COLUMNS), params + [limit, offset]
    else:
        where, where_params = _where(filters)
        sort_key, sort_params = (("x.rewards[?]", [key.removeprefix(REWARD_SORT_PREFIX)])
                                 if key.startswith(REWARD_SORT_PREFIX) else (f"x.{key}", []))
        sql = TRACE_PAGE.format(where=where, columns=PAGE_COLUMNS, sort_key=sort_key, order=order)
        params = where_params + sort_params + where_params + [limit, offset]
    rows, total = page_and_total(db.fetchall(sql, params), "trace_id")
    return [_summary(row) for row in rows], total


def read_trace_summary(db: Database, trace_id: str) -> dict | None:
    row = db.fetchone(TRACE_SUMMARY, [trace_id])
    return _summary(row) if row else None


def trace_ids(db: Database) -> list[str]:
    """Every stored trace's id, in id order."""
    return [row[0] for row in db.execute("SELECT trace_id FROM traces ORDER BY trace_id").fetchall()]


TRACE_ID_PAGE = """
    SELECT c.total, p.trace_id
    FROM (SELECT count(*) AS total FROM traces) c
    LEFT JOIN (SELECT trace_id FROM traces ORDER BY trace_id LIMIT ? OFFSET ?) p ON true
    ORDER BY p.trace_id"""


def trace_id_page(db: Database, limit: int, offset: int) -> tuple[list[str], int]:
    """A page of the stored trace ids in id order, and how many there are, in one read."""
    rows, total = page_and_total(db.fetchall(TRACE_ID_PAGE, [limit, offset]), "trace_id")
    return [row["trace_id"] for row in rows], total


# Whether a trace exists, its version and its number of events, in one statement: a request asks for each (its
# route's check that the trace exists, its caches' keys, the level of detail's choice), and on a lake the first read
# answers the others (see Database._rows), where each was a catalog transaction of its own (7-15 ms).
TRACE_ROW = "SELECT ingested_at, n_events FROM traces WHERE trace_id = ?"


def _trace_row(db: Database, trace_id: str) -> dict | None:
    return db.fetchone(TRACE_ROW, [trace_id])


def trace_exists(db: Database, trace_id: str) -> bool:
    return _trace_row(db, trace_id) is not None


def trace_version(db: Database, trace_id: str):
    """The trace's ingest time: what every cache of a trace's figure, graph or analysis is keyed on (a new
    ingest of the same id is a new version); None when the trace does not exist."""
    row = _trace_row(db, trace_id)
    return None if row is None else row["ingested_at"]


def trace_version_in(cur, trace_id: str):
    """trace_version inside a write transaction."""
    return (execute(cur, TRACE_ROW, [trace_id]).fetchone() or (None,))[0]


def event_count(db: Database, trace_id: str) -> int:
    """Events of a trace (0 when no such trace)."""
    row = _trace_row(db, trace_id)
    return 0 if row is None else row["n_events"]


def event_identity(db: Database, trace_id: str, event_id: str) -> dict | None:
    """An event's type, agent and role (what a label records of it)."""
    return db.fetchone("SELECT type, agent, role FROM events WHERE trace_id = ? AND event_id = ?", [trace_id, event_id])


def search_trace(db: Database, trace_id: str, q: str, limit: int) -> list[dict]:
    """Agents (team members: TEAM_MEMBER_EVENT), roles, tools and event ids of a trace containing `q`
    (case-insensitive, matched literally): an exact match first, then prefix matches, then the rest; each with
    its events and its first event in time order."""
    return db.fetchall("""
        WITH needle AS (SELECT lower(?) AS q),
        named AS (
            SELECT 'agent' AS kind, agent AS value, event_id, t, seq FROM events WHERE trace_id = ?
                AND """ + TEAM_MEMBER_EVENT + """
            UNION ALL SELECT 'role', role, event_id, t, seq FROM events WHERE trace_id = ? AND role IS NOT NULL
            UNION ALL SELECT 'tool', tool, event_id, t, seq FROM events WHERE trace_id = ? AND tool IS NOT NULL
        ),
        hits AS (
            SELECT kind, value, count(*) AS events, arg_min(event_id, (t, seq)) AS first_event
            FROM named, needle WHERE contains(lower(value), needle.q) GROUP BY kind, value
            UNION ALL
            SELECT 'event', event_id, 1, event_id FROM events, needle
            WHERE trace_id = ? AND contains(lower(event_id), needle.q)
        )
        SELECT kind, value, events, first_event FROM hits, needle
        ORDER BY lower(value) = needle.q DESC, starts_with(lower(value), needle.q) DESC,
                 list_position(['agent', 'role', 'tool', 'event'], kind), events DESC, value
        LIMIT ?""", [q, trace_id, trace_id, trace_id, trace_id, limit])


HEAD_SELECT = "SELECT trace_id, task_id, system, topology, rewards, costs, metrics FROM traces"


def read_trace(db: Database, trace_id: str) -> dict | None:
    """The trace as ingested: same keys, values, events and edges in their original order."""
    head = db.fetchone(HEAD_SELECT + " WHERE trace_id = ?", [trace_id])
    if head is None:
        return None
    with paused_gc():  # millions of new dicts, no cycles (see gcpause)
        return _assemble(head, read_events(db, trace_id), read_edges(db, trace_id))


def read_traces(db: Database, trace_ids: list[str]) -> dict[str, dict]:
    """read_trace of each of these traces that is stored, by id, in three reads whatever their number (an export of
    a training run's rollouts read three statements a trace: 23 ms each of 10,000)."""
    traces, params = one_of("trace_id", "traces", trace_ids)
    heads, events, edges = db.together(  # side by side on a lake
        lambda: db.fetchall(f"{HEAD_SELECT} WHERE {traces}", params),
        lambda: db.execute(f"SELECT trace_id, {EVENT_COLUMNS} FROM events WHERE {traces} ORDER BY trace_id, seq",
                           params).fetchall(),
        lambda: db.execute(f"SELECT trace_id, src, dst, type FROM edges WHERE {traces} ORDER BY trace_id, seq",
                           params).fetchall())
    with paused_gc():  # many new dicts, no cycles (see gcpause)
        orders: dict[str, list[str]] = {}
        events_of: dict[str, list[dict]] = {}
        for trace_id, *row in events:
            events_of.setdefault(trace_id, []).append(_rebuild(row, orders))
        edges_of: dict[str, list[dict]] = {}
        for trace_id, src, dst, type_ in edges:
            edges_of.setdefault(trace_id, []).append({"src": src, "dst": dst, "type": type_})
        return {head["trace_id"]: _assemble(head, events_of.get(head["trace_id"], []),
                                            edges_of.get(head["trace_id"], [])) for head in heads}


def event_counts(db: Database, trace_ids: list[str]) -> dict[str, int]:
    """The number of events of each of these traces that is stored."""
    traces, params = one_of("trace_id", "traces", trace_ids)
    return {row["trace_id"]: row["n_events"] for row in db.fetchall(
        f"SELECT trace_id, n_events FROM traces WHERE {traces}", params)}


def _assemble(head: dict, events: list[dict], edges: list[dict]) -> dict:
    """A trace as ingested from its `traces` row and its rebuilt events and edges, keys in the format's order."""
    trace = {"trace_id": head["trace_id"], "task_id": head["task_id"]}
    for key in ("system", "topology"):
        if head[key] is not None:
            trace[key] = head[key]
    trace["events"], trace["edges"] = events, edges
    trace["rewards"] = json.loads(head["rewards"])
    trace["costs"] = json.loads(head["costs"])
    if head["metrics"] is not None:
        trace["metrics"] = json.loads(head["metrics"])
    return trace


def read_trace_tables(db: Database, trace_ids: list[str]) -> tuple[list[dict], pa.Table, pa.Table]:
    """The traces' rows, and all their events and edges as Arrow tables in (trace, position) order, each row's trace
    given by its place among the rows (`trace`, from 1): what graphs_from_tables analyses them from, in another
    process, without building a dict per event (the server's re-analysis: reading a million events as dicts held the
    GIL every other request needs for seconds)."""
    heads = db.fetchall(HEAD_SELECT + " WHERE trace_id IN (SELECT unnest(?)) ORDER BY trace_id", [sorted(trace_ids)])
    ids = [head["trace_id"] for head in heads]
    return heads, _in_order(db.arrow(EVENT_NUMBERS, [ids])), _in_order(db.arrow(EDGE_ENDS, [ids]))


def _in_order(table: pa.Table) -> pa.Table:
    """The table's rows in (trace, seq) order, without seq. DuckDB's join of the ids hands back runs of rows in
    order (a trace's seq one after another) but the runs out of it, each thread's in turn; putting the runs back in
    order (slices, no copy) costs far less than the ORDER BY did (half the read's time at a million events). Runs of
    consecutive seq cannot overlap: a trace's seq are its events' (edges') positions, each once."""
    if not table.num_rows:
        return table.drop_columns(["seq"])
    trace, seq = table.column("trace").to_numpy(), table.column("seq").to_numpy()
    breaks = np.flatnonzero((trace[1:] != trace[:-1]) | (seq[1:] != seq[:-1] + 1)) + 1
    starts, ends = np.append(0, breaks), np.append(breaks, len(seq))
    runs = np.lexsort((seq[starts], trace[starts]))
    if (runs[1:] < runs[:-1]).any():
        table = pa.concat_tables([table.slice(lo, hi - lo) for lo, hi in zip(starts[runs].tolist(),
                                                                             ends[runs].tolist())])
    return table.drop_columns(["seq"])


# The traces' ids given (a list) as (trace_id, trace): a row's trace read as its number, not its id (a string
# repeated on each of a million rows costs more to hand over than the columns the analysis reads).
NUMBERED_TRACES = """(SELECT unnest(ids) AS trace_id, generate_subscripts(ids, 1) AS trace
    FROM (SELECT ?::VARCHAR[] AS ids))"""

# The columns the analysis reads (metrics.EVENT_FIELDS): each event's token count, and `numbers`, its `extra` where
# the columns do not hold its token count or `t` exactly (migration 0028); `extra` itself is not read. Put in order
# by _in_order, as EDGE_ENDS is.
EVENT_NUMBERS = f"""
    SELECT trace, seq, event_id, t, t_is_int, type, agent, role, to_agent, tool, trusted, tokens, numbers
    FROM events JOIN {NUMBERED_TRACES} USING (trace_id)
"""

# Each edge with the positions of its ends among its trace's events (null for no event; the last of an id given
# twice, as the analysis takes it): stored with it (migration 0027, app/store/writes.py), read rather than joined.
# An end's id only where it is no event's: the others are their events' (see _edge_ids).
EDGE_ENDS = f"""
    SELECT trace, seq, CASE WHEN src_position IS NULL THEN src END AS src,
           CASE WHEN dst_position IS NULL THEN dst END AS dst, type, src_position, dst_position
    FROM edges JOIN {NUMBERED_TRACES} USING (trace_id)
"""


class _Numbers(msgspec.Struct):
    """What the analysis reads of the `extra` of an event whose columns do not hold its numbers exactly: its token
    counts, and `t` when a double cannot hold it."""

    tokens: Any = None
    tokens_in: Any = None
    tokens_out: Any = None
    t: Any = msgspec.UNSET


_NUMBERS = msgspec.json.Decoder(list[_Numbers])


def graphs_from_tables(heads: list[dict], events: pa.Table, edges: pa.Table) -> list[tuple[dict, TraceGraph]]:
    """Per trace of read_trace_tables' rows and tables: the trace as read_trace gives it but with no event nor edge
    (its costs are what the audit reads of it), and the graph analyse_graph builds of the whole one, made from the
    columns with no event dict built (at a million events, rebuilding them took 4-5 s)."""
    runs = {name: _runs(table) for name, table in (("events", events), ("edges", edges))}
    columns = cache(lambda: _event_columns(events))
    lists = cache(lambda: tuple(edges.column(name).to_pylist() for name in ("type", "src_position", "dst_position")))
    out = []
    for trace, head in enumerate(heads, 1):
        lo, hi = runs["events"].get(trace, (0, 0))
        a, b = runs["edges"].get(trace, (0, 0))
        if hi - lo >= metrics.ARRAYS_FROM:
            part = _event_columns(events.slice(lo, hi - lo), coded=CODED_COLUMNS)
        else:
            part = {name: _rows(values, lo, hi) for name, values in columns().items()}
        kinds, *ends = (_edge_arrays(edges, a, b) if hi - lo >= metrics.ARRAYS_FROM else None) or (
            _rows(values, a, b) for values in lists())
        ids = part.pop("id")
        graph = graph_from_columns(ids, part.pop("t"), part.pop("type"), part.pop("agent"),
                                   partial(_edge_ids, edges, a, b, ids), kinds, part, tuple(ends))
        out.append((_assemble(head, [], []), graph))
    return out


def _edge_arrays(edges: pa.Table, a: int, b: int) -> tuple[Coded, np.ndarray, np.ndarray] | None:
    """The types (as codes) of the edges of rows a to b and the positions of their ends as int64 arrays, when every
    end is an event: a large trace's graph works on arrays (no list of 1.7 million ints or strings to make)."""
    ends = [edges.column(name).slice(a, b - a) for name in ("src_position", "dst_position")]
    if any(end.null_count for end in ends):
        return None
    kinds = pc.dictionary_encode(edges.column("type").slice(a, b - a).combine_chunks())
    return (Coded(kinds.indices.to_numpy(), kinds.dictionary.to_pylist()),
            *(end.to_numpy().astype(np.int64) for end in ends))


def _rows(values: list, lo: int, hi: int) -> list:
    """values[lo:hi], or values itself when that is all of it, one trace's (no copy of a million items)."""
    return values if lo == 0 and hi == len(values) > 0 else values[lo:hi]


def _edge_ids(edges: pa.Table, a: int, b: int, ids: list[str]) -> tuple[list, list]:
    """The src and dst ids of the edges of rows a to b, given the ids of their trace's events: made only when the
    analysis asks (1.7 million of each at a million events, and most rules read the ends' positions). An end that is
    an event is named by its event's id (EDGE_ENDS reads the others only)."""
    out = []
    for name in ("src", "dst"):
        positions = edges.column(f"{name}_position").slice(a, b - a)
        named = list(map(ids.__getitem__, positions.fill_null(0).to_numpy().tolist())) \
            if positions.null_count < len(positions) else [None] * len(positions)
        if positions.null_count:
            missing = positions.is_null()
            for k, end in zip(pc.indices_nonzero(missing).to_pylist(),
                              pc.filter(edges.column(name).slice(a, b - a), missing).to_pylist()):
                named[k] = end
        out.append(named)
    return tuple(out)


def _runs(table: pa.Table) -> dict[int, tuple[int, int]]:
    """The rows (from, to) of each trace in a table ordered by trace."""
    if not table.num_rows:
        return {}
    trace = table.column("trace").to_numpy()
    starts = np.append(0, np.flatnonzero(trace[1:] != trace[:-1]) + 1)
    return dict(zip(trace[starts].tolist(), zip(starts.tolist(), np.append(starts[1:], len(trace)).tolist())))


# The event columns a large trace's graph takes as codes (its own, in order of first appearance): a list of a
# million strings made from Arrow costs more than the codes and a list made of them, the rules read `to` and
# `tool` for a few events only, and the metrics read `role` as codes. By name in events (to_agent is the event's
# `to`).
CODED_COLUMNS = ("type", "agent", "role", "to_agent", "tool")


def _event_columns(events: pa.Table, coded: tuple[str, ...] = ()) -> dict[str, list | Coded]:
    """The id, t, type and agent and the EVENT_FIELDS of every event, as _rebuild would give them (None where an
    event has none): `t` an int where it was one, the token counts from `tokens` or, where it does not hold them,
    from `numbers` (see event_tokens); the `coded` ones as Coded."""
    column = events.column
    t = column("t").to_pylist()
    if pc.any(column("t_is_int")).as_py():
        t = [int(x) if is_int and math.isfinite(x) else x for x, is_int in zip(t, column("t_is_int").to_pylist())]
    tokens = column("tokens").to_pylist()
    extra = column("numbers")
    rows = pc.indices_nonzero(pc.is_valid(extra)).to_pylist()
    if rows:
        texts = pc.take(extra, pa.array(rows, pa.int64())).to_pylist()
        try:
            numbers = _NUMBERS.decode("[" + ",".join(texts) + "]")
        except msgspec.DecodeError:  # text msgspec refuses (a lone surrogate): read each as _rebuild does
            numbers = [msgspec.convert(loads(text), _Numbers) for text in texts]
        for i, found in zip(rows, numbers):
            tokens[i] = tokens_of(found.tokens, found.tokens_in, found.tokens_out)
            if found.t is not msgspec.UNSET:
                t[i] = found.t

    def strings(name: str) -> list | Coded:
        if name not in coded:
            return column(name).to_pylist()
        encoded = pc.dictionary_encode(column(name).combine_chunks(), null_encoding="encode")
        return Coded(encoded.indices.to_numpy().astype(np.int64), encoded.dictionary.to_pylist())
    return {"id": column("event_id").to_pylist(), "t": t, "type": strings("type"), "agent": strings("agent"),
            "role": strings("role"), "to": strings("to_agent"), "trusted": column("trusted").to_pylist(),
            "tool": strings("tool"), "tokens": tokens}


# The key order is JSON text, parsed once per distinct order (see _rebuild): events share a few orders.
EVENT_COLUMNS = """event_id, t, t_is_int, type, agent, role, from_agent, to_agent, tool, content_ref, trusted,
           extra, key_order"""
EVENT_SELECT = f"SELECT {EVENT_COLUMNS} FROM events"


def _rebuild(row: tuple, orders: dict[str, list[str]]) -> dict:
    """An event as ingested, from its columns, `extra` and recorded key order (`orders`: key orders read so far,
    by their JSON text)."""
    event_id, t, t_is_int, type_, agent, role, from_, to, tool, content_ref, trusted, extra, order = row
    event = {"id": event_id, "t": int(t) if t_is_int and math.isfinite(t) else t, "type": type_, "agent": agent}
    for key, value in (("role", role), ("from", from_), ("to", to), ("tool", tool),
                       ("content_ref", content_ref), ("trusted", trusted)):
        if value is not None:
            event[key] = value
    if extra is not None:
        event.update(loads(extra))
    if order is None:
        return event
    keys = orders.get(order)
    if keys is None:
        keys = orders[order] = loads(order)
    return {key: event[key] for key in keys}


def read_events(db: Database, trace_id: str) -> list[dict]:
    """Events of a trace rebuilt from their columns and `extra`, in document order."""
    rows = db.execute(EVENT_SELECT + " WHERE trace_id = ? ORDER BY seq", [trace_id]).fetchall()
    orders: dict[str, list[str]] = {}
    return [_rebuild(row, orders) for row in rows]


def event_ids(db: Database, trace_id: str) -> list[str]:
    return [r[0] for r in db.execute("SELECT event_id FROM events WHERE trace_id = ? ORDER BY seq",
                                     [trace_id]).fetchall()]


def read_edges(db: Database, trace_id: str) -> list[dict]:
    rows = db.execute(
        "SELECT src, dst, type FROM edges WHERE trace_id = ? ORDER BY seq", [trace_id]
    ).fetchall()
    return [{"src": src, "dst": dst, "type": type_} for src, dst, type_ in rows]


def trace_facets(db: Database) -> dict:
    """Distinct systems and topologies across stored traces, for filters, and the reward channel names across them
    (`reward_channels`), each in name order: one read (on a lake, each read costs its catalog round trips, and the
    trace list waited for one of these after the other)."""
    row = db.fetchone(
        "SELECT list(DISTINCT system ORDER BY system) FILTER (WHERE system IS NOT NULL) AS systems, "
        "list(DISTINCT topology ORDER BY topology) FILTER (WHERE topology IS NOT NULL) AS topologies, "
        "(SELECT list(DISTINCT channel ORDER BY channel) FROM trace_rewards) AS reward_channels FROM traces")
    return {key: row[key] or [] for key in ("systems", "topologies", "reward_channels")}


def corpus_version(db: Database) -> tuple:
    """What changes whenever a trace is stored, replaced or deleted (Database.version): off a shared lake, their
    number and the latest ingest time (a replace stamps its trace with the newest time)."""
    return db.version("SELECT count(*), max(ingested_at) FROM traces")


def read_event_cores(db: Database, trace_id: str) -> list[dict]:
    """Events with their column properties only (no `extra`): enough to draw and count, and fast."""
    rows = db.execute(
        """
        SELECT event_id, t, type, agent, role, from_agent, to_agent, tool, content_ref, trusted
        FROM events WHERE trace_id = ? ORDER BY seq
        """,
        [trace_id],
    ).fetchall()
    keys = ("id", "t", "type", "agent", "role", "from", "to", "tool", "content_ref", "trusted")
    return [{k: v for k, v in zip(keys, row) if v is not None} for row in rows]


def read_event_extras(db: Database, trace_id: str) -> list[tuple[int, dict]]:
    """(seq, extra properties) of the events that have any."""
    rows = db.execute(
        "SELECT seq, extra FROM events WHERE trace_id = ? AND extra IS NOT NULL ORDER BY seq", [trace_id]
    ).fetchall()
    return [(seq, loads(extra)) for seq, extra in rows]


def read_event(db: Database, trace_id: str, event_id: str) -> dict | None:
    """One event, rebuilt whole, with its position in the trace."""
    row = db.fetchone("SELECT seq FROM events WHERE trace_id = ? AND event_id = ?", [trace_id, event_id])
    if row is None:
        return None
    event = _rebuild(db.execute(EVENT_SELECT + " WHERE trace_id = ? AND seq = ?", [trace_id, row["seq"]]).fetchone(),
                     {})
    return {"seq": row["seq"], "event": event}


def read_event_edges(db: Database, trace_id: str, event_id: str) -> dict[str, list[dict]]:
    """Incoming and outgoing edges of an event, each with the other end's type and agent."""
    rows = db.fetchall(
        """
        SELECT e.src, e.dst, e.type, other.event_id AS other_id, other.type AS other_type,
               other.agent AS other_agent, json_extract_string(other.extra, '$.summary') AS other_summary,
               e.dst = ? AS incoming
        FROM edges e
        JOIN events other ON other.trace_id = e.trace_id
             AND other.event_id = CASE WHEN e.dst = ? THEN e.src ELSE e.dst END
        WHERE e.trace_id = ? AND (e.src = ? OR e.dst = ?)
        ORDER BY e.seq
        """,
        [event_id, event_id, trace_id, event_id, event_id],
    )
    return {"incoming": [r for r in rows if r["incoming"]], "outgoing": [r for r in rows if not r["incoming"]]}


LANE_NEIGHBOURS = """
    WITH lane AS (
        SELECT event_id, type, t, json_extract_string(extra, '$.summary') AS summary,
               row_number() OVER (ORDER BY t, seq) AS pos
        FROM events WHERE trace_id = $trace AND agent = (SELECT agent FROM events
                                                          WHERE trace_id = $trace AND event_id = $event))
    SELECT lane.event_id, lane.type, lane.t, lane.summary, lane.pos - me.pos AS offset
    FROM lane, (SELECT pos FROM lane WHERE event_id = $event) me
    WHERE lane.pos <> me.pos AND abs(lane.pos - me.pos) <= $n
    ORDER BY lane.pos
"""


def lane_neighbours(db: Database, trace_id: str, event_id: str, n: int = 2) -> list[dict]:
    """The `n` events before and after an event on its agent's lane, in time order (offset -n..n)."""
    return db.fetchall(LANE_NEIGHBOURS, {"trace": trace_id, "event": event_id, "n": n})


EVENT_SORTS = {"seq": "seq", "t": "t", "id": "event_id", "type": "type", "agent": "agent", "role": "role"}


EVENT_FILTER = """
    WHERE trace_id = ?
      AND (?::VARCHAR IS NULL OR type = ?)
      AND (?::VARCHAR IS NULL OR agent = ?)
      AND (?::VARCHAR IS NULL OR role = ?)
"""


# One page of a trace's events and how many match, in one statement, as TRACE_PAGE: an empty page is one row of NULLs
# with the count.
EVENT_PAGE = """
    SELECT c.total, p.* EXCLUDE (sort_key)
    FROM (SELECT count(*) AS total FROM events{where}) c
    LEFT JOIN (SELECT seq, event_id AS id, t, type, agent, role, tool, trusted, {column} AS sort_key FROM events{where}
               ORDER BY sort_key {order} NULLS LAST, seq LIMIT ? OFFSET ?) p ON true
    ORDER BY p.sort_key {order} NULLS LAST, p.seq
"""


def list_events(db: Database, trace_id: str, type_=None, agent=None, role=None, sort="seq",
                limit=50, offset=0) -> tuple[list[dict], int]:
    """One page of a trace's events (column properties) and the number matching the filters."""
    order = "DESC" if sort.startswith("-") else "ASC"
    column = EVENT_SORTS.get(sort.lstrip("-"), "seq")
    params = [trace_id, type_ or None, type_ or None, agent or None, agent or None, role or None, role or None]
    return page_and_total(db.fetchall(EVENT_PAGE.format(where=EVENT_FILTER, column=column, order=order),
                                      params + params + [limit, offset]), "seq")


def event_facets(db: Database, trace_id: str) -> dict:
    """Counts of a trace's events by type, by agent and by role, most first, in one read of its events (on a lake,
    each read costs its catalog round trips: three took 45 ms at 20,000 events, this one 18). Each `agent` row has
    a `kind`: `agent` for a team member (TEAM_MEMBER_EVENT), `tool` for a lane of tool results only, else
    `person`."""
    rows = db.fetchall(
        "SELECT CASE WHEN GROUPING(type) = 0 THEN 'type' WHEN GROUPING(agent) = 0 THEN 'agent' ELSE 'role' END "
        "AS facet, coalesce(type, agent, role) AS value, count(*) AS n, CASE WHEN bool_or(" + TEAM_MEMBER_EVENT
        + ") THEN 'agent' WHEN bool_and(type = 'tool_result') THEN 'tool' ELSE 'person' END AS kind "
        "FROM events WHERE trace_id = ? GROUP BY GROUPING SETS ((type), (agent), (role)) "
        "ORDER BY facet, n DESC, value", [trace_id])
    facets = {"type": [], "agent": [], "role": []}
    for row in rows:
        facet = facets[row.pop("facet")]
        if facet is not facets["agent"]:
            del row["kind"]
        facet.append(row)
    return facets
