"""The paper pool in a real browser: filter the list with htmx, tag a paper, see the statistics drawn."""

import httpx
from test_papers import EXCLUDED_CSV, POOL_CSV


def test_filter_and_tag_papers(page, live_server):
    for body in (POOL_CSV, EXCLUDED_CSV):
        assert httpx.post(f"{live_server}/api/papers/import", content=body,
                          headers={"Content-Type": "text/csv"}).status_code == 200
    page.goto(f"{live_server}/reviewer?next=/papers")
    page.fill("input[name=new_name]", "tagger-tom")
    page.keyboard.press("Enter")
    page.wait_for_selector("#papers-table")
    assert page.inner_text("#papers-count") == "4"

    page.select_option("select[name=reward_type]", ["debate", "shared"])
    page.wait_for_function("() => document.getElementById('papers-count').textContent === '2'")
    assert "reward_type=debate" in page.url and "reward_type=shared" in page.url
    page.fill("input[name=q]", "debate credit")
    page.wait_for_function("() => document.getElementById('papers-count').textContent === '1'")

    page.click("a[href='/papers/debate1']")
    page.wait_for_selector("#tag-form")
    page.select_option("#tag-form select[name=credit_granularity]", "orchestrator")
    page.fill("#tag-form textarea[name=note]", "credit goes to the judge's decision")
    page.click("#tag-form button[type=submit]")
    page.wait_for_selector("#paper-tags .status.good")
    assert page.inner_text("#paper-tags .status") == "saved v1"
    assert page.inner_text("#tag-comparison td.differs") == "orchestrator"

    tags = httpx.get(f"{live_server}/api/papers/debate1/tags").json()["items"]
    assert tags[0]["reviewer"] == "tagger-tom" and tags[0]["credit_granularity"] == "orchestrator"

    page.goto(f"{live_server}/papers/stats?source=tagger-tom")
    page.wait_for_selector("body[data-charts-drawn]")
    assert page.locator("[data-chart] .main-svg").count() >= 11
