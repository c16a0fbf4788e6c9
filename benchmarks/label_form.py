"""The workspace's save (issue 14): how long a reviewer waits for the label form's answer, from sending the
form to the swapped form with "saved vN", against one `orchestrace serve` holding the sample traces, one
reviewer at a time (target <= 100 ms). The JSON API's save is measured in the same run as the reference.

Run with `.venv/bin/python benchmarks/label_form.py`. Prints medians with their range and p99; asserts nothing.
"""

import argparse
import http.client
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import start_server  # noqa: E402
from load import ms  # noqa: E402

TRACE = "sample-hierarchical-001"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--saves", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "form.duckdb")
        try:
            host, port = url.removeprefix("http://").split(":")
            conn = http.client.HTTPConnection(host, int(port))
            for sample in sorted((ROOT / "sample_traces").glob("*.json")):
                conn.request("POST", "/api/traces", body=sample.read_bytes(),
                             headers={"Content-Type": "application/json"})
                conn.getresponse().read()
            cookie = "orchestrace_reviewer=bench"
            conn.request("GET", f"/traces/{TRACE}", headers={"Cookie": cookie})
            response = conn.getresponse()
            page = response.read().decode()
            cookie += "; " + "; ".join(c.split(";")[0] for c in response.headers.get_all("Set-Cookie") or [])
            token = re.search(r'"X-CSRF-Token": "([^"]+)"', page).group(1)
            conn.request("GET", f"/api/traces/{TRACE}")
            events = [e["id"] for e in json.loads(conn.getresponse().read())["events"]]
            form_times, api_times = [], []
            for i in range(args.saves):
                event = events[i % len(events)]
                body = f"credit=0.5&note=n{i}&asked=credit,note&action=save"
                start = time.perf_counter()
                conn.request("POST", f"/traces/{quote(TRACE)}/events/{quote(event)}/label", body=body,
                             headers={"Content-Type": "application/x-www-form-urlencoded", "HX-Request": "true",
                                      "X-CSRF-Token": token, "Cookie": cookie})
                answer = conn.getresponse().read().decode()
                form_times.append(time.perf_counter() - start)
                assert "saved v" in answer, answer[:300]
                label = json.dumps({"trace_id": TRACE, "event_id": event, "reviewer": "api", "credit": 0.5})
                start = time.perf_counter()
                conn.request("POST", "/api/annotations", body=label, headers={"Content-Type": "application/json"})
                conn.getresponse().read()
                api_times.append(time.perf_counter() - start)
        finally:
            proc.terminate()
            proc.wait()
    print(f"label form save (the workspace), {args.saves} saves, one reviewer: {ms(form_times)} "
          "(target <= 100 ms)")
    print(f"JSON API save, same run: {ms(api_times)}; form / API median ratio "
          f"{statistics.median(form_times) / statistics.median(api_times):.2f}")


if __name__ == "__main__":
    main()
