"""Level-of-detail SQL: a large trace drawn a window at a time, as bins per lane and time bucket and edge bundles
(counted by DuckDB), or event by event once a window holds few enough; the lanes each event is drawn on."""


import pyarrow as pa

from app.store.db import Database
from app.store.lists import registered
from app.store.sql import execute
from app.store.traces import TEAM_MEMBER_EVENT

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
        SELECT min(seq) FROM ev WHERE type <> 'tool_result' GROUP BY agent
        UNION SELECT min(seq) FROM ev WHERE type = 'tool_result' GROUP BY agent
        UNION SELECT min(seq) FROM ev WHERE type = 'spawn' AND to_agent <> agent GROUP BY to_agent
        UNION SELECT min(seq) FROM ev WHERE role IS NOT NULL AND type <> 'tool_result'
            AND NOT (type = 'spawn' AND to_agent IS NOT NULL) GROUP BY agent
        UNION SELECT min(seq) FROM ev WHERE type = 'despawn' GROUP BY coalesce(nullif(to_agent, ''), agent)
        UNION SELECT arg_min(seq, t) FROM ev WHERE """ + TEAM_MEMBER_EVENT + """ GROUP BY agent
        UNION SELECT arg_max(seq, t) FROM ev WHERE """ + TEAM_MEMBER_EVENT + """ GROUP BY agent
        UNION SELECT arg_max(seq, t) FROM ev WHERE type = 'return' AND agent <> 'user' GROUP BY agent
    """
    # The trace's events read once: on a lake each read of a table costs its catalog round trips (a read per part
    # took 85-105 ms at 20,000-100,000 events, this one 25-50); on a file it costs what the reads did.
    rows = db.execute(f"""
        WITH ev AS MATERIALIZED (
            SELECT seq, event_id, t, type, agent, role, to_agent FROM events WHERE trace_id = $trace)
        SELECT event_id, t, type, agent, role, to_agent FROM ev WHERE seq IN ({seqs}) ORDER BY seq""",
                      {"trace": trace_id}).fetchall()
    keys = ("id", "t", "type", "agent", "role", "to")
    return [{k: v for k, v in zip(keys, row) if v is not None} for row in rows]


def lanes_and_span(db: Database, trace_id: str) -> tuple[dict[str, int], tuple[float, float] | None]:
    """Every lane owner (see EVENT_OWNERS) in order of its first event, with the number of events on its lane, and
    the first and last event times (None without events), in one read. Needs fill_lod."""
    rows = db.execute("SELECT owner, count(*), min(t), max(t) FROM lod_events WHERE trace_id = ? GROUP BY owner "
                      "ORDER BY min(seq)", [trace_id]).fetchall()
    span = (min(row[2] for row in rows), max(row[3] for row in rows)) if rows else None
    return {owner: n for owner, n, *_ in rows}, span


def talk_partners(db: Database, trace_id: str, agent: str) -> list[str]:
    """The lane owners at the other end of an edge from or to an event on `agent`'s lane. Needs fill_lod."""
    rows = db.execute("""
        SELECT dst_owner FROM lod_edges WHERE trace_id = $trace AND src_owner = $agent
        UNION SELECT src_owner FROM lod_edges WHERE trace_id = $trace AND dst_owner = $agent""",
                      {"trace": trace_id, "agent": agent}).fetchall()
    return sorted(row[0] for row in rows)


def window_count(db: Database, trace_id: str, t0: float, t1: float, owners: list[str] | None = None) -> int:
    """How many events fall in [t0, t1] (on the lanes of `owners` only, when given). Needs fill_lod."""
    if owners is None:
        return db.scalar("SELECT count(*) FROM lod_events WHERE trace_id = ? AND t BETWEEN ? AND ?",
                         [trace_id, t0, t1])
    cur = db.reader()
    with registered(cur, "kept_owners", owner=owners):
        return db.execute("""
            SELECT count(*) FROM lod_events WHERE trace_id = $trace AND t BETWEEN $t0 AND $t1
            AND owner IN (SELECT owner FROM kept_owners)""", {"trace": trace_id, "t0": t0, "t1": t1},
            cur=cur).fetchall()[0][0]  # all taken: a result left open keeps the cursor's transaction open


LOD_KEPT = "SELECT count(*) FROM (SELECT 1 FROM lod_events WHERE trace_id = ? LIMIT 1)"


def lod_ready(db: Database, trace_id: str) -> bool:
    """Whether the trace's lanes per event and edge (lod_events, lod_edges) are kept."""
    return db.scalar(LOD_KEPT, [trace_id]) > 0


def lod_ready_in(cur, trace_id: str) -> bool:
    """lod_ready inside a write transaction."""
    return execute(cur, LOD_KEPT, [trace_id]).fetchone()[0] > 0


# What fill_lod keeps: each event's lane, and both ends' times and lanes of each edge between events.
LOD_EVENT_ROWS = f"SELECT seq, t, type, owner FROM ({EVENT_OWNERS})"
LOD_EDGE_ROWS = f"""
    WITH ends AS (SELECT event_id, t, owner FROM ({EVENT_OWNERS}))
    SELECT x.type, s.t AS src_t, s.owner AS src_owner, d.t AS dst_t, d.owner AS dst_owner
    FROM (SELECT type, src, dst FROM edges WHERE trace_id = $trace) x
    JOIN ends s ON s.event_id = x.src JOIN ends d ON d.event_id = x.dst"""


def lod_rows(db: Database, trace_id: str) -> tuple[pa.Table, pa.Table]:
    """The rows fill_lod keeps (events', edges'), read on the committed store, outside any write: their joins over
    every event and edge take a third of a second at 100,000 events, seconds at a million, and under the write
    lock every other write (a reviewer's save) would wait for them."""
    return tuple(db.arrow(sql, {"trace": trace_id}) for sql in (LOD_EVENT_ROWS, LOD_EDGE_ROWS))


