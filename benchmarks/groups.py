"""Rollout groups at a training run's size (issue 31): /api/groups and the group pages timed over N rollouts.

SEED rollouts (generated swarms, 8 to a task, two systems) are ingested and analysed as the app does; their rows
(traces, reward rows, measures, stored analyses) are then copied under new ids and task ids up to N, so the
aggregates run over N traces without N analyses to wait for. Each request is timed in process (Starlette's test
client) AGAIN times after a first view: median and range. Run under the shared lock:
`flock /tmp/bench.lock .venv/bin/python benchmarks/groups.py [--n 100000]`. Prints; asserts nothing.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fastapi.testclient import TestClient

from app.domain.generate import generate_swarm
from app.ingest.documents import Upload
from app.ingest.pipeline import ingest
from app.main import create_app
from app.settings import Settings

DEFAULT_N = 100_000
SEED = 800
GROUP = 8
AGAIN = 5
# Copies of the seed rollouts: a new trace id and task id (copy k of task t is task t + k * SEED / GROUP).
COPY = {
    "traces": "SELECT * EXCLUDE (k) REPLACE (trace_id || '-c' || k AS trace_id, "
              "'task-' || lpad(CAST(CAST(substr(task_id, 6) AS INT) + k * {tasks} AS VARCHAR), 6, '0') AS task_id)",
    "trace_rewards": "SELECT * EXCLUDE (k) REPLACE (trace_id || '-c' || k AS trace_id)",
    "trace_measures": "SELECT * EXCLUDE (k) REPLACE (trace_id || '-c' || k AS trace_id)",
    "trace_metrics": "SELECT * EXCLUDE (k) REPLACE (trace_id || '-c' || k AS trace_id)",
}
REQUESTS = {
    "api groups": "/api/groups",
    "api groups by -std:team": "/api/groups?sort=-std:team",
    "api groups page 200": "/api/groups?offset=10000",
    "api groups by system": "/api/groups?by=system",
    "api group": "/api/groups/task-000042",
    "api group of a system (N/2 rollouts)": "/api/groups/policy-a?by=system",
    "groups page": "/groups",
    "groups page by -mean:team": "/groups?sort=-mean:team&page=100",
    "group page": "/groups/task-000042?channel=team",
}


def seed_rollouts() -> list[dict]:
    out = []
    for i in range(SEED):
        trace = generate_swarm(6, 37, seed=i)
        out.append(trace | {"trace_id": f"rollout-{i:06d}", "task_id": f"task-{i // GROUP:06d}",
                            "system": ("policy-a", "policy-b")[i % 2]})
    return out


def grow(app, n: int) -> None:
    """Copy the seed rows until the corpus holds n traces."""
    copies = -(-n // SEED) - 1
    cur = app.state.db.cursor()
    for table, select in COPY.items():
        cur.execute(f"INSERT INTO {table} {select.format(tasks=SEED // GROUP)} FROM {table}, range(1, ?) r(k)",
                    [copies + 1])
    cur.execute("CHECKPOINT")


def timed(client: TestClient, path: str) -> float:
    start = time.perf_counter()
    response = client.get(path)
    assert response.status_code == 200, (path, response.text[:200])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="rollouts in all")
    n = parser.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(db=Path(tmp) / "groups.duckdb"))
        with TestClient(app, base_url="http://127.0.0.1") as client:
            ingest(app.state.db, [Upload("seed", json.dumps(seed_rollouts()).encode())])
            grow(app, n)
            print(f"{app.state.db.scalar('SELECT count(*) FROM traces'):,} traces, "
                  f"{app.state.db.scalar('SELECT count(*) FROM trace_rewards'):,} reward rows")
            for name, path in REQUESTS.items():
                first = timed(client, path)
                again = [timed(client, path) for _ in range(AGAIN)]
                print(f"{name:40s} first {first * 1000:6.0f} ms   again {statistics.median(again) * 1000:6.0f} ms "
                      f"({min(again) * 1000:.0f}-{max(again) * 1000:.0f})")


if __name__ == "__main__":
    main()
