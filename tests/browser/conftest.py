"""Browser fixtures: a live server over a fresh DuckDB file per module, headless Chromium, and a page
that fails its test on any console error or uncaught exception and leaves a screenshot behind when its test failed
(every test's, with ORCHESTRACE_SCREENSHOTS=all: a full-page screenshot is a tenth of a browser test's time).

This folder has an `__init__.py` so that this file imports as `browser.conftest` and does not shadow
`tests/conftest.py`, which the flat tests import as `conftest`.
"""

import functools
import json
import os
import re
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import orjson
import pytest
import uvicorn

from app.domain.generate import generate_swarm
from app.main import create_app
from app.settings import Settings

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:
    sync_playwright = None

HERE = Path(__file__).resolve().parent
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-output" / "screenshots"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1440, "height": 900}
EVERY_SCREENSHOT = os.environ.get("ORCHESTRACE_SCREENSHOTS") == "all"
SERVER_START_TIMEOUT_S = 10
TIMEOUT_MS = 10_000

if sync_playwright is None:
    SKIP_REASON = "the playwright package is not installed (pip install -e '.[test]')"
elif not CHROMIUM.exists():
    SKIP_REASON = f"no Chromium at {CHROMIUM} (make chromium)"
else:
    SKIP_REASON = None
    expect.set_options(timeout=TIMEOUT_MS)


def pytest_configure(config):
    config.addinivalue_line("markers", "bypass_csp: run the page with its Content-Security-Policy switched off")


def pytest_collection_modifyitems(config, items):
    """Skip every test of this folder, with the reason, when there is no browser to drive."""
    if not SKIP_REASON:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(skip)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test, for the `page` fixture to tell whether its test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Fail a test whose page logged console errors; a test failing anyway gets them as a note."""
    page = item.funcargs.get("page")
    try:
        result = yield
    except BaseException as exc:
        if page is not None and page.console_errors:
            exc.add_note("the page also logged errors:\n" + "\n".join(page.console_errors))
        raise
    if page is not None and page.console_errors:
        raise AssertionError("the page logged errors:\n" + "\n".join(page.console_errors))
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def live_server(tmp_path_factory, migrated_file):
    """Base URL of the app served by uvicorn in a thread, over a fresh database for this module (a copy of the
    migrated one: 0.07 s against a migration's 0.3)."""
    db = tmp_path_factory.mktemp("live") / "browser.duckdb"
    shutil.copyfile(migrated_file, db)
    yield from serve(create_app(Settings(db=db)))


def serve(app):
    """Serve `app` with uvicorn in a thread; yields its base URL, then stops it."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(SERVER_START_TIMEOUT_S)


@pytest.fixture(scope="module")
def ingest(live_server):
    """Store traces through the live server's JSON API; returns the ingested trace ids. Module-scoped, as the
    server is, so that a module-scoped fixture may store what several tests read."""

    def ingest(*traces: dict | Path, replace: bool = True) -> list[str]:
        docs = [json.loads(t.read_text()) if isinstance(t, Path) else t for t in traces]
        response = httpx.post(f"{live_server}/api/traces", content=json.dumps(docs),
                              params={"replace": str(replace).lower()},
                              headers={"Content-Type": "application/json"})
        assert response.status_code == 201, response.text
        return response.json()["ingested"]

    return ingest


@functools.cache
def _generated_swarm(agents: int, events: int, seed: int) -> dict:
    return generate_swarm(agents, events, seed=seed)


def swarm(agents: int, events: int, seed: int, trace_id: str) -> dict:
    """generate_swarm's trace under `trace_id`, for `post_swarm`; not to be changed. Generated once for a worker's
    modules (a 30,000-event trace takes 1-4 s, and is some 30 MB to keep)."""
    return _generated_swarm(agents, events, seed) | {"trace_id": trace_id}


def post_swarm(live_server: str, trace: dict) -> None:
    """Store a large trace through the live server's JSON API, replacing one of its id; written with orjson (json
    takes five times as long)."""
    response = httpx.post(f"{live_server}/api/traces", content=orjson.dumps(trace), params={"replace": "true"},
                          headers={"Content-Type": "application/json"}, timeout=120)
    assert response.status_code == 201, response.text


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module. Not session-wide: Playwright's sync API keeps an event loop running
    on the main thread while it is open, which would break later tests that run their own loop."""
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def page(browser, request):
    """A fresh page that records console errors and uncaught exceptions (`pytest_runtest_call` fails on them).

    `page.console_errors` lists them as they come; a test that provokes an error on purpose (a refused
    upload answers 422, which Chromium logs) removes the expected entries itself.
    """
    context = browser.new_context(viewport=VIEWPORT,
                                  bypass_csp=request.node.get_closest_marker("bypass_csp") is not None)
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.console_errors = []
    page.on("console", lambda msg: msg.type == "error" and page.console_errors.append(
        f"console: {msg.text} ({msg.location.get('url', '')})"))
    page.on("pageerror", lambda exc: page.console_errors.append(f"pageerror: {exc}"))
    yield page
    failed = any(getattr(getattr(request.node, f"report_{when}", None), "failed", False) for when in ("setup", "call"))
    try:
        if failed or EVERY_SCREENSHOT:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / (re.sub(r"[^\w.-]+", "_", request.node.name) + ".png")),
                            full_page=True)
    finally:
        context.close()
