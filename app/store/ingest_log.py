"""Ingest log SQL: every receipt of a trace upload or an exporter's batch, appended and read back newest first."""

import json

from app.store.db import Database, iso_utc
from app.store.sql import execute

TRACE_LISTS = ("created", "extended", "repeated")
INGEST_LOG_COLUMNS = ("id, received_at, endpoint, format, unit, received, used, duplicates, skipped, reasons, "
                      "created, extended, repeated, status, error")
# What became of a receipt, one word: refused whole, some items skipped, or every item used (or a repeat).
OUTCOMES = ("ok", "partial", "refused")
OUTCOME = "CASE WHEN error IS NOT NULL THEN 'refused' WHEN skipped > 0 THEN 'partial' ELSE 'ok' END"
# A receipt keeps each list's first LISTED ids and its count beside it (migrations/0026), which a page reads: parsing
# the whole lists of a page's receipts (an upload of 1,000 traces names 1,000) cost more than the rest of the page.
LISTED = 100
TRIMMED = ", ".join(f"list_slice({name}_head::VARCHAR[], 1, ?) AS {name}, {name}_count" for name in TRACE_LISTS)
INGEST_LOG_FILTER = """
    WHERE (? IS NULL OR endpoint = ?) AND (? IS NULL OR """ + OUTCOME + """ = ?)
      AND (? IS NULL OR list_contains(created::VARCHAR[], ?) OR list_contains(extended::VARCHAR[], ?)
           OR list_contains(repeated::VARCHAR[], ?))
"""


def list_ingest_log(db: Database, limit: int = 50, offset: int = 0, endpoint: str | None = None,
                    trace_id: str | None = None, outcome: str | None = None,
                    traces_shown: int = 100) -> tuple[list[dict], int]:
    """Receipts, newest first, each naming at most `traces_shown` (up to LISTED) traces per list (with `<list>_count`,
    how many it names in all); optionally of one endpoint, one outcome (OUTCOMES), or naming one trace (created,
    extended or repeated)."""
    if traces_shown > LISTED:
        raise ValueError(f"a receipt in a list names at most {LISTED} traces per list, not {traces_shown}")
    params = [endpoint, endpoint, outcome, outcome, trace_id, trace_id, trace_id, trace_id]
    page = ("SELECT id, received_at, endpoint, format, unit, received, used, duplicates, skipped, reasons, "
            f"{TRIMMED}, status, error, {OUTCOME} AS outcome FROM ingest_log{INGEST_LOG_FILTER}"
            "ORDER BY received_at DESC, id LIMIT ? OFFSET ?")
    total, rows = db.together(  # side by side on a lake
        lambda: db.scalar("SELECT count(*) FROM ingest_log" + INGEST_LOG_FILTER, params),
        lambda: db.fetchall(page, [traces_shown] * len(TRACE_LISTS) + params + [limit, offset]))
    for row in rows:
        row["reasons"] = json.loads(row["reasons"])
        row["received_at"] = iso_utc(row["received_at"])
    return rows, total


def read_receipt(db: Database, receipt_id: str) -> dict | None:
    """One receipt whole, every trace it names."""
    row = db.fetchone(f"SELECT {INGEST_LOG_COLUMNS}, {OUTCOME} AS outcome FROM ingest_log WHERE id = ?", [receipt_id])
    if row is None:
        return None
    for key in ("reasons", *TRACE_LISTS):
        row[key] = json.loads(row[key])
    row["received_at"] = iso_utc(row["received_at"])
    return row | {f"{name}_count": len(row[name]) for name in TRACE_LISTS}


def ingest_endpoints(db: Database) -> list[str]:
    return [row[0] for row in db.execute("SELECT DISTINCT endpoint FROM ingest_log ORDER BY 1").fetchall()]


def insert_receipt(cur, receipt: dict) -> None:
    """Append one receipt (its columns by name, each list of traces a list of ids) inside the caller's transaction,
    with each list's count and first LISTED ids."""
    row = receipt | {name: json.dumps(receipt[name]) for name in TRACE_LISTS} \
        | {f"{name}_count": len(receipt[name]) for name in TRACE_LISTS} \
        | {f"{name}_head": json.dumps(receipt[name][:LISTED]) for name in TRACE_LISTS}
    execute(cur, f"INSERT INTO ingest_log ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", list(row.values()))
