"""The queue review workspace in Chromium, at 1440x900 and 1024x768: keys set fields without saving, Enter saves
once and the next item is drawn in place (no page load), s skips (the item comes back last), an untouched item is
refused naming the required field; what the event said is shown above the form, escaped."""

import json
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from app.web.browser import REVIEWER_COOKIE

SHOTS = Path("/tmp/shots")
PAYLOAD = "<img src=x onerror=\"window.__pwned=1\">"
TRACE = {
    "trace_id": "flow", "task_id": "t", "system": "flow-test", "topology": "centralized",
    "events": [
        {"id": "d1", "t": 0, "type": "orchestrator_decision", "agent": "lead", "role": "lead",
         "content": [{"role": "user", "content": "Find the cheapest flight to Lisbon " + PAYLOAD},
                     {"role": "assistant", "content": "I will ask the searcher.",
                      "tool_calls": [{"id": "c1", "type": "function",
                                      "function": {"name": "transfer_to_searcher",
                                                   "arguments": json.dumps({"query": "<script>x</script>"})}}]}]},
        {"id": "d2", "t": 1, "type": "orchestrator_decision", "agent": "lead", "role": "lead",
         "content": {"plan": ["search", "compare"], "note": "x" * 5000}},
        {"id": "d3", "t": 2, "type": "orchestrator_decision", "agent": "lead", "role": "lead",
         "content_ref": "sha256:0123456789abcdef"},
        {"id": "d4", "t": 3, "type": "orchestrator_decision", "agent": "lead", "role": "lead"},
    ],
    "edges": [], "rewards": {"team": 1}, "costs": {"tokens": 10, "wall_clock_s": 3},
}


@pytest.fixture
def queue(live_server, ingest, request):
    ingest(TRACE)
    body = {"name": f"flow {request.node.name}", "filter": {"trace_ids": ["flow"]},
            "fields": ["credit", "counterfactual", "note"], "required": ["credit"],
            "reviewers": [f"rev-{request.node.name[-6:]}"], "overlap": 1}
    answer = httpx.post(f"{live_server}/api/queues", content=json.dumps(body),
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 201, answer.text
    return answer.json()


def versions(live_server, reviewer: str) -> dict[str, list[int]]:
    items = httpx.get(f"{live_server}/api/annotations", params={"reviewer": reviewer, "history": "true"}).json()
    out: dict[str, list[int]] = {}
    for label in items["items"]:
        out.setdefault(label["event_id"], []).append(label["version"])
    return out


def drawn(page, item_id: int) -> None:
    page.wait_for_selector(f'#queue-workspace[data-item-id="{item_id}"]')


@pytest.mark.parametrize("size", [(1440, 900), (1024, 768)])
def test_keys_save_once_skip_and_the_next_item_is_drawn_in_place(page, live_server, queue, size):
    reviewer = queue["reviewers"][0]
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.context.add_cookies([{"name": REVIEWER_COOKIE, "value": reviewer, "url": live_server}])
    page.goto(f"{live_server}/queues/{queue['id']}/review")
    drawn(page, 1)
    page.evaluate("window.__samePage = true")
    workspace = page.locator("#queue-workspace")
    expect(workspace.locator(".conversation .message")).to_have_count(2)
    expect(workspace.locator(".part-text").first).to_contain_text(PAYLOAD)  # shown as text
    expect(workspace.locator(".part-tool code")).to_have_text("transfer_to_searcher")
    assert page.evaluate("window.__pwned") is None
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"queue-workspace-{size[0]}.png"))

    page.keyboard.press("Enter")  # untouched: refused, naming the required field
    expect(workspace.locator("#label-form .status")).to_contain_text("credit")
    assert workspace.get_attribute("data-item-id") == "1"
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]  # the refusal, expected
    page.keyboard.press("4")
    page.keyboard.press("5")  # keys set the field; nothing is saved yet
    assert versions(live_server, reviewer) == {}
    expect(page.locator("#credit-number")).to_have_value("1")
    page.keyboard.press("Enter")
    drawn(page, 2)
    expect(workspace.locator(".workspace-bar")).to_contain_text("Saved item 1 (v1)")
    expect(workspace.locator(".content-json")).to_contain_text('"plan"')
    page.keyboard.press("s")
    drawn(page, 3)
    expect(workspace.locator(".event-content")).to_contain_text("sha256:0123456789abcdef")
    page.keyboard.press("2")
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")  # a second Enter while the first is in flight, or on the next item: no version
    drawn(page, 4)
    page.keyboard.press("3")
    page.keyboard.press("Enter")
    drawn(page, 2)  # the skipped item comes back last
    page.keyboard.press("1")
    page.keyboard.press("Enter")
    expect(workspace).to_contain_text("Nothing left for you")
    assert versions(live_server, reviewer) == {"d1": [1], "d2": [1], "d3": [1], "d4": [1]}
    saved = httpx.get(f"{live_server}/api/annotations", params={"reviewer": reviewer}).json()["items"]
    assert {label["event_id"]: label["credit"] for label in saved} == {"d1": 1.0, "d2": -1.0, "d3": -0.5, "d4": 0.0}
    assert page.evaluate("window.__samePage") is True  # every item was swapped in place: no page load


