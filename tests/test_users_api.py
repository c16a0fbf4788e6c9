"""Users and tokens while the server runs (issue 27): the JSON API for each role, the self-service a user has
over their own password and tokens, disabled accounts refused at once, the last admin kept, the pages, and
the command line reaching a running server."""

import io
import json
import re

import httpx
import pytest
from conftest import BASE_URL, make_trace, running_server
from fastapi.testclient import TestClient
from users_file import copy_with_users

from app.cli import main
from app.main import create_app
from app.services import accounts
from app.settings import Settings
from app.web.access import Access, declared, route_for

pytestmark = pytest.mark.heavy  # a minute of a worker: not left for the end (tests/conftest.py)
PASSWORD = "correct horse battery"
NEW_PASSWORD = "a brand new password"
JSON = {"Content-Type": "application/json"}


USERS = {"ada": "admin", "rita": "reviewer", "vic": "viewer"}


@pytest.fixture
def lab(request, db_path, tmp_path_factory):
    """A server with ORCHESTRACE_AUTH=required (on a file, or a lake with --store=lake) and one user per role (on a
    file, copied with them already made)."""
    on_file = request.config.getoption("--store") == "file"
    if on_file:
        copy_with_users(db_path, request.getfixturevalue("migrated_file"), tmp_path_factory.getbasetemp(), USERS,
                        PASSWORD)
    settings = request.getfixturevalue("settings")
    app = create_app(settings.model_copy(update={"auth": "required"}))
    with TestClient(app, base_url=BASE_URL) as anonymous:
        if not on_file:
            for name, role in USERS.items():
                accounts.add_user(app.state.db, name, role, PASSWORD)
        yield app, anonymous
    app.state.db.close()


def bearer(app, name: str) -> dict:
    return {"Authorization": f"Bearer {accounts.create_token(app.state.db, name, 'test')}"}


