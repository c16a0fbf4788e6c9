"""The paper pool and exclusion log: CSV import with line-numbered errors, reviewer tags with history,
lossless export, corpus statistics and reviewer/pool comparisons.

Cells are kept as their CSV text, so exporting an imported file gives it back unchanged (cells a
spreadsheet would run as formulas are written neutralised, and read back, as app.csvsafe says).
"""

import csv
import io
from collections import Counter

from app.domain import csvsafe
from app.domain.refusals import Refusal
from app.domain.taxonomy import EXCLUSION_COLUMNS, PAPER_COLUMNS, PAPER_FIELDS
from app.services.labels import LabelError, NotFound, clean_reviewer, now
from app.store import keys, writes
from app.store import papers as paper_store
from app.store.db import Database, iso_utc
from app.store.models import PaperTag

POOL = "pool"
CROSSTABS = (("reward_type", "credit_granularity"), ("orchestration_form", "credit_granularity"),
             ("category", "verified"))
EXCLUSION_FACETS = ("stage", "source", "query_family")
KINDS = {"papers": (PAPER_COLUMNS, "key"), "excluded": (EXCLUSION_COLUMNS, "record_id")}


class CsvProblems(Refusal, ValueError):
    """A CSV that cannot be imported; each problem names its line and column. Nothing is imported."""

    status = 422

    def __init__(self, errors: list[dict]):
        self.errors = errors
        super().__init__(f"{len(errors)} problem(s) in the CSV; nothing imported")

    def details(self) -> dict:
        return {"errors": self.errors}


def _problem(line: int, column: str | None, message: str) -> dict:
    where = f"line {line}" + (f", {column}" if column else "")
    return {"line": line, "column": column, "message": f"{where}: {message}"}


