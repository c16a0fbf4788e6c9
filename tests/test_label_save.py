"""A label save in few statements (issue 30: on a lake each pays catalog round trips): the event and the current
version read in one, the version inserted with its id checked by the insert itself, nothing read back. What a save
answers is what a read of the stored version gives; a taken id moves to the next candidate; a known reviewer is
not added again. Runs on a DuckDB file, and on a lake with --store=lake."""

import pytest
from conftest import make_trace, post_json

from app.services import labels
from app.store import keys
from app.store import labels as label_store
from app.store.sql import traced_statements


@pytest.fixture
def trace(client):
    assert post_json(client, make_trace("lab")).status_code == 201
    return "lab"


def save(client, **fields):
    body = {"trace_id": "lab", "event_id": "e2", "reviewer": "ada"} | fields
    answer = client.post("/api/annotations", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def stored(client, version: int, event_id: str = "e2", reviewer: str = "ada") -> dict:
    items = client.get("/api/annotations", params={"trace_id": "lab", "history": "true"}).json()["items"]
    return next(i for i in items if (i["event_id"], i["reviewer"], i["version"]) == (event_id, reviewer, version))


@pytest.mark.parametrize("fields", [
    {"credit": 1},  # an integer credit is stored (and answered) as the column's DOUBLE
    {"credit": 0, "note": "zero says something"},
    {"tags": ["a", "b"], "safety": True, "reward_family": "R7", "credit_unit": "orchestrator", "subdecision": "O1"},
    {"note": "", "tags": [], "safety": False},  # says nothing
    {"paper": "smith2024", "annotator_kind": "model", "client_request_id": "req-1"},
])
def test_a_save_answers_the_version_as_stored(client, trace, fields):
    first = save(client, **fields)
    assert first == stored(client, 1)
    again = save(client, credit=-0.5)  # omitted fields keep their stored values
    assert again == stored(client, 2) and again["credit"] == -0.5


def test_a_cleared_and_an_undone_label_answer_as_stored(client, trace):
    save(client, credit=0.5, tags=["x"])
    cleared = client.post("/api/annotations/clear", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada"})
    assert cleared.json() == stored(client, 2) and cleared.json()["empty"]
    undone = client.post("/api/annotations/undo", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada"})
    assert undone.json() == stored(client, 3) and not undone.json()["empty"]


def test_what_says_something_agrees_with_the_stored_rule(client, db, trace):
    for n, fields in enumerate([{}, {"credit": 0}, {"safety": True}, {"tags": ["t"]}, {"note": "n"},
                                {"counterfactual": "no"}, {"tags": [], "note": ""}]):
        save(client, reviewer=f"r{n}", **fields)
    rows = db.fetchall(f"SELECT {', '.join(label_store.ROW_FIELDS)}, NOT {label_store.NON_EMPTY} AS empty "
                       "FROM annotations")
    assert len(rows) == 7
    assert [not label_store.says_something(row) for row in rows] == [row["empty"] for row in rows]


def test_a_taken_id_moves_the_version_to_the_next_candidate(client, db, trace):
    save(client, event_id="e3")
    taken = keys.natural_id("lab", "e2", "ada", 1)
    db.write(lambda cur: cur.execute("UPDATE annotations SET annotation_id = ? WHERE event_id = 'e3'", [taken]))
    first = save(client)
    assert first["annotation_id"] == keys.natural_id("lab", "e2", "ada", 1, 1) == stored(client, 1)["annotation_id"]
    assert db.scalar("SELECT count(*) FROM annotations WHERE annotation_id = ?", [taken]) == 1


STATEMENTS = ("SELECT e.type", "INSERT INTO annotations", "INSERT INTO reviewers")
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "USE", "SELECT * FROM postgres_query")  # transactions, a lake's locks


def statements(run: list) -> list[str]:
    return [next((kind for kind in STATEMENTS if sql.startswith(kind)), sql) for sql, *_ in run
            if not sql.startswith(CONTROL)]


def test_a_save_reads_once_and_adds_a_known_reviewer_once(app, db, trace):
    with traced_statements() as first:
        labels.save_label(db, {"trace_id": "lab", "event_id": "e2", "reviewer": "ada", "credit": 0.5})
    with traced_statements() as second:
        labels.save_label(db, {"trace_id": "lab", "event_id": "e2", "reviewer": "ada", "credit": 0.25})
    assert statements(first) == list(STATEMENTS) and statements(second) == list(STATEMENTS[:2])
    assert db.fetchall("SELECT name FROM reviewers") == [{"name": "ada"}]


def test_a_save_on_a_missing_trace_or_event_names_which(client, trace):
    assert client.post("/api/annotations", json={"trace_id": "nope", "event_id": "e2", "reviewer": "ada"}
                       ).json()["error"] == "no trace with id 'nope'"
    assert client.post("/api/annotations", json={"trace_id": "lab", "event_id": "nope", "reviewer": "ada"}
                       ).json()["error"] == "trace 'lab' has no event 'nope'"
