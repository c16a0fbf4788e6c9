"""The labelling workspace in Chromium: at 1440x900 the selected event's panel sits beside the graph, at 1024x768
it is a drawer opened by a selection; either way the event's marker and the panel's label form are in the
window together, and five events are labelled from the keyboard alone."""

import json
from urllib.parse import quote

import httpx
import pytest
from playwright.sync_api import expect

from app.web.browser import REVIEWER_COOKIE

SAMPLE = "sample-hierarchical-001"


@pytest.fixture(scope="module")
def sample(ingest):
    """The sample stored once for the module: its tests label it as reviewers of their own and add nothing else to
    it (storing it again would keep their labels anyway)."""
    from browser.conftest import REPO
    ingest(REPO / "sample_traces" / "hierarchical.json")
    return SAMPLE


def marker_box(page, event_id: str) -> dict:
    """The window position of an event's marker on the graph (its centre)."""
    return page.evaluate("""(id) => {
        const gd = document.getElementById("graph");
        const seq = window.orchestrace.seqOf(id);
        const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
        const pos = window.orchestrace.position(seq);
        return {x: box.left + xa._offset + xa.l2p(xa.d2l(pos.x)), y: box.top + ya._offset + ya.l2p(ya.d2l(pos.y))};
    }""", event_id)


def in_window(page, point: dict) -> bool:
    size = page.viewport_size
    return 0 <= point["x"] <= size["width"] and 0 <= point["y"] <= size["height"]


def uncovered(page, point: dict) -> bool:
    """The point is not under the panel (a drawer covers part of the graph)."""
    panel = page.locator("#side-panel").bounding_box()
    return not (panel["x"] <= point["x"] <= panel["x"] + panel["width"]
                and panel["y"] <= point["y"] <= panel["y"] + panel["height"])


def expect_workspace(page, event_id: str) -> None:
    """The event is in the panel, the panel's save button and the event's marker are in the window, and the
    marker is not hidden under the panel."""
    expect(page.locator("#event-inspector [data-selected-event]")).to_have_attribute("data-selected-event", event_id)
    save = page.locator("#label-form button[value=save]")
    expect(save).to_be_in_viewport()
    expect(page.locator("#side-panel")).to_be_in_viewport()
    point = marker_box(page, event_id)
    assert in_window(page, point) and uncovered(page, point), point


def open_as(page, base: str, trace_id: str, reviewer: str | None = "ada", query: str = "") -> None:
    if reviewer:
        page.context.add_cookies([{"name": REVIEWER_COOKIE, "value": reviewer, "url": base}])
    page.goto(f"{base}/traces/{quote(trace_id, safe='')}{query}")
    page.wait_for_selector('#graph[data-drawn="true"]', state="attached")


@pytest.mark.parametrize("size", [{"width": 1440, "height": 900}, {"width": 1024, "height": 768}])
def test_select_by_click_and_by_n_keeps_event_and_form_in_view(page, live_server, sample, size):
    page.set_viewport_size(size)
    open_as(page, live_server, sample)
    panel = page.locator("#side-panel")
    if size["width"] < 1280:
        expect(panel).not_to_be_in_viewport()  # a drawer, closed until something is selected
    page.locator("#graph").scroll_into_view_if_needed()
    point = marker_box(page, "e001")
    page.mouse.click(point["x"], point["y"])
    expect_workspace(page, "e001")
    page.keyboard.press("n")
    expect(page.locator("#event-inspector [data-selected-event]")).not_to_have_attribute("data-selected-event", "e001")
    selected = page.locator("#event-inspector [data-selected-event]").get_attribute("data-selected-event")
    expect_workspace(page, selected)
    if size["width"] < 1280:
        page.keyboard.press("Escape")
        expect(panel).not_to_be_in_viewport()


