"""Reads: one function per query, each one literal SQL string with bound parameters."""

import json
import math

import pyarrow as pa

from app.domain.jsontext import loads
from app.store.db import Database, iso_utc
from app.store.gcpause import paused_gc
from app.store.lists import registered
from app.store.sql import execute

# Who counts as an agent, everywhere a page or the API says "agents": a team member, the `agent` of an event
# that is neither a tool answering a call (tool_result) nor a person (a human_intervention, or anything said
# by `user`, the name the importers give the person at the keyboard). Used by the stored traces.n_agents
# (app/store/writes.py) and the trace page's agent facet; its Python twin is app/domain/metrics.py is_team_act
# (the metrics' agents and lifetimes), and tests/test_analysis.py checks the two agree.
TEAM_MEMBER_EVENT = "(type NOT IN ('tool_result', 'human_intervention') AND agent <> 'user')"

# Sortable columns of the trace list: public name -> SQL expression (never user text).
TRACE_SORTS = {
    "trace_id": "t.trace_id",
    "task_id": "task_id",
    "system": "system",
    "topology": "topology",
    "events": "n_events",
    "edges": "n_edges",
    "agents": "n_agents",
    "tokens": "tokens",
    "wall_clock_s": "wall_clock_s",
    "ingested_at": "t.ingested_at",
    "critical_path_steps": "m.critical_path_steps",
    "parallelism_speedup": "m.parallelism_speedup",
    "max_concurrency": "m.max_concurrency",
    "errors": "m.errors",
    "warnings": "m.warnings",
}

TRACE_SUMMARY_COLUMNS = """
    t.trace_id, task_id, system, topology, rewards, costs, t.metrics,
    n_events AS events, n_edges AS edges, n_agents AS agents, tokens, wall_clock_s, t.ingested_at,
    m.critical_path_steps, m.parallelism_speedup, m.max_concurrency, m.errors, m.warnings
"""
# Stored analysis columns, present once a trace has been analysed (analysis.ensure_analysis).
TRACE_FROM = """
    FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id AND m.ingested_at = t.ingested_at
"""

REWARD_SORT_PREFIX = "reward:"

TRACE_FILTER = """
    WHERE (?::VARCHAR IS NULL OR topology = ?)
      AND (?::VARCHAR IS NULL OR system = ?)
      AND (?::VARCHAR IS NULL OR contains(lower(t.trace_id || ' ' || task_id || ' ' || coalesce(system, '')), lower(?)))
"""


def _filter_params(topology: str | None, system: str | None, q: str | None) -> list:
    return [topology or None, topology or None, system or None, system or None, q or None, q or None]


def parse_sort(sort: str) -> tuple[str, list, bool]:
    """SQL order expression, its parameters and direction for a sort key such as "-events" or "reward:team".

    Raises ValueError for an unknown key; user text only ever reaches SQL as a bound parameter.
    """
    descending = sort.startswith("-")
    key = sort[1:] if descending else sort
    if key.startswith(REWARD_SORT_PREFIX) and len(key) > len(REWARD_SORT_PREFIX):
        channel = key[len(REWARD_SORT_PREFIX):]
        pointer = "/" + channel.replace("~", "~0").replace("/", "~1")
        return "TRY_CAST(json_extract(t.rewards, ?) AS DOUBLE)", [pointer], descending
    if key not in TRACE_SORTS:
        allowed = ", ".join(TRACE_SORTS) + ", reward:<channel>"
        raise ValueError(f"unknown sort key '{key}'; allowed: {allowed} (prefix - for descending)")
    return TRACE_SORTS[key], [], descending


def _summary(row: dict) -> dict:
    for key in ("rewards", "costs", "metrics"):
        row[key] = json.loads(row[key]) if row[key] is not None else None
    row["ingested_at"] = iso_utc(row["ingested_at"])
    return row


def list_traces(db: Database, topology=None, system=None, q=None, sort="trace_id",
                limit=50, offset=0) -> tuple[list[dict], int]:
    """One page of trace summaries and the number of traces matching the filters (see parse_sort)."""
    expression, sort_params, descending = parse_sort(sort)
    order = f"{expression} {'DESC' if descending else 'ASC'} NULLS LAST, t.trace_id"
    params = _filter_params(topology, system, q)
    total = db.scalar("SELECT count(*)" + TRACE_FROM + TRACE_FILTER, params)
    rows = db.fetchall(
        "SELECT" + TRACE_SUMMARY_COLUMNS + TRACE_FROM + TRACE_FILTER + "ORDER BY " + order + " LIMIT ? OFFSET ?",
        params + sort_params + [limit, offset],
    )
    return [_summary(row) for row in rows], total


