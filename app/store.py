"""Writes of traces: each request's traces stored whole in one transaction, events and edges in bulk."""

import math
from datetime import datetime, timezone

import pyarrow as pa

from app.db import Database
from app.documents import dumps
from app.gcpause import paused_gc
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
    with paused_gc(), db.transaction() as cur:
        taken = {row[0] for row in cur.execute(
            "SELECT trace_id FROM traces WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))", [ids]).fetchall()}
        if taken and existing == "error":
            raise TracesExist([i for i in ids if i in taken])
        if existing == "skip":
            traces = [trace for trace in traces if trace["trace_id"] not in taken]
        elif taken:
            _delete(cur, sorted(taken))
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        rows = [_trace_row(trace, now) for trace in traces]
        _bulk_insert(cur, "traces", {name: [row[name] for row in rows] for name in Trace.model_fields})
        _bulk_insert(cur, "events", _event_columns(traces))
        _bulk_insert(cur, "edges", _edge_columns(traces))
    stored = [trace["trace_id"] for trace in traces]
    return stored, [i for i in ids if i not in set(stored)]


def delete_trace(db: Database, trace_id: str) -> bool:
    """Remove a trace with its events, edges and stored analysis; False when no such trace."""
    with db.transaction() as cur:
        if not cur.execute("SELECT count(*) FROM traces WHERE trace_id = ?", [trace_id]).fetchone()[0]:
            return False
        _delete(cur, [trace_id])
    return True


def _delete(cur, trace_ids: list[str]) -> None:
    for table in ("events", "edges", "trace_metrics", "audit_findings", "traces"):
        cur.execute(f"DELETE FROM {table} WHERE trace_id IN (SELECT unnest(?::VARCHAR[]))", [trace_ids])


def _bulk_insert(raw, table: str, columns: dict[str, list]) -> None:
    arrow = pa.table(columns)
    raw.register("bulk_rows", arrow)
    try:
        raw.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT * FROM bulk_rows")
    finally:
        raw.unregister("bulk_rows")


def _trace_row(trace: dict, now: datetime) -> dict:
    """A `traces` row as a dict keyed like the Trace model (building model objects costs more than the insert)."""
    events = trace["events"]
    costs = trace["costs"]
    return dict(
        trace_id=trace["trace_id"],
        task_id=trace["task_id"],
        system=trace.get("system"),
        topology=trace.get("topology"),
        rewards=dumps(trace["rewards"]),
        costs=dumps(costs),
        metrics=dumps(trace["metrics"]) if "metrics" in trace else None,
        n_events=len(events),
        n_edges=len(trace["edges"]),
        n_agents=len({e["agent"] for e in events if e["type"] != "tool_result"}),
        t_max=max(e["t"] for e in events),
        tokens=costs["tokens"],
        wall_clock_s=costs["wall_clock_s"],
        ingested_at=now,
    )


def _event_columns(traces: list[dict]) -> dict[str, list]:
    """Column lists of every event of every trace, in document order (column-wise for speed)."""
    events = [ev for trace in traces for ev in trace["events"]]
    extra, key_order = [], []
    layouts: dict[tuple, tuple[tuple, list | None]] = {}  # events of a trace share few key layouts
    for ev in events:
        keys = tuple(ev)
        layout = layouts.get(keys)
        if layout is None:
            others = tuple(k for k in keys if k not in EVENT_COLUMNS)
            rebuilt = tuple(k for k in EVENT_COLUMN_KEYS if k in keys) + others
            layout = layouts[keys] = (others, None if rebuilt == keys else list(keys))
        others, order = layout
        t = ev["t"]
        if type(t) is int and abs(t) > EXACT_FLOAT_INT:
            extra.append(dumps({**{k: ev[k] for k in others}, "t": t}))  # keep the exact integer
        else:
            extra.append(dumps({k: ev[k] for k in others}) if others else None)
        key_order.append(order)
    return {
        "trace_id": [trace["trace_id"] for trace in traces for _ in trace["events"]],
        "seq": [i for trace in traces for i in range(len(trace["events"]))],
        "event_id": [ev["id"] for ev in events],
        "t": [_as_double(ev["t"]) for ev in events],
        "t_is_int": [type(ev["t"]) is int for ev in events],
        "type": [ev["type"] for ev in events],
        "agent": [ev["agent"] for ev in events],
        "role": [ev.get("role") for ev in events],
        "from_agent": [ev.get("from") for ev in events],
        "to_agent": [ev.get("to") for ev in events],
        "tool": [ev.get("tool") for ev in events],
        "content_ref": [ev.get("content_ref") for ev in events],
        "trusted": [ev.get("trusted") for ev in events],
        "extra": extra,
        "key_order": key_order,
    }


def _as_double(t: float) -> float:
    """`t` as a DOUBLE for sorting and plotting; integers too large for one become infinity."""
    if type(t) is float:
        return t
    try:
        return float(t)
    except OverflowError:
        return math.inf


def _edge_columns(traces: list[dict]) -> dict[str, list]:
    edges = [edge for trace in traces for edge in trace["edges"]]
    return {
        "trace_id": [trace["trace_id"] for trace in traces for _ in trace["edges"]],
        "seq": [i for trace in traces for i in range(len(trace["edges"]))],
        "src": [edge["src"] for edge in edges],
        "dst": [edge["dst"] for edge in edges],
        "type": [edge["type"] for edge in edges],
    }
