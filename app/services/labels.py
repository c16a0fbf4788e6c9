"""Event labels: append-only versions, optimistic concurrency, idempotent saves, export and import.

A label belongs to (trace_id, event_id, reviewer). Every save, clear or undo writes a new version;
nothing is updated in place or deleted, so the whole history stays exportable. Its fields are declared once
in app.domain.label_fields. Every read takes `viewer`, the reviewer asking: blind review queues hide other
reviewers' labels from them (app.store.labels.VISIBLE) on every path that reads labels through here.
"""

import csv
import io
import json
import threading
import weakref
from collections import namedtuple
from typing import NamedTuple

from app.domain import csvsafe
from app.domain.jsontext import KeyedTwice
from app.domain.label_fields import BY_NAME, EMPTY, FIELDS, NAMES, LabelError, clean_values
from app.domain.refusals import NotFound, Refusal
from app.domain.validation import is_text
from app.ingest.documents import MAX_JSON_VALUES, TooManyValues, json_values, strict_loads
from app.services import queues
from app.store import keys, writes
from app.store import labels as label_store
from app.store import labels as store
from app.store import traces as trace_store
from app.store.db import Database, iso_utc, stored_utc, utc_now

# The values of a label that says nothing: what clearing sets, and what a first version changes from.
EMPTY_LABEL = EMPTY
# The columns every export has had, in their order; fields declared later follow them (a file exported before
# a field existed lacks its column, read as empty), then the queue a label was saved in.
FIRST_EXPORT_COLUMNS = ("trace_id", "event_id", "event_type", "agent", "role", "reviewer", "credit", "reward_family",
                        "credit_unit", "subdecision", "safety", "tags", "note", "paper", "annotator_kind", "version",
                        "created_at")
EXPORT_COLUMNS = (*FIRST_EXPORT_COLUMNS, *(name for name in NAMES if name not in FIRST_EXPORT_COLUMNS), "queue_id")
ANNOTATOR_KINDS = ("human", "model", "rule", "import")
MAX_VERSION = 2**31 - 1  # a 32-bit INTEGER column
# Label versions read with plain SQL come back as these records (what to_dict needs): an ORM object costs
# about 50 us a row to build, more than the query; saves and label reads are the busiest requests.
LabelRow = namedtuple("LabelRow", [*store.ROW_FIELDS, "empty"])  # a row of store.LABEL_COLUMNS
# Reviewer names each store is known to hold (a name once stored stays): a save by one of them need not add it.
_stored_reviewers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Saves written together at most (see _SaveQueue): a lake keeps an insert of annotations of up to this many rows in
# its catalog (app/store/lake.py INLINED_ROWS) rather than writing a Parquet file of each group.
SAVES_TOGETHER = 50


class StaleVersion(Refusal):
    """The save edits a version that is no longer the current one."""

    status = 409

    def __init__(self, current: dict | None, base_version: int):
        self.current = current
        self.base_version = base_version
        have = current["version"] if current else 0
        super().__init__(f"base_version {base_version} is stale: the current version is {have}")

    def details(self) -> dict:
        return {"current": self.current}


now = utc_now


def check_request(data: dict) -> None:
    """Refuse a key given twice (app.documents marks the object) or a string that is not text (JSON's lone
    "\\ud800" escape) in a label request or imported row, naming the field: neither can be kept as sent."""
    if isinstance(data, KeyedTwice):
        raise LabelError(data.twice[0], "is given more than once (keys must be unique)")
    for field, value in data.items():
        strings = value if isinstance(value, list) else (value,)
        if not is_text(s for s in (field, *strings) if isinstance(s, str)):
            raise LabelError(field, "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text")


def clean_reviewer(value) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LabelError("reviewer", "must be a non-empty name")
    if not is_text((value,)):
        raise LabelError("reviewer", f"{value!r} holds a lone surrogate, which is not text")
    if len(value.strip()) > 100:
        raise LabelError("reviewer", "must be at most 100 characters")
    return value.strip()


def to_dict(row: LabelRow) -> dict:
    """A label version as the API shows it."""
    return {
        "annotation_id": row.annotation_id, "trace_id": row.trace_id, "event_id": row.event_id,
        "event_type": row.event_type, "agent": row.agent, "role": row.role, "reviewer": row.reviewer,
        **_values_of(row), "queue_id": row.queue_id, "annotator_kind": row.annotator_kind, "version": row.version,
        "created_at": iso_utc(row.created_at), "empty": row.empty,
    }