def read_trace_summary(db: Database, trace_id: str) -> dict | None:
    row = db.fetchone("SELECT" + TRACE_SUMMARY_COLUMNS + TRACE_FROM + "WHERE t.trace_id = ?", [trace_id])
    return _summary(row) if row else None


def trace_ids(db: Database) -> list[str]:
    """Every stored trace's id, in id order."""
    return [row[0] for row in db.execute("SELECT trace_id FROM traces ORDER BY trace_id").fetchall()]


def trace_version(db: Database, trace_id: str):
    """The trace's ingest time: what every cache of a trace's figure, graph or analysis is keyed on (a new
    ingest of the same id is a new version); None when the trace does not exist."""
    return db.scalar("SELECT ingested_at FROM traces WHERE trace_id = ?", [trace_id])


def event_count(db: Database, trace_id: str) -> int:
    """Events of a trace (0 when no such trace)."""
    return db.scalar("SELECT n_events FROM traces WHERE trace_id = ?", [trace_id]) or 0


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


def trace_exists(db: Database, trace_id: str) -> bool:
    return db.scalar("SELECT count(*) FROM traces WHERE trace_id = ?", [trace_id]) > 0


def read_trace(db: Database, trace_id: str) -> dict | None:
    """The trace as ingested: same keys, values, events and edges in their original order."""
    head = db.fetchone(
        "SELECT trace_id, task_id, system, topology, rewards, costs, metrics FROM traces WHERE trace_id = ?",
        [trace_id],
    )
    if head is None:
        return None
    trace = {"trace_id": head["trace_id"], "task_id": head["task_id"]}
    for key in ("system", "topology"):
        if head[key] is not None:
            trace[key] = head[key]
    with paused_gc():  # millions of new dicts, no cycles (see gcpause)
        trace["events"] = read_events(db, trace_id)
        trace["edges"] = read_edges(db, trace_id)
    trace["rewards"] = json.loads(head["rewards"])
    trace["costs"] = json.loads(head["costs"])
    if head["metrics"] is not None:
        trace["metrics"] = json.loads(head["metrics"])
    return trace


# The key order is JSON text, parsed once per distinct order (see _rebuild): events share a few orders.
EVENT_SELECT = """
    SELECT event_id, t, t_is_int, type, agent, role, from_agent, to_agent, tool, content_ref, trusted,
           extra, key_order
    FROM events
"""


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


# ---- level of detail: large traces drawn as bins, a window at a time ----------------------------------------
# The lane an event is drawn on: its agent, but a tool_result reached by a tool_dependency edge sits on the lane of
# the calling event's agent (the last such edge in document order wins). The SQL twin of app/domain/figure.py
# lane_agents; tests/test_lod.py checks the two agree.
EVENT_OWNERS = """
    WITH ev AS (SELECT seq, t, type, event_id, agent FROM events WHERE trace_id = $trace),
    calls AS (
        SELECT d.seq, arg_max(s.agent, x.seq) AS owner
        FROM (SELECT seq, src, dst FROM edges WHERE trace_id = $trace AND type = 'tool_dependency') x
        JOIN ev s ON s.event_id = x.src JOIN ev d ON d.event_id = x.dst
        WHERE d.type = 'tool_result' GROUP BY d.seq)
    SELECT ev.seq, ev.t, ev.type, ev.event_id, coalesce(calls.owner, ev.agent) AS owner
    FROM ev LEFT JOIN calls USING (seq)
"""


