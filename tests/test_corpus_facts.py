"""Corpus facts built again in the background: work registered with Database.when_writes_pause runs once this
process's writes pause after a commit (and again after a failure), and a corpus page asked for once answers its next
view after an ingest from what the background built, reading no trace rows."""

import json
import threading
import time

import pytest
from bs4 import BeautifulSoup
from conftest import BASE_URL, make_trace, post_json
from fastapi.testclient import TestClient

import app.store.db as db_module
from app.main import create_app
from app.services.corpus import CorpusFacts, Fact
from app.settings import Settings
from app.store.db import Database
from app.store.sql import execute

QUIET_S = 0.05  # CHECKPOINT_QUIET_S for these tests: a pause of writes this long makes the work run
WAIT_S = 10  # a bound on waiting for the background thread, far above what it takes


@pytest.fixture
def quick_pause(monkeypatch):
    monkeypatch.setattr(db_module, "CHECKPOINT_QUIET_S", QUIET_S)
    monkeypatch.setattr(db_module, "CHECKPOINT_RETRY_S", QUIET_S)


def test_work_runs_once_writes_pause_after_a_commit_and_again_after_a_failure(tmp_path, quick_pause):
    db = Database(tmp_path / "store.duckdb")
    runs, failed_once, ran = [], threading.Event(), threading.Event()

    def work():
        runs.append(db.scalar("SELECT count(*) FROM t"))
        if not failed_once.is_set():
            failed_once.set()
            raise RuntimeError("the first run fails")
        ran.set()

    try:
        db.write(lambda cur: execute(cur, "CREATE TABLE t (x INTEGER)"))
        db.when_writes_pause(work, "counting")
        assert not failed_once.wait(QUIET_S * 6)  # nothing was committed since it was registered
        db.write(lambda cur: execute(cur, "INSERT INTO t VALUES (1)"))
        assert failed_once.wait(WAIT_S) and ran.wait(WAIT_S)  # the failure was logged, and the work run again
        assert runs == [1, 1]
        ran.clear()
        db.write(lambda cur: execute(cur, "INSERT INTO t VALUES (2)"))
        assert ran.wait(WAIT_S) and runs[-1] == 2
    finally:
        db.close()


def figures(response) -> dict:
    return json.loads(BeautifulSoup(response.text, "html.parser").select_one("script.charts-data").get_text())


@pytest.fixture
def refreshes(monkeypatch, quick_pause):
    """How many traces were stored when each run of CorpusFacts.refresh began, appended once it ended."""
    began: list[int] = []
    refresh = CorpusFacts.refresh

    def counted(self):
        stored = self._db.scalar("SELECT count(*) FROM traces")
        refresh(self)
        began.append(stored)

    monkeypatch.setattr(CorpusFacts, "refresh", counted)
    return began