def _no_event(db: Database, trace_id: str, event_id: str) -> NotFound:
    if not trace_store.trace_exists(db, trace_id):
        return NotFound(f"no trace with id '{trace_id}'")
    return NotFound(f"trace '{trace_id}' has no event '{event_id}'")


class _Save(NamedTuple):
    """A save request as checked before it waits for the write."""

    trace_id: str
    event_id: str
    reviewer: str
    values: dict
    annotator_kind: str
    base_version: int | None
    request_id: str | None
    queue_id: str | None

    @property
    def label(self) -> tuple:
        return self.trace_id, self.event_id, self.reviewer


class _IdTaken(Exception):
    """A new version's first candidate id is held by another version: the saves are written again, each id
    checked first (keys.new_row_id)."""


def save_label(db: Database, data: dict) -> tuple[dict, bool]:
    """Write a new version from `data` (omitted fields keep their value); returns (label, created).

    A repeated `client_request_id` returns the label it created before (created False). With `queue_id`, the
    label is saved in that review queue, whose rubric's required fields it must fill. Saves made at the same
    time are written together (_SaveQueue).
    Raises LabelError, NotFound, StaleVersion or QueueError.
    """
    check_request(data)
    reviewer = clean_reviewer(data.get("reviewer"))
    trace_id, event_id = str(data.get("trace_id") or ""), str(data.get("event_id") or "")
    values = clean_values(data)
    annotator_kind = data.get("annotator_kind") or "human"
    if annotator_kind not in ANNOTATOR_KINDS:
        raise LabelError("annotator_kind", f"{annotator_kind!r} is not one of {', '.join(ANNOTATOR_KINDS)}")
    base_version = data.get("base_version")
    if base_version is not None and (isinstance(base_version, bool) or not isinstance(base_version, int)):
        raise LabelError("base_version", "must be an integer (0 for a label that does not exist yet)")
    queue_id = data.get("queue_id") or None
    if queue_id is not None and not isinstance(queue_id, str):
        raise LabelError("queue_id", "must be a queue id (text) or null")
    save = _Save(trace_id, event_id, reviewer, values, annotator_kind, base_version,
                 data.get("client_request_id") or None, queue_id)
    with _queues_lock:
        queue = _queues.get(db) or _queues.setdefault(db, _SaveQueue(db))
    outcome = queue.save(save)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def save_labels(db: Database, saves: list[_Save]) -> list:
    """Write the saves in one transaction, each as save_label does, in their order (a later save of the same
    label builds on an earlier one's version); each one's (label, created), or the refusal that is its answer.

    Plain SQL on one cursor, as few statements as the saves can take, however many they are: saves queue on the
    write lock, and on a lake every statement pays catalog round trips. The reviewers' locks make versions 1..n
    even when two instances of the app save the same label at once."""
    locks = {writes.reviewer_lock(save.reviewer) for save in saves}
    try:
        outcomes = db.write(lambda cur: _write_saves(db, cur, saves, check_ids=False), locks)
    except _IdTaken:
        outcomes = db.write(lambda cur: _write_saves(db, cur, saves, check_ids=True), locks)
    _stored_reviewers.setdefault(db, set()).update(save.reviewer for save, outcome in zip(saves, outcomes)
                                                   if not isinstance(outcome, BaseException) and outcome[1])
    return outcomes


_queues: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # each store's _SaveQueue
_queues_lock = threading.Lock()


class _Waiting:
    """A save in a _SaveQueue: its answer once written, or word that its thread is to write the next saves."""

    def __init__(self, save: _Save):
        self.save, self.outcome, self.leads = save, None, False
        self.ready = threading.Event()


