"""HTML pages and the graph API, checked by CSS selectors over a real DuckDB file."""

import json
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from conftest import form_headers, make_trace, post_json

from app.domain.figure import build_figure, concurrency, spawn_tree

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
HX = {"HX-Request": "true"}


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")


@pytest.fixture
def loaded(client):
    traces = [json.loads(p.read_text()) for p in sorted(SAMPLES.glob("*.json"))]
    assert post_json(client, traces).status_code == 201
    return {t["trace_id"]: t for t in traces}


def test_trace_list_shows_every_trace_with_columns(client, loaded):
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["Vary"] == "HX-Request"
    page = soup(response)
    rows = page.select("#trace-table tbody tr[data-trace-id]")
    assert {r["data-trace-id"] for r in rows} == set(loaded)
    headers = [th.get_text(" ", strip=True) for th in page.select("#trace-table thead th")]
    for name in ("Trace", "Task", "System", "Topology", "Events", "Agents", "Wall clock s", "Tokens", "team"):
        assert any(h.startswith(name) for h in headers), name
    assert page.select_one("#upload-form input[type=file][name=file]")
    assert page.select_one("#trace-filters input[name=q]")


def test_trace_list_filters_sort_and_fragment(client, loaded):
    response = client.get("/", params={"topology": "debate"}, headers=HX | {"HX-Target": "trace-table"})
    assert "<html" not in response.text
    fragment = soup(response)
    assert [r["data-trace-id"] for r in fragment.select("tr[data-trace-id]")] == ["sample-debate-001"]
    by_events = soup(client.get("/", params={"sort": "-events"}))
    ids = [r["data-trace-id"] for r in by_events.select("tr[data-trace-id]")]
    counts = {i: len(t["events"]) for i, t in loaded.items()}
    assert ids == sorted(counts, key=counts.get, reverse=True)
    by_reward = soup(client.get("/", params={"sort": "reward:team"}))
    assert len(by_reward.select("tr[data-trace-id]")) == len(loaded)
    nothing = soup(client.get("/", params={"q": "no-such-thing"}))
    assert "No traces match" in nothing.select_one("#trace-table").get_text()
    assert client.get("/", params={"sort": "bogus"}).status_code == 200  # falls back to the default order


def test_trace_list_pages(client):
    post_json(client, [make_trace(f"p{i:02d}") for i in range(30)])
    first = soup(client.get("/", params={"sort": "trace_id"}))
    assert len(first.select("tr[data-trace-id]")) == 25
    assert "page 1 of 2" in first.select_one(".pager").get_text()
    second = soup(client.get("/", params={"sort": "trace_id", "page": 2}))
    assert [r["data-trace-id"] for r in second.select("tr[data-trace-id]")] == [f"p{i:02d}" for i in range(25, 30)]
    for absurd, shown in ((0, 1), (-3, 1), (3, 2), (10**21, 2)):  # stale or hand-edited links
        page = soup(client.get("/", params={"sort": "trace_id", "page": absurd}))
        assert f"page {shown} of 2" in page.select_one(".pager").get_text()
        assert page.select("tr[data-trace-id]")
    events = soup(client.get("/traces/p00", params={"page": 10**21}))
    assert len(events.select("#events-table tbody tr")) == len(make_trace()["events"])


def test_upload_form_stores_or_lists_errors(client):
    headers = form_headers(client, "upload-result")
    good = client.post("/upload", files={"file": ("t.json", json.dumps(make_trace("up1")))}, headers=headers)
    assert good.status_code == 201
    assert [a.get_text() for a in soup(good).select(".upload-ok a")] == ["up1"]
    bad_trace = make_trace("up2")
    bad_trace["events"][0]["type"] = "<b>spawnn</b>"
    bad = client.post("/upload", files={"file": ("t.json", json.dumps(bad_trace))}, headers=headers)
    assert bad.status_code == 422
    items = [li.get_text(" ", strip=True) for li in soup(bad).select(".upload-errors li")]
    assert any("events[0].type" in item and "spawnn" in item for item in items)
    assert "<b>spawnn</b>" not in bad.text  # escaped, not markup
    broken = client.post("/upload", files={"file": ("t.json", "{oops")}, headers=headers)
    assert broken.status_code == 400 and "line 1" in soup(broken).select_one(".notice.error").get_text()
    forged = client.post("/upload", files={"file": ("t.json", json.dumps(make_trace("up3")))},
                         headers=headers | {"X-CSRF-Token": "forged"})
    assert forged.status_code == 403
    assert client.get("/api/traces/up3").status_code == 404


