"""Pairwise review through the API, on a server that requires accounts: an admin makes a queue of pairs of rollouts
sampled within task groups, two reviewers choose through `next` with overlap, blindness and skips, agreement is on
the choice, an admin adjudicates a disputed pair, and the preference export parses back as TRL reads it."""

import json

import pytest
from conftest import lab_clients, make_trace, post_json

from app.domain import preference
from app.services import exports

# Rollouts by task: three of `sum`, two of `pair`, one of `solo` (a group of one compares nothing). The answer of
# each is its last aggregate's; r3's keeps none, so the export names it by its id.
ROLLOUTS = {"r1": ("sum", {"summary": "the sum is 42"}), "r2": ("sum", {"content": {"output": "42, I think"}}),
            "r3": ("sum", {}), "r4": ("pair", {"summary": "four"}), "r5": ("pair", {"summary": "five"}),
            "r6": ("solo", {})}


def rollout(trace_id: str) -> dict:
    task, answer = ROLLOUTS[trace_id]
    trace = make_trace(trace_id, task_id=task)
    trace["events"][-1] |= answer  # e6, the aggregate
    return trace


def a_lab(folder):
    """An admin and two reviewers, each with a client sending their token, over six rollouts of three tasks."""
    with lab_clients(folder, {"ada": "admin", "rita": "reviewer", "rob": "reviewer"}) as clients:
        for trace_id in ROLLOUTS:
            assert post_json(clients["ada"], rollout(trace_id)).status_code == 201
        yield clients


@pytest.fixture
def lab(tmp_path):
    yield from a_lab(tmp_path)


@pytest.fixture(scope="module")
def refusing_lab(tmp_path_factory):
    """One lab for the bodies refused: a refusal stores nothing, so each case starts where the last left it."""
    yield from a_lab(tmp_path_factory.mktemp("refusals"))


def make_queue(client, **changes):
    body = {"name": "which run is better", "kind": "pairwise", "pairs": {"per_group": 2, "seed": 3},
            "reviewers": ["rita", "rob"], "overlap": 2, "blind": True} | changes
    return client.post("/api/queues", json=body)


def choose(client, qid: str, item_id: int, choice: str, reason: str = "clearer answer", **extra):
    return client.post(f"/api/queues/{qid}/items/{item_id}/choice", json={"choice": choice, "reason": reason} | extra)


def test_only_an_admin_makes_a_pairwise_queue_and_its_pairs_are_drawn_within_groups_the_same_every_time(lab):
    assert make_queue(lab["rita"]).status_code == 403
    first, second = (make_queue(lab["ada"]).json() for _ in range(2))
    assert first["kind"] == "pairwise" and first["items"] == 3  # two of sum's three pairs, pair's only one
    assert first["pairs"] == {"by": "task_id", "keys": [], "per_group": 2, "seed": 3} and not first["show_rewards"]
    listed = [lab["ada"].get(f"/api/queues/{q['id']}/items").json()["items"] for q in (first, second)]
    pairs = [[(i["group"], i["trace_a"], i["trace_b"]) for i in items] for items in listed]
    assert pairs[0] == pairs[1]
    assert all(ROLLOUTS[a][0] == ROLLOUTS[b][0] == group and a != b for group, a, b in pairs[0])
    assert [group for group, _, _ in pairs[0]] == ["pair", "sum", "sum"]
    assert listed[0][0]["choices"] == {} and listed[0][0]["status"] == "open" and listed[0][0]["decision"] is None
    one = make_queue(lab["ada"], pairs={"keys": ["pair"], "per_group": 5}).json()
    assert one["items"] == 1


