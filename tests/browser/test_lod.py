"""A large trace in Chromium (issue 15): the first view is bins, fewer marks than the plot has pixels; a
zoom into a narrow window draws its events one by one and a click selects one; the find box brings an agent's
first event into view and selects it."""

import httpx
import pytest
from playwright.sync_api import expect

from app.services.graph import MAX_MARKS
from browser.conftest import post_swarm, swarm
from browser.test_workspace import expect_workspace, open_as

BIG = "big-lod"
# Six times past binning (graph.LOD_ABOVE) and five times the marks a view may draw (graph.MAX_MARKS): what is drawn
# no longer grows with the trace there (benchmarks/render.py times 100,000 and 1,000,000); 100,000 took three times as
# long here.
EVENTS = 30_000


@pytest.fixture(scope="module")
def big(live_server):
    trace = swarm(1000, EVENTS, 11, BIG)
    post_swarm(live_server, trace)
    return trace


def drawn_marks(page) -> dict:
    return page.evaluate("""() => {
        const gd = document.getElementById("graph"), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const marks = gd.data.filter((t) => t.mode === "markers").reduce((n, t) => n + t.x.length, 0);
        return {marks, pixels: Math.round(xa._length * ya._length), mode: gd.dataset.windowMode || "overview"};
    }""")


def zoom_to(page, share: float, width: float) -> None:
    """Zoom the time axis to [share, share + width] of the current range and wait for that window's drawing."""
    page.evaluate("""([share, width]) => {
        const gd = document.getElementById("graph");
        delete gd.dataset.windowMs;
        const [a, b] = gd._fullLayout.xaxis.range;
        Plotly.relayout(gd, {"xaxis.range": [a + (b - a) * share, a + (b - a) * (share + width)]});
    }""", [share, width])
    page.wait_for_function("() => document.getElementById('graph').dataset.windowMs !== undefined", timeout=30_000)


def test_the_overview_of_a_large_trace_draws_fewer_marks_than_pixels(page, live_server, big):
    open_as(page, live_server, BIG, reviewer=None)
    expect(page.locator("#graph-status")).to_contain_text(f"{EVENTS:,} events")
    expect(page.locator("#graph-status")).to_contain_text("binned")
    drawn = drawn_marks(page)
    assert 0 < drawn["marks"] <= MAX_MARKS and drawn["marks"] < drawn["pixels"] / 16, drawn
    # the overlay channels are listed after the graph; colouring by one colours the bins by their mean
    option = page.locator("#overlay-select option", has_text="reward (")
    expect(option).to_have_count(1)
    page.select_option("#overlay-select", "reward")
    page.wait_for_function("() => document.getElementById('graph').data.some((t) => t.name === 'reward' && t.x.length)",
                           timeout=30_000)


def test_a_zoom_to_a_narrow_window_draws_its_events_and_a_click_selects_one(page, live_server, big):
    open_as(page, live_server, BIG)
    zoom_to(page, 0.5, 0.004)
    graph = page.locator("#graph")
    expect(graph).to_have_attribute("data-window-mode", "exact")
    expect(page.locator("#graph-status")).to_contain_text("each drawn")
    expect(page.locator("#graph-status")).to_contain_text("detail in")
    # a click on one drawn event: the marker nearest the middle of the plot
    point = page.evaluate("""() => {
        const gd = document.getElementById("graph"), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const box = gd.getBoundingClientRect();
        const t = gd.data.find((d) => d.meta && d.meta.kind === "events" && d.x.length);
        const k = Math.floor(t.x.length / 2);
        return {x: box.left + xa._offset + xa.l2p(t.x[k]), y: box.top + ya._offset + ya.l2p(t.y[k]), seq: t.customdata[k]};
    }""")
    page.mouse.click(point["x"], point["y"])
    selected = page.locator("#event-inspector [data-selected-event]")
    expect(selected).to_have_count(1)
    event_id = selected.get_attribute("data-selected-event")
    assert event_id in {e["id"] for e in big["events"]}
    expect_workspace(page, event_id)
    # zooming back out shows bins again
    page.evaluate("Plotly.relayout(document.getElementById('graph'), {'xaxis.autorange': true})")
    expect(graph).to_have_attribute("data-window-mode", "bins", timeout=30_000)


