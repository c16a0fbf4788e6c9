"""Review queues through the API, on a server that requires accounts: an admin makes a queue, two reviewers
label through `next` with overlap and blindness, progress and agreement follow, and an admin adjudicates."""

import pytest
from bs4 import BeautifulSoup
from conftest import lab_clients, make_trace, post_json

from app.services import queues
from app.store import labels as label_store
from app.store.sql import traced_statements

LAKE_LOOK = "SELECT * FROM postgres_query"  # a lake's look at its catalog's snapshot (each thread's own)


def a_lab(folder):
    """An admin and two reviewers, each with a client sending their token, over two small traces."""
    with lab_clients(folder, {"ada": "admin", "rita": "reviewer", "rob": "reviewer"}) as clients:
        for trace_id in ("q1", "q2"):
            assert post_json(clients["ada"], make_trace(trace_id)).status_code == 201
        yield clients


@pytest.fixture
def lab(tmp_path):
    yield from a_lab(tmp_path)


@pytest.fixture(scope="module")
def refusing_lab(tmp_path_factory):
    """One lab for the bodies refused: a refusal stores nothing, so each case starts where the last left it."""
    yield from a_lab(tmp_path_factory.mktemp("refusals"))


def make_queue(client, **changes):
    body = {"name": "returns and decisions", "filter": {"event_types": ["orchestrator_decision", "return"]},
            "fields": ["credit", "counterfactual", "stop"], "required": ["credit"], "reviewers": ["rita", "rob"],
            "overlap": 2, "blind": True} | changes
    return client.post("/api/queues", json=body)


def label(client, item, **fields):
    body = {"trace_id": item["trace_id"], "event_id": item["event_id"], "queue_id": fields.pop("queue_id")} | fields
    return client.post("/api/annotations", json=body)


def test_only_an_admin_makes_a_queue_and_it_holds_the_filtered_events(lab):
    assert make_queue(lab["rita"]).status_code == 403
    response = make_queue(lab["ada"])
    assert response.status_code == 201
    queue = response.json()
    assert queue["items"] == 4 and queue["done"] == 0  # e1 and e5 of two traces
    assert queue["by_reviewer"] == {"rita": 0, "rob": 0} and queue["blind"] and queue["overlap"] == 2
    assert lab["rita"].get(f"/api/queues/{queue['id']}").json()["items"] == 4
    assert [q["id"] for q in lab["rob"].get("/api/queues").json()["queues"]] == [queue["id"]]
    assert lab["rita"].get("/api/queues/q-nope").status_code == 404


@pytest.mark.parametrize("changes, field", [
    ({"name": ""}, "name"), ({"filter": {"colours": ["red"]}}, "filter"), ({"reviewers": []}, "reviewers"),
    ({"overlap": 3}, "overlap"), ({"fields": ["mood"]}, "fields"), ({"required": ["note"]}, "required"),
    ({"filter": {"event_types": ["nothing"]}}, "filter"), ({"sample": {"n": 0}}, "sample.n"),
    ({"filter": {"subdecisions": ["O9"]}}, "filter.subdecisions"),
])
def test_a_queue_that_cannot_be_made_is_422_naming_the_field(refusing_lab, changes, field):
    response = make_queue(refusing_lab["ada"], **changes)
    assert response.status_code == 422 and response.json()["field"] == field
    assert refusing_lab["ada"].get("/api/queues").json()["queues"] == []  # nothing half-made


def test_two_blind_reviewers_with_overlap_two_label_every_item_once_each(lab):
    queue = make_queue(lab["ada"]).json()
    seen = {"rita": [], "rob": []}
    for round_ in range(4):
        for name in ("rita", "rob"):
            item = lab[name].post(f"/api/queues/{queue['id']}/next").json()
            again = lab[name].post(f"/api/queues/{queue['id']}/next").json()
            assert again == item  # until labelled, `next` is the same item, not a new one
            seen[name].append(item["item_id"])
            if name == "rob":  # blind: rita labelled this item already, rob does not see it before saving
                others = lab["rob"].get("/api/annotations", params={"trace_id": item["trace_id"],
                                                                    "event_id": item["event_id"]}).json()["items"]
                assert others == []
            credit = 0.5 if name == "rita" else (0.5 if round_ < 2 else -0.5)
            assert label(lab[name], item, queue_id=queue["id"], credit=credit).status_code == 201
            if name == "rob":
                mine_then_hers = lab["rob"].get("/api/annotations", params={
                    "trace_id": item["trace_id"], "event_id": item["event_id"]}).json()["items"]
                assert {label_["reviewer"] for label_ in mine_then_hers} == {"rita", "rob"}
    for name in seen:
        assert sorted(seen[name]) == [1, 2, 3, 4]  # every item, none twice
        assert lab[name].post(f"/api/queues/{queue['id']}/next").status_code == 204
    progress = lab["ada"].get(f"/api/queues/{queue['id']}").json()
    assert progress["done"] == 4 and progress["by_reviewer"] == {"rita": 4, "rob": 4}
    assert progress["disputed"] == 2  # credits 0.5 against -0.5 on the last two items
    credit = progress["agreement"]["credit"]
    assert credit["n_items"] == 4 and credit["percent_agreement"] == 0.5


