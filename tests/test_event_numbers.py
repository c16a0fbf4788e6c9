"""Each stored event keeps the numbers the analysis reads as columns (migration 0028): `tokens`, its token count when
an integer of 64 bits, and `numbers`, its `extra` when that count (a float, an integer beyond 64 bits) or its `t` (an
integer beyond a double's) is not held exactly otherwise; what decoding `extra` gives, however the events were
written: by an ingest, a replace, a live OTLP trace's builds, or by an older version and filled in by the migration."""

import json

from test_analyst import awkward_traces, odd_trace
from test_framework_fixtures import batches
from test_store_schema import unapplied, written_before

from app.domain.metrics import event_tokens
from app.store import traces as trace_store
from app.store.writes import store_traces

PROTOBUF = {"Content-Type": "application/x-protobuf"}
STORED = "SELECT trace_id, seq, extra, t_is_int, tokens, numbers FROM events ORDER BY trace_id, seq"
COLUMNS_0028 = ["tokens", "numbers"]
# Token properties the count must take or leave as tokens_of does: not numbers, floats, -0.0, sums past 64 bits
ODD_TOKENS = [{}, {"tokens": 7}, {"tokens": "12"}, {"tokens": True, "tokens_out": 4}, {"tokens": None, "tokens_in": 3},
              {"tokens": [1], "tokens_in": {"n": 1}, "tokens_out": False}, {"tokens": 2.5}, {"tokens_out": -0.0},
              {"tokens": -0.0}, {"tokens_in": 1, "tokens_out": 2.5}, {"tokens_in": 2**63 - 1, "tokens_out": 1},
              {"tokens_in": -2**63}, {"tokens": 2**64}, {"tokens": 2**70, "tokens_in": 1}, {"tokens_in": -5},
              {"tokens_in": 2**62, "tokens_out": 2**62}, {"tokens_in": "1", "tokens_out": 2}]


def odd_tokens() -> dict:
    """A trace whose events carry every kind of token property, one of them at a time a double cannot hold."""
    events = [{"id": f"e{i}", "t": i, "type": "message", "agent": "x", **extra} for i, extra in enumerate(ODD_TOKENS)]
    events[-1]["t"] = 2**60 + 1
    events.append({"id": "late", "t": 2**62 + 3, "type": "message", "agent": "x"})
    return {"trace_id": "odd-tokens", "task_id": "task", "events": events, "edges": [], "rewards": {},
            "costs": {"tokens": 0, "wall_clock_s": 0}}


def sent() -> list[dict]:
    return awkward_traces() + [odd_trace(), odd_tokens()]


def count(extra: dict):
    """The token count of an event's other properties: `tokens` when a number, else the sum of the parts that are."""
    def number(value) -> bool:
        return type(value) in (int, float) and value == value

    if number(extra.get("tokens")):
        return extra["tokens"]
    parts = [extra[key] for key in ("tokens_in", "tokens_out") if number(extra.get(key))]
    return sum(parts) if parts else None


def expected_columns(extra: str | None) -> tuple:
    """(tokens, numbers) as decoding `extra` gives them."""
    decoded = json.loads(extra) if extra is not None else {}
    n = count(decoded)
    whole = n if type(n) is int and -2**63 <= n < 2**63 else None
    return whole, extra if (n is not None and whole is None) or "t" in decoded else None


def assert_as_decoded(db) -> None:
    rows = db.fetchall(STORED)
    assert rows
    for row in rows:
        assert (row["tokens"], row["numbers"]) == expected_columns(row["extra"]), row


def test_an_ingest_stores_what_decoding_extra_gives(db):
    store_traces(db, sent())
    assert_as_decoded(db)
    kept = db.fetchall("SELECT tokens, numbers IS NOT NULL AS kept FROM events WHERE trace_id = 'odd-tokens' "
                       "ORDER BY seq")
    assert [(row["tokens"], row["kept"]) for row in kept] == [
        (None, False), (7, False), (None, False), (4, False), (3, False), (None, False), (None, True), (None, True),
        (None, True), (None, True), (None, True), (-2**63, False), (None, True), (None, True), (-5, False),
        (None, True), (2, True), (None, True)]


def test_the_analysis_reads_each_events_token_count_and_time_exactly(db):
    """The columns read_trace_tables gives the analysis: every count and time of the events as sent, ints as ints."""
    traces = sent()
    store_traces(db, traces)
    for trace in traces:
        heads, events, edges = trace_store.read_trace_tables(db, [trace["trace_id"]])
        columns = trace_store._event_columns(events)
        assert list(map(repr, columns["tokens"])) == [repr(event_tokens(e)) for e in trace["events"]]
        assert list(map(repr, columns["t"])) == [repr(e["t"]) for e in trace["events"]]


def test_a_replaced_trace_stores_the_numbers_of_its_new_events(db):
    first = odd_tokens()
    store_traces(db, [first])
    again = odd_tokens()
    for event, extra in zip(again["events"], reversed(ODD_TOKENS)):
        for key in ("tokens", "tokens_in", "tokens_out"):
            event.pop(key, None)
        event.update(extra)
    store_traces(db, [again], "replace")
    assert_as_decoded(db)
    assert db.scalar("SELECT count(*) FROM events") == len(again["events"])


def test_a_live_otlp_trace_built_between_batches_stores_its_numbers(client, app, db):
    for body in batches("maf_handoff"):
        assert client.post("/v1/traces", content=body, headers=PROTOBUF).status_code == 200
        app.state.live.flush()
    assert_as_decoded(db)
    assert db.scalar("SELECT count(*) FROM events WHERE tokens IS NOT NULL")


def test_the_migration_fills_the_numbers_of_events_stored_before_it(db):
    """A store as an older version left it (the columns dropped, 0028 not applied) gets what a fresh write gives."""
    store_traces(db, sent())
    written = db.fetchall(STORED)
    assert unapplied(db, "0028", "events", COLUMNS_0028) == ["0028_event_numbers.sql"]
    assert db.fetchall(STORED) == written
    assert_as_decoded(db)


def test_a_file_made_before_0028_gets_the_numbers_a_write_gives_now(tmp_path, monkeypatch):
    """The same traces written by the app as it was before 0028 (no such columns), then migrated, and written now."""
    traces = sent()
    old, new = written_before(tmp_path, "0028", traces, monkeypatch)
    try:
        assert old.fetchall(STORED) == new.fetchall(STORED)
        assert_as_decoded(new)
    finally:
        old.close()
        new.close()