class _SaveQueue:
    """Saves made at the same time are written together (a group commit): a save that finds none being written
    writes itself and every save waiting, up to SAVES_TOGETHER, in one transaction (save_labels); saves that come
    meanwhile wait, and the first of them writes the next group. On a lake, what a transaction costs (advisory
    locks, a new snapshot, the catalog reads of each table scanned, the commit: some 40 round trips to
    PostgreSQL) is then paid once per group rather than once per save, and reviewers saving at once no longer
    queue one transaction each on the write lock."""

    def __init__(self, db: Database):
        self._db = db
        self._lock = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._writing = False

    def save(self, save: _Save):
        """The save's outcome: (label, created), or the exception that is its answer."""
        me = _Waiting(save)
        with self._lock:
            self._waiting.append(me)
            me.leads = not self._writing
            self._writing = True
        if not me.leads:
            me.ready.wait()
        if me.leads:
            self._write_next()
        return me.outcome

    def _write_next(self) -> None:
        """Write the first waiting saves, answer them, and hand the writing on to the next waiting one."""
        with self._lock:
            group, self._waiting = self._waiting[:SAVES_TOGETHER], self._waiting[SAVES_TOGETHER:]
        outcomes: list = [RuntimeError("the write of this save was interrupted")] * len(group)
        try:
            outcomes = _outcomes(self._db, [waiting.save for waiting in group])
        finally:
            for waiting, outcome in zip(group, outcomes):
                waiting.outcome, waiting.leads = outcome, False
                waiting.ready.set()
            with self._lock:
                following = self._waiting[0] if self._waiting else None
                self._writing = following is not None
            if following is not None:
                following.leads = True
                following.ready.set()


def _outcomes(db: Database, saves: list[_Save]) -> list:
    """save_labels' outcomes; when the group fails as a whole (a database error), each save's own, written
    alone, so that one save's failure is its answer only."""
    try:
        return save_labels(db, saves)
    except Exception as exc:
        if len(saves) == 1:
            return [exc]
        return [_outcomes(db, [save])[0] for save in saves]


def _write_saves(db: Database, cur, saves: list[_Save], check_ids: bool) -> list:
    """save_labels' write: one read of what the saves start from, then one insert of their new versions."""
    bases = store.save_bases(cur, [(*save.label, save.request_id) for save in saves])
    made: dict[tuple, list[LabelRow]] = {}  # versions written by earlier saves of this write, by label
    outcomes, new_rows, given = [], [], set()
    for n, save in enumerate(saves):
        try:
            outcome = _next_version(db, save, bases.get(n), made.get(save.label, []))
        except Refusal as refusal:
            outcomes.append(refusal)
            continue
        if isinstance(outcome, dict):  # a new version, given the first candidate id no other version holds
            parts = (*save.label, outcome["version"])
            outcome["annotation_id"] = keys.new_row_id(
                lambda candidate: candidate in given or check_ids and store.annotation_id_taken(cur, candidate),
                *parts)
            if not check_ids and outcome["annotation_id"] != keys.natural_id(*parts):
                raise _IdTaken  # two saves of this write share a candidate: rare enough to check each id again
            given.add(outcome["annotation_id"])
            new_rows.append(outcome)
            # No read back (a lake takes no RETURNING): each value is already of its column's type.
            row = LabelRow(**{field: outcome.get(field) for field in store.ROW_FIELDS},
                           empty=not store.says_something(outcome))
            made.setdefault(save.label, []).append(row)
            outcome = (to_dict(row), True)
        outcomes.append(outcome)
    # Unchecked, the ids are checked by the insert itself.
    if new_rows and store.insert_labels(cur, new_rows) != len(new_rows):
        raise _IdTaken
    unknown = sorted({new["reviewer"] for new in new_rows} - _stored_reviewers.get(db, set()))
    if unknown:
        writes.add_reviewers(cur, unknown, new_rows[0]["created_at"])
    return outcomes


