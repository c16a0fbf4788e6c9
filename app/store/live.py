"""Live traces SQL: what exporters have sent of a run still arriving (its parts and items), and its build
status. Functions taking `cur` run inside the caller's write transaction."""

import zlib

from app.domain.jsontext import dumps, loads
from app.store.db import Database
from app.store.lists import registered
from app.store.sql import execute


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


# Parts are stored zlib-compressed at this level (migration 0025): the fastest, a 300 KB part in some 2 ms, a sixth
# of its size, which its insert and the commit's flush no longer write.
PACK_LEVEL = 1
ZLIB_FIRST_BYTE = b"x"  # what zlib data starts with; a part stored before 0025 is JSON text, '{' or '['


def _unpacked(body: bytes) -> str:
    return (zlib.decompress(body) if body[:1] == ZLIB_FIRST_BYTE else body).decode()


def live_parts(db: Database, source: str, source_trace: str) -> list[str]:
    """The JSON bodies of a live trace's parts, in the order they arrived."""
    rows = db.execute("SELECT body FROM live_parts WHERE source = ? AND source_trace_id = ? ORDER BY received_at",
                      [source, source_trace]).fetchall()
    return [_unpacked(row[0]) for row in rows]


def live_parts_of_source(db: Database, source: str) -> list[tuple[str, str]]:
    """(source trace id, JSON body) of every part held under a source, in the order they arrived."""
    rows = db.execute("SELECT source_trace_id, body FROM live_parts WHERE source = ? ORDER BY received_at",
                      [source]).fetchall()
    return [(source_trace, _unpacked(body)) for source_trace, body in rows]


def live_traces_unbuilt(db: Database) -> list[tuple[str, str]]:
    """Live traces that received batches after their last build."""
    return db.execute("SELECT source, source_trace_id FROM live_traces WHERE source <> 'otlp_created' "
                      "AND (built_at IS NULL OR built_at < last_received_at) ORDER BY last_received_at").fetchall()


def live_status(db: Database, trace_id: str) -> dict | None:
    """How a trace built from exporter batches stands: receiving until its root span arrived, then
    building until it is stored with every span received, then complete; with the last build's error and
    warnings (none before a build). A run that came under several trace ids counts all of them.
    """
    rows = db.fetchall("SELECT min(source) AS source, sum(items)::INTEGER AS received, bool_or(root_seen) AS root_seen, "
                       "min(first_received_at) AS first_received_at, max(last_received_at) AS last_received_at, "
                       "CASE WHEN count(built_at) = count(*) THEN min(built_at) END AS built_at, "
                       "max(build_error) AS build_error, any_value(build_warnings) AS build_warnings "
                       "FROM live_traces WHERE trace_id = ? HAVING count(*) > 0", [trace_id])
    if not rows:
        return None
    row = rows[0]
    row["build_warnings"] = loads(row["build_warnings"]) if row["build_warnings"] is not None else []
    built = row["built_at"] is not None and row["built_at"] >= row["last_received_at"]
    row["status"] = "receiving" if not row["root_seen"] else "complete" if built else "building"
    return row


def receiving_trace_ids(db: Database, trace_ids: list[str]) -> set[str]:
    """Which of these traces (a page of them) are still receiving batches."""
    rows = db.fetchall("SELECT trace_id FROM live_traces WHERE NOT root_seen AND list_contains(?, trace_id)",
                       [trace_ids])
    return {row["trace_id"] for row in rows}


def insert_part(cur, source: str, source_trace: str, received_at, body: str) -> None:
    """Keep one batch's new items of a live trace as sent (JSON text, stored compressed)."""
    execute(cur, "INSERT INTO live_parts VALUES (?, ?, ?, ?)",
            [source, source_trace, received_at, zlib.compress(body.encode(), PACK_LEVEL)])


def insert_items(cur, source: str, source_trace: str, item_ids: list[str]) -> None:
    """Remember the items received, so a retry adds nothing. The ids go as one JSON text: half the time of a
    registered table for a batch's 512 span ids (registering and dropping a view each batch)."""
    execute(cur, "INSERT INTO live_items SELECT ?, ?, unnest(from_json(?, '[\"VARCHAR\"]'))",
            [source, source_trace, dumps(item_ids)])