def test_find_brings_an_agents_first_event_of_a_binned_trace_into_view(page, live_server, big):
    open_as(page, live_server, BIG)
    agent = "executor-101"
    items = httpx.get(f"{live_server}/api/traces/{BIG}/search", params={"q": agent}).json()["items"]
    first = next(item["first_event"] for item in items if item["value"] == agent)
    page.keyboard.press("/")
    page.keyboard.type(agent)
    expect(page.locator("#find-list [role=option]").first).to_contain_text(agent)
    page.keyboard.press("Enter")
    expect(page.locator("#graph")).to_have_attribute("data-window-mode", "exact", timeout=30_000)
    expect_workspace(page, first)


def test_expanding_a_role_fits_the_view_to_its_lanes(page, live_server, big):
    open_as(page, live_server, BIG, reviewer=None)
    page.locator("#lane-groups button", has_text="expand executor").click()
    expect(page.locator("#graph-status")).to_contain_text("redrawn in", timeout=60_000)
    page.wait_for_function("""() => {
        const ticks = [...document.querySelectorAll("#graph .yaxislayer-above .ytick text")].map((t) => t.textContent);
        return ticks.length > 3 && ticks.every((t) => t.startsWith("executor-"));
    }""", timeout=30_000)
    expect(page.locator("#lane-groups button", has_text="collapse executor")).to_be_visible()


def test_folding_a_subtree_from_the_spawn_tree_puts_it_on_one_lane_and_unfolding_restores_it(page, live_server, ingest):
    from browser.conftest import REPO
    trace_id = ingest(REPO / "sample_traces" / "hierarchical.json")[0]
    open_as(page, live_server, trace_id, reviewer=None)
    status = page.locator("#graph-status")
    lanes_before = int(status.inner_text().split(" lanes")[0].split("· ")[-1])
    button = page.locator("#side-panel button[data-fold], .tree button[data-fold]").first
    agent = button.get_attribute("data-fold")
    button.click()
    expect(page.locator("#lane-groups button", has_text=f"unfold {agent}")).to_be_visible(timeout=30_000)
    expect(button).to_have_attribute("aria-pressed", "true")
    page.wait_for_function("""(agent) => [...document.querySelectorAll("#graph .ytick text")]
        .some((t) => t.textContent.startsWith(agent + " +"))""", arg=agent)
    assert int(status.inner_text().split(" lanes")[0].split("· ")[-1]) < lanes_before
    page.locator("#lane-groups button", has_text=f"unfold {agent}").click()
    expect(status).to_contain_text(f"{lanes_before} lanes", timeout=30_000)
    expect(button).to_have_attribute("aria-pressed", "false")


def test_the_minimap_shades_the_window_in_view_and_a_click_moves_there(page, live_server, ingest):
    from browser.conftest import REPO
    trace_id = ingest(REPO / "sample_traces" / "hierarchical.json")[0]
    open_as(page, live_server, trace_id, reviewer=None)
    view = page.locator("#minimap .view")
    expect(view).to_have_count(1)
    assert float(view.get_attribute("width")) > 900  # the whole trace is in view
    page.evaluate("""() => { const gd = document.getElementById("graph"), [a, b] = gd._fullLayout.xaxis.range;
                             Plotly.relayout(gd, {"xaxis.range": [a, a + (b - a) / 10]}); }""")
    page.wait_for_function("() => parseFloat(document.querySelector('#minimap .view').getAttribute('width')) < 200")
    assert float(view.get_attribute("x")) < 100
    box = page.locator("#minimap").bounding_box()
    page.locator("#minimap").click(position={"x": box["width"] * 0.8, "y": box["height"] / 2})
    page.wait_for_function("() => parseFloat(document.querySelector('#minimap .view').getAttribute('x')) > 600")
