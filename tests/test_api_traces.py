"""The traces JSON API over a real DuckDB file: ingest in every body form, errors, listing, delete."""

import gzip
import json

import pytest
from anchors import anchor
from conftest import BASE_URL, make_trace, post_json
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings


def stored_ids(client) -> list[str]:
    return [item["trace_id"] for item in client.get("/api/traces").json()["items"]]


def test_single_trace_round_trips_exactly(client):
    trace = make_trace("t1")
    trace["events"][2] = {"tool": "web.search", "id": "e3", "agent": "worker", "type": "tool_call", "t": 2,
                          "nested": {"a": [1, 2.5, None, {"b": "ü"}]}, "big": 2**70}
    response = post_json(client, trace)
    assert response.status_code == 201
    assert response.json() == {"ingested": ["t1"], "warnings": []}
    back = client.get("/api/traces/t1")
    assert back.status_code == 200
    # Same keys in the same order, ints stay ints: the serialised text is identical.
    assert json.dumps(back.json()) == json.dumps(trace)


@pytest.mark.parametrize("value", [2**63 - 1, 10**25] + [
    pytest.param(value, marks=pytest.mark.above_the_store)  # the same columns as the two above: once on a lake
    for value in (2**64 - 1, 2**64, -2**63, -2**63 - 1, -10**19, 1_700_000_000_123_456_789)])
def test_integers_at_the_64_bit_edges_stay_exact(client, value):
    trace = make_trace("ints")
    trace["events"][0]["n"] = value
    trace["events"][1]["n_text"] = str(value)
    assert post_json(client, trace).status_code == 201
    back = client.get("/api/traces/ints").json()
    assert back["events"][0]["n"] == value and type(back["events"][0]["n"]) is int
    assert json.dumps(back) == json.dumps(trace)


def test_many_traces_in_one_request_round_trip_exactly(app, client):
    """A bulk load keeps each event whole: key order, other properties (or none), and `t` as float or as an
    integer no double holds; n_agents leaves tool results out."""
    traces = []
    for i in range(40):
        trace = make_trace(f"v{i}")
        events = trace["events"]
        events[0] = {"agent": "lead", "t": 2**53 + i, "id": "e1", "type": "orchestrator_decision"}  # no double holds it
        events[1]["t"] = float(i)
        if i % 2:
            events[5] = {"note": {"i": i}, **events[5]}  # another property first
        traces.append(trace)
    traces.append(make_trace("tool-only", edges=[],  # the largest t: 64 bits, which a double rounds
                             events=[{"id": "e1", "t": 2**63 - 1, "type": "tool_result", "agent": "web.search"}]))
    assert post_json(client, traces).status_code == 201
    for trace in traces:
        assert json.dumps(client.get(f"/api/traces/{trace['trace_id']}").json()) == json.dumps(trace)
    counts = app.state.db.execute("SELECT trace_id, n_events, n_edges, n_agents, t_max FROM traces "
                                  "WHERE trace_id IN ('v3', 'tool-only') ORDER BY trace_id").fetchall()
    assert counts == [("tool-only", 1, 0, 0, float(2**63 - 1)), ("v3", 6, 4, 2, float(2**53 + 3))]


@pytest.mark.above_the_store
def test_array_and_json_lines_bodies(client):
    array = [make_trace("a1"), make_trace("a2")]
    assert post_json(client, array).json()["ingested"] == ["a1", "a2"]
    lines = "\n".join(json.dumps(make_trace(i)) for i in ("l1", "l2", "l3")) + "\n\n"
    response = client.post("/api/traces", content=lines, headers={"Content-Type": "application/x-ndjson"})
    assert response.status_code == 201
    assert response.json()["ingested"] == ["l1", "l2", "l3"]


@pytest.mark.above_the_store
def test_json_lines_keep_integers_exact_take_crlf_and_name_a_malformed_line(client):
    trace = make_trace("big")
    trace["events"][0]["n"] = 10**25  # beyond 64 bits: kept as sent
    lines = "\r\n".join(json.dumps(t) for t in (make_trace("c1"), trace)) + "\r\n"
    response = client.post("/api/traces", content=lines, headers={"Content-Type": "application/x-ndjson"})
    assert response.json()["ingested"] == ["c1", "big"]
    assert json.dumps(client.get("/api/traces/big").json()) == json.dumps(trace)
    bad = "\n".join([json.dumps(make_trace("b1")), "", json.dumps(make_trace("b2"))[:-1]])
    response = client.post("/api/traces", content=bad, headers={"Content-Type": "application/x-ndjson"})
    assert response.status_code == 400 and response.json()["line"] == 3, response.text
    assert "line 3" in response.json()["error"]


