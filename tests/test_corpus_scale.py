"""Corpus pages over a store of a few thousand generated rollouts (issue 30): they answer from stored columns and
DuckDB aggregates (asserted by the statements each runs, with the per-trace analysis made to fail), and their
filters, sorts, pages and charts count what a hand count over the generated rollouts says."""

import json
import logging
import math
import re
import shutil
from urllib.parse import parse_qsl, urlsplit

import pytest
from bs4 import BeautifulSoup
from conftest import BASE_URL, post_json
from fastapi.testclient import TestClient

from app.domain import analysis as domain_analysis
from app.domain.audit import audit
from app.domain.generate import generate_swarm
from app.main import create_app
from app.services import analysis as analysis_service
from app.services import labels, queues
from app.services.corpus import CorpusFacts
from app.settings import Settings
from app.store import traces as trace_store
from app.store.sql import traced_statements
from app.web.routes.corpus_pages import dashboard

pytestmark = pytest.mark.heavy

ROLLOUTS = 3_000
AGENTS = 3  # team members of each rollout
REQUEST = 1_000
GROUP = 8  # rollouts per task, as a GRPO group
SYSTEMS = ("policy-a", "policy-b")
TOPOLOGIES = ("swarm", "centralized")
LATE_EVERY = 7  # every 7th rollout has an edge back in time: a time_order finding
STATEMENTS_AT_MOST = 12  # statements of any corpus page, whatever the corpus size
PER_TRACE_TABLES = re.compile(r"\b(FROM|JOIN)\s+(events|edges)\b")


def rollout(i: int) -> dict:
    """Rollout i: its own seed, task (in groups of GROUP), system, topology and rewards; no `tool` channel on odd
    rollouts."""
    trace = generate_swarm(AGENTS, 12, seed=i)
    trace |= {"trace_id": f"r-{i:05d}", "task_id": f"task-{i // GROUP:04d}", "system": SYSTEMS[i % 2],
              "topology": TOPOLOGIES[i % 3 == 0]}
    if i % 2:
        del trace["rewards"]["tool"]
    if i % LATE_EVERY == 0:
        trace["edges"].append({"src": trace["events"][-1]["id"], "dst": trace["events"][0]["id"], "type": "causal"})
    return trace


@pytest.fixture(scope="module")
def generated():
    return [rollout(i) for i in range(ROLLOUTS)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, migrated_file, generated):
    """A client over a store of the generated rollouts (posted in requests of REQUEST), labels on a few traces and a
    queue over a sample, served by an app that lists each request's statements (ORCHESTRACE_TRACE_SQL)."""
    path = tmp_path_factory.mktemp("corpus") / "corpus.duckdb"
    shutil.copyfile(migrated_file, path)
    app = create_app(Settings(db=path))
    with TestClient(app, base_url=BASE_URL) as client:
        for lo in range(0, ROLLOUTS, REQUEST):
            assert post_json(client, generated[lo:lo + REQUEST]).status_code == 201
        for trace in generated[:30]:
            for reviewer in ("ada", "bob"):
                labels.save_label(app.state.db, {"trace_id": trace["trace_id"], "event_id": trace["events"][4]["id"],
                                                 "reviewer": reviewer, "credit": 0.5, "reward_family": "R1"})
        queues.create_queue(app.state.db, {"name": "sample", "filter": {"event_types": ["tool_call"]},
                                           "reviewers": ["ada", "bob"], "sample": {"n": 40, "seed": 1}}, None)
    sql_log = logging.getLogger("orchestrace.sql")
    level, handlers = sql_log.level, list(sql_log.handlers)
    app = create_app(Settings(db=path, trace_sql=True))
    with TestClient(app, base_url=BASE_URL) as client:
        yield client
    app.state.db.close()
    sql_log.setLevel(level)
    sql_log.handlers[:] = handlers