def test_overlap_one_shares_the_items_out_and_a_queue_label_needs_the_required_fields(lab):
    queue = make_queue(lab["ada"], overlap=1, blind=False).json()
    first = lab["rita"].post(f"/api/queues/{queue['id']}/next").json()
    second = lab["rob"].post(f"/api/queues/{queue['id']}/next").json()
    assert first["item_id"] != second["item_id"]
    missing = label(lab["rita"], first, queue_id=queue["id"], counterfactual="yes")
    assert missing.status_code == 422 and missing.json()["field"] == "credit"
    assert label(lab["ada"], first, queue_id=queue["id"], credit=1).status_code == 422  # ada is no reviewer
    elsewhere = {"trace_id": "q1", "event_id": "e2", "queue_id": queue["id"], "credit": 1}
    assert lab["rita"].post("/api/annotations", json=elsewhere).status_code == 422  # not an item of the queue
    saved = label(lab["rita"], first, queue_id=queue["id"], credit=1, counterfactual="yes")
    assert saved.status_code == 201 and saved.json()["queue_id"] == queue["id"]


def test_an_admin_adjudicates_a_disputed_item_and_the_resolved_versions_are_kept(lab):
    queue = make_queue(lab["ada"], blind=False).json()
    item = lab["rita"].post(f"/api/queues/{queue['id']}/next").json()
    assert lab["rob"].post(f"/api/queues/{queue['id']}/next").json() == item
    label(lab["rita"], item, queue_id=queue["id"], credit=1, counterfactual="yes")
    label(lab["rob"], item, queue_id=queue["id"], credit=-1, counterfactual="no")
    path = f"/api/queues/{queue['id']}/items/{item['item_id']}/adjudicate"
    final = {"label": {"credit": 0.5, "counterfactual": "partly"}, "note": "both half right"}
    assert lab["rita"].post(path, json=final).status_code == 403
    response = lab["ada"].post(path, json=final)
    assert response.status_code == 201
    adjudicated = response.json()["adjudicated"]
    assert adjudicated["by"] == "ada" and adjudicated["label"] == {"credit": 0.5, "counterfactual": "partly"}
    assert {r["reviewer"] for r in adjudicated["resolved"]} == {"rita", "rob"}
    progress = lab["ada"].get(f"/api/queues/{queue['id']}").json()
    assert (progress["disputed"], progress["adjudicated"]) == (0, 1)
    assert lab["ada"].post(path, json={"label": {"credit": 5}}).status_code == 422
    assert lab["ada"].post(path, json={"label": {"note": "x"}}).status_code == 422  # not asked by the queue


def test_a_seeded_sample_is_the_same_every_time_and_stratified_by_trace(lab):
    body = {"filter": {}, "sample": {"n": 4, "seed": 7, "stratify_by": "trace_id"}, "blind": False}
    first, second = (make_queue(lab["ada"], **body).json() for _ in range(2))
    items = [lab["ada"].get(f"/api/queues/{q['id']}/items").json() for q in (first, second)]
    assert first["items"] == second["items"] == 4
    events = [[(i["trace_id"], i["event_id"]) for i in listed["items"]] for listed in items]
    assert events[0] == events[1] and len(set(events[0])) == 4
    assert sorted(trace for trace, _ in events[0]) == ["q1", "q1", "q2", "q2"]  # two from each trace
    other_seed = make_queue(lab["ada"], **(body | {"sample": {"n": 4, "seed": 8}})).json()
    listed = lab["ada"].get(f"/api/queues/{other_seed['id']}/items").json()["items"]
    assert listed[0]["labels"] == {} and listed[0]["done"] is False
    rita = [lab["rita"].post(f"/api/queues/{first['id']}/next").json()]
    label(lab["rita"], rita[0], queue_id=first["id"], credit=0.1)
    rita.append(lab["rita"].post(f"/api/queues/{first['id']}/next").json())
    assert rita[0]["item_id"] == 1 and rita[1]["item_id"] == 2


