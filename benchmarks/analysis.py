"""Analysis of one large trace (issue 30, part 4): how long its stored analysis takes, and what it does to other
users' requests while it runs.

0. In process, the analysis ingest makes of ROLLOUTS small rollouts (ROLLOUT_AGENTS agents, ROLLOUT_EVENTS events, as
   an RL run sends them) from their dicts, one after another: what a request of 1,000 rollouts costs the worker.
1. In process, per size (1,000-agent generated swarms; 20,000, 100,000 and 1,000,000 events by default): the
   analysis ingest stores (app/domain/analysis.py analyse: metrics.analyse_graph, compute_metrics, audit) per
   stage, medians with ranges of REPEAT runs, and the ratio of each size's total to the smallest's. Then the same
   traces stored in a DuckDB file and analysed again as the background re-analysis does (app/store/analyst.py
   analyse_tables, here in this process): read as Arrow tables (read_trace_tables), made columns and a graph
   (graphs_from_tables: no event dict), and analysed.
1b. With --messaging, per size: untrusted_flow alone on a trace of two agents messaging at every event (each event
   follows its agent's last and answers the other's), from its dicts: the shape on which the rule's chains save
   nothing (audit.ACROSS_SHARE), so it should cost no more than the loops.
2. Over HTTP, a real uvicorn over a DuckDB file: a trace of --server-events events (100,000 by default) posted,
   stored with its analysis (made in the worker process meanwhile; a larger trace's JSON holds more values than one
   request may, so `--server-events 1000000` stores it from this process, as an ingest would), and its metrics and
   audit asked for the first time; then REVIEWERS reviewers save labels
   on it (keep-alive connections, THINK_S between saves) with the server idle, then again while the server analyses
   that trace again in the background (as after a new analysis version: the stored analysis marked stale, the
   server restarted), and again after one more restart with nothing to analyse, for as long as the pass took and
   with the same polling of its home page: what a restart alone costs the first saves (routes, templates and
   modules made on first use). Label save p50 and p99 for each, and the busy / idle ratio. The pass begins as the
   server starts, before it answers (its warm-up: app/main.py warm_up), so the saves see only the rest of it: each
   restart's time to its first answer is printed beside them.

Targets: a 1,000,000-event trace analysed in <= 3 s, a 100,000-event one in <= 0.5 s, label saves p99 <= 200 ms
during it. Run with `.venv/bin/python benchmarks/analysis.py` (`--sizes 20000 100000` for a quicker run).
Prints figures; asserts nothing.
"""

import argparse
import gc
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.domain.analysis import analyse  # noqa: E402
from app.domain.audit import audit, untrusted_flow  # noqa: E402
from app.domain.generate import generate_messaging, generate_swarm  # noqa: E402
from app.domain.metrics import analyse_graph, compute_metrics  # noqa: E402
from app.store.db import Database  # noqa: E402
from app.store.traces import graphs_from_tables, read_trace_tables  # noqa: E402
from app.store.writes import store_traces  # noqa: E402
from benchmarks.ingest import get, post, start_server  # noqa: E402

REPEAT = 5
SIZES = (20_000, 100_000, 1_000_000)
AGENTS = 1000
REVIEWERS = 8
SAVES = 30  # per reviewer, with the server idle
THINK_S = 0.5  # a reviewer's pause between saves: reading the next event
BUSY_TIMEOUT_S = 600
SERVER_EVENTS = 100_000  # a larger trace's JSON is over what one request may hold (MAX_JSON_VALUES)
ROLLOUTS, ROLLOUT_AGENTS, ROLLOUT_EVENTS = 1000, 6, 37  # as benchmarks/ingest.py sends them


def timed(*steps) -> dict[str, float]:
    """Seconds per named step, each given the result of the one before (collection paused, as ingest pauses it), and
    the CPU seconds of the whole: on two cores shared with other work, wall time also counts the waits for a core."""
    gc.collect()
    gc.disable()
    try:
        times, value = {}, None
        cpu = time.process_time()
        start = before = time.perf_counter()
        for name, step in steps:
            value = step(value)
            now = time.perf_counter()
            times[name], before = now - before, now
        cpu = time.process_time() - cpu
    finally:
        gc.enable()
    return times | {"total": before - start, "cpu": cpu}


def stages(trace: dict) -> dict[str, float]:
    """Seconds per stage of one analysis from the trace's dicts (see `timed`)."""
    return timed(("graph", lambda _: analyse_graph(trace)),
                 ("metrics", lambda g: (compute_metrics(trace, g), g)[1]),
                 ("audit", lambda g: audit(trace, g)))