def test_trace_page_has_graph_panels_and_events(client, loaded):
    response = client.get("/traces/sample-harness-001")
    assert response.status_code == 200
    page = soup(response)
    assert page.select_one("#graph")["data-trace-id"] == "sample-harness-001"
    assert page.select_one("#event-inspector")
    assert len(page.select("#events-table tbody tr[data-event-id]")) == 50
    options = [o["value"] for o in page.select("#overlay-select option")]
    assert "reward" in options and "credit.agent" in options
    tree_agents = [a.get_text() for a in page.select(".tree .agent")]
    assert tree_agents[0] == "user" or tree_agents[0] == "main"
    assert page.select_one('script[src^="/static/vendor/plotly-"]')


def test_events_table_fragment_filters(client, loaded):
    response = client.get("/traces/sample-harness-001", params={"type": "tool_call"},
                          headers=HX | {"HX-Target": "events-table"})
    assert "<html" not in response.text
    types = {td.get_text(strip=True) for td in soup(response).select("tbody tr td:nth-of-type(3)")}
    assert types == {"tool_call"}


def test_inspector_fragment_and_permalink(client, loaded):
    trace = loaded["sample-centralized-001"]
    event = trace["events"][5]
    fragment = client.get(f"/traces/sample-centralized-001?event={event['id']}",
                          headers=HX | {"HX-Target": "event-inspector"})
    assert "<html" not in fragment.text
    inspector = soup(fragment)
    assert inspector.select_one("[data-selected-event]")["data-selected-event"] == event["id"]
    fields = {th.get_text(): td.get_text(" ", strip=True) for th, td in
              ((tr.th, tr.td) for tr in inspector.select("table.fields tr"))}
    assert set(event) <= set(fields)
    linked = {a["data-event-id"] for a in inspector.select("a.edge-link")}
    expected = {e["dst"] for e in trace["edges"] if e["src"] == event["id"]} | \
               {e["src"] for e in trace["edges"] if e["dst"] == event["id"]}
    assert linked == expected
    full = soup(client.get(f"/traces/sample-centralized-001?event={event['id']}"))
    assert full.select_one("#event-inspector [data-selected-event]")["data-selected-event"] == event["id"]
    assert full.select_one("#graph")["data-selected"] == event["id"]
    missing = soup(client.get("/traces/sample-centralized-001?event=nope"))
    assert "no event" in missing.select_one("#event-inspector").get_text()


def test_unknown_trace_and_page_are_404_pages(client):
    response = client.get("/traces/nope")
    assert response.status_code == 404 and "Not found" in soup(response).h1.get_text()
    assert client.get("/no/such/page").status_code == 404
    assert client.get("/api/traces/nope/figure").status_code == 404
    assert client.get("/api/traces/nope/figure").json()["error"]


def test_security_headers(client):
    csp = client.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self' 'unsafe-eval'" in csp and "unsafe-inline" not in csp.split("style-src")[0]


def test_plotly_htmx_and_styles_are_served_locally(client, loaded):
    page = soup(client.get("/traces/sample-debate-001"))
    local = [s["src"] for s in page.select("script[src]")] + [link["href"] for link in page.select("link[href]")]
    assert all(url.startswith("/") and not url.startswith("//") for url in local)
    assert any("plotly-" in url for url in local) and any("htmx-" in url for url in local)
    for url in local:
        assert client.get(url).status_code == 200, url
    assert not page.select("[src^=http], [href^=http]")


