"""A request's bytes read ahead by the analysis worker (app/store/analyst.py reading_ahead): pieces go as positions
only when the stored traces are exactly what the same reading gave the server, and the analyses stored are the
reference's either way."""

import gzip
import json
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import make_trace, post_json
from test_bulk_analysis import assert_stored_analyses_equal_the_reference

from app.domain.analysis import analyse
from app.domain.generate import generate_swarm
from app.ingest.documents import fast_documents
from app.store import analyst

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def rollouts() -> list[dict]:
    out = [generate_swarm(agents, events, seed=seed)
           for seed, (agents, events) in enumerate([(3, 12), (6, 37), (6, 37), (20, 300), (60, 1500)])]
    for k, trace in enumerate(out):
        trace["trace_id"] = f"gen-{k}"
    return out + [make_trace("small")]


@pytest.fixture
def sent_as(monkeypatch) -> list[str]:
    """How each request's pieces went to the worker: "positions" or "json"."""
    ways: list[str] = []
    positions, json_pieces = analyst._send_positions, analyst._send

    def by_positions(key, traces):
        ways.append("positions")
        return positions(key, traces)

    def as_json(traces):
        ways.append("json")
        return json_pieces(traces)

    monkeypatch.setattr(analyst, "_send_positions", by_positions)
    monkeypatch.setattr(analyst, "_send", as_json)
    monkeypatch.setattr(analyst, "SHARE_EVENTS", 50)  # many pieces, so the server takes some back
    return ways


def test_traces_read_ahead_go_as_positions_and_are_analysed_as_the_reference_would(client, db, sent_as):
    assert post_json(client, rollouts()).status_code == 201
    assert sent_as == ["positions"]
    assert assert_stored_analyses_equal_the_reference(db) == len(rollouts())


def test_json_lines_read_ahead_go_as_positions(client, db, sent_as):
    body = "\n".join(json.dumps(trace) for trace in rollouts()).encode()
    assert client.post("/api/traces", content=body, headers={"Content-Type": "application/json"}).status_code == 201
    assert sent_as == ["positions"]
    assert assert_stored_analyses_equal_the_reference(db) == len(rollouts())


@pytest.mark.parametrize("body", [
    pytest.param(lambda: gzip.compress(json.dumps(rollouts()).encode()), id="gzip"),
    pytest.param(lambda: (FIXTURES / "otlp" / "pydantic_ai_delegation.json").read_bytes(), id="imported"),
    pytest.param(lambda: json.dumps(rollouts()).replace('"task_id": "', '"task_id": "\\u003a').encode(),
                 id="read by the exact path"),
])
def test_traces_that_are_not_what_the_worker_read_go_as_json(client, db, sent_as, body):
    assert client.post("/api/traces", content=body(), headers={"Content-Type": "application/json"}).status_code == 201
    assert sent_as == ["json"]
    assert assert_stored_analyses_equal_the_reference(db) >= 1


def test_a_refused_request_stores_nothing_and_the_next_is_analysed(client, db, sent_as):
    broken = make_trace("broken")
    broken["edges"].append({"src": "e1", "dst": "nowhere", "type": "causal"})
    assert post_json(client, [*rollouts(), broken]).status_code == 422
    assert post_json(client, rollouts()).status_code == 201
    assert sent_as == ["positions"]
    assert assert_stored_analyses_equal_the_reference(db) == len(rollouts())


def test_what_the_worker_could_not_read_is_analysed_here():
    """The server's reading and the worker's agree, but should the worker's fail, its pieces are made here."""
    sent = rollouts()
    with analyst.reading_ahead(b"not JSON", fast_documents) as ahead:
        ahead.read_here = sent
        assert analyst.start(sent)() == {trace["trace_id"]: analyse(trace) for trace in sent}


def test_two_requests_read_ahead_at_once_get_their_own_analyses():
    first, second = rollouts(), rollouts()[::-1]
    for trace in second:
        trace["trace_id"] += "-second"
    with analyst.reading_ahead(json.dumps(first).encode(), fast_documents) as one:
        one.read_here = first
        with analyst.reading_ahead(json.dumps(second).encode(), fast_documents) as other:
            other.read_here = second
            waiting = analyst.start(second)
        made_first = analyst.start(first)()
    assert waiting() == {trace["trace_id"]: analyse(trace) for trace in second}
    assert made_first == {trace["trace_id"]: analyse(trace) for trace in first}


def test_only_the_very_values_read_count_as_read_ahead():
    sent = rollouts()
    ahead = analyst.Ahead("key", sent)
    assert ahead.holds(sent) and ahead.holds(list(sent))
    assert not ahead.holds(json.loads(json.dumps(sent)))  # equal, but not what was read
    assert not ahead.holds(sent[1:]) and not analyst.Ahead("key").holds(sent)


def test_the_server_makes_the_pieces_a_busy_worker_has_not_finished(monkeypatch):
    """Even the pieces already handed to the worker: on a busy machine it may not come to them for seconds."""
    monkeypatch.setattr(analyst, "SHARE_EVENTS", 150)  # a piece a trace, none left to the worker for its size
    pool = analyst._worker()
    asleep = pool.submit(time.sleep, 120)
    sent = rollouts()[:3] + rollouts()[-1:]
    try:
        assert analyst.analyse_traces(sent) == {trace["trace_id"]: analyse(trace) for trace in sent}
        assert not asleep.done()
    finally:
        for pid in list(pool._processes):
            os.kill(pid, signal.SIGKILL)
        analyst._discard(RuntimeError("killed by the test"))  # the next analysis starts another worker
