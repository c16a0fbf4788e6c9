"""Analyses made in the worker process (app/store/analyst.py): the same as made here, whole or sent in pieces,
and made here when the worker is gone."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import make_trace

from app.domain.analysis import analyse
from app.domain.generate import generate_swarm
from app.store import analyst

ROOT = Path(__file__).resolve().parent.parent


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


def test_the_worker_yields_the_processor_to_the_server():
    """A background analysis must not slow reviewers' requests on a machine of few cores: the worker runs at a
    lower priority than the server that started it."""
    lowest = 19
    assert analyst._worker().submit(os.nice, 0).result() == min(lowest, os.nice(0) + analyst.WORKER_NICENESS)


def test_the_worker_is_at_its_lower_priority_from_its_start():
    """Its start (importing the app) takes a core too: the server lowers its priority, not its own first task."""
    process = analyst._NicerContext().Process(target=time.sleep, args=(1,))
    process.start()
    try:
        priority = os.getpriority(os.PRIO_PROCESS, process.pid)
    finally:
        process.join()
    assert priority == min(19, os.nice(0) + analyst.WORKER_NICENESS)


def test_a_slice_of_a_stored_table_travels_as_its_own_rows(db):
    """A slice of a table sent to the worker carries its rows, not its columns' whole buffers (as pickling does),
    and reads back equal."""
    from app.store import traces as trace_store
    from app.store.writes import store_traces

    store_traces(db, [generate_swarm(10, 2_000, seed=3)])
    _, events, _ = trace_store.read_trace_tables(db, [db.scalar("SELECT trace_id FROM traces")])
    part = events.slice(100, 200)
    sent = analyst._ipc(part)
    assert len(sent) < len(analyst._ipc(events)) / 4
    analyst._receive_table("slice", "events", sent)
    assert analyst._received.pop("slice")["events"] == [part]


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


def test_the_worker_ends_with_a_server_killed_outright(tmp_path):
    script = tmp_path / "server.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from app.store import analyst\n"
        "from app.domain.generate import generate_swarm\n"
        "if __name__ == '__main__':\n"
        "    analyst.analyse_traces([generate_swarm(3, 12, seed=1)])\n"
        "    print(*analyst._worker()._processes, flush=True)\n"
        "    time.sleep(60)\n")
    server = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker = int(server.stdout.readline())
    server.kill()
    server.wait()
    deadline = time.monotonic() + 10 * analyst.PARENT_CHECK_S + 5
    while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{worker}").exists() or "zombie" in Path(f"/proc/{worker}/status").read_text()


def odd_trace() -> dict:
    """Keys in an order of their own, properties beside the columns, a time a double cannot hold exactly."""
    trace = make_trace("odd-keys")
    first = trace["events"][0]
    trace["events"][0] = {"agent": first["agent"], "note": {"nested": [1, 2]}, **first, "t": 2**60}
    for e in trace["events"][1:]:
        e["t"] += 2**60
    return trace


def test_stored_traces_travel_as_tables_and_are_analysed_by_the_worker_from_their_columns(db, monkeypatch):
    """The background re-analysis sends stored traces as Arrow tables (in slices), the worker analyses their
    columns as it would the traces read_trace rebuilds: no process builds an event dict."""
    from app.store import traces as trace_store
    from app.store.writes import store_traces

    monkeypatch.setattr(analyst, "PIECE_EVENTS", 7)
    sent = traces() + [odd_trace()]
    store_traces(db, sent)
    ids = [trace["trace_id"] for trace in sent]
    tables = trace_store.read_trace_tables(db, ids)
    assert analyst.analyse_tables(*tables) == expected([trace_store.read_trace(db, i) for i in ids])
    monkeypatch.setattr(analyst, "_worker", lambda: (_ for _ in ()).throw(OSError("no processes here")))
    assert analyst.analyse_tables(*tables) == expected(sent)


def test_pieces_travel_as_json_text_unless_it_might_read_back_otherwise():
    sent = traces()  # make_trace's has a null
    assert isinstance(analyst._packed(sent), bytes)
    assert analyst._unpacked(analyst._packed(sent)) == sent
    for odd in (2**70, float("nan"), float("inf"), "\ud800"):
        trace = make_trace("odd-value")
        trace["events"][0]["note"] = odd
        assert analyst._packed([trace])[0] is trace  # pickled as it is
        assert analyst.analyse_traces([trace]) == expected([trace])


def test_a_waiting_server_analyses_the_pieces_the_worker_has_not_begun(monkeypatch):
    monkeypatch.setattr(analyst, "SHARE_EVENTS", 60)  # a piece per trace; the traces of 300 events are larger
    sent = traces() * 3
    for k, trace in enumerate(sent):
        sent[k] = trace | {"trace_id": f"{trace['trace_id']}-{k}"}
    analyst._worker().submit(time.sleep, 2)  # the worker is busy
    here = []
    monkeypatch.setattr(analyst, "_here",
                        lambda batch: here.extend(batch) or {t["trace_id"]: analyse(t) for t in batch})
    assert analyst.start(sent)() == expected(sent)
    assert 0 < len(here) < len(sent)  # the last pieces here, the first ones (queued already) by the worker
    assert all(len(t["events"]) + len(t["edges"]) <= analyst.SHARE_EVENTS for t in here)  # larger ones: the worker's


def awkward_traces() -> list[dict]:
    """Stored traces whose columns need care: ids given twice (the last one counts), edges to no event, times out
    of order, tied, integer, past what a double holds, or not finite, optional fields missing, untrusted sources,
    token counts of every kind, and a trace with no event at all."""
    rng = random.Random(4)
    out = []
    for seed in range(12):
        trace = generate_swarm(*rng.choice([(3, 12), (6, 37), (12, 90)]), seed=seed)
        trace["trace_id"] = f"awkward-{seed}"
        events, edges = trace["events"], trace["edges"]
        for e in events:
            roll = rng.random()
            if roll < 0.1:
                e["trusted"] = False
            elif roll < 0.15:
                e["t"] = rng.choice([int(e["t"]), events[0]["t"], e["t"] - 5, 2**60, float("inf")])
            elif roll < 0.2:
                for key in rng.sample(["tokens", "tokens_in", "tokens_out", "to", "role", "tool", "trusted"], 3):
                    e.pop(key, None)
            elif roll < 0.3:
                e[rng.choice(["tokens", "tokens_in", "tokens_out"])] = rng.choice([None, "12", True, 0, 3, 2.5, 2**70])
            elif roll < 0.33:
                e["id"] = events[0]["id"]
        if rng.random() < 0.5:
            rng.shuffle(events)
        edges += [{"src": "missing", "dst": events[-1]["id"], "type": "causal"},
                  {"src": events[-1]["id"], "dst": events[0]["id"], "type": "message"},
                  {"src": events[1]["id"], "dst": events[1]["id"], "type": "return"}]
        out.append(trace)
    return out + [{**out[0], "trace_id": "no-events", "events": [], "edges": []}]


def test_the_columns_of_stored_traces_give_what_their_rebuilt_events_give(db):
    """graphs_from_tables builds no event dict: its graphs and analyses equal those of read_trace's dicts."""
    from app.domain.metrics import analyse_graph
    from app.store import traces as trace_store
    from app.store.writes import store_traces

    sent = awkward_traces() + [odd_trace()]
    store_traces(db, sent)
    read = {trace["trace_id"]: trace_store.read_trace(db, trace["trace_id"]) for trace in sent}
    for trace, g in trace_store.graphs_from_tables(*trace_store.read_trace_tables(db, list(read))):
        whole = read[trace["trace_id"]]
        reference = analyse_graph(whole)
        for name in ("index", "ids", "t", "types", "agents", "order", "rank", "path_src", "path_dst", "kinds", "src",
                     "dst", "ignored", "spawner", "spawn_t", "despawn_t", "edge_src", "edge_dst", "edge_types",
                     "tokens", "roles"):
            assert repr(getattr(g, name)) == repr(getattr(reference, name)), (trace["trace_id"], name)
        assert json.dumps(analyse(trace, g)) == json.dumps(analyse(whole)), trace["trace_id"]
