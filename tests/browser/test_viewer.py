"""The viewer in a real browser: upload, list filters, graph selection, inspector, permalink, overlays,
and a trace whose every string is a script injection."""

import json
import re
from urllib.parse import quote

import pytest

from app.domain.figure import lane_label
from browser.conftest import REPO

expect = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed").expect

SAMPLES = REPO / "sample_traces"
INJECTION = REPO / "tests" / "fixtures" / "injection_trace.json"
DEBATE_ID = "sample-debate-001"
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=1">'
JS_URL = "javascript:window.__pwned=1"
TEXTAREA = "</textarea><script>window.__pwned=1</script>"
SCORE = "<i>score</i>"
CREDIT_SVG = 'credit."><svg onload=window.__pwned=1>'
ODD_EVENT_ID = 'e11"><img src=x onerror=window.__pwned=1>'
# Elements that exist only if a payload was parsed as markup instead of shown as text
# (JSON data islands are inline scripts too, but never run).
INJECTED_MARKUP = ("img[src='x'], svg[onload], iframe, b[onmouseover], "
                   "script:not([src]):not([type='application/json']), a[href^='javascript:' i]")


def drop_console_errors(page, pattern: str) -> None:
    """Forget the console errors a test provoked on purpose (e.g. Chromium logging a 422 answer)."""
    page.console_errors[:] = [e for e in page.console_errors if not re.search(pattern, e)]


def open_trace(page, base: str, trace_id: str, query: str = ""):
    page.goto(f"{base}/traces/{quote(trace_id, safe='')}{query}")
    page.wait_for_selector('#graph[data-drawn="true"]', state="attached")


def expect_selected(page, event_id: str) -> None:
    expect(page.locator("#event-inspector [data-selected-event]")).to_have_attribute(
        "data-selected-event", event_id)


def assert_not_pwned(page) -> None:
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator(INJECTED_MARKUP).count() == 0, page.locator(INJECTED_MARKUP).evaluate_all(
        "els => els.map(e => e.outerHTML)")


def hover_marker(page, event_id: str, shown: str) -> None:
    """Move the mouse onto an event's marker and check its hover label shows `shown` as text."""
    page.locator("#graph").scroll_into_view_if_needed()
    position = page.evaluate("""(id) => {
        const gd = document.getElementById("graph");
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
        for (const trace of gd.data) {
            if (trace.visible === false || trace.mode !== "markers" || !trace.hovertext) continue;
            const k = trace.hovertext.findIndex((text) => text.startsWith("<b>" + id + "</b>"));
            if (k < 0) continue;
            return {x: box.left + xa._offset + xa.l2p(xa.d2l(trace.x[k])),
                    y: box.top + ya._offset + ya.l2p(ya.d2l(trace.y[k]))};
        }
        return null;
    }""", event_id)
    assert position, f"no visible marker with hover text for {event_id}"
    page.mouse.move(position["x"] - 3, position["y"] - 3)
    page.mouse.move(position["x"], position["y"])
    label = page.locator("#graph .hoverlayer .hovertext").first
    expect(label).to_be_visible()
    expect(label).to_contain_text(event_id)
    expect(label).to_contain_text(shown)


@pytest.fixture(scope="module")
def debate(ingest):
    """The debate sample, stored once for the module: its tests only read it."""
    ingest(SAMPLES / "debate.json")
    return DEBATE_ID


@pytest.fixture(scope="module")
def injection(ingest):
    """The injection trace, stored once for the module: its tests only read it."""
    ingest(INJECTION)
    return "injection-001"


def test_upload_sample_through_form(page, live_server):
    page.goto(live_server + "/")
    page.set_input_files("#upload-form input[type=file][name=file]", SAMPLES / "centralized.json")
    page.click("#upload-submit")
    link = page.locator("#upload-result .upload-ok a", has_text="sample-centralized-001")
    expect(link).to_be_visible()
    assert link.get_attribute("href") == "/traces/sample-centralized-001"
    row = page.locator('#trace-table tr[data-trace-id="sample-centralized-001"]')
    expect(row).to_be_visible()
    expect(row.locator("a.trace-link")).to_have_attribute("href", "/traces/sample-centralized-001")
    page.reload()
    expect(row).to_be_visible()


