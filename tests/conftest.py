"""Fixtures: a fresh DuckDB file, the app over it and an HTTP client, per test."""

import copy
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from users_file import copy_with_users

from app import main
from app.main import create_app
from app.settings import Settings
from app.store.db import Database

BASE_URL = "http://127.0.0.1"  # a host the server serves (the test client's default, testserver, is not)

SMALL_TRACE = {
    "trace_id": "t-small",
    "task_id": "task-1",
    "system": "unit-test",
    "topology": "centralized",
    "events": [
        {"id": "e1", "t": 0, "type": "orchestrator_decision", "agent": "lead", "role": "lead"},
        {"id": "e2", "t": 1.5, "type": "spawn", "agent": "lead", "to": "worker", "reward": 0.5},
        {"id": "e3", "t": 2, "type": "tool_call", "agent": "worker", "tool": "web.search",
         "credit": {"agent": 0.2}, "tags": ["x", None, 3]},
        {"id": "e4", "t": 3, "type": "tool_result", "agent": "web.search", "tool": "web.search",
         "trusted": False, "content_ref": "sha256:ab"},
        {"id": "e5", "t": 4, "type": "return", "agent": "worker", "from": "worker", "to": "lead"},
        {"id": "e6", "t": 5, "type": "aggregate", "agent": "lead"},
    ],
    "edges": [
        {"src": "e1", "dst": "e2", "type": "causal"},
        {"src": "e2", "dst": "e3", "type": "spawn"},
        {"src": "e3", "dst": "e4", "type": "tool_dependency"},
        {"src": "e5", "dst": "e6", "type": "return"},
    ],
    "rewards": {"team": 1, "tool": 0.25},
    "costs": {"tokens": 1200, "wall_clock_s": 5.5, "tool_calls": 1, "messages": 0},
    "metrics": {"task_success": 1},
}


def make_trace(trace_id: str = "t-small", **changes) -> dict:
    """A small valid trace (a fresh copy), with top-level keys changed as given."""
    trace = copy.deepcopy(SMALL_TRACE)
    trace["trace_id"] = trace_id
    trace.update(changes)
    return trace


def pytest_addoption(parser):
    parser.addoption("--store", choices=("file", "lake"), default="file",
                     help="the store the `settings` fixture names: a DuckDB file (default) or a DuckLake on a "
                          "throwaway PostgreSQL (issue 16)")


def pytest_collection_modifyitems(config, items):
    """The files marked `heavy` first (pytest-xdist hands out files in this order: one taken last would run alone
    at the end while the other core idles). On a lake, run only the tests whose store is the `settings` fixture's:
    the others open files of their own and would only repeat the file run; so would those marked `above_the_store`
    (what they check is decided before the store: a request refused unread, parsing, decoding, the receiver's
    timing; their reads and writes are other lake tests' too. 2-5 s each on a lake, 0.2-0.5 on a file)."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)  # stable: files stay whole, in order
    if config.getoption("--store") != "lake":
        return
    on_lake = {item: "settings" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("above_the_store")
               for item in items}
    config.hook.pytest_deselected(items=[item for item, kept in on_lake.items() if not kept])
    items[:] = [item for item, kept in on_lake.items() if kept]


@pytest.fixture(autouse=True)
def route_tables_on_first_use(request, monkeypatch):
    """The apps of a test build the route tables of the routes it calls, on their first use, rather than all of them
    at their start as a server does (app/main.py warm_up): 0.15 s an app, for routes the test never calls
    (test_api_traces.py and test_annotations.py took 39-43 s instead of 52-55). Tests marked `warm_up` start as a
    server does (tests/test_warm_up.py)."""
    if request.node.get_closest_marker("warm_up") is None:
        monkeypatch.setattr(main, "build_route_tables", lambda app: None)


@pytest.fixture(scope="session")
def postgres(request):
    """A throwaway PostgreSQL for the whole run, when the tests run against a lake."""
    from lake import ThrowawayPostgres

    try:
        server = ThrowawayPostgres()
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"no PostgreSQL for a DuckLake store: {exc}")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def migrated_lake(postgres, tmp_path_factory):
    """The migrated lake each test's store is a copy of."""
    from lake import MigratedLake

    return MigratedLake(postgres, tmp_path_factory.mktemp("lake-template"))


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "test.duckdb"


