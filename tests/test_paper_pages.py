"""Paper pool pages: browse with filters, the paper page with tagging, exclusion log, stats, disagreements."""

import json

import pytest
from bs4 import BeautifulSoup
from conftest import form_headers
from test_papers import EXCLUDED_CSV, POOL_CSV


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")


@pytest.fixture
def pool(client):
    for body in (POOL_CSV, EXCLUDED_CSV):
        assert client.post("/api/papers/import", content=body, headers={"Content-Type": "text/csv"}).status_code == 200


def keys(page) -> list[str]:
    return [tr["data-paper-key"] for tr in page.select("#papers-table tbody tr[data-paper-key]")]


def test_an_absurd_page_number_is_not_an_error(client, pool):
    last = client.get("/papers", params={"page": 10**21})
    assert last.status_code == 200 and keys(BeautifulSoup(last.text, "html.parser"))


def test_papers_list_filters_search_sort(client, pool):
    assert keys(soup(client.get("/papers"))) == ["magrpo", "swarmrl", "bench1", "debate1"]
    both = soup(client.get("/papers?reward_type=debate&reward_type=shared", headers={"HX-Request": "true",
                                                                                 "HX-Target": "papers-table"}))
    assert keys(both) == ["magrpo", "debate1"] and "<html" not in str(both)
    assert both.select_one("#papers-count").get_text() == "2"
    assert keys(soup(client.get("/papers", params={"q": "SPAWN"}))) == ["swarmrl"]  # searches the one-liner
    assert keys(soup(client.get("/papers", params={"sort": "-year"}))) == ["swarmrl", "magrpo", "bench1", "debate1"]
    selects = soup(client.get("/papers")).select("#paper-filters select[multiple]")
    assert [s["name"] for s in selects] == ["category", "is_rl", "reward_type", "credit_granularity",
                                            "orchestration_form", "scenario", "is_core", "verified"]


def tag_form(page) -> dict:
    """What a browser would send from the tag form as shown: every select, hidden input and the note."""
    form = page.select_one("#tag-form")
    data = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")}
    data |= {s["name"]: s.select_one("option[selected]")["value"] for s in form.select("select")}
    return data | {"note": form.select_one("textarea[name=note]").get_text()}


def test_paper_page_and_tag_form(client, pool):
    page = soup(client.get("/papers/swarmrl"))
    assert page.h1.get_text() == "Swarm orchestration, learned"
    assert page.select_one('a[href="https://arxiv.org/abs/2601.00001"]')["rel"] == ["noopener", "noreferrer"]
    shown = page.select_one("#tag-form select[name=credit_granularity] option[selected]")
    assert shown["value"] == "" and shown.get_text() == "as the pool says (orchestrator)"
    headers = form_headers(client, "paper-tags")
    client.post("/reviewer", data={"new_name": "ada"}, headers=headers)
    form = tag_form(soup(client.get("/papers/swarmrl")))
    saved = client.post("/papers/swarmrl/tags", data=form | {"credit_granularity": "agent", "note": "hm"},
                        headers=headers)
    assert saved.status_code == 200 and soup(saved).select_one(".status").get_text() == "saved v1"
    differs = [td.get_text() for td in soup(saved).select("#tag-comparison td.differs")]
    assert differs == ["agent"]
    assert client.get("/papers/nope").status_code == 404


