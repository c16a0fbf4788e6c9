"""Ingest speed: HTTP POST to stored against DuckDB's own read_json + unnest, reading the trace back, and a request
of rollouts.

The rollouts case (issue 30: 1,000 rollouts of 6 agents and 37 events in one request, as an RL run sends them) is
measured over HTTP and in process, analysis included (target >= 40,000 events/s over HTTP): `app.ingest.pipeline.
ingest` from the request bytes to the traces and their analyses stored in a DuckDB file; beside it DuckDB's own
read_json + unnest of the same rollouts; then where the in-process time goes: reading and validating, storing
(analysis in the worker process meanwhile), the analysis alone in one process, and DuckDB alone inserting the same
rows from Arrow and committing them (with its default threads and with one). Run with `make bench` or
`.venv/bin/python benchmarks/ingest.py`; `--http-only` prints the HTTP figure alone, a run a minute, to alternate two
builds on a shared machine.
Prints medians with their range and the machine's load before and after (figures taken under load mislead: on two
cores, other processes take the analysis worker's core); asserts nothing.
"""

import argparse
import gc
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.domain.analysis import analyse  # noqa: E402
from app.domain.generate import generate_swarm  # noqa: E402
from app.ingest.documents import Upload  # noqa: E402
from app.ingest.pipeline import ingest, load_uploads  # noqa: E402
from app.store.db import Database  # noqa: E402
from app.store.lists import registered  # noqa: E402
from app.store.writes import store_traces  # noqa: E402

