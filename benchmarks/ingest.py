"""Ingest speed: HTTP POST to stored against DuckDB's own read_json + unnest, and many small traces.

Run with `make bench` or `.venv/bin/python benchmarks/ingest.py`. Prints figures; asserts nothing.
"""

import argparse
import json
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

from app.generate import generate_swarm  # noqa: E402

SERVER_START_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(db_path: Path) -> tuple[subprocess.Popen, str]:
    """A real uvicorn serving the app over a fresh DuckDB file."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--db", str(db_path), "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
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


def post(url: str, body: bytes) -> float:
    """Seconds from sending the body to the 201 answer (the traces are stored by then)."""
    request = urllib.request.Request(url + "/api/traces", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request) as response:
        response.read()
        assert response.status == 201
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--small", type=int, default=1000, help="number of small traces in one request")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trace_file = tmp / "swarm.json"
        trace_file.write_text(json.dumps(generate_swarm(args.agents, args.events, seed=1)))
        trace = json.loads(trace_file.read_text())
        print(f"trace: {args.agents} agents, {args.events} events, {trace_file.stat().st_size / 1e6:.1f} MB")
        small = [generate_swarm(3, 20, seed=i) for i in range(args.small)]

        def bodies(run: int) -> tuple[bytes, bytes]:
            """The same documents under fresh trace ids, so every run stores new traces."""
            trace["trace_id"] = f"swarm-run{run}"
            for i, item in enumerate(small):
                item["trace_id"] = f"small-run{run}-{i:05d}"
            return json.dumps(trace).encode(), json.dumps(small).encode()

        proc, url = start_server(tmp / "server.duckdb")
        try:
            ours, small_times = [], []
            for run in range(args.repeat):
                big_body, small_body = bodies(run)
                ours.append(post(url, big_body))
                small_times.append(post(url, small_body))
        finally:
            proc.terminate()
            proc.wait()
        theirs = [duckdb_own_load(trace_file, tmp / f"duck{i}.duckdb") for i in range(args.repeat)]

        ours_s, theirs_s = statistics.median(ours), statistics.median(theirs)
        print(f"HTTP POST to stored (median of {args.repeat}): {ours_s * 1000:.0f} ms")
        print(f"DuckDB read_json + unnest (median of {args.repeat}): {theirs_s * 1000:.0f} ms")
        print(f"ratio ours / DuckDB: {ours_s / theirs_s:.2f} (target <= 1.0)")
        small_s = statistics.median(small_times)
        n_events = sum(len(t["events"]) for t in small)
        print(f"{args.small} small traces ({n_events} events) in one request: {small_s * 1000:.0f} ms, "
              f"{n_events / small_s:,.0f} events/s (target >= 100,000)")


if __name__ == "__main__":
    main()
