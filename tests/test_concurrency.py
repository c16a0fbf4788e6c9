"""Fifty clients at once against a real server (uvicorn's thread pool, one DuckDB file): label saves, label,
paper and trace reads all answer, and every label version is accounted for.

Before each ORM session got a cursor of its own, more than five requests at once shared and closed each other's
DuckDB connections: 500s ("Connection already closed", "connection is busy with another call").
"""

import csv
import http.client
import io
import json
import threading
from collections import Counter, defaultdict

import pytest
from conftest import make_trace, running_server

from app.domain.taxonomy import PAPER_COLUMNS, PAPER_FIELDS

pytestmark = pytest.mark.heavy

CLIENTS = 50
TRACES = ("c0", "c1", "c2")
EVENTS = ("e1", "e2", "e3", "e4", "e5", "e6")
SHARED = ("e1", "e2")  # edited by every client as one `team` reviewer, as from many tabs
OWN_SAVES = 4
SHARED_SAVES = 2


class Client:
    """One keep-alive connection, as a browser tab has; statuses and failures are what the test checks."""

    def __init__(self, url: str):
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=60)

    def request(self, method: str, path: str, body: bytes | None = None, content_type: str = "application/json"):
        self.conn.request(method, path, body=body, headers={"Content-Type": content_type})
        response = self.conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data.startswith((b"{", b"[")) else data

    def save(self, **label):
        return self.request("POST", "/api/annotations", json.dumps(label).encode())


def paper_pool() -> bytes:
    """Three papers with controlled values the taxonomy allows."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(PAPER_COLUMNS)
    for i in range(3):
        row = {c: f"{c} {i}" for c in PAPER_COLUMNS} | {"key": f"p{i}", "year": "2025"}
        row |= {field: allowed[i % len(allowed)] for field, allowed in PAPER_FIELDS.items()}
        writer.writerow([row[c] for c in PAPER_COLUMNS])
    return out.getvalue().encode()


def work(url: str, index: int, start: threading.Barrier, answers: list, problems: list) -> None:
    """One client: its own labels on its own trace (always on the current version, and one retry), the shared
    labels (read the version, save on it: 201, or 409 when another client saved first), and reads."""
    client = Client(url)
    trace_id, reviewer = TRACES[index % len(TRACES)], f"r{index:02d}"
    versions: dict[str, int] = {}

    def expect(what: str, result, *allowed: int):
        status, answer = result
        if status not in allowed:
            problems.append((what, status, answer))
        return status, answer

    start.wait()
    try:
        for n in range(OWN_SAVES):
            event_id = EVENTS[(index + n) % len(EVENTS)]
            label = {"trace_id": trace_id, "event_id": event_id, "reviewer": reviewer, "credit": 0.5,
                     "base_version": versions.get(event_id, 0), "client_request_id": f"{reviewer}-{n}"}
            status, answer = expect("own save", client.save(**label), 201)
            if status == 201:
                answers.append(answer)
                versions[event_id] = answer["version"]
            expect("label read", client.request("GET", f"/api/annotations?trace_id={trace_id}"), 200)
        status, retry = expect("retried save", client.save(**label), 200)
        if status == 200 and retry["annotation_id"] != answer["annotation_id"]:
            problems.append(("retry made a new version", retry, answer))
        for n in range(SHARED_SAVES):
            event_id = SHARED[(index + n) % len(SHARED)]
            _, current = expect("shared read", client.request(
                "GET", f"/api/annotations?trace_id=c0&event_id={event_id}&reviewer=team"), 200)
            base = current["items"][0]["version"] if current["items"] else 0
            status, answer = expect("shared save", client.save(trace_id="c0", event_id=event_id, reviewer="team",
                                                                note=reviewer, base_version=base), 201, 409)
            if status == 201:
                answers.append(answer)
        expect("paper read", client.request("GET", f"/api/papers/p{index % 3}/tags"), 200)
        expect("paper stats", client.request("GET", "/api/papers/stats"), 200)
        expect("trace read", client.request("GET", f"/api/traces/{trace_id}"), 200)
    except Exception as exc:  # a reset connection, or an answer not as expected (already noted)
        problems.append(("exception", repr(exc)))


def test_fifty_clients_at_once_get_answers_and_every_save_is_accounted_for(tmp_path):
    with running_server(tmp_path / "concurrent.duckdb") as url:
        setup = Client(url)
        for trace_id in TRACES:
            assert setup.request("POST", "/api/traces", json.dumps(make_trace(trace_id)).encode())[0] == 201
        assert setup.request("POST", "/api/papers/import", paper_pool(), "text/csv")[0] == 200

        answers, problems = [], []
        start = threading.Barrier(CLIENTS)
        threads = [threading.Thread(target=work, args=(url, i, start, answers, problems)) for i in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert problems == []

        status, stored = Client(url).request("GET", "/api/annotations?history=true")
        assert status == 200

    answered = Counter((a["trace_id"], a["event_id"], a["reviewer"], a["version"], a["annotation_id"])
                       for a in answers)
    assert [a for a, n in answered.items() if n > 1] == []  # no version answered twice
    kept = {(s["trace_id"], s["event_id"], s["reviewer"], s["version"], s["annotation_id"]) for s in stored["items"]}
    assert kept == set(answered)  # none lost, none stored without its 201
    versions = defaultdict(list)
    for s in stored["items"]:
        versions[(s["trace_id"], s["event_id"], s["reviewer"])].append(s["version"])
    assert all(sorted(v) == list(range(1, len(v) + 1)) for v in versions.values())
    assert sum(1 for a in answers if a["reviewer"] != "team") == CLIENTS * OWN_SAVES
    assert {key[1] for key in versions if key[2] == "team"} == set(SHARED)