def skeleton_events(db: Database, trace_id: str) -> list[dict]:
    """The few events that decide a trace's lanes and lifetimes, in trace order: each agent's first event and
    first role, each child's first spawn, each first despawn, each team member's earliest, latest and last
    return events, each tool's first answer. figure.spawn_tree and metrics.agent_spans give the same answers
    on these as on all the events (tests/test_lod.py checks it), so a million-event trace lays out from a few
    thousand rows."""
    seqs = """
        SELECT min(seq) FROM events WHERE trace_id = $trace AND type <> 'tool_result' GROUP BY agent
        UNION SELECT min(seq) FROM events WHERE trace_id = $trace AND type = 'tool_result' GROUP BY agent
        UNION SELECT min(seq) FROM events WHERE trace_id = $trace AND type = 'spawn' AND to_agent <> agent
            GROUP BY to_agent
        UNION SELECT min(seq) FROM events WHERE trace_id = $trace AND role IS NOT NULL AND type <> 'tool_result'
            AND NOT (type = 'spawn' AND to_agent IS NOT NULL) GROUP BY agent
        UNION SELECT min(seq) FROM events WHERE trace_id = $trace AND type = 'despawn'
            GROUP BY coalesce(nullif(to_agent, ''), agent)
        UNION SELECT arg_min(seq, t) FROM events WHERE trace_id = $trace AND """ + TEAM_MEMBER_EVENT + """ GROUP BY agent
        UNION SELECT arg_max(seq, t) FROM events WHERE trace_id = $trace AND """ + TEAM_MEMBER_EVENT + """ GROUP BY agent
        UNION SELECT arg_max(seq, t) FROM events WHERE trace_id = $trace AND type = 'return' AND agent <> 'user'
            GROUP BY agent
    """
    rows = db.execute(f"""
        SELECT event_id, t, type, agent, role, to_agent FROM events
        WHERE trace_id = $trace AND seq IN ({seqs}) ORDER BY seq""", {"trace": trace_id}).fetchall()
    keys = ("id", "t", "type", "agent", "role", "to")
    return [{k: v for k, v in zip(keys, row) if v is not None} for row in rows]


def lane_owners(db: Database, trace_id: str) -> list[str]:
    """Every lane owner (see EVENT_OWNERS) in order of its first event. Needs fill_lod."""
    rows = db.execute("SELECT owner FROM lod_events WHERE trace_id = ? GROUP BY owner ORDER BY min(seq)",
                      [trace_id]).fetchall()
    return [row[0] for row in rows]


def time_span(db: Database, trace_id: str) -> tuple[float, float]:
    return db.execute("SELECT min(t), max(t) FROM events WHERE trace_id = ?", [trace_id]).fetchone()


def window_count(db: Database, trace_id: str, t0: float, t1: float) -> int:
    """How many events fall in [t0, t1]. Needs fill_lod."""
    return db.scalar("SELECT count(*) FROM lod_events WHERE trace_id = ? AND t BETWEEN ? AND ?", [trace_id, t0, t1])


LOD_KEPT = "SELECT count(*) FROM (SELECT 1 FROM lod_events WHERE trace_id = ? LIMIT 1)"


def lod_ready(db: Database, trace_id: str) -> bool:
    """Whether the trace's lanes per event and edge (lod_events, lod_edges) are kept."""
    return db.scalar(LOD_KEPT, [trace_id]) > 0


def lod_ready_in(cur, trace_id: str) -> bool:
    """lod_ready inside a write transaction."""
    return execute(cur, LOD_KEPT, [trace_id]).fetchone()[0] > 0


def fill_lod(cur, trace_id: str) -> None:
    """Keep the lane owner of every event and both ends of every edge of a trace, inside a write transaction."""
    execute(cur, f"INSERT INTO lod_events SELECT $trace, seq, t, type, owner FROM ({EVENT_OWNERS})",
                {"trace": trace_id})
    execute(cur, """
        WITH ends AS (
            SELECT e.event_id, o.t, o.owner
            FROM (SELECT seq, event_id FROM events WHERE trace_id = $trace) e
            JOIN (SELECT seq, t, owner FROM lod_events WHERE trace_id = $trace) o USING (seq))
        INSERT INTO lod_edges
        SELECT $trace, x.type, s.t, s.owner, d.t, d.owner
        FROM (SELECT type, src, dst FROM edges WHERE trace_id = $trace) x
        JOIN ends s ON s.event_id = x.src JOIN ends d ON d.event_id = x.dst""", {"trace": trace_id})