@pytest.mark.parametrize("changes, field", [
    ({"kind": "triples"}, "kind"), ({"pairs": {"by": "rewards"}}, "pairs.by"), ({"pairs": {"keys": ["nope"]}},
                                                                                "pairs.keys"),
    ({"pairs": {"keys": ["solo"]}}, "pairs"), ({"pairs": {"per_group": 0}}, "pairs.per_group"),
    ({"pairs": {"colour": 1}}, "pairs"), ({"filter": {"event_types": ["return"]}}, "filter"),
    ({"fields": ["credit"]}, "fields"), ({"show_rewards": "yes"}, "show_rewards"), ({"overlap": 3}, "overlap"),
])
def test_a_pairwise_queue_that_cannot_be_made_is_422_naming_the_field(refusing_lab, changes, field):
    response = make_queue(refusing_lab["ada"], **changes)
    assert response.status_code == 422 and response.json()["field"] == field
    assert refusing_lab["ada"].get("/api/queues").json()["queues"] == []  # nothing half-made


def test_two_blind_reviewers_choose_on_every_pair_once_each_and_agreement_is_on_the_choice(lab):
    queue = make_queue(lab["ada"]).json()
    qid = queue["id"]
    item = lab["rita"].post(f"/api/queues/{qid}/next").json()
    assert set(item) == {"item_id", "group", "trace_a", "trace_b"}
    assert lab["rita"].post(f"/api/queues/{qid}/next").json() == item  # kept until answered
    for body, field in (({"choice": "c", "reason": "x"}, "choice"), ({"choice": "a"}, "reason"),
                        ({"choice": "a", "reason": "x", "deciding_event": {"side": "b", "event_id": "e99"}},
                         "deciding_event"),
                        ({"choice": "a", "reason": "x", "deciding_event": {"side": "c", "event_id": "e1"}},
                         "deciding_event")):
        refused = lab["rita"].post(f"/api/queues/{qid}/items/{item['item_id']}/choice", json=body)
        assert refused.status_code == 422 and refused.json()["field"] == field, refused.text
    assert choose(lab["ada"], qid, item["item_id"], "a").status_code == 422  # ada reviews nothing here
    assert choose(lab["rita"], qid, 99, "a").status_code == 404
    saved = choose(lab["rita"], qid, item["item_id"], "b", deciding_event={"side": "b", "event_id": "e6"},
                   client_request_id="req-1")
    assert saved.status_code == 201
    assert saved.json() | {"created_at": None} == {
        "queue_id": qid, "item_id": item["item_id"], "reviewer": "rita", "version": 1, "choice": "b",
        "reason": "clearer answer", "deciding_event": {"side": "b", "event_id": "e6"}, "created_at": None}
    retried = choose(lab["rita"], qid, item["item_id"], "b", client_request_id="req-1")
    assert retried.status_code == 200 and retried.json()["version"] == 1
    assert choose(lab["rita"], qid, item["item_id"], "a").json()["version"] == 2  # she changes her mind: v2

    assert lab["rob"].post(f"/api/queues/{qid}/next").json() == item  # overlap 2: the same pair
    blind = lab["rob"].get(f"/api/queues/{qid}/items").json()["items"]
    assert blind[0]["choices"] == {} and lab["rob"].get(f"/api/queues/{qid}").json()["by_reviewer"]["rita"] == 0
    assert choose(lab["rob"], qid, item["item_id"], "tie", "both fine").status_code == 201
    seen = lab["rob"].get(f"/api/queues/{qid}/items").json()["items"][0]
    assert {r: c["choice"] for r, c in seen["choices"].items()} == {"rita": "a", "rob": "tie"}
    for name in ("rob", "ada"):  # a page of pairs shows each as the whole list does, blind review included
        whole = lab[name].get(f"/api/queues/{qid}/items").json()
        pages = [lab[name].get(f"/api/queues/{qid}/items", params={"limit": 1, "offset": k}).json()
                 for k in range(whole["total"])]
        assert [page["items"][0] for page in pages] == whole["items"] and {p["total"] for p in pages} == {len(pages)}
    assert seen["status"] == "disputed" and seen["decision"] is None

    second = lab["rob"].post(f"/api/queues/{qid}/next").json()
    assert lab["rob"].post(f"/api/queues/{qid}/items/{second['item_id']}/skip").status_code == 204
    third = lab["rob"].post(f"/api/queues/{qid}/next").json()
    assert third["item_id"] not in (item["item_id"], second["item_id"])  # the skipped pair comes back last
    for name in ("rita", "rob"):
        while (given := lab[name].post(f"/api/queues/{qid}/next")).status_code == 200:
            assert choose(lab[name], qid, given.json()["item_id"], "a").status_code == 201
    progress = lab["ada"].get(f"/api/queues/{qid}").json()
    assert progress["done"] == 3 and progress["by_reviewer"] == {"rita": 3, "rob": 3}
    assert progress["disputed"] == 1 and progress["agreement"]["choice"]["n_items"] == 3
    assert progress["agreement"]["choice"]["percent_agreement"] == pytest.approx(2 / 3)


