"""The auditor's view of a 1,000-agent trace of 30,000 events (issue 32): the binned overview draws edges as bundles
within the edge budget, with a toggle per edge type kept in the URL; a click on a bin zooms to it; expanding the
largest role keeps every lane in view labelled and the edges within the budget, with a scrollbar over the lanes;
find shows an agent's own lane, marked, and from there its partners alone; the graph's top is in the first screen.
Screenshots of each at 1440x900 and 1280x800 are kept in test-output/screenshots/auditor-*.png."""

import re

import httpx
import pytest
from playwright.sync_api import expect

from app.services.graph import BUNDLE_AREA_PX, DEFAULT_PX
from browser.conftest import SCREENSHOTS, post_swarm, swarm
from browser.test_lane_labels import assert_apart, label_boxes
from browser.test_workspace import expect_workspace, open_as

BIG = "auditor-swarm"
# What the view does depends on the agents, not on the events past binning (LOD_ABOVE); 100,000 events took three
# times as long here.
EVENTS = 30_000
SIZES = [{"width": 1440, "height": 900}, {"width": 1280, "height": 800}]
LARGEST_ROLE = "executor"  # generate_swarm(1000, EVENTS)'s most numerous role
MAX_PX_ASKED = max(DEFAULT_PX[0] * DEFAULT_PX[1], 1440 * 900)  # what the page asks is at most its window


@pytest.fixture(scope="module")
def big(live_server):
    trace = swarm(1000, EVENTS, 11, BIG)
    post_swarm(live_server, trace)
    return trace


def shot(page, name: str) -> None:
    size = page.viewport_size
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SCREENSHOTS / f"auditor-{name}-{size['width']}x{size['height']}.png"))


def edges_drawn(page) -> dict:
    """Edge lines of the visible edge traces, the budget the server drew them to, and the plot's pixels."""
    return page.evaluate("""() => {
        const gd = document.getElementById("graph"), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const lines = gd.data.filter((t) => t.meta && t.meta.kind === "edge" && t.visible !== false)
            .reduce((n, t) => n + t.x.filter((x) => x === null).length, 0);
        return {lines, budget: parseInt(gd.dataset.edgeBudget || "0"), pixels: xa._length * ya._length};
    }""")


def assert_within_budget(page) -> None:
    drawn = edges_drawn(page)
    assert 0 < drawn["lines"] <= drawn["budget"], drawn
    # the budget is the server's (one line per BUNDLE_AREA_PX of the plot size asked: the first view asks the
    # default size, preloaded); on the plot drawn, at most one line per 20 x 20 px
    assert drawn["budget"] <= MAX_PX_ASKED / BUNDLE_AREA_PX and drawn["lines"] <= drawn["pixels"] / 400, drawn


def wait_for_window(page) -> None:
    page.wait_for_function("() => document.getElementById('graph').dataset.windowMs !== undefined", timeout=60_000)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s['width']}x{s['height']}")
def test_the_overview_bundles_edges_within_the_budget_and_starts_in_the_first_screen(page, live_server, big, size):
    page.set_viewport_size(size)
    open_as(page, live_server, BIG, reviewer=None)
    expect(page.locator("#graph-status")).to_contain_text("binned")
    assert_within_budget(page)
    widths = page.evaluate("""() => [...new Set(document.getElementById("graph").data
        .filter((t) => t.meta && t.meta.kind === "edge").map((t) => t.line.width))]""")
    assert len(widths) >= 2, widths  # a bundle's width says how many edges it stands for
    top = page.evaluate("""() => { const gd = document.getElementById("graph");
        return gd.getBoundingClientRect().top + gd._fullLayout.yaxis._offset; }""")
    assert top < size["height"] - 200, top  # the plot's first lanes are seen without scrolling
    expect(page.locator("#edge-toggles input[data-edge=temporal]")).not_to_be_checked()
    shot(page, "overview")
    if size != SIZES[0]:
        return  # a toggle kept in the URL is the same at any size: checked once (a second load of the trace is seconds)
    message = page.locator("#edge-toggles input[data-edge=message]")
    message.uncheck()
    expect(page).to_have_url(re.compile(r"[?&]edges=[^&]*"))
    assert "message" not in re.search(r"edges=([^&]*)", page.url).group(1)
    assert page.evaluate("""() => document.getElementById("graph").data
        .filter((t) => t.meta && t.meta.edge_type === "message").every((t) => t.visible === false)""")
    open_as(page, live_server, BIG, reviewer=None, query="?" + page.url.split("?", 1)[1])
    expect(page.locator("#edge-toggles input[data-edge=message]")).not_to_be_checked()


