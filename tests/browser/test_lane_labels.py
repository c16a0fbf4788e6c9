"""Lane labels never print over each other: on a 1,000-lane trace the graph labels every n-th lane, and a zoom
into a few lanes labels each of them."""

from urllib.parse import quote

from playwright.sync_api import expect

from app.domain.generate import generate_swarm


def label_boxes(page) -> list[dict]:
    return page.locator("#graph .yaxislayer-above .ytick text").evaluate_all(
        "els => els.map(e => { const r = e.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, text: e.textContent}; })")


def assert_apart(boxes: list[dict]) -> None:
    boxes = sorted(boxes, key=lambda box: box["top"])
    overlaps = [(a["text"], b["text"]) for a, b in zip(boxes, boxes[1:]) if b["top"] < a["bottom"] - 0.5]
    assert not overlaps, overlaps[:5]


def test_labels_of_a_thousand_lanes_do_not_overlap_before_or_after_a_zoom(page, live_server, ingest):
    trace = generate_swarm(1000, 4000, seed=5)
    trace["trace_id"] = "many-lanes"
    ingest(trace)
    page.goto(f"{live_server}/traces/{quote(trace['trace_id'])}")
    page.wait_for_selector('#graph[data-drawn="true"]', state="attached")
    page.locator("#group-lanes").uncheck()  # one lane per agent: about a thousand
    page.wait_for_function("() => document.querySelectorAll('#graph .ytick text').length > 0 && "
                           "window.orchestrace && document.getElementById('graph').data")
    expect(page.locator("#graph-status")).to_contain_text("lanes")
    page.wait_for_timeout(300)
    whole = label_boxes(page)
    assert 5 < len(whole) < 1000
    assert_apart(whole)
    page.evaluate("Plotly.relayout(document.getElementById('graph'), {'yaxis.range': [20.5, 9.5]})")
    page.wait_for_function("() => document.querySelectorAll('#graph .ytick text').length >= 8")
    zoomed = label_boxes(page)
    assert len(zoomed) >= 8  # eleven lanes in view: each labelled, or nearly
    assert_apart(zoomed)