def event_bins(db: Database, trace_id: str, rows: dict[str, int], t0: float, t1: float, buckets: int,
               values: dict[int, float] | None = None) -> list[tuple]:
    """Events of [t0, t1] counted per (row, time bucket): rows map each lane owner to a row of the plot;
    `buckets` equal buckets span the window. Per bin: row, bucket, events, first and last t, the most common
    event type (of equals, the one that comes first) and, given per-event `values` (seq -> number), their mean
    over the bin's events that have one.
    Needs fill_lod."""
    cur = db.cursor()
    with registered(cur, "lane_rows", owner=list(rows), row=pa.array(list(rows.values()), pa.int32())), \
            registered(cur, "event_values", seq=pa.array(list(values or ()), pa.int32()),
                       value=pa.array(list((values or {}).values()), pa.float64())):
        return db.execute("""
            WITH typed AS (
                SELECT r.row, least(floor((o.t - $t0) / $width * $buckets), $buckets - 1)::INTEGER AS bucket,
                       o.type, count(*) AS n, min(o.t) AS t_min, max(o.t) AS t_max, min(o.seq) AS first,
                       sum(v.value) AS value_sum, count(v.value) AS valued
                FROM lod_events o JOIN lane_rows r ON r.owner = o.owner
                LEFT JOIN event_values v ON v.seq = o.seq
                WHERE o.trace_id = $trace AND o.t BETWEEN $t0 AND $t1
                GROUP BY ALL)
            SELECT row, bucket, sum(n)::INTEGER AS events, min(t_min), max(t_max),
                   first(type ORDER BY n DESC, first) AS type, sum(value_sum) / nullif(sum(valued), 0) AS value
            FROM typed GROUP BY row, bucket ORDER BY row, bucket""",
            {"trace": trace_id, "t0": t0, "t1": t1, "width": max(t1 - t0, 1e-12), "buckets": buckets},
            cur=cur).fetchall()


def edge_bundles(db: Database, trace_id: str, rows: dict[str, int], t0: float, t1: float, buckets: int,
                 limit: int) -> list[tuple]:
    """Edges leaving events of [t0, t1] bundled per (type, source row, target row, source time bucket): per
    bundle its type, rows, edges, mean source and target t; the `limit` heaviest bundles. Needs fill_lod."""
    cur = db.cursor()
    with registered(cur, "lane_rows", owner=list(rows), row=pa.array(list(rows.values()), pa.int32())):
        return db.execute("""
            SELECT x.type, rs.row AS src_row, rd.row AS dst_row, count(*) AS edges, avg(x.src_t), avg(x.dst_t)
            FROM lod_edges x JOIN lane_rows rs ON rs.owner = x.src_owner JOIN lane_rows rd ON rd.owner = x.dst_owner
            WHERE x.trace_id = $trace AND x.src_t BETWEEN $t0 AND $t1
            GROUP BY x.type, rs.row, rd.row, least(floor((x.src_t - $t0) / $width * $buckets), $buckets - 1)
            ORDER BY edges DESC LIMIT $limit""",
            {"trace": trace_id, "t0": t0, "t1": t1, "width": max(t1 - t0, 1e-12), "buckets": buckets,
             "limit": limit}, cur=cur).fetchall()


def window_events(db: Database, trace_id: str, t0: float, t1: float) -> list[dict]:
    """The events of [t0, t1] with their lane owner and seq, in trace order (a window small enough to draw).
    Needs fill_lod."""
    return db.fetchall("""
        SELECT o.seq, o.owner, e.event_id AS id, e.t, e.type, e.agent, e.role, e.tool, e.content_ref, e.trusted
        FROM (SELECT seq, owner FROM lod_events WHERE trace_id = $trace AND t BETWEEN $t0 AND $t1) o
        JOIN (SELECT * FROM events WHERE trace_id = $trace AND t BETWEEN $t0 AND $t1) e USING (seq)
        ORDER BY o.seq""",
        {"trace": trace_id, "t0": t0, "t1": t1})


def window_edges(db: Database, trace_id: str, t0: float, t1: float) -> list[dict]:
    """Edges with an end in [t0, t1], each end's t and lane owner. Needs fill_lod."""
    return db.fetchall("""
        SELECT type, src_t, src_owner, dst_t, dst_owner FROM lod_edges
        WHERE trace_id = $trace AND (src_t BETWEEN $t0 AND $t1 OR dst_t BETWEEN $t0 AND $t1)""",
        {"trace": trace_id, "t0": t0, "t1": t1})


def locate_events(db: Database, trace_id: str, event_ids: list[str]) -> list[dict]:
    """Each found event's id, seq, t and lane owner, in trace order: where the page moves the view to show it.
    Needs fill_lod."""
    cur = db.cursor()
    with registered(cur, "wanted", event_id=event_ids):
        rows = db.execute("""
            SELECT e.event_id, o.seq, o.t, o.owner
            FROM (SELECT seq, event_id FROM events WHERE trace_id = $trace
                  AND event_id IN (SELECT event_id FROM wanted)) e
            JOIN (SELECT seq, t, owner FROM lod_events WHERE trace_id = $trace) o USING (seq)
            ORDER BY o.seq""", {"trace": trace_id}, cur=cur).fetchall()
    return [dict(zip(("event_id", "seq", "t", "lane_owner"), row)) for row in rows]