def read_csv(body: bytes) -> tuple[str, list[tuple[int, dict]]]:
    """The kind of file (from its header) and its records, each with the line it starts on."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = body[:exc.start].count(b"\n") + 1
        raise CsvProblems([_problem(line, None, f"not UTF-8 text (byte {exc.start})")]) from exc
    if not text.strip():
        raise CsvProblems([_problem(1, None, "empty file: expected the paper pool or the exclusion log header")])
    reader = csvsafe.reader(io.StringIO(text, newline=""))
    try:
        return _records(reader)
    except csv.Error as exc:
        raise CsvProblems([_problem(reader.line_num, None, f"unreadable CSV ({exc})")]) from exc


def _records(reader) -> tuple[str, list[tuple[int, dict]]]:
    header = next(reader)
    repeated = csvsafe.repeated_columns(header)
    if repeated:
        raise CsvProblems([_problem(1, None, f"column(s) {', '.join(repeated)} given more than once in the header")])
    kind = max(KINDS, key=lambda k: len(set(header) & set(KINDS[k][0])))
    columns = KINDS[kind][0]
    missing = [c for c in columns if c not in header]
    if missing:
        raise CsvProblems([_problem(1, None, f"missing column(s) {', '.join(missing)} of the {kind} file "
                                             f"({len(columns)} columns: {', '.join(columns)})")])
    records, errors = [], []
    line = reader.line_num + 1
    for cells in reader:
        if not any(cell.strip() for cell in cells):
            line = reader.line_num + 1
            continue
        if len(cells) != len(header):
            errors.append(_problem(line, None, f"has {len(cells)} fields, the header has {len(header)}"))
        else:
            records.append((line, dict(zip(header, cells))))
        line = reader.line_num + 1
    if errors:
        raise CsvProblems(errors)
    return kind, records


def check_records(kind: str, records: list[tuple[int, dict]]) -> list[dict]:
    """Controlled values, unique non-empty keys and integer years, each problem with line and column."""
    key_column = KINDS[kind][1]
    errors, seen = [], {}
    for line, row in records:
        key = row[key_column].strip()
        if not key:
            errors.append(_problem(line, key_column, "is empty"))
        elif key in seen:
            errors.append(_problem(line, key_column, f"{key!r} repeats line {seen[key]}"))
        else:
            seen[key] = line
        if kind != "papers":
            continue
        for field, allowed in PAPER_FIELDS.items():
            if row[field] not in allowed:
                errors.append(_problem(line, field, f"{row[field]!r} is not one of {', '.join(allowed)}"))
        if not row["year"].strip().lstrip("-").isdigit():
            errors.append(_problem(line, "year", f"{row['year']!r} is not an integer"))
    return errors


def import_csv(db: Database, body: bytes) -> dict:
    """Import a pool or exclusion log whole or not at all; existing rows are updated by key."""
    kind, records = read_csv(body)
    errors = check_records(kind, records)
    if errors:
        raise CsvProblems(errors)
    table = "papers" if kind == "papers" else "excluded"
    columns, key_column = KINDS[kind]
    stamp = now()

    def store(cur) -> None:
        positions = paper_store.key_positions(cur, table, key_column)
        next_position = max(positions.values(), default=-1) + 1
        rows = []
        for _, record in records:
            position = positions.get(record[key_column])
            if position is None:
                position, next_position = next_position, next_position + 1
            rows.append({**{c: record[c] for c in columns}, "position": position, "imported_at": stamp})
        writes.replace_rows(cur, table, key_column, rows)

    # One import at a time per file kind, across instances too: positions and keys are read, then written.
    db.write(store, [("import", kind)])
    return {"kind": kind, "imported": len(records)}


# Reviewer tags -------------------------------------------------------------------------------

def tag_values(data: dict) -> dict:
    """The controlled fields present in `data`, checked; None (or "") means "as the pool says"."""
    unknown = [k for k in data if k not in PAPER_FIELDS and k not in ("reviewer", "note")]
    if unknown:
        raise LabelError(unknown[0], f"is not a taggable field; fields: {', '.join(PAPER_FIELDS)}, note")
    values = {}
    for field, allowed in PAPER_FIELDS.items():
        if field in data:
            value = data[field] if data[field] != "" else None
            if value is not None and value not in allowed:
                raise LabelError(field, f"{value!r} is not one of {', '.join(allowed)} (or null)")
            values[field] = value
    if "note" in data:
        if not isinstance(data["note"], str | None):
            raise LabelError("note", "must be text")
        values["note"] = data["note"] or ""
    return values


def tag_dict(row: dict) -> dict:
    """A tag version (a paper_tags row) as the API shows it."""
    return {"key": row["key"], "reviewer": row["reviewer"], "version": row["version"],
            **{f: row[f] for f in PAPER_FIELDS}, "note": row["note"], "created_at": iso_utc(row["created_at"])}


def save_tags(db: Database, key: str, data: dict) -> dict:
    """A new version of a reviewer's tags on a paper; omitted fields keep their previous value."""
    reviewer = clean_reviewer(data.get("reviewer"))
    values = tag_values(data)

    def save(cur) -> dict:
        if not paper_store.paper_exists(cur, key):
            raise NotFound(f"no paper with key '{key}'")
        current = paper_store.current_tag(cur, key, reviewer)
        previous = {f: current[f] for f in (*PAPER_FIELDS, "note")} if current else {}
        version = (current["version"] if current else 0) + 1
        tag_id = keys.new_row_id(lambda taken: paper_store.tag_id_taken(cur, taken), key, reviewer, version)
        row = PaperTag(tag_id=tag_id, key=key, reviewer=reviewer, version=version, created_at=now(),
                       **(previous | values)).model_dump()
        writes.insert_row(cur, "paper_tags", row)
        writes.add_reviewer(cur, reviewer, row["created_at"])
        return tag_dict(row)

    return db.write(save, [writes.reviewer_lock(reviewer)])


