"""Findings triage: GET /api/traces/{id}/findings (stable ids, source agents, marks), POST .../mark (reviewers and
admins; 422 naming the field, 404 for an unknown finding), and the page grouped by rule or by agent, where a group's
unmarked findings are marked at once and the count of those remaining falls."""

import copy
import re

import pytest
from conftest import csrf_token, lab_clients, make_trace, post_json

from app.services import triage
from app.services.cache import TraceCache
from app.store.sql import traced_statements


def broken() -> dict:
    trace = make_trace("audited")
    trace["edges"] += [{"src": "e6", "dst": "e1", "type": "causal"},  # back in time: an error
                       {"src": "e5", "dst": "e2", "type": "message"}]
    return trace


def findings(client, trace_id="audited") -> list[dict]:
    response = client.get(f"/api/traces/{trace_id}/findings")
    assert response.status_code == 200
    return response.json()["findings"]


def test_findings_carry_ids_agents_and_no_mark_until_one_is_set(client):
    assert post_json(client, broken()).status_code == 201
    found = findings(client)
    audit = client.get("/api/traces/audited/audit").json()["findings"]
    assert [(f["rule"], f["message"], f["events"]) for f in found] == [(f["rule"], f["message"], f["events"])
                                                                       for f in audit]
    assert len({f["id"] for f in found}) == len(found)
    trace = broken()
    agent_of = {e["id"]: e["agent"] for e in trace["events"]}
    for f in found:
        assert set(f) == {"id", "rule", "severity", "agent", "events", "message", "mark"}
        assert f["mark"] is None and f["agent"] == (agent_of[f["events"][0]] if f["events"] else None)
    assert client.get("/api/traces/audited/findings").json()["remaining"] == len(found)
    assert client.get("/api/traces/nope/findings").status_code == 404


def test_ids_and_marks_outlive_the_trace_being_analysed_again(client):
    assert post_json(client, broken()).status_code == 201
    before = findings(client)
    target = next(f for f in before if f["rule"] == "time_order")
    answer = client.post(f"/api/traces/audited/findings/{target['id']}/mark",
                         json={"mark": "accepted_risk", "note": "the exporter's clock", "reviewer": "ada"})
    assert answer.status_code == 201
    assert answer.json()["mark"]["mark"] == "accepted_risk" and answer.json()["mark"]["by"] == "ada"
    assert post_json(client, broken(), replace="true").status_code == 201  # stored and analysed again
    after = findings(client)
    assert [f["id"] for f in after] == [f["id"] for f in before]
    [kept] = [f for f in after if f["id"] == target["id"]]
    assert kept["mark"]["mark"] == "accepted_risk" and kept["mark"]["note"] == "the exporter's clock"
    changed = copy.deepcopy(broken())
    changed["edges"].pop()  # the message edge gone: its findings go, the others keep their ids
    assert post_json(client, changed, replace="true").status_code == 201
    assert target["id"] in {f["id"] for f in findings(client)}


def test_a_mark_is_checked_field_by_field(client):
    assert post_json(client, broken()).status_code == 201
    target = findings(client)[0]["id"]
    url = f"/api/traces/audited/findings/{target}/mark"
    bad = client.post(url, json={"mark": "ignored"})
    assert bad.status_code == 422 and bad.json()["field"] == "mark"
    assert client.post(url, json={"mark": "reviewed", "note": 7}).json()["field"] == "note"
    assert client.post("/api/traces/audited/findings/f-nope/mark", json={"mark": "reviewed"}).status_code == 404
    assert client.post(f"/api/traces/nope/findings/{target}/mark", json={"mark": "reviewed"}).status_code == 404
    assert client.post(url, content="[", headers={"Content-Type": "application/json"}).status_code == 400
    first = client.post(url, json={"mark": "reviewed"})
    second = client.post(url, json={"mark": "false_positive", "note": "on second look"})
    assert first.status_code == second.status_code == 201
    [now] = [f for f in findings(client) if f["id"] == target]
    assert now["mark"]["mark"] == "false_positive"  # the latest version is the current mark


