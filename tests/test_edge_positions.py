"""Each stored edge keeps the positions of its ends among its trace's events (migration 0027): what a join of the
edges to the events gives (the last event of an id given twice, null for an id no event has), however the edges
were written: by an ingest (small traces by a dict, large ones by Arrow), a replace, a live OTLP trace's builds, or
by an older version and filled in by the migration."""

import pytest
from test_analyst import awkward_traces, odd_trace
from test_framework_fixtures import batches
from test_store_schema import unapplied, written_before

from app.store import writes
from app.store.writes import store_traces

PROTOBUF = {"Content-Type": "application/x-protobuf"}
# The positions as a join of the edges to their traces' events finds them (how reads found them before 0027)
JOINED = """
    WITH ids AS (SELECT trace_id, event_id, max(seq) AS position FROM events GROUP BY trace_id, event_id)
    SELECT d.trace_id, d.seq, s.position AS src_position, t.position AS dst_position
    FROM edges d
    LEFT JOIN ids s ON s.trace_id = d.trace_id AND s.event_id = d.src
    LEFT JOIN ids t ON t.trace_id = d.trace_id AND t.event_id = d.dst
    ORDER BY d.trace_id, d.seq
"""
STORED = "SELECT trace_id, seq, src_position, dst_position FROM edges ORDER BY trace_id, seq"
POSITIONS_0027 = ["src_position", "dst_position"]


def hand_made() -> dict:
    """A trace whose positions are known by hand: `a` given twice, an edge to no event, a self loop."""
    events = [{"id": i, "t": t, "type": "message", "agent": "x"} for t, i in enumerate(["a", "b", "a", "c"])]
    edges = [{"src": "a", "dst": "b", "type": "message"}, {"src": "b", "dst": "gone", "type": "causal"},
             {"src": "c", "dst": "c", "type": "return"}, {"src": "gone", "dst": "a", "type": "causal"}]
    return {"trace_id": "by-hand", "task_id": "task", "events": events, "edges": edges, "rewards": {},
            "costs": {"tokens": 0, "wall_clock_s": 0}}


def assert_as_joined(db) -> None:
    stored = db.fetchall(STORED)
    assert stored and stored == db.fetchall(JOINED)


@pytest.mark.parametrize("large_from", [writes.LARGE_TRACE_EVENTS, 0])
def test_an_ingest_stores_the_positions_a_join_to_the_events_gives(db, monkeypatch, large_from):
    """Both ways of finding them: a dict for small traces, Arrow for large ones (lowered here to every trace)."""
    monkeypatch.setattr(writes, "LARGE_TRACE_EVENTS", large_from)
    store_traces(db, awkward_traces() + [odd_trace(), hand_made()])
    assert_as_joined(db)
    assert [(row["src_position"], row["dst_position"]) for row in db.fetchall(
        "SELECT src_position, dst_position FROM edges WHERE trace_id = 'by-hand' ORDER BY seq")] == [
        (2, 1), (1, None), (3, 3), (None, 2)]


def test_a_replaced_trace_stores_the_positions_of_its_new_events(db):
    sent = awkward_traces()[:3]
    store_traces(db, sent)
    for trace in sent:
        trace["events"].reverse()
    store_traces(db, sent, "replace")
    assert_as_joined(db)
    assert db.scalar("SELECT count(*) FROM edges") == sum(len(trace["edges"]) for trace in sent)


def test_a_live_otlp_trace_built_between_batches_stores_its_positions(client, app, db):
    for body in batches("maf_handoff"):
        assert client.post("/v1/traces", content=body, headers=PROTOBUF).status_code == 200
        app.state.live.flush()
    assert_as_joined(db)


def test_the_migration_fills_the_positions_of_edges_stored_before_it(db):
    """A store as an older version left it (the columns dropped, 0027 not applied) gets what a fresh write gives."""
    store_traces(db, awkward_traces() + [odd_trace(), hand_made()])
    written = db.fetchall(STORED)
    assert unapplied(db, "0027", "edges", POSITIONS_0027) == ["0027_edge_positions.sql"]
    assert db.fetchall(STORED) == written


def test_a_file_made_before_0027_gets_the_positions_a_write_gives_now(tmp_path, monkeypatch):
    """The same traces written by the app as it was before 0027 (no positions), then migrated, and written now."""
    sent = awkward_traces() + [odd_trace(), hand_made()]
    old, new = written_before(tmp_path, "0027", sent, monkeypatch)
    try:
        assert old.fetchall(STORED) == new.fetchall(STORED)
        assert_as_joined(new)
    finally:
        old.close()
        new.close()