def tag_history(db: Database, key: str | None = None, reviewer: str | None = None,
                history: bool = True) -> list[dict]:
    """Tag versions (or only each reviewer's current one), by paper, reviewer and version."""
    return [tag_dict(row) for row in paper_store.tag_versions(db, key, reviewer, history)]


def taggers(db: Database) -> list[str]:
    return paper_store.taggers(db)


# Reading the pool -------------------------------------------------------------------------------

def pool_rows(db: Database) -> list[dict]:
    """Every paper in import order, cells as imported."""
    return paper_store.pool_rows(db)


def effective_rows(db: Database, source: str = POOL) -> list[dict]:
    """The pool as `source` sees it: a reviewer's current tags replace the pool's values they set."""
    if source == POOL:
        return pool_rows(db)
    rows, history = db.together(lambda: pool_rows(db), lambda: tag_history(db, reviewer=source, history=False))
    tags = {t["key"]: t for t in history}
    for row in rows:
        tag = tags.get(row["key"])
        if tag:
            row.update({f: tag[f] for f in PAPER_FIELDS if tag[f] is not None})
    return rows


def excluded_rows(db: Database) -> list[dict]:
    return paper_store.excluded_rows(db)


def to_csv(rows: list[dict], columns=PAPER_COLUMNS) -> str:
    """CSV with the published columns and order, minimal quoting and LF lines, as the published file;
    formula-like cells neutralised (app.csvsafe)."""
    out = io.StringIO()
    writer = csvsafe.writer(out, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([row[c] for c in columns] for row in rows)
    return out.getvalue()


def stats(db: Database, source: str = POOL) -> dict:
    """Corpus counts per controlled field, the sparsity cross-tabs, and the exclusion log's facets."""
    rows, excluded = db.together(lambda: effective_rows(db, source),  # side by side on a lake
                                 lambda: excluded_rows(db))
    counts = {field: _ordered_counts(Counter(r[field] for r in rows), allowed)
              for field, allowed in PAPER_FIELDS.items()}
    crosstabs = {}
    for a, b in CROSSTABS:
        table = {va: {vb: 0 for vb in PAPER_FIELDS[b]} for va in PAPER_FIELDS[a]}
        for r in rows:
            table[r[a]][r[b]] += 1
        crosstabs[f"{a} x {b}"] = table
    return {
        "source": source,
        "retained": len(rows),
        "excluded": len(excluded),
        "audited": len(rows) + len(excluded),
        "counts": counts,
        "crosstabs": crosstabs,
        "excluded_counts": {f: dict(Counter(r[f] for r in excluded).most_common()) for f in EXCLUSION_FACETS},
    }


def _ordered_counts(counter: Counter, allowed: tuple) -> dict:
    """Counts of every allowed value (zeros included: a sparse cell is a finding), largest first."""
    return dict(sorted(((v, counter.get(v, 0)) for v in allowed), key=lambda kv: (-kv[1], allowed.index(kv[0]))))


def ratings(db: Database, field: str, raters: list[str]) -> dict:
    """{paper key: {rater: value}} for agreement; "pool" is the pool's own tags, a reviewer's are explicit."""
    out: dict = {}
    if POOL in raters:
        for row in pool_rows(db):
            out.setdefault(row["key"], {})[POOL] = row[field]
    for tag in tag_history(db, history=False):
        if tag["reviewer"] in raters and tag[field] is not None:
            out.setdefault(tag["key"], {})[tag["reviewer"]] = tag[field]
    return out


def disagreements(db: Database, field: str, raters: list[str]) -> list[dict]:
    """Papers where the raters who tagged `field` gave different values."""
    titles = {row["key"]: row["title"] for row in pool_rows(db)}
    out = []
    for key, values in ratings(db, field, raters).items():
        present = {r: v for r, v in values.items() if v is not None}
        if len(present) >= 2 and len(set(present.values())) > 1:
            out.append({"key": key, "title": titles.get(key, ""), "values": present})
    return sorted(out, key=lambda d: d["key"])