def test_an_admin_settles_a_disputed_pair_and_the_preference_export_parses_back(lab):
    queue = make_queue(lab["ada"], blind=False).json()
    qid = queue["id"]
    answers = {1: ("a", "a"), 2: ("a", "b"), 3: ("tie", "tie")}  # agreed, disputed then settled, a tie
    for index, name in enumerate(("rita", "rob")):
        while (given := lab[name].post(f"/api/queues/{qid}/next")).status_code == 200:
            item_id = given.json()["item_id"]
            assert choose(lab[name], qid, item_id, answers[item_id][index]).status_code == 201
    path = f"/api/queues/{qid}/items/2/adjudicate"
    assert lab["rita"].post(path, json={"label": {"choice": "b"}}).status_code == 403
    assert lab["ada"].post(path, json={"label": {"choice": "maybe"}}).status_code == 422
    settled = lab["ada"].post(path, json={"label": {"choice": "b"}, "note": "b's answer checks out"})
    assert settled.status_code == 201, settled.text
    adjudicated = settled.json()["adjudicated"]
    assert adjudicated["by"] == "ada" and adjudicated["label"]["choice"] == "b"
    assert {r["reviewer"] for r in adjudicated["resolved"]} == {"rita", "rob"}
    progress = lab["ada"].get(f"/api/queues/{qid}").json()
    assert (progress["disputed"], progress["adjudicated"]) == (0, 1)

    export = lab["ada"].get("/api/annotations/export", params={"format": "preference_pairs", "queue_id": qid})
    assert export.status_code == 200 and export.headers["content-type"].startswith("application/jsonl")
    rows = [json.loads(line) for line in export.text.splitlines()]
    items = {i["item_id"]: i for i in lab["ada"].get(f"/api/queues/{qid}/items").json()["items"]}
    assert len(rows) == 2  # the tie is left out
    for row, item_id, winner in ((rows[0], 1, "trace_a"), (rows[1], 2, "trace_b")):
        item = items[item_id]
        loser = "trace_b" if winner == "trace_a" else "trace_a"
        assert list(row)[:3] == ["prompt", "chosen", "rejected"]  # TRL's preference columns
        assert row["prompt"] == ROLLOUTS[item[winner]][0] == item["group"]
        assert (row["chosen_trace_id"], row["rejected_trace_id"]) == (item[winner], item[loser])
        assert row["chosen"] == answer_of(item[winner]) and row["rejected"] == answer_of(item[loser])
        assert row["reviewers"] == ["rita", "rob"] and row["queue_id"] == qid
    assert (rows[0]["adjudicated_by"], rows[1]["adjudicated_by"]) == (None, "ada")


def answer_of(trace_id: str) -> str:
    """What the export says a rollout answered: its aggregate's text, else its trace id."""
    answer = ROLLOUTS[trace_id][1]
    return answer.get("summary") or answer.get("content", {}).get("output") or trace_id


def test_a_pairwise_queue_exports_only_as_preference_pairs_and_takes_no_event_label(lab):
    qid = make_queue(lab["ada"]).json()["id"]
    export = lab["ada"].get("/api/annotations/export", params={"format": "csv", "queue_id": qid})
    assert export.status_code == 422 and "preference_pairs" in export.json()["error"]
    assert lab["ada"].get("/api/annotations/export", params={"format": "preference_pairs"}).status_code == 422
    events = lab["ada"].post("/api/queues", json={"name": "events", "reviewers": ["rita"],
                                                  "filter": {"event_types": ["return"]}}).json()
    assert lab["ada"].get("/api/annotations/export", params={"format": "preference_pairs",
                                                              "queue_id": events["id"]}).status_code == 422
    label = lab["rita"].post("/api/annotations", json={"trace_id": "r1", "event_id": "e5", "queue_id": qid,
                                                        "credit": 1})
    assert label.status_code == 422 and label.json()["field"] == "queue_id"
    item = lab["rita"].post(f"/api/queues/{events['id']}/next").json()
    assert choose(lab["rita"], events["id"], item["item_id"], "a").status_code == 422


