"""Analysis in bulk at ingest (issue 30): stored beside the traces of each request, equal to the per-trace
reference functions, made again in bulk for a new analysis version, and never computed by a corpus page."""

import json
import threading
import time
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from conftest import BASE_URL, make_trace, post_json
from fastapi.testclient import TestClient
from test_framework_fixtures import AGENTS_FIXTURES, OTLP_FIXTURES, post_fixture

from app.domain.audit import audit
from app.domain.generate import generate_swarm
from app.domain.metrics import analyse_graph, compute_metrics
from app.main import create_app
from app.services import analysis
from app.store import analysis as analysis_store
from app.store import analyst
from app.store import traces as trace_store
from app.store.writes import ANALYSIS_COLUMNS

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
CORPUS_PAGES = ("/", "/?sort=-critical_path_steps", "/?sort=-warnings", "/dashboard", "/audit")


def assert_stored_analyses_equal_the_reference(db) -> int:
    """Every stored trace's stored analysis equals compute_metrics and audit of the trace as read back."""
    ids = trace_store.trace_ids(db)
    for trace_id in ids:
        trace = trace_store.read_trace(db, trace_id)
        g = analyse_graph(trace)
        metrics, findings = compute_metrics(trace, g), audit(trace, g)
        row = db.fetchone("SELECT * FROM trace_metrics WHERE trace_id = ?", [trace_id])
        assert row is not None, f"{trace_id}: no analysis stored at ingest"
        assert row["analysis_version"] == analysis.ANALYSIS_VERSION
        assert json.loads(row["metrics"]) == json.loads(json.dumps(metrics)), trace_id
        assert {key: row[key] for key in ANALYSIS_COLUMNS} == {key: metrics[key] for key in ANALYSIS_COLUMNS}, trace_id
        counts = {f"{s}s": sum(f["severity"] == s for f in findings) for s in ("error", "warning", "info")}
        assert {key: row[key] for key in counts} == counts, trace_id
        assert analysis_store.read_findings(db, trace_id) == json.loads(json.dumps(findings)), trace_id
    return len(ids)


def test_sample_traces_are_analysed_at_ingest_as_the_reference_would(client, db):
    for path in sorted(SAMPLES.glob("*.json")):
        assert client.post("/api/traces", content=path.read_bytes(),
                           headers={"Content-Type": "application/json"}).status_code == 201
    assert assert_stored_analyses_equal_the_reference(db) == len(list(SAMPLES.glob("*.json")))


def test_generated_traces_of_one_request_are_analysed_as_the_reference_would(client, db):
    traces = [generate_swarm(agents, events, seed=seed)
              for seed, (agents, events) in enumerate([(3, 12), (3, 20), (6, 37), (6, 37), (20, 300), (60, 1500)])]
    for k, trace in enumerate(traces):
        trace["trace_id"] = f"gen-{k}"
    broken = make_trace("broken")
    broken["edges"] += [{"src": "e6", "dst": "e1", "type": "causal"}, {"src": "e2", "dst": "e2", "type": "message"},
                        {"src": "e1", "dst": "e2", "type": "causal"}]
    post_json(client, [*traces, broken, make_trace("small")])
    assert assert_stored_analyses_equal_the_reference(db) == len(traces) + 2


@pytest.mark.parametrize("name", OTLP_FIXTURES + AGENTS_FIXTURES)
def test_recorded_framework_runs_are_analysed_as_the_reference_would(client, db, name):
    """Through their live receivers: the live builder stores the trace, and its analysis with it."""
    post_fixture(client, name)
    assert assert_stored_analyses_equal_the_reference(db) >= 1


def test_a_replace_analyses_the_new_trace(client, db):
    post_json(client, make_trace("r"))
    before = db.scalar("SELECT critical_path_steps FROM trace_metrics WHERE trace_id = 'r'")
    longer = make_trace("r")
    longer["edges"].append({"src": "e4", "dst": "e5", "type": "causal"})  # joins two chains: a longer path
    post_json(client, longer, replace="true")
    assert db.scalar("SELECT count(*) FROM trace_metrics WHERE trace_id = 'r'") == 1
    assert db.scalar("SELECT critical_path_steps FROM trace_metrics WHERE trace_id = 'r'") > before
    assert_stored_analyses_equal_the_reference(db)


@pytest.fixture
def no_analysis_on_view(monkeypatch):
    """The per-trace path raises: a page that analyses a trace on view fails."""
    def refuse(*args, **kwargs):
        raise AssertionError("a page analysed a trace on view")

    monkeypatch.setattr(analysis, "analyse", refuse)


def test_corpus_pages_read_stored_analyses_and_compute_none(client, no_analysis_on_view):
    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    post_json(client, [make_trace("fine"), late])
    for path in CORPUS_PAGES:
        assert client.get(path).status_code == 200, path
    audit_page = BeautifulSoup(client.get("/audit").text, "html.parser")
    assert [tr["data-trace-id"] for tr in audit_page.select("#audit-table tbody tr")] == ["late", "fine"]


def test_a_new_analysis_version_analyses_every_trace_again_in_bulk(settings, client, db):
    post_json(client, [make_trace(f"v{k}") for k in range(5)])
    db.execute("UPDATE trace_metrics SET warnings = 7, analysis_version = 0")
    db.execute("INSERT INTO audit_findings VALUES ('v0', 99, 'orphan_return', 'warning', 'stale', '[]')")
    seen = []
    assert analysis.ensure_all(db, batch=2, progress=lambda done, total: seen.append((done, total))) == 5
    assert seen == [(0, 5), (2, 5), (4, 5), (5, 5)]
    assert analysis.ensure_all(db) == 0
    assert_stored_analyses_equal_the_reference(db)


def test_the_server_analyses_stale_traces_again_in_the_background_and_pages_say_so(settings, client, db,
                                                                                      monkeypatch):
    post_json(client, [make_trace(f"old{k}") for k in range(3)])
    db.execute("UPDATE trace_metrics SET analysis_version = 0, warnings = 7")
    db.close()
    gate, analysed = threading.Event(), []
    reference = analyst.analyse_tables

    def waiting(heads, events, edges):  # the pass waits after its first batch, so a page can be seen meanwhile
        analysed.extend(head["trace_id"] for head in heads)
        if len(analysed) == 2:
            gate.wait(30)
        return reference(heads, events, edges)

    monkeypatch.setattr(analyst, "analyse_tables", waiting)
    monkeypatch.setattr(analysis, "REANALYSIS_BATCH", 1)
    restarted = create_app(settings)
    try:
        with TestClient(restarted, base_url=BASE_URL) as browser:
            deadline = time.monotonic() + 30
            while len(analysed) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            page = BeautifulSoup(browser.get("/").text, "html.parser")
            assert "1 of 3 done" in " ".join(page.select_one("#reanalysis").text.split())
            assert len(page.select("#trace-table tbody tr")) == 3  # the list answers from what is stored
            gate.set()
            restarted.state.reanalysis.wait(30)
            assert BeautifulSoup(browser.get("/").text, "html.parser").select_one("#reanalysis") is None
            assert_stored_analyses_equal_the_reference(restarted.state.db)
    finally:
        gate.set()
