"""A shared server a lab can trust: accounts and roles, API tokens, sessions, cross-site refusals, the Host
allow-list. Each attack of issue 12 is a test here; open single-user mode is what the other tests run in."""

import json
import re

import pytest
from conftest import BASE_URL, make_trace
from fastapi.testclient import TestClient
from users_file import copy_with_users

from app.main import create_app
from app.services import accounts
from app.settings import Settings

pytestmark = pytest.mark.heavy  # a minute of a worker: not left for the end (tests/conftest.py)
PASSWORD = "correct horse battery"
EVIL = "http://evil.example"


@pytest.fixture
def lab(tmp_path, migrated_file, tmp_path_factory):
    """A server with ORCHESTRACE_AUTH=required and one user of each role (copied with them already made); a client
    per role is made by login."""
    db = copy_with_users(tmp_path / "lab.duckdb", migrated_file, tmp_path_factory.getbasetemp(),
                         {"ada": "admin", "rita": "reviewer", "vic": "viewer"}, PASSWORD)
    app = create_app(Settings(db=db, auth="required"))
    with TestClient(app, base_url=BASE_URL) as anonymous:
        yield app, anonymous


def token_of(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def log_in(app, name: str) -> TestClient:
    client = TestClient(app, base_url=BASE_URL)
    page = client.get("/login").text
    answer = client.post("/login", data={"username": name, "password": PASSWORD, "csrf_token": token_of(page)},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return client


def bearer(app, name: str) -> dict:
    return {"Authorization": f"Bearer {accounts.create_token(app.state.db, name, 'test')}"}


def label(event_id="e1", **fields) -> str:
    return json.dumps({"trace_id": "t-small", "event_id": event_id, "credit": 0.5, **fields})


def test_required_mode_asks_pages_to_log_in_and_the_api_for_a_token(lab):
    app, anonymous = lab
    page = anonymous.get("/", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/"
    answer = anonymous.get("/api/traces")
    assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    assert anonymous.get("/login").status_code == 200 and anonymous.get("/api/health").status_code == 200
    assert anonymous.get("/static/app.css").status_code == 200


def test_login_sets_a_safe_session_cookie_and_logout_ends_the_session(lab):
    app, anonymous = lab
    page = anonymous.get("/login").text
    wrong = anonymous.post("/login", data={"username": "rita", "password": "nope", "csrf_token": token_of(page)})
    assert wrong.status_code == 401 and "wrong user name or password" in wrong.text
    answer = anonymous.post("/login", data={"username": "rita", "password": PASSWORD, "csrf_token": token_of(page),
                                            "next": "//evil.example/"}, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/"  # never off-site
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    assert anonymous.get("/").status_code == 200 and "rita" in anonymous.get("/").text
    token = re.search(r'"X-CSRF-Token": "([^"]+)"', anonymous.get("/").text).group(1)
    session = anonymous.cookies.get("orchestrace_session")
    assert anonymous.post("/logout", headers={"X-CSRF-Token": token}, follow_redirects=False).status_code == 303
    replay = TestClient(app, base_url=BASE_URL, cookies={"orchestrace_session": session})
    assert replay.get("/api/traces").status_code == 401  # the old cookie is dead
    forged = TestClient(app, base_url=BASE_URL, cookies={"orchestrace_session": session.rpartition(".")[0] + ".0"})
    assert forged.get("/api/traces").status_code == 401


def test_roles_decide_who_may_read_label_import_and_delete(lab):
    app, _ = lab
    admin, reviewer, viewer = (bearer(app, n) for n in ("ada", "rita", "vic"))
    with TestClient(app, base_url=BASE_URL) as client:
        json_ = {"Content-Type": "application/json"}
        assert client.post("/api/traces", content=json.dumps(make_trace()), headers=viewer | json_).status_code == 403
        assert client.post("/api/traces", content=json.dumps(make_trace()), headers=reviewer | json_).status_code == 201
        assert client.get("/api/traces", headers=viewer).status_code == 200
        assert client.post("/api/annotations", content=label(), headers=viewer | json_).status_code == 403
        assert client.post("/api/annotations", content=label(), headers=reviewer | json_).status_code == 201
        export = client.get("/api/annotations/export?format=json", headers=viewer).content
        assert client.post("/api/annotations/import", content=export, headers=reviewer | json_).status_code == 403
        assert client.delete("/api/traces/t-small?force=true", headers=reviewer).status_code == 403
        assert client.delete("/api/traces/t-small?force=true", headers=viewer).status_code == 403
        assert client.delete("/api/traces/t-small?force=true", headers=admin).status_code in (200, 204)


def test_the_reviewer_of_a_label_is_the_logged_in_user_never_a_name_the_client_chooses(lab):
    app, _ = lab
    rita = bearer(app, "rita") | {"Content-Type": "application/json"}
    with TestClient(app, base_url=BASE_URL) as client:
        client.post("/api/traces", content=json.dumps(make_trace()), headers=rita)
        forged = client.post("/api/annotations", content=label(reviewer="ada"), headers=rita)
        assert forged.status_code == 403 and "rita" in forged.json()["error"]
        saved = client.post("/api/annotations", content=label(), headers=rita)
        assert saved.status_code == 201 and saved.json()["reviewer"] == "rita"
        tags = client.post("/api/papers/x/tags", content=json.dumps({"reviewer": "ada"}), headers=rita)
        assert tags.status_code == 403


def test_a_revoked_token_is_refused_and_use_is_recorded(lab):
    app, _ = lab
    token = accounts.create_token(app.state.db, "rita", "exporter")
    with TestClient(app, base_url=BASE_URL) as client:
        headers = {"Authorization": f"Bearer {token}"}
        assert client.get("/api/traces", headers=headers).status_code == 200
        listed = accounts.list_tokens(app.state.db, "rita")[0]
        assert listed["last_used_at"] is not None and listed["name"] == "exporter"
        # recorded to the minute: a use within it writes nothing, a use after it moves the time on
        assert client.get("/api/traces", headers=headers).status_code == 200
        assert accounts.list_tokens(app.state.db, "rita")[0]["last_used_at"] == listed["last_used_at"]
        app.state.db.execute("UPDATE api_tokens SET last_used_at = last_used_at - INTERVAL 2 MINUTE")
        assert client.get("/api/traces", headers=headers).status_code == 200
        assert accounts.list_tokens(app.state.db, "rita")[0]["last_used_at"] > listed["last_used_at"]
        assert accounts.revoke_token(app.state.db, listed["token_id"])
        assert client.get("/api/traces", headers=headers).status_code == 401
        assert client.get("/api/traces", headers={"Authorization": "Bearer orc_x_y"}).status_code == 401


def test_exporters_send_their_token_as_a_bearer_header(lab):
    app, _ = lab
    with TestClient(app, base_url=BASE_URL) as client:
        body = {"resourceSpans": []}
        assert client.post("/v1/traces", json=body).status_code == 401
        assert client.post("/v1/traces", json=body, headers=bearer(app, "rita")).status_code == 200
        assert client.post("/v1/traces/ingest", json={"data": []}, headers=bearer(app, "rita")).status_code == 200


def test_cross_site_writes_are_refused_in_every_mode(client):
    """A page on another origin posting with fetch(mode: no-cors, Content-Type: text/plain)."""
    client.post("/api/traces", content=json.dumps(make_trace()), headers={"Content-Type": "application/json"})
    for path, body in (("/api/annotations", label(reviewer="victim")), ("/api/traces", json.dumps(make_trace("t2"))),
                       ("/api/papers/x/tags", '{"reviewer": "victim"}'), ("/v1/traces", '{"resourceSpans": []}')):
        cross = client.post(path, content=body, headers={"Content-Type": "text/plain", "Origin": EVIL})
        assert cross.status_code == 403 and "cross-site" in cross.json()["error"], path
        via_referer = client.post(path, content=body, headers={"Content-Type": "application/json",
                                                               "Referer": EVIL + "/page"})
        assert via_referer.status_code == 403, path
        plain = client.post(path, content=body, headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415, path
    assert client.get("/api/annotations").json()["items"] == []
    assert client.get("/api/traces").json()["total"] == 1
    same = client.post("/api/annotations", content=label(reviewer="me"),
                       headers={"Content-Type": "application/json", "Origin": BASE_URL})
    assert same.status_code == 201


def test_a_form_token_planted_from_another_port_does_not_pass(client):
    """Cookies are not per port: a page on localhost:9999 can set ours, but it cannot sign a form token."""
    client.post("/api/traces", content=json.dumps(make_trace()), headers={"Content-Type": "application/json"})
    client.cookies.set("orchestrace_browser", "planted", domain="127.0.0.1")
    client.cookies.set("orchestrace_csrf", "planted", domain="127.0.0.1")
    for token in ("planted", ""):
        answer = client.post("/reviewer", data={"new_name": "mallory", "csrf_token": token}, follow_redirects=False)
        assert answer.status_code == 403
    answer = client.post("/traces/t-small/events/e1/label", data={"credit": "0.9"},
                         headers={"X-CSRF-Token": "planted", "HX-Request": "true"})
    assert answer.status_code == 403
    assert client.get("/api/annotations").json()["items"] == []


def test_a_foreign_host_is_refused_against_dns_rebinding(client, tmp_path):
    assert client.get("/api/traces", headers={"Host": "attacker.example"}).status_code == 400
    assert client.get("/api/traces", headers={"Host": "localhost:8000"}).status_code == 200
    app = create_app(Settings(db=tmp_path / "hosts.duckdb", allowed_hosts="lab.example.org"))
    with TestClient(app, base_url="http://lab.example.org") as named:
        assert named.get("/api/health").status_code == 200
        assert named.get("/api/health", headers={"Host": "127.0.0.1"}).status_code == 400


def test_auto_mode_is_open_on_loopback_and_required_elsewhere(tmp_path):
    loopback = create_app(Settings(db=tmp_path / "a.duckdb"))
    with TestClient(loopback, base_url=BASE_URL) as client:
        page = client.get("/").text
        assert "open mode" in page and client.get("/api/traces").status_code == 200
    public = create_app(Settings(db=tmp_path / "b.duckdb", host="0.0.0.0", allowed_hosts="127.0.0.1"))
    with TestClient(public, base_url=BASE_URL) as client:
        assert client.get("/api/traces").status_code == 401


def test_cli_adds_users_and_makes_tokens_that_the_server_takes(tmp_path, monkeypatch, capsys):
    import io

    from app.cli import main
    db = str(tmp_path / "cli.duckdb")
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["users", "add", "ada", "--role", "admin", "--password-stdin", "--db", db]) == 0
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    assert main(["users", "add", "bob", "--role", "reviewer", "--password-stdin", "--db", db]) == 1
    assert "at least 8 characters" in capsys.readouterr().err
    assert main(["tokens", "create", "ada", "--name", "ci", "--db", db]) == 0
    token = capsys.readouterr().out.strip().splitlines()[-1]  # the token alone on the last line
    assert main(["tokens", "create", "nobody", "--db", db]) == 1
    app = create_app(Settings(db=db, auth="required"))
    with TestClient(app, base_url=BASE_URL) as client:
        assert client.get("/api/traces", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    token_id = token.split("_")[1]
    assert main(["tokens", "revoke", token_id, "--db", db]) == 0
    assert main(["tokens", "list", "ada", "--db", db]) == 0
    assert "revoked" in capsys.readouterr().out


def test_serving_beyond_loopback_without_an_admin_refuses_to_start(tmp_path, capsys):
    from app.cli import main
    assert main(["serve", "--host", "0.0.0.0", "--db", str(tmp_path / "public.duckdb")]) == 2
    assert "orchestrace users add NAME --role admin" in capsys.readouterr().err


def test_the_cli_sends_its_token_to_a_server_that_requires_one(tmp_path, monkeypatch, capsys, migrated_file,
                                                               tmp_path_factory):
    from conftest import running_server

    from app.cli import main
    db = copy_with_users(tmp_path / "held.duckdb", migrated_file, tmp_path_factory.getbasetemp(),
                         {"rita": "reviewer"}, PASSWORD)
    app = create_app(Settings(db=db))
    token = accounts.create_token(app.state.db, "rita")
    app.state.db.close()
    monkeypatch.setenv("ORCHESTRACE_AUTH", "required")
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps(make_trace()))
    with running_server(db) as url:
        assert main(["ingest", "--db", str(db), "--server", url, str(trace)]) == 1
        assert "Bearer" in capsys.readouterr().out
        monkeypatch.setenv("ORCHESTRACE_TOKEN", token)
        assert main(["ingest", "--db", str(db), "--server", url, str(trace)]) == 0
        assert "ingested 1 trace(s)" in capsys.readouterr().out


def test_a_backup_through_a_server_that_requires_accounts_needs_an_admin_token(tmp_path, monkeypatch, capsys,
                                                                             migrated_file, tmp_path_factory):
    from conftest import running_server

    from app.cli import main
    db = copy_with_users(tmp_path / "held.duckdb", migrated_file, tmp_path_factory.getbasetemp(),
                         {"ada": "admin", "rita": "reviewer"}, PASSWORD)
    app = create_app(Settings(db=db))
    admin, reviewer = (accounts.create_token(app.state.db, n) for n in ("ada", "rita"))
    app.state.db.close()
    monkeypatch.setenv("ORCHESTRACE_AUTH", "required")
    with running_server(db) as url:
        target = tmp_path / "backups" / "copy.duckdb"  # the server writes only in its backup folder
        assert main(["backup", str(target), "--db", str(db), "--server", url]) == 1
        assert "--token" in capsys.readouterr().err
        assert main(["backup", str(target), "--db", str(db), "--server", url, "--token", reviewer]) == 1
        assert "needs the admin role" in capsys.readouterr().err and not target.exists()
        assert main(["backup", str(target), "--db", str(db), "--server", url, "--token", admin]) == 0
        assert target.exists()


def test_imported_label_histories_keep_their_reviewer_and_times_and_record_the_importer(lab, tmp_path, migrated_file,
                                                                                      tmp_path_factory):
    app, _ = lab
    rita = bearer(app, "rita") | {"Content-Type": "application/json"}
    with TestClient(app, base_url=BASE_URL) as client:
        client.post("/api/traces", content=json.dumps(make_trace()), headers=rita)
        client.post("/api/annotations", content=label(credit=0.25), headers=rita)
        client.post("/api/annotations", content=label(credit=0.75), headers=rita)
        export = client.get("/api/annotations/export?format=json&history=true", headers=rita).content
    other_db = copy_with_users(tmp_path / "other.duckdb", migrated_file, tmp_path_factory.getbasetemp(),
                               {"ada": "admin"}, PASSWORD)
    other = create_app(Settings(db=other_db, auth="required"))
    with TestClient(other, base_url=BASE_URL) as client:
        answer = client.post("/api/annotations/import", content=export,
                             headers=bearer(other, "ada") | {"Content-Type": "application/json"})
        assert answer.status_code == 200 and answer.json()["imported"] == 2
        rows = other.state.db.execute("SELECT reviewer, version, imported_by, created_at FROM annotations "
                                      "ORDER BY version").fetchall()
    original = json.loads(export)
    assert [(r[0], r[1], r[2]) for r in rows] == [("rita", 1, "ada"), ("rita", 2, "ada")]
    assert [r[3].isoformat() for r in rows] == [o["created_at"].rstrip("Z").replace("+00:00", "") for o in original]


def test_health_names_the_database_only_to_a_logged_in_caller_or_in_open_mode(lab, client):
    app, anonymous = lab
    assert anonymous.get("/api/health").json() == {"status": "ok"}  # no path for the anonymous
    answer = anonymous.get("/api/health", headers=bearer(app, "vic")).json()
    assert answer["status"] == "ok" and answer["db"].endswith("lab.duckdb")
    assert client.get("/api/health").json()["db"].endswith("test.duckdb")  # open single-user mode


def test_an_ipv6_loopback_host_is_served_when_allowed(client, tmp_path):
    assert client.get("/api/traces", headers={"Host": "[::1]:8000"}).status_code == 200
    assert client.get("/api/traces", headers={"Host": "[::1]"}).status_code == 200
    assert client.get("/api/traces", headers={"Host": "[::2]:8000"}).status_code == 400
    assert client.get("/api/traces", headers={"Host": "[::1"}).status_code == 400
    app = create_app(Settings(db=tmp_path / "v6.duckdb", allowed_hosts="[::1], lab.example.org"))
    with TestClient(app, base_url="http://[::1]:8000") as named:
        assert named.get("/api/traces").status_code == 200
        same_origin = named.post("/api/annotations", content=label(reviewer="me"),
                                 headers={"Content-Type": "application/json", "Origin": "http://[::1]:8000"})
        assert same_origin.status_code == 404  # past the Host and cross-site checks: no such trace
