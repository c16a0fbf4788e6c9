"""Corpus pages at a training run's size (issue 30): N small rollouts ingested over HTTP, then each corpus page timed.

Rollouts are generated swarms of 6 agents and 37 events (app/domain/generate.py), posted in requests of 1,000 to a
real uvicorn over a fresh DuckDB file. Each page is timed at 500 rollouts and at N: its first view (which, before
issue 30, analysed every trace not yet analysed), then again. Run with
`.venv/bin/python benchmarks/corpus.py` (100,000 rollouts), `--quick` (3,000) or `--n N`.
Prints medians with their range and the ratio of the two sizes; asserts nothing.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.ingest import get, post, start_server  # noqa: E402

from app.domain.generate import generate_swarm  # noqa: E402

DEFAULT_N = 100_000
QUICK_N = 3_000
SMALL_N = 500
REQUEST = 1_000
AGENTS, EVENTS = 6, 37
AGAIN = 3  # views after the first
PAGES = {
    "trace list": "/",
    "list by reward": "/?sort=-reward:team",
    "list filtered": "/?topology=swarm&q=market",
    "dashboard": "/dashboard",
    "audit": "/audit",
}
PAGE_TIMEOUT_S = 600


def rollouts(start: int, stop: int) -> list[dict]:
    """Rollouts `start` to `stop`, each its own seed and id."""
    out = []
    for i in range(start, stop):
        trace = generate_swarm(AGENTS, EVENTS, seed=i)
        trace["trace_id"] = f"rollout-{i:06d}"
        out.append(trace)
    return out


def ingest_upto(url: str, start: int, stop: int) -> tuple[float, int]:
    """Post rollouts start..stop in requests of REQUEST; seconds spent in the posts and events sent."""
    seconds, events = 0.0, 0
    for lo in range(start, stop, REQUEST):
        batch = rollouts(lo, min(lo + REQUEST, stop))
        events += sum(len(t["events"]) for t in batch)
        seconds += post(url, json.dumps(batch).encode())
    return seconds, events


def view(url: str, path: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url + path, timeout=PAGE_TIMEOUT_S) as response:
        response.read()
        assert response.status == 200
    return time.perf_counter() - start


def time_pages(url: str) -> dict[str, dict]:
    """Per page: its first view and its views again, in seconds."""
    out = {}
    for name, path in PAGES.items():
        first = view(url, path)
        out[name] = {"first": first, "again": [get(url, path) for _ in range(AGAIN)]}
    return out


def spread(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:.0f} ms ({min(times) * 1000:.0f}-{max(times) * 1000:.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="rollouts in all")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_N:,} rollouts")
    args = parser.parse_args()
    n = QUICK_N if args.quick else args.n
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "corpus.duckdb")
        try:
            seconds, events = ingest_upto(url, 0, SMALL_N)
            small = time_pages(url)
            more_s, more_events = ingest_upto(url, SMALL_N, n)
            seconds, events = seconds + more_s, events + more_events
            large = time_pages(url)
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"{n:,} rollouts of {AGENTS} agents, {events:,} events: ingest over HTTP in requests of {REQUEST:,} "
          f"{seconds:.1f} s, {events / seconds:,.0f} events/s")
    print(f"{'page':16} {'first at 500':>14} {'first at N':>12} {'again at 500':>18} {'again at N':>18} "
          f"{'ratio N/500':>11}")
    for name in PAGES:
        s, big = small[name], large[name]
        ratio = statistics.median(big["again"]) / statistics.median(s["again"])
        print(f"{name:16} {s['first'] * 1000:>11.0f} ms {big['first'] * 1000:>9.0f} ms {spread(s['again']):>18} "
              f"{spread(big['again']):>18} {ratio:>10.1f}x")


if __name__ == "__main__":
    main()
