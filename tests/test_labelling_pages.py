"""Labelling pages: reviewer cookie, the inspector's label form, history, labels page, agreement page."""

import pytest
from bs4 import BeautifulSoup
from conftest import BASE_URL, form_headers, make_trace, post_json
from fastapi.testclient import TestClient
from test_security import PASSWORD, log_in

from app.main import create_app
from app.services import accounts
from app.settings import Settings


def soup(response) -> BeautifulSoup:
    return BeautifulSoup(response.text, "html.parser")


@pytest.fixture
def reviewer(client):
    post_json(client, make_trace("lab"))
    headers = form_headers(client)
    response = client.post("/reviewer", data={"new_name": "ada", "next": "/traces/lab"}, headers=headers,
                           follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/traces/lab"
    return headers


def post_label(client, headers, event="e2", **fields):
    page = soup(client.get(f"/traces/lab?event={event}"))
    form = page.select_one("#label-form")
    data = {i["name"]: i.get("value", "") for i in form.select("input[type=hidden]")} | fields
    return client.post(f"/traces/lab/events/{event}/label", data=data, headers=headers | {"HX-Target": "label-form"})


def test_reviewer_name_shows_in_header_and_list(client, reviewer):
    assert "ada" in soup(client.get("/")).select_one("#reviewer-name").get_text()
    options = [o.get_text() for o in soup(client.get("/reviewer")).select("select[name=name] option")]
    assert options == ["ada"]
    empty = client.post("/reviewer", data={"new_name": "  "}, headers=reviewer)
    assert empty.status_code == 422 and "non-empty" in empty.text
    offsite = client.post("/reviewer", data={"name": "ada", "next": "https://evil.example/"}, headers=reviewer,
                          follow_redirects=False)
    assert offsite.headers["location"] == "/"


def test_label_form_saves_versions_and_updates_progress(client, reviewer):
    first = post_label(client, reviewer, credit="0.5", reward_family="R7", tags="split, early")
    assert first.status_code == 200
    page = soup(first)
    assert page.select_one(".status").get_text() == "saved v1"
    assert page.select_one("#label-form")["data-version"] == "1"
    assert "labelled 1 / 6 events (you)" in page.select_one("#label-progress[hx-swap-oob]").get_text(" ", strip=True)
    second = soup(post_label(client, reviewer, credit="-1"))
    assert second.select_one(".status").get_text() == "saved v2"
    labels = client.get("/api/annotations", params={"trace_id": "lab"}).json()["items"]
    assert labels[0]["credit"] == -1.0 and labels[0]["tags"] == [] and labels[0]["reviewer"] == "ada"


def test_label_form_errors_and_conflicts(client, reviewer):
    bad = post_label(client, reviewer, credit="lots")
    assert bad.status_code == 422 and "credit" in soup(bad).select_one(".status").get_text()
    stale = soup(client.get("/traces/lab?event=e2")).select_one("#label-form")
    hidden = {i["name"]: i.get("value", "") for i in stale.select("input[type=hidden]")}
    client.post("/api/annotations", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada", "credit": 1})
    conflict = client.post("/traces/lab/events/e2/label", data=hidden | {"credit": "-1"},
                           headers=reviewer | {"HX-Target": "label-form"})
    assert conflict.status_code == 409
    box = soup(conflict).select_one(".conflict")
    assert box and "now v1" in box.get_text()
    forged = client.post("/traces/lab/events/e2/label", data=hidden, headers={"X-CSRF-Token": "nope"})
    assert forged.status_code == 403


def test_clear_undo_and_history(client, reviewer):
    post_label(client, reviewer, credit="0.5")
    post_label(client, reviewer, credit="1")
    cleared = soup(post_label(client, reviewer, action="clear"))
    assert cleared.select_one(".status").get_text() == "cleared (v3)"
    undone = soup(post_label(client, reviewer, action="undo"))
    assert undone.select_one(".status").get_text() == "undone: v4 restores v2"
    history = soup(client.get("/traces/lab/events/e2/history", headers={"HX-Request": "true"}))
    versions = [tr.select("td")[0].get_text() for tr in history.select("tbody tr")]
    assert versions == ["4", "3", "2", "1"]


def test_labels_page_lists_and_filters(client, reviewer):
    post_label(client, reviewer, credit="0.5", reward_family="R1")
    post_label(client, reviewer, event="e3", credit="-0.5", reward_family="R5")
    page = soup(client.get("/annotations"))
    assert len(page.select("#labels-table tbody tr")) == 2
    assert page.select_one("#export-csv")["href"].startswith("/api/annotations/export?format=csv")
    only = soup(client.get("/annotations", params={"reward_family": "R5"}, headers={"HX-Request": "true",
                                                                                    "HX-Target": "labels-table"}))
    assert [tr.select("td")[1].get_text(strip=True) for tr in only.select("tbody tr")] == ["e3"]


def test_labels_page_imports_its_own_export_in_place(client, reviewer):
    post_label(client, reviewer, credit="0.5", reward_family="R1")
    form = soup(client.get("/annotations")).select_one("form#label-import")
    assert (form["hx-post"], form["hx-encoding"], form["hx-swap"]) == ("/api/annotations/import", "multipart/form-data",
                                                                       "none")
    assert form.select_one("input[type=file][name=file]")["accept"] == ".csv,.json,text/csv,application/json"
    assert form.select_one("input[name=csrf_token]")["value"] == reviewer["X-CSRF-Token"]
    assert form.select_one("#label-import-result[aria-live]") is not None
    exported = client.get("/api/annotations/export", params={"format": "csv"}).content
    fields = {i["name"]: i["value"] for i in form.select("input[type=hidden]")}
    again = client.post(form["hx-post"], files={"file": ("annotations.csv", exported, "text/csv")}, data=fields,
                        headers=reviewer)
    assert again.status_code == 200 and again.json() == {"imported": 0, "unchanged": 1}


def test_only_admins_see_the_label_import_once_accounts_exist(tmp_path):
    app = create_app(Settings(db=tmp_path / "accounts.duckdb", auth="required"))
    with TestClient(app, base_url=BASE_URL):
        for name, role in (("ada", "admin"), ("rita", "reviewer")):
            accounts.add_user(app.state.db, name, role, PASSWORD)
        admin, reviewer = soup(log_in(app, "ada").get("/annotations")), soup(log_in(app, "rita").get("/annotations"))
    assert admin.select_one("form#label-import") and admin.select_one('script[src="/static/label_import.js"]')
    assert not reviewer.select("form#label-import") and reviewer.select_one("#export-csv")


def test_agreement_page_shows_numbers_and_disputes(client, reviewer):
    for event, a, b in (("e1", 1.0, 1.0), ("e2", 0.5, -0.5), ("e3", 0.0, 0.0)):
        client.post("/api/annotations", json={"trace_id": "lab", "event_id": event, "reviewer": "ada", "credit": a})
        client.post("/api/annotations", json={"trace_id": "lab", "event_id": event, "reviewer": "bob", "credit": b})
    page = soup(client.get("/traces/lab/agreement"))
    credit_row = page.select_one("#agreement-table tbody tr").get_text(" ", strip=True)
    assert credit_row.startswith("credit 3 67%")
    disputed = [tr.select_one("td").get_text(strip=True) for tr in page.select("#disagreements tbody tr")]
    assert disputed == ["e2"]
    assert client.get("/traces/nope/agreement").status_code == 404


def test_trace_list_shows_label_progress(client, reviewer):
    post_label(client, reviewer, credit="0.5")
    row = soup(client.get("/")).select_one('tr[data-trace-id="lab"]').get_text(" ", strip=True)
    assert "1 (1)" in row


def test_human_credit_overlay(client, reviewer):
    post_label(client, reviewer, credit="0.5")
    client.post("/api/annotations", json={"trace_id": "lab", "event_id": "e2", "reviewer": "bob", "credit": -0.5})
    names = [c["name"] for c in client.get("/api/traces/lab/overlays").json()["channels"]]
    assert names[:3] == ["human credit (mean)", "human credit: ada", "human credit: bob"]
    mean = client.get("/api/traces/lab/overlay", params={"channel": "human credit (mean)"}).json()["values"]
    assert mean == [None, 0.0, None, None, None, None]
