"""Label saves while an RL run's rollouts arrive (issue 30): one reviewer saves a label every SAVE_PAUSE_S while
another client posts requests of 1,000 rollouts (6 agents, 37 events each) back to back to a real uvicorn over a
DuckDB file. Each request's write holds the store's one writer; a save waits for whatever write holds it then.
Prints the saves' latency (p50, p90, max, with how many were made) and the requests' time, per round and as medians
over the rounds; asserts nothing. Run with `.venv/bin/python benchmarks/saves_during_rollouts.py`."""

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import post, start_server, wait_idle  # noqa: E402

from app.domain.generate import generate_swarm  # noqa: E402

SAVE_PAUSE_S = 0.05


def round_(rollouts: list[dict], requests: int, label: int) -> tuple[list[float], list[float]]:
    """One server: a warm-up request, then `requests` more with saves meanwhile; (save latencies, request times)."""
    def body(run: str) -> bytes:
        for i, trace in enumerate(rollouts):
            trace["trace_id"] = f"rollout-{run}-{i}"
        return json.dumps(rollouts).encode()

    bodies = [body(str(k)) for k in range(requests)]
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "server.duckdb")
        try:
            post(url, body("warm"))
            wait_idle(proc)
            stop, saves = threading.Event(), []

            def reviewer() -> None:
                conn = http.client.HTTPConnection(url.removeprefix("http://"))
                while not stop.is_set():
                    note = json.dumps({"trace_id": "rollout-warm-0", "event_id": rollouts[0]["events"][1]["id"],
                                       "reviewer": "ada", "note": f"save {label}-{len(saves)}"})
                    began = time.perf_counter()
                    conn.request("POST", "/api/annotations", note, {"Content-Type": "application/json"})
                    answer = conn.getresponse()
                    answer.read()
                    assert answer.status == 201, answer.status
                    saves.append(time.perf_counter() - began)
                    time.sleep(SAVE_PAUSE_S)

            thread = threading.Thread(target=reviewer)
            thread.start()
            times = [post(url, b) for b in bodies]
            stop.set()
            thread.join()
        finally:
            proc.terminate()
            proc.wait()
    return saves, times


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="servers started, one after the other (default 3)")
    parser.add_argument("--requests", type=int, default=10, help="requests of rollouts per round (default 10)")
    args = parser.parse_args()
    rollouts = [generate_swarm(6, 37, seed=seed) for seed in range(1000)]
    p50s, p90s, maxes, medians = [], [], [], []
    for r in range(args.rounds):
        saves, times = round_(rollouts, args.requests, r)
        p50s.append(quantile(saves, 0.5))
        p90s.append(quantile(saves, 0.9))
        maxes.append(max(saves))
        medians.append(statistics.median(times))
        print(f"round {r + 1}: {len(saves)} saves, p50 {p50s[-1] * 1000:.0f} ms, p90 {p90s[-1] * 1000:.0f} ms, "
              f"max {maxes[-1] * 1000:.0f} ms; requests of 1,000 rollouts: median {medians[-1] * 1000:.0f} ms",
              flush=True)

    def spread(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:.0f} ms (range {min(values) * 1000:.0f}-{max(values) * 1000:.0f})"

    print(f"label saves while rollouts arrive, medians over {args.rounds} rounds: p50 {spread(p50s)}, "
          f"p90 {spread(p90s)}, max {spread(maxes)}; requests {spread(medians)}")


if __name__ == "__main__":
    main()
