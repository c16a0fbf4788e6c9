"""Many reviewers at once (issue 12, item 5): 50 reviewers for 60 s against one `orchestrace serve`, mixing label
saves, label, paper and trace reads, with one 20,000-event trace ingested in the middle.

Each reviewer is a thread with its own keep-alive connection, as a browser tab has, doing one request after the
other with `--think` seconds between them on average (default 1 s, a quick human; 0 keeps a request of every
reviewer in flight at all times, a stress test beyond what 50 people do). Think times are drawn at random
(exponentially, as of people acting independently), from the start on, so the reviewers do not move in lockstep
bursts. A reviewer saves its own labels (always on the current version, so never a conflict), saves a label
shared by every reviewer (the `team` reviewer, as from many tabs: read the current version, save on it, 409 when
another tab saved first), and reads labels, papers and its trace. Halfway through, one more thread posts a
20,000-event swarm trace (`app.domain.generate.generate_swarm`); a save counts as "during the ingest" when its request
overlaps the ingest request.

Afterwards every label version stored is compared with the saves answered 201: none lost (answered but not
stored), none duplicated (one version answered twice), none unaccounted for (stored but not answered), versions
contiguous from 1 per (trace, event, reviewer). Errors are 5xx answers, other unexpected statuses and failed
connections. Run with `.venv/bin/python benchmarks/load.py`. Prints figures; asserts nothing.
"""

import argparse
import csv
import http.client
import io
import json
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import post, start_server  # noqa: E402

from app.domain.generate import generate_swarm  # noqa: E402
from app.domain.taxonomy import PAPER_COLUMNS, PAPER_FIELDS  # noqa: E402

LABELLED_TRACES = 5
PAPERS = 100
SHARED_EVENTS = 3
TEAM = "team"
REQUEST_TIMEOUT_S = 120
IDLE_S = 4  # uvicorn closes a keep-alive connection idle for 5 s; a browser then opens a new one, so do we
# Share of each action in a reviewer's requests.
MIX = {"save": 0.35, "shared_save": 0.10, "read_labels": 0.25, "read_paper": 0.15, "read_trace": 0.15}


def paper_pool() -> bytes:
    """A pool CSV of PAPERS papers with controlled values cycling through what the taxonomy allows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PAPER_COLUMNS)
    for i in range(PAPERS):
        row = {c: f"{c} {i}" for c in PAPER_COLUMNS} | {"key": f"p{i:03d}", "year": "2025"}
        row |= {field: allowed[i % len(allowed)] for field, allowed in PAPER_FIELDS.items()}
        writer.writerow([row[c] for c in PAPER_COLUMNS])
    return out.getvalue().encode()


class Client:
    """One reviewer's keep-alive connection; every request is timed and its failures counted."""

    def __init__(self, url: str, errors: Counter, lock: threading.Lock):
        self.host, self.port = url.removeprefix("http://").split(":")
        self.errors, self.lock = errors, lock
        self.conn, self.used = None, 0.0

    def request(self, what: str, method: str, path: str, body: dict | None = None,
                parse: bool = True) -> tuple[int | None, object, float, float]:
        """(status or None on a failed connection, the JSON answer if `parse`, start and end time); failures are
        counted under `what`. Reads skip parsing: the client shares the machine's CPUs with the server."""
        start = time.perf_counter()
        if self.conn is not None and start - self.used > IDLE_S:
            self.conn.close()
            self.conn = None
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, int(self.port), timeout=REQUEST_TIMEOUT_S)
            self.conn.request(method, path, body=None if body is None else json.dumps(body),
                              headers={"Content-Type": "application/json"})
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            self.conn = None
            with self.lock:
                self.errors[f"{what}: {type(exc).__name__}"] += 1
            return None, None, start, time.perf_counter()
        end = self.used = time.perf_counter()
        if response.status >= 500:
            with self.lock:
                self.errors[f"{what}: {response.status}"] += 1
        return response.status, json.loads(data) if parse and data.startswith((b"{", b"[")) else None, start, end