def trace_facets(db: Database) -> dict:
    """Distinct systems, topologies and reward channel names across stored traces, for filters and columns."""
    systems = [r["system"] for r in db.fetchall(
        "SELECT DISTINCT system FROM traces WHERE system IS NOT NULL ORDER BY system")]
    topologies = [r["topology"] for r in db.fetchall(
        "SELECT DISTINCT topology FROM traces WHERE topology IS NOT NULL ORDER BY topology")]
    channels = [r["channel"] for r in db.fetchall(
        "SELECT DISTINCT unnest(json_keys(rewards)) AS channel FROM traces ORDER BY channel")]
    return {"systems": systems, "topologies": topologies, "reward_channels": channels}


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


def list_events(db: Database, trace_id: str, type_=None, agent=None, role=None, sort="seq",
                limit=50, offset=0) -> tuple[list[dict], int]:
    """One page of a trace's events (column properties) and the number matching the filters."""
    descending = sort.startswith("-")
    column = EVENT_SORTS.get(sort.lstrip("-"), "seq")
    params = [trace_id, type_ or None, type_ or None, agent or None, agent or None, role or None, role or None]
    total = db.scalar("SELECT count(*) FROM events" + EVENT_FILTER, params)
    rows = db.fetchall(
        "SELECT seq, event_id AS id, t, type, agent, role, tool, trusted FROM events" + EVENT_FILTER
        + f"ORDER BY {column} {'DESC' if descending else 'ASC'} NULLS LAST, seq LIMIT ? OFFSET ?",
        params + [limit, offset],
    )
    return rows, total


def event_facets(db: Database, trace_id: str) -> dict:
    """Counts of a trace's events by type, by agent and by role. Each `agent` row has a `kind`: `agent` for a
    team member (TEAM_MEMBER_EVENT), `tool` for a lane of tool results only, else `person`."""
    def counts(column: str) -> list[dict]:
        return db.fetchall(
            f"SELECT {column} AS value, count(*) AS n FROM events WHERE trace_id = ? "
            f"GROUP BY {column} ORDER BY n DESC, value", [trace_id])
    agents = db.fetchall(
        "SELECT agent AS value, count(*) AS n, CASE WHEN bool_or(" + TEAM_MEMBER_EVENT + ") THEN 'agent' "
        "WHEN bool_and(type = 'tool_result') THEN 'tool' ELSE 'person' END AS kind "
        "FROM events WHERE trace_id = ? GROUP BY agent ORDER BY n DESC, value", [trace_id])
    return {"type": counts("type"), "agent": agents, "role": counts("role")}


def queue_trace_ids(db: Database, queue_id: str) -> list[str]:
    return [row[0] for row in db.execute(
        "SELECT DISTINCT trace_id FROM queue_items WHERE queue_id = ? AND trace_id IN (SELECT trace_id FROM traces) "
        "ORDER BY trace_id", [queue_id]).fetchall()]


# The paper pool.


# Stored analyses (metrics and audit findings).

def read_findings(db: Database, trace_id: str) -> list[dict]:
    rows = db.fetchall("SELECT rule, severity, message, events FROM audit_findings WHERE trace_id = ? ORDER BY seq",
                       [trace_id])
    return [row | {"events": json.loads(row["events"])} for row in rows]


def traces_needing_analysis(db: Database, version: int) -> list[str]:
    """Traces without a stored analysis of this ingest and this analysis version."""
    return [r["trace_id"] for r in db.fetchall(
        "SELECT t.trace_id FROM traces t LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id "
        "WHERE m.trace_id IS NULL OR m.ingested_at <> t.ingested_at OR m.analysis_version <> ? "
        "ORDER BY t.trace_id", [version])]


def audit_matrix(db: Database) -> list[dict]:
    """Per trace: finding counts by rule, with the severity totals."""
    rows = db.fetchall(
        "SELECT m.trace_id, m.errors, m.warnings, m.infos, f.rule, count(f.rule) AS n "
        "FROM trace_metrics m LEFT JOIN audit_findings f ON f.trace_id = m.trace_id "
        "GROUP BY ALL ORDER BY m.trace_id")
    out: dict[str, dict] = {}
    for r in rows:
        entry = out.setdefault(r["trace_id"], {"trace_id": r["trace_id"], "error": r["errors"],
                                               "warning": r["warnings"], "info": r["infos"], "rules": {}})
        if r["rule"]:
            entry["rules"][r["rule"]] = r["n"]
    return list(out.values())


