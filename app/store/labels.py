"""Label SQL: versions, current labels, what a caller may see of them, and queue adjudications.

Every read that shows label values or counts takes `viewer`, the name of the reviewer asking (None for the
app's own bookkeeping and for callers who review nothing), and reads labels from VISIBLE: the one place that
says what blind review hides. A new query over labels starts from VISIBLE and so hides what it must.
"""

import pyarrow as pa

from app.domain.label_fields import FIELDS, FLAG, TAGS, TEXT
from app.store.db import Database
from app.store.lists import registered
from app.store.sql import current, execute, one_of

# A row of `annotations` as label services read it: identity, the declared fields, provenance.
ROW_FIELDS = ("annotation_id", "trace_id", "event_id", "reviewer", "version", *(f.name for f in FIELDS),
              "annotator_kind", "event_type", "agent", "role", "client_request_id", "created_at", "imported_by",
              "queue_id")


def _said(kind: str, column: str) -> str:
    return {FLAG: column, TAGS: f"{column} <> '[]'", TEXT: f"{column} <> ''"}.get(kind, f"{column} IS NOT NULL")


# A label says something unless every declared field is empty (a cleared label does not count as labelled).
NON_EMPTY = "(" + " OR ".join(_said(f.kind, f.name) for f in FIELDS) + ")"
LABEL_COLUMNS = ", ".join(ROW_FIELDS) + ", NOT " + NON_EMPTY + " AS empty"
# The current label of an (event, reviewer) is its highest version.
CURRENT = current("trace_id", "event_id", "reviewer")

# Blind review, the one rule: the items of a blind queue that names $viewer as a reviewer, on which $viewer
# has saved no label in that queue yet. Other reviewers' labels on those events, and their adjudications,
# are withheld from $viewer until then.
HIDDEN = """
    SELECT i.trace_id, i.event_id FROM queue_items i JOIN queues q ON q.queue_id = i.queue_id
    WHERE $viewer::VARCHAR IS NOT NULL AND json_extract(q.spec, '$.blind')::BOOLEAN
      AND list_contains(json_extract_string(q.spec, '$.reviewers[*]'), $viewer::VARCHAR)
      AND NOT EXISTS (SELECT 1 FROM annotations m WHERE m.queue_id = i.queue_id AND m.trace_id = i.trace_id
                      AND m.event_id = i.event_id AND m.reviewer = $viewer::VARCHAR)"""
VISIBLE = f"""(SELECT * FROM annotations a WHERE a.reviewer IS NOT DISTINCT FROM $viewer::VARCHAR
    OR NOT EXISTS (SELECT 1 FROM ({HIDDEN}) h WHERE h.trace_id = a.trace_id AND h.event_id = a.event_id))"""
VISIBLE_CURRENT = f"(SELECT * FROM {VISIBLE} v{CURRENT})"


def read_labels(db: Database, viewer: str | None, trace_id=None, event_id=None, reviewer=None, history=False,
                queue_id=None, trace_ids: list[str] | None = None) -> list[tuple]:
    """Current labels (every version with history) that `viewer` may see, matching the filters, in trace,
    event, reviewer, version order: rows of LABEL_COLUMNS. With `queue_id`, those saved in that queue; with
    `trace_ids`, those of these traces."""
    filters = {column: value for column, value in (("trace_id", trace_id), ("event_id", event_id),
                                                   ("reviewer", reviewer), ("queue_id", queue_id)) if value}
    conditions = [f"{column} = ${column}" for column in filters]
    if trace_ids is not None:
        condition, listed = one_of("trace_id", "traces", trace_ids)
        conditions.append(condition)
        filters |= listed
    where = " WHERE " + " AND ".join(conditions) if conditions else ""
    return db.execute(f"SELECT {LABEL_COLUMNS} FROM {VISIBLE} v{where}{'' if history else CURRENT} "
                      "ORDER BY trace_id, event_id, reviewer, version", {"viewer": viewer, **filters}).fetchall()


