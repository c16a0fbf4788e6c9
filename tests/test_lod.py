"""Level of detail (issue 15): a large trace opens as bins counted by SQL over the stored events, and each zoom
asks for its window, drawn event by event once it holds few enough."""

import json
import logging
from pathlib import Path

import pytest
from conftest import form_headers, post_json

from app.domain.figure import lane_agents, spawn_tree
from app.domain.generate import generate_swarm
from app.domain.metrics import agent_spans
from app.ingest.documents import Upload
from app.ingest.pipeline import ingest
from app.services import graph
from app.store import lod as lod_store
from app.store.sql import traced_statements

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "sample_traces").glob("*.json"))


def lod_trace(trace_id: str = "lod") -> dict:
    """Ten events at t = 0..9: a lead spawns a worker; the worker calls a tool whose answer sits on its lane."""
    events = [
        {"id": "e0", "t": 0, "type": "orchestrator_decision", "agent": "lead", "role": "lead"},
        {"id": "e1", "t": 1, "type": "spawn", "agent": "lead", "to": "w1", "role": "lead"},
        {"id": "e2", "t": 2, "type": "message", "agent": "w1", "role": "worker"},
        {"id": "e3", "t": 3, "type": "tool_call", "agent": "w1", "tool": "search"},
        {"id": "e4", "t": 4, "type": "tool_result", "agent": "search", "tool": "search"},
        {"id": "e5", "t": 5, "type": "message", "agent": "w1"},
        {"id": "e6", "t": 6, "type": "message", "agent": "w1"},
        {"id": "e7", "t": 7, "type": "return", "agent": "w1", "to": "lead"},
        {"id": "e8", "t": 8, "type": "aggregate", "agent": "lead"},
        {"id": "e9", "t": 9, "type": "tool_result", "agent": "clock", "tool": "clock"},
    ]
    edges = [{"src": "e1", "dst": "e2", "type": "spawn"}, {"src": "e3", "dst": "e4", "type": "tool_dependency"},
             {"src": "e7", "dst": "e8", "type": "return"}, {"src": "e2", "dst": "e5", "type": "temporal"}]
    return {"trace_id": trace_id, "task_id": "lod", "events": events, "edges": edges, "rewards": {"team": 1},
            "costs": {"tokens": 1, "wall_clock_s": 9}}


def stored(client, db, trace: dict) -> str:
    assert post_json(client, trace).status_code == 201
    graph.ensure_lod(db, trace["trace_id"])
    return trace["trace_id"]


def test_the_skeleton_lays_out_lanes_and_lifetimes_as_all_events_do(client, db):
    traces = [json.loads(path.read_text()) for path in SAMPLES] + [generate_swarm(60, 3000, seed=s) for s in (1, 2)]
    traces.append(lod_trace())
    for trace in traces:
        trace_id = stored(client, db, trace)
        skeleton = lod_store.skeleton_events(db, trace_id)
        assert len(skeleton) <= len(trace["events"])
        assert spawn_tree(skeleton) == spawn_tree(trace["events"]), trace_id
        assert agent_spans(skeleton) == agent_spans(trace["events"]), trace_id
        # EVENT_OWNERS is lane_agents' SQL twin: the same lane for every event
        owners = dict(db.execute("SELECT seq, owner FROM lod_events WHERE trace_id = ?", [trace_id]).fetchall())
        assert [owners[i] for i in range(len(trace["events"]))] == lane_agents(trace["events"], trace["edges"])


def test_bins_count_the_events_of_each_row_and_time_bucket(client, db):
    trace_id = stored(client, db, lod_trace())
    rows = {"lead": 0, "w1": 1, "search": 2, "clock": 3}
    bins = lod_store.event_bins(db, trace_id, rows, 0, 9, 3)  # buckets [0, 3), [3, 6), [6, 9]
    counts = {(row, bucket): n for row, bucket, n, *_ in bins}
    # the tool's answer (e4, t=4) is drawn on w1's lane: it answers w1's call; clock's answer has no caller
    assert counts == {(0, 0): 2, (1, 0): 1, (1, 1): 3, (1, 2): 2, (0, 2): 1, (3, 2): 1}
    assert sum(counts.values()) == 10
    first = next(b for b in bins if b[:2] == (1, 1))
    assert (first[3], first[4], first[5]) == (3, 5, "tool_call")  # first and last t; of equals, the first type
    # a window counts only its events, and per-event values give each bin's mean
    bins = lod_store.event_bins(db, trace_id, rows, 2, 6, 1, values={2: 1.0, 3: 0.0, 6: -0.5})
    assert {(row, n, value) for row, _, n, _, _, _, value in bins} == {(1, 5, 0.5 / 3)}


