"""Access declared at the route: every route of the app's route table names who may call it, each caller gets what
the declaration says (walked over the table, not a list written here), a route that declares nothing is refused
when the app is built and when it is called, and no GET changes what is stored."""

import asyncio
import json
import re

import pytest
from conftest import BASE_URL, make_trace, post_json
from fastapi import HTTPException
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.requests import Request
from test_papers import POOL_CSV
from users_file import copy_with_users

from app.main import create_app
from app.services import accounts
from app.settings import Settings
from app.web import access
from app.web.access import Access

PASSWORD = "correct horse battery"
CALLERS = {"vic": "viewer", "rita": "reviewer", "ada": "admin"}
ROLES = accounts.ROLES
# Tables that only remember what was computed from the others: a GET may fill them.
CACHES = {"trace_metrics", "audit_findings", "lod_events", "lod_edges"}
# Values of the required query parameters of the routes that have some, so a GET answers more than 422.
QUERY = {"t0": "0", "t1": "10", "channel": "team", "event": "e1", "q": "e", "field": "credit",
         "reviewers": "ada,rita", "a": "t-small", "b": "t-small"}


@pytest.fixture
def lab(tmp_path, migrated_file, tmp_path_factory):
    """A server that requires accounts, with one user of each role (copied with them already made) and an anonymous
    client."""
    db = copy_with_users(tmp_path / "lab.duckdb", migrated_file, tmp_path_factory.getbasetemp(), CALLERS, PASSWORD)
    app = create_app(Settings(db=db, auth="required"))
    tokens = {}
    for name in CALLERS:
        tokens[name] = {"Authorization": f"Bearer {accounts.create_token(app.state.db, name, 'test')}"}
    with TestClient(app, base_url=BASE_URL) as client:
        yield app, client, tokens


def route_methods(app):
    """(route, method) for every route of the app's route table."""
    return [(route, method) for route in app.state.route_table for method in sorted(route.methods)]


def path_of(route: APIRoute, values: dict) -> str:
    return re.sub(r"{(\w+)(?::\w+)?}", lambda m: values[m.group(1)], route.path)


def guard_refusal(answer) -> int | None:
    """401 or 403 when the access check refused the request (a page is sent to the login form), else None."""
    if answer.status_code == 303 and answer.headers["location"].startswith("/login?next="):
        return 401
    if answer.status_code == 401:
        return 401
    if answer.status_code == 403 and re.search(r"this needs the \w+ role|another user's account", answer.text):
        return 403
    return None


def call(client, method: str, path: str, headers: dict):
    """A request that passes the access check but, when it gets past it, stores nothing: no body, no form token,
    names that are not stored."""
    return client.request(method, path, headers=headers, follow_redirects=False)


def expected(declared: Access, caller: str | None, name: str) -> int | None:
    """What the declaration says of this caller on a path naming account `name`: 401, 403 or None (may call)."""
    if declared.role is None:
        return None
    if caller is None:
        return 401
    role = CALLERS[caller]
    if ROLES.index(role) < ROLES.index(declared.role):
        return 403
    if declared.owner and caller != name and role != "admin":
        return 403
    return None


def test_every_route_in_the_table_declares_who_may_call_it(app):
    undeclared = [access.describe(route) for route in app.state.route_table if access.declared(route) is None]
    assert undeclared == []
    assert app.state.route_table == [r for r in access.routes(app) if isinstance(r, APIRoute)]
    served = [route for route in access.routes(app) if not isinstance(route, APIRoute)]
    assert [(route.path, access.declared(route)) for route in served] == [("/static", Access(None))]


def test_each_caller_gets_what_the_route_declares(lab):
    app, client, tokens = lab
    seen = set()
    for route, method in route_methods(app):
        declared = access.declared(route)
        seen.add(declared)
        for caller in (None, *CALLERS):
            names = {caller or "ada", "ada", "vic"} if "{name}" in route.path else {"ada"}  # own account, others
            for name in names:
                values = {"trace_id": "no-such-trace", "event_id": "no-such-event", "queue_id": "no-such-queue",
                          "item_id": "1", "key": "no-such-paper", "token_id": "no-such-token", "name": name,
                          "receipt_id": "no-such-receipt", "finding_id": "no-such-finding"}
                path = path_of(route, values)
                answer = call(client, method, path, tokens.get(caller, {}))
                assert guard_refusal(answer) == expected(declared, caller, name), (method, path, caller,
                                                                                  answer.status_code, answer.text)
    assert seen == {Access(None), Access("viewer"), Access("reviewer"), Access("admin"), Access("viewer", True)}


def test_open_single_user_mode_stays_open_on_every_route(client, app):
    for route, method in route_methods(app):
        path = path_of(route, {"trace_id": "x", "event_id": "x", "queue_id": "x", "item_id": "1", "key": "x",
                               "token_id": "x", "name": "x", "receipt_id": "x", "finding_id": "x"})
        assert guard_refusal(call(client, method, path, {})) is None, (method, path)


