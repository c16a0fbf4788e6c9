"""Render speed: server-side figure JSON for large traces, and navigation to the graph's first painted frame in
Chromium, as the page reports it and as measured from outside the page.

Run with `.venv/bin/python benchmarks/render.py`. Prints figures; asserts nothing.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from browser.probes import PAINT_PROBE  # noqa: E402
from ingest import start_server  # noqa: E402

from app.domain.figure import build_figure  # noqa: E402
from app.domain.generate import generate_swarm  # noqa: E402
from app.services import graph  # noqa: E402
from app.services.cache import TraceCache  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store import queries  # noqa: E402
from app.store.db import Database  # noqa: E402
from app.store.writes import store_traces  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DRAW_TIMEOUT_MS = 120_000


def server_side(db: Database, trace_id: str, repeat: int) -> dict:
    """Cold figure JSON from the stored trace (read + build + encode), and the pure build alone."""
    cold = []
    for _ in range(repeat):
        start = time.perf_counter()
        body = graph.figure_json(db, TraceCache(), trace_id, None, frozenset())
        cold.append(time.perf_counter() - start)
    trace = {"trace_id": trace_id, "events": queries.read_event_cores(db, trace_id),
             "edges": queries.read_edges(db, trace_id)}
    pure = []
    for _ in range(repeat):
        start = time.perf_counter()
        orjson.dumps(build_figure(trace))
        pure.append(time.perf_counter() - start)
    return {"cold": statistics.median(cold), "pure": statistics.median(pure), "bytes": len(body)}


def browser_times(url: str, trace_ids: list[str], repeat: int) -> dict[str, tuple[float, float]]:
    """Seconds from navigation start to the graph's first painted frame, median of runs: as the page reports
    it (data-drawn-ms, the figure of its status line) and as the injected probe sees it."""
    from playwright.sync_api import sync_playwright

    results = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for trace_id in trace_ids:
            reported, probed = [], []
            for _ in range(repeat):
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.add_init_script(PAINT_PROBE)
                page.goto(f"{url}/traces/{trace_id}")
                page.wait_for_selector('#graph[data-drawn="true"]', state="attached", timeout=DRAW_TIMEOUT_MS)
                reported.append(int(page.get_attribute("#graph", "data-drawn-ms")) / 1000)
                page.wait_for_function("window.__graphPaintedMs !== undefined", timeout=DRAW_TIMEOUT_MS)
                probed.append(page.evaluate("window.__graphPaintedMs") / 1000)
                page.close()
            results[trace_id] = (statistics.median(reported), statistics.median(probed))
        browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true", help="server-side figures only")
    args = parser.parse_args()
    sizes = {"swarm-20k": (1000, 20_000, 1.0, 3.0), "swarm-100k": (1000, 100_000, None, 10.0)}
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "render.duckdb"
        db = Database(db_path)
        db.migrate(Settings().migrations_dir)
        for trace_id, (agents, events, _, _) in sizes.items():
            trace = generate_swarm(agents, events, seed=1)
            trace["trace_id"] = trace_id
            store_traces(db, [trace])
        for trace_id, (agents, events, _, _) in sizes.items():
            figures = server_side(db, trace_id, args.repeat)
            print(f"{trace_id}: figure JSON {figures['bytes'] / 1e6:.1f} MB; built from the stored trace in "
                  f"{figures['cold'] * 1000:.0f} ms (read + build + encode; target <= 300 ms for 20k), "
                  f"pure build + encode {figures['pure'] * 1000:.0f} ms")
        db.close()
        if args.no_browser:
            return
        proc, url = start_server(db_path)
        try:
            for trace_id, (reported, probed) in browser_times(url, list(sizes), args.repeat).items():
                target = sizes[trace_id][3]
                ratio = reported / probed
                print(f"{trace_id}: navigation to the graph's first painted frame in Chromium: the page says "
                      f"{reported:.2f} s, measured from outside {probed:.2f} s (ratio {ratio:.2f}, "
                      f"{'within' if abs(ratio - 1) <= 0.2 else 'NOT within'} 20%; target <= {target:.0f} s)")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
