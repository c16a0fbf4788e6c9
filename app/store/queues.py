"""Review queue SQL: the items a queue holds (events, or pairs of rollouts in a pairwise queue), which reviewer was
given which item, skips. Labels saved in a queue are read through app/store/labels.py, choices on pairs through
app/store/choices.py (blind review). Functions taking `cur` run inside a write."""


import pyarrow as pa

from app.domain.preference import Pair
from app.store.db import Database
from app.store.lists import registered
from app.store.sql import execute, one_of, page_and_total


def queue_trace_ids(db: Database, queue_id: str) -> list[str]:
    return [row[0] for row in db.execute(
        "SELECT DISTINCT trace_id FROM queue_items WHERE queue_id = ? AND trace_id IN (SELECT trace_id FROM traces) "
        "ORDER BY trace_id", [queue_id]).fetchall()]


# The events a queue's filter matches: c, in trace and event order by (trace_id, seq).
CANDIDATES = """
    WITH c AS (
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
      AND (len($tools) = 0 OR e.tool IN (SELECT unnest($tools))))
"""
CANDIDATE_COLUMNS = "trace_id, event_id, seq, type, role, agent, tool, system, topology, task_id"


def _params(lists: dict[str, list[str]]) -> dict:
    return {name: list(values) for name, values in lists.items()}


def queue_candidates(db: Database, lists: dict[str, list[str]]) -> list[dict]:
    """Events matching a queue's filter (each named list empty: no restriction), in trace and event order."""
    return db.fetchall(CANDIDATES + f"SELECT {CANDIDATE_COLUMNS} FROM c ORDER BY trace_id, seq", _params(lists))


def candidate_strata(db: Database, lists: dict[str, list[str]], by: str | None) -> list[tuple]:
    """The strata of the matching events by column `by` of c (a constant, never user text; without it one stratum,
    None): (value, events), in the order of each one's first event in trace and event order."""
    return db.execute(CANDIDATES + f"SELECT {by or 'NULL'} AS stratum, count(*) FROM c GROUP BY stratum "
                      "ORDER BY min({'t': trace_id, 's': seq})", _params(lists)).fetchall()


def candidates_at(db: Database, lists: dict[str, list[str]], by: str | None, picks: list[tuple]) -> list[dict]:
    """The matching events at `picks` (stratum value by column `by`, place within the stratum in trace and event
    order), in trace and event order."""
    stratum = by or "NULL"
    return db.fetchall(
        CANDIDATES + f"SELECT {CANDIDATE_COLUMNS} FROM (SELECT *, {stratum} AS stratum, "
        f"row_number() OVER (PARTITION BY {stratum} ORDER BY trace_id, seq) - 1 AS place FROM c) x "
        "JOIN (SELECT unnest($values::VARCHAR[]) AS value, unnest($places::BIGINT[]) AS place) p "
        "ON p.value IS NOT DISTINCT FROM x.stratum AND p.place = x.place ORDER BY trace_id, seq",
        _params(lists) | {"values": [value for value, _ in picks], "places": [place for _, place in picks]})


def insert_queue(cur, queue_id: str, name: str, spec: str, created_by: str | None, created_at,
                 items: list[tuple[str, str]]) -> None:
    execute(cur, "INSERT INTO queues VALUES (?, ?, ?, ?, ?)", [queue_id, name, spec, created_by, created_at])
    with registered(cur, "new_items", trace_id=[t for t, _ in items], event_id=[e for _, e in items],
                    item_id=pa.array(range(1, len(items) + 1), pa.int64())):
        execute(cur, "INSERT INTO queue_items SELECT ?, item_id, trace_id, event_id FROM new_items", [queue_id])


