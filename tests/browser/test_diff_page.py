"""The /diff page in Chromium: both runs drawn on one lane order, "Jump to it" zooms both to the first divergence
and shows its row, and the trace page's "Compare with…" leads there. Screenshots at 1440x900 and 1280x800."""

import copy

import pytest
from playwright.sync_api import expect

from app.domain.generate import generate_swarm
from browser.conftest import SCREENSHOTS


@pytest.fixture
def pair(ingest):
    a = generate_swarm(12, 160, seed=11) | {"trace_id": "cmp-a", "task_id": "task-cmp"}
    b = copy.deepcopy(a) | {"trace_id": "cmp-b"}
    calls = [e for e in b["events"] if e["type"] == "tool_call"]
    calls[len(calls) // 2]["tool"] = "shell.rm"  # the one difference: a tool changed half way through
    ingest(a, b)
    return a, b, calls[len(calls) // 2]


@pytest.mark.parametrize("size", [{"width": 1440, "height": 900}, {"width": 1280, "height": 800}])
def test_the_diff_page_draws_both_runs_and_jumps_to_the_first_divergence(page, live_server, pair, size):
    a, b, changed = pair
    page.set_viewport_size(size)
    page.goto(f"{live_server}/diff?a=cmp-a&b=cmp-b")
    figure = page.locator("[data-diff-figure][data-drawn]")
    expect(figure).to_be_visible()
    assert page.locator("[data-diff-figure] .scatterlayer .point").count() > 100
    expect(page.locator("#first-divergence-note")).to_contain_text(changed["id"])
    expect(page.locator(".diff-summary")).to_contain_text("changed 1")
    before = page.evaluate("document.querySelector('[data-diff-figure]').layout.xaxis.range.slice()")
    page.locator("#jump-divergence").click()
    row = page.locator("#divergence-row")
    expect(row).to_be_in_viewport()
    expect(row).to_contain_text("shell.rm")
    after = page.evaluate("document.querySelector('[data-diff-figure]').layout.xaxis.range.slice()")
    assert after[1] - after[0] < before[1] - before[0]  # zoomed in around the divergence
    assert after[0] <= changed["t"] - min(e["t"] for e in a["events"]) <= after[1]
    page.evaluate("window.scrollTo(0, 0)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"diff-{size['width']}.png"))


def test_compare_with_on_the_trace_page_opens_the_diff(page, live_server, pair):
    page.goto(f"{live_server}/traces/cmp-a")
    page.get_by_text("Compare with…").click()
    page.locator("#compare-b").fill("cmp-b")
    page.get_by_role("button", name="Compare", exact=True).click()
    expect(page).to_have_url(f"{live_server}/diff?a=cmp-a&b=cmp-b")
    expect(page.locator("h1")).to_have_text("Compare two runs")
    page.locator("#swap-diff").click()
    expect(page).to_have_url(f"{live_server}/diff?a=cmp-b&b=cmp-a")
