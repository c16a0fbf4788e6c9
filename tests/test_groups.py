"""Rollout groups: traces sharing a key, their reward statistics and each rollout's advantage within its group."""

import pytest
from bs4 import BeautifulSoup
from conftest import make_trace, post_json

from app.domain.groups import advantages, parse_group_sort, ranked
from app.store import groups as group_store


def test_group_store_lists_keys_and_trace_ids(client, db):
    systemless = make_trace("c", task_id="y")
    del systemless["system"]
    assert post_json(client, [make_trace("b", task_id="x/1"), make_trace("a", task_id="x/1"), systemless]).is_success
    assert group_store.group_keys(db, "task_id") == ["x/1", "y"]
    assert group_store.group_trace_ids(db, "task_id", "x/1") == ["a", "b"]
    assert group_store.group_trace_ids(db, "task_id", "none") == []
    assert group_store.group_keys(db, "system") == ["unit-test"]  # a trace without a system is in no group
    for by in ("team", "rewards", "trace_id", "events"):
        with pytest.raises(group_store.GroupByRefused) as refused:
            group_store.check_group_by(by)
        assert refused.value.status == 400 and refused.value.details() == {"parameter": "by"}


def rollout(trace_id: str, task_id: str, system: str = "unit-test", **rewards) -> dict:
    return make_trace(trace_id, task_id=task_id, system=system, rewards=rewards)


# Two groups of known rewards. task/a: team 1, 0, 0.5 (mean 0.5, population std sqrt(1/6)); tool 0.25 in every
# rollout (no spread); process in one rollout only. task/b: team 0.2, 0.8 (mean 0.5, std 0.3).
ROLLOUTS = [rollout("a1", "task/a", team=1, tool=0.25, process=3), rollout("a2", "task/a", team=0, tool=0.25),
            rollout("a3", "task/a", "other", team=0.5, tool=0.25),
            rollout("b1", "task/b", team=0.2), rollout("b2", "task/b", team=0.8)]
SIXTH = (1 / 6) ** 0.5


@pytest.fixture
def seeded(client):
    assert post_json(client, ROLLOUTS).is_success
    return client


def test_groups_have_their_rewards_mean_population_std_min_and_max(seeded):
    body = seeded.get("/api/groups").json()
    assert body["total"] == 2 and [g["key"] for g in body["groups"]] == ["task/a", "task/b"]
    a, b = body["groups"]
    assert a["n"] == 3 and b["n"] == 2
    assert a["rewards"]["team"] == pytest.approx({"mean": 0.5, "std": SIXTH, "min": 0, "max": 1})
    assert a["rewards"]["tool"] == {"mean": 0.25, "std": 0, "min": 0.25, "max": 0.25}
    assert a["rewards"]["process"] == {"mean": 3, "std": 0, "min": 3, "max": 3}
    assert b["rewards"] == {"team": pytest.approx({"mean": 0.5, "std": 0.3, "min": 0.2, "max": 0.8})}
    by_system = seeded.get("/api/groups", params={"by": "system"}).json()
    assert [(g["key"], g["n"]) for g in by_system["groups"]] == [("other", 1), ("unit-test", 4)]


def test_groups_sort_and_page(seeded):
    def keys(**params):
        return [g["key"] for g in seeded.get("/api/groups", params=params).json()["groups"]]
    assert keys(sort="-key") == ["task/b", "task/a"]
    assert keys(sort="-n") == ["task/a", "task/b"]
    assert keys(sort="-std:tool") == ["task/a", "task/b"]  # a group without the channel sorts last either way
    assert keys(sort="std:tool") == ["task/a", "task/b"]
    assert keys(sort="-std:team") == ["task/a", "task/b"] and keys(sort="std:team") == ["task/b", "task/a"]
    assert keys(sort="min:team") == ["task/a", "task/b"] and keys(sort="-min:team") == ["task/b", "task/a"]
    page = seeded.get("/api/groups", params={"limit": 1, "offset": 1}).json()
    assert page == {"groups": [page["groups"][0]], "total": 2} and page["groups"][0]["key"] == "task/b"
    assert seeded.get("/api/groups", params={"offset": 5}).json() == {"groups": [], "total": 2}