@pytest.fixture
def no_per_trace_analysis(monkeypatch):
    """The per-trace analysis path fails if anything takes it."""
    def fail(*args, **kwargs):
        raise AssertionError("a corpus page analysed a trace")
    monkeypatch.setattr(domain_analysis, "analyse", fail)
    for name in ("ensure_analysis", "ensure_all", "stored_trace"):
        monkeypatch.setattr(analysis_service, name, fail)


def traced(client, url: str) -> tuple:
    """The answer to `url` and the statements it ran (their SQL, listed at the page's foot; for JSON, None)."""
    response = client.get(url, params={"_trace": "1"})
    assert response.status_code == 200, url
    count = int(re.search(r'desc="(\d+) statements"', response.headers["server-timing"]).group(1))
    listing = BeautifulSoup(response.text, "html.parser").select_one("#sql-trace") \
        if response.headers["content-type"].startswith("text/html") else None
    sql = [row.select("td")[1].get_text() for row in listing.select("tbody tr")] if listing else None
    return response, count, sql


QUEUE = "/queues"
CORPUS_URLS = ["/", "/?sort=-reward:team", "/?sort=critical_path_steps&page=40", "/?task=task-0003",
               "/?q=r-0001", "/?range=reward:team:0.5:0.8&range=tokens::60000", "/?finding=time_order",
               "/?topology=swarm&system=policy-a&sort=-errors", "/dashboard", "/audit", "/audit?sort=-time_order&page=2",
               "/ingest-log", "/ingest-log?outcome=ok&endpoint=POST%20/api/traces", "/annotations",
               "/annotations?reviewer=ada&page=2", QUEUE, "/api/traces?sort=-reward:tool&range=agents:3:4&limit=100",
               "/api/ingest-log"]


# The one statement of a corpus page that reads events: the labels page's lookup of the labelled events, which says
# which labels lost their event (app/store/labels.py orphaned_labels).
ORPHAN_LOOKUP = "LEFT JOIN events e ON e.trace_id = l.trace_id AND e.event_id = l.event_id"


@pytest.mark.parametrize("url", CORPUS_URLS)
def test_corpus_pages_answer_from_stored_columns(corpus, no_per_trace_analysis, url):
    _, count, sql = traced(corpus, url)
    assert count <= STATEMENTS_AT_MOST
    if sql is not None:
        assert len(sql) == count
        assert not [s for s in sql if PER_TRACE_TABLES.search(s) and ORPHAN_LOOKUP not in s]


def test_a_queue_page_reads_its_items_not_the_corpus(corpus, no_per_trace_analysis):
    queue = corpus.get("/api/queues").json()["queues"][0]
    _, count, sql = traced(corpus, f"/queues/{queue['id']}")
    assert count <= STATEMENTS_AT_MOST and not [s for s in sql if PER_TRACE_TABLES.search(s)]


def test_pages_of_uploaded_traces_read_nothing_of_the_live_traces(corpus, generated):
    """No exporter made these traces (live.may_be_live): on a lake, a read of the live traces' table costs its
    catalog round trips however few its rows."""
    for url in ("/", f"/traces/{generated[0]['trace_id']}"):
        _, _, sql = traced(corpus, url)
        assert sql and not [s for s in sql if "live_traces" in s], url


def test_the_systems_topologies_and_reward_channels_offered_are_those_stored_in_one_read(corpus, generated):
    page = BeautifulSoup(corpus.get(QUEUE).text, "html.parser")  # the new queue's form offers them
    for name, field in (("system", "systems"), ("topology", "topologies")):
        offered = [option.get_text() for option in page.select(f'select[name="{field}"] option')]
        assert offered == sorted({t[name] for t in generated if t.get(name)}), name
    listed = BeautifulSoup(corpus.get("/").text, "html.parser")  # the trace list's reward columns to choose
    assert [box["value"] for box in listed.select('.column-choices input[name="reward"]')] == sorted(
        {channel for t in generated for channel in t["rewards"]})
    with traced_statements() as ran:  # on a lake, each read of the traces costs its catalog round trips
        trace_store.trace_facets(corpus.app.state.db)
    assert len(ran) == 1