class Run:
    """The shared record of a run: save times, the versions answered 201, errors."""

    def __init__(self, url: str, traces: dict[str, list[str]], deadline: float, think: float):
        self.url, self.traces, self.deadline, self.think = url, traces, deadline, think
        self.lock = threading.Lock()
        self.errors: Counter = Counter()
        self.saves: list[tuple[float, float]] = []  # (start, end) of each answered save
        self.reads: dict[str, list[float]] = defaultdict(list)
        self.answered: list[tuple] = []  # (trace_id, event_id, reviewer, version, annotation_id) of each 201
        self.conflicts = 0
        self.ingest: tuple[float, float] | None = None

    def reviewer(self, index: int) -> None:
        rng = random.Random(index)
        client = Client(self.url, self.errors, self.lock)
        name = f"reviewer-{index:02d}"
        trace_id = sorted(self.traces)[index % len(self.traces)]
        events = self.traces[trace_id]
        mine: dict[str, int] = {}  # this reviewer's current version per event
        sent = 0
        actions, weights = list(MIX), list(MIX.values())
        while True:
            if self.think:
                time.sleep(min(rng.expovariate(1 / self.think), max(0.0, self.deadline - time.perf_counter())))
            if time.perf_counter() >= self.deadline:
                break
            action = rng.choices(actions, weights)[0]
            if action == "save":
                event_id, sent = rng.choice(events), sent + 1
                body = {"trace_id": trace_id, "event_id": event_id, "reviewer": name,
                        "credit": rng.choice((-1, -0.5, 0, 0.5, 1)), "base_version": mine.get(event_id, 0),
                        "client_request_id": f"{name}-{sent}"}
                status, answer, start, end = client.request("save", "POST", "/api/annotations", body)
                self.record_save(status, answer, start, end, expect_conflict=False)
                if status == 201:
                    mine[event_id] = answer["version"]
            elif action == "shared_save":
                shared_trace = sorted(self.traces)[0]
                event_id = self.traces[shared_trace][rng.randrange(SHARED_EVENTS)]
                query = f"trace_id={shared_trace}&event_id={event_id}&reviewer={TEAM}"
                result = client.request("read_shared_label", "GET", f"/api/annotations?{query}")
                self.record_read("read_shared_label", result)
                status, answer, *_ = result
                if status == 200:
                    base = answer["items"][0]["version"] if answer["items"] else 0
                    body = {"trace_id": shared_trace, "event_id": event_id, "reviewer": TEAM,
                            "credit": rng.choice((-1, 0, 1)), "note": name, "base_version": base}
                    self.record_save(*client.request("shared save", "POST", "/api/annotations", body),
                                     expect_conflict=True)
            elif action == "read_labels":
                path = f"/api/annotations?trace_id={trace_id}"
                self.record_read(action, client.request(action, "GET", path, parse=False))
            elif action == "read_paper":
                key = f"p{rng.randrange(PAPERS):03d}"
                path = rng.choice((f"/api/papers/{key}/tags", "/api/papers/stats"))
                self.record_read(action, client.request(action, "GET", path, parse=False))
            else:
                self.record_read(action, client.request(action, "GET", f"/api/traces/{trace_id}", parse=False))

    def record_save(self, status, answer, start, end, expect_conflict: bool) -> None:
        with self.lock:
            if status is None:
                return
            if status == 201:
                self.saves.append((start, end))
                self.answered.append((answer["trace_id"], answer["event_id"], answer["reviewer"], answer["version"],
                                      answer["annotation_id"]))
            elif status == 409 and expect_conflict:
                self.saves.append((start, end))
                self.conflicts += 1
            elif status < 500:
                self.errors[f"{'shared save' if expect_conflict else 'save'}: unexpected {status}"] += 1

    def record_read(self, action: str, result) -> None:
        status, _, start, end = result
        with self.lock:
            if status == 200:
                self.reads[action].append(end - start)
            elif status is not None and status < 500:
                self.errors[f"{action}: unexpected {status}"] += 1

    def ingest_at(self, when: float, body: bytes) -> None:
        time.sleep(max(0.0, when - time.perf_counter()))
        start = time.perf_counter()
        try:
            post(self.url, body)
        except OSError as exc:
            with self.lock:
                self.errors[f"ingest: {exc}"] += 1
        self.ingest = (start, time.perf_counter())