def test_tag_form_saves_only_the_fields_changed(client, pool):
    headers = form_headers(client, "paper-tags")
    client.post("/reviewer", data={"new_name": "ada"}, headers=headers)
    form = tag_form(soup(client.get("/papers/magrpo")))
    client.post("/papers/magrpo/tags", data=form | {"reward_type": "hybrid", "scenario": "coding"}, headers=headers)
    [first] = client.get("/api/papers/magrpo/tags").json()["items"]
    assert {f: v for f, v in first.items() if f in form and v is not None} == {"reward_type": "hybrid",
                                                                               "scenario": "coding", "note": ""}
    page = soup(client.get("/papers/magrpo"))
    assert page.select_one("select[name=reward_type] option[selected]")["value"] == "hybrid"
    assert page.select_one("select[name=category] option[selected]")["value"] == ""  # still as the pool says

    # another tab saves is_rl; this page's form, loaded before, changes scenario back to the pool only
    client.post("/api/papers/magrpo/tags", json={"reviewer": "ada", "is_rl": "partial"})
    again = client.post("/papers/magrpo/tags", data=tag_form(page) | {"scenario": ""}, headers=headers)
    third = client.get("/api/papers/magrpo/tags").json()["items"][-1]
    assert (third["version"], third["scenario"], third["is_rl"], third["reward_type"]) == (3, None, "partial", "hybrid")
    history = soup(again).select("#tag-history tbody tr")
    assert history[0].select_one("td.wrap").get_text(" ", strip=True) == "scenario as the pool says"

    unchanged = client.post("/papers/magrpo/tags", data=tag_form(soup(again)), headers=headers)
    assert soup(unchanged).select_one(".status").get_text() == "nothing changed: no new version"
    assert len(client.get("/api/papers/magrpo/tags").json()["items"]) == 3


def test_untrusted_paper_url_is_not_a_link(client):
    body = POOL_CSV.replace(b"https://example.org/b", b"javascript:alert(1)")
    client.post("/api/papers/import", content=body, headers={"Content-Type": "text/csv"})
    page = soup(client.get("/papers/bench1"))
    assert not page.select('a[href^="javascript"]') and "javascript:alert(1)" in page.get_text()


def test_excluded_page_filters(client, pool):
    page = soup(client.get("/papers/excluded", params={"stage": "full_text_screen"}))
    assert [tr["data-record-id"] for tr in page.select("tr[data-record-id]")] == ["E002"]
    assert [o["value"] for o in page.select("select[name=stage] option")][1:] == ["abstract_screen", "full_text_screen"]


def test_stats_page_embeds_charts_for_the_chosen_source(client, pool):
    client.post("/api/papers/magrpo/tags", json={"reviewer": "ada", "credit_granularity": "orchestrator"})
    page = soup(client.get("/papers/stats", params={"source": "ada"}))
    figures = json.loads(page.select_one("#charts-data").get_text())
    assert {"count-credit_granularity", "cross-reward_type x credit_granularity", "excluded-stage"} <= set(figures)
    assert len(page.select("[data-chart]")) == len(figures)
    heat = figures["cross-reward_type x credit_granularity"]["data"][0]
    assert heat["z"][heat["y"].index("shared")][heat["x"].index("orchestrator")] == 1
    assert page.select_one("#stat-retained").get_text() == "4"
    assert [o["value"] for o in page.select("#stats-source option")] == ["pool", "ada"]


def test_empty_stats_say_how_to_import_instead_of_drawing_empty_charts(client):
    page = soup(client.get("/papers/stats"))
    assert not page.select("[data-chart]") and not page.select("#stats-source")
    commands = page.select_one("#pool-empty").get_text(" ", strip=True)
    assert "orchestrace papers import papers.csv excluded.csv" in commands and "/api/papers/import" in commands
    client.post("/api/papers/import", content=POOL_CSV, headers={"Content-Type": "text/csv"})
    pool_only = soup(client.get("/papers/stats"))
    assert pool_only.select("[data-chart^=count-]") and not pool_only.select("#pool-empty")
    assert not pool_only.select("[data-chart^=excluded-]")
    assert "excluded.csv" in pool_only.select_one("#excluded-empty").get_text()


def test_every_chart_axis_grows_its_margin_to_fit_its_labels(client, pool):
    figures = json.loads(soup(client.get("/papers/stats")).select_one("#charts-data").get_text())
    axes = [(name, axis) for name, f in figures.items() for key, axis in f["layout"].items() if key.endswith("axis")]
    assert len(axes) == 2 * len(figures) and all(axis["automargin"] for _, axis in axes)


def test_disagreements_page(client, pool):
    client.post("/api/papers/magrpo/tags", json={"reviewer": "ada", "reward_type": "hybrid"})
    page = soup(client.get("/papers/disagreements", params={"reviewers": "pool,ada"}))
    rows = page.select("#disagree-reward_type tbody tr")
    assert [r.select_one("td").get_text() for r in rows] == ["magrpo"]
    assert "shared" in rows[0].get_text() and "hybrid" in rows[0].get_text()