def form_token(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def log_in(app, name: str, password: str = PASSWORD) -> TestClient:
    client = TestClient(app, base_url=BASE_URL)
    answer = client.post("/login", data={"username": name, "password": password,
                                         "csrf_token": form_token(client.get("/login").text)}, follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return client


def send(client, method: str, path: str, headers: dict | None = None, body=None):
    content = None if body is None else json.dumps(body)
    return client.request(method, path, content=content, headers=(headers or {}) | (JSON if content else {}))


def test_only_admins_list_and_add_users(lab):
    app, anonymous = lab
    admin, reviewer, viewer = (bearer(app, n) for n in ("ada", "rita", "vic"))
    new = {"name": "mia", "role": "reviewer", "password": PASSWORD}
    for who, status in ((reviewer, 403), (viewer, 403), ({}, 401)):
        assert send(anonymous, "GET", "/api/users", who).status_code == status
        assert send(anonymous, "POST", "/api/users", who, new).status_code == status
    listed = send(anonymous, "GET", "/api/users", admin).json()["users"]
    assert [(u["name"], u["role"], u["disabled"]) for u in listed] == [
        ("ada", "admin", False), ("rita", "reviewer", False), ("vic", "viewer", False)]
    assert listed[0]["created_at"].endswith("Z")
    added = send(anonymous, "POST", "/api/users", admin, new)
    assert added.status_code == 201 and added.json() | {"created_at": "-"} == {
        "name": "mia", "role": "reviewer", "disabled": False, "created_at": "-"}
    assert accounts.check_password(app.state.db, "mia", PASSWORD) == accounts.User("mia", "reviewer")
    again = send(anonymous, "POST", "/api/users", admin, new | {"role": "viewer"})
    assert again.status_code == 409 and again.json() == {"error": "user 'mia' exists already", "field": "name"}


@pytest.mark.parametrize("body, field", [
    ({"role": "reviewer", "password": PASSWORD}, "name"),
    ({"name": "has space", "role": "reviewer", "password": PASSWORD}, "name"),
    ({"name": "mia\n", "role": "reviewer", "password": PASSWORD}, "name"),
    ({"name": 7, "role": "reviewer", "password": PASSWORD}, "name"),
    ({"name": "mia", "role": "owner", "password": PASSWORD}, "role"),
    ({"name": "mia", "password": PASSWORD}, "role"),
    ({"name": "mia", "role": "reviewer", "password": "short"}, "password"),
    ({"name": "mia", "role": "reviewer"}, "password"),
    ({"name": "mia", "role": "reviewer", "password": PASSWORD, "admin": True}, "admin"),
])
def test_a_new_user_with_a_bad_field_is_422_naming_it(lab, body, field):
    app, client = lab
    answer = send(client, "POST", "/api/users", bearer(app, "ada"), body)
    assert answer.status_code == 422 and answer.json()["field"] == field, answer.json()
    assert [u["username"] for u in accounts.list_users(app.state.db)] == ["ada", "rita", "vic"]


def test_bodies_that_are_not_json_objects_are_refused(lab):
    app, client = lab
    admin = bearer(app, "ada")
    assert client.post("/api/users", content="[]", headers=admin | JSON).status_code == 400
    assert client.post("/api/users", content="{", headers=admin | JSON).status_code == 400
    assert client.post("/api/users", data={"name": "mia"}, headers=admin).status_code == 415  # a form: cross-site-able
    assert client.patch("/api/users/rita", content='{"role": "viewer", "role": "admin"}',
                        headers=admin | JSON).json()["field"] == "role"  # a key given twice


def test_admins_change_roles_state_and_passwords(lab):
    app, client = lab
    admin = bearer(app, "ada")
    changed = send(client, "PATCH", "/api/users/rita", admin, {"role": "admin"})
    assert changed.status_code == 200 and changed.json()["role"] == "admin"
    changed = send(client, "PATCH", "/api/users/rita", admin, {"role": "viewer", "disabled": True,
                                                               "password": NEW_PASSWORD})
    assert (changed.json()["role"], changed.json()["disabled"]) == ("viewer", True)
    assert send(client, "PATCH", "/api/users/rita", admin, {"disabled": False}).json()["disabled"] is False
    assert accounts.check_password(app.state.db, "rita", NEW_PASSWORD) == accounts.User("rita", "viewer")
    assert accounts.check_password(app.state.db, "rita", PASSWORD) is None
    for body, field in (({}, None), ({"role": "root"}, "role"), ({"disabled": "yes"}, "disabled"),
                        ({"password": "short"}, "password"), ({"name": "rita2"}, "name")):
        answer = send(client, "PATCH", "/api/users/rita", admin, body)
        assert answer.status_code == 422 and answer.json().get("field") == field, body
    missing = send(client, "PATCH", "/api/users/nobody", admin, {"role": "viewer"})
    assert missing.status_code == 404 and "nobody" in missing.json()["error"]


def test_a_reviewer_or_viewer_changes_only_their_own_password(lab):
    app, client = lab
    for name in ("rita", "vic"):
        mine = bearer(app, name)
        assert send(client, "PATCH", f"/api/users/{name}", mine, {"password": NEW_PASSWORD}).status_code == 200
        assert accounts.check_password(app.state.db, name, NEW_PASSWORD) is not None
        for body in ({"role": "admin"}, {"disabled": True}, {"password": NEW_PASSWORD, "role": "admin"}):
            refused = send(client, "PATCH", f"/api/users/{name}", mine, body)
            assert refused.status_code == 403 and "your own password" in refused.json()["error"], body
        other = send(client, "PATCH", "/api/users/ada", mine, {"password": NEW_PASSWORD})
        assert other.status_code == 403 and "another user's account" in other.json()["error"]
    assert send(client, "PATCH", "/api/users/rita", None, {"password": NEW_PASSWORD}).status_code == 401
    assert accounts.check_password(app.state.db, "ada", PASSWORD) is not None  # untouched
    assert [u["role"] for u in accounts.list_users(app.state.db)] == ["admin", "reviewer", "viewer"]


def test_the_last_enabled_admin_is_neither_demoted_nor_disabled(lab):
    app, client = lab
    admin = bearer(app, "ada")
    for body, field in (({"role": "reviewer"}, "role"), ({"disabled": True}, "disabled")):
        refused = send(client, "PATCH", "/api/users/ada", admin, body)
        assert refused.status_code == 409 and refused.json()["field"] == field
        assert "last enabled admin" in refused.json()["error"]
    send(client, "PATCH", "/api/users/rita", admin, {"role": "admin"})
    send(client, "PATCH", "/api/users/rita", admin, {"disabled": True})  # a disabled admin does not count
    assert send(client, "PATCH", "/api/users/ada", admin, {"role": "viewer"}).status_code == 409
    assert send(client, "PATCH", "/api/users/rita", admin, {"disabled": False}).status_code == 200
    assert send(client, "PATCH", "/api/users/ada", admin, {"role": "viewer"}).status_code == 200
    assert send(client, "GET", "/api/users", admin).status_code == 403  # ada is a viewer from this request on
    assert accounts.has_admin(app.state.db)


def test_tokens_are_managed_by_admins_for_anyone_and_by_each_user_for_their_own(lab):
    app, client = lab
    admin, reviewer, viewer = (bearer(app, n) for n in ("ada", "rita", "vic"))
    made = send(client, "POST", "/api/users/rita/tokens", admin, {"name": "otel exporter"})
    assert made.status_code == 201
    token = made.json()
    assert token["token"].startswith(f"orc_{token['token_id']}_") and token["user"] == "rita"
    assert send(client, "GET", "/api/traces", {"Authorization": f"Bearer {token['token']}"}).status_code == 200
    listed = send(client, "GET", "/api/users/rita/tokens", reviewer).json()["tokens"]
    assert [t["name"] for t in listed] == ["otel exporter", "test"] and "token" not in listed[0]
    assert listed[0]["last_used_at"] is not None and listed[0]["revoked_at"] is None
    mine = send(client, "POST", "/api/users/vic/tokens", viewer, {})
    assert mine.status_code == 201 and mine.json()["name"] == "token"
    for method, path, body in (("GET", "/api/users/ada/tokens", None), ("POST", "/api/users/ada/tokens", {}),
                               ("DELETE", f"/api/users/rita/tokens/{token['token_id']}", None)):
        refused = send(client, method, path, viewer, body)
        assert refused.status_code == 403 and "another user's account" in refused.json()["error"], path
        assert send(client, method, path, {}, body).status_code == 401
    assert send(client, "POST", "/api/users/rita/tokens", reviewer, {"name": 5}).json()["field"] == "name"
    assert send(client, "POST", "/api/users/rita/tokens", reviewer, {"label": "x"}).json()["field"] == "label"
    assert send(client, "GET", "/api/users/nobody/tokens", admin).status_code == 404
    assert send(client, "POST", "/api/users/nobody/tokens", admin, {}).status_code == 404
    revoked = send(client, "DELETE", f"/api/users/rita/tokens/{token['token_id']}", reviewer)
    assert revoked.status_code == 204 and revoked.content == b""
    assert send(client, "GET", "/api/traces", {"Authorization": f"Bearer {token['token']}"}).status_code == 401
    assert send(client, "DELETE", f"/api/users/rita/tokens/{token['token_id']}", admin).status_code == 404
    assert send(client, "DELETE", f"/api/users/ada/tokens/{token['token_id']}", admin).status_code == 404  # not hers
    assert send(client, "GET", "/api/users/rita/tokens", admin).json()["tokens"][0]["revoked_at"] is not None


def test_a_disabled_account_is_refused_on_its_next_request_and_cannot_log_in(lab):
    app, client = lab
    admin, rita = bearer(app, "ada"), bearer(app, "rita")
    session = log_in(app, "rita")
    assert session.get("/api/traces").status_code == 200 and client.get("/api/traces", headers=rita).status_code == 200
    send(client, "PATCH", "/api/users/rita", admin, {"disabled": True})
    assert client.get("/api/traces", headers=rita).status_code == 401
    assert session.get("/api/traces").status_code == 401
    page = session.get("/annotations", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/login")
    login = client.post("/login", data={"username": "rita", "password": PASSWORD,
                                        "csrf_token": form_token(client.get("/login").text)})
    assert login.status_code == 403 and "disabled" in login.text
    wrong = client.post("/login", data={"username": "rita", "password": "not hers",
                                        "csrf_token": form_token(client.get("/login").text)})
    assert wrong.status_code == 401 and "disabled" not in wrong.text  # says nothing to who lacks the password
    send(client, "PATCH", "/api/users/rita", admin, {"disabled": False})
    assert client.get("/api/traces", headers=rita).status_code == 200  # tokens come back with the account
    assert session.get("/api/traces").status_code == 401  # sessions do not: log in again
    assert log_in(app, "rita").get("/api/traces").status_code == 200


def test_a_new_password_ends_the_other_sessions_and_keeps_the_one_that_changed_it(lab):
    app, client = lab
    here, elsewhere = log_in(app, "rita"), log_in(app, "rita")
    token = bearer(app, "rita")
    changed = send(here, "PATCH", "/api/users/rita", None, {"password": NEW_PASSWORD})
    assert changed.status_code == 200
    assert here.get("/api/traces").status_code == 200 and elsewhere.get("/api/traces").status_code == 401
    assert client.get("/api/traces", headers=token).status_code == 200  # tokens are not sessions
    by_admin = send(client, "PATCH", "/api/users/rita", bearer(app, "ada"), {"password": PASSWORD})
    assert by_admin.status_code == 200 and here.get("/api/traces").status_code == 401


def test_the_routes_leave_only_a_users_own_account_to_the_service(app):
    def access(method, path):
        return declared(route_for(app, method, path)[0])

    assert access("GET", "/api/users") == access("POST", "/api/users") == Access("admin")
    for method, path in (("PATCH", "/api/users/rita"), ("GET", "/api/users/rita/tokens"),
                         ("POST", "/api/users/rita/tokens"), ("DELETE", "/api/users/rita/tokens/ab12")):
        assert access(method, path) == Access("viewer", owner=True), path
    assert access("GET", "/users") == access("POST", "/users/rita") == Access("admin")
    assert access("POST", "/account/password") == Access("viewer")

def test_who_may_manage_an_account_is_one_rule():
    ada, rita = accounts.User("ada", "admin"), accounts.User("rita", "reviewer")
    assert accounts.may_manage(ada, "rita", ("role", "disabled")) and accounts.may_manage(ada, None)
    assert accounts.may_manage(rita, "rita") and accounts.may_manage(rita, "rita", ("password",))
    assert not accounts.may_manage(rita, "rita", ("role",)) and not accounts.may_manage(rita, "ada")
    assert not accounts.may_manage(rita, None)
    assert accounts.may_manage(None, "rita", ("role",))  # open mode's one user, or the CLI holding the file


def test_open_mode_manages_accounts_without_logging_in(client):
    added = send(client, "POST", "/api/users", None, {"name": "ada", "role": "admin", "password": PASSWORD})
    assert added.status_code == 201
    assert send(client, "POST", "/api/users/ada/tokens", None, {}).status_code == 201
    assert client.get("/users").status_code == 200 and "ada" in client.get("/users").text


def test_the_users_page_is_for_admins_and_its_forms_manage_accounts(lab):
    app, _ = lab
    admin = log_in(app, "ada")
    page = admin.get("/users")
    assert page.status_code == 200 and 'href="/users"' in page.text  # the nav link, for admins
    assert 'href="/users"' not in log_in(app, "rita").get("/account").text
    assert log_in(app, "rita").get("/users").status_code == 403
    csrf = form_token(page.text)
    added = admin.post("/users", data={"name": "mia", "role": "viewer", "password": PASSWORD, "csrf_token": csrf},
                       follow_redirects=False)
    assert added.status_code == 303 and added.headers["location"] == "/users?user=mia&done=added#manage"
    assert "Added mia, a viewer." in admin.get(added.headers["location"]).text
    assert admin.post("/users", data={"name": "mia", "role": "viewer", "password": PASSWORD,
                                      "csrf_token": csrf}).status_code == 409
    assert admin.post("/users/mia", data={"role": "reviewer", "csrf_token": csrf}).status_code == 200
    assert admin.post("/users/mia", data={"disabled": "true", "csrf_token": csrf}).status_code == 200
    last = admin.post("/users/ada", data={"role": "viewer", "csrf_token": csrf})
    assert last.status_code == 409 and "last enabled admin" in last.text
    made = admin.post("/users/mia/tokens", data={"name": "ci", "csrf_token": csrf})
    token = re.search(r'id="new-token">([^<]+)<', made.text).group(1)
    assert made.status_code == 201 and accounts.token_user(app.state.db, token) is None  # mia is disabled
    assert admin.post("/users/mia", data={"password": NEW_PASSWORD, "csrf_token": csrf}).status_code == 200
    assert admin.post("/users/mia", data={"role": "admin"}).status_code == 403  # no form token
    assert {u["name"]: (u["role"], u["disabled"]) for u in accounts.users(app.state.db)}["mia"] == ("reviewer", True)
    token_id = token.split("_")[1]
    revoked = admin.post(f"/users/mia/tokens/{token_id}/revoke", data={"csrf_token": csrf}, follow_redirects=False)
    assert revoked.status_code == 303 and accounts.list_tokens(app.state.db, "mia")[0]["revoked_at"] is not None


def test_the_account_page_changes_my_password(lab):
    app, _ = lab
    here, elsewhere = log_in(app, "vic"), log_in(app, "vic")
    csrf = form_token(here.get("/account").text)
    differ = here.post("/account/password", data={"password": NEW_PASSWORD, "again": "something else",
                                                  "csrf_token": csrf})
    assert differ.status_code == 422 and "the two passwords differ" in differ.text
    short = here.post("/account/password", data={"password": "short", "again": "short", "csrf_token": csrf})
    assert short.status_code == 422 and "at least 8 characters" in short.text
    changed = here.post("/account/password", data={"password": NEW_PASSWORD, "again": NEW_PASSWORD,
                                                   "csrf_token": csrf}, follow_redirects=False)
    assert changed.status_code == 303 and "Password changed" in here.get(changed.headers["location"]).text
    assert elsewhere.get("/api/traces").status_code == 401
    assert accounts.check_password(app.state.db, "vic", NEW_PASSWORD) == accounts.User("vic", "viewer")


def test_accounts_made_before_0018_stay_enabled(tmp_path):
    from test_store_schema import migrated_before

    db = migrated_before(tmp_path / "old.duckdb", "0018")
    db.execute("INSERT INTO users VALUES ('ada', 'admin', 'x', '2026-01-01 10:00:00')")
    assert db.migrate(Settings().migrations_dir)[0] == "0018_users_disabled.sql"
    assert accounts.users(db) == [{"name": "ada", "role": "admin", "disabled": False,
                                   "created_at": "2026-01-01T10:00:00Z"}]
    assert accounts.has_admin(db)
    db.close()


def test_the_cli_manages_accounts_on_the_file_when_no_server_holds_it(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "cli.duckdb")
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["users", "add", "ada", "--role", "admin", "--password-stdin", "--db", db]) == 0
    assert main(["users", "set", "ada", "--role", "viewer", "--db", db]) == 1
    assert "error: 'ada' is the last enabled admin" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO(NEW_PASSWORD + "\n"))
    assert main(["users", "set", "ada", "--password-stdin", "--db", db]) == 0
    assert "changed 'ada'" in capsys.readouterr().out
    assert main(["users", "set", "nobody", "--disable", "--db", db]) == 1
    assert "no user 'nobody'" in capsys.readouterr().err
    assert main(["tokens", "create", "ada", "--db", db]) == 0
    token_id = capsys.readouterr().out.strip().splitlines()[-1].split("_")[1]
    assert main(["tokens", "revoke", "nope", "--db", db]) == 1
    assert "no live token with id nope" in capsys.readouterr().err
    assert main(["tokens", "revoke", token_id, "--user", "ada", "--db", db]) == 0
    assert f"revoked token {token_id} of 'ada'" in capsys.readouterr().out
    assert main(["users", "list", "--db", db]) == 0
    assert re.fullmatch(r"ada\tadmin\t\d{4}-\d\d-\d\d \d\d:\d\d UTC\tenabled\n", capsys.readouterr().out)


def test_accounts_and_tokens_are_managed_through_a_running_server(tmp_path, monkeypatch, capsys):
    """A real `orchestrace serve` holds the file: the CLI adds a user and a token through it with an admin's
    token, the token works at once, and disabling the user over the API refuses its token and its session on
    the very next request."""
    db = str(tmp_path / "held.duckdb")
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["users", "add", "ada", "--role", "admin", "--password-stdin", "--db", db]) == 0  # the first admin
    assert main(["tokens", "create", "ada", "--name", "admin cli", "--db", db]) == 0
    admin = capsys.readouterr().out.strip().splitlines()[-1]
    monkeypatch.setenv("ORCHESTRACE_AUTH", "required")
    with running_server(tmp_path / "held.duckdb") as url:
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["users", "add", "rita", "--role", "reviewer", "--password-stdin", "--db", db]) == 1
        assert "error: log in" in capsys.readouterr().err  # no token: 401, said on one line
        monkeypatch.setenv("ORCHESTRACE_TOKEN", admin)
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["users", "add", "rita", "--role", "reviewer", "--password-stdin", "--db", db]) == 0
        out, err = capsys.readouterr()
        assert f"added reviewer 'rita' to {url}" in out and "held by a running server" in err
        assert main(["tokens", "create", "rita", "--name", "exporter", "--db", db]) == 0
        rita = {"Authorization": f"Bearer {capsys.readouterr().out.strip().splitlines()[-1]}"}
        trace = httpx.post(f"{url}/api/traces", content=json.dumps(make_trace()), headers=rita | JSON)
        assert trace.status_code == 201  # the new user's token works at once

        session = httpx.Client(base_url=url)
        page = session.get("/login").text
        assert session.post("/login", data={"username": "rita", "password": PASSWORD,
                                            "csrf_token": form_token(page)}).status_code in (200, 303)
        assert session.get("/api/traces").status_code == 200
        monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
        assert main(["users", "add", "rita", "--role", "viewer", "--password-stdin", "--db", db]) == 1
        assert "error: user 'rita' exists already" in capsys.readouterr().err  # 409
        monkeypatch.setenv("ORCHESTRACE_TOKEN", rita["Authorization"][7:])
        assert main(["users", "list", "--db", db]) == 1
        assert "needs the admin role (pass an admin's API token" in capsys.readouterr().err  # 403
        assert main(["tokens", "list", "rita", "--db", db]) == 0  # her own
        assert "exporter" in capsys.readouterr().out
        monkeypatch.setenv("ORCHESTRACE_TOKEN", admin)

        disabled = httpx.patch(f"{url}/api/users/rita", json={"disabled": True},
                               headers={"Authorization": f"Bearer {admin}"})
        assert disabled.status_code == 200 and disabled.json()["disabled"] is True
        assert httpx.get(f"{url}/api/traces", headers=rita).status_code == 401
        assert session.get("/api/traces").status_code == 401
        assert session.get("/annotations").status_code == 303  # a page: to the login form
        assert main(["users", "list", "--db", db]) == 0
        assert "rita\treviewer\t" in (listed := capsys.readouterr().out) and listed.rstrip().endswith("disabled")
        assert main(["users", "set", "rita", "--enable", "--role", "viewer", "--db", db]) == 0
        assert "changed 'rita'" in capsys.readouterr().out
        assert main(["tokens", "list", "--db", db]) == 0
        token_id = next(line.split("\t")[0] for line in capsys.readouterr().out.splitlines() if "exporter" in line)
        assert main(["tokens", "revoke", token_id, "--db", db]) == 0  # the owner found among everyone's
        assert f"revoked token {token_id} of 'rita' in {url}" in capsys.readouterr().out
        assert httpx.get(f"{url}/api/traces", headers=rita).status_code == 401
        assert main(["users", "set", "ada", "--disable", "--db", db]) == 1
        assert "last enabled admin" in capsys.readouterr().err  # 409