def insert_pair_queue(cur, queue_id: str, name: str, spec: str, created_by: str | None, created_at,
                      pairs: list[Pair]) -> None:
    execute(cur, "INSERT INTO queues VALUES (?, ?, ?, ?, ?)", [queue_id, name, spec, created_by, created_at])
    with registered(cur, "new_pairs", group_key=[p.group for p in pairs], trace_a=[p.trace_a for p in pairs],
                    trace_b=[p.trace_b for p in pairs], item_id=pa.array(range(1, len(pairs) + 1), pa.int64())):
        execute(cur, "INSERT INTO queue_pairs SELECT ?, item_id, group_key, trace_a, trace_b FROM new_pairs",
                [queue_id])


def read_queue(db: Database, queue_id: str) -> dict | None:
    return db.fetchone("SELECT queue_id, name, spec, created_by, created_at FROM queues WHERE queue_id = ?",
                       [queue_id])


def list_queues(db: Database) -> list[dict]:
    return db.fetchall("SELECT queue_id, name, spec, created_by, created_at FROM queues ORDER BY created_at DESC")


# What a queue of each kind hands out: its items' table, their columns, and the keys an item is answered with.
# Constants: all of it that reaches SQL.
KIND_ITEMS = {"events": ("queue_items", "i.trace_id, i.event_id", ("trace_id", "event_id")),
              "pairwise": ("queue_pairs", 'i.group_key AS "group", i.trace_a, i.trace_b', ("group", "trace_a", "trace_b"))}


def queue_item_page(db: Database, queue_id: str, kind: str, limit: int | None,
                    offset: int) -> tuple[list[dict], int]:
    """A page of the queue's items in queue order (`limit` None: all from `offset`), and how many it holds, in one
    read."""
    table, columns, _ = KIND_ITEMS[kind]
    sql = (f"SELECT c.total, p.* FROM (SELECT count(*) AS total FROM {table} WHERE queue_id = $queue) c "
           f"LEFT JOIN (SELECT i.item_id, {columns} FROM {table} i WHERE i.queue_id = $queue ORDER BY i.item_id "
           "LIMIT $limit OFFSET $offset) p ON true ORDER BY p.item_id")
    return page_and_total(db.fetchall(sql, {"queue": queue_id, "limit": limit, "offset": offset}), "item_id")


def queue_items_in(db: Database, queue_id: str, kind: str, item_ids: list[int]) -> list[dict]:
    """These items of the queue, in queue order."""
    table, columns, _ = KIND_ITEMS[kind]
    items, params = one_of("i.item_id", "items", item_ids)
    return db.fetchall(f"SELECT i.item_id, {columns} FROM {table} i WHERE i.queue_id = $queue AND {items} "
                       "ORDER BY i.item_id", params | {"queue": queue_id})


def queue_item_count(db: Database, queue_id: str, kind: str = "events") -> int:
    return db.scalar(f"SELECT count(*) FROM {KIND_ITEMS[kind][0]} WHERE queue_id = ?", [queue_id])


def queue_item_counts(db: Database, queue_ids: list[str]) -> dict[str, int]:
    """The items (events or pairs) of each of these queues that holds any: one read for any number of queues."""
    rows = db.fetchall(" UNION ALL ".join(f"SELECT queue_id, count(*) AS items FROM {table} "
                                          "WHERE list_contains($queues, queue_id) GROUP BY queue_id"
                                          for table, _, _ in KIND_ITEMS.values()), {"queues": queue_ids})
    return {row["queue_id"]: row["items"] for row in rows}


def queue_item(db: Database, queue_id: str, item_id: int, kind: str = "events") -> dict | None:
    table, columns, _ = KIND_ITEMS[kind]
    return db.fetchone(f"SELECT i.item_id, {columns} FROM {table} i WHERE i.queue_id = ? AND i.item_id = ?",
                       [queue_id, item_id])


def queue_items_of_event(db: Database, trace_id: str, event_id: str) -> list[dict]:
    """The queues (and items) an event is in."""
    return db.fetchall("SELECT queue_id, item_id FROM queue_items WHERE trace_id = ? AND event_id = ?",
                       [trace_id, event_id])


