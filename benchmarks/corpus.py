"""Corpus pages at a training run's size (issue 30): N small rollouts ingested over HTTP, then each corpus page timed.

Rollouts are generated swarms of 6 agents and 37 events (app/domain/generate.py), in groups of 8 per task (a GRPO
step's prompts) and two policies (systems), posted in requests of 1,000 to a real uvicorn over a fresh DuckDB file.
After the first 500, reviewers label an event of each of the first 300 traces and a review queue samples 1,000 tool
calls; after all N, a second queue samples 1,000 tool calls of the whole corpus (the queue page at N shows that one).
Each page is timed at 500 rollouts and at N: its first view, then again (AGAIN views); so are the exports for RL
trainers of every trace (EXPORTS), and `orchestrace audit --all` at N, on the store and through the server. Run with
`.venv/bin/python benchmarks/corpus.py` (100,000 rollouts), `--quick` (3,000) or `--n N`; `--lake` does the same on
a DuckLake over PostgreSQL after the file, and prints each page's lake/file ratio at N.
Prints medians with their range and the ratios of the two sizes; asserts nothing. The figures move with the load of
the machine: on a shared 2-core machine, expect them to vary by tens of percent from run to run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.domain.generate import generate_swarm  # noqa: E402
from benchmarks.ingest import get, post, start_server, wait_idle  # noqa: E402

DEFAULT_N = 100_000
QUICK_N = 3_000
SMALL_N = 500
REQUEST = 1_000
AGENTS, EVENTS = 6, 37
GROUP = 8  # rollouts per task
SYSTEMS = ("policy-a", "policy-b")
LABELLED_TRACES = 300
LABELLED_EVENT = "e08"  # the first tool call of a generated swarm
REVIEWERS = ("ada", "bob")
QUEUE_SAMPLE = 1_000
AGAIN = 3  # views after the first
PAGES = {
    "trace list": "/",
    "list by reward": "/?sort=-reward:team",
    "list by speedup": "/?sort=-parallelism_speedup",
    "list by system": "/?system=policy-b",
    "list by topology": "/?topology=swarm&sort=-reward:tool",
    "list by task": "/?task=task-00042",
    "list by text": "/?q=rollout-0004",
    "list by reward range": "/?range=reward:team:0.5:0.8&sort=-reward:team",
    "list by finding": "/?finding=untrusted_flow",
    "list, page 100": "/?sort=tokens&page=100",
    "api by reward range": "/api/traces?range=reward:team:0.9:&sort=-reward:team&limit=100",
    "dashboard": "/dashboard",
    "audit": "/audit",
    "audit by rule": "/audit?sort=-untrusted_flow&page=3",
    "ingest log": "/ingest-log",
    "ingest log filtered": "/ingest-log?endpoint=POST%20/api/traces&outcome=ok",
    "api ingest log": "/api/ingest-log",
    "labels": "/annotations",
    "labels filtered": "/annotations?reviewer=ada&page=2",
    "queues": "/queues",
    "queue": "/queues/{queue}",
}
PAGE_TIMEOUT_S = 600
# Every trace exported for an RL trainer (rllm, trl_stepwise: every rollout; credit_jsonl: the labelled ones), timed
# at 500 and at N; then `orchestrace audit --all` at N through the server, and on the store once the server stopped
# (a file has one process).
EXPORTS = {"rllm": "/api/annotations/export?format=rllm", "trl_stepwise": "/api/annotations/export?format=trl_stepwise",
           "credit_jsonl": "/api/annotations/export?format=credit_jsonl"}


def rollouts(start: int, stop: int) -> list[dict]:
    """Rollouts `start` to `stop`, each its own seed, id, task (GROUP to a task) and system."""
    out = []
    for i in range(start, stop):
        trace = generate_swarm(AGENTS, EVENTS, seed=i)
        trace |= {"trace_id": f"rollout-{i:06d}", "task_id": f"task-{i // GROUP:05d}", "system": SYSTEMS[i % 2]}
        out.append(trace)
    return out


def ingest_upto(url: str, start: int, stop: int) -> tuple[float, int]:
    """Post rollouts start..stop in requests of REQUEST; seconds spent in the posts and events sent."""
    seconds, events = 0.0, 0
    for lo in range(start, stop, REQUEST):
        batch = rollouts(lo, min(lo + REQUEST, stop))
        events += sum(len(t["events"]) for t in batch)
        seconds += post(url, json.dumps(batch).encode())
    return seconds, events


def label(url: str) -> None:
    """Each reviewer labels one event of each of the first LABELLED_TRACES rollouts."""
    for i in range(LABELLED_TRACES):
        for reviewer in REVIEWERS:
            body = {"trace_id": f"rollout-{i:06d}", "event_id": LABELLED_EVENT, "reviewer": reviewer,
                    "credit": (i % 10) / 10, "reward_family": "R1", "note": f"rollout {i}"}
            post(url, json.dumps(body).encode(), "/api/annotations")


def make_queue(url: str, name: str) -> tuple[str, float]:
    """A queue of QUEUE_SAMPLE tool calls sampled from the whole corpus: its id and the seconds making it took."""
    body = {"name": name, "filter": {"event_types": ["tool_call"]}, "reviewers": list(REVIEWERS), "overlap": 2,
            "sample": {"n": QUEUE_SAMPLE, "seed": 1}}
    request = urllib.request.Request(url + "/api/queues", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=PAGE_TIMEOUT_S) as response:
        queue = json.loads(response.read())
    return queue["id"], time.perf_counter() - start


def view(url: str, path: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url + path, timeout=PAGE_TIMEOUT_S) as response:
        response.read()
        assert response.status == 200
    return time.perf_counter() - start


def time_pages(url: str, queue: str) -> dict[str, dict]:
    """Per page: its first view and its views again, in seconds."""
    out = {}
    for name, path in PAGES.items():
        path = path.format(queue=queue)
        out[name] = {"first": view(url, path), "again": [get(url, path) for _ in range(AGAIN)]}
    return out


def time_exports(url: str) -> dict[str, tuple[float, int]]:
    """Per export: seconds to the whole answer read, and its lines."""
    out = {}
    for name, path in EXPORTS.items():
        start = time.perf_counter()
        with urllib.request.urlopen(url + path, timeout=PAGE_TIMEOUT_S * 10) as response:
            lines = sum(1 for _ in response)
        out[name] = (time.perf_counter() - start, lines)
    return out


def time_audit(db: Path | str, lake_data: Path | None, url: str | None = None) -> float:
    """Seconds `orchestrace audit --all` takes on the store (its findings of every trace, as a CI gate asks), or
    through the server at `url` (GET /api/findings)."""
    env = {**os.environ, "ORCHESTRACE_LAKE_DATA": str(lake_data)} if lake_data else None
    where = ["--server", url] if url else ["--db", str(db)]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "app.cli", "audit", "--all", *where], cwd=ROOT, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode not in (0, 1):  # 1: findings at or above --fail-on (none is given: never)
        raise SystemExit(f"orchestrace audit failed: {done.stderr}")
    return time.perf_counter() - start


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def spread(times: list[float]) -> str:
    return f"{ms(statistics.median(times))} ({min(times) * 1000:.0f}-{max(times) * 1000:.0f})"


def measure(db: Path | str, lake_data: Path | None, n: int) -> dict:
    """Ingest, label and queue as the docstring says on a server over `db`; the pages timed at SMALL_N and at n."""
    proc, url = start_server(db, lake_data)
    try:
        seconds, events = ingest_upto(url, 0, SMALL_N)
        label(url)
        small_queue, small_queue_s = make_queue(url, f"sample of {SMALL_N}")
        small = time_pages(url, small_queue)
        small_exports = time_exports(url)
        more_s, more_events = ingest_upto(url, SMALL_N, n)
        large_queue, large_queue_s = make_queue(url, f"sample of {n}")
        large = time_pages(url, large_queue)
        large_exports = time_exports(url)
        audit_served = time_audit(db, lake_data, url)
    finally:
        proc.terminate()
        proc.wait(30)
    return {"seconds": seconds + more_s, "events": events + more_events, "queue_s": (small_queue_s, large_queue_s),
            "small": small, "large": large, "exports": (small_exports, large_exports),
            "audit": time_audit(db, lake_data), "audit_served": audit_served}


def report(store: str, n: int, run: dict) -> None:
    small, large = run["small"], run["large"]
    print(f"{store}: {n:,} rollouts of {AGENTS} agents, {run['events']:,} events: ingest over HTTP in requests of "
          f"{REQUEST:,} {run['seconds']:.1f} s, {run['events'] / run['seconds']:,.0f} events/s; labels on "
          f"{LABELLED_TRACES} traces by {len(REVIEWERS)} reviewers; making a queue of {QUEUE_SAMPLE:,} sampled tool "
          f"calls: {ms(run['queue_s'][0])} at {SMALL_N}, {ms(run['queue_s'][1])} at {n:,}")
    print(f"{'page':22} {'first at 500':>12} {'first at N':>11} {'first N/500':>11} {'again at 500':>16} "
          f"{'again at N':>18} {'again N/500':>11}")
    for name in PAGES:
        s, big = small[name], large[name]
        ratio = statistics.median(big["again"]) / statistics.median(s["again"])
        print(f"{name:22} {ms(s['first']):>12} {ms(big['first']):>11} {big['first'] / s['first']:>10.1f}x "
              f"{spread(s['again']):>16} {spread(big['again']):>18} {ratio:>10.1f}x")
    print(f"{'export':22} {'at 500':>20} {'at N':>20} {'per line, N/500':>16}")
    for name in EXPORTS:
        (s_s, s_lines), (n_s, n_lines) = (sizes[name] for sizes in run["exports"])
        print(f"{name:22} {s_s:>8.2f} s {s_lines:>7,} lines {n_s:>8.2f} s {n_lines:>7,} lines "
              f"{(n_s / n_lines) / (s_s / s_lines) if s_lines and n_lines else float('nan'):>15.1f}x")
    print(f"orchestrace audit --all at {n:,}: {run['audit']:.1f} s ({run['audit'] / n * 1000:.2f} ms a trace, the "
          f"command's start included); through the server: {run['audit_served']:.1f} s")


def compare(n: int, file: dict, lake: dict) -> None:
    """Each page on the lake against the file at N, measured in the same run (issue 30: within 2x)."""
    print(f"lake against file at {n:,} rollouts (the same pages, the same run):")
    print(f"{'page':22} {'first: file':>11} {'lake':>7} {'ratio':>6}   {'again: file':>11} {'lake':>7} {'ratio':>6}")
    for name in PAGES:
        f, lk = file["large"][name], lake["large"][name]
        again_f, again_l = statistics.median(f["again"]), statistics.median(lk["again"])
        print(f"{name:22} {ms(f['first']):>11} {ms(lk['first']):>7} {lk['first'] / f['first']:>5.2f}x   "
              f"{ms(again_f):>11} {ms(again_l):>7} {again_l / again_f:>5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=DEFAULT_N, help="rollouts in all")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_N:,} rollouts")
    parser.add_argument("--keep", type=Path, help="a folder to leave the store in (to profile pages on it again "
                                                  "without ingesting N rollouts anew); a temporary one by default")
    parser.add_argument("--again", type=Path, help="only time the pages at N again, on the store a run left in this "
                                                   "folder (--keep): a first view is then the server's first")
    parser.add_argument("--lake", action="store_true", help="the same run on a DuckLake over PostgreSQL too (a "
                        "throwaway cluster, tests/lake.py), after the file's, and each page's lake/file ratio at N")
    args = parser.parse_args()
    if args.again:
        return time_again(args.again)
    n = QUICK_N if args.quick else args.n
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        file = measure(folder / "corpus.duckdb", None, n)
        report("DuckDB file", n, file)
        if args.lake:
            sys.path.insert(0, str(ROOT / "tests"))
            from lake import ThrowawayPostgres

            postgres = ThrowawayPostgres()
            try:
                lake = measure(f"ducklake:postgres:{postgres.new_database()}", folder / "lake-data", n)
            finally:
                postgres.stop()
            report("DuckLake", n, lake)
            compare(n, file, lake)


def time_again(folder: Path) -> None:
    """The pages timed again on a store a run kept (its migrations applied), with its newest queue (the sample of
    the whole corpus); at N only: compare with a run's figures at 500. Twice, each on a server just started: its
    first views at once (racing what the server does on its own at its start: the corpus facts built ahead), then,
    on a server started again, once it has been idle for a second."""
    rounds = {}
    for when in ("at once", "once idle"):
        proc, url = start_server(folder / "corpus.duckdb")
        try:
            waited = wait_idle(proc) if when == "once idle" else 0.0
            with urllib.request.urlopen(url + "/api/queues", timeout=PAGE_TIMEOUT_S) as response:
                queue = json.loads(response.read())["queues"][0]["id"]  # newest first
            with urllib.request.urlopen(url + "/api/traces?limit=1", timeout=PAGE_TIMEOUT_S) as response:
                n = json.loads(response.read())["total"]
            rounds[when] = (waited, time_pages(url, queue))
        finally:
            proc.terminate()
            proc.wait(30)
    print(f"the pages again on the {n:,} rollouts kept in {folder}, on a server just started")
    print(f"{'page':22} {'first at once':>13} {'first once idle':>15} {'again at N':>18}")
    for name in PAGES:
        print(f"{name:22} {ms(rounds['at once'][1][name]['first']):>13} {ms(rounds['once idle'][1][name]['first']):>15}"
              f" {spread(rounds['at once'][1][name]['again'] + rounds['once idle'][1][name]['again']):>18}")
    print(f"(the server started again was idle after {rounds['once idle'][0]:.1f} s)")


if __name__ == "__main__":
    main()