def test_figure_api_and_overlays(client, loaded):
    figure = client.get("/api/traces/sample-swarm-001/figure").json()
    trace = loaded["sample-swarm-001"]
    assert figure["event_ids"] == [e["id"] for e in trace["events"]]
    kinds = [t.get("meta", {}).get("kind") for t in figure["figure"]["data"]]
    assert kinds.count("events") == len({e["type"] for e in trace["events"]})
    assert sum(len(t["customdata"]) for t in figure["figure"]["data"] if t.get("meta", {}).get("kind") == "events") \
        == len(trace["events"])
    edge_types = {t["meta"]["edge_type"] for t in figure["figure"]["data"] if t.get("meta", {}).get("kind") == "edge"}
    assert edge_types == {e["type"] for e in trace["edges"]}
    grouped = client.get("/api/traces/sample-swarm-001/figure", params={"group": "role"}).json()
    assert grouped["grouped"] and len(grouped["lanes"]) < len(figure["lanes"])
    overlays = {c["name"] for c in client.get("/api/traces/sample-swarm-001/overlays").json()["channels"]}
    assert {"reward", "credit.agent"} <= overlays
    values = client.get("/api/traces/sample-swarm-001/overlay", params={"channel": "reward"}).json()["values"]
    assert values == [e.get("reward") for e in trace["events"]]
    assert client.get("/api/traces/sample-swarm-001/overlay", params={"channel": "nope"}).status_code == 404


def test_figure_lanes_follow_the_spawn_tree():
    trace = make_trace()
    trace["events"] = [
        {"id": "a", "t": 0, "type": "spawn", "agent": "lead", "to": "w2"},
        {"id": "b", "t": 1, "type": "spawn", "agent": "lead", "to": "m1"},
        {"id": "c", "t": 2, "type": "spawn", "agent": "m1", "to": "w1"},
        {"id": "d", "t": 3, "type": "tool_call", "agent": "w1", "tool": "search"},
        {"id": "e", "t": 4, "type": "tool_result", "agent": "search", "tool": "search"},
        {"id": "f", "t": 5, "type": "return", "agent": "w2", "to": "lead"},
    ]
    trace["edges"] = [{"src": "d", "dst": "e", "type": "tool_dependency"}]
    order, parents, _ = spawn_tree(trace["events"])
    assert order == ["lead", "w2", "m1", "w1"]
    assert parents["w1"] == "m1"
    figure = build_figure(trace)
    assert [lane["label"] for lane in figure["lanes"]] == ["lead", "w2", "m1", "w1"]
    assert figure["positions"]["y"][4] == 3  # the tool result sits on its caller's lane


def test_long_instance_keys_are_shortened_on_lanes_but_never_made_alike():
    trace = make_trace()
    agents = ["triage#span_b79d572d550d4626a1b8facb", "billing#span_79fe0880944c43fc9ccfaee9",
              "w#a-" + "x" * 30, "w#b-" + "x" * 30,
              "a-very-long-agent-name-with-no-instance-id", "short#1"]
    trace["events"] = [{"id": f"e{i}", "t": i, "type": "message", "agent": a} for i, a in enumerate(agents)]
    trace["edges"] = []
    labels = [lane["label"] for lane in build_figure(trace)["lanes"]]
    assert labels[:2] == ["triage#…2d550d4626a1b8facb", "billing#…0944c43fc9ccfaee9"]
    assert labels[2:4] == agents[2:4]  # shortened they would read the same: kept whole
    assert labels[4:] == ["a-very-long-agent-name-wi…", "short#1"]
    assert all(len(label) <= 26 for label in labels[:2] + labels[4:])


def test_hover_text_and_labels_are_escaped():
    trace = make_trace()
    trace["events"][0]["agent"] = "<script>x()</script>"
    trace["events"][0]["content_ref"] = "<img src=x onerror=y()>"
    figure = build_figure(trace)
    text = json.dumps(figure)
    assert "<script>" not in text and "<img" not in text
    assert "&lt;script&gt;" in text


def test_concurrency_counts_agents_alive_at_once():
    xs, ys = concurrency({"a": (0, 10), "b": (2, 5), "c": (5, 7)})
    assert max(ys) == 3  # at t=5, b ends and c starts: all three alive
    assert ys[-1] == 0