def test_the_facets_and_the_reward_channels_are_built_in_one_read(corpus, generated):
    """The trace list shows both: on a lake it waited for one read of them after the other."""
    facts = CorpusFacts(corpus.app.state.db)  # nothing kept yet
    with traced_statements() as ran:
        facets, channels = facts.trace_facets(), facts.reward_channels()
    assert channels == facets["reward_channels"] == sorted({c for t in generated for c in t["rewards"]})
    assert sum("DISTINCT" in sql for sql, *_ in ran) == 1, [sql[:60] for sql, *_ in ran]


def listed(client, **params) -> dict:
    answer = client.get("/api/traces", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_filters_count_what_a_hand_count_says(corpus, generated):
    by_task = listed(corpus, task="task-0003", limit=100)
    assert by_task["total"] == GROUP and {t["task_id"] for t in by_task["items"]} == {"task-0003"}
    both = listed(corpus, topology="swarm", system="policy-a")
    assert both["total"] == sum(t["topology"] == "swarm" and t["system"] == "policy-a" for t in generated)
    assert listed(corpus, q="R-0001")["total"] == sum("r-0001" in t["trace_id"] for t in generated)
    late = listed(corpus, finding="time_order", limit=1000)
    by_reference = {t["trace_id"] for t in generated if any(f["rule"] == "time_order" for f in audit(t))}
    assert {t["trace_id"] for t in late["items"]} == by_reference and late["total"] == len(by_reference)


def test_ranges_keep_low_up_to_but_not_high(corpus, generated):
    team = listed(corpus, range="reward:team:0.5:0.8")["total"]
    assert team == sum(0.5 <= t["rewards"]["team"] < 0.8 for t in generated)
    open_ended = listed(corpus, range=["reward:tool:0.05:", "tokens::70000"])["total"]
    assert open_ended == sum("tool" in t["rewards"] and t["rewards"]["tool"] >= 0.05
                             and t["costs"]["tokens"] < 70000 for t in generated)
    assert listed(corpus, range="reward:tool::")["total"] == sum("tool" in t["rewards"] for t in generated)
    for bad in ("reward:team", "tokens:a:1", "nope:1:2", "tokens:1:inf"):
        answer = corpus.get("/api/traces", params={"range": bad})
        assert answer.status_code == 422 and "range" in answer.text
    assert corpus.get("/api/traces", params={"finding": "no_such_rule"}).status_code == 422


@pytest.fixture(scope="module")
def late_ids(generated) -> set[str]:
    return {t["trace_id"] for t in generated if any(f["rule"] == "time_order" for f in audit(t))}


def by_hand(generated, late_ids, sort: str, system=None, q=None, finding=None, ranges=()) -> list[str]:
    """The ids the list gives for these filters and sort (a numeric key, or trace_id), counted over the rollouts:
    low <= value < high, a trace without the value outside the range and last in the sort, ties by id."""
    def value(trace, key):
        return trace["rewards"].get(key.removeprefix("reward:")) if key.startswith("reward:") \
            else trace["costs"][key]

    kept = [t for t in generated if (system is None or t["system"] == system) and (q is None or q in t["trace_id"])
            and (finding is None or t["trace_id"] in late_ids)
            and all(value(t, key) is not None and (low is None or value(t, key) >= low)
                    and (high is None or value(t, key) < high) for key, low, high in ranges)]
    key, descending = sort.removeprefix("-"), sort.startswith("-")
    if key == "trace_id":
        return sorted((t["trace_id"] for t in kept), reverse=descending)
    return [t["trace_id"] for t in sorted(kept, key=lambda t: (
        value(t, key) is None, -(value(t, key) or 0) if descending else value(t, key) or 0, t["trace_id"]))]


def range_text(key: str, low, high) -> str:
    return f"{key}:{'' if low is None else low}:{'' if high is None else high}"


@pytest.mark.parametrize("sort, filters", [
    ("-reward:team", {"ranges": [("reward:team", 0.5, 0.8)]}),
    ("reward:process", {"ranges": [("reward:team", 0.8, None), ("reward:tool", 0.05, None)]}),
    ("-reward:tool", {"finding": "time_order"}),
    ("tokens", {"finding": "time_order", "system": "policy-a", "ranges": [("reward:team", None, 0.7)]}),
    ("-reward:tool", {"q": "r-001", "ranges": [("reward:tool", 0.05, None)]}),
    ("reward:tool", {}),
    ("-trace_id", {"ranges": [("reward:team", 0.5, 0.8), ("reward:team", 0.6, None), ("tokens", None, 70000)]}),
    ("trace_id", {"ranges": [("reward:no_such_channel", None, None)]}),
])
def test_reward_and_finding_filters_and_sorts_list_what_a_hand_count_says(corpus, generated, late_ids, sort,
                                                                           filters):
    expected = by_hand(generated, late_ids, sort, **filters)
    params = {key: value for key, value in filters.items() if key != "ranges"}
    answer = listed(corpus, sort=sort, limit=1000, range=[range_text(*r) for r in filters.get("ranges", ())],
                    **params)
    assert answer["total"] == len(expected)
    assert [t["trace_id"] for t in answer["items"]] == expected[:1000]


def test_sorts_and_pages_agree_with_the_api(corpus, generated):
    rewards = [t["rewards"].get("tool") for t in listed(corpus, sort="-reward:tool", limit=1000, offset=1000)["items"]]
    have = [r for r in rewards if r is not None]
    assert have and have == sorted(have, reverse=True) and rewards[len(have):] == [None] * (1000 - len(have))
    api = [t["trace_id"] for t in listed(corpus, sort="-reward:team", limit=25, offset=50)["items"]]
    page = BeautifulSoup(corpus.get("/", params={"sort": "-reward:team", "page": 3}).text, "html.parser")
    assert [tr["data-trace-id"] for tr in page.select("tr[data-trace-id]")] == api
    expected = sorted(generated, key=lambda t: (-t["rewards"]["team"], t["trace_id"]))
    assert api == [t["trace_id"] for t in expected[50:75]]


def test_the_list_page_says_which_filter_it_left_out(corpus):
    page = BeautifulSoup(corpus.get("/", params={"range": "tokens:x:1", "task": "task-0001"}).text, "html.parser")
    assert "Left out" in page.select_one("#trace-table .notice").get_text()
    ranged = BeautifulSoup(corpus.get("/", params=[("range", "reward:team:0.5:"), ("range", "tokens::70000")]).text,
                           "html.parser")
    chips = ranged.select("[data-range]")
    assert [chip["data-range"] for chip in chips] == ["reward:team:0.5:", "tokens::70000"]
    remove = dict(parse_qsl(urlsplit(chips[0].a["href"]).query))
    assert remove == {"range": "tokens::70000"}


def figures(client) -> dict:
    page = BeautifulSoup(client.get("/dashboard").text, "html.parser")
    return json.loads(page.select_one("script.charts-data").get_text())


def test_dashboard_bins_count_what_a_hand_count_says(corpus, generated):
    chart = figures(corpus)["reward-team"]["data"][0]
    assert chart["type"] == "heatmap"  # more traces than points: bins
    xs, ys, z = chart["x"], chart["y"], chart["z"]
    for j in range(len(ys) - 1):
        for i in range(len(xs) - 1):
            hand = sum(xs[i] <= AGENTS < xs[i + 1] and ys[j] <= t["rewards"]["team"] < ys[j + 1] for t in generated)
            assert (z[j][i] or 0) == hand
    assert sum(n or 0 for row in z for n in row) == ROLLOUTS


def test_a_dashboard_bin_links_to_the_traces_it_counts(corpus):
    chart = figures(corpus)["tokens-speedup"]["data"][0]
    cells = [(n, chart["customdata"][j][i]) for j, row in enumerate(chart["z"]) for i, n in enumerate(row) if n]
    assert sum(n for n, _ in cells) == ROLLOUTS and chart["meta"] == "links"
    for n, url in sorted(cells, reverse=True)[:3] + cells[:2]:
        params = parse_qsl(urlsplit(url).query)
        assert [key for key, _ in params] == ["range", "range"]
        assert listed(corpus, range=[value for _, value in params])["total"] == n


def test_dashboard_bars_count_and_link(corpus, generated):
    bars = figures(corpus)
    topology = bars["by-topology"]["data"][0]
    assert dict(zip(topology["y"], topology["x"])) == {
        name: sum(t["topology"] == name for t in generated) for name in TOPOLOGIES}
    assert topology["customdata"] == [f"/?topology={name}" for name in topology["y"]]
    system = bars["by-system"]["data"][0]
    assert dict(zip(system["y"], system["x"])) == {
        name: sum(t["system"] == name for t in generated) for name in SYSTEMS}
    assert system["x"] == sorted(system["x"], reverse=True)  # most first
    findings = bars["findings"]["data"][0]
    assert findings["customdata"][findings["y"].index("time_order")] == "/?finding=time_order"
    late = sum(len([f for f in audit(t) if f["rule"] == "time_order"]) for t in generated)
    assert findings["x"][findings["y"].index("time_order")] == late


def test_the_dashboard_reads_the_measures_in_few_statements(corpus):
    """On a lake each statement pays its catalog round trips: the counts, the bars and the columns' extents are one
    read, the reward channels' extents one (beside it), the bins one, and the reward channels' fact one look at the
    corpus version."""
    app = corpus.app
    app.state.corpus.reward_channels()  # built now if the start's warm-up has not yet: the dashboard reads it kept
    with traced_statements() as ran:
        dashboard.build(app.state.db, app.state.corpus)
    assert len(ran) <= 4, [sql[:60] for sql, *_ in ran]


def test_audit_pages_sort_by_a_rule_and_total_by_rule(corpus, generated):
    late = sum(any(f["rule"] == "time_order" for f in audit(t)) for t in generated)
    page = BeautifulSoup(corpus.get("/audit", params={"sort": "-time_order"}).text, "html.parser")
    total = page.select_one('#rule-totals [data-rule="time_order"] .value').get_text(" ", strip=True)
    assert total.startswith(f"{late:,}") and f"in {late:,} traces" in total
    rows = page.select("#audit-table tbody tr")
    headers = [th.get_text(strip=True) for th in page.select("#audit-table thead th")]
    column = next(i for i, h in enumerate(headers) if h.startswith("time_order"))
    assert len(rows) == 50 and all(row.select("td")[column].get_text() != "0" for row in rows)
    assert "page 1 of 60" in page.select_one(".pager").get_text()
    last = BeautifulSoup(corpus.get("/audit", params={"sort": "trace_id", "page": 60}).text, "html.parser")
    assert [tr["data-trace-id"] for tr in last.select("#audit-table tbody tr")][-1] == f"r-{ROLLOUTS - 1:05d}"


def test_points_while_the_corpus_is_small(client):
    """Up to POINTS_UP_TO traces, each trace is a point linking to it (bins are for more)."""
    post_json(client, [rollout(i) for i in range(3)])
    chart = figures(client)["reward-team"]["data"][0]
    assert chart["type"] == "scatter" and chart["meta"] == "trace-links"
    assert chart["customdata"] == ["r-00000", "r-00001", "r-00002"]
    assert not math.isnan(sum(chart["y"]))
