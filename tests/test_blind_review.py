"""Blind review holds on every path: a reviewer of a blind queue who has not saved their label on an item sees no
other reviewer's value on it, through any route the app declares. The routes are read from the app's own route
table, so a route added later is crawled without editing this test."""

import typing
from urllib.parse import quote, urlencode

import pytest
from conftest import BASE_URL, make_trace, post_json
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from users_file import copy_with_users

from app.main import create_app
from app.services import accounts
from app.settings import Settings

pytestmark = pytest.mark.heavy

PASSWORD = "correct horse battery staple"
# What the other reviewer and the admin wrote on the queue's items: none of it may reach the blind reviewer.
SECRET_NOTE, SECRET_TAG, SECRET_CREDIT = "SECRET-bob-note", "SECRET-bob-tag", -0.4321
SECRET_ADJUDICATION, SECRET_FINAL = "SECRET-adjudication-why", 0.8765
SECRETS = (SECRET_NOTE, SECRET_TAG, repr(SECRET_CREDIT), str(SECRET_CREDIT), SECRET_ADJUDICATION, repr(SECRET_FINAL))
# A label of bob's on an event outside the queue: the crawl must find it, or it could not find anything.
OPEN_NOTE = "OPEN-bob-note"
QUEUED_TYPES = ["orchestrator_decision", "return", "tool_call"]


USERS = {"ada": "admin", "rita": "reviewer", "bob": "reviewer"}


@pytest.fixture
def lab(request, db_path, tmp_path_factory):
    """The lab on the test run's store (a file, copied with its accounts already made, or a lake)."""
    on_file = request.config.getoption("--store") == "file"
    if on_file:
        copy_with_users(db_path, request.getfixturevalue("migrated_file"), tmp_path_factory.getbasetemp(), USERS,
                        PASSWORD)
    yield from make_lab(request.getfixturevalue("settings"), users_made=on_file)


@pytest.fixture
def file_lab(tmp_path, migrated_file, tmp_path_factory):
    """The lab on a DuckDB file: the crawl's hundreds of requests would take minutes on a lake."""
    db = copy_with_users(tmp_path / "lab.duckdb", migrated_file, tmp_path_factory.getbasetemp(), USERS, PASSWORD)
    yield from make_lab(Settings(db=db), users_made=True)


def make_lab(settings, users_made: bool):
    """A blind queue with overlap 2 (rita and bob) over two traces: bob has labelled every item, an admin has
    settled one, rita has labelled nothing yet. The accounts are made here unless `users_made`."""
    app = create_app(settings.model_copy(update={"auth": "required"}))
    if not users_made:
        for name, role in USERS.items():
            accounts.add_user(app.state.db, name, role, PASSWORD)
    clients = {}
    for name in ("ada", "rita", "bob"):
        token = accounts.create_token(app.state.db, name, "test")
        clients[name] = TestClient(app, base_url=BASE_URL, headers={"Authorization": f"Bearer {token}"})
    for trace_id in ("b1", "b2"):
        assert post_json(clients["ada"], make_trace(trace_id)).status_code == 201
    queue = clients["ada"].post("/api/queues", json={
        "name": "blind", "filter": {"event_types": QUEUED_TYPES}, "fields": ["credit", "counterfactual", "note",
                                                                            "tags"],
        "required": ["credit"], "reviewers": ["rita", "bob"], "overlap": 2, "blind": True}).json()
    bob = clients["bob"]
    items = []
    while (answer := bob.post(f"/api/queues/{queue['id']}/next")).status_code == 200:
        item = answer.json()
        items.append(item)
        saved = bob.post("/api/annotations", json={
            "trace_id": item["trace_id"], "event_id": item["event_id"], "queue_id": queue["id"],
            "credit": SECRET_CREDIT, "counterfactual": "yes", "note": SECRET_NOTE, "tags": [SECRET_TAG]})
        assert saved.status_code == 201, saved.text
    assert len(items) == 6
    settled = clients["ada"].post(f"/api/queues/{queue['id']}/items/{items[0]['item_id']}/adjudicate",
                                  json={"label": {"credit": SECRET_FINAL}, "note": SECRET_ADJUDICATION})
    assert settled.status_code == 201, settled.text
    assert bob.post("/api/annotations", json={"trace_id": "b1", "event_id": "e2", "credit": 0.25,
                                              "note": OPEN_NOTE}).status_code == 201
    yield app, clients, queue, items
    app.state.live.close()
    app.state.db.close()


def _value_for(name: str, annotation, queue: dict, item: dict) -> list:
    """Values to try for a route parameter: the lab's ids where the name says which, each value of a Literal,
    both of a flag."""
    known = {"trace_id": [item["trace_id"], None], "event_id": [item["event_id"], None], "queue_id": [queue["id"], None],
             "item_id": [str(item["item_id"])], "reviewer": ["bob", None], "reviewers": ["rita,bob"],
             "field": ["credit", "note"], "name": ["rita"], "key": ["p1"], "channel": ["human credit: bob",
                                                                                      "human credit (mean)", None],
             "event": [item["event_id"]], "q": ["e"], "t0": ["0"], "t1": ["10"], "target": ["events"]}
    if name in known:
        return known[name]
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Literal:
        return list(args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)) and args:
        return _value_for(name, args[0], queue, item)
    if annotation is bool:
        return [None, "true"]
    return [None]


