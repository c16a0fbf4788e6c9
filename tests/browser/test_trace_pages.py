"""The trace list and trace page in a real browser: refused uploads as messages, replace and delete, the
wide trace table, and audit findings grouped by rule."""

import json
import re

import httpx
import pytest

from browser.conftest import REPO
from browser.test_viewer import drop_console_errors, open_trace

expect = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed").expect

SAMPLES = REPO / "sample_traces"
SMALL_VIEWPORT = {"width": 1280, "height": 800}


def upload(page, path) -> None:
    page.set_input_files("#upload-form input[type=file][name=file]", path)
    page.click("#upload-submit")


def test_upload_without_a_file_says_so_and_the_drop_zone_still_works(page, live_server):
    page.goto(live_server + "/")
    page.click("#upload-submit")
    notice = page.locator("#upload-result .notice.error")
    expect(notice).to_contain_text("No file chosen")
    expect(notice).not_to_contain_text("{")
    upload(page, SAMPLES / "swarm.json")
    expect(page.locator("#upload-result .upload-ok a", has_text="sample-swarm-001")).to_be_visible()
    expect(page.locator("#upload-result .notice.error")).to_have_count(0)
    drop_console_errors(page, r"status of 400")


def test_a_refusal_answered_in_json_is_shown_as_a_message(page, live_server, tmp_path):
    """A refusal the upload route does not render (here a wrong form token, 403 JSON) becomes a readable line."""
    trace = json.loads((SAMPLES / "debate.json").read_text()) | {"trace_id": "forged-001"}
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(trace))
    page.goto(live_server + "/")
    page.evaluate("""() => document.body.setAttribute("hx-headers", '{"X-CSRF-Token": "forged"}')""")
    upload(page, path)
    notice = page.locator("#upload-result .notice.error")
    expect(notice).to_contain_text("Refused, nothing stored.")
    expect(notice).to_contain_text("form token")
    expect(notice).to_contain_text("HTTP 403")
    expect(page.locator('#trace-table tr[data-trace-id="forged-001"]')).to_have_count(0)
    drop_console_errors(page, r"status of 403")
    page.reload()
    upload(page, path)
    expect(page.locator("#upload-result .upload-ok a", has_text="forged-001")).to_be_visible()


def test_an_id_stored_already_is_replaced_from_the_upload_result(page, live_server, ingest):
    ingest(SAMPLES / "centralized.json")
    page.goto(live_server + "/")
    upload(page, SAMPLES / "centralized.json")
    taken = page.locator("#upload-result .upload-taken")
    expect(taken).to_contain_text("stored already")
    expect(taken.locator("a", has_text="sample-centralized-001")).to_be_visible()
    page.click("#upload-replace")
    stored = page.locator("#upload-result .notice.ok")
    expect(stored).to_contain_text("replacing the stored version")
    expect(stored.locator("a", has_text="sample-centralized-001")).to_be_visible()
    drop_console_errors(page, r"status of 409")


def test_delete_from_the_trace_page_keeps_the_labels(page, live_server, ingest):
    trace = json.loads((SAMPLES / "planner_executor_critic.json").read_text()) | {"trace_id": "to-delete"}
    ingest(trace)
    for credit in (0.5, 1):
        assert httpx.post(f"{live_server}/api/annotations", json={
            "trace_id": "to-delete", "event_id": trace["events"][0]["id"], "reviewer": "ada",
            "credit": credit}).status_code == 201
    open_trace(page, live_server, "to-delete")
    page.click("#delete-trace-button")
    dialog = page.locator("dialog#delete-trace")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("2 label versions")
    expect(dialog).to_contain_text("kept")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    page.click("#delete-trace-button")
    page.click("#delete-trace-confirm")
    expect(page).to_have_url(re.compile(r"/\?deleted=to-delete$"))
    expect(page.locator("#deleted-notice")).to_contain_text("Deleted trace to-delete")
    expect(page.locator("#deleted-notice")).to_contain_text("2 label versions are kept")
    expect(page.locator('#trace-table tr[data-trace-id="to-delete"]')).to_have_count(0)
    labels = httpx.get(f"{live_server}/api/annotations", params={"trace_id": "to-delete"}).json()
    assert len(labels["items"]) == 1  # the current label, its history kept too