@pytest.mark.parametrize("size", [{"width": 1440, "height": 900}, {"width": 1024, "height": 768}])
def test_five_events_labelled_by_keyboard(page, live_server, sample, size):
    page.set_viewport_size(size)
    reviewer = f"kb-{size['width']}"
    open_as(page, live_server, sample, reviewer)
    page.keyboard.press("n")
    labelled = []
    for credit_key, credit in (("5", 1.0), ("1", -1.0), ("4", 0.5), ("2", -0.5), ("3", 0.0)):
        event_id = page.locator("#event-inspector [data-selected-event]").get_attribute("data-selected-event")
        expect_workspace(page, event_id)
        page.keyboard.press(credit_key)  # sets credit and saves
        expect(page.locator("#label-form .status")).to_contain_text("saved v1")
        labelled.append((event_id, credit))
        page.keyboard.press("n")
        expect(page.locator("#event-inspector [data-selected-event]")).not_to_have_attribute(
            "data-selected-event", event_id)
    stored = httpx.get(f"{live_server}/api/annotations", params={"trace_id": sample, "reviewer": reviewer}).json()
    assert sorted((label["event_id"], label["credit"]) for label in stored["items"]) == sorted(labelled)


def test_enter_saves_and_moves_on_and_none_is_shown_as_none(page, live_server, sample):
    open_as(page, live_server, sample, "enter-er", "?event=e002")
    number, slider = page.locator("#credit-number"), page.locator("#credit-range")
    expect(number).to_have_value("")
    expect(slider).to_have_attribute("data-unset", "true")  # no credit: no thumb resting in the middle
    expect(page.locator("#credit-none")).to_be_hidden()
    page.locator("#counterfactual").select_option("partly")
    page.locator("#counterfactual").press("Enter")
    expect(page.locator("#event-inspector [data-selected-event]")).not_to_have_attribute("data-selected-event", "e002")
    saved = httpx.get(f"{live_server}/api/annotations", params={"trace_id": sample, "event_id": "e002",
                                                                "reviewer": "enter-er"}).json()["items"]
    assert [(label["counterfactual"], label["credit"]) for label in saved] == [("partly", None)]


def test_the_first_labelling_key_without_a_reviewer_asks_for_one_in_place(page, live_server, sample):
    open_as(page, live_server, sample, None, "?event=e003")
    page.keyboard.press("4")
    dialog = page.locator("#reviewer-dialog")
    expect(dialog).to_be_visible()
    page.locator("#reviewer-new-name").fill("newcomer")
    page.locator("#reviewer-inline button[type=submit]").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#label-form .status")).to_contain_text("saved v1")
    saved = httpx.get(f"{live_server}/api/annotations", params={"trace_id": sample, "event_id": "e003"}).json()
    assert ("newcomer", 0.5) in [(label["reviewer"], label["credit"]) for label in saved["items"]]
    expect(page.locator("#reviewer-name")).to_contain_text("newcomer")


def test_queue_mode_on_the_trace_page_asks_the_rubric_and_enter_goes_on_in_the_review_workspace(page, live_server,
                                                                                                 sample):
    body = {"name": "decisions", "filter": {"trace_ids": [sample], "event_types": ["orchestrator_decision"]},
            "fields": ["credit", "stop"], "required": ["credit"], "reviewers": ["q-rev"], "overlap": 1}
    queue = httpx.post(f"{live_server}/api/queues", content=json.dumps(body),
                       headers={"Content-Type": "application/json"}).json()
    first = httpx.get(f"{live_server}/api/queues/{queue['id']}/items").json()["items"][0]
    page.context.add_cookies([{"name": REVIEWER_COOKIE, "value": "q-rev", "url": live_server}])
    page.goto(f"{live_server}/traces/{quote(sample)}?event={first['event_id']}&queue={queue['id']}")
    page.wait_for_selector('#graph[data-drawn="true"]', state="attached")
    expect(page.locator(".queue-banner")).to_contain_text("item 1 of")
    form = page.locator("#label-form")
    expect(form.locator("select[name=stop]")).to_be_visible()
    assert form.locator("select[name=reward_family]").count() == 0  # not in the rubric
    page.locator("#credit-number").fill("0.5")
    page.locator("#credit-number").press("Enter")
    page.wait_for_url(f"{live_server}/queues/{queue['id']}/review")
    page.wait_for_selector('#queue-workspace[data-item-id="2"]')
    labels = httpx.get(f"{live_server}/api/annotations", params={"reviewer": "q-rev"}).json()["items"]
    assert [(label["event_id"], label["queue_id"]) for label in labels] == [(first["event_id"], queue["id"])]