def read_labels_page(db: Database, viewer: str | None, filters: dict, history: bool, limit: int | None,
                     offset: int) -> tuple[list[tuple], int]:
    """One page of the labels read_labels reads (`filters`: trace_id, event_id, reviewer, reward_family, each
    optional; `limit` None: all from `offset`), in the same order, and how many match."""
    given = {column: value for column, value in filters.items()
             if value and column in ("trace_id", "event_id", "reviewer", "reward_family")}
    where = " WHERE " + " AND ".join(f"{column} = ${column}" for column in given) if given else ""
    labels = f"SELECT {LABEL_COLUMNS} FROM (SELECT * FROM {VISIBLE} v{'' if history else CURRENT}){where}"
    params = {"viewer": viewer, **given}
    total = db.scalar(f"SELECT count(*) FROM ({labels})", params)
    rows = db.execute(labels + " ORDER BY trace_id, event_id, reviewer, version LIMIT $limit OFFSET $offset",
                      params | {"limit": limit, "offset": offset}).fetchall()
    return rows, total


def save_bases(cur, saves: list[tuple]) -> dict[int, list[tuple]]:
    """What saving the next version of each label of `saves` ((trace_id, event_id, reviewer, request_id) each)
    starts from, in one statement however many they are (on a lake each statement costs catalog round trips), by
    the save's index: the event's type, agent and role, each followed by LABEL_COLUMNS of the current version and
    of the one the request made before (a retry), or by nulls when there is none; no rows when the event does
    not exist. On the cursor of the write that saves the versions.

    The saves come as an Arrow table and only the trace ids as an IN list, which lets each table's scan skip the
    files of other traces: lists of every event id and reviewer made DuckDB bind, optimise and push down 100
    parameters, and made a lake plan catalog queries for each. The events are joined to the saves before duplicates
    are dropped, so that the window runs over the saves' events, not over every event of their traces."""
    traces, events, reviewers, requests = (list(column) for column in zip(*saves))
    params = sorted(set(traces))
    wanted = ", ".join(f"${n}" for n in range(1, len(params) + 1))
    with registered(cur, "save_keys", n=pa.array(range(len(saves)), pa.int64()), trace_id=traces, event_id=events,
                    reviewer=reviewers, request=requests):
        rows = execute(cur,
            "WITH k AS (SELECT * FROM save_keys), "
            "e AS (SELECT k.n, e.type, e.agent, e.role FROM k JOIN events e "
            f"ON e.trace_id = k.trace_id AND e.event_id = k.event_id WHERE e.trace_id IN ({wanted}) "
            "QUALIFY row_number() OVER (PARTITION BY k.n) = 1) "
            "SELECT e.*, l.* EXCLUDE (n) FROM e LEFT JOIN "
            f"(SELECT k.n, a.* FROM k JOIN (SELECT {LABEL_COLUMNS} FROM annotations WHERE trace_id IN ({wanted})) a "
            "ON a.trace_id = k.trace_id AND a.event_id = k.event_id AND a.reviewer = k.reviewer "
            "QUALIFY a.version = max(a.version) OVER (PARTITION BY k.n) OR a.client_request_id = k.request) l "
            "ON l.n = e.n ORDER BY e.n", params).fetchall()
    bases: dict[int, list[tuple]] = {}
    for n, *row in rows:
        bases.setdefault(n, []).append(tuple(row))
    return bases


def insert_labels(cur, rows: list[dict]) -> int:
    """Label versions (their columns named by the first row's keys), each unless another version holds its
    annotation_id; how many were inserted. The check is the insert's own: a lake takes no RETURNING, and a
    statement less is round trips less. Each column is one parameter, a list (unnested): a row of parameters per
    version took DuckDB longer to bind than the insert to run."""
    columns = list(rows[0])
    return execute(cur, f"INSERT INTO annotations ({', '.join(columns)}) SELECT * FROM (SELECT "
                        + ", ".join(f"unnest(${n}) AS {column}" for n, column in enumerate(columns, 1))
                        + ") v WHERE NOT EXISTS (SELECT 1 FROM annotations a WHERE a.annotation_id IN "
                        f"(SELECT unnest(${columns.index('annotation_id') + 1})) AND a.annotation_id = v.annotation_id)",
                   [[row[column] for row in rows] for column in columns]).fetchone()[0]


def says_something(row: dict) -> bool:
    """NON_EMPTY of a label version's stored values (tags as JSON text), for a version made without reading it."""
    return any({FLAG: value is True, TAGS: value != "[]", TEXT: value != ""}.get(f.kind, value is not None)
               for f in FIELDS for value in (row[f.name],))


def last_label_versions(db: Database, trace_id: str, event_id: str, reviewer: str, count: int) -> list[tuple]:
    """The `count` highest versions of a reviewer's own label on an event, highest first."""
    return db.execute(f"SELECT {LABEL_COLUMNS} FROM annotations WHERE trace_id = ? AND event_id = ? AND reviewer = ? "
                      "ORDER BY version DESC LIMIT ?", [trace_id, event_id, reviewer, count]).fetchall()


