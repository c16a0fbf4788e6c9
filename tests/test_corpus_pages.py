"""Corpus pages and the trace page's analysis panels."""

import json

from bs4 import BeautifulSoup
from conftest import make_trace, post_json

from app.services import analysis


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")


def test_audit_page_counts_rules_per_trace(client):
    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    post_json(client, [make_trace("fine"), late])
    page = soup(client.get("/audit"))
    rows = {tr["data-trace-id"]: tr for tr in page.select("#audit-table tbody tr")}
    assert list(rows) == ["late", "fine"]  # most errors first
    headers = [th.get_text(strip=True) for th in page.select("#audit-table thead th")]
    column = headers.index("time_order")
    assert rows["late"].select("td")[column].get_text() == "1"
    by_name = soup(client.get("/audit", params={"sort": "trace_id"}))
    assert [tr["data-trace-id"] for tr in by_name.select("#audit-table tbody tr")] == ["fine", "late"]


def test_analyses_stored_by_older_rules_are_made_again(client, db):
    post_json(client, make_trace("old"))
    fresh = soup(client.get("/audit"))
    warnings = fresh.select_one('tr[data-trace-id="old"]').select("td")[2].get_text()
    # as if an earlier version of the rules had stored a finding the current rules no longer make
    db.execute("UPDATE trace_metrics SET warnings = 7, analysis_version = 0")
    db.execute("INSERT INTO audit_findings VALUES ('old', 99, 'orphan_return', 'warning', 'stale', '[]')")
    assert analysis.ensure_all(db) == 1  # at startup: the pages themselves analyse nothing
    again = soup(client.get("/audit"))
    assert again.select_one('tr[data-trace-id="old"]').select("td")[2].get_text() == warnings
    assert "stale" not in client.get("/traces/old/analysis", headers={"HX-Request": "true"}).text


def test_dashboard_charts_link_to_traces(client):
    post_json(client, [make_trace("a"), make_trace("b")])
    page = soup(client.get("/dashboard"))
    figures = json.loads(page.select_one("script.charts-data").get_text())
    assert {"tokens-speedup", "steps-wall", "reward-team", "by-topology", "by-system", "findings"} <= set(figures)
    point = figures["steps-wall"]["data"][0]
    assert point["customdata"] == ["a", "b"] and point["meta"] == "trace-links"
    drawn = {el["data-chart"] for el in page.select("[data-chart]")}
    assert drawn == {name for name, figure in figures.items() if not figure["empty"]}


def test_an_empty_dashboard_says_how_to_get_traces(client):
    page = soup(client.get("/dashboard"))
    assert not page.select("[data-chart], script.charts-data")
    steps = page.select_one("#dashboard-empty").get_text(" ", strip=True)
    assert "orchestrace ingest" in steps and "/v1/traces" in steps and page.select_one('#dashboard-empty a[href="/"]')


def test_a_chart_with_nothing_to_draw_says_so_in_its_place(client):
    clean = make_trace("clean")
    for event in clean["events"]:
        event.pop("trusted", None)  # no untrusted content flowing anywhere
    clean["edges"].append({"src": "e4", "dst": "e5", "type": "causal"})  # and no disconnected events
    post_json(client, clean)
    page = soup(client.get("/dashboard"))
    empty = page.select_one('[data-empty-chart="findings"]')
    assert empty.h3.get_text() == "audit findings by rule" and "every trace passes" in empty.get_text()
    assert not page.select('[data-chart="findings"]') and page.select('[data-chart="by-topology"]')


def test_trace_list_has_metric_columns_and_sorts_by_them(client):
    big = make_trace("long")
    big["edges"].append({"src": "e4", "dst": "e5", "type": "causal"})
    post_json(client, [make_trace("short"), big])
    page = soup(client.get("/", params={"sort": "-critical_path_steps"}))
    assert [r["data-trace-id"] for r in page.select("tr[data-trace-id]")] == ["long", "short"]
    listed = client.get("/api/traces", params={"sort": "-critical_path_steps"}).json()["items"]
    assert listed[0]["critical_path_steps"] == 6


def test_analysis_and_credit_panels(client):
    post_json(client, make_trace("p"))
    panel = soup(client.get("/traces/p/analysis", headers={"HX-Request": "true"}))
    assert panel.select_one('#metrics-panel [data-metric="critical_path_steps"] .value').get_text() == "4"
    assert json.loads(panel.select_one("#show-critical-path")["data-path"]) == ["e1", "e2", "e3", "e4"]
    buttons = panel.select("#audit-findings button.finding")
    assert buttons and all(json.loads(b["data-events"]) is not None for b in buttons)
    assert "envelope" in json.loads(panel.select_one("script.charts-data").get_text())
    credit = soup(client.get("/traces/p/credit", params={"rule": "uniform", "channel": "tool"},
                             headers={"HX-Request": "true"}))
    units = [tr.select_one("td").get_text() for tr in credit.select("#rollup-table tbody tr")]
    assert units == ["token", "tool call", "message", "turn", "agent", "role", "orchestrator", "team"]
    assert client.get("/traces/nope/analysis", headers={"HX-Request": "true"}).status_code == 404


def test_a_panel_url_opened_directly_shows_the_trace_page(client):
    post_json(client, make_trace("p q"))
    for panel in ("analysis", "credit"):
        response = client.get(f"/traces/p%20q/{panel}", follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == f"/traces/p%20q#{panel}-panel"
        page = soup(client.get(f"/traces/p%20q/{panel}"))
        assert page.select_one(f"#{panel}-panel") is not None and page.select_one("#graph") is not None
    assert client.get("/traces/nope/analysis").status_code == 404
