"""Analyses made in the worker process (app/store/analyst.py): the same as made here, whole or sent in pieces,
and made here when the worker is gone."""

import os
import signal

from conftest import make_trace

from app.domain.analysis import analyse
from app.domain.generate import generate_swarm
from app.store import analyst


def traces() -> list[dict]:
    out = [generate_swarm(agents, events, seed=seed) for seed, (agents, events) in enumerate([(3, 12), (20, 300)])]
    for k, trace in enumerate(out):
        trace["trace_id"] = f"gen-{k}"
    return out + [make_trace("small")]


def expected(sent: list[dict]) -> dict:
    return {trace["trace_id"]: analyse(trace) for trace in sent}


def test_the_worker_analyses_as_the_server_would():
    sent = traces()
    assert analyst.analyse_traces(sent) == expected(sent)


def test_large_requests_travel_in_pieces_and_are_put_back_together(monkeypatch):
    monkeypatch.setattr(analyst, "PIECE_EVENTS", 7)  # every trace here is several pieces
    sent = traces()
    first, second = analyst.start(sent), analyst.start(sent[::-1])  # two requests' pieces interleave
    assert second() == expected(sent[::-1])
    assert first() == expected(sent)


def test_a_dead_worker_is_replaced_and_its_requests_analysed_here():
    sent = traces()
    analyst.analyse_traces(sent)  # the worker is up
    for pid in list(analyst._worker()._processes):
        os.kill(pid, signal.SIGKILL)
    assert analyst.analyse_traces(sent) == expected(sent)  # here, or by the next worker
    assert analyst.analyse_traces(sent) == expected(sent)


def test_without_a_worker_the_analysis_runs_here(monkeypatch):
    def no_processes():
        raise OSError("no processes here")

    monkeypatch.setattr(analyst, "_worker", no_processes)
    sent = traces()
    assert analyst.analyse_traces(sent) == expected(sent)