# Whether the reviewer has answered item `i` in its queue: labelled its event there, or chosen on its pair. An
# assignment answered, or skipped, is not open.
ANSWERED = {
    "events": "EXISTS (SELECT 1 FROM annotations l WHERE l.queue_id = i.queue_id AND l.trace_id = i.trace_id "
              "AND l.event_id = i.event_id AND l.reviewer = $reviewer)",
    "pairwise": "EXISTS (SELECT 1 FROM pair_choices c WHERE c.queue_id = i.queue_id AND c.item_id = i.item_id "
                "AND c.reviewer = $reviewer)"}


def open_assignment(cur, queue_id: str, reviewer: str, kind: str = "events") -> dict | None:
    """The earliest item `next` gave the reviewer that they have neither answered in the queue nor skipped."""
    return _assignment(cur, queue_id, reviewer, kind, "a.skipped_at IS NULL", "a.item_id")


def skipped_assignment(cur, queue_id: str, reviewer: str, kind: str = "events") -> dict | None:
    """The reviewer's unanswered item skipped longest ago: what `next` gives once nothing else is left."""
    return _assignment(cur, queue_id, reviewer, kind, "a.skipped_at IS NOT NULL", "a.skipped_at, a.item_id")


def _assignment(cur, queue_id: str, reviewer: str, kind: str, skipped: str, order: str) -> dict | None:
    """The first unanswered item given to the reviewer that matches `skipped`, in `order` (constants)."""
    table, columns, keys = KIND_ITEMS[kind]
    row = execute(cur,
        f"SELECT a.item_id, {columns} FROM queue_assignments a "
        f"JOIN {table} i ON i.queue_id = a.queue_id AND i.item_id = a.item_id "
        f"WHERE a.queue_id = $queue AND a.reviewer = $reviewer AND {skipped} AND NOT {ANSWERED[kind]} "
        f"ORDER BY {order} LIMIT 1", {"queue": queue_id, "reviewer": reviewer}).fetchone()
    return dict(zip(("item_id", *keys), row)) if row else None


def next_unassigned(cur, queue_id: str, reviewer: str, overlap: int, kind: str = "events") -> dict | None:
    """The first item in queue order given to fewer than `overlap` reviewers, never to this one, and not
    answered by them in the queue already (a label saved from the trace page)."""
    table, columns, keys = KIND_ITEMS[kind]
    row = execute(cur,
        f"SELECT i.item_id, {columns} FROM {table} i "
        "LEFT JOIN queue_assignments a ON a.queue_id = i.queue_id AND a.item_id = i.item_id "
        f"WHERE i.queue_id = $queue AND NOT {ANSWERED[kind]} "
        "GROUP BY ALL "
        "HAVING count(a.reviewer) < $overlap AND count(a.reviewer) FILTER (WHERE a.reviewer = $reviewer) = 0 "
        "ORDER BY i.item_id LIMIT 1", {"queue": queue_id, "overlap": overlap, "reviewer": reviewer}).fetchone()
    return dict(zip(("item_id", *keys), row)) if row else None


def skip(cur, queue_id: str, item_id: int, reviewer: str, skipped_at) -> bool:
    """Mark the reviewer's assignment of an item skipped; False when the item was never given to them."""
    found = execute(cur, "SELECT count(*) FROM queue_assignments WHERE queue_id = ? AND item_id = ? AND reviewer = ?",
                        [queue_id, item_id, reviewer]).fetchone()[0]
    if found:
        execute(cur, "UPDATE queue_assignments SET skipped_at = ? WHERE queue_id = ? AND item_id = ? AND reviewer = ?",
                    [skipped_at, queue_id, item_id, reviewer])
    return bool(found)


def assign(cur, queue_id: str, item_id: int, reviewer: str, assigned_at) -> None:
    execute(cur, "INSERT INTO queue_assignments (queue_id, item_id, reviewer, assigned_at) VALUES (?, ?, ?, ?)",
                [queue_id, item_id, reviewer, assigned_at])