@pytest.mark.above_the_store
def test_multipart_json_jsonl_and_gzip_files(client):
    files = [
        ("file", ("one.json", json.dumps(make_trace("m1")), "application/json")),
        ("file", ("two.jsonl", json.dumps(make_trace("m2")) + "\n" + json.dumps(make_trace("m3")), "text/plain")),
        ("file", ("three.json.gz", gzip.compress(json.dumps(make_trace("m4")).encode()), "application/gzip")),
    ]
    response = client.post("/api/traces", files=files)
    assert response.status_code == 201
    assert response.json()["ingested"] == ["m1", "m2", "m3", "m4"]


@pytest.mark.above_the_store
def test_multipart_without_file_part_is_400(client):
    response = client.post("/api/traces", data={"other": "x"}, files={"nope": ("a.json", b"{}")})
    assert response.status_code == 400
    assert "file" in response.json()["error"]


@pytest.mark.above_the_store
def test_invalid_trace_refuses_whole_request_with_every_problem(client):
    bad = make_trace("bad")
    bad["events"][3]["type"] = "spawnn"
    bad["edges"][1]["dst"] = "e99"
    bad["costs"]["tokens"] = -5
    response = post_json(client, [make_trace("good"), bad])
    assert response.status_code == 422
    errors = response.json()["errors"]
    by_path = {e["path"]: e for e in errors}
    assert {"events[3].type", "edges[1].dst", "costs.tokens"} <= set(by_path)
    assert all(e["trace"] == "bad" and e["index"] == 1 for e in errors)
    assert "spawnn" in by_path["events[3].type"]["message"]
    assert "e99" in by_path["edges[1].dst"]["message"]
    assert stored_ids(client) == []


@pytest.mark.above_the_store
def test_trace_without_readable_id_is_named_by_index(client):
    response = post_json(client, [make_trace("ok"), {"events": []}])
    assert response.status_code == 422
    assert {e["trace"] for e in response.json()["errors"]} == {1}


@pytest.mark.above_the_store
def test_same_id_twice_in_one_request_is_422(client):
    response = post_json(client, [make_trace("dup"), make_trace("dup")])
    assert response.status_code == 422
    assert "appears twice" in response.json()["errors"][0]["message"]


def test_existing_id_is_409_unless_replace(client):
    assert post_json(client, make_trace("r1")).status_code == 201
    changed = make_trace("r1", task_id="task-2")
    conflict = post_json(client, [make_trace("new"), changed])
    assert conflict.status_code == 409
    assert conflict.json()["trace_ids"] == ["r1"]
    assert stored_ids(client) == ["r1"]  # "new" was not stored either
    assert client.get("/api/traces/r1").json()["task_id"] == "task-1"
    replaced = post_json(client, changed, replace="true")
    assert replaced.status_code == 201
    assert client.get("/api/traces/r1").json() == changed
    assert client.get("/api/traces").json()["total"] == 1


