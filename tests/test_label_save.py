"""A label save in few statements (issue 30: on a lake each pays catalog round trips): the event and the current
version read in one, the version inserted with its id checked by the insert itself, nothing read back; saves made
at the same time written together, in one transaction of those statements. What a save answers is what a read of
the stored version gives; a taken id moves to the next candidate; a known reviewer is not added again; each save
of a group gets its own answer. Runs on a DuckDB file, and on a lake with --store=lake."""

import threading

import duckdb
import pytest
from conftest import make_trace, post_json

from app.services import labels
from app.store import keys
from app.store import labels as label_store
from app.store import traces as trace_store
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


STATEMENTS = ("WITH k AS", "INSERT INTO annotations", "INSERT INTO reviewers")
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


def request(event_id="e2", reviewer="ada", **fields) -> labels._Save:
    return labels._Save("lab", event_id, reviewer, fields, "human", fields.pop("base_version", None),
                        fields.pop("client_request_id", None), None)


def test_saves_written_together_answer_each_as_alone(client, db, trace):
    group = [request(credit=0.5, client_request_id="q1"), request(credit=0.25, note="two"), request(event_id="nope"),
             request(credit=1.0, base_version=1), request(credit=0.5, client_request_id="q1"),
             request(reviewer="bob", note="n"), request(base_version=2, credit=0.75)]
    with traced_statements() as run:
        outcomes = labels.save_labels(db, group)
    # One read, one insert, the two new reviewers in one statement; the missing event's refusal asks whether its
    # trace exists.
    assert statements(run) == [STATEMENTS[0], trace_store.TRACE_ROW, *STATEMENTS[1:]]
    assert outcomes[0] == (stored(client, 1), True) and outcomes[1] == (stored(client, 2), True)
    assert outcomes[2].status == 404 and "no event 'nope'" in str(outcomes[2])
    assert isinstance(outcomes[3], labels.StaleVersion) and outcomes[3].current == stored(client, 2)
    assert outcomes[4] == (stored(client, 1), False)  # a retry of the group's first save
    assert outcomes[5] == (stored(client, 1, reviewer="bob"), True)
    assert outcomes[6] == (stored(client, 3), True) and outcomes[6][0]["credit"] == 0.75
    assert stored(client, 3)["note"] == "two"  # built on the group's version 2


def test_saves_waiting_for_the_write_are_written_together(client, db, trace, monkeypatch):
    groups, save_labels = [], labels.save_labels
    monkeypatch.setattr(labels, "save_labels", lambda db, saves: groups.append(len(saves)) or save_labels(db, saves))
    monkeypatch.setattr(labels, "SAVES_TOGETHER", 10)
    answers = []

    def save_one(n: int) -> None:
        answers.append(labels.save_label(db, {"trace_id": "lab", "event_id": "e2", "reviewer": f"r{n % 3}",
                                              "credit": n / 20}))

    with db.write_lock:  # the first save waits for the write lock; the others queue behind it
        threads = [threading.Thread(target=save_one, args=(n,)) for n in range(15)]
        for thread in threads:
            thread.start()
        for _ in range(1000):  # the first is being written, the 14 others wait
            if sum(len(queue._waiting) for queue in labels._queues.values()) == 14:
                break
            threading.Event().wait(0.01)
    for thread in threads:
        thread.join()
    assert groups == [1, 10, 4]
    for reviewer in ("r0", "r1", "r2"):
        mine = sorted((label for label, _ in answers if label["reviewer"] == reviewer), key=lambda l: l["version"])
        assert [label["version"] for label in mine] == [1, 2, 3, 4, 5]
        assert mine == [stored(client, version, reviewer=reviewer) for version in range(1, 6)]


def test_a_group_that_fails_whole_is_written_save_by_save(client, db, trace, monkeypatch):
    insert_labels = label_store.insert_labels

    def failing(cur, rows):
        if len(rows) > 1:
            raise duckdb.ConversionException("a value of one save the database refuses")
        return insert_labels(cur, rows)

    monkeypatch.setattr(label_store, "insert_labels", failing)
    outcomes = labels._outcomes(db, [request(credit=0.5), request(reviewer="bob", credit=0.25)])
    assert outcomes == [(stored(client, 1), True), (stored(client, 1, reviewer="bob"), True)]