def test_edge_bundles_join_edges_between_the_same_rows_and_bucket(client, db):
    trace_id = stored(client, db, lod_trace())
    bundles = lod_store.edge_bundles(db, trace_id, {"lead": 0, "w1": 1, "search": 1, "clock": 1}, 0, 9, 1, 10)
    assert sorted((kind, src, dst, n) for kind, src, dst, n, _, _ in bundles) == [
        ("return", 1, 0, 1), ("spawn", 0, 1, 1), ("temporal", 1, 1, 1), ("tool_dependency", 1, 1, 1)]


def test_a_large_trace_opens_as_bins_no_more_than_the_plot_has_room_for(client):
    trace = generate_swarm(300, 12000, seed=4)
    assert post_json(client, trace).status_code == 201
    payload = client.get(f"/api/traces/{trace['trace_id']}/figure", params={"width": 800, "height": 400}).json()
    assert payload["mode"] == "bins" and payload["n_events"] == payload["count"] == 12000
    assert "event_ids" not in payload and "positions" not in payload
    marks = sum(len(t["x"]) for t in payload["traces"] if t["meta"]["kind"] == "bins")
    assert 0 < marks <= (800 // graph.BIN_PX) * len(payload["lanes"])
    assert sum(count for t in payload["traces"] if t["meta"]["kind"] == "bins" for count, *_ in t["customdata"]) == 12000
    # every lane on a tall, wide plot: still no more than MAX_MARKS bins, all events counted, and drawn as SVG
    payload = client.get(f"/api/traces/{trace['trace_id']}/figure",
                         params={"width": 2400, "height": 1800, "group": "agent"}).json()
    bins = [t for t in payload["traces"] if t["meta"]["kind"] == "bins"]
    assert len(payload["lanes"]) == 300 and 0 < sum(len(t["x"]) for t in bins) <= graph.MAX_MARKS
    assert sum(count for t in bins for count, *_ in t["customdata"]) == 12000
    assert {t["type"] for t in payload["figure"]["data"] + payload["traces"]} == {"scatter"}
    # a small trace still comes whole
    small = client.get("/api/traces/lod-small/figure")
    assert small.status_code == 404
    assert post_json(client, lod_trace("lod-small")).status_code == 201
    assert client.get("/api/traces/lod-small/figure").json()["mode"] == "exact"


def test_a_narrow_window_gives_its_events_one_by_one_and_a_wide_one_bins(client):
    trace = generate_swarm(300, 12000, seed=4)
    assert post_json(client, trace).status_code == 201
    url = f"/api/traces/{trace['trace_id']}/window"
    t0, t1 = client.get(f"/api/traces/{trace['trace_id']}/figure").json()["window"]
    wide = client.get(url, params={"t0": t0, "t1": t1}).json()
    assert wide["mode"] == "bins" and wide["events"] is None and wide["count"] == 12000
    narrow = client.get(url, params={"t0": t0 + (t1 - t0) * 0.4, "t1": t0 + (t1 - t0) * 0.41}).json()
    assert narrow["mode"] == "exact" and 0 < narrow["count"] <= graph.EXACT_LIMIT
    events = narrow["events"]
    assert len(events["seq"]) == len(events["id"]) == narrow["count"]
    by_id = {e["id"]: (seq, e) for seq, e in enumerate(trace["events"])}
    for seq, event_id, x in zip(events["seq"], events["id"], events["x"]):
        assert by_id[event_id][0] == seq and by_id[event_id][1]["t"] == x
    drawn = sorted(seq for t in narrow["traces"] if t["meta"]["kind"] == "events" for seq in t["customdata"])
    assert drawn == sorted(events["seq"])
    coloured = client.get(url, params={"t0": t0, "t1": t1, "channel": "reward"}).json()
    assert any(t["name"] == "reward" for t in coloured["traces"])


def test_window_and_locate_refuse_what_they_cannot_answer(client):
    assert post_json(client, lod_trace()).status_code == 201
    url = "/api/traces/lod/window"
    assert client.get(url, params={"t0": 5, "t1": 1}).status_code == 422
    assert "t0" in client.get(url, params={"t0": "nan", "t1": 1}).json()["error"]
    assert client.get(url, params={"t0": 0, "t1": 1, "width": 5}).status_code == 422
    assert client.get("/api/traces/nope/window", params={"t0": 0, "t1": 1}).status_code == 404
    assert "no-such" in client.get(url, params={"t0": 0, "t1": 9, "channel": "no-such"}).json()["error"]
    found = client.get("/api/traces/lod/locate", params=[("event", "e4"), ("event", "e0"), ("event", "zz")]).json()
    assert found["items"] == [{"event_id": "e0", "seq": 0, "t": 0.0, "lane_owner": "lead"},
                              {"event_id": "e4", "seq": 4, "t": 4.0, "lane_owner": "w1"}]
    assert found["missing"] == ["zz"]
    assert client.get("/api/traces/nope/locate", params={"event": "e0"}).status_code == 404


def test_a_replaced_trace_is_binned_anew(client, db):
    trace = lod_trace()
    stored(client, db, trace)
    trace["events"][9]["t"] = 20
    assert post_json(client, trace, replace="true").status_code == 201
    graph.ensure_lod(db, "lod")
    assert db.scalar("SELECT count(*) FROM lod_events WHERE trace_id = 'lod'") == 10
    assert db.scalar("SELECT max(t) FROM lod_events WHERE trace_id = 'lod'") == 20
    assert client.delete("/api/traces/lod").status_code == 200
    assert db.scalar("SELECT count(*) FROM lod_events WHERE trace_id = 'lod'") == 0
    assert db.scalar("SELECT count(*) FROM lod_edges WHERE trace_id = 'lod'") == 0


def test_lanes_are_read_before_the_write_and_again_inside_it_only_for_a_trace_replaced_meanwhile(client, db,
                                                                                                 monkeypatch):
    """Reading the lanes of a large trace takes seconds at a million events: under the write lock, every save
    waited for it. They are read first, and kept in the write unless the trace changed in between."""
    kept_as_read = []
    fill = lod_store.fill_lod
    monkeypatch.setattr(lod_store, "fill_lod", lambda cur, trace_id, rows=None: (
        kept_as_read.append(rows is not None), fill(cur, trace_id, rows))[1])
    trace = lod_trace()
    stored(client, db, trace)
    assert kept_as_read == [True]
    owners = dict(db.execute("SELECT seq, owner FROM lod_events WHERE trace_id = 'lod'").fetchall())
    assert [owners[i] for i in range(10)] == lane_agents(trace["events"], trace["edges"])
    assert db.scalar("SELECT count(*) FROM lod_edges WHERE trace_id = 'lod'") == len(trace["edges"])

    replaced = lod_trace()
    replaced["events"][4]["agent"] = "other-tool"
    replaced["edges"] = replaced["edges"][:1]  # the tool's answer is on its own lane now
    read = lod_store.lod_rows

    def replaced_after_the_read(db_, trace_id):
        rows = read(db_, trace_id)
        assert post_json(client, replaced, replace="true").status_code == 201
        return rows

    assert post_json(client, trace, replace="true").status_code == 201
    db.execute("DELETE FROM lod_events WHERE trace_id = 'lod'")  # as if the ingest had not kept them yet
    db.execute("DELETE FROM lod_edges WHERE trace_id = 'lod'")
    monkeypatch.setattr(lod_store, "lod_rows", replaced_after_the_read)
    graph.ensure_lod(db, "lod")
    assert kept_as_read[-1] is False  # read again inside the write: the first read was of the old trace
    owners = dict(db.execute("SELECT seq, owner FROM lod_events WHERE trace_id = 'lod'").fetchall())
    assert [owners[i] for i in range(10)] == lane_agents(replaced["events"], replaced["edges"])
    assert db.scalar("SELECT count(*) FROM lod_edges WHERE trace_id = 'lod'") == 1


@pytest.mark.parametrize("lanes, band", [(7, 1), (1000, 8)])
def test_rows_band_lanes_only_when_they_outnumber_the_rows(lanes, band):
    from app.domain.figure import lane_rows
    labels = [f"a{i}" for i in range(lanes)]
    row_of, row_y, names = lane_rows(labels, 0, lanes - 1, 125)
    assert len(row_y) == len(names) == -(-lanes // band) and row_of[-1] == len(row_y) - 1
    assert names[0] == ("a0" if band == 1 else f"{band} lanes: a0 … a{band - 1}")


def test_a_large_trace_has_its_lanes_kept_after_the_ingest_answers(client, db):
    large, small = generate_swarm(100, graph.LOD_ABOVE + 1, seed=9), lod_trace("small")
    assert post_json(client, [large, small]).status_code == 201  # background work ends before the client returns
    assert lod_store.lod_ready(db, large["trace_id"])
    assert db.scalar("SELECT count(*) FROM lod_events WHERE trace_id = ?", [large["trace_id"]]) == graph.LOD_ABOVE + 1
    assert not lod_store.lod_ready(db, "small")  # a small trace is drawn whole: nothing to keep


def test_the_large_traces_of_an_ingest_are_told_by_it_without_a_read(db):
    """A read per stored trace cost a lake 20-250 ms each (a minute of work after a request of 1,000 rollouts), and
    one read of them all still competed with the next page's reads: the ingest knows each trace's events."""
    large, small = generate_swarm(100, graph.LOD_ABOVE + 1, seed=9), [lod_trace(f"small-{k}") for k in range(20)]
    told = ingest(db, [Upload("rollouts.json", json.dumps([large, *small]).encode())])
    assert told.events == {trace["trace_id"]: len(trace["events"]) for trace in [large, *small]}
    with traced_statements() as ran:
        graph.prepare_lod(db, {trace_id: n for trace_id, n in told.events.items() if n <= graph.LOD_ABOVE})
    assert ran == []
    graph.prepare_lod(db, told.events)
    assert lod_store.lod_ready(db, large["trace_id"]) and not lod_store.lod_ready(db, "small-0")


def test_a_large_trace_uploaded_with_the_form_has_its_lanes_kept_after_the_page_answers(client, db):
    large = generate_swarm(100, graph.LOD_ABOVE + 1, seed=4)
    answer = client.post("/upload", files={"file": ("big.json", json.dumps(large))},
                         headers=form_headers(client, "upload-result"))
    assert answer.status_code == 201
    assert lod_store.lod_ready(db, large["trace_id"])


def test_a_large_traces_first_open_reads_its_skeleton_once_for_the_page_and_the_figure(client, caplog):
    """The page's spawn tree and the figure's layout start from the same skeleton events: on a lake, a read of them
    costs tens of milliseconds of catalog round trips."""
    trace = generate_swarm(100, graph.LOD_ABOVE + 1, seed=5)
    assert post_json(client, trace).status_code == 201
    with caplog.at_level(logging.DEBUG, logger="orchestrace.sql"):
        assert client.get(f"/traces/{trace['trace_id']}").status_code == 200
        assert client.get(f"/api/traces/{trace['trace_id']}/figure").status_code == 200
    skeleton_reads = [r for r in caplog.records if r.name == "orchestrace.sql" and "WITH ev AS MATERIALIZED" in
                      r.getMessage()]
    assert len(skeleton_reads) == 1


def test_a_large_traces_figure_counts_the_whole_trace_from_its_lanes_read(client, caplog):
    """The lanes, their numbers of events and the trace's first and last times come in one read (on a lake, each
    read is a catalog transaction): the whole trace's window is counted from it, a narrower one by a read."""
    trace = generate_swarm(100, graph.LOD_ABOVE + 1, seed=5)
    assert post_json(client, trace).status_code == 201
    times = [event["t"] for event in trace["events"]]
    url = f"/api/traces/{trace['trace_id']}"

    def reads(path: str, **params) -> tuple[dict, list[str]]:
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="orchestrace.sql"):
            payload = client.get(url + path, params=params).json()
        return payload, [r.getMessage() for r in caplog.records if r.name == "orchestrace.sql"]

    figure, ran = reads("/figure")
    assert figure["count"] == len(times) and figure["window"] == [min(times), max(times)]
    counted = "SELECT count(*) FROM lod_events WHERE trace_id = ? AND t BETWEEN"  # a window's events, read
    assert not [sql for sql in ran if "min(t), max(t) FROM events" in sql or counted in sql], ran
    narrow, ran = reads("/window", t0=min(times), t1=(min(times) + max(times)) / 2)
    assert 0 < narrow["count"] < len(times) and [sql for sql in ran if counted in sql]
    whole, _ = reads("/window", t0=min(times) - 1, t1=max(times) + 1)
    assert whole["count"] == len(times)


def test_a_folded_agent_shows_its_whole_spawn_subtree_on_its_lane(client):
    from app.domain.figure import build_figure, lane_layout

    trace = json.loads((SAMPLES[0].parent / "hierarchical.json").read_text())
    order, parents, _ = spawn_tree(trace["events"])
    boss = next(a for a in order if sum(parents[b] == a for b in order) >= 2 and parents[a] is not None)
    subtree = {boss}
    for agent in order:  # spawn-tree order: parents first
        if parents.get(agent) in subtree:
            subtree.add(agent)
    owners = lane_agents(trace["events"], trace["edges"])
    whole, _, _ = lane_layout(trace["events"], owners, False, frozenset())
    lanes, lane_of, _ = lane_layout(trace["events"], owners, False, frozenset(), frozenset({boss}))
    assert len(lanes) == len(whole) - (len(subtree) - 1)
    assert {lane_of[a] for a in subtree} == {lane_of[boss]}
    folded = lanes[lane_of[boss]]
    assert folded["label"].endswith(f" +{len(subtree) - 1}") and folded["folded"] == len(subtree) - 1
    # the figure puts every event of the subtree on that lane; the API takes `collapse`
    figure = build_figure(trace, False, frozenset(), frozenset({boss}))
    ys = {y for e, y in zip(trace["events"], figure["positions"]["y"]) if e["agent"] in subtree}
    assert ys == {lane_of[boss]}
    assert post_json(client, trace).status_code == 201
    answer = client.get(f"/api/traces/{trace['trace_id']}/figure", params={"group": "agent", "collapse": boss})
    assert answer.json()["lanes"] == lanes