def fill_lod(cur, trace_id: str, rows: tuple[pa.Table, pa.Table] | None = None) -> None:
    """Keep the lane owner of every event and both ends of every edge of a trace, inside a write transaction: the
    `rows` lod_rows read of this very version of the trace, else read here."""
    events, edges = rows or tuple(execute(cur, sql, {"trace": trace_id}).to_arrow_table()
                                  for sql in (LOD_EVENT_ROWS, LOD_EDGE_ROWS))
    for table, rows_of in (("lod_events", events), ("lod_edges", edges)):
        with registered(cur, "lod_rows", **{name: rows_of.column(name).combine_chunks()
                                             for name in rows_of.column_names}):
            execute(cur, f"INSERT INTO {table} SELECT $trace, * FROM lod_rows", {"trace": trace_id})


def event_bins(db: Database, trace_id: str, rows: dict[str, int], t0: float, t1: float, buckets: int,
               values: dict[int, float] | None = None) -> list[tuple]:
    """Events of [t0, t1] counted per (row, time bucket): rows map each lane owner to a row of the plot;
    `buckets` equal buckets span the window. Per bin: row, bucket, events, first and last t, the most common
    event type (of equals, the one that comes first) and, given per-event `values` (seq -> number), their mean
    over the bin's events that have one.
    Needs fill_lod."""
    cur = db.reader()
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
                 limit: int, in_view: tuple[int, int] | None = None) -> list[tuple]:
    """Edges leaving events of [t0, t1] bundled per (type, source row, target row, source time bucket): per
    bundle its type, rows, edges, mean source and target t; the `limit` heaviest bundles, of those with an end in
    the rows `in_view` (first, last) when given. Needs fill_lod."""
    first, last = in_view or (0, max(rows.values(), default=0))
    cur = db.reader()
    with registered(cur, "lane_rows", owner=list(rows), row=pa.array(list(rows.values()), pa.int32())):
        return db.execute("""
            SELECT x.type, rs.row AS src_row, rd.row AS dst_row, count(*) AS edges, avg(x.src_t), avg(x.dst_t)
            FROM lod_edges x JOIN lane_rows rs ON rs.owner = x.src_owner JOIN lane_rows rd ON rd.owner = x.dst_owner
            WHERE x.trace_id = $trace AND x.src_t BETWEEN $t0 AND $t1
              AND (rs.row BETWEEN $first AND $last OR rd.row BETWEEN $first AND $last)
            GROUP BY x.type, rs.row, rd.row, least(floor((x.src_t - $t0) / $width * $buckets), $buckets - 1)
            ORDER BY edges DESC LIMIT $limit""",
            {"trace": trace_id, "t0": t0, "t1": t1, "width": max(t1 - t0, 1e-12), "buckets": buckets,
             "limit": limit, "first": first, "last": last}, cur=cur).fetchall()


WINDOW_EVENTS = """
    SELECT o.seq, o.owner, e.event_id AS id, e.t, e.type, e.agent, e.role, e.tool, e.content_ref, e.trusted
    FROM (SELECT seq, owner FROM lod_events WHERE trace_id = $trace AND t BETWEEN $t0 AND $t1 {kept}) o
    JOIN (SELECT * FROM events WHERE trace_id = $trace AND t BETWEEN $t0 AND $t1) e USING (seq)
    ORDER BY o.seq"""


def window_events(db: Database, trace_id: str, t0: float, t1: float, owners: list[str] | None = None) -> list[dict]:
    """The events of [t0, t1] (on the lanes of `owners` only, when given) with their lane owner and seq, in trace
    order (a window small enough to draw). Needs fill_lod."""
    params = {"trace": trace_id, "t0": t0, "t1": t1}
    if owners is None:
        return db.fetchall(WINDOW_EVENTS.format(kept=""), params)
    cur = db.reader()
    with registered(cur, "kept_owners", owner=owners):
        rows = db.execute(WINDOW_EVENTS.format(kept="AND owner IN (SELECT owner FROM kept_owners)"), params, cur=cur)
        keys = [column[0] for column in rows.description]
        return [dict(zip(keys, row)) for row in rows.fetchall()]


def window_edges(db: Database, trace_id: str, t0: float, t1: float) -> list[dict]:
    """Edges with an end in [t0, t1], each end's t and lane owner. Needs fill_lod."""
    return db.fetchall("""
        SELECT type, src_t, src_owner, dst_t, dst_owner FROM lod_edges
        WHERE trace_id = $trace AND (src_t BETWEEN $t0 AND $t1 OR dst_t BETWEEN $t0 AND $t1)""",
        {"trace": trace_id, "t0": t0, "t1": t1})


def locate_events(db: Database, trace_id: str, event_ids: list[str]) -> list[dict]:
    """Each found event's id, seq, t and lane owner, in trace order: where the page moves the view to show it.
    Needs fill_lod."""
    cur = db.reader()
    with registered(cur, "wanted", event_id=event_ids):
        rows = db.execute("""
            SELECT e.event_id, o.seq, o.t, o.owner
            FROM (SELECT seq, event_id FROM events WHERE trace_id = $trace
                  AND event_id IN (SELECT event_id FROM wanted)) e
            JOIN (SELECT seq, t, owner FROM lod_events WHERE trace_id = $trace) o USING (seq)
            ORDER BY o.seq""", {"trace": trace_id}, cur=cur).fetchall()
    return [dict(zip(("event_id", "seq", "t", "lane_owner"), row)) for row in rows]