def test_hovering_a_role_tells_its_agents_and_events(page, live_server, big):
    open_as(page, live_server, BIG, reviewer=None)
    band = page.evaluate("""() => document.getElementById("graph").data
        .find((d) => d.meta && d.meta.kind === "role" && d.meta.role === "verifier").text""")
    assert re.search(r"verifier</b>: 56 agents · [\d,]+ events<br>active t [\d.]+ – [\d.]+", band), band
    label = page.locator("#graph .yaxislayer-above .ytick text", has_text="verifier ×56")
    label.hover()
    expect(label.locator("title")).to_have_text(re.compile(r"^verifier: 56 agents · [\d,]+ events\nactive t "))
    assert label.evaluate("el => getComputedStyle(el).pointerEvents") != "none"  # the label gets the hover


def test_a_click_on_a_bin_zooms_to_its_lanes_and_time(page, live_server, big):
    open_as(page, live_server, BIG, reviewer=None)
    page.locator("#graph").scroll_into_view_if_needed()
    target = page.evaluate("""() => {
        const gd = document.getElementById("graph"), xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
        const box = gd.getBoundingClientRect();
        let best = null;
        gd.data.forEach((t) => {
            if (!t.meta || t.meta.kind !== "bins") return;
            t.customdata.forEach((c, k) => { if (!best || c[0] > best.c[0]) best = {c, x: t.x[k], y: t.y[k]}; });
        });
        return {x: box.left + xa._offset + xa.l2p(best.x), y: box.top + ya._offset + ya.l2p(best.y),
                data: best.c, whole: xa.range};
    }""")
    t0, t1 = target["data"][6:8]
    page.evaluate("() => { delete document.getElementById('graph').dataset.windowMs; }")
    page.mouse.click(target["x"], target["y"])
    wait_for_window(page)
    x_range = page.evaluate("document.getElementById('graph')._fullLayout.xaxis.range")
    assert x_range == pytest.approx([t0, t1], rel=1e-6, abs=1e-6), (x_range, target)
    whole = target["whole"][1] - target["whole"][0]
    assert (x_range[1] - x_range[0]) < whole / 20
    lanes = page.evaluate("document.getElementById('graph')._fullLayout.yaxis.ticktext")
    assert lanes and not any("×" in lane for lane in lanes), lanes  # the role's agents, each on its own lane
    expect(page).to_have_url(re.compile(r"[?&]expand="))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s['width']}x{s['height']}")
def test_expanding_the_largest_role_labels_every_lane_in_view_within_the_edge_budget(page, live_server, big, size):
    page.set_viewport_size(size)
    open_as(page, live_server, BIG, reviewer=None)
    page.evaluate("() => { delete document.getElementById('graph').dataset.windowMs; }")
    page.locator("#lane-groups button", has_text=f"expand {LARGEST_ROLE}").click()
    wait_for_window(page)
    expect(page).to_have_url(re.compile(rf"[?&]expand={LARGEST_ROLE}"))
    view = page.evaluate("""() => { const gd = document.getElementById("graph"), ya = gd._fullLayout.yaxis;
        return {range: ya.range, ticks: ya.ticktext}; }""")
    in_view = round(abs(view["range"][0] - view["range"][1]))
    assert 10 <= in_view < 376, view
    assert len(view["ticks"]) == in_view and all(t.startswith(f"{LARGEST_ROLE}-") for t in view["ticks"]), view
    assert_apart(label_boxes(page))
    assert_within_budget(page)
    scroller = page.locator("#lane-scroll")
    expect(scroller).to_be_visible()
    shot(page, "expanded")
    page.evaluate("() => { delete document.getElementById('graph').dataset.windowMs; }")
    scroller.evaluate("el => { el.scrollTop = el.scrollHeight / 2; }")
    wait_for_window(page)
    moved = page.evaluate("document.getElementById('graph')._fullLayout.yaxis.range")
    assert min(moved) > max(view["range"]), (moved, view["range"])  # lanes further down the role
    assert_within_budget(page)


