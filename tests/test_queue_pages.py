"""The review-queue pages in open single-user mode: make a queue with the form, see its progress, `next` opens
the item on the trace page, and a disputed item is adjudicated with its form."""

import json

from bs4 import BeautifulSoup
from conftest import csrf_token, make_trace, post_json

from app.web.browser import REVIEWER_COOKIE


def page(client, path: str) -> BeautifulSoup:
    response = client.get(path)
    assert response.status_code == 200, response.text[:300]
    return BeautifulSoup(response.text, "html.parser")


def make(client, **fields) -> str:
    form = {"csrf_token": csrf_token(client), "name": "decisions", "event_types": ["orchestrator_decision",
            "return"], "fields": ["credit", "counterfactual"], "required": ["credit"], "more_reviewers": "ada, bo",
            "overlap": "2"} | fields
    response = client.post("/queues", data=form, follow_redirects=False)
    assert response.status_code == 303, response.text[:500]
    return response.headers["location"]


def test_a_queue_made_on_the_page_is_listed_with_its_progress(client):
    assert post_json(client, make_trace("p1")).status_code == 201
    empty = page(client, "/queues")
    assert "No queue yet" in empty.select_one(".empty").text and empty.select_one("form[action='/queues']")
    location = make(client)
    assert location.startswith("/queues/q-")
    listed = page(client, "/queues")
    (row,) = listed.select("table.queues tbody tr")
    assert row.select_one("a").text == "decisions" and row.select("td.num")[0].text.strip() == "2"
    detail = page(client, location)
    assert detail.select_one("h1").text == "decisions"
    assert "0 of 2 items done" in " ".join(detail.select_one("[aria-label=Progress]").text.split())
    assert [td.text.strip() for td in detail.select("[aria-label=Items] tbody td:nth-of-type(2)")] == ["p1 / e1",
                                                                                                       "p1 / e5"]


def test_a_refused_queue_shows_the_form_again_with_the_reason(client):
    assert post_json(client, make_trace("p1")).status_code == 201
    form = {"csrf_token": csrf_token(client), "name": "nothing", "event_types": ["despawn"],
            "more_reviewers": "ada"}
    response = client.post("/queues", data=form)
    assert response.status_code == 422
    assert "matches no event" in BeautifulSoup(response.text, "html.parser").select_one(".notice.error").text


def test_the_workspace_takes_an_item_saves_once_and_a_dispute_is_adjudicated_on_the_queue_page(client):
    assert post_json(client, make_trace("p1")).status_code == 201
    location = make(client)
    assert client.get(f"{location}/next", follow_redirects=False).headers["location"] == f"{location}/review"
    for name, credit in (("ada", "1"), ("bo", "-1")):
        client.cookies.set(REVIEWER_COOKIE, name)
        headers = {"HX-Request": "true", "X-CSRF-Token": csrf_token(client)}
        workspace = BeautifulSoup(client.post(f"{location}/review/next", headers=headers).text, "html.parser")
        form = workspace.select_one("#queue-workspace #label-form")
        assert workspace.select_one("#queue-workspace")["data-event-id"] == "e1"
        data = {"client_request_id": form.select_one("[name=client_request_id]")["value"], "credit": credit,
                "asked": form.select_one("[name=asked]")["value"]}
        for _ in range(2):  # Enter pressed twice: one version
            answer = client.post(f"{location}/items/1/label", data=data, headers=headers)
            assert answer.status_code == 200, answer.text
        following = BeautifulSoup(answer.text, "html.parser").select_one("#queue-workspace")
        assert following["data-event-id"] == "e5" and "Saved item 1 (v1)" in following.text
        versions = client.get("/api/annotations", params={"reviewer": name, "history": "true"}).json()["items"]
        assert [v["version"] for v in versions] == [1]
    disputes = page(client, location).select(".dispute")
    assert len(disputes) == 1 and disputes[0]["id"] == "item-1"
    form = {"csrf_token": csrf_token(client), "credit": "0.25", "counterfactual": "partly", "reason": "split"}
    response = client.post(f"{location}/items/1/adjudicate", data=form, follow_redirects=False)
    assert response.status_code == 303
    final = page(client, location).select_one(".dispute tr.final")
    assert final is not None and "0.25" in final.text and "partly" in final.text
    bad = client.post(f"{location}/items/1/adjudicate", data=form | {"credit": "lots"})
    assert bad.status_code == 422 and bad.json()["field"] == "credit"


