"""HTML pages and the graph API, checked by CSS selectors over a real DuckDB file."""

import json
import re
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from conftest import BASE_URL, csrf_token, form_headers, make_trace, post_json
from fastapi.testclient import TestClient

from app.domain.figure import build_figure, concurrency, spawn_tree
from app.main import create_app
from app.services import accounts

ROOT = Path(__file__).resolve().parent.parent
from app.settings import Settings

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
HX = {"HX-Request": "true"}
PASSWORD = "correct horse battery"


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
    for name in ("Trace", "Task", "System", "Topology", "Events", "Agents", "Wall s", "Tokens", "team"):
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
    linked = {a["data-event-id"] for a in inspector.select(".inspector-edges a.edge-link")}
    expected = {e["dst"] for e in trace["edges"] if e["src"] == event["id"]} | \
               {e["src"] for e in trace["edges"] if e["dst"] == event["id"]}
    assert linked == expected
    lane = sorted((e for e in trace["events"] if e["agent"] == event["agent"]), key=lambda e: e["t"])
    at = [e["id"] for e in lane].index(event["id"])
    neighbours = [a["data-event-id"] for a in inspector.select(".lane-neighbours a.edge-link")]
    assert neighbours == [e["id"] for e in lane[max(0, at - 2):at] + lane[at + 1:at + 3]]
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
    assert "script-src 'self';" in csp and "unsafe-eval" not in csp and "unsafe-inline" not in csp.split("style-src")[0]


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
    drawn = json.dumps([figure["figure"], figure["lane_labels"], [lane["label"] for lane in figure["lanes"]]])
    assert "<script>" not in drawn and "<img" not in drawn  # what plotly renders as HTML: hover text, labels
    assert "&lt;script&gt;" in drawn
    # The raw name stays only where the page matches agents (find, focus): as data it never writes as HTML
    assert figure["lanes"][figure["lane_of"]["<script>x()</script>"]]["agent"] == "<script>x()</script>"
    scripts = [path for path in (ROOT / "static").rglob("*.js") if "vendor" not in path.parts]
    assert scripts and not [p.name for p in scripts if re.search(r"innerHTML|insertAdjacentHTML|outerHTML\s*=",
                                                               p.read_text())]


def test_concurrency_counts_agents_alive_at_once():
    xs, ys = concurrency({"a": (0, 10), "b": (2, 5), "c": (5, 7)})
    assert max(ys) == 3  # at t=5, b ends and c starts: all three alive
    assert ys[-1] == 0


def test_trace_page_labels_reported_and_computed_figures_apart(client, loaded):
    page = soup(client.get("/traces/sample-hierarchical-001"))
    computed = page.select_one('.summary-group[aria-labelledby="computed-label"]')
    reported = page.select_one('.summary-group[aria-labelledby="reported-label"]')
    assert "computed from the events" in computed.select_one(".group-label").get_text()
    assert "reported by the trace" in reported.select_one(".group-label").get_text()
    assert [s.get_text() for s in computed.select(".stat .label")] == ["events", "edges", "agents"]
    assert reported.select_one('[data-reported="costs.messages"]') and "critical_steps" in \
        reported.select_one('[data-reported="metrics"]').get_text()
    panel = soup(client.get("/traces/sample-hierarchical-001/analysis", headers=HX))
    assert "computed from the events" in panel.select_one("h2").get_text()
    steps = panel.select_one('#metrics-panel [data-metric="critical_path_steps"]')
    assert steps.select_one(".value").get_text() == "56" and steps.select_one(".reported").get_text() == "trace says 84"
    assert panel.select_one('[data-metric="tool_calls"] .reported') is None  # 86 reported, 86 counted
    assert panel.select_one('[data-metric="protocol_overhead"] .reported') is None  # 0.292 is 0.2922 rounded


def test_agents_are_counted_one_way_on_every_page(client, loaded):
    """The list, the header, the facet and the metrics say the same: team members, not tools nor people."""
    for trace_id, agents in (("sample-harness-001", 6), ("sample-planner_executor_critic-001", 4)):
        row = soup(client.get("/", params={"q": trace_id})).select_one(f'tr[data-trace-id="{trace_id}"]')
        headers = [th.get_text(" ", strip=True) for th in soup(client.get("/")).select("#trace-table thead th")]
        assert row.select("td")[headers.index("Agents")].get_text() == str(agents)
        page = soup(client.get(f"/traces/{trace_id}"))
        assert page.select_one('[data-stat="agents"] .value').get_text() == str(agents)
        assert page.select_one("#agent-count").get_text().startswith(f"({agents} agents")
        assert len(page.select('#agent-facet tr[data-kind="agent"]')) == agents
        assert client.get(f"/api/traces/{trace_id}/metrics").json()["agents"] == agents
    harness = soup(client.get("/traces/sample-harness-001"))
    assert harness.select_one("#agent-count").get_text() == "(6 agents · 9 tools · 1 person)"
    assert harness.select_one('#agent-facet tr[data-kind="person"] a').get_text() == "user"
    assert "not counted as agents" in harness.select_one("#agent-facet tr.subhead").get_text()