def test_a_path_no_route_serves_asks_for_a_login_first(lab):
    app, client, tokens = lab
    assert client.get("/no/such/page", follow_redirects=False).headers["location"] == "/login?next=/no/such/page"
    assert client.get("/api/no-such-thing").status_code == 401
    assert client.get("/api/no-such-thing", headers=tokens["vic"]).status_code == 404


def test_a_route_that_declares_nothing_is_refused_when_built_and_when_called(tmp_path):
    app = create_app(Settings(db=tmp_path / "open.duckdb"))

    @app.get("/undeclared")
    def undeclared():
        return {"served": True}

    @app.get("/twice", dependencies=[access.Public, access.Admin])
    def declared_twice():
        return {"served": True}

    with pytest.raises(access.UndeclaredAccess) as refused:
        access.check_routes(app)
    assert "GET /undeclared (test_access.undeclared): 0 declarations" in str(refused.value)
    assert "GET /twice (test_access.declared_twice): 2 declarations" in str(refused.value)
    with TestClient(app, base_url=BASE_URL) as client:  # open mode: still refused
        for path in ("/undeclared", "/twice"):
            answer = client.get(path)
            assert answer.status_code == 403 and "declares who may call it nowhere" in answer.json()["error"]


def test_a_route_may_take_its_caller_from_its_declaration(tmp_path, migrated_file, tmp_path_factory):
    """The parameter form, `user: Annotated[User | None, Admin]`, declares the access and hands the route its caller."""
    from typing import Annotated

    db = copy_with_users(tmp_path / "lab.duckdb", migrated_file, tmp_path_factory.getbasetemp(), {"ada": "admin"},
                         PASSWORD)
    app = create_app(Settings(db=db, auth="required"))

    @app.get("/api/whoami")
    def whoami(user: Annotated[accounts.User | None, access.Admin]):
        return {"name": user.name}

    access.check_routes(app)
    headers = {"Authorization": f"Bearer {accounts.create_token(app.state.db, 'ada')}"}
    with TestClient(app, base_url=BASE_URL) as client:
        assert client.get("/api/whoami", headers=headers).json() == {"name": "ada"}
        assert client.get("/api/whoami").status_code == 401


def test_the_declaration_refuses_where_the_route_runs_as_well_as_in_the_guard():
    rita = accounts.User("rita", "reviewer")
    assert Access("admin").refusal(rita, False, {}) == (403, "'rita' is a reviewer; this needs the admin role")
    assert Access("admin").refusal(None, False, {})[0] == 401
    assert Access("admin").refusal(None, True, {}) is None  # open mode
    assert Access("viewer", owner=True).refusal(rita, False, {"name": "ada"})[0] == 403
    assert Access("viewer", owner=True).refusal(rita, False, {"name": "rita"}) is None

    def request(user, open_mode=False, name="rita"):
        return Request({"type": "http", "method": "GET", "path": "/", "headers": [], "path_params": {"name": name},
                        "state": {"user": user, "open_mode": open_mode}})

    with pytest.raises(HTTPException) as refused:
        asyncio.run(Access("admin")(request(rita)))
    assert refused.value.status_code == 403
    with pytest.raises(HTTPException) as refused:
        asyncio.run(Access("viewer")(request(None)))
    assert refused.value.status_code == 401 and refused.value.headers == {"WWW-Authenticate": "Bearer"}
    assert asyncio.run(Access("viewer", owner=True)(request(rita))) == rita
    assert asyncio.run(Access("admin")(request(None, open_mode=True))) is None


def state(db) -> dict:
    """Each stored table but the caches: its row count and a checksum of its rows."""
    tables = [row[0] for row in db.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    return {t: db.execute(f"SELECT count(*), coalesce(sum(hash(x::VARCHAR)), 0) FROM {t} x").fetchone()
            for t in tables if t not in CACHES}


def test_no_get_route_changes_what_is_stored(client, app):
    """State changes only on POST, PUT, PATCH and DELETE: a link, a prefetch or an image cannot change anything."""
    assert post_json(client, make_trace()).status_code == 201
    assert client.post("/api/annotations", json={"trace_id": "t-small", "event_id": "e1", "reviewer": "ada",
                                                 "credit": 0.5}).status_code == 201
    assert client.post("/api/papers/import", content=POOL_CSV, headers={"Content-Type": "text/csv"}).status_code == 200
    queue = client.post("/api/queues", json={"name": "q", "filter": {}, "reviewers": ["ada", "rita"]}).json()
    client.cookies.set("orchestrace_reviewer", "ada")
    values = {"trace_id": "t-small", "event_id": "e1", "queue_id": queue["id"], "item_id": "1",
              "key": json.loads(client.get("/api/papers/export?format=json").text)[0]["key"], "name": "ada",
              "receipt_id": client.get("/api/ingest-log").json()["items"][0]["id"]}
    before = state(app.state.db)  # read once: after each GET, what is stored is still this
    for route, method in route_methods(app):
        if method != "GET":
            continue
        path = path_of(route, values)
        params = {p.alias: QUERY[p.alias] for p in route.dependant.query_params if p.field_info.is_required()}
        answer = client.get(path, params=params, headers={"HX-Request": "true"}, follow_redirects=False)
        assert answer.status_code < 500, (path, answer.text)
        assert state(app.state.db) == before, path
