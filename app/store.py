"""Writes of traces: each request's traces stored whole in one transaction, events and edges in bulk."""

import json
import math
from datetime import datetime, timezone

import pyarrow as pa
from sqlmodel import Session, col, delete, select

from app.db import Database
from app.models import Trace

# Event properties with their own column, in the order an event is rebuilt; the rest go to `extra`.
EVENT_COLUMN_KEYS = ("id", "t", "type", "agent", "role", "from", "to", "tool", "content_ref", "trusted")
EVENT_COLUMNS = set(EVENT_COLUMN_KEYS)
EXACT_FLOAT_INT = 2**53


class TracesExist(Exception):
    """Some trace ids are already stored and the caller asked neither to replace nor to skip them."""

    def __init__(self, trace_ids: list[str]):
        self.trace_ids = trace_ids
        super().__init__(f"already stored: {', '.join(trace_ids)} (use ?replace=true to replace)")


def store_traces(db: Database, traces: list[dict], existing: str = "error") -> tuple[list[str], list[str]]:
    """Store valid traces in one transaction; `existing` is "error", "replace" or "skip".

    Returns (stored ids, skipped ids). Raises TracesExist when `existing` is "error" and any id is taken.
    """
    ids = [trace["trace_id"] for trace in traces]
    with db.write_lock, Session(db.engine) as session:
        taken = set(session.exec(select(Trace.trace_id).where(col(Trace.trace_id).in_(ids))).all())
        if taken and existing == "error":
            raise TracesExist([i for i in ids if i in taken])
        if existing == "skip":
            traces = [trace for trace in traces if trace["trace_id"] not in taken]
        elif taken:
            _delete(session, sorted(taken))
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        session.add_all(_trace_row(trace, now) for trace in traces)
        session.flush()
        raw = session.connection().connection.driver_connection
        _bulk_insert(raw, "events", _event_columns(traces))
        _bulk_insert(raw, "edges", _edge_columns(traces))
        session.commit()
    stored = [trace["trace_id"] for trace in traces]
    return stored, [i for i in ids if i not in set(stored)]


def delete_trace(db: Database, trace_id: str) -> bool:
    """Remove a trace with its events and edges; False when no such trace."""
    with db.write_lock, Session(db.engine) as session:
        if session.get(Trace, trace_id) is None:
            return False
        _delete(session, [trace_id])
        session.commit()
    return True


def _delete(session: Session, trace_ids: list[str]) -> None:
    raw = session.connection().connection.driver_connection
    for table in ("events", "edges"):
        raw.execute(f"DELETE FROM {table} WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))", [trace_ids])
    session.exec(delete(Trace).where(col(Trace.trace_id).in_(trace_ids)))


def _bulk_insert(raw, table: str, columns: dict[str, list]) -> None:
    arrow = pa.table(columns)
    raw.register("bulk_rows", arrow)
    try:
        raw.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM bulk_rows")
    finally:
        raw.unregister("bulk_rows")


def _trace_row(trace: dict, now: datetime) -> Trace:
    events = trace["events"]
    costs = trace["costs"]
    return Trace(
        trace_id=trace["trace_id"],
        task_id=trace["task_id"],
        system=trace.get("system"),
        topology=trace.get("topology"),
        rewards=json.dumps(trace["rewards"]),
        costs=json.dumps(costs),
        metrics=json.dumps(trace["metrics"]) if "metrics" in trace else None,
        n_events=len(events),
        n_edges=len(trace["edges"]),
        n_agents=len({e["agent"] for e in events if e["type"] != "tool_result"}),
        t_max=max(e["t"] for e in events),
        tokens=costs["tokens"],
        wall_clock_s=costs["wall_clock_s"],
        ingested_at=now,
    )


def _event_columns(traces: list[dict]) -> dict[str, list]:
    """Column lists of every event of every trace, in document order."""
    cols = {name: [] for name in (
        "trace_id", "seq", "event_id", "t", "t_is_int", "type", "agent", "role",
        "from_agent", "to_agent", "tool", "content_ref", "trusted", "extra", "key_order")}
    (trace_id, seq, event_id, t_col, t_is_int, type_, agent, role,
     from_, to, tool, content_ref, trusted, extra, key_order) = cols.values()
    for trace in traces:
        tid = trace["trace_id"]
        for i, ev in enumerate(trace["events"]):
            t = ev["t"]
            others = {k: v for k, v in ev.items() if k not in EVENT_COLUMNS}
            if isinstance(t, int) and abs(t) > EXACT_FLOAT_INT:
                others["t"] = t  # beyond a double's exact range: keep the integer itself
            trace_id.append(tid)
            seq.append(i)
            event_id.append(ev["id"])
            t_col.append(_as_double(t))
            t_is_int.append(isinstance(t, int))
            type_.append(ev["type"])
            agent.append(ev["agent"])
            role.append(ev.get("role"))
            from_.append(ev.get("from"))
            to.append(ev.get("to"))
            tool.append(ev.get("tool"))
            content_ref.append(ev.get("content_ref"))
            trusted.append(ev.get("trusted"))
            extra.append(json.dumps(others) if others else None)
            keys = list(ev)
            rebuilt = [k for k in EVENT_COLUMN_KEYS if k in ev] + [k for k in others if k not in EVENT_COLUMNS]
            key_order.append(None if keys == rebuilt else keys)
    return cols


def _as_double(t: float) -> float:
    """`t` as a DOUBLE for sorting and plotting; integers too large for one become infinity."""
    try:
        return float(t)
    except OverflowError:
        return math.inf


def _edge_columns(traces: list[dict]) -> dict[str, list]:
    cols = {"trace_id": [], "seq": [], "src": [], "dst": [], "type": []}
    for trace in traces:
        tid = trace["trace_id"]
        for i, edge in enumerate(trace["edges"]):
            cols["trace_id"].append(tid)
            cols["seq"].append(i)
            cols["src"].append(edge["src"])
            cols["dst"].append(edge["dst"])
            cols["type"].append(edge["type"])
    return cols
