"""Issue 30, part 3: DuckDB leaves the analysis worker its core (app/store/db.py duckdb_threads)."""

import os

import pytest

from app.store import db as db_module


def test_the_store_runs_duckdb_on_the_cores_the_worker_leaves(db):
    assert db.fetchall("SELECT current_setting('threads') AS threads") == [{"threads": db_module.duckdb_threads()}]


@pytest.mark.parametrize(("cores", "threads"), [(1, 1), (2, 1), (4, 3), (16, 15)])
def test_duckdb_threads_are_the_usable_cores_but_one(monkeypatch, cores, threads):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert db_module.duckdb_threads() == threads