def corpus_points(db: Database) -> list[dict]:
    """One row per analysed trace with the measures the dashboard plots."""
    rows = db.fetchall(
        "SELECT t.trace_id, t.system, t.topology, t.n_agents AS agents, t.tokens, t.wall_clock_s, t.rewards, "
        "m.critical_path_steps, m.parallelism_speedup, m.errors, m.warnings, m.infos "
        "FROM traces t JOIN trace_metrics m ON m.trace_id = t.trace_id AND m.ingested_at = t.ingested_at "
        "ORDER BY t.trace_id")
    return [row | {"rewards": json.loads(row["rewards"])} for row in rows]


def findings_by_rule(db: Database) -> dict[str, int]:
    return {r["rule"]: r["n"] for r in db.fetchall(
        "SELECT rule, count(*) AS n FROM audit_findings GROUP BY rule ORDER BY n DESC, rule")}


# ---- live traces and the ingest log ---------------------------------------------------------------
# Functions taking `cur` run inside the caller's write transaction (a cursor), or on the Database.

def live_items_seen(cur, source: str, source_trace: str, item_ids: list[str]) -> set[str]:
    """Which of these span or record ids of a live trace were received before."""
    with registered(cur, "sent_items", item_id=item_ids):
        rows = execute(cur,
            "SELECT item_id FROM live_items WHERE source = ? AND source_trace_id = ? "
            "AND item_id IN (SELECT item_id FROM sent_items)", [source, source_trace]).fetchall()
    return {row[0] for row in rows}


def live_item_ids(cur, source: str, source_trace: str) -> set[str]:
    """Every span or record id of a live trace received so far."""
    rows = execute(cur, "SELECT item_id FROM live_items WHERE source = ? AND source_trace_id = ?",
                       [source, source_trace]).fetchall()
    return {row[0] for row in rows}


def live_trace(cur, source: str, source_trace: str) -> dict | None:
    cur = execute(cur, "SELECT * FROM live_traces WHERE source = ? AND source_trace_id = ?", [source, source_trace])
    row = cur.fetchone()
    return None if row is None else dict(zip([d[0] for d in cur.description], row))


def live_parts(db: Database, source: str, source_trace: str) -> list[str]:
    """The JSON bodies of a live trace's parts, in the order they arrived."""
    rows = db.execute("SELECT body FROM live_parts WHERE source = ? AND source_trace_id = ? ORDER BY received_at",
                      [source, source_trace]).fetchall()
    return [row[0] for row in rows]


def live_parts_of_source(db: Database, source: str) -> list[tuple[str, str]]:
    """(source trace id, JSON body) of every part held under a source, in the order they arrived."""
    return db.execute("SELECT source_trace_id, body FROM live_parts WHERE source = ? ORDER BY received_at",
                      [source]).fetchall()


def live_traces_unbuilt(db: Database) -> list[tuple[str, str]]:
    """Live traces that received batches after their last build."""
    return db.execute("SELECT source, source_trace_id FROM live_traces WHERE source <> 'otlp_created' "
                      "AND (built_at IS NULL OR built_at < last_received_at) ORDER BY last_received_at").fetchall()


def live_status(db: Database, trace_id: str) -> dict | None:
    """How a trace built from exporter batches stands: receiving until its root span arrived, then
    building until it is stored with every span received, then complete; with the last build's error and
    warnings (none before a build)."""
    rows = db.fetchall("SELECT source, items AS received, root_seen, first_received_at, last_received_at, built_at, "
                       "build_error, build_warnings "
                       "FROM live_traces WHERE trace_id = ?", [trace_id])
    if not rows:
        return None
    row = rows[0]
    row["build_warnings"] = loads(row["build_warnings"]) if row["build_warnings"] is not None else []
    built = row["built_at"] is not None and row["built_at"] >= row["last_received_at"]
    row["status"] = "receiving" if not row["root_seen"] else "complete" if built else "building"
    return row


def receiving_trace_ids(db: Database, trace_ids: list[str]) -> set[str]:
    """Which of these traces are still receiving batches."""
    cur = db.cursor()
    with registered(cur, "shown_ids", trace_id=trace_ids):
        rows = db.execute("SELECT trace_id FROM live_traces WHERE NOT root_seen "
                          "AND trace_id IN (SELECT trace_id FROM shown_ids)", cur=cur).fetchall()
    return {row[0] for row in rows}


