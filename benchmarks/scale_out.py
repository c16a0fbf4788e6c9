"""Several app instances on one DuckLake (issue 16): the same load on one `orchestrace serve` over a DuckDB file,
one over a DuckLake, and two over one DuckLake (each request sent to the instances in turn).

- ingest: rounds of two 20,000-event swarm traces (`generate_swarm(1000, 20000)`) posted at once by two clients;
  events/s per round. Meanwhile a watcher polls another instance (the same one when there is one) for the trace
  list, and reads each trace whole the first time it is listed: its events and edges must number what the list
  says, or the lake showed a half-written trace.
- label saves: 50 reviewers (threads, keep-alive connections, no think time) each save SAVES label versions on
  a few events of an ingested trace, every save to the next instance in turn, so with two instances one
  reviewer's versions of one label come from both. Latency p50/p99, and when the slowest 1% were sent
  (seconds after the first save); afterwards every stored version is compared
  with the saves answered 201: lost (answered, not stored) and duplicated or missing versions (not 1..n).
- open: the trace page and the figure of each ingested trace on an instance that did not ingest it, the first
  time (the figure is built) and again (cached).
- corpus: CORPUS small rollouts (benchmarks/corpus.py's: 6 agents, 37 events) posted in requests of 1,000, then the
  corpus pages (the trace list, the dashboard, the audit page) on the last instance: first view, then PAGE_VIEWS
  more, each view to a page alone; then FIRST_VIEWS - 1 times again, each after FRESH rollouts more, so that the
  first views (one sample each a round, the noisiest figures on a shared machine) are medians too.
- pages after a save: a reviewer saves a label on one of those rollouts (on the instances in turn), then each
  corpus page is viewed once on the last instance; SAVED_VIEWS times. What a lab sharing a lake sees while its
  reviewers label: a save changes the labels, not the traces.

PostgreSQL comes from tests/lake.py (a throwaway cluster). Run with `.venv/bin/python benchmarks/scale_out.py`.
Prints figures (medians with [min-max] ranges, ratios to the file); asserts nothing. The machine's cores are
shared by the servers, PostgreSQL and the clients: absolute figures are of this machine.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from lake import ThrowawayPostgres, free_port  # noqa: E402

from app.domain.generate import generate_swarm  # noqa: E402
from benchmarks.corpus import REQUEST, rollouts  # noqa: E402

EVENTS, AGENTS = 20_000, 1000
REVIEWERS = 50
LABELLED_EVENTS = 3  # per reviewer: each of its saves goes to one of these, in turn
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 300
IDLE_S = 4  # uvicorn closes a keep-alive connection idle for 5 s
CORPUS = 3000
CORPUS_PAGES = {"trace list": "/", "dashboard": "/dashboard", "audit": "/audit"}
PAGE_VIEWS = 5  # after the first
FIRST_VIEWS = 3  # rounds of an ingest then each page's first view (and PAGE_VIEWS more)
FRESH = 100  # rollouts posted before each first view after the corpus's
SAVED_VIEWS = 7  # label saves, each followed by one view of each corpus page


@contextmanager
def server(db: str, lake_data: Path | None, log: Path):
    """A real `orchestrace serve` on a free port; its URL."""
    port = free_port()
    env = {**os.environ, **({"ORCHESTRACE_LAKE_DATA": str(lake_data)} if lake_data else {})}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--db", db, "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(url + "/api/health").close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the server did not start:\n{log.read_text()}") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"  (the server at {url} did not stop within {STOP_TIMEOUT_S} s of SIGTERM: killed)", flush=True)
            proc.kill()
            proc.wait()


def request(method: str, url: str, body: bytes | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Watcher(threading.Thread):
    """Polls an instance's trace list; reads each newly listed trace whole and checks its counts."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.stop, self.seen, self.half, self.polls = url, threading.Event(), set(), [], 0

    def run(self) -> None:
        while not self.stop.is_set():
            status, body = request("GET", f"{self.url}/api/traces?limit=1000")
            self.polls += 1
            for item in json.loads(body)["items"] if status == 200 else []:
                if item["trace_id"] in self.seen:
                    continue
                self.seen.add(item["trace_id"])
                status, whole = request("GET", f"{self.url}/api/traces/{item['trace_id']}")
                stored = json.loads(whole) if status == 200 else {"events": (), "edges": ()}
                if (len(stored["events"]), len(stored["edges"])) != (item["events"], item["edges"]):
                    self.half.append((item["trace_id"], item["events"], len(stored["events"])))
            time.sleep(0.02)


