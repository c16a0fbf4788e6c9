"""The paper page, corpus statistics, dashboard and labels page in a real browser, at two laptop sizes:
nothing wider than the window, no axis label cut off, empty charts replaced by what to do, and the
labels page importing its own export in place."""

import csv
import io
import json
from pathlib import Path

import httpx
import pytest
from test_papers import EXCLUDED_CSV, POOL_CSV

from app.main import create_app
from app.settings import Settings
from browser.conftest import serve

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_traces").glob("*.json"))
VIEWPORTS = ({"width": 1440, "height": 900}, {"width": 1280, "height": 800})
LONG_NOTE = "see https://example.org/" + "a-path-with-no-spaces/" * 12 + " and " + "x" * 150
# Every tick label, axis title and chart title drawn outside its chart's box (so cut off by its card).
OUTSIDE_THEIR_CHART = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap((plot) => {
  const box = plot.closest('.card').getBoundingClientRect();
  return [...plot.querySelectorAll('.xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .gtitle')]
    .filter((t) => { const r = t.getBoundingClientRect();
      return r.width && (r.left < box.left || r.right > box.right || r.top < box.top || r.bottom > box.bottom); })
    .map((t) => plot.dataset.chart + ': ' + t.textContent);
})"""
PAGE_WIDTH = "() => document.documentElement.scrollWidth"


@pytest.fixture(scope="module")
def corpus(live_server):
    """The live server with the paper pool, its exclusion log and the sample traces."""
    for body in (POOL_CSV, EXCLUDED_CSV):
        assert httpx.post(f"{live_server}/api/papers/import", content=body,
                          headers={"Content-Type": "text/csv"}).status_code == 200
    traces = [json.loads(path.read_text()) for path in SAMPLES]
    assert httpx.post(f"{live_server}/api/traces", content=json.dumps(traces),
                      headers={"Content-Type": "application/json"}).status_code == 201
    return live_server


@pytest.fixture(scope="module")
def empty_server(tmp_path_factory):
    yield from serve(create_app(Settings(db=tmp_path_factory.mktemp("empty") / "empty.duckdb")))


def pick_reviewer(page, base: str, name: str, next_url: str) -> None:
    page.goto(f"{base}/reviewer?next={next_url}")
    page.fill("input[name=new_name]", name)
    page.keyboard.press("Enter")
    page.wait_for_url(f"{base}{next_url}")


def test_paper_page_fits_the_window_and_saves_only_the_changed_tags(page, corpus):
    for version in range(2):  # a long tag history: long notes, every field set
        tags = {"reviewer": "bob", "note": LONG_NOTE, "reward_type": "process", "credit_granularity": "turn",
                "orchestration_form": "planner_executor_critic", "scenario": "tool_use", "is_core": "supporting"}
        assert httpx.post(f"{corpus}/api/papers/swarmrl/tags", json=tags | {"verified": ("yes", "no")[version]}
                          ).status_code == 201
    pick_reviewer(page, corpus, "tagger-tess", "/papers/swarmrl")
    for viewport in VIEWPORTS:
        page.set_viewport_size(viewport)
        assert page.evaluate(PAGE_WIDTH) <= viewport["width"]
    assert page.locator("#tag-history tbody tr").count() == 2

    page.select_option("#tag-form select[name=reward_type]", "hybrid")
    page.select_option("#tag-form select[name=is_core]", "case")
    page.click("#tag-form button[type=submit]")
    page.wait_for_selector("#paper-tags .status.good")
    assert page.inner_text("#paper-tags .status") == "saved v1"
    [mine] = [t for t in httpx.get(f"{corpus}/api/papers/swarmrl/tags").json()["items"] if t["reviewer"] == "tagger-tess"]
    assert {f: v for f, v in mine.items() if f not in ("key", "reviewer", "version", "created_at", "note")
            and v is not None} == {"reward_type": "hybrid", "is_core": "case"}
    assert page.evaluate(PAGE_WIDTH) <= VIEWPORTS[-1]["width"]


@pytest.mark.parametrize("path", ["/papers/stats", "/dashboard"])
def test_chart_labels_are_never_cut_off(page, corpus, path):
    for viewport in VIEWPORTS:
        page.set_viewport_size(viewport)
        page.goto(corpus + path)
        page.wait_for_selector("body[data-charts-drawn]")
        assert page.locator("[data-chart] .main-svg").count() >= 6
        assert page.evaluate(OUTSIDE_THEIR_CHART) == []
        assert page.evaluate(PAGE_WIDTH) <= viewport["width"]


def test_empty_pages_say_what_to_do_instead_of_drawing_empty_charts(page, empty_server):
    page.goto(f"{empty_server}/papers/stats")
    assert page.is_visible("#pool-empty pre.command") and page.locator("[data-chart]").count() == 0
    assert page.evaluate("() => document.documentElement.scrollHeight") <= VIEWPORTS[0]["height"]
    page.goto(f"{empty_server}/dashboard")
    assert "orchestrace ingest" in page.inner_text("#dashboard-empty")
    assert page.locator("[data-chart]").count() == 0


def test_labels_page_imports_an_export_and_shows_the_outcome_in_place(page, corpus):
    label = {"trace_id": "sample-debate-001", "event_id": "e002", "reviewer": "ada", "credit": 0.5}
    assert httpx.post(f"{corpus}/api/annotations", json=label).status_code == 201
    exported = httpx.get(f"{corpus}/api/annotations/export", params={"format": "csv"}).text
    rows = list(csv.DictReader(io.StringIO(exported)))
    theirs = dict(rows[0], reviewer="grace", credit="-0.25")  # a label another server made
    bad = dict(rows[0], credit="7")

    page.goto(f"{corpus}/annotations")
    count = page.locator("#labels-table tbody tr").count()
    page.set_input_files("#label-import-file", files=[{"name": "annotations.csv", "mimeType": "text/csv",
                                                       "buffer": to_csv([*rows, theirs]).encode()}])
    page.click("#label-import button[type=submit]")
    page.wait_for_selector("#label-import-result .notice.ok")
    assert page.inner_text("#label-import-result") == "Imported 1 label version; skipped 1 already here."
    page.wait_for_function(f"() => document.querySelectorAll('#labels-table tbody tr').length === {count + 1}")
    assert "grace" in page.inner_text("#labels-table")
    assert page.input_value("#label-import-file") == ""

    page.set_input_files("#label-import-file", files=[{"name": "annotations.csv", "mimeType": "text/csv",
                                                       "buffer": to_csv([bad]).encode()}])
    page.click("#label-import button[type=submit]")
    page.wait_for_selector("#label-import-result .notice.error")
    assert page.inner_text("#label-import-result .import-errors").startswith("line 2")
    assert "credit" in page.inner_text("#label-import-result .import-errors")
    page.console_errors[:] = [e for e in page.console_errors if "422" not in e]  # the refusal, expected


def to_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
