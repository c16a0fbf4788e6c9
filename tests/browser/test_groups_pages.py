"""The /groups and /groups/{key} pages in Chromium: each group's spread drawn, a group's rollouts ranked by
advantage with structure plotted against reward, two picked for the diff. Screenshots at 1440x900 and 1280x800."""

import pytest
from playwright.sync_api import expect

from app.domain.generate import generate_swarm
from browser.conftest import SCREENSHOTS

SIZES = [{"width": 1440, "height": 900}, {"width": 1280, "height": 800}]
TEAM = {"grid/7": [0.9, 0.2, 0.55, 0.4, 0.75, 0.1], "maze/2": [0.6, 0.6, 0.6], "sort/3": [1.0, 0.0, 0.3, 0.8]}


@pytest.fixture(scope="module")
def rollouts(ingest):
    """Rollouts of three tasks, each of its own size and structure; maze/2's team rewards do not spread. Stored once
    for the module: its tests only read them."""
    traces = []
    for task, rewards in TEAM.items():
        for n, team in enumerate(rewards):
            trace = generate_swarm(3 + 2 * n, 40 + 25 * n, seed=len(traces) + 1)
            trace |= {"trace_id": f"{task.split('/')[0]}-{n}", "task_id": task}
            trace["rewards"]["team"] = team
            traces.append(trace)
    ingest(*traces)
    return traces


@pytest.mark.parametrize("size", SIZES)
def test_the_groups_page_draws_each_groups_spread(page, live_server, rollouts, size):
    page.set_viewport_size(size)
    page.goto(f"{live_server}/groups")
    rows = page.locator("#groups-table tbody tr")
    expect(rows).to_have_count(3)
    expect(page.locator("#group-count")).to_contain_text("3 groups by task_id")
    assert page.locator('#groups-table td[data-channel="team"] svg.spread').count() == 3
    expect(page.locator('tr[data-key="maze/2"] td[data-channel="team"]')).to_contain_text("no spread")
    page.locator('th[data-channel="team"]').get_by_role("link", name="std").click()  # by the spread of team
    expect(page).to_have_url(f"{live_server}/groups?sort=-std%3Ateam")  # a plain link: the page loaded anew
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    expect(rows.first).to_have_attribute("data-key", "sort/3")
    page.screenshot(path=str(SCREENSHOTS / f"groups-{size['width']}.png"), full_page=True)
    page.locator('tr[data-key="grid/7"] a').click()
    expect(page).to_have_url(f"{live_server}/groups/grid%2F7?by=task_id")
    expect(page.locator("h1")).to_contain_text("grid/7")


@pytest.mark.parametrize("size", SIZES)
def test_a_group_ranks_its_rollouts_and_picks_two_for_a_diff(page, live_server, rollouts, size):
    page.set_viewport_size(size)
    page.goto(f"{live_server}/groups/grid%2F7?channel=team")
    ranked = page.locator("#rollouts-table tbody tr")
    expect(ranked).to_have_count(6)
    order = [ranked.nth(i).get_attribute("data-trace-id") for i in range(6)]
    assert order == ["grid-0", "grid-4", "grid-2", "grid-3", "grid-1", "grid-5"]  # team 0.9, 0.75, ... 0.1
    advantages = [float(ranked.nth(i).locator("td.advantage").get_attribute("data-advantage")) for i in range(6)]
    assert advantages == sorted(advantages, reverse=True) and advantages[0] > 0 > advantages[-1]
    expect(page.locator("[data-chart][data-drawn]")).to_have_count(4)
    assert page.locator('[data-chart="critical_steps"] .scatterlayer .point').count() == 6
    page.screenshot(path=str(SCREENSHOTS / f"group-detail-{size['width']}.png"), full_page=True)
    page.locator('input[name="a"][value="grid-2"]').check()
    page.locator("#diff-submit").click()
    expect(page).to_have_url(f"{live_server}/diff?a=grid-2&b=grid-5")
    expect(page.locator("h1")).to_have_text("Compare two runs")


def test_a_group_without_spread_gives_every_rollout_advantage_zero(page, live_server, rollouts):
    page.goto(f"{live_server}/groups/maze%2F2?channel=team")
    expect(page.locator('#group-stats tr[data-channel="team"]')).to_contain_text("no spread")
    cells = page.locator("#rollouts-table td.advantage")
    expect(cells).to_have_count(3)
    assert {cells.nth(i).get_attribute("data-advantage") for i in range(3)} == {"0.0"}
