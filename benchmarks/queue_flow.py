"""The queue review flow in Chromium (issue 27): from the reviewer's key (Enter, saving the label) to the next item
drawn, against one `orchestrace serve` (target < 150 ms). Measured in the page from outside the app's code: the
key event's own time stamp to the first animation frame after the next item's workspace is in the document. The
reference, in the same run: opening an item the way the queue did before, as a page load of the trace page (its
navigation start to its first contentful paint).

Run with `.venv/bin/python benchmarks/queue_flow.py [--items N]`. Prints medians with their range; asserts nothing.
"""

import argparse
import json
import statistics
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import start_server  # noqa: E402
from load import ms  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
TRACE = "sample-hierarchical-001"
REVIEWER = "bench"
# Stamps each key press (its event time) and the frame after each new item appears.
PROBE = """() => {
    window.__keys = []; window.__drawn = [];
    document.addEventListener("keydown", (ev) => { if (ev.key === "Enter") window.__keys.push(ev.timeStamp); }, true);
    let last = document.getElementById("queue-workspace").dataset.itemId;
    new MutationObserver(() => {
        const w = document.getElementById("queue-workspace");
        if (w && w.dataset.itemId && w.dataset.itemId !== last) {
            last = w.dataset.itemId;
            requestAnimationFrame(() => window.__drawn.push(performance.now()));
        }
    }).observe(document.body, {childList: true, subtree: true});
}"""


def api(url: str, path: str, body: dict | list | bytes | None = None) -> dict:
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "queue.duckdb")
        try:
            api(url, "/api/traces", (ROOT / "sample_traces" / "hierarchical.json").read_bytes())
            queue = api(url, "/api/queues", {"name": "bench", "filter": {"trace_ids": [TRACE]},
                                             "sample": {"n": args.items + 1, "seed": 1},
                                             "fields": ["credit", "counterfactual", "note"],
                                             "reviewers": [REVIEWER], "overlap": 1})
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                page.context.add_cookies([{"name": "orchestrace_reviewer", "value": REVIEWER, "url": url}])
                page.goto(f"{url}/queues/{queue['id']}/review")
                page.wait_for_selector("#queue-workspace[data-item-id]:not([data-item-id=''])")
                page.evaluate(PROBE)
                for i in range(args.items):
                    page.keyboard.press("4")
                    page.keyboard.press("Enter")
                    page.wait_for_function("(n) => window.__drawn.length >= n", arg=i + 1)
                keys, drawn = page.evaluate("[window.__keys, window.__drawn]")
                flow = [(d - k) / 1000 for k, d in zip(keys, drawn)]
                loads = []
                for event in api(url, f"/api/traces/{TRACE}")["events"][:10]:
                    page.goto(f"{url}/traces/{TRACE}?event={event['id']}&queue={queue['id']}")
                    paint = page.evaluate("""() => new Promise((done) => new PerformanceObserver((list) => {
                        const fcp = list.getEntries().find((e) => e.name === "first-contentful-paint");
                        if (fcp) done(fcp.startTime);
                    }).observe({type: "paint", buffered: true}))""")
                    loads.append(paint / 1000)
                browser.close()
        finally:
            proc.terminate()
            proc.wait()
    print(f"queue flow, key (Enter) to the next item drawn, {len(flow)} items: {ms(flow)} (target < 150 ms)")
    print(f"reference, same run: an item opened as a trace page load (navigation to first contentful paint): "
          f"{ms(loads)}; flow / page load median ratio {statistics.median(flow) / statistics.median(loads):.2f}")


if __name__ == "__main__":
    main()