def test_advantages_are_rewards_normalised_within_the_group(seeded):
    group = seeded.get("/api/groups/task%2Fa").json()
    assert group["key"] == "task/a" and group["n"] == 3
    rollouts = {r["trace_id"]: r for r in group["rollouts"]}
    assert list(rollouts) == ["a1", "a2", "a3"]
    # by hand: (1 - 0.5) / sqrt(1/6) = 1.2247..., (0 - 0.5) / sqrt(1/6), (0.5 - 0.5) / ...; tool and process: no spread
    assert rollouts["a1"]["advantage"] == pytest.approx({"team": 1.2247449, "tool": 0, "process": 0})
    assert rollouts["a2"]["advantage"] == pytest.approx({"team": -1.2247449, "tool": 0})
    assert rollouts["a3"]["advantage"] == pytest.approx({"team": 0, "tool": 0})
    assert rollouts["a1"]["rewards"] == {"team": 1, "tool": 0.25, "process": 3}
    assert {key: rollouts["a1"][key] for key in ("agents", "events", "spawns", "critical_steps")} == {
        "agents": 2, "events": 6, "spawns": 1, "critical_steps": rollouts["a1"]["critical_steps"]}
    assert rollouts["a1"]["critical_steps"] >= 1 and rollouts["a1"]["parallel_speedup"] > 0
    other = seeded.get("/api/groups/task/b").json()  # the key's '/' unencoded reads the same
    assert [r["advantage"] for r in other["rollouts"]] == [pytest.approx({"team": -1}), pytest.approx({"team": 1})]


def test_bad_parameters_are_refused_naming_them(seeded):
    for by in ("team", "rewards", "trace_id", "nonsense"):
        for path in ("/api/groups", "/api/groups/task%2Fa"):
            refused = seeded.get(path, params={"by": by})
            assert refused.status_code == 400 and refused.json()["parameter"] == "by", (path, by)
    for sort in ("rewards", "mean:", "median:team", "-"):
        refused = seeded.get("/api/groups", params={"sort": sort})
        assert refused.status_code == 400 and refused.json()["parameter"] == "sort", sort
    missing = seeded.get("/api/groups/no-such-task")
    assert missing.status_code == 404 and "no-such-task" in missing.json()["error"]
    assert seeded.get("/api/groups", params={"limit": 0}).status_code == 422


def test_advantage_is_zero_where_a_group_does_not_spread():
    stats = {"team": {"mean": 2.0, "std": 0.0, "min": 2.0, "max": 2.0},
             "tool": {"mean": 1, "std": 2, "min": 0, "max": 3}}
    assert advantages({"team": 2.0, "tool": 3, "other": 9}, stats) == {"team": 0.0, "tool": 1.0}
    assert parse_group_sort("-std:team") == ("std", "team", True) and parse_group_sort("n") == ("n", None, False)
    ranks = ranked([{"trace_id": "x", "advantage": {}}, {"trace_id": "y", "advantage": {"team": -1}},
                    {"trace_id": "z", "advantage": {"team": 1}}], "team")
    assert [r["trace_id"] for r in ranks] == ["z", "y", "x"]


def soup(response) -> BeautifulSoup:
    assert response.status_code == 200, response.text
    return BeautifulSoup(response.text, "html.parser")


def test_groups_page_draws_each_groups_spread(seeded):
    page = soup(seeded.get("/groups"))
    rows = page.select("#groups-table tbody tr")
    assert [tr["data-key"] for tr in rows] == ["task/a", "task/b"]
    assert rows[0].select_one("a")["href"] == "/groups/task%2Fa?by=task_id"
    cells = {td["data-channel"]: td for td in rows[0].select("td.spread-cell")}
    assert cells["team"].select_one("svg.spread") and "no spread" not in cells["team"].get_text()
    assert "no spread" in cells["tool"].get_text()
    assert rows[1].select_one('td[data-channel="tool"] svg') is None
    by_system = soup(seeded.get("/groups", params={"by": "system", "sort": "-n"}))
    assert [tr["data-key"] for tr in by_system.select("#groups-table tbody tr")] == ["unit-test", "other"]
    fallback = soup(seeded.get("/groups", params={"by": "team", "sort": "bogus"}))  # a hand-edited link
    assert len(fallback.select("#groups-table tbody tr")) == 2


def test_group_page_ranks_rollouts_by_advantage_and_picks_two_for_a_diff(seeded):
    page = soup(seeded.get("/groups/task%2Fa", params={"channel": "team"}))
    ranked_ids = [tr["data-trace-id"] for tr in page.select("#rollouts-table tbody tr")]
    assert ranked_ids == ["a1", "a3", "a2"]
    form = page.select_one("form#diff-pick")
    assert form["action"] == "/diff" and form["method"] == "get"
    assert page.select_one('input[name="a"][checked]')["value"] == "a1"
    assert page.select_one('input[name="b"][checked]')["value"] == "a2"
    flat = [tr["data-channel"] for tr in page.select("#group-stats tbody tr") if "no spread" in tr.get_text()]
    assert flat == ["process", "tool"]
    assert page.select('[data-chart]') and page.select_one("script.charts-data")
    assert seeded.get("/groups/nothing-here").status_code == 404
