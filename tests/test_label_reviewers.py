"""Reviewers new to the store are added in one statement however many a group of label saves or an import brings
(issue 30 part 6: on a lake a statement each cost 20-85 ms, 1.5 s for a group of 50 first saves), each once."""

from conftest import make_trace, post_json

from app.services import labels
from app.store.sql import traced_statements


def test_a_group_of_saves_by_new_reviewers_adds_them_in_one_statement_each_once(client, db):
    assert post_json(client, make_trace("lab")).status_code == 201
    labels.save_labels(db, [labels._Save("lab", "e2", "ada", {"credit": 0.5}, "human", None, None, None)])
    group = [labels._Save("lab", "e2", name, {"credit": 0.5}, "human", None, None, None)
             for name in ("cy", "bob", "ada", "cy", "dee")]
    with traced_statements() as run:
        outcomes = labels.save_labels(db, group)
    assert all(created for _, created in outcomes)
    assert sum(sql.startswith("INSERT INTO reviewers") for sql, *_ in run) == 1
    assert [row["name"] for row in db.fetchall("SELECT name FROM reviewers ORDER BY name")] == ["ada", "bob", "cy",
                                                                                                 "dee"]