SERVER_START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(db_path: Path | str, lake_data: Path | None = None) -> tuple[subprocess.Popen, str]:
    """A real uvicorn serving the app over a fresh DuckDB file (or the DuckLake URL `db_path`, its Parquet files
    in `lake_data`)."""
    port = free_port()
    env = {**os.environ, "ORCHESTRACE_LAKE_DATA": str(lake_data)} if lake_data else None
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--db", str(db_path), "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + SERVER_START_TIMEOUT_S
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/api/health")
            return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def cpu_ticks(pid: int) -> int:
    """User and system clock ticks a process (all its threads) and the processes it started (the analysis worker)
    have used so far."""
    procs = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        procs[int(stat.parent.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree = {pid}
    while grown := {child for child, (parent, _) in procs.items() if parent in tree} - tree:
        tree |= grown
    return sum(procs[p][1] for p in tree if p in procs)


def wait_idle(proc: subprocess.Popen, idle_s: float = 1.0, timeout_s: float = 600) -> float:
    """Wait until the server has finished the work it does on its own (analyses, level of detail, checkpoints, the
    corpus facts built ahead): `idle_s` without using a tenth of a core. Returns the seconds waited."""
    start = time.monotonic()
    ticks = cpu_ticks(proc.pid)
    while time.monotonic() < start + timeout_s:
        time.sleep(idle_s)
        now = cpu_ticks(proc.pid)
        if now - ticks <= idle_s * os.sysconf("SC_CLK_TCK") / 10:
            break
        ticks = now
    return time.monotonic() - start


def post(url: str, body: bytes, path: str = "/api/traces") -> float:
    """Seconds from sending the body to the 201 answer (the traces are stored by then)."""
    request = urllib.request.Request(url + path, data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request) as response:
        response.read()
        assert response.status == 201
    return time.perf_counter() - start


def get(url: str, path: str) -> float:
    """Seconds from asking for `path` to the whole answer read."""
    start = time.perf_counter()
    with urllib.request.urlopen(url + path) as response:
        response.read()
        assert response.status == 200
    return time.perf_counter() - start


def duckdb_own_load(path: Path, db_path: Path) -> float:
    """DuckDB's own path: read_json the file and unnest events and edges into tables."""
    con = duckdb.connect(str(db_path))
    start = time.perf_counter()
    con.execute("CREATE OR REPLACE TABLE raw AS SELECT * FROM read_json(?, maximum_object_size=1000000000)",
                [str(path)])
    con.execute("CREATE OR REPLACE TABLE ev AS SELECT trace_id, unnest(events, recursive := true) FROM raw")
    con.execute("CREATE OR REPLACE TABLE ed AS SELECT trace_id, unnest(edges, recursive := true) FROM raw")
    elapsed = time.perf_counter() - start
    con.close()
    return elapsed


def in_process(bodies: list[bytes], db_path: Path) -> list[float]:
    """Seconds of `ingest` into one DuckDB file for each body but the first, an untimed warm-up."""
    db = Database(db_path)
    db.migrate(ROOT / "migrations")
    times = []
    try:
        ingest(db, [Upload("body", bodies[0])])
        for body in bodies[1:]:
            gc.collect()  # no garbage of the run before weighs on this one
            start = time.perf_counter()
            ingest(db, [Upload("body", body)])
            times.append(time.perf_counter() - start)
    finally:
        db.close()
    return times


def stages(bodies: list[bytes], db_path: Path) -> dict[str, list[float]]:
    """Where the in-process time of each body goes: reading and validating it (`load_uploads`), storing it
    (`store_traces`: Arrow tables, inserts, commit) and, for the floor of any design on DuckDB, inserting the same
    rows again from Arrow into a scratch file in one transaction, with DuckDB's default threads and with one."""
    db = Database(db_path)
    db.migrate(ROOT / "migrations")
    times: dict[str, list[float]] = {"read + validate": [], "store": [], "analysis alone": [], "DuckDB alone": [],
                                     "DuckDB alone, 1 thread": []}
    try:
        for body in bodies:
            gc.collect()
            start = time.perf_counter()
            traces = load_uploads([Upload("body", body)], len(body)).traces
            times["read + validate"].append(time.perf_counter() - start)
            start = time.perf_counter()
            ids, _ = store_traces(db, traces)
            times["store"].append(time.perf_counter() - start)
            start = time.perf_counter()
            for trace in traces:
                analyse(trace)
            times["analysis alone"].append(time.perf_counter() - start)
            del traces
            cur = db.cursor()
            with registered(cur, "stored_ids", trace_id=ids):
                rows = {table: cur.execute(f"SELECT * FROM {table} WHERE trace_id IN (SELECT trace_id FROM stored_ids)")
                        .to_arrow_table() for table in ("traces", "events", "edges")}
            cur.close()
            for label, threads in (("DuckDB alone", None), ("DuckDB alone, 1 thread", 1)):
                times[label].append(duckdb_insert(rows, db_path.with_name(f"{label}.duckdb"), threads))
    finally:
        db.close()
    return times


def duckdb_insert(rows: dict, db_path: Path, threads: int | None) -> float:
    """Seconds DuckDB takes to insert these Arrow tables into empty tables of a scratch file and commit."""
    db_path.unlink(missing_ok=True)
    con = duckdb.connect(str(db_path))
    try:
        if threads:
            con.execute(f"SET threads = {threads}")
        for table, arrow in rows.items():
            con.register("rows", arrow)
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM rows LIMIT 0")
            con.unregister("rows")
        start = time.perf_counter()
        con.execute("BEGIN TRANSACTION")
        for table, arrow in rows.items():
            con.register("rows", arrow)
            con.execute(f"INSERT INTO {table} SELECT * FROM rows")
            con.unregister("rows")
        con.execute("COMMIT")
        elapsed = time.perf_counter() - start
        assert con.execute("SELECT count(*) FROM events").fetchone()[0] == rows["events"].num_rows
        return elapsed
    finally:
        con.close()


def rate(times: list[float], n_events: int) -> str:
    """Median time with its range, and the events per second they mean."""
    median, fastest, slowest = statistics.median(times), min(times), max(times)
    return (f"{median * 1000:.0f} ms (range {fastest * 1000:.0f}-{slowest * 1000:.0f}), "
            f"{n_events / median:,.0f} events/s (range {n_events / slowest:,.0f}-{n_events / fastest:,.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--rollouts", type=int, default=1000, help="rollouts in one request")
    parser.add_argument("--rollout-agents", type=int, default=6)
    parser.add_argument("--rollout-events", type=int, default=37)
    parser.add_argument("--rollouts-only", action="store_true", help="measure the rollouts alone, not the trace")
    parser.add_argument("--http-only", action="store_true",
                        help="the rollouts over HTTP alone, without DuckDB's read_json or the in-process breakdown: "
                             "a run a minute, to alternate two builds often on a shared machine")
    args = parser.parse_args()
    args.rollouts_only |= args.http_only
    load_before = os.getloadavg()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trace_file = tmp / "swarm.json"
        trace_file.write_text(json.dumps(generate_swarm(args.agents, args.events, seed=1)))
        trace = json.loads(trace_file.read_text())
        print(f"trace: {args.agents} agents, {args.events} events, {trace_file.stat().st_size / 1e6:.1f} MB")
        small = [generate_swarm(args.rollout_agents, args.rollout_events, seed=i) for i in range(args.rollouts)]
        n_events = sum(len(t["events"]) for t in small)

        def small_body(run: str) -> bytes:
            """The rollouts under fresh ids, so every run stores new traces."""
            for i, item in enumerate(small):
                item["trace_id"] = f"rollout-{run}-{i:05d}"
            return json.dumps(small).encode()

        rollouts_file = tmp / "rollouts.json"
        rollouts_file.write_bytes(small_body("file"))

        proc, url = start_server(tmp / "server.duckdb")
        try:
            ours, small_times, reads = [], [], []
            for run in range(args.repeat):
                if not args.rollouts_only:
                    trace["trace_id"] = f"swarm-run{run}"
                    ours.append(post(url, json.dumps(trace).encode()))
                    reads.append(get(url, f"/api/traces/swarm-run{run}"))
                small_times.append(post(url, small_body(f"http{run}")))
        finally:
            proc.terminate()
            proc.wait()
        if args.http_only:
            print(f"{args.rollouts:,} rollouts of {args.rollout_agents} agents ({n_events:,} events) in one request, "
                  f"analysis included, over HTTP, median of {args.repeat}: {rate(small_times, n_events)}")
            print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}".format(
                *load_before, *os.getloadavg()))
            return
        theirs = [duckdb_own_load(trace_file, tmp / f"duck{i}.duckdb") for i in range(args.repeat)
                  if not args.rollouts_only]
        theirs_small = [duckdb_own_load(rollouts_file, tmp / f"duck-rollouts{i}.duckdb") for i in range(args.repeat)]
        local_times = in_process([small_body(f"local{run}") for run in range(args.repeat + 1)], tmp / "local.duckdb")
        parts = stages([small_body(f"stage{run}") for run in range(args.repeat)], tmp / "stages.duckdb")

        if not args.rollouts_only:
            ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
            print(f"HTTP POST to stored (median of {args.repeat}): {ours_s * 1000:.0f} ms")
            print(f"DuckDB read_json + unnest (median of {args.repeat}): {theirs_s * 1000:.0f} ms")
            print(f"ratio ours / DuckDB: {ours_s / theirs_s:.2f} (target <= 1.0)")
            print(f"HTTP GET of the stored trace, as ingested: {rate(reads, args.events)}")
        print(f"{args.rollouts:,} rollouts of {args.rollout_agents} agents ({n_events:,} events) in one request, "
              f"analysis included, median of {args.repeat}:")
        print(f"  over HTTP:  {rate(small_times, n_events)} (target >= 40,000 events/s)")
        print(f"  in process: {rate(local_times, n_events)}")
        print(f"  DuckDB read_json + unnest of the same rollouts: {rate(theirs_small, n_events)}; "
              f"ratio ours over HTTP / DuckDB: {statistics.median(small_times) / statistics.median(theirs_small):.2f}")
        print("  where the in-process time goes (medians, ms):")
        for label, times in parts.items():
            print(f"    {label:24s} {statistics.median(times) * 1000:5.0f} (range {min(times) * 1000:.0f}-"
                  f"{max(times) * 1000:.0f})")
    print("load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}".format(
        *load_before, *os.getloadavg()))


if __name__ == "__main__":
    main()