def test_the_final_export_gives_each_item_its_status_and_final_label(lab):
    queue = make_queue(lab["ada"], blind=False, fields=["credit", "counterfactual", "note"]).json()
    qid = queue["id"]
    items = {}
    for name in ("rita", "rob"):
        for _ in range(4):
            item = lab[name].post(f"/api/queues/{qid}/next").json()
            items.setdefault(item["item_id"], item)
            answers = {1: (0.5, "yes"), 2: (1.0, "no"), 3: (0.25, "no")}  # item 4: only rita, then rob skips it
            if item["item_id"] == 4 and name == "rob":
                assert lab["rob"].post(f"/api/queues/{qid}/items/4/skip").status_code == 204
                continue
            credit, answer = answers.get(item["item_id"], (0.0, None))
            if name == "rob" and item["item_id"] == 1:
                credit, answer = 0.7, "yes"  # agrees with rita
            if name == "rob" and item["item_id"] == 3:
                answer = None  # leaves a question rita answered: a dispute
            assert label(lab[name], item, queue_id=qid, credit=credit, counterfactual=answer,
                         note=f"{name} {item['item_id']}").status_code == 201
    settled = lab["ada"].post(f"/api/queues/{qid}/items/2/adjudicate",
                              json={"label": {"credit": 0.75, "counterfactual": "no"}, "note": "close call"})
    assert settled.status_code == 201
    rows = lab["ada"].get("/api/annotations/export", params={"format": "json", "queue_id": qid,
                                                              "final": "true"}).json()
    by_item = {row["item_id"]: row for row in rows}
    assert {i: row["status"] for i, row in by_item.items()} == {1: "agreed", 2: "adjudicated", 3: "disputed",
                                                                 4: "open"}
    assert by_item[1]["final"] == {"credit": 0.6, "counterfactual": "yes", "note": "rita: rita 1 | rob: rob 1"}
    assert (by_item[2]["final"]["credit"], by_item[2]["adjudicated_by"], by_item[2]["adjudication_note"]) == (
        0.75, "ada", "close call")
    assert by_item[3]["final"] == {"credit": None, "counterfactual": None, "note": None}
    assert by_item[3]["labels"]["rob"]["counterfactual"] is None and by_item[4]["labels"].keys() == {"rita"}
    text = lab["ada"].get("/api/annotations/export", params={"format": "csv", "queue_id": qid, "final": "true"}).text
    header = text.splitlines()[0].split(",")
    assert header == ["item_id", "trace_id", "event_id", "status", "final.credit", "final.counterfactual",
                      "final.note", "adjudicated_by", "adjudication_note", "rita.credit", "rita.counterfactual",
                      "rita.note", "rob.credit", "rob.counterfactual", "rob.note"]
    assert lab["ada"].get("/api/annotations/export", params={"final": "true"}).status_code == 422
    assert lab["ada"].get("/api/annotations/export", params={"format": "rllm", "final": "true",
                                                              "queue_id": qid}).status_code == 422


def test_the_queue_list_reads_no_more_for_many_queues_than_for_one(client, db):
    """A lab's queues accumulate, and on a lake every read pays its catalog round trips: the list reads every
    queue's labels, adjudications and item counts at once, not once per queue."""
    assert post_json(client, make_trace("q1")).status_code == 201

    def listed() -> tuple[int, int]:
        with traced_statements() as ran:
            shown = queues.list_all(db, "rita")  # as no answer read it before (a lake would keep that read)
        return sum(not sql.startswith(LAKE_LOOK) for sql, *_ in ran), len(shown)

    body = {"name": "returns", "filter": {"event_types": ["return"]}, "reviewers": ["rita", "rob"], "overlap": 2}
    for blind in (False, True, False, True, False):
        assert client.post("/api/queues", json=body | {"blind": blind}).status_code == 201
        reads, shown = listed()
        assert reads <= 4  # the queues, their labels, their adjudications, their item counts (a lake may keep some)
    assert shown == 5


def test_a_queue_page_reads_the_queues_labels_once_for_its_progress_and_its_items(client):
    assert post_json(client, make_trace("q1")).status_code == 201
    body = {"name": "returns", "filter": {"event_types": ["return"]}, "reviewers": ["rita", "rob"], "overlap": 2}
    queue = client.post("/api/queues", json=body).json()
    with traced_statements() as ran:
        page = client.get(f"/queues/{queue['id']}")
    assert page.status_code == 200 and "returns" in page.text
    labels_read = " ".join(label_store.QUEUE_LABELS.split())  # as the trace of statements writes it
    assert [" ".join(sql.split()) for sql, *_ in ran].count(labels_read) <= 1  # a lake may keep the read


def test_a_queue_page_lists_its_first_items_and_every_disputed_one(lab, monkeypatch):
    """A queue of a training run's tool calls holds some 90,000 items: its page reads the ones it lists, and its
    disputed items wherever they are in the queue, for the admin to settle."""
    from app.web.routes import queue_pages

    monkeypatch.setattr(queue_pages, "SHOWN_ITEMS", 2)
    queue = make_queue(lab["ada"], blind=False).json()
    items = lab["ada"].get(f"/api/queues/{queue['id']}/items").json()["items"]
    assert len(items) == 4
    for name, credits in (("rita", (0.5, 0.5, 0.5, 0.5)), ("rob", (0.5, 0.5, 0.5, -0.5))):
        for item, credit in zip(items, credits):
            assert label(lab[name], item, queue_id=queue["id"], credit=credit).status_code == 201
    page = BeautifulSoup(lab["ada"].get(f"/queues/{queue['id']}").text, "html.parser")
    listed = page.select("section[aria-label=Items] tbody tr")
    assert [row.td.get_text(strip=True) for row in listed] == [str(i["item_id"]) for i in items[:2]]
    assert "The first 2 of 4 items" in page.get_text(" ", strip=True)
    disputes = page.select("section[aria-label='Disputed items'] article.dispute")
    assert [d["id"] for d in disputes] == [f"item-{items[3]['item_id']}"]  # beyond the items listed
    assert "4 of 4 items done" in " ".join(page.get_text(" ", strip=True).split())