@pytest.fixture(scope="session")
def migrated_file(tmp_path_factory) -> Path:
    """A DuckDB file the app has migrated: each test's store is a copy of it (a third of the time a fresh
    migration takes, over a thousand tests)."""
    path = tmp_path_factory.mktemp("file-template") / "template.duckdb"
    close(create_app(Settings(db=path)))
    return path


def close(app) -> None:
    """Close an app that served no request (its lifespan never ran): its start's background pass first."""
    app.state.reanalysis.stop()
    app.state.live.close()
    app.state.db.close()


@pytest.fixture
def settings(request, db_path, tmp_path):
    if request.config.getoption("--store") == "lake":
        lake_data = tmp_path / "lake"
        with request.getfixturevalue("migrated_lake").copy(lake_data) as url:
            yield Settings(db=url, lake_data=str(lake_data))
    else:
        if not db_path.exists():
            shutil.copyfile(request.getfixturevalue("migrated_file"), db_path)
        yield Settings(db=db_path)


@pytest.fixture
def app(settings):
    app = create_app(settings)
    yield app
    close(app)


@pytest.fixture
def client(app):
    with TestClient(app, base_url=BASE_URL) as client:
        yield client


@pytest.fixture
def db(app) -> Database:
    return app.state.db


LAB_PASSWORD = "correct horse battery staple"


@contextmanager
def lab_clients(tmp_path, roles: dict[str, str]):
    """A server that requires accounts, with a user of each name and role, and a client per user sending their
    token; closed after."""
    from app.services import accounts

    folder = tmp_path.parent  # the run's base folder: the accounts' file is made once a run for each set of roles
    template = folder / "lab-template.duckdb"
    if not template.exists():
        close(create_app(Settings(db=template)))
    db = copy_with_users(tmp_path / "lab.duckdb", template, folder, roles, LAB_PASSWORD)
    app = create_app(Settings(db=db, auth="required"))
    clients = {}
    for name in roles:
        token = accounts.create_token(app.state.db, name, "test")
        clients[name] = TestClient(app, base_url=BASE_URL, headers={"Authorization": f"Bearer {token}"})
    try:
        yield clients
    finally:
        close(app)


def post_json(client, payload, **params):
    return client.post("/api/traces", content=json.dumps(payload), params=params,
                       headers={"Content-Type": "application/json"})


def csrf_token(client) -> str:
    """The form token a page hands this browser (in its body's hx-headers)."""
    page = client.get("/").text
    return re.search(r'"X-CSRF-Token": "([^"]+)"', page).group(1)


def form_headers(client, target: str | None = None) -> dict:
    """Headers of an htmx form post: the CSRF token the pages hand out (and the swap target)."""
    headers = {"HX-Request": "true", "X-CSRF-Token": csrf_token(client)}
    return headers | ({"HX-Target": target} if target else {})


SERVER_START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(proc, url: str, deadline: float, why=lambda: "") -> None:
    """Poll a started server's /api/health until it answers; fail when it exits or `deadline` (monotonic)
    passes, saying `why()` (e.g. its log)."""
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/health").close()
            return
        except OSError:
            assert proc.poll() is None and time.monotonic() < deadline, f"the server did not start{why()}"
            time.sleep(0.1)


@contextmanager
def running_server(db_path: Path):
    """A real `orchestrace serve` (uvicorn) over a DuckDB file on a free loopback port; its base URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve", "--db", str(db_path), "--port", str(port)],
                            cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, url, time.monotonic() + SERVER_START_TIMEOUT_S)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)