def _next_version(db: Database, save: _Save, basis: list[tuple] | None, made: list[LabelRow]):
    """The answer to one save from what it starts from (`basis`, see store.save_bases, and the versions `made`
    earlier in the same write): the version a retried request made before as (label, False), or the columns of
    the new version to write, its annotation_id still None. Raises the save's refusal."""
    if not basis:
        raise _no_event(db, save.trace_id, save.event_id)
    snapshot = dict(zip(("event_type", "agent", "role"), basis[0][:3]))
    for name, value in save.values.items():
        declared = BY_NAME[name]
        if not declared.is_empty(value) and not declared.applies(snapshot["event_type"]):
            raise LabelError(name, f"is asked of {' and '.join(declared.applies_to)} events; this is a "
                                   f"{snapshot['event_type']}")
    rows = [LabelRow._make(row[3:]) for row in basis if row[3] is not None] + made
    done = next((row for row in rows if save.request_id and row.client_request_id == save.request_id), None)
    if done is not None:
        return to_dict(done), False
    current = max(rows, key=lambda row: row.version, default=None)
    have = current.version if current else 0
    if save.base_version is not None and save.base_version != have:
        raise StaleVersion(to_dict(current) if current else None, save.base_version)
    merged = _values_of(current) | save.values
    if save.queue_id is not None:
        queues.check_label(db, save.queue_id, save.trace_id, save.event_id, save.reviewer, merged)
    return {"annotation_id": None, "trace_id": save.trace_id, "event_id": save.event_id, "reviewer": save.reviewer,
            "version": have + 1, "annotator_kind": save.annotator_kind, "client_request_id": save.request_id,
            "created_at": now(), "queue_id": save.queue_id, **snapshot, **_columns(merged)}


def clear_label(db: Database, data: dict) -> tuple[dict, bool]:
    """A new version with every field empty."""
    return save_label(db, {**data, **EMPTY_LABEL})


def undo_label(db: Database, data: dict) -> tuple[dict, bool]:
    """A new version restoring the values of the version before the current one (empty before v1)."""
    check_request(data)
    reviewer = clean_reviewer(data.get("reviewer"))
    trace_id, event_id = str(data.get("trace_id") or ""), str(data.get("event_id") or "")
    latest = [LabelRow._make(row) for row in store.last_label_versions(db, trace_id, event_id, reviewer, 2)]
    if not latest:
        raise NotFound(f"{reviewer} has no label on event '{event_id}' of trace '{trace_id}' to undo")
    current = latest[0]
    previous = next((row for row in latest[1:] if row.version == current.version - 1), None)
    restored = _values_of(previous)
    return save_label(db, {**data, **restored, "base_version": data.get("base_version", current.version)})


def _values_of(row: LabelRow | None) -> dict:
    """The declared fields of a stored version (tags are stored as JSON text)."""
    if row is None:
        return dict(EMPTY_LABEL)
    return {name: json.loads(getattr(row, name)) if BY_NAME[name].kind == "tags" else getattr(row, name)
            for name in NAMES}


def _columns(values: dict) -> dict:
    return {name: json.dumps(value) if BY_NAME[name].kind == "tags" else value for name, value in values.items()}


def list_labels(db: Database, viewer: str | None, trace_id=None, event_id=None, reviewer=None, history=False,
                queue_id=None, trace_ids: list[str] | None = None) -> list[dict]:
    """Current labels (or every version) that `viewer` may see, matching the filters, in trace, event,
    reviewer, version order; with `queue_id`, the labels saved in that review queue; with `trace_ids`, those of
    these traces."""
    return [to_dict(LabelRow._make(row))
            for row in store.read_labels(db, viewer, trace_id, event_id, reviewer, history, queue_id, trace_ids)]


def label_page(db: Database, viewer: str | None, filters: dict, history: bool, limit: int | None,
               offset: int) -> tuple[list[dict], int]:
    """A page of `list_labels` (`filters`: trace_id, event_id, reviewer), and how many labels match."""
    rows, total = store.read_labels_page(db, viewer, filters, history, limit, offset)
    return [to_dict(LabelRow._make(row)) for row in rows], total


def others_on_event(db: Database, viewer: str | None, trace_id: str, event_id: str) -> list[dict]:
    """Other reviewers' current labels on an event, as far as `viewer` may see them (shown beside theirs)."""
    return [label for label in list_labels(db, viewer, trace_id, event_id)
            if label["reviewer"] != viewer and not label["empty"]]


def reviewers(db: Database) -> list[str]:
    return label_store.reviewer_names(db)


def add_reviewer(db: Database, name: str) -> str:
    name = clean_reviewer(name)
    db.write(lambda cur: writes.add_reviewer(cur, name, now()), [writes.reviewer_lock(name)])
    return name


# Export and import ---------------------------------------------------------------------------

def export_rows(labels: list[dict]) -> list[dict]:
    return [{column: label[column] for column in EXPORT_COLUMNS} for label in labels]