def wait_for_a_refresh_that_saw(began: list[int], traces: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while traces not in began:
        assert time.monotonic() < deadline, f"the facts were not built again once writes paused: {began}"
        time.sleep(QUIET_S)


# Each page has a fact of its own, which neither page before it in this order builds: the list's facets (with the
# reward channels), the audit's rule totals, the dashboard's figures.
PAGES = ("/", "/audit", "/dashboard")


@pytest.fixture
def fact_builds(monkeypatch) -> list[tuple]:
    """(the CorpusFacts, the fact's name) of each corpus fact as it is built, on a view or in the background, by any
    app of the test (an app that only ingests builds its facts again after its own writes too)."""
    built: list[tuple] = []
    get = CorpusFacts._get

    def recorded(self, fact, versions):
        def build(db, facts):
            built.append((facts, fact.name))
            return fact.build(db, facts)
        return get(self, Fact(fact.name, build, fact.analyses), versions)

    monkeypatch.setattr(CorpusFacts, "_get", recorded)
    return built


def built_by(app, builds: list[tuple]) -> list[str]:
    """The facts that `app` built, of those recorded by fact_builds."""
    return [name for facts, name in builds if facts is app.state.corpus]


def test_pages_asked_for_once_are_answered_after_an_ingest_from_what_the_background_built(settings, refreshes,
                                                                                         fact_builds):
    app = create_app(settings)
    try:
        with TestClient(app, base_url=BASE_URL) as client:
            post_json(client, [make_trace("a"), make_trace("b")])
            for url in PAGES:
                client.get(url)  # asked for: from now on built again after writes
            late = make_trace("late", rewards={"novel": 0.5})
            late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
            post_json(client, late)
            wait_for_a_refresh_that_saw(refreshes, 3)
            fact_builds.clear()
            built = {url: client.get(url) for url in PAGES}
            assert built_by(app, fact_builds) == []  # no fact is built on the first views after the ingest
            assert "reward-novel" in figures(built["/dashboard"])
            assert figures(built["/dashboard"])["steps-wall"]["data"][0]["customdata"] == ["a", "b", "late"]
            total = BeautifulSoup(built["/audit"].text, "html.parser").select_one(
                '#rule-totals [data-rule="time_order"] .value')
            assert total.get_text(" ", strip=True) == "1 in 1 trace"
            columns = BeautifulSoup(built["/"].text, "html.parser").select("#trace-table th.reward")
            assert [th.get_text(strip=True) for th in columns] == ["novel", "team", "tool"]
    finally:
        app.state.db.close()


def test_pages_on_a_lake_are_answered_after_another_instances_ingest_from_what_the_background_built(
        migrated_lake, tmp_path, monkeypatch, quick_pause, fact_builds):
    """Two instances on one lake: the one viewing the pages builds their facts again once the other's ingest has
    committed, before anyone views them (its own commits are not what makes the work due)."""
    monkeypatch.setattr(db_module, "LAKE_WATCH_S", QUIET_S)
    began: dict[int, list[int]] = {}  # per instance's database: traces stored when each refresh began
    refresh = CorpusFacts.refresh

    def counted(self):
        stored = self._db.scalar("SELECT count(*) FROM traces")
        refresh(self)
        began.setdefault(id(self._db), []).append(stored)

    monkeypatch.setattr(CorpusFacts, "refresh", counted)
    with migrated_lake.copy(tmp_path / "lake") as url:
        shared = Settings(db=url, lake_data=str(tmp_path / "lake"))
        writer, viewer = create_app(shared), create_app(shared)
        with TestClient(writer, base_url=BASE_URL) as ingest, TestClient(viewer, base_url=BASE_URL) as client:
            post_json(ingest, [make_trace("a"), make_trace("b")])
            for page in PAGES:
                client.get(page)
            post_json(ingest, make_trace("late", rewards={"novel": 0.5}))
            wait_for_a_refresh_that_saw(began.setdefault(id(viewer.state.db), []), 3)
            fact_builds.clear()
            built = {page: client.get(page) for page in PAGES}
            assert built_by(viewer, fact_builds) == []
            assert "reward-novel" in figures(built["/dashboard"])
            assert figures(built["/dashboard"])["steps-wall"]["data"][0]["customdata"] == ["a", "b", "late"]


def test_pages_first_viewed_after_a_start_are_answered_from_what_was_built_ahead(settings, fact_builds):
    with TestClient(create_app(settings), base_url=BASE_URL) as client:
        post_json(client, [make_trace("a"), make_trace("b", rewards={"novel": 0.5})])
    app = create_app(settings)
    try:
        with TestClient(app, base_url=BASE_URL) as client:
            app.state.reanalysis.wait(WAIT_S)  # the stored traces analysed, then the facts built ahead
            fact_builds.clear()
            first = {url: client.get(url) for url in PAGES}
            assert built_by(app, fact_builds) == []
            assert "reward-novel" in figures(first["/dashboard"])
    finally:
        app.state.db.close()


def test_a_fact_asked_for_while_it_is_built_is_built_once(db):
    facts, started, release, calls = CorpusFacts(db), threading.Event(), threading.Event(), []

    def slow(db, _):
        calls.append(1)
        started.set()
        assert release.wait(WAIT_S)
        if len(calls) == 1:
            raise RuntimeError("the build fails")
        return object()

    fact = Fact("slow", slow)
    got: list = []

    def ask():
        try:
            got.append(facts.get(fact))
        except RuntimeError as exc:
            got.append(exc)

    builder = threading.Thread(target=ask)
    builder.start()
    assert started.wait(WAIT_S)
    waiter = threading.Thread(target=ask)
    waiter.start()
    time.sleep(QUIET_S)  # the second asker is waiting for the first's build
    release.set()
    builder.join(WAIT_S)
    waiter.join(WAIT_S)
    assert len(calls) == 1 and len(got) == 2 and all(isinstance(x, RuntimeError) for x in got)
    assert facts.get(fact) is facts.get(fact) and len(calls) == 2  # a failure is not kept: built again