def test_pairs_are_drawn_per_group_so_other_groups_do_not_change_them():
    groups = {"g1": ["t1", "t2", "t3", "t4"], "g2": ["u1", "u2"]}
    pairs = preference.sample_pairs(groups, 2, seed=7)
    assert pairs == preference.sample_pairs(groups, 2, seed=7)
    assert [p for p in pairs if p.group == "g1"] == preference.sample_pairs({"g1": groups["g1"]}, 2, seed=7)
    assert len({frozenset((p.trace_a, p.trace_b)) for p in pairs}) == 3
    assert preference.sample_pairs({"g": ["only"]}, 3, 0) == []


@pytest.mark.parametrize("choices, adjudicated, done, expected", [
    (["a", "a"], None, True, "a"), (["a", "b"], None, True, None), (["a", "a", "tie"], None, True, "a"),
    (["a", "b", "tie"], None, True, None), (["a"], None, False, None), (["a", "b"], "b", True, "b"),
    (["tie", "tie"], None, True, "tie"),
])
def test_a_pair_ends_with_the_adjudication_else_the_majority_once_done(choices, adjudicated, done, expected):
    assert preference.decision(choices, adjudicated, done) == expected


def test_a_rollouts_answer_is_its_last_aggregate_else_the_last_assistant_text():
    events = [{"id": "m", "t": 0, "type": "message", "agent": "lead", "content": {"input": "q", "output": "draft"}},
              {"id": "t", "t": 1, "type": "tool_result", "agent": "tool", "content": "raw page"}]
    assert preference.final_answer({"events": events}) == "draft"
    aggregate = {"id": "g", "t": 2, "type": "aggregate", "agent": "lead", "summary": "final"}
    assert preference.final_answer({"events": [*events, aggregate]}) == "final"
    assert preference.final_answer({"events": events[1:]}) is None


def test_a_blind_reviewer_sees_no_other_choice_on_a_pair_in_any_answer_until_they_chose(lab):
    qid = make_queue(lab["ada"], pairs={"keys": ["pair"]}).json()["id"]
    item = lab["rob"].post(f"/api/queues/{qid}/next").json()
    assert choose(lab["rob"], qid, item["item_id"], "a", "SECRET rob's reason").status_code == 201
    settled = lab["ada"].post(f"/api/queues/{qid}/items/1/adjudicate", json={"label": {"choice": "a"},
                                                                             "note": "SECRET note"})
    assert settled.status_code == 201
    export = {"format": "preference_pairs", "queue_id": qid}
    assert len(lab["ada"].get("/api/annotations/export", params=export).text.splitlines()) == 1
    for path, params in ((f"/api/queues/{qid}", None), (f"/api/queues/{qid}/items", None), (f"/queues/{qid}", None),
                         ("/api/queues", None), ("/queues", None), ("/api/annotations/export", export)):
        answer = lab["rita"].get(path, params=params)
        assert answer.status_code == 200 and "SECRET" not in answer.text, path
    assert lab["rita"].get("/api/annotations/export", params=export).text == ""  # no decision she may see
    listed = lab["rita"].get(f"/api/queues/{qid}/items").json()["items"][0]
    assert (listed["choices"], listed["adjudicated"], listed["status"]) == ({}, None, "open")
    assert lab["rita"].get(f"/api/queues/{qid}").json()["by_reviewer"] == {"rita": 0, "rob": 0}
    assert lab["rita"].post(f"/api/queues/{qid}/next").json() == item
    assert choose(lab["rita"], qid, item["item_id"], "b", "rita's").status_code == 201
    seen = lab["rita"].get(f"/api/queues/{qid}/items").json()["items"][0]  # hers saved: everything shows
    assert seen["choices"]["rob"]["reason"] == "SECRET rob's reason" and seen["adjudicated"]["note"] == "SECRET note"
    (line,) = lab["rita"].get("/api/annotations/export", params=export).text.splitlines()
    assert json.loads(line)["reviewers"] == ["rita", "rob"] and json.loads(line)["adjudicated_by"] == "ada"