def test_a_pairwise_queue_made_on_the_page_is_reviewed_in_its_workspace_and_settled_on_its_page(client):
    for trace_id, answer in (("p1", "forty-two"), ("p2", "six times seven")):
        trace = make_trace(trace_id, task_id="sum", rewards={"team": 0.75})
        trace["events"][-1]["summary"] = answer
        assert post_json(client, trace).status_code == 201
    form = {"csrf_token": csrf_token(client), "kind": "pairwise", "name": "which run", "by": "task_id",
            "per_group": "3", "more_reviewers": "ada, bo", "overlap": "2"}
    location = client.post("/queues", data=form, follow_redirects=False).headers["location"]
    assert "pairwise" in page(client, "/queues").select_one("table.queues tbody tr").text
    for name, choice in (("ada", "a"), ("bo", "b")):
        client.cookies.set(REVIEWER_COOKIE, name)
        headers = {"HX-Request": "true", "X-CSRF-Token": csrf_token(client)}
        workspace = BeautifulSoup(client.post(f"{location}/review/next", headers=headers).text, "html.parser")
        sides = workspace.select(".rollout-card")
        assert [card["aria-label"] for card in sides] == ["Rollout A", "Rollout B"]
        assert {card.select_one(".rollout-answer").text for card in sides} == {"forty-two", "six times seven"}
        assert "team" not in workspace.text and "hidden in this queue" in workspace.text  # show_rewards off
        diff = workspace.select_one("#pair-diff")
        assert diff["hx-get"].startswith("/diff?a=") and diff["hx-trigger"] == "load"
        form = workspace.select_one("#queue-workspace #pair-form")
        data = {"client_request_id": form.select_one("[name=client_request_id]")["value"], "choice": choice}
        refused = client.post(f"{location}/items/1/choice", data=data, headers=headers)
        assert refused.status_code == 422 and "reason" in refused.text  # no reason given
        kept = BeautifulSoup(refused.text, "html.parser").select_one(f"#pair-form input[value={choice}]")
        assert kept.has_attr("checked")
        data |= {"reason": f"{name} prefers it", "deciding_side": choice, "deciding_event": "e6"}
        for _ in range(2):  # Enter pressed twice: one version
            answer = client.post(f"{location}/items/1/choice", data=data, headers=headers)
            assert answer.status_code == 200, answer.text
        done = BeautifulSoup(answer.text, "html.parser")
        assert "Nothing left for you" in done.text and "Saved pair 1 (v1)" in done.text
    disputes = page(client, location).select(".dispute")
    assert len(disputes) == 1 and disputes[0]["id"] == "item-1"
    settle = {"csrf_token": csrf_token(client), "choice": "b", "reason": "b shows its work"}
    assert client.post(f"{location}/items/1/adjudicate", data=settle, follow_redirects=False).status_code == 303
    detail = page(client, location)
    assert "b shows its work" in detail.select_one(".dispute tr.final").text
    ends_with = detail.select("[aria-label=Pairs] tbody td")[-1].text.strip()
    assert ends_with == "B"
    link = detail.select_one("a[href*='format=preference_pairs']")["href"]
    (line,) = client.get(link).text.splitlines()
    assert json.loads(line)["chosen"] in ("forty-two", "six times seven")


def test_a_pairwise_queue_that_shows_rewards_shows_them_beside_each_rollout(client):
    for trace_id in ("p1", "p2"):
        assert post_json(client, make_trace(trace_id, rewards={"team": 0.75})).status_code == 201
    queue = client.post("/api/queues", json={"name": "rewards on", "kind": "pairwise", "reviewers": ["ada"],
                                             "show_rewards": True}).json()
    client.cookies.set(REVIEWER_COOKIE, "ada")
    headers = {"HX-Request": "true", "X-CSRF-Token": csrf_token(client)}
    workspace = client.post(f"/queues/{queue['id']}/review/next", headers=headers).text
    assert workspace.count("<em>team</em> 0.75") == 2 and "hidden in this queue" not in workspace
