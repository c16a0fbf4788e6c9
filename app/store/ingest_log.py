"""Ingest log SQL: every receipt of a trace upload or an exporter's batch, appended and read back newest first."""

import json

from app.store.db import Database, iso_utc
from app.store.sql import execute

INGEST_LOG_COLUMNS = ("id, received_at, endpoint, format, unit, received, used, duplicates, skipped, reasons, "
                      "created, extended, repeated, status, error")


def list_ingest_log(db: Database, limit: int = 50, offset: int = 0, endpoint: str | None = None,
                    trace_id: str | None = None) -> tuple[list[dict], int]:
    """Receipts, newest first; optionally of one endpoint or naming one trace (created, extended or repeated)."""
    where = "(? IS NULL OR endpoint = ?) AND (? IS NULL OR list_contains(created::VARCHAR[], ?) " \
            "OR list_contains(extended::VARCHAR[], ?) OR list_contains(repeated::VARCHAR[], ?))"
    params = [endpoint, endpoint, trace_id, trace_id, trace_id, trace_id]
    total = db.scalar(f"SELECT count(*) FROM ingest_log WHERE {where}", params)
    rows = db.fetchall(f"SELECT {INGEST_LOG_COLUMNS} FROM ingest_log WHERE {where} "
                       "ORDER BY received_at DESC, id LIMIT ? OFFSET ?", params + [limit, offset])
    for row in rows:
        for key in ("reasons", "created", "extended", "repeated"):
            row[key] = json.loads(row[key])
        row["received_at"] = iso_utc(row["received_at"])
    return rows, total


def ingest_endpoints(db: Database) -> list[str]:
    return [row[0] for row in db.execute("SELECT DISTINCT endpoint FROM ingest_log ORDER BY 1").fetchall()]


def insert_receipt(cur, receipt: dict) -> None:
    """Append one receipt (its columns by name) inside the caller's transaction."""
    execute(cur, f"INSERT INTO ingest_log ({', '.join(receipt)}) VALUES ({', '.join('?' * len(receipt))})",
            list(receipt.values()))
