"""The pairwise review workspace in Chromium, at 1440x900 and 1280x800: two rollouts side by side with their
answers and rewards hidden, the diff of the two runs loaded in place without its reward line, keys a/b/t choose
without saving, a choice without a reason is refused, Ctrl+Enter in the reason saves once and the next pair is
drawn in place, s skips."""

import copy
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from app.web.browser import REVIEWER_COOKIE

SHOTS = Path("/tmp/shots")
PAYLOAD = "<img src=x onerror=\"window.__pwned=1\">"
BASE = {
    "task_id": "lisbon-flight", "system": "pair-test", "topology": "centralized",
    "events": [
        {"id": "d1", "t": 0, "type": "orchestrator_decision", "agent": "lead", "role": "lead",
         "content": [{"role": "user", "content": "Find the cheapest flight to Lisbon"}]},
        {"id": "s1", "t": 1, "type": "spawn", "agent": "lead", "to": "searcher"},
        {"id": "c1", "t": 2, "type": "tool_call", "agent": "searcher", "tool": "flights.search"},
        {"id": "r1", "t": 3, "type": "tool_result", "agent": "flights.search", "tool": "flights.search"},
        {"id": "b1", "t": 4, "type": "return", "agent": "searcher", "from": "searcher", "to": "lead"},
        {"id": "g1", "t": 5, "type": "aggregate", "agent": "lead"},
    ],
    "edges": [{"src": "d1", "dst": "s1", "type": "causal"}, {"src": "c1", "dst": "r1", "type": "tool_dependency"},
              {"src": "b1", "dst": "g1", "type": "return"}],
    "rewards": {"team": 0.8125}, "costs": {"tokens": 1200, "wall_clock_s": 5},
}
ANSWERS = {"run-1": "TAP 1234 on Friday, 89 EUR, one stop in Porto. " + PAYLOAD,
           "run-2": "Ryanair FR 8361 on Thursday, 64 EUR, direct.\nBaggage is extra (25 EUR).",
           "run-3": "No flight found."}


def rollout(trace_id: str) -> dict:
    trace = copy.deepcopy(BASE) | {"trace_id": trace_id}
    trace["events"][-1]["content"] = {"output": ANSWERS[trace_id]}
    if trace_id == "run-2":  # a second search: the runs part ways
        trace["events"][2:2] = [{"id": "c0", "t": 1.5, "type": "tool_call", "agent": "searcher", "tool": "web.search"}]
    return trace


@pytest.fixture
def queue(live_server, ingest, request):
    ingest(*(rollout(t) for t in ANSWERS))
    body = {"name": f"pairs {request.node.name}", "kind": "pairwise", "pairs": {"per_group": 3, "seed": 1},
            "reviewers": [f"rev-{request.node.name[-6:]}"]}
    answer = httpx.post(f"{live_server}/api/queues", json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()


def drawn(page, item_id: int) -> None:
    page.wait_for_selector(f'#queue-workspace[data-item-id="{item_id}"]')


@pytest.mark.parametrize("size", [(1440, 900), (1280, 800)])
def test_a_reviewer_compares_two_rollouts_chooses_with_keys_and_the_next_pair_is_drawn_in_place(
        page, live_server, queue, size):
    reviewer = queue["reviewers"][0]
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.context.add_cookies([{"name": REVIEWER_COOKIE, "value": reviewer, "url": live_server}])
    page.goto(f"{live_server}/queues/{queue['id']}/review")
    drawn(page, 1)
    page.evaluate("window.__samePage = true")
    workspace = page.locator("#queue-workspace")
    expect(workspace.locator(".rollout-card")).to_have_count(2)
    expect(workspace.locator(".rollout-card").first).to_contain_text("hidden in this queue")
    expect(page.locator("#pair-diff #diff-view")).to_be_visible()  # the diff, loaded by htmx
    expect(page.locator("#pair-diff .diff-summary")).not_to_contain_text("rewards")
    assert "0.81" not in workspace.inner_text()
    assert page.evaluate("window.__pwned") is None
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"pairwise-workspace-{size[0]}.png"))
    page.screenshot(path=str(SHOTS / f"pairwise-workspace-{size[0]}-full.png"), full_page=True)

    page.keyboard.press("b")  # chooses B and puts the cursor in the reason; nothing saved
    expect(page.locator('#pair-form input[value="b"]')).to_be_checked()
    expect(page.locator("#pair-reason")).to_be_focused()
    page.keyboard.press("Control+Enter")  # no reason: refused, the choice kept
    expect(workspace.locator("#pair-form .status")).to_contain_text("reason")
    expect(page.locator('#pair-form input[value="b"]')).to_be_checked()
    page.console_errors[:] = [e for e in page.console_errors if "status of 422" not in e]  # the refusal, expected
    page.locator("#pair-reason").fill("direct and cheaper")
    page.keyboard.press("Control+Enter")
    drawn(page, 2)
    expect(workspace.locator(".workspace-bar")).to_contain_text("Saved pair 1 (v1): you chose B")
    expect(page.locator("#pair-diff #diff-view")).to_be_visible()
    page.keyboard.press("s")
    drawn(page, 3)
    expect(workspace.locator(".workspace-bar")).to_contain_text("Skipped pair 2")
    assert page.evaluate("window.__samePage") is True  # swapped in place, no page load
    items = httpx.get(f"{live_server}/api/queues/{queue['id']}/items").json()["items"]
    assert [sorted(i["choices"]) for i in items] == [[reviewer], [], []]
    assert items[0]["choices"][reviewer]["choice"] == "b"