def test_the_export_menu_says_what_each_format_is_for(page, live_server, queue):
    page.goto(f"{live_server}/queues/{queue['id']}")
    page.locator("details.export-menu summary").click()
    menu = page.locator("details.export-menu ul")
    expect(menu).to_be_visible()
    for link in ("CSV", "JSON", "Final labels (CSV)", "rLLM episodes", "TRL stepwise", "Credit table"):
        expect(menu.get_by_role("link", name=link, exact=True)).to_be_visible()
    href = menu.get_by_role("link", name="Final labels (CSV)").get_attribute("href")
    assert httpx.get(live_server + href).text.startswith("item_id,trace_id,event_id,status,final.credit")
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / "queue-export-menu.png"))


def test_a_recorded_framework_traces_content_is_shown_above_the_form(page, live_server):
    """pydantic-ai's own OTLP export (tests/fixtures/otlp, recorded by its instrumentation): the lead's model call
    reads as a conversation in the queue workspace and in the trace page's inspector."""
    from browser.conftest import REPO
    body = (REPO / "tests" / "fixtures" / "otlp" / "pydantic_ai_delegation.json").read_bytes()
    answer = httpx.post(f"{live_server}/api/traces", content=body, params={"replace": "true"},
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 201, answer.text
    (trace_id,) = answer.json()["ingested"]
    queue = httpx.post(f"{live_server}/api/queues", content=json.dumps({
        "name": "lead decisions", "filter": {"trace_ids": [trace_id], "event_types": ["orchestrator_decision"]},
        "reviewers": ["otel-rev"]}), headers={"Content-Type": "application/json"}).json()
    page.context.add_cookies([{"name": REVIEWER_COOKIE, "value": "otel-rev", "url": live_server}])
    page.goto(f"{live_server}/queues/{queue['id']}/review")
    drawn(page, 1)
    messages = page.locator("#queue-workspace .conversation .message")
    expect(messages.first).to_contain_text("write a report")
    expect(page.locator("#queue-workspace .conversation .message.role-assistant").first).to_be_visible()
    for width, height in ((1440, 900), (1280, 800)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{live_server}/traces/{trace_id}?event=e02")
        expect(page.locator("#event-inspector .conversation .message").first).to_contain_text("write a report")
        page.screenshot(path=str(SHOTS / f"inspector-content-{width}.png"))
    page.locator("details.export-menu summary").click()
    expect(page.locator("details.export-menu ul")).to_be_visible()
    page.screenshot(path=str(SHOTS / "trace-export-menu-1280.png"))