def _urls(app, queue: dict, item: dict) -> list[str]:
    """Every GET URL of the app's route table with its parameters filled: each route with the first value
    _value_for gives each parameter, then once more for every other value of each parameter."""
    urls = []
    for route in app.state.route_table:
        if not isinstance(route, APIRoute) or "GET" not in route.methods:
            continue
        params = {p.name: p for p in route.dependant.path_params}
        queries = {p.name: p for p in route.dependant.query_params}
        for dependency in route.dependant.dependencies:  # TraceId and other path dependencies
            params |= {p.name: p for p in dependency.path_params}
            queries |= {p.name: p for p in dependency.query_params}
        path_values = {name: _value_for(name, p.field_info.annotation, queue, item)[0] for name, p in params.items()}
        path = route.path_format.format(**{k: quote(str(v), safe="") for k, v in path_values.items()})
        choices = {name: _value_for(name, p.field_info.annotation, queue, item) for name, p in queries.items()}
        base = {name: values[0] for name, values in choices.items()}
        variants = [base] + [base | {name: value} for name, values in choices.items() for value in values[1:]]
        for variant in variants:
            query = {n: v for n, v in variant.items() if v is not None}
            urls.append(path + ("?" + urlencode(query) if query else ""))
    return sorted(set(urls))


def test_a_blind_reviewer_sees_no_other_value_on_any_route_until_they_saved(file_lab):
    app, clients, queue, items = file_lab
    rita = clients["rita"]
    urls = sorted({url for item in items[:2] for url in _urls(app, queue, item)})  # a route naming no item once
    assert len({url.partition("?")[0] for url in urls}) > 50  # the whole route table, not a hand-written list
    seen_open, leaks = 0, []
    for url in urls:
        for headers in ({}, {"HX-Request": "true"}):
            answer = rita.get(url, headers=headers, follow_redirects=False)
            assert answer.status_code < 500, (url, answer.status_code, answer.text[:300])
            text = answer.text
            leaks += [(url, secret) for secret in SECRETS if secret in text]
            seen_open += OPEN_NOTE in text
    assert not leaks, leaks[:20]
    assert seen_open > 0  # the crawl does reach label values: bob's label outside the queue shows


def test_once_saved_the_item_shows_the_other_labels_beside_the_reviewers_own(lab):
    app, clients, queue, items = lab
    rita, item = clients["rita"], items[1]
    assert rita.post(f"/api/queues/{queue['id']}/next").json()["item_id"] == items[0]["item_id"]
    mine = rita.post("/api/annotations", json={"trace_id": item["trace_id"], "event_id": item["event_id"],
                                                "queue_id": queue["id"], "credit": 0.5})
    assert mine.status_code == 201, mine.text
    labels = rita.get("/api/annotations", params={"trace_id": item["trace_id"], "event_id": item["event_id"]}).json()
    assert {label["reviewer"] for label in labels["items"]} == {"rita", "bob"}
    page = rita.get(f"/traces/{item['trace_id']}", params={"event": item["event_id"], "queue": queue["id"]}).text
    assert SECRET_NOTE in page and "Other reviewers" in page
    other = items[2]  # still unlabelled by rita: still hidden
    page = rita.get(f"/traces/{other['trace_id']}", params={"event": other["event_id"], "queue": queue["id"]}).text
    assert SECRET_NOTE not in page and "show here once you have saved yours" in page
    listed = rita.get(f"/api/queues/{queue['id']}/items").json()["items"]
    assert [sorted(i["labels"]) for i in listed if i["item_id"] in (item["item_id"], other["item_id"])] == [
        ["bob", "rita"], []]


def test_a_page_of_the_items_shows_each_as_the_whole_list_does_to_each_caller(lab):
    """GET /api/queues/{id}/items?limit=&offset= pages the items (a queue of a training run's tool calls held 88,968:
    12.4 MB in one answer); blind review holds on every page as on the whole list."""
    app, clients, queue, items = lab
    rita = clients["rita"]
    assert rita.post(f"/api/queues/{queue['id']}/next").json()["item_id"] == items[0]["item_id"]
    assert rita.post("/api/annotations", json={"trace_id": items[1]["trace_id"], "event_id": items[1]["event_id"],
                                               "queue_id": queue["id"], "credit": 0.5}).status_code == 201
    for name in ("rita", "bob", "ada"):
        whole = clients[name].get(f"/api/queues/{queue['id']}/items").json()
        assert whole["total"] == len(whole["items"]) == len(items)
        paged = []
        for offset in range(0, len(items), 2):
            page = clients[name].get(f"/api/queues/{queue['id']}/items", params={"limit": 2, "offset": offset})
            assert page.status_code == 200 and page.json()["total"] == len(items)
            paged += page.json()["items"]
        assert paged == whole["items"]
        rest = clients[name].get(f"/api/queues/{queue['id']}/items", params={"offset": 1}).json()
        assert rest["items"] == whole["items"][1:]
    shown = {i["item_id"]: sorted(i["labels"]) for i in rita.get(f"/api/queues/{queue['id']}/items",
                                                                  params={"limit": 3}).json()["items"]}
    assert shown[items[1]["item_id"]] == ["bob", "rita"] and shown[items[2]["item_id"]] == []  # not hers: hidden
    assert rita.get(f"/api/queues/{queue['id']}/items", params={"limit": 0}).status_code == 422
    for name in ("rita", "bob", "ada"):  # the labels list pages as it lists, blind review included
        whole = clients[name].get("/api/annotations").json()["items"]
        paged = [label for offset in range(0, len(whole), 2) for label in clients[name].get(
            "/api/annotations", params={"limit": 2, "offset": offset}).json()["items"]]
        assert paged == whole


def test_the_admin_and_a_reviewer_outside_the_queue_see_every_label(lab):
    app, clients, queue, items = lab
    for name in ("ada",):
        text = clients[name].get("/api/annotations/export", params={"format": "csv", "queue_id": queue["id"]}).text
        assert text.count(SECRET_NOTE) == len(items)