def accounting(url: str, answered: list[tuple]) -> dict:
    """Lost, duplicated and unaccounted-for versions, and keys whose versions are not 1..n."""
    client = Client(url, Counter(), threading.Lock())
    status, stored, *_ = client.request("history", "GET", "/api/annotations?history=true")
    assert status == 200, status
    stored_ids = {(s["trace_id"], s["event_id"], s["reviewer"], s["version"], s["annotation_id"])
                  for s in stored["items"]}
    versions = defaultdict(list)
    for s in stored["items"]:
        versions[(s["trace_id"], s["event_id"], s["reviewer"])].append(s["version"])
    counts = Counter(answered)
    return {
        "stored": len(stored["items"]),
        "lost": sum(1 for a in counts if a not in stored_ids),
        "duplicated": sum(n - 1 for n in counts.values()) + sum(
            len(v) - len(set(v)) for v in versions.values()),
        "unaccounted": len(stored_ids - set(counts)),
        "gaps": sum(1 for v in versions.values() if sorted(v) != list(range(1, len(v) + 1))),
    }


def ms(values: list[float]) -> str:
    if not values:
        return "none"
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
    return (f"n={len(values)}, p50 {statistics.median(values) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms "
            f"(range {values[0] * 1000:.0f}-{values[-1] * 1000:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reviewers", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--think", type=float, default=1.0, help="seconds a reviewer waits between requests")
    parser.add_argument("--agents", type=int, default=1000, help="agents of the ingested trace")
    parser.add_argument("--events", type=int, default=20000, help="events of the ingested trace (0: no ingest)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "load.duckdb")
        try:
            traces = {}
            for i in range(LABELLED_TRACES):
                trace = generate_swarm(10, 200, seed=i)
                trace["trace_id"] = f"labelled-{i}"
                post(url, json.dumps(trace).encode())
                traces[trace["trace_id"]] = [event["id"] for event in trace["events"]]
            urllib.request.urlopen(urllib.request.Request(url + "/api/papers/import", data=paper_pool(),
                                                          headers={"Content-Type": "text/csv"})).close()
            big = generate_swarm(args.agents, args.events, seed=1) if args.events else None
            body = json.dumps(big).encode() if big else b""

            start = time.perf_counter()
            run = Run(url, traces, start + args.seconds, args.think)
            threads = [threading.Thread(target=run.reviewer, args=(i,)) for i in range(args.reviewers)]
            if big:
                threads.append(threading.Thread(target=run.ingest_at, args=(start + args.seconds / 2, body)))
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - start
            books = accounting(url, run.answered)
        finally:
            proc.terminate()
            proc.wait()

    ingest = run.ingest or (0.0, 0.0)
    during = [end - start for start, end in run.saves if start < ingest[1] and end > ingest[0]]
    calm = [end - start for start, end in run.saves if not (start < ingest[1] and end > ingest[0])]
    requests = len(run.saves) + sum(len(v) for v in run.reads.values())
    print(f"{args.reviewers} reviewers for {elapsed:.0f} s (think {args.think:g} s): {requests} answered requests, "
          f"{requests / elapsed:.0f}/s")
    if big:
        print(f"ingest of {args.events:,} events: {ingest[1] - ingest[0]:.2f} s")
    print(f"label save, no ingest running: {ms(calm)} (target p99 <= 100 ms)")
    print(f"label save, during the ingest: {ms(during)} (target p99 <= 500 ms)")
    for action, times in sorted(run.reads.items()):
        print(f"{action}: {ms(times)}")
    print(f"saves answered 201: {len(run.answered)}, 409 conflicts on the shared label: {run.conflicts}")
    print(f"versions stored {books['stored']}: lost {books['lost']}, duplicated {books['duplicated']}, "
          f"unaccounted {books['unaccounted']}, keys with gaps {books['gaps']}")
    print(f"errors: {sum(run.errors.values())}" + "".join(f"\n  {n} {what}" for what, n in run.errors.most_common()))


if __name__ == "__main__":
    main()
