"""Metrics + audit + computed credit for a generated 1,000-agent / 20,000-event trace (target <= 0.5 s).

Run with `.venv/bin/python benchmarks/analysis.py`. Prints figures; asserts nothing.
"""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.domain.audit import audit  # noqa: E402
from app.domain.credit import assign, rollup  # noqa: E402
from app.domain.generate import generate_swarm  # noqa: E402
from app.domain.metrics import analyse_graph, compute_metrics  # noqa: E402

REPEAT = 5


def main() -> None:
    for events in (20_000, 100_000):
        trace = generate_swarm(1000, events, seed=1)
        runs = {"graph": [], "metrics": [], "audit": [], "credit": [], "total": []}
        for _ in range(REPEAT):
            start = time.perf_counter()
            g = analyse_graph(trace)
            t1 = time.perf_counter()
            compute_metrics(trace, g)
            t2 = time.perf_counter()
            audit(trace, g)
            t3 = time.perf_counter()
            rollup(trace, assign(trace, "causal", trace["rewards"]["team"], g), g)
            t4 = time.perf_counter()
            for name, seconds in (("graph", t1 - start), ("metrics", t2 - t1), ("audit", t3 - t2),
                                  ("credit", t4 - t3), ("total", t4 - start)):
                runs[name].append(seconds)
        parts = ", ".join(f"{name} {statistics.median(v) * 1000:.0f} ms" for name, v in runs.items())
        print(f"{events:,} events (median of {REPEAT}): {parts} (target total <= 500 ms at 20,000)")


if __name__ == "__main__":
    main()
