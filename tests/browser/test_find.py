"""The trace page's find box in Chromium: `/` focuses it, typing part of an agent's name suggests it, choosing it
selects that agent's first event with its marker in the window; an unknown text says "no match". And the graph's
status line tells the time from navigation to the first painted frame, as measured from outside the page."""

import re

import httpx
import pytest
from playwright.sync_api import expect

from browser.probes import PAINT_PROBE
from browser.test_workspace import expect_workspace, open_as

SAMPLE = "sample-hierarchical-001"

@pytest.fixture(scope="module")
def sample(ingest):
    """The sample stored once for the module: its tests only read it."""
    from browser.conftest import REPO
    ingest(REPO / "sample_traces" / "hierarchical.json")
    return SAMPLE


def first_event_of(live_server, trace_id, agent):
    items = httpx.get(f"{live_server}/api/traces/{trace_id}/search", params={"q": agent}).json()["items"]
    return next(item["first_event"] for item in items if item["kind"] == "agent" and item["value"] == agent)


@pytest.mark.parametrize("size", [{"width": 1440, "height": 900}, {"width": 1024, "height": 768}])
def test_slash_then_part_of_a_name_then_enter_selects_the_agents_first_event(page, live_server, sample, size):
    page.set_viewport_size(size)
    open_as(page, live_server, sample)
    box = page.locator("#find-input")
    page.keyboard.press("/")
    expect(box).to_be_focused()
    page.keyboard.type("sites")
    option = page.locator("#find-list [role=option]").first
    expect(option).to_be_visible()
    expect(option).to_contain_text("analyst-sites")
    expect(box).to_have_attribute("aria-expanded", "true")
    page.keyboard.press("Enter")
    expect(page.locator("#find-list")).to_be_hidden()
    expect_workspace(page, first_event_of(live_server, sample, "analyst-sites"))
    expect(page.locator("#find-status")).to_contain_text("agent · 9 events")


def test_a_suggestion_is_chosen_with_the_arrows_or_the_mouse(page, live_server, sample):
    open_as(page, live_server, sample)
    box = page.locator("#find-input")
    box.click()
    box.type("writer")
    options = page.locator("#find-list [role=option]")
    expect(options.first).to_contain_text("writer-main")  # the prefix matches before "...writer" substrings
    expect(options.nth(1)).to_contain_text("writer-exec")
    page.keyboard.press("ArrowDown")
    expect(options.nth(1)).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Enter")
    expect_workspace(page, first_event_of(live_server, sample, "writer-exec"))
    box.fill("")
    box.type("e00")
    event = page.locator("#find-list [role=option]", has_text="e007")
    event.click()
    expect_workspace(page, "e007")


def test_an_unknown_text_says_no_match_in_place(page, live_server, sample):
    open_as(page, live_server, sample)
    page.keyboard.press("/")
    page.keyboard.type("zzz-nobody")
    expect(page.locator("#find-status")).to_have_text("no match")
    expect(page.locator("#find-list")).to_be_hidden()
    page.keyboard.press("Enter")
    expect(page.locator("#find-status")).to_have_text("no match")
    page.keyboard.press("Escape")
    page.keyboard.press("j")  # out of the box, the keys work again
    expect(page.locator("#event-inspector [data-selected-event]")).to_have_count(1)


def test_the_status_line_tells_the_time_to_the_first_painted_frame(page, live_server, sample):
    page.add_init_script(PAINT_PROBE)
    open_as(page, live_server, sample)
    now_ms = page.evaluate("performance.now()")
    status = page.locator("#graph-status")
    expect(status).to_contain_text("after navigation")
    seconds = float(re.search(r"painted ([\d.]+) s after navigation", status.text_content()).group(1))
    drawn_ms = int(page.get_attribute("#graph", "data-drawn-ms"))
    assert abs(seconds * 1000 - drawn_ms) <= 10
    assert drawn_ms <= now_ms, (drawn_ms, now_ms)  # (the analysis panel, loading after the paint, may delay "now")
    outside_ms = page.evaluate("window.__graphPaintedMs")
    assert outside_ms is not None and abs(outside_ms - drawn_ms) <= 0.2 * max(outside_ms, drawn_ms), (
        outside_ms, drawn_ms)
