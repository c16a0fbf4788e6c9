"""Import speed: an OTLP/JSON file of 20,000 spans against ingesting our own format of the same size.

Target (issue 11): the OTLP import within 1.5x the time of our own ingest. Both go through the same in-process
path (parse, convert, validate, store into a fresh DuckDB file). Then the parts that differ: reading each document,
and the importer's mapping against its budget, what a 1.5x ratio leaves it once the OTLP document is read and the
events validated and stored as ours are. Prints figures; asserts nothing.
"""

import gc
import json
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_import_otlp import synthetic_otlp  # noqa: E402

from app.ingest.documents import Upload, fast_loads  # noqa: E402
from app.ingest.importers.otlp import import_otlp  # noqa: E402
from app.ingest.pipeline import ingest  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store.db import Database  # noqa: E402
from app.store.gcpause import paused_gc  # noqa: E402
from app.store.traces import read_trace  # noqa: E402

SPANS = 20_000
REPEAT = 7


def timed_ingest(db: Database, body: bytes, fmt: str | None) -> tuple[float, int]:
    start = time.perf_counter()
    stored = ingest(db, [Upload("bench", body)], existing="replace", fmt=fmt).stored
    events = db.scalar("SELECT n_events FROM traces WHERE trace_id = ?", [stored[0]])
    return time.perf_counter() - start, events


def timed(work) -> float:
    """Seconds of `work()`, with the collector paused as the ingest path pauses it."""
    gc.collect()
    with paused_gc():
        start = time.perf_counter()
        work()
        return time.perf_counter() - start


def main() -> None:
    otlp_body = json.dumps(synthetic_otlp(SPANS, 1)).encode()
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "bench.duckdb")
        db.migrate(Settings().migrations_dir)
        _, events = timed_ingest(db, otlp_body, "otlp")  # warm-up, and the trace in our format
        own = json.dumps(read_trace(db, db.scalar("SELECT trace_id FROM traces LIMIT 1"))).encode()
        otlp_runs, own_runs, otlp_parse, own_parse, mapping = [], [], [], [], []
        for _ in range(REPEAT):  # interleaved, so a machine slowing down weighs on both alike
            gc.collect()
            otlp_runs.append(timed_ingest(db, otlp_body, "otlp")[0])
            gc.collect()
            own_runs.append(timed_ingest(db, own, "orchestrace")[0])
            otlp_parse.append(timed(lambda: fast_loads(otlp_body)))
            own_parse.append(timed(lambda: fast_loads(own)))
            mapping.append(timed(partial(import_otlp, fast_loads(otlp_body))))  # the document read before timing
        db.close()
    otlp_s, own_s = statistics.median(otlp_runs), statistics.median(own_runs)
    ratios = sorted(o / w for o, w in zip(otlp_runs, own_runs))
    print(f"OTLP/JSON: {SPANS:,} spans ({len(otlp_body) / 1e6:.1f} MB) -> {events:,} events, imported and stored "
          f"in {otlp_s * 1000:.0f} ms (median of {REPEAT})")
    print(f"our format, the same trace ({len(own) / 1e6:.1f} MB): ingested in {own_s * 1000:.0f} ms")
    print(f"ratio OTLP / ours: {statistics.median(ratios):.2f} (median of {REPEAT} interleaved pairs, "
          f"range {ratios[0]:.2f}-{ratios[-1]:.2f}; target <= 1.5)")
    # Both validate and store the same events; the OTLP import adds reading its larger document and the mapping.
    parts = {"OTLP/JSON read": otlp_parse, "importer mapping (import_otlp)": mapping, "our format read": own_parse}
    for label, runs in parts.items():
        print(f"  {label:31s} {statistics.median(runs) * 1000:5.0f} ms (range {min(runs) * 1000:.0f}-"
              f"{max(runs) * 1000:.0f})")
    budget = 1.5 * own_s - (own_s - statistics.median(own_parse)) - statistics.median(otlp_parse)
    print(f"  the mapping's budget at 1.5x: {budget * 1000:.0f} ms "
          "(1.5x ours, less our validation and storing, less reading the OTLP document)")


if __name__ == "__main__":
    main()
