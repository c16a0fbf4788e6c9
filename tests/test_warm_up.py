"""A started server has made, before its first answer, what its first requests would each make on first use
(app/main.py warm_up): every template compiled, every route table built, the analysis worker started, what it made kept
out of the collector's walks; and what it answers right after its start is what it would answer later."""

import gc

import pytest
from bs4 import BeautifulSoup
from conftest import BASE_URL, make_trace, post_json
from fastapi import routing
from fastapi.testclient import TestClient

from app.main import create_app
from app.store import analyst

pytestmark = pytest.mark.warm_up


@pytest.fixture
def restarted(settings):
    """A server over a store holding one trace, started again (nothing made on first use by its earlier life)."""
    with TestClient(create_app(settings), base_url=BASE_URL) as first:
        assert post_json(first, make_trace("kept")).status_code == 201
    return create_app(settings)


def refuse(*args, **kwargs):
    raise AssertionError("made on first use, after the server's start")


def test_every_template_is_compiled_before_the_first_request(restarted, monkeypatch):
    with TestClient(restarted, base_url=BASE_URL):
        env = restarted.state.templates.env
        names = env.list_templates()
        monkeypatch.setattr(env.loader, "get_source", refuse)  # what compiling a template not yet cached reads
        assert names and all(env.get_template(name).name == name for name in names)


def test_answers_right_after_the_start_need_no_route_table_built(restarted, monkeypatch):
    with TestClient(restarted, base_url=BASE_URL) as client:
        monkeypatch.setattr(routing._EffectiveRouteContext, "from_api_route", refuse)
        page = BeautifulSoup(client.get("/").text, "html.parser")
        assert "kept" in page.get_text()
        saved = client.post("/api/annotations", json={"trace_id": "kept", "event_id": "e2", "reviewer": "ada",
                                                      "credit": 0.5})
        assert saved.status_code == 201, saved.text
        items = client.get("/api/annotations", params={"trace_id": "kept"}).json()["items"]
        assert [(item["event_id"], item["reviewer"], item["credit"]) for item in items] == [("e2", "ada", 0.5)]


def test_the_analysis_worker_is_started_with_the_server(restarted, monkeypatch):
    monkeypatch.setattr(analyst, "_pool", None)  # as in a new server process: no worker yet
    with TestClient(restarted, base_url=BASE_URL):
        pool = analyst._pool
    assert pool is not None
    try:
        assert pool._processes and all(process.is_alive() for process in pool._processes.values())
    finally:
        pool.shutdown()


def test_what_the_first_start_made_is_kept_out_of_the_collectors_walks(restarted, monkeypatch):
    """Once per process: a later app's start (tests make many) leaves the collector as it is."""
    frozen = []
    monkeypatch.setattr(gc, "get_freeze_count", lambda: len(frozen))
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    with TestClient(restarted, base_url=BASE_URL):
        assert frozen == [True]
    with TestClient(create_app(restarted.state.settings), base_url=BASE_URL):
        assert frozen == [True]