def to_csv(rows: list[dict], columns=EXPORT_COLUMNS) -> str:
    """RFC 4180 CSV (CRLF, quotes doubled) of `columns`: declared fields as their cells (tags joined by ';'),
    empty cells for nulls, formula-like cells neutralised (app.csvsafe)."""
    out = io.StringIO()
    writer = csvsafe.writer(out, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(column, row.get(column)) for column in columns])
    return out.getvalue()


def csv_cell(column: str, value) -> str:
    """A cell: a declared field as it declares, anything else as text (empty for null)."""
    declared = BY_NAME.get(column)
    if declared is not None:
        return declared.to_text(value)
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


class LabelImportError(Refusal, ValueError):
    """Rows that cannot be imported; each error names its line (CSV) or index (JSON) and field."""

    def __init__(self, errors: list[dict], status: int = 422):
        self.errors, self.status = errors, status
        super().__init__(f"{len(errors)} problem(s); nothing imported")

    def details(self) -> dict:
        return {"errors": self.errors}


def parse_import(body: bytes, content_type: str) -> list[tuple[str, dict]]:
    """(location, raw row) pairs from our JSON or CSV export (as the content type says, else as the text
    looks); CSV cells as app.domain.csvsafe reads them back."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelImportError([{"where": "body", "message": f"not UTF-8 text (byte {exc.start})"}], 400) from exc
    stripped = text.lstrip()
    if "json" in content_type or ("csv" not in content_type and stripped.startswith(("[", "{"))):
        if json_values(body) > MAX_JSON_VALUES:  # counted before anything is built: memory stays bounded
            raise TooManyValues("body")
        try:
            doc = strict_loads(text)
        except json.JSONDecodeError as exc:
            raise LabelImportError([{"where": f"line {exc.lineno}, column {exc.colno}", "message": exc.msg}], 400) from exc
        except ValueError as exc:  # NaN or Infinity, or nested too deeply to read
            raise LabelImportError([{"where": "body", "message": str(exc)}], 400) from exc
        items = doc.get("items") if isinstance(doc, dict) else doc
        if not isinstance(items, list):
            raise LabelImportError([{"where": "body", "message": "expected a list of labels or {\"items\": [...]}"}], 400)
        return [(f"item {i}", item) for i, item in enumerate(items)]
    reader = csvsafe.reader(io.StringIO(text, newline=""))
    rows, errors = [], []
    try:
        header = next(reader, [])
        repeated = csvsafe.repeated_columns(header)
        if repeated:
            raise LabelImportError([{"where": "line 1", "message": f"column(s) {', '.join(repeated)} given more "
                                                                   "than once in the header"}], 400)
        missing = [c for c in FIRST_EXPORT_COLUMNS if c not in header]
        if missing:
            raise LabelImportError([{"where": "line 1", "message": f"missing column(s): {', '.join(missing)}"}], 400)
        for cells in reader:
            where = f"line {reader.line_num}"
            if len(cells) == len(header):
                rows.append((where, _from_csv(dict(zip(header, cells)))))
            elif cells:  # blank lines are skipped
                errors.append({"where": where, "message": f"has {len(cells)} fields, the header has {len(header)}"})
    except csv.Error as exc:
        where = f"line {reader.line_num}"
        raise LabelImportError([{"where": where, "message": f"unreadable CSV ({exc})"}], 400) from exc
    if errors:
        raise LabelImportError(errors)
    return rows


def _from_csv(row: dict) -> dict:
    """A CSV row's cells as values: declared fields as they declare (a missing column, from an export made
    before the field existed, as empty), the other optional columns as null when empty."""
    out = dict(row)
    for declared in FIELDS:
        out[declared.name] = declared.from_text(row.get(declared.name))
    for column in ("event_type", "agent", "role", "queue_id"):
        out[column] = row.get(column) or None
    return out


def import_labels(db: Database, rows: list[tuple[str, dict]], imported_by: str | None = None) -> dict:
    """Merge exported label versions: identical ones are skipped, new ones inserted, differing ones refused.
    Versions keep their reviewer and times; `imported_by` records the account that imported them."""
    cleaned, errors = [], []
    for where, raw in rows:
        try:
            cleaned.append((where, _import_row(raw)))
        except (LabelError, ValueError, TypeError, KeyError) as exc:
            errors.append({"where": where, "message": str(exc)})
    if errors:
        raise LabelImportError(errors)
    reviewers = {row["reviewer"] for _, row in cleaned}

    def merge(cur, check_ids: bool) -> dict:
        """One read of the versions stored already, then one insert of the new ones (a version at a time held the
        write lock some 3 ms a version: 100,000 of them, five minutes of no one's label saved)."""
        stored = store.label_versions(cur, [_version_key(row) for _, row in cleaned])
        new: dict[tuple, dict] = {}  # a version the file gives twice is compared with its first, as if stored
        skipped, conflicts, given = 0, [], set()
        for where, row in cleaned:
            key = _version_key(row)
            before = LabelRow._make(stored[key])._asdict() if key in stored else new.get(key)
            if before is None:
                row = row | {"imported_by": imported_by, "annotation_id": keys.new_row_id(
                    lambda candidate: candidate in given or check_ids and store.annotation_id_taken(cur, candidate),
                    *key)}
                if not check_ids and row["annotation_id"] != keys.natural_id(*key):
                    raise _IdTaken  # two versions of the file share a candidate: rare enough to check each id
                given.add(row["annotation_id"])
                new[key] = row
            elif _same(before, row):
                skipped += 1
            else:
                conflicts.append({"where": where, "message": f"version {row['version']} of {row['reviewer']}'s label "
                                  f"on {row['trace_id']}/{row['event_id']} differs from the stored one"})
        if conflicts:
            raise LabelImportError(conflicts, 409)
        if new and store.insert_labels(cur, list(new.values())) != len(new):  # unchecked, the insert checks the ids
            raise _IdTaken
        if reviewers:
            writes.add_reviewers(cur, sorted(reviewers), now())
        return {"imported": len(new), "unchanged": skipped}

    locks = list(map(writes.reviewer_lock, reviewers))
    try:
        return db.write(lambda cur: merge(cur, False), locks)
    except _IdTaken:
        return db.write(lambda cur: merge(cur, True), locks)


def _version_key(row: dict) -> tuple[str, str, str, int]:
    return row["trace_id"], row["event_id"], row["reviewer"], row["version"]


def _import_row(raw: dict) -> dict:
    """An exported label version as the row to store; raises LabelError naming the field."""
    if not isinstance(raw, dict):
        raise ValueError("a label must be an object")
    check_request(raw)
    credit = raw.get("credit")
    if isinstance(credit, str):
        try:
            credit = float(credit) if credit.strip() else None
        except ValueError as exc:
            raise LabelError("credit", f"{credit!r} is not a number") from exc
    values = clean_values({**{f.name: f.empty if raw.get(f.name) is None else raw[f.name] for f in FIELDS},
                           "credit": credit})
    version = _version(raw["version"])
    kind = raw.get("annotator_kind") or "human"
    if kind not in ANNOTATOR_KINDS:
        raise LabelError("annotator_kind", f"{kind!r} is not one of {', '.join(ANNOTATOR_KINDS)}")
    for field in ("trace_id", "event_id"):
        if not raw.get(field):
            raise LabelError(field, "must not be empty")
    return {"trace_id": str(raw["trace_id"]), "event_id": str(raw["event_id"]),
            "reviewer": clean_reviewer(raw.get("reviewer")), "version": version, "annotator_kind": kind,
            "event_type": raw.get("event_type") or None, "agent": raw.get("agent") or None,
            "role": raw.get("role") or None, "queue_id": raw.get("queue_id") or None,
            "created_at": stored_utc(str(raw["created_at"])), **_columns(values)}


def _version(value) -> int:
    """An imported version: a whole number, or its text (CSV), from 1 to MAX_VERSION; never rounded."""
    if isinstance(value, str) and value.strip().isdecimal():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_VERSION:
        raise LabelError("version", f"{value!r} is not a whole number from 1 to {MAX_VERSION}")
    return value


def _same(a: dict, b: dict) -> bool:
    """Whether two versions of one label say the same (an imported one and the one stored)."""
    return all(a[f] == b[f] for f in (*NAMES, "annotator_kind", "created_at", "queue_id"))


def progress(db: Database, trace_id: str, viewer: str | None) -> dict:
    """Events of the trace, how many `viewer` labelled, and how many anyone they may see did."""
    total = trace_store.event_count(db, trace_id)
    return {"total": total, **store.trace_label_counts(db, viewer, trace_id)}