def test_upload_refused_names_json_paths(page, live_server, tmp_path):
    bad = json.loads((SAMPLES / "debate.json").read_text())
    bad["trace_id"] = "refused-001"
    bad["events"][2]["type"] = "telepathy"
    path = tmp_path / "refused.json"
    path.write_text(json.dumps(bad))
    page.goto(live_server + "/")
    page.set_input_files("#upload-form input[type=file][name=file]", path)
    page.click("#upload-submit")
    problem = page.locator("#upload-result .upload-errors li", has_text="events[2].type")
    expect(problem).to_be_visible()
    expect(problem).to_contain_text("telepathy")
    expect(page.locator("#upload-result .upload-ok")).to_have_count(0)
    expect(page.locator('#trace-table tr[data-trace-id="refused-001"]')).to_have_count(0)
    drop_console_errors(page, r"status of 422")


def test_select_events_by_table_api_and_edge_links(page, live_server, debate):
    open_trace(page, live_server, DEBATE_ID)
    expect(page.locator("#event-inspector [data-selected-event]")).to_have_count(0)

    row = page.locator("#events-table tr[data-event-id]").nth(3)
    clicked = row.get_attribute("data-event-id")
    row.locator("td").first.click()
    expect_selected(page, clicked)
    expect(page).to_have_url(re.compile(r"\?event=" + re.escape(quote(clicked, safe=""))))

    chosen = page.locator("#events-table tr[data-event-id]").nth(7).get_attribute("data-event-id")
    page.evaluate("(id) => window.orchestrace.selectEvent(id)", chosen)
    expect_selected(page, chosen)

    edge = page.locator("#event-inspector a.edge-link").first
    expect(edge).to_be_visible()
    target = edge.get_attribute("data-event-id") or edge.inner_text().strip()
    edge.click()
    expect_selected(page, target)
    assert target != chosen


def test_permalink_opens_the_inspector(page, live_server, debate):
    open_trace(page, live_server, DEBATE_ID, "?event=e006")
    expect_selected(page, "e006")
    expect(page.locator("#event-inspector")).to_contain_text("e006")


def test_events_table_filter_by_type(page, live_server, debate):
    open_trace(page, live_server, DEBATE_ID)
    messages = [e["id"] for e in json.loads((SAMPLES / "debate.json").read_text())["events"]
                if e["type"] == "message"]
    page.select_option("#events-table select[name=type]", "message")
    rows = page.locator("#events-table tr[data-event-id]")
    expect(rows).to_have_count(len(messages))
    assert sorted(rows.evaluate_all("rows => rows.map(r => r.dataset.eventId)")) == sorted(messages)


@pytest.mark.parametrize("channel", ["reward", "credit.agent"])
def test_overlay_recolours_with_a_colour_bar(page, live_server, debate, channel):
    open_trace(page, live_server, DEBATE_ID)
    expect(page.locator("#graph .colorbar")).to_have_count(0)
    page.select_option("select#overlay-select", channel)
    page.wait_for_selector(f'#graph[data-overlay="{channel}"]', state="attached")
    expect(page.locator("#graph .colorbar").first).to_be_attached()
    page.select_option("select#overlay-select", "")
    expect(page.locator("#graph .colorbar")).to_have_count(0)


def test_filter_list_by_text_and_topology(page, live_server, ingest):
    ingest(*(SAMPLES / f"{name}.json" for name in ("debate", "swarm", "hierarchical", "harness")))
    page.goto(live_server + "/")
    rows = page.locator("#trace-table tr[data-trace-id]")
    expect(page.locator('#trace-table tr[data-trace-id="sample-swarm-001"]')).to_be_visible()

    page.locator("#trace-filters input[name=q]").press_sequentially("swarm")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-trace-id", "sample-swarm-001")
    expect(page).to_have_url(re.compile(r"[?&]q=swarm(&|$)"))

    page.locator("#trace-filters input[name=q]").fill("")
    expect(page.locator('#trace-table tr[data-trace-id="sample-debate-001"]')).to_be_visible()
    page.select_option("#trace-filters select[name=topology]", "debate")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-trace-id", "sample-debate-001")
    expect(page).to_have_url(re.compile(r"[?&]topology=debate(&|$)"))

    page.reload()
    expect(rows).to_have_count(1)
    expect(page.locator("#trace-filters select[name=topology]")).to_have_value("debate")


