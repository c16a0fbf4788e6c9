"""Metrics + audit + computed credit of generated 1,000-agent traces of 20,000 and 100,000 events.

Targets (issue 15): total <= 300 ms at 20,000 events and linear in size (<= 1.5 s at 100,000). Prints, per
stage and in total, the median and range of REPEAT runs, then the 100k / 20k ratio of the medians (5.0 is
linear). Run with `.venv/bin/python benchmarks/analysis.py`. Prints figures; asserts nothing.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.domain.audit import audit  # noqa: E402
from app.domain.credit import assign, rollup  # noqa: E402
from app.domain.generate import generate_swarm  # noqa: E402
from app.domain.metrics import analyse_graph, compute_metrics  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store import traces as trace_store
from app.store.db import Database  # noqa: E402
from app.store.writes import store_traces  # noqa: E402

REPEAT = 7
SIZES = (20_000, 100_000)
STAGES = ("graph", "metrics", "audit", "credit", "total")


def run(trace: dict) -> dict[str, float]:
    """Seconds per stage of one analysis, as the trace page's panels run it (one graph for all)."""
    start = time.perf_counter()
    g = analyse_graph(trace)
    t1 = time.perf_counter()
    compute_metrics(trace, g)
    t2 = time.perf_counter()
    audit(trace, g)
    t3 = time.perf_counter()
    rollup(trace, assign(trace, "causal", trace["rewards"]["team"], g), g)
    t4 = time.perf_counter()
    return {"graph": t1 - start, "metrics": t2 - t1, "audit": t3 - t2, "credit": t4 - t3, "total": t4 - start}


def read_seconds(trace: dict) -> list[float]:
    """Seconds to read the stored trace back from a DuckDB file: what a trace's first analysis waits for before
    the stages (later ones find it in the cache)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "analysis.duckdb")
        db.migrate(Settings().migrations_dir)
        store_traces(db, [trace])
        times = []
        for _ in range(REPEAT):
            start = time.perf_counter()
            trace_store.read_trace(db, trace["trace_id"])
            times.append(time.perf_counter() - start)
        db.close()
    return sorted(times)


def main() -> None:
    medians = {}
    for events in SIZES:
        trace = generate_swarm(1000, events, seed=1)
        runs = [run(trace) for _ in range(REPEAT)]
        read = read_seconds(trace)
        print(f"{events:,} events, median (range) of {REPEAT} runs:")
        print(f"  (read    {statistics.median(read) * 1000:6.0f} ms ({read[0] * 1000:.0f}-{read[-1] * 1000:.0f}): "
              "the stored trace, read once before a first analysis)")
        for stage in STAGES:
            seconds = sorted(r[stage] for r in runs)
            medians[events, stage] = statistics.median(seconds)
            print(f"  {stage:8} {medians[events, stage] * 1000:6.0f} ms "
                  f"({seconds[0] * 1000:.0f}-{seconds[-1] * 1000:.0f})")
    small, large = SIZES
    print(f"{large:,} / {small:,} events: " + ", ".join(
        f"{stage} {medians[large, stage] / medians[small, stage]:.1f}x" for stage in STAGES)
        + f" (linear: {large / small:.1f}x)")


if __name__ == "__main__":
    main()