def test_audit_panel_groups_findings_by_rule_with_counts(client):
    noisy = make_trace("noisy")
    noisy["events"] += [{"id": f"c{k}", "t": 3.5 + k / 10, "type": "tool_call", "agent": "worker", "tool": "x"}
                        for k in range(3)] + [{"id": "u2", "t": 3.2, "type": "tool_result", "agent": "x", "tool": "x",
                                               "trusted": False}]
    noisy["edges"] += [{"src": "e4", "dst": "c0", "type": "causal"}, {"src": "u2", "dst": "c1", "type": "causal"},
                       {"src": "c0", "dst": "c2", "type": "causal"}, {"src": "e1", "dst": "e1", "type": "causal"},
                       {"src": "e3", "dst": "u2", "type": "causal"}]
    noisy["costs"]["tool_calls"] = 4
    post_json(client, noisy)
    panel = soup(client.get("/traces/noisy/analysis", headers=HX))
    groups = {g["data-rule"]: g for g in panel.select("#audit-findings details.rule-group")}
    assert list(groups) == ["untrusted_flow", "disconnected", "self_loop"]  # warnings, the noisiest first
    flow = groups["untrusted_flow"]
    assert flow.select_one(".rule-count").get_text() == "2" and len(flow.select("button.finding")) == 2
    assert flow.has_attr("open")
    assert "untrusted e4 (web.search) reaches 2 tool_calls" in flow.select("button.finding")[0].get_text()
    audit_head = next(h2.get_text(" ", strip=True) for h2 in panel.select("h2") if h2.get_text().startswith("Audit"))
    assert audit_head.endswith("0 errors · 4 warnings · 0 info · 3 rules")


def test_upload_without_a_file_says_so_and_keeps_the_drop_zone(client):
    headers = form_headers(client, "upload-result")
    fragment = client.post("/upload", files={"other": ("x.txt", "x")}, headers=headers)
    assert fragment.status_code == 400 and "<html" not in fragment.text
    result = soup(fragment).select_one("#upload-result")
    assert "No file chosen" in result.select_one(".notice.error").get_text()
    assert "{" not in result.get_text()  # a message, not the JSON refusal
    page = client.post("/upload", data={"csrf_token": csrf_token(client)}, files={"other": ("x.txt", "x")})
    assert page.status_code == 400
    full = soup(page)
    assert full.select_one("#upload-form input[type=file]") and "No file chosen" in full.select_one(
        "#upload-result").get_text()
    not_traces = client.post("/upload", files={"file": ("t.json", "[1, 2]")}, headers=headers)
    assert not_traces.status_code == 422 and soup(not_traces).select_one("#upload-result .notice.error")


def test_upload_of_a_stored_id_offers_to_replace_it(client):
    headers = form_headers(client, "upload-result")
    first = make_trace("again")
    assert client.post("/upload", files={"file": ("t.json", json.dumps(first))}, headers=headers).status_code == 201
    client.post("/api/annotations", json={"trace_id": "again", "event_id": "e6", "reviewer": "ada", "credit": 1})
    second = make_trace("again")
    second["events"] = second["events"][:5]  # e6, the labelled event, is gone from the new version
    second["edges"] = [e for e in second["edges"] if "e6" not in (e["src"], e["dst"])]
    taken = client.post("/upload", files={"file": ("t.json", json.dumps(second))}, headers=headers)
    assert taken.status_code == 409
    result = soup(taken).select_one("#upload-result")
    assert [a.get_text() for a in result.select(".upload-taken li a")] == ["again"]
    assert "?replace=true" not in result.get_text()  # not the API's advice: a button
    button = result.select_one("button#upload-replace")
    assert button["hx-post"] == "/upload?replace=true" and button["hx-include"] == "#upload-form"
    assert button["hx-target"] == "#upload-result"
    replaced = client.post("/upload?replace=true", files={"file": ("t.json", json.dumps(second))}, headers=headers)
    assert replaced.status_code == 201
    result = soup(replaced).select_one("#upload-result")
    assert "replacing the stored version" in result.select_one(".notice.ok").get_text()
    assert "1 label points at events the new version lacks" in result.select_one(".upload-orphaned").get_text()
    assert len(client.get("/api/traces/again").json()["events"]) == 5