@pytest.mark.parametrize("csp", [pytest.param("csp-off", marks=pytest.mark.bypass_csp), "csp-on"])
def test_injected_strings_stay_text(page, live_server, injection, csp):
    """Every string of the trace is a payload; with the CSP off, escaping alone must keep them inert."""
    page.goto(live_server + "/?reward=" + quote("<b>team</b>"))  # its channel a column, among the module's traces
    row = page.locator('#trace-table tr[data-trace-id="injection-001"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text(SCRIPT)
    expect(row).to_contain_text(IMG)
    expect(page.locator("#trace-table thead")).to_contain_text("<b>team</b>")
    assert_not_pwned(page)

    page.locator("#trace-filters input[name=q]").press_sequentially("<script>")
    expect(page.locator("#trace-table tr[data-trace-id]")).to_have_count(1)
    assert_not_pwned(page)

    row.locator("a.trace-link").click()
    page.wait_for_selector('#graph[data-drawn="true"]', state="attached")
    expect(page.locator("main")).to_contain_text(SCRIPT)
    assert_not_pwned(page)

    for event_id, payload in [("e1", SCRIPT), ("e4", IMG), ("e9", JS_URL), ("e5", TEXTAREA)]:
        page.evaluate("(id) => window.orchestrace.selectEvent(id)", event_id)
        expect_selected(page, event_id)
        expect(page.locator("#event-inspector")).to_contain_text(payload)
        assert_not_pwned(page)
    expect(page.locator("#event-inspector")).to_contain_text('<iframe src="javascript:window.__pwned=1"></iframe>')

    page.locator("#events-table tr[data-event-id='e3'] td").first.click()
    expect_selected(page, "e3")
    expect(page.locator("#event-inspector")).to_contain_text("{{7*7}}")
    expect(page.locator("#event-inspector")).to_contain_text('<b onmouseover="window.__pwned=1">hover me</b>')

    page.evaluate("(id) => window.orchestrace.selectEvent(id)", ODD_EVENT_ID)
    expect_selected(page, ODD_EVENT_ID)
    page.locator("#event-inspector a.edge-link").first.click()
    expect_selected(page, "e10")
    assert_not_pwned(page)

    page.select_option("select#overlay-select", SCORE)
    expect(page.locator("#graph")).to_have_attribute("data-overlay", SCORE)
    expect(page.locator("#graph .colorbar").first).to_contain_text(SCORE)
    assert_not_pwned(page)

    hover_marker(page, "e1", SCRIPT)
    assert_not_pwned(page)

    open_trace(page, live_server, "injection-001", "?event=" + quote(ODD_EVENT_ID, safe=""))
    expect_selected(page, ODD_EVENT_ID)
    assert_not_pwned(page)


def test_graph_labels_show_payloads_literally(page, live_server, injection):
    """Plotly parses tags in its labels: lane names, hover text and colour-bar titles must show the raw strings."""
    open_trace(page, live_server, "injection-001")
    for agent in (SCRIPT, IMG, JS_URL):  # long names are shortened on lanes, never interpreted
        expect(page.locator("#graph .ytick text").filter(has_text=lane_label(agent))).to_have_count(1)
    hover_marker(page, "e4", IMG)
    page.select_option("select#overlay-select", CREDIT_SVG)
    expect(page.locator("#graph")).to_have_attribute("data-overlay", CREDIT_SVG)
    expect(page.locator("#graph .colorbar").first).to_contain_text(CREDIT_SVG)
    assert_not_pwned(page)