def ingest(urls: list[str], rounds: int, seed: int) -> tuple[list[float], list[str], Watcher]:
    """Rounds of two traces posted at once, one by each of two clients (to the instances in turn)."""
    watcher = Watcher(urls[-1])
    watcher.start()
    rates, ids = [], []
    for r in range(rounds):
        bodies = []
        for k in range(2):
            trace = generate_swarm(AGENTS, EVENTS, seed=seed + 2 * r + k)
            trace["trace_id"] = f"swarm-{seed}-{r}-{k}"
            ids.append(trace["trace_id"])
            bodies.append(json.dumps(trace).encode())
        answers = [None, None]

        def post(k: int) -> None:
            answers[k] = request("POST", f"{urls[k % len(urls)]}/api/traces", bodies[k])[0]

        start = time.perf_counter()
        threads = [threading.Thread(target=post, args=(k,)) for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - start
        assert answers == [201, 201], answers
        rates.append(2 * EVENTS / elapsed)
    deadline = time.monotonic() + 30
    while not set(ids) <= watcher.seen and time.monotonic() < deadline:  # the watcher's last looks
        time.sleep(0.1)
    watcher.stop.set()
    watcher.join()
    return rates, ids, watcher


def label_saves(urls: list[str], trace_id: str, saves: int) -> dict:
    """REVIEWERS threads saving `saves` versions each, every save to the next instance; latencies and checks."""
    hosts = [urllib.parse.urlsplit(url) for url in urls]
    event_ids = [f"e{i:05d}" for i in range(1, REVIEWERS * LABELLED_EVENTS + 1)]  # generate_swarm names them so
    start = threading.Barrier(REVIEWERS)
    latencies, answered, errors, sent_at = [], defaultdict(int), [], []
    lock = threading.Lock()

    def reviewer(n: int) -> None:
        connections = [http.client.HTTPConnection(h.hostname, h.port, timeout=REQUEST_TIMEOUT_S) for h in hosts]
        used = [time.monotonic()] * len(hosts)
        start.wait()
        for k in range(saves):
            event = event_ids[n * LABELLED_EVENTS + k % LABELLED_EVENTS]
            body = json.dumps({"trace_id": trace_id, "event_id": event, "reviewer": f"r{n:02d}",
                               "credit": round(k / saves, 3)})
            i = (n + k) % len(hosts)
            if time.monotonic() - used[i] > IDLE_S:  # uvicorn has closed it: a browser would open a new one
                connections[i].close()
            connection = connections[i]
            began = time.perf_counter()
            connection.request("POST", "/api/annotations", body, {"Content-Type": "application/json"})
            answer = connection.getresponse()
            answer.read()
            took = time.perf_counter() - began
            used[i] = time.monotonic()
            with lock:
                latencies.append(took)
                sent_at.append((took, began - first))
                if answer.status == 201:
                    answered[(event, f"r{n:02d}")] += 1
                else:
                    errors.append(answer.status)
        for connection in connections:
            connection.close()

    threads = [threading.Thread(target=reviewer, args=(n,)) for n in range(REVIEWERS)]
    began = first = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    status, body = request("GET", f"{urls[0]}/api/annotations?trace_id={trace_id}&history=true")
    stored = defaultdict(list)
    for label in json.loads(body)["items"]:
        stored[(label["event_id"], label["reviewer"])].append(label["version"])
    lost = sum(max(0, n - len(stored.get(key, []))) for key, n in answered.items())
    bad = sum(sorted(versions) != list(range(1, len(versions) + 1)) for versions in stored.values())
    ordered = sorted(latencies)
    return {"saves": len(latencies), "per_s": len(latencies) / wall, "p50": statistics.median(ordered),
            "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], "errors": errors, "lost": lost,
            "bad_labels": bad, "stored": sum(map(len, stored.values())),
            "slowest": sorted(sent_at, reverse=True)[:max(1, len(sent_at) // 100)]}


def open_trace(urls: list[str], trace_ids: list[str], repeats: int = 3) -> tuple[list[float], list[float]]:
    """Page plus figure of each trace on an instance that did not ingest it: first time, then again."""
    first, again = [], []
    for k, trace_id in enumerate(trace_ids):
        url = urls[(k + 1) % len(urls)]
        for n in range(1 + repeats):
            began = time.perf_counter()
            page = request("GET", f"{url}/traces/{trace_id}")[0]
            figure = request("GET", f"{url}/api/traces/{trace_id}/figure")[0]
            assert (page, figure) == (200, 200), (page, figure)
            (again if n else first).append(time.perf_counter() - began)
    return first, again


def corpus_pages(urls: list[str], n: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    """Post n small rollouts (to the instances in turn), then time each corpus page on the last instance: its first
    view and PAGE_VIEWS more, in seconds; `rounds` - 1 times more, each after FRESH rollouts more."""
    views = {name: {"first": [], "again": []} for name in CORPUS_PAGES}
    posted = 0
    for round_ in range(rounds):
        upto = n if round_ == 0 else posted + FRESH
        for k, lo in enumerate(range(posted, upto, REQUEST)):
            status, body = request("POST", f"{urls[k % len(urls)]}/api/traces",
                                   json.dumps(rollouts(lo, min(lo + REQUEST, upto))).encode())
            assert status == 201, body[:200]
        posted = upto
        for name, path in CORPUS_PAGES.items():
            for view in range(1 + PAGE_VIEWS):
                began = time.perf_counter()
                status = request("GET", urls[-1] + path)[0]
                assert status == 200, (path, status)
                views[name]["again" if view else "first"].append(time.perf_counter() - began)
    return views


def pages_after_saves(urls: list[str], n: int) -> dict[str, list[float]]:
    """SAVED_VIEWS times: a label saved on one of the first n rollouts (on the instances in turn), then each corpus
    page viewed once on the last instance; the views' seconds by page."""
    views = {name: [] for name in CORPUS_PAGES}
    for k in range(SAVED_VIEWS):
        label = {"trace_id": rollouts(k * n // SAVED_VIEWS, k * n // SAVED_VIEWS + 1)[0]["trace_id"],
                 "event_id": "e01", "reviewer": f"viewer-{k}", "credit": 0.5}
        status, body = request("POST", f"{urls[k % len(urls)]}/api/annotations", json.dumps(label).encode())
        assert status == 201, body[:200]
        for name, path in CORPUS_PAGES.items():
            began = time.perf_counter()
            assert request("GET", urls[-1] + path)[0] == 200, path
            views[name].append(time.perf_counter() - began)
    return views


def spread(values: list[float], scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    return (f"{fmt.format(statistics.median(values) * scale)} "
            f"[{fmt.format(min(values) * scale)}-{fmt.format(max(values) * scale)}]")


def ratio(values: list[float], base: list[float]) -> float:
    return statistics.median(values) / statistics.median(base)


def run(name: str, urls: list[str], args) -> dict:
    rates, ids, watcher = ingest(urls, args.rounds, seed=len(name))
    saves = label_saves(urls, ids[0], args.saves)
    first, again = open_trace(urls, ids)
    pages = corpus_pages(urls, args.corpus, args.first_views) if args.corpus else {}
    saved = pages_after_saves(urls, args.corpus) if args.corpus else {}
    result = {"ingest": rates, "saves": saves, "first": first, "again": again, "watcher": watcher, "pages": pages,
              "saved": saved}
    print(f"\n== {name}", flush=True)
    print(f"  ingest     {spread(rates)} events/s per round of 2 x {EVENTS:,} events ({args.rounds} rounds); "
          f"half-written traces seen: {len(watcher.half)} of {len(watcher.seen)} listed ({watcher.polls} polls)"
          + (f" {watcher.half}" if watcher.half else ""))
    print(f"  saves      p50 {saves['p50'] * 1000:.1f} ms, p99 {saves['p99'] * 1000:.1f} ms, "
          f"{saves['per_s']:.0f} saves/s; {saves['saves']} sent, {saves['stored']} stored, lost {saves['lost']}, "
          f"labels with versions not 1..n: {saves['bad_labels']}, refused: {len(saves['errors'])}"
          + (f" {sorted(set(saves['errors']))}" if saves["errors"] else "")
          + "; slowest 1% sent at " + ", ".join(f"{at:.2f} s ({took * 1000:.0f} ms)" for took, at in saves["slowest"]))
    print(f"  open       first {spread(first, 1000)} ms, again {spread(again, 1000)} ms (page + figure)", flush=True)
    for page, views in pages.items():
        print(f"  {page:<10} first {spread(views['first'], 1000)} ms, again {spread(views['again'], 1000)} ms "
              f"({args.corpus:,} rollouts more, then {args.first_views - 1} x {FRESH}); "
              f"after a label save {spread(saved[page], 1000)} ms", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="ingest rounds of two traces (default 3)")
    parser.add_argument("--saves", type=int, default=10, help="label saves per reviewer (default 10)")
    parser.add_argument("--corpus", type=int, default=CORPUS,
                        help=f"small rollouts added before the corpus pages are timed (default {CORPUS:,}; 0: none)")
    parser.add_argument("--first-views", type=int, default=FIRST_VIEWS,
                        help=f"rounds of an ingest then each corpus page's first view (default {FIRST_VIEWS})")
    parser.add_argument("--lakes", type=int, nargs="*", default=[1, 2], choices=[1, 2],
                        help="the lakes to run after the file, by their instances (default: 1 2)")
    args = parser.parse_args()
    results = {}
    postgres = ThrowawayPostgres()
    try:
        with tempfile.TemporaryDirectory(prefix="orchestrace-scale-") as tmp:
            folder = Path(tmp)
            with server(str(folder / "file.duckdb"), None, folder / "file.log") as url:
                results["file"] = run("DuckDB file, 1 instance", [url], args)
            for n in args.lakes:
                db = f"ducklake:postgres:{postgres.new_database()}"
                with ExitStack() as stack:
                    urls = [stack.enter_context(server(db, folder / f"lake{n}", folder / f"lake{n}-{i}.log"))
                            for i in range(n)]
                    results[f"lake{n}"] = run(f"DuckLake, {n} instance{'s' * (n > 1)}", urls, args)
    finally:
        postgres.stop()
    base = results["file"]
    print("\n== ratios to the DuckDB file (medians; > 1 is slower for times, < 1 slower for rates)")
    for key in (f"lake{n}" for n in args.lakes):
        r = results[key]
        print(f"  {key}: ingest rate x{statistics.median(r['ingest']) / statistics.median(base['ingest']):.2f}, "
              f"save p50 x{r['saves']['p50'] / base['saves']['p50']:.2f}, "
              f"p99 x{r['saves']['p99'] / base['saves']['p99']:.2f}, "
              f"saves/s x{r['saves']['per_s'] / base['saves']['per_s']:.2f}, "
              f"open first x{statistics.median(r['first']) / statistics.median(base['first']):.2f}, "
              f"again x{statistics.median(r['again']) / statistics.median(base['again']):.2f}"
              + "".join(f", {page} x{ratio(views['again'], base['pages'][page]['again']):.2f}"
                        f" (first x{ratio(views['first'], base['pages'][page]['first']):.2f},"
                        f" after a save x{ratio(r['saved'][page], base['saved'][page]):.2f})"
                        for page, views in r["pages"].items()))


if __name__ == "__main__":
    main()