@pytest.mark.above_the_store
@pytest.mark.parametrize("body, fragment", [
    (b'{"trace_id": "x",\n  "task_id": }', "line 2, column 14"),
    (b"", "empty document"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"\x1f\x8bnot really gzip", "gzip"),
    (b'{"trace_id": "a"}\n{"trace_id": }\n', "line 2"),
    (b'{"t": NaN}', "NaN"),
])
def test_malformed_bodies_are_400_naming_the_place(client, body, fragment):
    response = client.post("/api/traces", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert fragment in response.json()["error"]


def test_body_over_limit_is_413(tmp_path):
    app = create_app(Settings(db=tmp_path / "small.duckdb", max_body_bytes=1000))
    with TestClient(app, base_url=BASE_URL) as client:
        big = [make_trace(f"b{i}") for i in range(5)]
        assert post_json(client, big).status_code == 413

        def chunks():  # no Content-Length: the limit must hold while streaming
            for _ in range(10):
                yield b" " * 500

        streamed = client.post("/api/traces", content=chunks(), headers={"Content-Type": "application/json"})
        assert streamed.status_code == 413
        bomb = gzip.compress(b" " * 100_000)
        assert client.post("/api/traces", content=bomb).status_code == 413
        assert client.get("/api/traces").json()["total"] == 0


def test_list_filters_sorts_and_pages(client):
    post_json(client, [
        make_trace("c1", system="alpha", topology="swarm"),
        make_trace("c2", system="beta", topology="swarm", costs={"tokens": 9, "wall_clock_s": 1}),
        make_trace("c3", system="alpha", topology="debate", task_id="find-needle"),
    ])
    assert client.get("/api/traces", params={"topology": "swarm"}).json()["total"] == 2
    assert [i["trace_id"] for i in client.get("/api/traces", params={"system": "alpha"}).json()["items"]] == ["c1", "c3"]
    assert [i["trace_id"] for i in client.get("/api/traces", params={"q": "NEEDLE"}).json()["items"]] == ["c3"]
    by_tokens = client.get("/api/traces", params={"sort": "tokens"}).json()["items"]
    assert by_tokens[0]["trace_id"] == "c2"
    desc = client.get("/api/traces", params={"sort": "-trace_id", "limit": 2, "offset": 1}).json()
    assert desc["total"] == 3 and [i["trace_id"] for i in desc["items"]] == ["c2", "c1"]
    item = desc["items"][0]
    assert item["events"] == 6 and item["agents"] == 2 and item["rewards"] == {"team": 1, "tool": 0.25}
    bad_sort = client.get("/api/traces", params={"sort": "drop table"})
    assert bad_sort.status_code == 422
    assert client.get("/api/traces", params={"offset": 2**53 - 1}).json() == {"items": [], "total": 3}
    too_far = client.get("/api/traces", params={"offset": 10**21})
    assert too_far.status_code == 422 and "offset" in too_far.text


def test_unknown_trace_is_404_and_delete_removes(client):
    assert client.get("/api/traces/nope").status_code == 404
    assert client.delete("/api/traces/nope").status_code == 404
    post_json(client, make_trace("d1"))
    assert client.delete("/api/traces/d1").json() == {"deleted": "d1", "labels_kept": 0}
    assert client.get("/api/traces/d1").status_code == 404
    assert post_json(client, make_trace("d1")).status_code == 201  # no leftovers block a re-ingest
    assert len(client.get("/api/traces/d1").json()["events"]) == 6


@pytest.mark.above_the_store
@pytest.mark.parametrize("method, path, allowed", [
    ("PUT", "/api/traces", "GET, POST"),  # two routes share the path: both are named
    ("PATCH", "/api/traces/x", "DELETE, GET"),
    ("PUT", "/api/annotations", "GET, POST"),
])
def test_a_wrong_method_is_405_naming_every_method_the_path_takes(client, method, path, allowed):
    response = client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == allowed
    assert response.json() == {"error": "Method Not Allowed"}


def test_traces_survive_a_restart_and_migrations_run_once(settings):
    with TestClient(create_app(settings), base_url=BASE_URL) as client:  # leaving the block closes the database
        post_json(client, make_trace("keep"))
    app = create_app(settings)
    with TestClient(app, base_url=BASE_URL) as client:
        assert client.get("/api/traces/keep").json() == make_trace("keep")
        versions = app.state.db.fetchall("SELECT version, name FROM schema_migrations ORDER BY version")
        assert versions[0] == {"version": 1, "name": "0001_initial.sql"}
        assert app.state.db.migrate(settings.migrations_dir) == []


def test_published_example_validates_and_round_trips(client):
    example = json.loads(anchor("example_trace.json").read_text())
    assert post_json(client, example).status_code == 201
    assert json.dumps(client.get(f"/api/traces/{example['trace_id']}").json()) == json.dumps(example)


@pytest.mark.above_the_store
def test_invalid_utf8_inside_a_string_is_refused_not_replaced(client):
    body = json.dumps(make_trace("u8")).replace('"task-1"', '"task-\\u00e9"').encode().replace(b"\\u00e9", b"\xe9")
    response = client.post("/api/traces", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "not UTF-8" in response.json()["error"]
    assert client.get("/api/traces/u8").status_code == 404


def test_replacing_a_stored_trace_is_an_admin_s_through_the_api_and_the_upload_form(tmp_path):
    """A reviewer uploads new traces; replacing a stored one (replace=true) is 403 for them on both paths."""
    from conftest import csrf_token

    from app.services import accounts
    app = create_app(Settings(db=tmp_path / "lab.duckdb", auth="required"))
    tokens = {}
    for name, role in (("rita", "reviewer"), ("ada", "admin")):
        accounts.add_user(app.state.db, name, role, "correct horse battery")
        tokens[name] = {"Authorization": f"Bearer {accounts.create_token(app.state.db, name)}"}
    changed = make_trace(task_id="changed")
    with TestClient(app, base_url=BASE_URL) as client:
        json_ = {"Content-Type": "application/json"}
        assert client.post("/api/traces", content=json.dumps(make_trace()), headers=tokens["rita"] | json_
                           ).status_code == 201
        refused = client.post("/api/traces?replace=true", content=json.dumps(changed), headers=tokens["rita"] | json_)
        assert refused.status_code == 403
        assert refused.json()["error"].startswith("replacing a stored trace needs the admin role ('rita' is a reviewer)")
        form = {"HX-Request": "true", "X-CSRF-Token": csrf_token(client)}
        upload = client.post("/upload?replace=true", files={"file": ("t.json", json.dumps(changed))},
                             headers=tokens["rita"] | form)
        assert upload.status_code == 403 and "replacing a stored trace needs the admin role" in upload.text
        assert client.get("/api/traces/t-small", headers=tokens["rita"]).json()["task_id"] == "task-1"
        replaced = client.post("/api/traces?replace=true", content=json.dumps(changed), headers=tokens["ada"] | json_)
        assert replaced.status_code == 201
        assert client.get("/api/traces/t-small", headers=tokens["rita"]).json()["task_id"] == "changed"
    app.state.db.close()