def label_versions(cur, keys: list[tuple[str, str, str, int]]) -> dict[tuple, tuple]:
    """The stored versions among these (trace, event, reviewer, version) keys, by key, rows of LABEL_COLUMNS, in one
    read on the cursor of a write (an import)."""
    if not keys:
        return {}
    traces, events, reviewers, versions = (list(column) for column in zip(*keys))
    with registered(cur, "imported_keys", trace_id=traces, event_id=events, reviewer=reviewers,
                    version=pa.array(versions, pa.int64())):
        rows = execute(cur, f"SELECT {LABEL_COLUMNS} FROM annotations a WHERE EXISTS (SELECT 1 FROM imported_keys k "
                            "WHERE k.trace_id = a.trace_id AND k.event_id = a.event_id AND k.reviewer = a.reviewer "
                            "AND k.version = a.version)").fetchall()
    at = [ROW_FIELDS.index(field) for field in ("trace_id", "event_id", "reviewer", "version")]
    return {tuple(row[i] for i in at): row for row in rows}


def annotation_id_taken(cur, annotation_id: int) -> bool:
    """Whether a label version holds this id (app/store/keys.py), on the cursor of a write."""
    return execute(cur, "SELECT count(*) FROM annotations WHERE annotation_id = ?", [annotation_id]).fetchone()[0] > 0


def label_count(db: Database, trace_id: str) -> int:
    """Label versions stored for a trace (any reviewer, any event, orphaned included): what deleting it keeps."""
    row = _by_trace(db, "SELECT trace_id, count(*) AS versions FROM annotations WHERE {traces} GROUP BY trace_id", {},
                    [trace_id]).get(trace_id)
    return row["versions"] if row else 0


def trace_label_counts(db: Database, viewer: str | None, trace_id: str) -> dict:
    """Events of a trace with a current label that says something: by `viewer` (`mine`) and by anyone they
    may see (label_progress of the one trace: on a lake, the trace list's kept read answers it)."""
    row = label_progress(db, viewer, [trace_id]).get(trace_id)
    return {"mine": row["you"], "anyone": row["anyone"]} if row else {"mine": 0, "anyone": 0}


def event_label_versions(db: Database, viewer: str | None, trace_id: str, event_id: str) -> int:
    """Label versions of one event that `viewer` may see, by every reviewer."""
    return db.scalar(f"SELECT count(*) FROM {VISIBLE} v WHERE trace_id = $trace AND event_id = $event",
                     {"viewer": viewer, "trace": trace_id, "event": event_id})


# On a lake, the labelled traces a per-trace read of the labels keeps (see _by_trace): a few small values a trace, a few
# MB at most for each reviewer viewing.
LABELLED_KEPT = 20_000
PROGRESS = ("SELECT trace_id, count(DISTINCT event_id) AS anyone, "
            "count(DISTINCT event_id) FILTER (WHERE reviewer = $viewer) AS you "
            f"FROM {VISIBLE_CURRENT} l WHERE {NON_EMPTY} AND {{traces}} GROUP BY trace_id")


def _by_trace(db: Database, sql: str, params: dict, trace_ids: list[str]) -> dict[str, dict]:
    """The rows of `sql` (one per trace_id; `{traces}` the condition taking these traces) for them. On a lake shared
    through PostgreSQL, read for every trace and these taken from that: a read naming no trace stays kept
    (Database._rows; up to LABELLED_KEPT traces) until the labels change, where one naming them runs again at every
    new snapshot, after an ingest too, whose new traces come first in the trace list (four tables' catalog round
    trips for a blind-review-aware read, ~90 ms). On a file, read for these traces alone."""
    if db.locking:
        wanted = set(trace_ids)
        rows = db.fetchall(sql.format(traces="true"), params, keep_rows=LABELLED_KEPT)
        return {row["trace_id"]: row for row in rows if row["trace_id"] in wanted}
    traces, listed = one_of("trace_id", "traces", trace_ids)
    return {row["trace_id"]: row for row in db.fetchall(sql.format(traces=traces), params | listed)}