def insert_live_trace(cur, source: str, source_trace: str, trace_id: str, items: int, root_seen: bool,
                      received_at) -> None:
    execute(cur, "INSERT INTO live_traces (source, source_trace_id, trace_id, items, root_seen, first_received_at, "
                 "last_received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [source, source_trace, trace_id, items, root_seen, received_at, received_at])


def extend_live_trace(cur, source: str, source_trace: str, items: int, root_seen: bool, received_at) -> None:
    execute(cur, "UPDATE live_traces SET items = items + ?, root_seen = root_seen OR ?, last_received_at = ? "
                 "WHERE source = ? AND source_trace_id = ?", [items, root_seen, received_at, source, source_trace])


def mark_built(cur, source: str, source_trace: str, built_at, error: str | None, warnings: str) -> None:
    execute(cur, "UPDATE live_traces SET built_at = ?, build_error = ?, build_warnings = ? "
                 "WHERE source = ? AND source_trace_id = ?", [built_at, error, warnings, source, source_trace])


def forget_live_traces(cur, source: str, source_traces: list[str]) -> None:
    """Drop the held parts, items and status of live traces that a built trace took in."""
    with registered(cur, "taken_traces", source_trace_id=source_traces):
        for table in ("live_parts", "live_items", "live_traces"):  # constants
            execute(cur, f"DELETE FROM {table} WHERE source = ? "
                         "AND source_trace_id IN (SELECT source_trace_id FROM taken_traces)", [source])


def item_holder(cur, source: str, item_id: str) -> str | None:
    """The live trace of a source that holds this item, if any."""
    row = execute(cur, "SELECT source_trace_id FROM live_items WHERE source = ? AND item_id = ? LIMIT 1",
                  [source, item_id]).fetchone()
    return None if row is None else row[0]


def adopt_live_trace(cur, source: str, into: str, taken: str, trace_id: str) -> bool:
    """Move the parts and items of live trace `taken` into live trace `into` (a sub-agent's thread received before
    its spawn named it); False when `taken` holds nothing."""
    taken_row = live_trace(cur, source, taken)
    if taken_row is None:
        return False
    for table in ("live_parts", "live_items"):  # constants
        execute(cur, f"UPDATE {table} SET source_trace_id = ? WHERE source = ? AND source_trace_id = ?",
                [into, source, taken])
    if live_trace(cur, source, into) is None:
        execute(cur, "UPDATE live_traces SET source_trace_id = ?, trace_id = ?, built_at = NULL "
                     "WHERE source = ? AND source_trace_id = ?", [into, trace_id, source, taken])
    else:
        execute(cur, "UPDATE live_traces SET items = items + ?, last_received_at = greatest(last_received_at, ?) "
                     "WHERE source = ? AND source_trace_id = ?",
                [taken_row["items"], taken_row["last_received_at"], source, into])
        execute(cur, "DELETE FROM live_traces WHERE source = ? AND source_trace_id = ?", [source, taken])
    return True


def insert_run_keys(cur, source: str, source_trace: str, keys: set[str]) -> None:
    """Note the run keys a live trace's spans carry (see migration 0020), each once."""
    with registered(cur, "new_keys", run_key=sorted(keys)):
        execute(cur, "INSERT INTO live_run_keys SELECT ?, ?, run_key FROM new_keys WHERE run_key NOT IN "
                     "(SELECT run_key FROM live_run_keys WHERE source = ? AND source_trace_id = ?)",
                [source, source_trace, source, source_trace])


def run_members(db: Database, source: str, source_trace: str, limit: int) -> list[str]:
    """The live traces of the run `source_trace` belongs to: those sharing a run key with it, or linked to or from
    it, transitively; itself first, then in the order found, at most `limit`."""
    members = [source_trace]
    frontier = [source_trace]
    cur = db.reader()
    while frontier and len(members) < limit:
        with registered(cur, "run_traces", source_trace_id=frontier):
            rows = execute(cur, 
                "WITH keys AS (SELECT run_key FROM live_run_keys WHERE source = ? "
                "              AND source_trace_id IN (SELECT source_trace_id FROM run_traces) "
                "              UNION SELECT 'trace:' || source_trace_id FROM run_traces) "
                "SELECT DISTINCT source_trace_id FROM live_run_keys WHERE source = ? "
                "AND run_key IN (SELECT run_key FROM keys) "
                "UNION SELECT source_trace_id FROM live_traces WHERE source = ? "
                "AND 'trace:' || source_trace_id IN (SELECT run_key FROM keys) ORDER BY 1",
                [source, source, source]).fetchall()
        frontier = [row[0] for row in rows if row[0] not in members][:limit - len(members)]
        members += frontier
    return members


def set_live_trace_id(cur, source: str, source_traces: list[str], trace_id: str) -> None:
    """The stored trace these live traces now build (the first of their run)."""
    with registered(cur, "run_traces", source_trace_id=source_traces):
        execute(cur, "UPDATE live_traces SET trace_id = ? WHERE source = ? "
                     "AND source_trace_id IN (SELECT source_trace_id FROM run_traces)", [trace_id, source])