INGEST_LOG_COLUMNS = ("id, received_at, endpoint, format, unit, received, used, duplicates, skipped, reasons, "
                      "created, extended, repeated, status, error")


def list_ingest_log(db: Database, limit: int = 50, offset: int = 0, endpoint: str | None = None,
                    trace_id: str | None = None) -> tuple[list[dict], int]:
    """Receipts, newest first; optionally of one endpoint or naming one trace (created, extended or repeated)."""
    where = "(? IS NULL OR endpoint = ?) AND (? IS NULL OR list_contains(created::VARCHAR[], ?) " \
            "OR list_contains(extended::VARCHAR[], ?) OR list_contains(repeated::VARCHAR[], ?))"
    params = [endpoint, endpoint, trace_id, trace_id, trace_id, trace_id]
    total = db.scalar(f"SELECT count(*) FROM ingest_log WHERE {where}", params)
    rows = db.fetchall(f"SELECT {INGEST_LOG_COLUMNS} FROM ingest_log WHERE {where} "
                       "ORDER BY received_at DESC, id LIMIT ? OFFSET ?", params + [limit, offset])
    for row in rows:
        for key in ("reasons", "created", "extended", "repeated"):
            row[key] = json.loads(row[key])
        row["received_at"] = iso_utc(row["received_at"])
    return rows, total


def ingest_endpoints(db: Database) -> list[str]:
    return [row[0] for row in db.execute("SELECT DISTINCT endpoint FROM ingest_log ORDER BY 1").fetchall()]


# Review queues: which events a queue holds, who was given what, what was labelled in it.

QUEUE_CANDIDATES = """
    SELECT e.trace_id, e.event_id, e.seq, e.type, e.role, e.agent, e.tool, t.system, t.topology, t.task_id
    FROM events e JOIN traces t USING (trace_id)
    WHERE (len($trace_ids) = 0 OR e.trace_id IN (SELECT unnest($trace_ids)))
      AND (len($systems) = 0 OR t.system IN (SELECT unnest($systems)))
      AND (len($topologies) = 0 OR t.topology IN (SELECT unnest($topologies)))
      AND (len($tasks) = 0 OR t.task_id IN (SELECT unnest($tasks)))
      AND (len($findings) = 0 OR e.trace_id IN (
           SELECT trace_id FROM audit_findings WHERE rule IN (SELECT unnest($findings))))
      AND (len($event_types) = 0 OR e.type IN (SELECT unnest($event_types)))
      AND (len($roles) = 0 OR e.role IN (SELECT unnest($roles)))
      AND (len($agents) = 0 OR e.agent IN (SELECT unnest($agents)))
      AND (len($tools) = 0 OR e.tool IN (SELECT unnest($tools)))
    ORDER BY e.trace_id, e.seq
"""


def queue_candidates(db: Database, lists: dict[str, list[str]]) -> list[dict]:
    """Events matching a queue's filter (each named list empty: no restriction), in trace and event order."""
    return db.fetchall(QUEUE_CANDIDATES, {name: list(values) for name, values in lists.items()})


def insert_queue(cur, queue_id: str, name: str, spec: str, created_by: str | None, created_at,
                 items: list[tuple[str, str]]) -> None:
    execute(cur, "INSERT INTO queues VALUES (?, ?, ?, ?, ?)", [queue_id, name, spec, created_by, created_at])
    with registered(cur, "new_items", trace_id=[t for t, _ in items], event_id=[e for _, e in items],
                    item_id=pa.array(range(1, len(items) + 1), pa.int64())):
        execute(cur, "INSERT INTO queue_items SELECT ?, item_id, trace_id, event_id FROM new_items", [queue_id])


def read_queue(db: Database, queue_id: str) -> dict | None:
    return db.fetchone("SELECT queue_id, name, spec, created_by, created_at FROM queues WHERE queue_id = ?",
                       [queue_id])


def list_queues(db: Database) -> list[dict]:
    return db.fetchall("SELECT queue_id, name, spec, created_by, created_at FROM queues ORDER BY created_at DESC")


def list_queue_items(db: Database, queue_id: str) -> list[dict]:
    return db.fetchall("SELECT item_id, trace_id, event_id FROM queue_items WHERE queue_id = ? ORDER BY item_id",
                       [queue_id])


def queue_item_count(db: Database, queue_id: str) -> int:
    return db.scalar("SELECT count(*) FROM queue_items WHERE queue_id = ?", [queue_id])


