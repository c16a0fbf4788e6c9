"""A request's traces hold the store's one writer (its write lock) only while they are inserted: their rows are made
and their analyses waited for before the write, so other users' writes, a reviewer's label save, go on meanwhile
(issue 30: 1,000 rollouts waited about a second for the analysis inside the write, and every save with them)."""

import threading

from conftest import make_trace, post_json

from app.store import writes

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