def test_trace_page_deletes_keeping_labels_and_the_list_says_so(client, loaded):
    for credit in (0.5, 1):
        client.post("/api/annotations", json={"trace_id": "sample-debate-001", "event_id": "e001",
                                              "reviewer": "ada", "credit": credit})
    page = soup(client.get("/traces/sample-debate-001"))
    assert page.select_one("#delete-trace-button")
    dialog = page.select_one("dialog#delete-trace")
    assert dialog["data-trace-id"] == "sample-debate-001"
    text = dialog.select_one("#delete-trace-labels").get_text(" ", strip=True)
    assert "2 label versions" in text and "current labels on 1 event" in text and "kept" in text
    assert "keep its labels" in dialog.select_one("#delete-trace-confirm").get_text()
    assert "no labels" in soup(client.get("/traces/sample-swarm-001")).select_one("#delete-trace-labels").get_text()
    assert client.delete("/api/traces/sample-debate-001", params={"force": "true"}).json()["labels_kept"] == 2
    notice = soup(client.get("/", params={"deleted": "sample-debate-001"})).select_one("#deleted-notice")
    assert "Deleted trace sample-debate-001" in notice.get_text() and "2 label versions are kept" in notice.get_text()
    assert soup(client.get("/", params={"deleted": "sample-swarm-001"})).select_one("#deleted-notice") is None


def test_the_delete_control_is_offered_only_to_who_may_delete(tmp_path):
    app = create_app(Settings(db=tmp_path / "lab.duckdb", auth="required"))
    with TestClient(app, base_url=BASE_URL) as anonymous:
        for name, role in (("ada", "admin"), ("rita", "reviewer")):
            accounts.add_user(app.state.db, name, role, PASSWORD)
        token = accounts.create_token(app.state.db, "ada", "test")
        assert anonymous.post("/api/traces", content=json.dumps(make_trace("lab")), headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {token}"}).status_code == 201
        for name, offered in (("ada", True), ("rita", False)):
            client = TestClient(app, base_url=BASE_URL)
            login = client.get("/login").text
            csrf = re.search(r'name="csrf_token" value="([^"]+)"', login).group(1)
            client.post("/login", data={"username": name, "password": PASSWORD, "csrf_token": csrf})
            page = soup(client.get("/traces/lab"))
            assert (page.select_one("#delete-trace-button") is not None) is offered, name
            assert (page.select_one("dialog#delete-trace") is not None) is offered, name


def test_trace_table_keeps_the_id_column_and_labels_every_header(client, loaded):
    table = soup(client.get("/")).select_one("#trace-table")
    assert table.select_one(".scroll-frame > .table-scroll > table.data")
    heads = table.select("thead th")
    assert heads[0].get_text(strip=True).startswith("Trace")
    short = {th.get_text(" ", strip=True): th.get("title", "") for th in heads}
    assert "wall clock seconds" in short["Wall s"] and "team members" in short["Agents"]
    rewards = table.select("thead th.reward")
    assert rewards[0]["class"] == ["num", "reward", "group-start"] and "reported by the trace" in rewards[0]["title"]
    css = client.get("/static/app.css").text
    assert re.search(r"#trace-table th:first-child, #trace-table td:first-child \{ position: sticky; left: 0;", css)


def test_audit_page_counts_findings_by_rule_first(client):
    late = make_trace("late")
    late["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    loops = make_trace("loops")
    loops["edges"] += [{"src": "e1", "dst": "e1", "type": "causal"}, {"src": "e2", "dst": "e2", "type": "causal"}]
    post_json(client, [make_trace("fine"), late, loops])
    page = soup(client.get("/audit"))
    totals = page.select("#rule-totals [data-rule]")
    assert [t["data-rule"] for t in totals] == ["time_order", "disconnected", "self_loop"]  # errors, then most
    assert [t.select_one(".value").get_text(" ", strip=True) for t in totals] == [
        "1 in 1 trace", "2 in 2 traces", "2 in 1 trace"]
    assert "cycle" in page.select_one("#quiet-rules").get_text()
    headers = [th.get_text(strip=True) for th in page.select("#audit-table thead th")]
    assert headers[4:] == ["time_order", "disconnected", "self_loop"]  # only rules that found something


def test_lane_labels_of_a_thousand_lanes_are_thinned_so_they_never_overlap():
    from app.domain.figure import LABEL_PX, lane_ticks, lanes_px
    from app.domain.generate import generate_swarm
    figure = build_figure(generate_swarm(1000, 5000, seed=3), group_by_role=False)
    lanes, axis = figure["lanes"], figure["figure"]["layout"]["yaxis"]
    assert len(lanes) > 900 and figure["lane_labels"] == [lane["label"] for lane in lanes]
    px_per_label = lanes_px(figure["figure"]["layout"]["height"]) / len(lanes) * (axis["tickvals"][1] - axis["tickvals"][0])
    assert px_per_label >= LABEL_PX  # labels at least one text height apart
    assert axis["ticktext"] == [lanes[i]["label"] for i in axis["tickvals"]]
    assert len(axis["tickvals"]) < len(lanes)
    few = build_figure(make_trace())["figure"]["layout"]["yaxis"]
    assert few["tickvals"] == list(range(len(few["ticktext"])))  # a small trace labels every lane
    assert lane_ticks(["a", "b", "c", "d", "e"], 100, 1, 3) == {"tickvals": [1, 2, 3], "ticktext": ["b", "c", "d"]}
    assert lane_ticks([str(i) for i in range(100)], 140, 10, 59)["tickvals"] == [10, 15, 20, 25, 30, 35, 40, 45, 50, 55]