def shot_at_both_sizes(page, name: str) -> None:
    """The screenshot at each size, the view kept (a second load of the trace costs seconds)."""
    for size in (SIZES[1], SIZES[0]):  # back at the size the test runs at
        page.set_viewport_size(size)
        page.wait_for_timeout(800)  # plotly's responsive relayout
        shot(page, name)


def test_find_shows_the_agents_own_lane_then_who_it_talks_to(page, live_server, big):
    page.set_viewport_size(SIZES[0])
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
    lane = page.evaluate("""(agent) => { const gd = document.getElementById("graph"), ya = gd._fullLayout.yaxis;
        const i = ya.ticktext.indexOf("<b>" + agent + "</b>");
        return {value: i < 0 ? null : ya.tickvals[i], range: ya.range, shapes: gd._fullLayout.shapes.length}; }""", agent)
    assert lane["value"] is not None, lane  # its own lane, labelled in bold
    assert min(lane["range"]) < lane["value"] < max(lane["range"]) and lane["shapes"] == 1, lane
    crossing = page.evaluate("""() => { const gd = document.getElementById("graph"), [a, b] = gd._fullLayout.yaxis.range;
        const lo = Math.min(a, b), hi = Math.max(a, b), inView = (y) => y >= lo && y <= hi;
        let n = 0;
        gd.data.filter((t) => t.meta && t.meta.kind === "edge").forEach((t) => {
            for (let i = 0; i + 1 < t.y.length; i += 3) if (!inView(t.y[i]) && !inView(t.y[i + 1])) n += 1; });
        return n; }""")
    assert crossing == 0  # an edge drawn one by one has an end on a lane in view
    expect(page).to_have_url(re.compile(rf"[?&]expand={LARGEST_ROLE}"))
    expect(page.locator("#agent-focus")).to_contain_text(agent)
    shot_at_both_sizes(page, "found")
    page.locator("#agent-focus button[data-show=talks]").click()
    expect(page.locator("#agent-focus button[data-show=talks]")).to_have_attribute("aria-pressed", "true", timeout=30_000)
    expect(page).to_have_url(re.compile(rf"[?&]focus={agent}&show=talks"))
    expect(page.locator("#graph-status")).to_contain_text("each drawn")  # its few lanes' events, one by one
    labels = page.evaluate("document.getElementById('graph')._fullLayout.yaxis.ticktext")
    assert 2 <= len(labels) < 20 and any(agent in label for label in labels), labels
    assert any(label.startswith("manager-") for label in labels), labels  # the manager that spawned it
    shot(page, "talks")
    page.locator("#agent-focus button", has_text="all lanes").click()
    expect(page).not_to_have_url(re.compile(r"focus="), timeout=30_000)


def test_only_a_subtree_from_the_spawn_tree_narrows_the_lanes_and_the_url_keeps_it(page, live_server, ingest):
    from browser.conftest import REPO
    trace_id = ingest(REPO / "sample_traces" / "hierarchical.json")[0]
    open_as(page, live_server, trace_id, reviewer=None)
    status = page.locator("#graph-status")
    lanes_before = int(status.inner_text().split(" lanes")[0].split("· ")[-1])
    button = page.locator(".tree button[data-focus]").nth(1)  # a sub-agent that spawned others
    agent = button.get_attribute("data-focus")
    button.click()
    expect(page).to_have_url(re.compile(rf"[?&]focus={re.escape(agent)}&show=subtree"), timeout=30_000)
    expect(page.locator("#agent-focus button[data-show=subtree]")).to_have_attribute("aria-pressed", "true")
    page.wait_for_function("(n) => !document.getElementById('graph-status').textContent.includes(n + ' lanes')",
                           arg=lanes_before)
    narrowed = int(status.inner_text().split(" lanes")[0].split("· ")[-1])
    assert 1 < narrowed < lanes_before
    labels = page.evaluate("document.getElementById('graph')._fullLayout.yaxis.ticktext")
    assert labels[0] == f"<b>{agent}</b>", labels  # the subtree's root first, marked
    page.reload()
    page.wait_for_selector('#graph[data-drawn="true"]', state="attached")
    expect(status).to_contain_text(f"{narrowed} lanes")