def spread(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:7.0f} ms ({min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def rollouts() -> None:
    traces = [generate_swarm(ROLLOUT_AGENTS, ROLLOUT_EVENTS, seed=seed) for seed in range(ROLLOUTS)]
    runs = [timed(("analysis", lambda _: [analyse(trace) for trace in traces])) for _ in range(REPEAT)]
    print(f"{ROLLOUTS:,} rollouts of {ROLLOUT_EVENTS} events from dicts, median (range) of {len(runs)} runs, load "
          f"{os.getloadavg()[0]:.1f}:")
    for stage in ("total", "cpu"):
        print(f"  {stage:8} {spread([run[stage] for run in runs])}")


def in_process(sizes: list[int]) -> None:
    print(f"load before: {os.getloadavg()[0]:.1f}")
    totals = {}
    for events in sizes:
        trace = generate_swarm(AGENTS, events, seed=1)
        runs = [stages(trace) for _ in range(REPEAT if events < 1_000_000 else 3)]
        print(f"{events:,} events, median (range) of {len(runs)} runs:")
        for stage in ("graph", "metrics", "audit", "total", "cpu"):
            print(f"  {stage:8} {spread([run[stage] for run in runs])}")
        totals[events] = statistics.median(run["total"] for run in runs)
    print(f"load after: {os.getloadavg()[0]:.1f}")
    smallest = min(totals)
    print("total against the smallest: " + ", ".join(f"{events:,} {total / totals[smallest]:.1f}x (linear "
                                                      f"{events / smallest:.0f}x)" for events, total in totals.items()))


def messaging_flow(sizes: list[int]) -> None:
    print(f"untrusted_flow, two agents messaging at every event; load before: {os.getloadavg()[0]:.1f}")
    for events in sizes:
        trace = generate_messaging(events)
        g = analyse_graph(trace)
        runs = [timed(("flow", lambda _: untrusted_flow(trace, g))) for _ in range(REPEAT)]
        print(f"  {events:>9,} events: {spread([run['flow'] for run in runs])}, cpu "
              f"{spread([run['cpu'] for run in runs]).strip()}")


def stored_stages(db: Database, trace_id: str) -> dict[str, float]:
    """Seconds per stage of a stored trace's analysis from its tables (see `timed`)."""
    return timed(("read", lambda _: read_trace_tables(db, [trace_id])),
                 ("columns", lambda tables: graphs_from_tables(*tables)[0]),
                 ("analysis", lambda pair: analyse(*pair)))


def stored(sizes: list[int]) -> None:
    print(f"stored traces, analysed again from their tables; load before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(Path(tmp) / "stored.duckdb")
        db.migrate(ROOT / "migrations")
        try:
            for events in sizes:
                trace = generate_swarm(AGENTS, events, seed=1)
                trace["trace_id"] = f"swarm-{events}"
                store_traces(db, [trace])
                del trace
                runs = [stored_stages(db, f"swarm-{events}") for _ in range(REPEAT if events < 1_000_000 else 3)]
                print(f"{events:,} events, median (range) of {len(runs)} runs:")
                for stage in ("read", "columns", "analysis", "total", "cpu"):
                    print(f"  {stage:8} {spread([run[stage] for run in runs])}")
        finally:
            db.close()
    print(f"load after: {os.getloadavg()[0]:.1f}")


def label_saves(url: str, trace_id: str, event_ids: list[str], until=None) -> list[float]:
    """Latencies of REVIEWERS reviewers saving labels: SAVES each, or for as long as `until()` is false."""
    host = urllib.parse.urlsplit(url)
    latencies, lock = [], threading.Lock()

    def reviewer(n: int) -> None:
        connection = http.client.HTTPConnection(host.hostname, host.port, timeout=BUSY_TIMEOUT_S)
        k = 0
        while (k < SAVES) if until is None else not until():
            body = json.dumps({"trace_id": trace_id, "event_id": event_ids[n * 10 + k % 10],
                               "reviewer": f"r{n}", "credit": round(k % 10 / 10, 1)})
            began = time.perf_counter()
            connection.request("POST", "/api/annotations", body, {"Content-Type": "application/json"})
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 201, answer.status
            with lock:
                latencies.append(time.perf_counter() - began)
            k += 1
            time.sleep(THINK_S)
        connection.close()

    threads = [threading.Thread(target=reviewer, args=(n,)) for n in range(REVIEWERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def watch_reanalysis(url: str, done: threading.Event, seconds: float | None = None) -> None:
    """Sets `done` once the pages no longer show the analysis pass (polled twice a second), or, given `seconds`,
    once they have passed (polled as often)."""
    end = None if seconds is None else time.perf_counter() + seconds
    while True:
        with urllib.request.urlopen(url + "/", timeout=BUSY_TIMEOUT_S) as page:
            shown = b'id="reanalysis"' in page.read()
        if (not shown) if end is None else time.perf_counter() >= end:
            done.set()
            return
        time.sleep(0.5)


def saves_after_start(path: Path, trace_id: str, event_ids: list[str], seconds: float | None = None) \
        -> tuple[list[float], float, float]:
    """Label saves on a server just started over `path`, until its analysis pass ends (or `seconds` pass), how
    long that took, and how long the server took to answer after its start."""
    launched = time.perf_counter()
    proc, url = start_server(path)
    try:
        began, done = time.perf_counter(), threading.Event()
        threading.Thread(target=watch_reanalysis, args=(url, done, seconds), daemon=True).start()
        latencies = label_saves(url, trace_id, event_ids, until=done.is_set)
        return latencies, time.perf_counter() - began, began - launched
    finally:
        proc.terminate()
        proc.wait(60)


def percentiles(latencies: list[float]) -> tuple[str, float]:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"p50 {statistics.median(ordered) * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms ({len(ordered)} saves)", p99


def while_analysing(events: int) -> None:
    trace = generate_swarm(AGENTS, events, seed=1)
    trace["trace_id"] = "big"
    ids = [event["id"] for event in trace["events"][: REVIEWERS * 10]]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "analysis.duckdb"
        if events > SERVER_EVENTS:  # more than one request may hold: stored by this process, as an ingest stores it
            db = Database(path)
            db.migrate(ROOT / "migrations")
            began = time.perf_counter()
            store_traces(db, [trace])
            ingest_s, how = time.perf_counter() - began, "in this process (over a request's upload limit)"
            db.close()
        body = json.dumps(trace).encode() if events <= SERVER_EVENTS else None
        del trace
        proc, url = start_server(path)
        try:
            if body is not None:
                ingest_s, how = post(url, body), "over HTTP"
            first_view = {path: get(url, path) for path in ("/api/traces/big/metrics", "/api/traces/big/audit")}
            idle_text, idle_p99 = percentiles(label_saves(url, "big", ids))
        finally:
            proc.terminate()
            proc.wait(60)
        with duckdb.connect(str(path)) as con:  # as a new analysis version finds it: stored by another
            con.execute("UPDATE trace_metrics SET analysis_version = 0")
        busy, took, busy_start = saves_after_start(path, "big", ids)
        restarted, _, restart = saves_after_start(path, "big", ids, took)
    busy_text, busy_p99 = percentiles(busy)
    print(f"a {events:,}-event trace stored {how} with its analysis in {ingest_s:.1f} s; its first views: "
          + ", ".join(f"{path} {seconds * 1000:.0f} ms" for path, seconds in first_view.items()))
    print(f"label saves on a {events:,}-event trace, {REVIEWERS} reviewers:")
    print(f"  server idle:                         {idle_text}")
    print(f"  while it analyses the trace again:   {busy_text} (the pass took about {took:.1f} s with them; the "
          f"server answered {busy_start:.1f} s after its start)")
    print(f"  restarted, nothing to analyse:       {percentiles(restarted)[0]} (as long, same polling; answered "
          f"{restart:.1f} s after its start)")
    print(f"  p99 busy / idle: {busy_p99 / idle_p99:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--server-events", type=int, default=SERVER_EVENTS,
                        help="events of the trace the server analyses again (posted to it up to "
                        f"{SERVER_EVENTS:,}, over its upload limit stored by this process)")
    parser.add_argument("--skip-server", action="store_true")
    parser.add_argument("--skip-stored", action="store_true")
    parser.add_argument("--skip-in-process", action="store_true", help="no rollouts nor traces analysed from dicts: "
                        "the stored traces only (1), quicker to alternate two builds")
    parser.add_argument("--messaging", action="store_true", help="untrusted_flow alone on two agents messaging at "
                        "every event, then stop")
    args = parser.parse_args()
    if args.messaging:
        messaging_flow(args.sizes)
        return
    if not args.skip_in_process:
        rollouts()
        in_process(args.sizes)
    if not args.skip_stored:
        stored(args.sizes)
    if not args.skip_server:
        while_analysing(args.server_events)


if __name__ == "__main__":
    main()