def test_the_queue_list_shows_each_queue_of_either_kind_as_its_own_page_does_to_each_caller(lab):
    blind = make_queue(lab["ada"]).json()["id"]
    seen = make_queue(lab["ada"], name="open pairs", blind=False).json()["id"]
    events = lab["ada"].post("/api/queues", json={"name": "returns", "filter": {"event_types": ["return"]},
                                                  "reviewers": ["rita", "rob"], "overlap": 2, "blind": True}).json()
    for qid in (blind, seen):  # rob chooses on the first pair of each, rita on the second pair's of the open one
        item = lab["rob"].post(f"/api/queues/{qid}/next").json()
        assert choose(lab["rob"], qid, item["item_id"], "a").status_code == 201
    item = lab["rita"].post(f"/api/queues/{events['id']}/next").json()
    assert lab["rita"].post("/api/annotations", json={"trace_id": item["trace_id"], "event_id": item["event_id"],
                                                      "queue_id": events["id"], "credit": 0.5}).status_code == 201
    assert lab["ada"].post(f"/api/queues/{blind}/items/1/adjudicate", json={"label": {"choice": "a"}}).status_code == 201
    for name in ("ada", "rita", "rob"):
        listed = {queue["id"]: queue for queue in lab[name].get("/api/queues").json()["queues"]}
        assert listed == {qid: lab[name].get(f"/api/queues/{qid}").json() for qid in (blind, seen, events["id"])}
    progress = {name: {queue["id"]: (queue["by_reviewer"], queue["adjudicated"])
                       for queue in lab[name].get("/api/queues").json()["queues"]} for name in ("ada", "rita")}
    assert progress["ada"] == {blind: ({"rita": 0, "rob": 1}, 1), seen: ({"rita": 0, "rob": 1}, 0),
                               events["id"]: ({"rita": 1, "rob": 0}, 0)}
    # rita chose on no pair of the blind queue: rob's choice and its adjudication stay hidden from her, there only
    assert progress["rita"] == {blind: ({"rita": 0, "rob": 0}, 0), seen: ({"rita": 0, "rob": 1}, 0),
                                events["id"]: ({"rita": 1, "rob": 0}, 0)}


@pytest.mark.parametrize("traces, events", [(3, 200_000), (1000, 1)])
def test_the_preference_export_reads_its_pairs_by_chunk_and_gives_the_same_lines(lab, monkeypatch, traces, events):
    """Pairs are exported a chunk at a time (at most `traces` rollouts or `events` events: a pair larger than that
    alone, and a rollout in two pairs read with each); the lines are those of one chunk, in the queue's order."""
    qid = make_queue(lab["ada"], blind=False, pairs={"per_group": 3, "seed": 1}).json()["id"]
    for name in ("rita", "rob"):
        while (given := lab[name].post(f"/api/queues/{qid}/next")).status_code == 200:
            item_id = given.json()["item_id"]
            assert choose(lab[name], qid, item_id, "a" if item_id % 2 else "b").status_code == 201
    params = {"format": "preference_pairs", "queue_id": qid}
    whole = lab["ada"].get("/api/annotations/export", params=params).text
    monkeypatch.setattr(exports, "EXPORT_CHUNK_TRACES", traces)
    monkeypatch.setattr(exports, "EXPORT_CHUNK_EVENTS", events)
    assert lab["ada"].get("/api/annotations/export", params=params).text == whole
    assert len(whole.splitlines()) == 4  # sum: 3 pairs of 3 rollouts, pair: 1 (solo has none)
