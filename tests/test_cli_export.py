"""`orchestrace export`: every label export of the pages' menu from the command line, from the database file
when no server holds it, and through the running server (which applies its access rules) when one does."""

import csv
import io
import json

from conftest import make_trace, running_server

from app.cli import main
from app.ingest.documents import Upload
from app.ingest.pipeline import ingest
from app.main import create_app
from app.services import labels, queues
from app.settings import Settings


def labelled_store(path):
    """A file with a trace, a queue of its decisions and returns, two reviewers' disputed labels on item 1."""
    app = create_app(Settings(db=path))
    db = app.state.db
    ingest(db, [Upload("t.json", json.dumps(make_trace("cli-x")).encode())], "error", 10**7)
    queue = queues.create_queue(db, {"name": "q", "filter": {"event_types": ["orchestrator_decision", "return"]},
                                     "fields": ["credit", "note"], "reviewers": ["ada", "bo"], "overlap": 2}, None)
    for reviewer, credit in (("ada", 1.0), ("bo", -1.0)):
        labels.save_label(db, {"trace_id": "cli-x", "event_id": "e1", "reviewer": reviewer, "credit": credit,
                               "note": f"by {reviewer}", "queue_id": queue["id"]})
    db.close()
    return queue["id"]


def test_export_from_the_file_every_format(tmp_path, capsysbinary):
    path = tmp_path / "x.duckdb"
    queue_id = labelled_store(path)
    out = tmp_path / "labels.csv"
    assert main(["export", "--db", str(path), "--format", "csv", "-o", str(out)]) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert {(r["reviewer"], r["credit"]) for r in rows} == {("ada", "1.0"), ("bo", "-1.0")}
    capsysbinary.readouterr()
    assert main(["export", "--db", str(path), "--format", "json", "--queue", queue_id, "--final"]) == 0
    final = json.loads(capsysbinary.readouterr().out)
    assert [(r["item_id"], r["status"]) for r in final] == [(1, "disputed"), (2, "open")]
    assert final[0]["labels"] == {"ada": {"credit": 1.0, "note": "by ada"}, "bo": {"credit": -1.0, "note": "by bo"}}
    assert main(["export", "--db", str(path), "--format", "rllm", "--trace", "cli-x"]) == 0
    (episode,) = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert episode["trajectories"][0]["steps"][0]["info"]["reward_source"] == "disputed"
    assert main(["export", "--db", str(path), "--format", "rllm", "--final", "--queue", queue_id]) == 2
    assert b"final=true exports one review queue" in capsysbinary.readouterr().err


def test_export_through_the_server_holding_the_file(tmp_path, capsysbinary):
    path = tmp_path / "served.duckdb"
    queue_id = labelled_store(path)
    with running_server(path):
        assert main(["export", "--db", str(path), "--format", "csv", "--queue", queue_id, "--final"]) == 0
        answer = capsysbinary.readouterr()
        assert b"asking http://127.0.0.1" in answer.err
        rows = list(csv.DictReader(io.StringIO(answer.out.decode())))
        assert [(r["item_id"], r["status"], r["ada.credit"], r["bo.credit"]) for r in rows] == [
            ("1", "disputed", "1.0", "-1.0"), ("2", "open", "", "")]
        assert main(["export", "--db", str(path), "--trace", "nope", "--format", "rllm"]) == 2
        assert b"no trace with id 'nope'" in capsysbinary.readouterr().err