@pytest.fixture
def lab(tmp_path):
    with lab_clients(tmp_path, {"vic": "viewer", "rita": "reviewer", "ada": "admin"}) as clients:
        yield clients


def test_reviewers_and_admins_mark_viewers_read(lab):
    assert post_json(lab["ada"], broken()).status_code == 201
    found = lab["vic"].get("/api/traces/audited/findings").json()["findings"]
    url = f"/api/traces/audited/findings/{found[0]['id']}/mark"
    assert lab["vic"].post(url, json={"mark": "reviewed"}).status_code == 403
    by_rita = lab["rita"].post(url, json={"mark": "reviewed"})
    assert by_rita.status_code == 201 and by_rita.json()["mark"]["by"] == "rita"
    by_ada = lab["ada"].post(url, json={"mark": "accepted_risk"})
    assert by_ada.status_code == 201 and by_ada.json()["mark"]["by"] == "ada"
    assert lab["rita"].post(url, json={"mark": "reviewed", "reviewer": "ada"}).status_code == 403  # not as another


def test_the_page_groups_by_rule_and_agent_and_marks_a_whole_group(client):
    trace = broken()
    next(e for e in trace["events"] if e["id"] == "e6")["agent"] = "<b>lead</b>"  # the time_order finding's source
    assert post_json(client, trace).status_code == 201
    found = findings(client)
    page = client.get("/traces/audited/findings").text
    assert f"<strong>{len(found)}</strong> of {len(found)} finding" in page
    assert "&lt;b&gt;lead&lt;/b&gt;" in page and "<b>lead</b>" not in page
    by_agent = client.get("/traces/audited/findings?by=agent").text
    assert 'aria-current="true">source agent' in by_agent.replace('\n', '')
    group = [f for f in found if f["rule"] == "time_order"] or found[:1]
    token = csrf_token(client)
    form = {"csrf_token": token, "by": "rule", "mark": "false_positive", "note": "known",
            "finding": [f["id"] for f in found]}
    answer = client.post("/traces/audited/findings/mark", data=form, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"].startswith("/traces/audited/findings?by=rule")
    assert all(f["mark"]["mark"] == "false_positive" for f in findings(client))
    page = client.get("/traces/audited/findings").text
    assert re.search(r"<strong>0</strong> of \d+ findings? remain", page) and "dismissed" in page
    refused = client.post("/traces/audited/findings/mark", data={"mark": "reviewed", "finding": group[0]["id"]})
    assert refused.status_code == 403  # no form token


def test_the_findings_of_many_traces_are_each_traces_own_read_in_as_many_statements_as_for_few(client, db):
    """`orchestrace audit --all` reads a corpus's findings a chunk of traces at a time: each trace's findings, their
    agents and marks as its own page gives them, in a few reads whatever the number of traces."""
    ids = []
    for i in range(8):
        trace = broken()
        trace["trace_id"] = f"audited-{i}"
        trace["events"][4]["agent"] = f"worker-{i}"  # each trace's findings come from agents of its own
        assert post_json(client, trace).status_code == 201
        ids.append(trace["trace_id"])
    marked = findings(client, "audited-3")[0]
    assert client.post(f"/api/traces/audited-3/findings/{marked['id']}/mark",
                       json={"mark": "false_positive", "reviewer": "ada"}).status_code == 201
    reads = []
    for some in (ids[:2], ids):
        with traced_statements() as ran:
            found = triage.findings_of(db, TraceCache(), [*some, "nope"])
        reads.append(sum(not sql.startswith("SELECT * FROM postgres_query") for sql, *_ in ran))  # a lake's looks
    assert found == {trace_id: findings(client, trace_id) for trace_id in ids}
    assert found["audited-3"][0]["mark"]["mark"] == "false_positive" and reads[1] <= reads[0]
    assert {f["agent"] for f in found["audited-5"]} & {"worker-5"}


def store_audited(client, n: int) -> list[str]:
    """n traces with findings of their own, stored in an order other than their ids'."""
    ids = []
    for i in reversed(range(n)):
        trace = broken()
        trace["trace_id"] = f"audited-{i}"
        trace["events"][4]["agent"] = f"worker-{i}"
        assert post_json(client, trace).status_code == 201
        ids.append(trace["trace_id"])
    return sorted(ids)


def test_many_traces_findings_come_a_page_at_a_time_as_each_traces_own_route_gives_them(client):
    """GET /api/findings pages every trace in id order (what `orchestrace audit --all` asks a server for), each
    trace's findings, marks and remaining count as GET /api/traces/{id}/findings gives them."""
    ids = store_audited(client, 5)
    assert post_json(client, make_trace("plain")).status_code == 201
    ids = sorted([*ids, "plain"])
    marked = findings(client, "audited-2")[0]
    assert client.post(f"/api/traces/audited-2/findings/{marked['id']}/mark",
                       json={"mark": "reviewed", "reviewer": "ada"}).status_code == 201
    pages, offset = [], 0
    while True:
        answer = client.get("/api/findings", params={"limit": 4, "offset": offset})
        assert answer.status_code == 200 and answer.json()["total"] == len(ids)
        pages.append(answer.json()["items"])
        offset += 4
        if offset >= len(ids):
            break
    assert [len(page) for page in pages] == [4, 2]
    items = [item for page in pages for item in page]
    assert [item["trace_id"] for item in items] == ids
    for item in items:
        own = client.get(f"/api/traces/{item['trace_id']}/findings").json()
        assert item == {"trace_id": item["trace_id"], **own}
    assert next(i for i in items if i["trace_id"] == "audited-2")["remaining"] == len(findings(client, "audited-2")) - 1
    assert client.get("/api/findings", params={"offset": 50}).json() == {"items": [], "total": len(ids)}
    assert [i["trace_id"] for i in client.get("/api/findings").json()["items"]] == ids  # 100 a page unless asked


def test_named_traces_findings_come_in_the_order_named_with_the_missing_ones_said(client):
    store_audited(client, 3)
    answer = client.get("/api/findings", params={"trace_id": ["audited-2", "nope", "audited-0", "audited-2"]})
    assert answer.status_code == 200
    assert [item["trace_id"] for item in answer.json()["items"]] == ["audited-2", "audited-0"]
    assert answer.json()["missing"] == ["nope"]
    assert answer.json()["items"][0]["findings"] == findings(client, "audited-2")


@pytest.mark.parametrize("params, path", [
    ({"trace_id": "audited-0", "limit": 5}, "query.limit"),
    ({"trace_id": "audited-0", "offset": 0}, "query.offset"),
    ({"trace_id": [f"t{i}" for i in range(1001)]}, "query.trace_id"),
    ({"limit": 0}, "query.limit"),
    ({"limit": 1001}, "query.limit"),
    ({"offset": -1}, "query.offset"),
])
def test_a_findings_query_that_cannot_be_answered_is_refused_naming_its_parameter(client, params, path):
    answer = client.get("/api/findings", params=params)
    assert answer.status_code == 422
    assert [e["path"] for e in answer.json()["errors"]] == [path] and answer.json()["error"]


def test_a_page_of_findings_takes_as_many_statements_for_many_traces_as_for_few(client):
    store_audited(client, 8)
    reads = []
    for limit in (2, 8):
        client.get("/api/findings", params={"limit": limit})  # analyses made on a first view are not counted
        with traced_statements() as ran:
            assert len(client.get("/api/findings", params={"limit": limit}).json()["items"]) == limit
        reads.append(sum(not sql.startswith("SELECT * FROM postgres_query") for sql, *_ in ran))
    assert reads[1] <= reads[0]


def test_viewers_read_many_traces_findings_as_they_read_one_traces(lab):
    assert post_json(lab["ada"], broken()).status_code == 201
    own = lab["vic"].get("/api/traces/audited/findings").json()
    assert lab["vic"].get("/api/findings").json()["items"] == [{"trace_id": "audited", **own}]
