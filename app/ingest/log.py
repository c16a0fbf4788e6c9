"""The ingest log: one row per receipt (an exporter's batch, an upload, a CLI import), so nothing that was
sent is dropped without a trace of it: what came, what was used, what was skipped and why."""

import json
import uuid
from collections import Counter
from dataclasses import dataclass, field

from app.store import ingest_log as log_store
from app.store.db import Database, utc_now


@dataclass
class Receipt:
    """What one request or command brought, and what became of it."""

    endpoint: str
    format: str
    unit: str  # what `received` counts: spans, records or traces
    received: int = 0
    used: int = 0
    duplicates: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> count
    warnings: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    extended: list[str] = field(default_factory=list)
    repeated: list[str] = field(default_factory=list)  # traces of items that had arrived before
    status: int = 200
    error: str | None = None

    def skip(self, reason: str, count: int = 1) -> None:
        self.skipped[reason] += count

    @property
    def skipped_count(self) -> int:
        return sum(self.skipped.values())

    def reasons(self) -> list[dict]:
        return [{"reason": r, "count": n} for r, n in self.skipped.items()] + \
            [{"reason": w, "count": None} for w in self.warnings]

    def refused(self, status: int, error: str) -> "Receipt":
        """The whole receipt was refused: nothing of it was used."""
        self.status, self.error, self.used = status, error, 0
        return self


def record(db: Database, receipt: Receipt) -> None:
    """Append the receipt to the log, in a transaction of its own."""
    db.write(lambda cur: insert(cur, receipt))


def insert(cur, receipt: Receipt) -> None:
    """Append the receipt to the log inside the caller's transaction (so it commits with what it logs)."""
    log_store.insert_receipt(cur, {
        "id": uuid.uuid4().hex[:16], "received_at": utc_now(), "endpoint": receipt.endpoint, "format": receipt.format,
        "unit": receipt.unit, "received": receipt.received, "used": receipt.used, "duplicates": receipt.duplicates,
        "skipped": receipt.skipped_count, "reasons": json.dumps(receipt.reasons()),
        "created": receipt.created, "extended": receipt.extended, "repeated": receipt.repeated,
        "status": receipt.status, "error": receipt.error})