def label_progress(db: Database, viewer: str | None, trace_ids: list[str]) -> dict[str, dict]:
    """Per trace of `trace_ids` (a page of the trace list): events labelled by anyone `viewer` may see, and by
    `viewer`."""
    return _by_trace(db, PROGRESS, {"viewer": viewer}, trace_ids)


def labelled_trace_ids(db: Database, viewer: str | None) -> list[str]:
    """Stored traces with a current label that says something and that `viewer` may see, in id order."""
    return [row[0] for row in db.execute(
        f"SELECT DISTINCT trace_id FROM {VISIBLE_CURRENT} l WHERE {NON_EMPTY} "
        "AND trace_id IN (SELECT trace_id FROM traces) ORDER BY trace_id", {"viewer": viewer}).fetchall()]


def traces_with_labels(db: Database, viewer: str | None) -> list[str]:
    """Ids of every trace with a label version `viewer` may see, stored or deleted since, in id order."""
    return [row[0] for row in db.execute(f"SELECT DISTINCT trace_id FROM {VISIBLE} v ORDER BY trace_id",
                                         {"viewer": viewer}).fetchall()]


def orphaned_labels(db: Database, viewer: str | None, trace_id: str | None = None) -> list[dict]:
    """Current labels whose event no longer exists (its trace was replaced without it, or deleted)."""
    return orphaned_labels_in(db, viewer, None if trace_id is None else [trace_id])


def orphaned_labels_in(db: Database, viewer: str | None, trace_ids: list[str] | None) -> list[dict]:
    """orphaned_labels of these traces (of all with None) in one read: a replace of 1,000 rollouts read them
    a trace at a time, each read a scan of the events."""
    return db.fetchall(
        f"SELECT l.trace_id, l.event_id, l.reviewer, l.version FROM {VISIBLE_CURRENT} l "
        "LEFT JOIN events e ON e.trace_id = l.trace_id AND e.event_id = l.event_id "
        "WHERE e.event_id IS NULL AND ($traces::VARCHAR[] IS NULL OR list_contains($traces, l.trace_id)) "
        "ORDER BY l.trace_id, l.event_id, l.reviewer", {"viewer": viewer, "traces": trace_ids})


def surely_unlabelled(db: Database, trace_id: str) -> bool:
    """On a lake, whether a trace has no label version, from label_count's read of every labelled trace (kept until
    the labels change): a trace read just after its ingest then skips reading its labels (each such read is four
    tables' catalog round trips there). On a file always False: its label reads cost what asking would."""
    return db.locking and not label_count(db, trace_id)


def human_answers(db: Database, viewer: str | None, trace_id: str) -> list[dict]:
    """Current counterfactual and stop answers of a trace's labels with each event's position."""
    if surely_unlabelled(db, trace_id):
        return []
    return db.fetchall(
        f"SELECT e.seq, l.counterfactual, l.stop FROM {VISIBLE_CURRENT} l "
        "JOIN events e ON e.trace_id = l.trace_id AND e.event_id = l.event_id "
        "WHERE l.trace_id = $trace AND (l.counterfactual IS NOT NULL OR l.stop IS NOT NULL) ORDER BY e.seq",
        {"viewer": viewer, "trace": trace_id})


def human_credit(db: Database, viewer: str | None, trace_id: str, queue_id: str | None = None) -> list[dict]:
    """Current numeric credit labels of a trace with each event's position (with `queue_id`, those saved in
    that queue)."""
    if surely_unlabelled(db, trace_id):
        return []
    return human_credit_in(db, viewer, [trace_id], queue_id)


def human_credit_in(db: Database, viewer: str | None, trace_ids: list[str], queue_id: str | None = None) -> list[dict]:
    """human_credit of these traces in one read, each row with its `trace_id`, in trace, position, reviewer order."""
    traces, params = one_of("trace_id", "traces", trace_ids)
    return db.fetchall(
        f"SELECT l.trace_id, e.seq, l.reviewer, l.credit FROM (SELECT * FROM {VISIBLE} v "
        f"WHERE {traces} AND ($queue::VARCHAR IS NULL OR queue_id = $queue)" + CURRENT
        + ") l JOIN events e ON e.trace_id = l.trace_id AND e.event_id = l.event_id "
          "WHERE l.credit IS NOT NULL ORDER BY l.trace_id, e.seq, l.reviewer",
        params | {"viewer": viewer, "queue": queue_id})


