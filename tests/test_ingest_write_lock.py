"""A request's traces hold the store's one writer (its write lock) only while they are inserted: their rows are made
and their analyses waited for before the write, so other users' writes, a reviewer's label save, go on meanwhile
(issue 30: 1,000 rollouts waited about a second for the analysis inside the write, and every save with them)."""

import threading

from conftest import make_trace, post_json

from app.domain.analysis import ANALYSIS_VERSION
from app.store import analysis as analysis_store
from app.store import writes
from app.store.traces import read_trace

HELD_S = 5


def test_a_label_saved_while_an_ingest_waits_for_its_analysis_is_not_held_up(client, monkeypatch):
    assert post_json(client, make_trace("lab")).status_code == 201
    waiting, release = threading.Event(), threading.Event()
    start = writes.analyst.start

    def held(traces):
        wait = start(traces)

        def later():
            waiting.set()
            release.wait(HELD_S)
            return wait()
        return later

    monkeypatch.setattr(writes.analyst, "start", held)
    answers = []
    ingest = threading.Thread(target=lambda: answers.append(post_json(client, make_trace("rollout")).status_code))
    ingest.start()
    try:
        assert waiting.wait(HELD_S), "the ingest never waited for its analysis"
        saved = client.post("/api/annotations", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada",
                                                      "note": "saved meanwhile"})
        assert saved.status_code == 201
        assert ingest.is_alive(), "the save waited for the ingest's analysis"
    finally:
        release.set()
        ingest.join()
    assert answers == [201]
    assert client.get("/api/traces/rollout").status_code == 200


def test_a_request_of_stored_and_new_traces_skipping_the_stored_stores_the_new_whole_with_their_analyses(db):
    """The rows are made for the whole request before the write learns which traces are stored already."""
    first, second, new = make_trace("first"), make_trace("second"), make_trace("new", task_id="other")
    assert writes.store_traces(db, [first, second]) == (["first", "second"], [])
    assert writes.store_traces(db, [first, new, second], existing="skip") == (["new"], ["first", "second"])
    stored = read_trace(db, "new")
    assert (stored["task_id"], stored["events"], stored["edges"]) == ("other", new["events"], new["edges"])
    assert db.scalar("SELECT count(*) FROM events") == sum(len(t["events"]) for t in (first, second, new))
    assert analysis_store.analysis_state(db, "new", ANALYSIS_VERSION)["fresh"]
