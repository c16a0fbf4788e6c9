"""Reads: one function per query, each one literal SQL string with bound parameters."""

import json
import math

from app.db import Database

# Sortable columns of the trace list: public name -> SQL expression (never user text).
TRACE_SORTS = {
    "trace_id": "trace_id",
    "task_id": "task_id",
    "system": "system",
    "topology": "topology",
    "events": "n_events",
    "edges": "n_edges",
    "agents": "n_agents",
    "tokens": "tokens",
    "wall_clock_s": "wall_clock_s",
    "ingested_at": "ingested_at",
}

TRACE_SUMMARY_COLUMNS = """
    trace_id, task_id, system, topology, rewards, costs, metrics,
    n_events AS events, n_edges AS edges, n_agents AS agents, tokens, wall_clock_s, ingested_at
"""

TRACE_FILTER = """
    WHERE (?::VARCHAR IS NULL OR topology = ?)
      AND (?::VARCHAR IS NULL OR system = ?)
      AND (?::VARCHAR IS NULL OR trace_id ILIKE ? OR task_id ILIKE ? OR system ILIKE ?)
"""


def _filter_params(topology: str | None, system: str | None, q: str | None) -> list:
    like = f"%{q}%" if q else None
    return [topology, topology, system, system, q or None, like, like, like]


def _summary(row: dict) -> dict:
    for key in ("rewards", "costs", "metrics"):
        row[key] = json.loads(row[key]) if row[key] is not None else None
    row["ingested_at"] = row["ingested_at"].isoformat() + "Z"
    return row


def list_traces(db: Database, topology=None, system=None, q=None, sort="trace_id",
                limit=50, offset=0) -> tuple[list[dict], int]:
    """One page of trace summaries and the number of traces matching the filters.

    `sort` is a key of TRACE_SORTS, prefixed with "-" for descending order.
    """
    descending = sort.startswith("-")
    order = f"{TRACE_SORTS[sort.lstrip('-')]} {'DESC' if descending else 'ASC'} NULLS LAST, trace_id"
    params = _filter_params(topology, system, q)
    total = db.scalar("SELECT count(*) FROM traces" + TRACE_FILTER, params)
    rows = db.fetchall(
        "SELECT" + TRACE_SUMMARY_COLUMNS + "FROM traces" + TRACE_FILTER + "ORDER BY " + order + " LIMIT ? OFFSET ?",
        params + [limit, offset],
    )
    return [_summary(row) for row in rows], total


def read_trace_summary(db: Database, trace_id: str) -> dict | None:
    row = db.fetchone("SELECT" + TRACE_SUMMARY_COLUMNS + "FROM traces WHERE trace_id = ?", [trace_id])
    return _summary(row) if row else None


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
    trace["events"] = read_events(db, trace_id)
    trace["edges"] = read_edges(db, trace_id)
    trace["rewards"] = json.loads(head["rewards"])
    trace["costs"] = json.loads(head["costs"])
    if head["metrics"] is not None:
        trace["metrics"] = json.loads(head["metrics"])
    return trace


def read_events(db: Database, trace_id: str) -> list[dict]:
    """Events of a trace rebuilt from their columns and `extra`, in document order."""
    rows = db.execute(
        """
        SELECT event_id, t, t_is_int, type, agent, role, from_agent, to_agent, tool, content_ref, trusted,
               extra, key_order
        FROM events WHERE trace_id = ? ORDER BY seq
        """,
        [trace_id],
    ).fetchall()
    events = []
    for event_id, t, t_is_int, type_, agent, role, from_, to, tool, content_ref, trusted, extra, order in rows:
        event = {"id": event_id, "t": int(t) if t_is_int and math.isfinite(t) else t, "type": type_, "agent": agent}
        for key, value in (("role", role), ("from", from_), ("to", to), ("tool", tool),
                           ("content_ref", content_ref), ("trusted", trusted)):
            if value is not None:
                event[key] = value
        if extra is not None:
            event.update(json.loads(extra))
        events.append({key: event[key] for key in order} if order else event)
    return events


def read_edges(db: Database, trace_id: str) -> list[dict]:
    rows = db.execute(
        "SELECT src, dst, type FROM edges WHERE trace_id = ? ORDER BY seq", [trace_id]
    ).fetchall()
    return [{"src": src, "dst": dst, "type": type_} for src, dst, type_ in rows]
