"""Render speed of the trace page (issue 15), in headless Chromium with software GL, measured from outside the
page: navigation start to the graph's first painted frame (and what the page's status line says), a zoom to a
narrow window until its events are painted, expanding a role, showing every lane, and the JS heap; plus the
server's figure JSON. Traces of 1,000, 20,000 and 100,000 events (and 1,000,000 with --million), generated and
stored first. Reports medians with their range, and the 100k/1k ratio of first paint.

Run with `.venv/bin/python benchmarks/render.py [--million]`. Prints figures; asserts nothing.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from browser.probes import PAINT_PROBE  # noqa: E402
from ingest import start_server  # noqa: E402

from app.domain.generate import generate_swarm  # noqa: E402
from app.services import graph  # noqa: E402
from app.services.cache import TraceCache  # noqa: E402
from app.settings import Settings  # noqa: E402
from app.store.db import Database  # noqa: E402
from app.store.writes import store_traces  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
TIMEOUT_MS = 180_000
# A zoom into this share of the time axis, at its middle: narrow enough to draw event by event up to 1M events.
ZOOM_SHARE = 0.002
# Seconds from an action to the painted frame after the page has redrawn, measured inside the page but from
# before the action (a click, a relayout) to two animation frames after the redraw's signal.
TIMED_ACTION = """async ([action, signal]) => {
    const gd = document.getElementById("graph");
    const started = performance.now();
    const done = new Promise((resolve) => gd.addEventListener(signal, resolve, {once: true}));
    if (action === "zoom") {
        const [a, b] = gd._fullLayout.xaxis.range, mid = (a + b) / 2, half = (b - a) * %s / 2;
        Plotly.relayout(gd, {"xaxis.range": [mid - half, mid + half]});
    } else {
        document.querySelector(action).click();
    }
    await done;
    await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
    return (performance.now() - started) / 1000;
}""" % ZOOM_SHARE


def timed_redraw(page, act) -> float:
    """Seconds from the click on a lane control (its event's time, not Playwright's work before it) to the
    painted frame after the redraw: the status line is cleared first, then its "redrawn in" marks the redraw's end."""
    page.evaluate("""() => {
        document.getElementById('graph-status').textContent = '';
        document.addEventListener('click', (e) => { window.__clickedAt = e.timeStamp; }, {capture: true, once: true});
    }""")
    act()
    page.wait_for_function("() => document.getElementById('graph-status').textContent.includes('redrawn in')")
    return (page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => "
                          "r(performance.now() - window.__clickedAt))))")) / 1000


def spread(values: list[float], unit: str = "s", scale: float = 1.0) -> str:
    values = [v * scale for v in values]
    return f"{statistics.median(values):.2f} {unit} (range {min(values):.2f}-{max(values):.2f})"


def server_side(db: Database, trace_id: str, repeat: int) -> list[float]:
    """Seconds to the figure JSON from the stored trace with an empty cache (the first view's server part)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        graph.figure_json(db, TraceCache(), trace_id, None, frozenset())
        times.append(time.perf_counter() - start)
    return times


def heap_mb(page) -> float:
    session = page.context.new_cdp_session(page)
    session.send("HeapProfiler.collectGarbage")
    return session.send("Runtime.getHeapUsage")["usedSize"] / 1e6


def browser_figures(url: str, trace_id: str, repeat: int) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {"reported": [], "probed": [], "analysis": [], "zoom": [], "expand": [],
                                   "all_lanes": [], "heap": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        for _ in range(repeat):
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(TIMEOUT_MS)
            page.add_init_script(PAINT_PROBE)
            page.goto(f"{url}/traces/{trace_id}")
            page.wait_for_selector('#graph[data-drawn="true"]', state="attached")
            out["reported"].append(int(page.get_attribute("#graph", "data-drawn-ms")) / 1000)
            page.wait_for_function("() => window.__graphPaintedMs !== undefined")
            out["probed"].append(page.evaluate("window.__graphPaintedMs") / 1000)
            # the analysis panel loads after the paint; the first view of a large trace computes it on the server
            # (then stored), which would slow what follows: the actions below are timed once it is shown
            page.wait_for_selector("section#analysis-panel", state="attached")
            out["analysis"].append(page.evaluate("performance.now()") / 1000)
            if page.get_attribute("#graph", "data-window-mode") is not None or page.evaluate(
                    "document.getElementById('graph-status').textContent.includes('binned')"):
                out["zoom"].append(page.evaluate(TIMED_ACTION, ["zoom", "window-drawn"]))
            out["heap"].append(heap_mb(page))
            expand = page.locator("#lane-groups button", has_text="expand executor")
            if expand.count():
                out["expand"].append(timed_redraw(page, expand.click))
                out["all_lanes"].append(timed_redraw(page, page.locator("#group-lanes").uncheck))
            page.close()
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--million", action="store_true", help="also a 1,000,000-event trace")
    args = parser.parse_args()
    sizes = {"swarm-1k": (100, 1_000), "swarm-20k": (1000, 20_000), "swarm-100k": (1000, 100_000)}
    if args.million:
        sizes["swarm-1m"] = (1000, 1_000_000)
    with tempfile.TemporaryDirectory() as tmp:
        db_path = Path(tmp) / "render.duckdb"
        db = Database(db_path)
        db.migrate(Settings().migrations_dir)
        for trace_id, (agents, events) in sizes.items():
            start = time.perf_counter()
            trace = generate_swarm(agents, events, seed=1)
            trace["trace_id"] = trace_id
            made = time.perf_counter() - start
            start = time.perf_counter()
            store_traces(db, [trace])
            stored_s = time.perf_counter() - start
            start = time.perf_counter()
            graph.prepare_lod(db, {trace_id: events})  # what the server does right after an ingest answers
            print(f"{trace_id}: {events:,} events generated in {made:.1f} s, stored in {stored_s:.1f} s, "
                  f"lanes kept (after the answer) in {time.perf_counter() - start:.1f} s", flush=True)
            del trace
        for trace_id in sizes:
            print(f"{trace_id}: figure JSON from the stored trace, empty cache: "
                  f"{spread(server_side(db, trace_id, args.repeat), 'ms', 1000)}", flush=True)
        db.close()
        proc, url = start_server(db_path)
        try:
            firsts = {}
            for trace_id in sizes:
                f = browser_figures(url, trace_id, args.repeat)
                firsts[trace_id] = statistics.median(f["probed"])
                ratio = statistics.median(f["reported"]) / firsts[trace_id]
                print(f"{trace_id}: navigation to first painted frame, measured from outside: {spread(f['probed'])}; "
                      f"the status line says {spread(f['reported'])} (ratio {ratio:.2f}, "
                      f"{'within' if abs(ratio - 1) <= 0.2 else 'NOT within'} 20%)", flush=True)
                print(f"  analysis panel shown, since navigation (runs in order): "
                      f"{', '.join(f'{s:.2f} s' for s in f['analysis'])}")
                if f["zoom"]:
                    print(f"  zoom to {ZOOM_SHARE:.1%} of the time axis until its events are painted: {spread(f['zoom'])}")
                if f["expand"]:
                    print(f"  expanding the executor role: {spread(f['expand'])}; every lane: {spread(f['all_lanes'])}")
                print(f"  JS heap after the first paint: {spread(f['heap'], 'MB')}", flush=True)
            if "swarm-1k" in firsts and "swarm-100k" in firsts:
                print(f"first paint 100k / 1k: {firsts['swarm-100k'] / firsts['swarm-1k']:.2f} (target <= 1.5)")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
