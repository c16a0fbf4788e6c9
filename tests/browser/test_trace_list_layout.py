"""The trace list at 1440x900 and 1280x800 over the sample traces (ten reward channels between them): every column,
the reward columns shown included, is visible without scrolling sideways at 1440 px."""

import pytest
from playwright.sync_api import expect

from browser.conftest import REPO, SCREENSHOTS


@pytest.mark.parametrize("size", [{"width": 1440, "height": 900}, {"width": 1280, "height": 800}])
def test_the_trace_list_shows_its_reward_columns_without_scrolling_sideways(page, live_server, ingest, size):
    ingest(*sorted((REPO / "sample_traces").glob("*.json")))
    page.set_viewport_size(size)
    page.goto(live_server + "/")
    expect(page.locator("#trace-table th.reward").first).to_be_visible()
    overflow = page.evaluate("(() => { const el = document.querySelector('#trace-table .table-scroll');"
                             " return el.scrollWidth - el.clientWidth; })()")
    if size["width"] == 1440:
        assert overflow <= 0
    page.get_by_text("Reward columns:").click()
    expect(page.locator(".columns-form")).to_be_visible()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"trace-list-{size['width']}.png"))