def queue_item(db: Database, queue_id: str, item_id: int) -> dict | None:
    return db.fetchone("SELECT item_id, trace_id, event_id FROM queue_items WHERE queue_id = ? AND item_id = ?",
                       [queue_id, item_id])


def queue_items_of_event(db: Database, trace_id: str, event_id: str) -> list[dict]:
    """The queues (and items) an event is in."""
    return db.fetchall("SELECT queue_id, item_id FROM queue_items WHERE trace_id = ? AND event_id = ?",
                       [trace_id, event_id])


# An assignment the reviewer has labelled in the queue, or skipped, is not open.
_UNLABELLED = ("NOT EXISTS (SELECT 1 FROM annotations l WHERE l.queue_id = a.queue_id AND l.trace_id = i.trace_id "
               "AND l.event_id = i.event_id AND l.reviewer = a.reviewer)")


def open_assignment(cur, queue_id: str, reviewer: str) -> dict | None:
    """The earliest item `next` gave the reviewer that they have neither labelled in the queue nor skipped."""
    return _assignment(cur, queue_id, reviewer, "a.skipped_at IS NULL", "a.item_id")


def skipped_assignment(cur, queue_id: str, reviewer: str) -> dict | None:
    """The reviewer's unlabelled item skipped longest ago: what `next` gives once nothing else is left."""
    return _assignment(cur, queue_id, reviewer, "a.skipped_at IS NOT NULL", "a.skipped_at, a.item_id")


def _assignment(cur, queue_id: str, reviewer: str, skipped: str, order: str) -> dict | None:
    """The first unlabelled item given to the reviewer that matches `skipped`, in `order` (constants)."""
    row = execute(cur,
        "SELECT a.item_id, i.trace_id, i.event_id FROM queue_assignments a "
        "JOIN queue_items i ON i.queue_id = a.queue_id AND i.item_id = a.item_id "
        f"WHERE a.queue_id = ? AND a.reviewer = ? AND {skipped} AND {_UNLABELLED} ORDER BY {order} LIMIT 1",
        [queue_id, reviewer]).fetchone()
    return dict(zip(("item_id", "trace_id", "event_id"), row)) if row else None


def next_unassigned(cur, queue_id: str, reviewer: str, overlap: int) -> dict | None:
    """The first item in queue order given to fewer than `overlap` reviewers, never to this one, and not
    labelled by them in the queue already (from the trace page)."""
    row = execute(cur,
        "SELECT i.item_id, i.trace_id, i.event_id FROM queue_items i "
        "LEFT JOIN queue_assignments a ON a.queue_id = i.queue_id AND a.item_id = i.item_id "
        "WHERE i.queue_id = $queue AND NOT EXISTS (SELECT 1 FROM annotations l WHERE l.queue_id = i.queue_id "
        "AND l.trace_id = i.trace_id AND l.event_id = i.event_id AND l.reviewer = $reviewer) "
        "GROUP BY i.item_id, i.trace_id, i.event_id "
        "HAVING count(a.reviewer) < $overlap AND count(a.reviewer) FILTER (WHERE a.reviewer = $reviewer) = 0 "
        "ORDER BY i.item_id LIMIT 1", {"queue": queue_id, "overlap": overlap, "reviewer": reviewer}).fetchone()
    return dict(zip(("item_id", "trace_id", "event_id"), row)) if row else None


def skip(cur, queue_id: str, item_id: int, reviewer: str, skipped_at) -> bool:
    """Mark the reviewer's assignment of an item skipped; False when the item was never given to them."""
    found = execute(cur, "SELECT count(*) FROM queue_assignments WHERE queue_id = ? AND item_id = ? AND reviewer = ?",
                        [queue_id, item_id, reviewer]).fetchone()[0]
    if found:
        execute(cur, "UPDATE queue_assignments SET skipped_at = ? WHERE queue_id = ? AND item_id = ? AND reviewer = ?",
                    [skipped_at, queue_id, item_id, reviewer])
    return bool(found)


def reviewer_names(db: Database) -> list[str]:
    return [row[0] for row in db.execute("SELECT name FROM reviewers ORDER BY name").fetchall()]


def assign(cur, queue_id: str, item_id: int, reviewer: str, assigned_at) -> None:
    execute(cur, "INSERT INTO queue_assignments (queue_id, item_id, reviewer, assigned_at) VALUES (?, ?, ?, ?)",
                [queue_id, item_id, reviewer, assigned_at])