def test_the_trace_table_scrolls_under_a_fixed_id_column(page, live_server, ingest):
    ingest(*sorted(SAMPLES.glob("*.json")))
    page.set_viewport_size(SMALL_VIEWPORT)
    page.goto(live_server + "/")
    frame, box = page.locator("#trace-table .scroll-frame"), page.locator("#trace-table .table-scroll")
    assert box.evaluate("el => el.scrollWidth > el.clientWidth"), "the sample columns should not fit at 1280"
    expect(frame).to_have_class(re.compile(r"\bmore-right\b"))
    first = page.locator("#trace-table tbody tr").first.locator("td").first
    left = first.bounding_box()["x"]
    box.evaluate("el => { el.scrollLeft = el.scrollWidth; }")
    expect(frame).not_to_have_class(re.compile(r"\bmore-right\b"))
    assert first.bounding_box()["x"] == pytest.approx(left, abs=1)  # the id column stayed put
    expect(first.locator("a.trace-link")).to_be_visible()
    last_reward = page.locator("#trace-table thead th.reward").last
    frame_box, reward_box = frame.bounding_box(), last_reward.bounding_box()
    assert reward_box["x"] + reward_box["width"] <= frame_box["x"] + frame_box["width"] + 1
    cut = page.locator("#trace-table thead th").evaluate_all(
        "ths => ths.filter(th => th.scrollWidth > th.clientWidth + 1).map(th => th.textContent.trim())")
    assert cut == []  # every header fits its column: wrapped between words, never clipped


@pytest.fixture(scope="module")
def hierarchical(ingest):
    """The hierarchical sample, stored once for the module: its tests only read it."""
    ingest(SAMPLES / "hierarchical.json")
    return "sample-hierarchical-001"


def test_reported_and_computed_figures_are_labelled_apart(page, live_server, hierarchical):
    open_trace(page, live_server, "sample-hierarchical-001")
    expect(page.locator("#computed-label")).to_have_text(re.compile("computed from the events", re.IGNORECASE))
    expect(page.locator("#reported-label")).to_contain_text("reported by the trace")
    steps = page.locator('#metrics-panel [data-metric="critical_path_steps"]')
    expect(steps.locator(".value")).to_have_text("56")
    expect(steps.locator(".reported")).to_have_text("trace says 84")
    expect(page.locator("#agent-count")).to_have_text("(15 agents · 5 tools)")


def test_audit_findings_are_grouped_by_rule_and_mark_the_graph(page, live_server, hierarchical):
    open_trace(page, live_server, "sample-hierarchical-001")
    group = page.locator('#audit-findings details.rule-group[data-rule="untrusted_flow"]')
    expect(group.locator("summary .rule-count")).to_have_text("52")
    expect(group.locator("button.finding")).to_have_count(52)
    finding = group.locator("button.finding").first
    expect(finding).to_contain_text("untrusted e021 (web.search) reaches")
    finding.click()
    expect(page.locator("#event-inspector [data-selected-event]")).to_have_attribute("data-selected-event", "e021")
    marked = page.evaluate("""() => {
        const gd = document.getElementById("graph");
        const trace = gd.data.find((t) => t.name === "audit findings");
        return trace && trace.visible ? trace.x.length : 0;
    }""")
    assert marked == len(json.loads(finding.get_attribute("data-events")))


def test_the_credit_panel_says_what_keeps_the_correlation_from_being_computed(page, live_server, ingest):
    trace = json.loads((SAMPLES / "planner_executor_critic.json").read_text()) | {"trace_id": "flat-credit"}
    ingest(trace)
    for event in trace["events"][:3]:  # three events, one human credit for all: nothing varies to correlate
        assert httpx.post(f"{live_server}/api/annotations", json={
            "trace_id": "flat-credit", "event_id": event["id"], "reviewer": "ada", "credit": 0.5}).status_code == 201
    open_trace(page, live_server, "flat-credit")
    page.locator("#credit-panel").scroll_into_view_if_needed()
    panel = page.locator("section#credit-panel")
    expect(panel).to_contain_text("not defined over the 3 events with human credit: their human mean credit")
    expect(panel).not_to_contain_text("needs two or more")