def events_labelled_with_paper(db: Database, viewer: str | None, key: str) -> list[dict]:
    """Current event labels that name this paper as an example."""
    return db.fetchall(
        f"SELECT trace_id, event_id, event_type, reviewer, credit FROM {VISIBLE_CURRENT} l "
        "WHERE paper = $key ORDER BY trace_id, event_id, reviewer", {"viewer": viewer, "key": key})


QUEUE_LABELS = f"""
    SELECT i.queue_id, i.item_id, i.trace_id, i.event_id, l.reviewer, l.version, l.annotation_id, l.created_at,
           {', '.join('l.' + f.name for f in FIELDS)}
    FROM queue_items i
    JOIN (SELECT * FROM {VISIBLE} v WHERE list_contains($queues, queue_id)
          {current("queue_id", "trace_id", "event_id", "reviewer")}) l
      ON l.queue_id = i.queue_id AND l.trace_id = i.trace_id AND l.event_id = i.event_id
    WHERE list_contains($queues, i.queue_id)
    ORDER BY i.queue_id, i.item_id, l.reviewer
"""


def queue_labels(db: Database, viewer: str | None, queue_ids: list[str]) -> list[dict]:
    """Each reviewer's current label saved in each of these queues, per item, as far as `viewer` may see them:
    one read for any number of queues (the queue list shows them all)."""
    return db.fetchall(QUEUE_LABELS, {"viewer": viewer, "queues": queue_ids})


# An adjudication is shown with the labels it settles: never on an item hidden from the viewer.
ADJUDICATIONS = f"""
    SELECT a.queue_id, a.item_id, i.trace_id, i.event_id, a.adjudicator, a.label, a.resolved, a.note, a.created_at
    FROM queue_adjudications a JOIN queue_items i ON i.queue_id = a.queue_id AND i.item_id = a.item_id
    WHERE NOT EXISTS (SELECT 1 FROM ({HIDDEN}) h WHERE h.trace_id = i.trace_id AND h.event_id = i.event_id)
"""


def queue_adjudications(db: Database, viewer: str | None, queue_ids: list[str]) -> list[dict]:
    """The latest adjudication of each adjudicated item of these queues that `viewer` may see."""
    return db.fetchall(
        f"SELECT * FROM ({ADJUDICATIONS}) WHERE list_contains($queues, queue_id) "
        "QUALIFY created_at = max(created_at) OVER (PARTITION BY queue_id, item_id) ORDER BY queue_id, item_id",
        {"viewer": viewer, "queues": queue_ids})


def adjudicated_labels_in(db: Database, viewer: str | None, trace_ids: list[str],
                          queue_id: str | None = None) -> dict[str, dict]:
    """The final label an admin set on each event of these traces (the latest, in any queue or in `queue_id`), in one
    read: {trace id: {event_id: (label JSON text, note, adjudicator)}} (a trace with none is left out)."""
    traces, params = one_of("trace_id", "traces", trace_ids)
    rows = db.execute(
        f"SELECT trace_id, event_id, label, note, adjudicator FROM ({ADJUDICATIONS}) "
        f"WHERE {traces} AND ($queue::VARCHAR IS NULL OR queue_id = $queue) "
        "QUALIFY created_at = max(created_at) OVER (PARTITION BY trace_id, event_id)",
        params | {"viewer": viewer, "queue": queue_id}).fetchall()
    by_trace: dict[str, dict] = {}
    for trace_id, event_id, label, note, by in rows:
        by_trace.setdefault(trace_id, {})[event_id] = (label, note, by)
    return by_trace


def insert_adjudication(cur, queue_id: str, item_id: int, adjudicator: str, label: str, resolved: str, note: str,
                        created_at) -> None:
    execute(cur, "INSERT INTO queue_adjudications VALUES (?, ?, ?, ?, ?, ?, ?)",
                [queue_id, item_id, adjudicator, label, resolved, note, created_at])


def queue_progress(db: Database, queue_id: str, reviewer: str) -> dict:
    """A reviewer's own progress in a queue: items they labelled there, and items in all."""
    return db.fetchone(
        "SELECT (SELECT count(DISTINCT (trace_id, event_id)) FROM annotations WHERE queue_id = $queue "
        "AND reviewer = $reviewer) AS mine, (SELECT count(*) FROM queue_items WHERE queue_id = $queue) AS items",
        {"queue": queue_id, "reviewer": reviewer})


def reviewer_names(db: Database) -> list[str]:
    return [row[0] for row in db.execute("SELECT name FROM reviewers ORDER BY name").fetchall()]
