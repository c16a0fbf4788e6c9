"""Two `orchestrace serve` processes on one DuckLake (issue 16), under concurrent load over real HTTP: what must
be unique stays unique across them (label versions, trace ids), and what one stores the other reads, caches
included. Runs whenever PostgreSQL is installed (the `postgres` fixture skips otherwise), whatever --store."""

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from conftest import free_port, make_trace, wait_until_up

pytestmark = pytest.mark.heavy

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 60
SAVES_PER_INSTANCE = 10


@contextmanager
def serving(db: str, lake_data: Path, log: Path):
    """A real `orchestrace serve` on a free port over the lake; its base URL."""
    port = free_port()
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--db", db, "--port", str(port)],
                                cwd=ROOT, env={**os.environ, "ORCHESTRACE_LAKE_DATA": str(lake_data)},
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def instances(postgres, tmp_path_factory):
    """Two servers on one new lake, started together (so they also migrate it together)."""
    folder = tmp_path_factory.mktemp("lake-instances")
    db = f"ducklake:postgres:{postgres.new_database()}"
    with ExitStack() as stack:
        servers = [stack.enter_context(serving(db, folder / "data", folder / f"server{i}.log")) for i in range(2)]
        for i, (proc, url) in enumerate(servers):
            log = folder / f"server{i}.log"
            wait_until_up(proc, url, time.monotonic() + START_TIMEOUT_S, lambda: ":\n" + log.read_text())
        yield [url for _, url in servers]


def call(method: str, url: str, body=None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def at_once(calls: list) -> list:
    """Run the calls (functions of no argument) together, released by one barrier; their results in order."""
    start = threading.Barrier(len(calls))

    def run(fn):
        start.wait(timeout=30)
        return fn()

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(run, calls))


def test_one_reviewer_saving_one_label_on_both_instances_gets_versions_1_to_n(instances):
    first, second = instances
    assert call("POST", f"{first}/api/traces", make_trace("shared-label"))[0] == 201
    body = {"trace_id": "shared-label", "event_id": "e3", "reviewer": "ana"}
    saves = [lambda url=url, k=k: call("POST", f"{url}/api/annotations", {**body, "credit": k / 100})
             for k in range(SAVES_PER_INSTANCE) for url in instances]
    answers = at_once(saves)
    assert [status for status, _ in answers] == [201] * len(saves), answers
    history = call("GET", f"{second}/api/annotations?trace_id=shared-label&history=true")[1]["items"]
    assert sorted(label["version"] for label in history) == list(range(1, len(saves) + 1))
    assert sorted(label["credit"] for label in history) == sorted(k / 100 for k in range(SAVES_PER_INSTANCE)
                                                                  for _ in instances)  # no save lost
    assert call("GET", f"{first}/api/annotations?trace_id=shared-label")[1]["items"][0]["version"] == len(saves)


def test_one_trace_id_posted_to_both_instances_at_once_is_stored_once(instances):
    trace = make_trace("posted-twice")
    answers = at_once([lambda url=url: call("POST", f"{url}/api/traces", trace) for url in instances])
    assert sorted(status for status, _ in answers) == [201, 409], answers
    listed = call("GET", f"{instances[0]}/api/traces?q=posted-twice")[1]
    assert listed["total"] == 1
    assert len(call("GET", f"{instances[1]}/api/traces/posted-twice")[1]["events"]) == len(trace["events"])


def test_a_trace_stored_on_one_instance_is_read_on_the_other(instances):
    first, second = instances
    trace = make_trace("read-elsewhere", system="elsewhere")
    assert call("POST", f"{first}/api/traces", trace)[0] == 201
    status, stored = call("GET", f"{second}/api/traces/read-elsewhere")
    assert status == 200 and stored["system"] == "elsewhere" and stored["events"] == trace["events"]


def test_a_trace_replaced_on_one_instance_has_its_new_figure_on_the_other(instances):
    first, second = instances
    old = make_trace("replaced")
    assert call("POST", f"{first}/api/traces", old)[0] == 201
    before = call("GET", f"{second}/api/traces/replaced/figure")[1]  # cached by the second instance
    new = make_trace("replaced", events=[{**event, "agent": "renamed"} if event["agent"] == "worker" else event
                                         for event in old["events"]])
    assert call("POST", f"{first}/api/traces?replace=true", new)[0] == 201
    after = call("GET", f"{second}/api/traces/replaced/figure")[1]
    assert "renamed" not in json.dumps(before) and "renamed" in json.dumps(after)
