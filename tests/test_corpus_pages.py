"""Corpus pages and the trace page's analysis panels."""

import json

from bs4 import BeautifulSoup
from conftest import make_trace, post_json

from app.ingest import log
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


def test_the_ingest_log_pages_newest_first_and_filters_by_source_and_outcome(client, db):
    log.record(db, log.Receipt("POST /api/traces", "orchestrace", "traces", received=1000, used=1000,
                               created=[f"t{i:04d}" for i in range(1000)]))
    for n in range(30):
        log.record(db, log.Receipt("POST /v1/traces", "otlp/json", "spans", received=n, used=n))
    partial = log.Receipt("POST /v1/traces", "otlp/json", "spans", received=5, used=3)
    partial.skip("no GenAI span", 2)
    log.record(db, partial)
    for n in range(25):
        log.record(db, log.Receipt("orchestrace ingest", "orchestrace", "traces").refused(422, f"invalid {n}"))
    everything = client.get("/api/ingest-log", params={"limit": 1000}).json()
    assert everything["total"] == 57
    assert [i["received_at"] for i in everything["items"]] == sorted((i["received_at"] for i in everything["items"]),
                                                                    reverse=True)
    assert everything["items"][0]["error"] == "invalid 24"  # newest first
    by_outcome = {o: client.get("/api/ingest-log", params={"outcome": o}).json()["total"]
                  for o in ("ok", "partial", "refused")}
    assert by_outcome == {"ok": 31, "partial": 1, "refused": 25}
    assert client.get("/api/ingest-log", params={"outcome": "fine"}).status_code == 422
    otlp = client.get("/api/ingest-log", params={"endpoint": "POST /v1/traces", "offset": 30, "limit": 10}).json()
    assert otlp["total"] == 31 and [i["received"] for i in otlp["items"]] == [0]
    first = soup(client.get("/ingest-log"))
    assert len(first.select("#ingest-log tbody tr")) == 50 and "page 1 of 2" in first.select_one(".pager").get_text()
    second = soup(client.get("/ingest-log", params={"page": 2}))
    assert len(second.select("#ingest-log tbody tr")) == 7
    refused = soup(client.get("/ingest-log", params={"outcome": "refused", "endpoint": "orchestrace ingest"}))
    assert {tr["class"][0] for tr in refused.select("#ingest-log tbody tr")} == {"refused"}
    assert "25 receipts match" in refused.select_one("#ingest-log .count").get_text()


def test_a_receipt_of_many_traces_names_a_few_and_links_them_all(client, db):
    log.record(db, log.Receipt("POST /api/traces", "orchestrace", "traces", received=1000, used=1000,
                               created=[f"t{i:04d}" for i in range(1000)], repeated=["old"]))
    item = client.get("/api/ingest-log").json()["items"][0]
    assert item["created"] == [f"t{i:04d}" for i in range(100)] and item["created_count"] == 1000
    assert item["repeated"] == ["old"] and item["repeated_count"] == 1 and item["extended_count"] == 0
    whole = client.get(f"/api/ingest-log/{item['id']}").json()
    assert len(whole["created"]) == 1000 and whole["created_count"] == 1000 and whole["outcome"] == "ok"
    assert client.get("/api/ingest-log/nope").status_code == 404
    row = soup(client.get("/ingest-log")).select_one(f'tr[data-receipt-id="{item["id"]}"]')
    assert [a.get_text() for a in row.select(".traces .trace-ref a")][:5] == [f"t{i:04d}" for i in range(5)]
    more = row.select_one(".trace-ref.more a")
    assert more["href"] == f"/api/ingest-log/{item['id']}" and "995 more new (1,000 in all)" in more.get_text()
    assert len(row.select(".traces .trace-ref a")) == 7  # five new, the rest's link, one repeated


def test_the_labels_page_pages(client):
    trace = make_trace("labelled")
    post_json(client, trace)
    for reviewer in [f"r{n:02d}" for n in range(30)]:
        for event in ("e1", "e2"):
            family = "R1" if event == "e1" else "R2"
            body = {"trace_id": "labelled", "event_id": event, "reviewer": reviewer, "credit": 0.5,
                    "reward_family": family}
            assert client.post("/api/annotations", json=body).status_code == 201
    first = soup(client.get("/annotations"))
    assert "60 labels" in first.select_one("#labels-table .count").get_text()
    assert len(first.select("#labels-table tbody tr")) == 50
    second = soup(client.get("/annotations", params={"page": 2}))
    assert len(second.select("#labels-table tbody tr")) == 10
    family = soup(client.get("/annotations", params={"reward_family": "R2"}))
    assert "30 labels" in family.select_one("#labels-table .count").get_text()
    assert not family.select(".pager")


def test_a_new_reward_channel_is_a_column_as_soon_as_a_trace_brings_it(client):
    post_json(client, make_trace("a"))
    columns = [th.get_text(strip=True) for th in soup(client.get("/")).select("#trace-table th.reward")]
    assert columns == ["team", "tool"]
    post_json(client, make_trace("b", rewards={"novel": 1}))
    columns = [th.get_text(strip=True) for th in soup(client.get("/")).select("#trace-table th.reward")]
    assert columns == ["novel", "team", "tool"]
    assert "reward-novel" in json.loads(soup(client.get("/dashboard")).select_one("script.charts-data").get_text())


def critical_steps(client) -> list:
    figures = json.loads(soup(client.get("/dashboard")).select_one("script.charts-data").get_text())
    return figures["steps-wall"]["data"][0]["y"]


def test_the_dashboard_is_made_again_when_analyses_are(client, db):
    post_json(client, [make_trace("a"), make_trace("b")])
    assert critical_steps(client) == [4, 4]
    # as an older analysis, with the measures index_traces made of it
    db.execute("UPDATE trace_metrics SET critical_path_steps = 99, analysis_version = 0")
    db.execute("UPDATE trace_measures SET critical_path_steps = 99")
    assert critical_steps(client) == [99, 99]
    analysis.ensure_all(db)
    assert critical_steps(client) == [4, 4]


def test_the_audit_totals_follow_the_traces_stored(client):
    post_json(client, make_trace("fine"))
    assert not soup(client.get("/audit")).select('#rule-totals [data-rule="time_order"]')
    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    post_json(client, late)
    total = soup(client.get("/audit")).select_one('#rule-totals [data-rule="time_order"] .value')
    assert total.get_text(" ", strip=True) == "1 in 1 trace"
