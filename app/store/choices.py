"""Choice SQL: reviewers' choices on the pairs of pairwise queues (append-only versions, current = highest), their
adjudications, and what a caller may see of them.

Every read that shows choices takes `viewer`, the name of the reviewer asking (None for the app's own bookkeeping
and for callers who review nothing), and reads from VISIBLE: the one place that says what blind review hides of
choices, as app/store/labels.py says it of labels."""

from app.store.db import Database
from app.store.sql import current, execute

COLUMNS = ("queue_id", "item_id", "reviewer", "version", "choice", "reason", "deciding_side", "deciding_event",
           "client_request_id", "created_at")
CURRENT = current("queue_id", "item_id", "reviewer")

# Blind review of pairs, the one rule: the pairs of a blind queue that names $viewer as a reviewer, on which $viewer
# has saved no choice yet. Other reviewers' choices on them, and their adjudication, are withheld from $viewer until
# then. Over the queues listed in $queues.
HIDDEN = """
    SELECT p.queue_id, p.item_id FROM queue_pairs p JOIN queues q ON q.queue_id = p.queue_id
    WHERE $viewer::VARCHAR IS NOT NULL AND list_contains($queues, p.queue_id)
      AND json_extract(q.spec, '$.blind')::BOOLEAN
      AND list_contains(json_extract_string(q.spec, '$.reviewers[*]'), $viewer::VARCHAR)
      AND NOT EXISTS (SELECT 1 FROM pair_choices m WHERE m.queue_id = p.queue_id AND m.item_id = p.item_id
                      AND m.reviewer = $viewer::VARCHAR)"""
VISIBLE = f"""(SELECT * FROM pair_choices c WHERE list_contains($queues, c.queue_id)
    AND (c.reviewer IS NOT DISTINCT FROM $viewer::VARCHAR
         OR NOT EXISTS (SELECT 1 FROM ({HIDDEN}) h WHERE h.queue_id = c.queue_id AND h.item_id = c.item_id)))"""


def queue_choices(db: Database, viewer: str | None, queue_ids: list[str]) -> list[dict]:
    """Each reviewer's current choice on each pair of these queues that `viewer` may see, in queue, item, reviewer
    order: one read for any number of queues."""
    return db.fetchall(f"SELECT {', '.join(COLUMNS)} FROM {VISIBLE} v{CURRENT} "
                       "ORDER BY queue_id, item_id, reviewer", {"viewer": viewer, "queues": queue_ids})


def pair_adjudications(db: Database, viewer: str | None, queue_ids: list[str]) -> list[dict]:
    """The latest adjudication of each adjudicated pair of these queues that `viewer` may see."""
    return db.fetchall(
        "SELECT a.queue_id, a.item_id, a.adjudicator, a.label, a.resolved, a.note, a.created_at "
        "FROM queue_adjudications a JOIN queue_pairs p ON p.queue_id = a.queue_id AND p.item_id = a.item_id "
        f"WHERE list_contains($queues, a.queue_id) AND NOT EXISTS (SELECT 1 FROM ({HIDDEN}) h "
        "WHERE h.queue_id = a.queue_id AND h.item_id = a.item_id) "
        "QUALIFY a.created_at = max(a.created_at) OVER (PARTITION BY a.queue_id, a.item_id) "
        "ORDER BY a.queue_id, a.item_id", {"viewer": viewer, "queues": queue_ids})


def save_basis(cur, queue_id: str, item_id: int, reviewer: str, request_id: str | None) -> tuple[int, dict | None]:
    """On the cursor of the write that saves a choice: the reviewer's highest version on the pair (0 for none),
    and the version `request_id` made before (a retry), if any."""
    rows = execute(cur, f"SELECT {', '.join(COLUMNS)} FROM pair_choices WHERE queue_id = $queue AND item_id = $item "
                        "AND reviewer = $reviewer ORDER BY version",
                   {"queue": queue_id, "item": item_id, "reviewer": reviewer}).fetchall()
    versions = [dict(zip(COLUMNS, row)) for row in rows]
    retried = next((v for v in versions if request_id is not None and v["client_request_id"] == request_id), None)
    return (versions[-1]["version"] if versions else 0), retried


def insert_choice(cur, row: dict) -> None:
    execute(cur, f"INSERT INTO pair_choices ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
            [row[column] for column in COLUMNS])


def choice_progress(db: Database, queue_id: str, reviewer: str) -> dict:
    """A reviewer's own progress in a pairwise queue: pairs they chose on, and pairs in all."""
    return db.fetchone(
        "SELECT (SELECT count(DISTINCT item_id) FROM pair_choices WHERE queue_id = $queue AND reviewer = $reviewer) "
        "AS mine, (SELECT count(*) FROM queue_pairs WHERE queue_id = $queue) AS items",
        {"queue": queue_id, "reviewer": reviewer})
