"""Event labels through the API: values, versions, conflicts, idempotency, undo, export/import, orphans."""

import csv
import io

import pytest
from conftest import BASE_URL, make_trace, post_json

from app.store.sql import traced_statements


@pytest.fixture
def trace(client):
    assert post_json(client, make_trace("lab")).status_code == 201
    return "lab"


def save(client, **fields):
    body = {"trace_id": "lab", "event_id": "e2", "reviewer": "ada"} | fields
    return client.post("/api/annotations", json=body)


def test_save_creates_versions_and_omitted_fields_keep_values(client, trace):
    first = save(client, credit=0.5, reward_family="R7", credit_unit="orchestrator", subdecision="O1",
                 tags=["good split"], note="spawned early")
    assert first.status_code == 201
    assert first.json()["version"] == 1 and first.json()["annotation_id"]
    assert first.json()["event_type"] == "spawn" and first.json()["agent"] == "lead"
    second = save(client, credit=-0.5)
    assert second.json()["version"] == 2
    assert second.json()["reward_family"] == "R7" and second.json()["tags"] == ["good split"]
    current = client.get("/api/annotations", params={"trace_id": "lab"}).json()["items"]
    assert [(c["version"], c["credit"]) for c in current] == [(2, -0.5)]
    history = client.get("/api/annotations", params={"trace_id": "lab", "history": "true"}).json()["items"]
    assert [h["version"] for h in history] == [1, 2]


@pytest.mark.above_the_store
@pytest.mark.parametrize("fields, field, fragment", [
    ({"credit": 1.5}, "credit", "outside [-1, 1]"),
    ({"credit": "high"}, "credit", "not a number"),
    ({"credit": True}, "credit", "not a number"),
    ({"reward_family": "R9"}, "reward_family", "R1, R2, R3, R4, R5, R6, R7, R8"),
    ({"credit_unit": "paragraph"}, "credit_unit", "token, tool call, message, turn, agent, role, orchestrator, team"),
    ({"subdecision": "O6"}, "subdecision", "O1, O2, O3, O4, O5"),
    ({"safety": "yes"}, "safety", "true or false"),
    ({"tags": "a,b"}, "tags", "list of strings"),
    ({"tags": ["a;b"]}, "tags", "separates tags"),
    ({"reviewer": "  "}, "reviewer", "non-empty"),
    ({"base_version": "1"}, "base_version", "integer"),
    ({"annotator_kind": "robot"}, "annotator_kind", "human"),
])
def test_bad_values_are_422_naming_field_and_allowed_values(client, trace, fields, field, fragment):
    response = save(client, **fields)
    assert response.status_code == 422
    assert response.json()["field"] == field and fragment in response.json()["error"]
    assert client.get("/api/annotations", params={"history": "true"}).json()["items"] == []


def test_unknown_trace_or_event_is_404(client, trace):
    assert save(client, trace_id="nope").status_code == 404
    assert save(client, event_id="nope").status_code == 404
    assert client.post("/api/annotations", content=b"[1]").status_code == 400


def test_stale_base_version_is_409_with_current_label(client, trace):
    assert save(client, credit=0.5, base_version=0).status_code == 201
    assert save(client, credit=1.0, base_version=1).status_code == 201
    conflict = save(client, credit=-1.0, base_version=1)
    assert conflict.status_code == 409
    assert conflict.json()["current"]["version"] == 2 and conflict.json()["current"]["credit"] == 1.0
    assert save(client, credit=0.25, base_version=0, event_id="e3").status_code == 201


def test_client_request_id_makes_retries_no_ops(client, trace):
    first = save(client, credit=0.5, client_request_id="req-1")
    retry = save(client, credit=0.5, client_request_id="req-1")
    assert first.status_code == 201 and retry.status_code == 200
    assert retry.json()["annotation_id"] == first.json()["annotation_id"]
    assert len(client.get("/api/annotations", params={"history": "true"}).json()["items"]) == 1


def test_clear_and_undo_append_versions(client, trace):
    save(client, credit=0.5, tags=["x"])
    save(client, credit=1.0)
    cleared = client.post("/api/annotations/clear", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada"})
    assert cleared.status_code == 201
    assert cleared.json()["version"] == 3 and cleared.json()["credit"] is None and cleared.json()["tags"] == []
    undone = client.post("/api/annotations/undo", json={"trace_id": "lab", "event_id": "e2", "reviewer": "ada"})
    assert undone.json()["version"] == 4 and undone.json()["credit"] == 1.0 and undone.json()["tags"] == ["x"]
    history = client.get("/api/annotations", params={"history": "true"}).json()["items"]
    assert [h["version"] for h in history] == [1, 2, 3, 4]
    nothing = client.post("/api/annotations/undo", json={"trace_id": "lab", "event_id": "e5", "reviewer": "ada"})
    assert nothing.status_code == 404


def test_export_csv_and_json_then_import_is_identical(client, trace):
    save(client, credit=0.5, tags=["a", 'quote " and, comma'], note="line one\nline two")
    save(client, reviewer="bob", credit=-0.25, reward_family="R1")
    save(client, event_id="e4", safety=True, subdecision="O3")
    save(client, credit=0.75)
    for fmt in ("csv", "json"):
        exported = client.get("/api/annotations/export", params={"format": fmt, "history": "true"})
        assert exported.status_code == 200
        content_type = "text/csv" if fmt == "csv" else "application/json"
        again = client.post("/api/annotations/import", content=exported.content, headers={"Content-Type": content_type})
        assert again.status_code == 200, again.text
        assert again.json() == {"imported": 0, "unchanged": 4}
        assert client.get("/api/annotations/export", params={"format": fmt, "history": "true"}).content == exported.content
    rows = list(csv.DictReader(io.StringIO(client.get("/api/annotations/export").text)))
    assert [r["version"] for r in rows] == ["2", "1", "1"]  # current labels only by default
    assert rows[0]["tags"] == 'a;quote " and, comma' and rows[0]["note"] == "line one\nline two"
    assert list(rows[0])[:6] == ["trace_id", "event_id", "event_type", "agent", "role", "reviewer"]


def test_export_file_names_carry_any_trace_id():
    from app.web.downloads import attachment

    header = attachment('run "é"/1.csv')["Content-Disposition"]
    assert header == "attachment; filename=\"run ___/1.csv\"; filename*=UTF-8''run%20%22%C3%A9%22%2F1.csv"


@pytest.mark.above_the_store
def test_export_of_a_trace_with_a_non_ascii_id(client):
    response = client.get("/api/annotations/export", params={"trace_id": "trace-é"})
    assert response.status_code == 200
    assert "filename*=UTF-8''annotations-trace-%C3%A9.csv" in response.headers["content-disposition"]


def test_import_into_an_empty_database_restores_every_version(client, trace, tmp_path):
    from fastapi.testclient import TestClient

    from app.main import create_app
    from app.settings import Settings

    save(client, credit=0.5)
    save(client, credit=0.75, reviewer="bob")
    exported = client.get("/api/annotations/export", params={"format": "csv", "history": "true"}).content
    with TestClient(create_app(Settings(db=tmp_path / "other.duckdb")), base_url=BASE_URL) as other:
        assert other.post("/api/annotations/import", content=exported,
                          headers={"Content-Type": "text/csv"}).json() == {"imported": 2, "unchanged": 0}
        assert other.get("/api/annotations/export", params={"format": "csv", "history": "true"}).content == exported


def test_import_refuses_bad_rows_and_conflicts_whole(client, trace):
    save(client, credit=0.5)
    exported = client.get("/api/annotations/export", params={"format": "json", "history": "true"}).json()
    bad = [dict(exported[0], version=2, credit=7)]
    response = client.post("/api/annotations/import", json=bad)
    assert response.status_code == 422 and "item 0" in response.json()["errors"][0]["where"]
    changed = [dict(exported[0], credit=-0.5), dict(exported[0], version=5)]
    conflict = client.post("/api/annotations/import", json=changed)
    assert conflict.status_code == 409
    assert len(client.get("/api/annotations", params={"history": "true"}).json()["items"]) == 1
    header_only = client.post("/api/annotations/import", content=b"trace_id,event_id\r\n",
                              headers={"Content-Type": "text/csv"})
    assert header_only.status_code == 400 and "missing column" in header_only.json()["errors"][0]["message"]
    exported_csv = client.get("/api/annotations/export").text
    doubled = exported_csv.replace("credit", "credit,credit", 1).replace("0.5", "0.5,-1", 1)
    twice = client.post("/api/annotations/import", content=doubled, headers={"Content-Type": "text/csv"})
    assert twice.status_code == 400 and twice.json()["errors"][0] == {
        "where": "line 1", "message": "column(s) credit given more than once in the header"}
    csv_bad = client.get("/api/annotations/export").text.replace("0.5", "lots")
    line = client.post("/api/annotations/import", content=csv_bad, headers={"Content-Type": "text/csv"})
    assert line.status_code == 422 and line.json()["errors"][0]["where"] == "line 2"


def test_annotated_trace_is_still_valid(client, trace):
    from app.domain.validation import validate_trace

    save(client, credit=0.5)
    save(client, reviewer="bob", credit=0.25)
    annotated = client.get("/api/traces/lab/annotated").json()
    event = next(e for e in annotated["events"] if e["id"] == "e2")
    assert sorted(a["reviewer"] for a in event["annotations"]) == ["ada", "bob"]
    assert validate_trace(annotated) == []
    assert client.get("/api/traces/nope/annotated").status_code == 404


def test_replace_keeps_labels_and_reports_orphans(client, trace):
    save(client, credit=0.5)
    save(client, event_id="e6", credit=1.0)
    smaller = make_trace("lab")
    smaller["events"] = smaller["events"][:5]
    smaller["edges"] = [e for e in smaller["edges"] if e["dst"] != "e6"]
    replaced = post_json(client, smaller, replace="true")
    assert replaced.status_code == 201
    assert [(o["event_id"], o["reviewer"]) for o in replaced.json()["orphaned_labels"]] == [("e6", "ada")]
    assert len(client.get("/api/annotations").json()["items"]) == 2
    orphans = client.get("/api/annotations", params={"orphaned": "true"}).json()["items"]
    assert [o["event_id"] for o in orphans] == ["e6"]


def test_a_replace_of_many_traces_reports_the_orphans_of_those_it_replaced(client, trace):
    others = [make_trace(f"other-{k}") for k in range(3)]
    assert post_json(client, others).status_code == 201
    for trace_id in ("lab", "other-0", "other-2"):
        assert save(client, trace_id=trace_id, event_id="e6", credit=1.0).status_code == 201
    assert save(client, trace_id="other-1", event_id="e2", credit=0.5).status_code == 201
    smaller = [make_trace(trace_id) for trace_id in ("other-2", "other-1", "other-0")]
    for replacement in smaller:
        replacement["events"] = replacement["events"][:5]
        replacement["edges"] = [e for e in replacement["edges"] if e["dst"] != "e6"]
    replaced = post_json(client, smaller, replace="true")
    assert replaced.status_code == 201
    assert [(o["trace_id"], o["event_id"]) for o in replaced.json()["orphaned_labels"]] == [
        ("other-0", "e6"), ("other-2", "e6")]  # not lab's, which was not replaced; not other-1's kept e2


def test_delete_with_labels_needs_force_and_keeps_labels(client, trace):
    save(client, credit=0.5)
    refused = client.delete("/api/traces/lab")
    assert refused.status_code == 409 and "force=true" in refused.json()["error"]
    assert client.delete("/api/traces/lab", params={"force": "true"}).json() == {"deleted": "lab", "labels_kept": 1}
    rows = list(csv.DictReader(io.StringIO(client.get("/api/annotations/export").text)))
    assert rows[0]["event_type"] == "spawn" and rows[0]["agent"] == "lead"


def test_agreement_between_reviewers(client, trace):
    for event, a, b in (("e1", 1.0, 1.0), ("e2", 0.5, -0.5), ("e3", 0.0, 0.0)):
        save(client, event_id=event, credit=a, reward_family="R1")
        save(client, event_id=event, reviewer="bob", credit=b, reward_family="R1" if a == b else "R7")
    report = client.get("/api/agreement", params={"trace_id": "lab", "field": "credit", "reviewers": "ada,bob"}).json()
    assert report["n_items"] == 3
    assert report["percent_agreement"] == pytest.approx(2 / 3)
    assert report["krippendorff_alpha"] is not None and report["cohen_kappa"] is not None
    nominal = client.get("/api/agreement", params={"field": "reward_family", "reviewers": "ada,bob"}).json()
    assert nominal["level"] == "nominal" and nominal["percent_agreement"] == pytest.approx(2 / 3)
    assert client.get("/api/agreement", params={"field": "credit", "reviewers": "ada"}).status_code == 422
    assert client.get("/api/agreement", params={"field": "colour", "reviewers": "a,b"}).status_code == 422


def test_counterfactual_and_stop_answers_are_saved_exported_and_imported_back(client, trace):
    assert save(client, event_id="e5", counterfactual="partly", credit=0.25).json()["counterfactual"] == "partly"
    stopped = save(client, event_id="e1", stop="stop_too_early", counterfactual="cannot tell")
    assert stopped.status_code == 201
    assert (stopped.json()["stop"], stopped.json()["counterfactual"]) == ("stop_too_early", "cannot tell")
    assert not stopped.json()["empty"]
    exported = client.get("/api/annotations/export", params={"format": "csv"}).text
    rows = {row["event_id"]: row for row in csv.DictReader(io.StringIO(exported))}
    assert (rows["e1"]["stop"], rows["e5"]["counterfactual"], rows["e5"]["stop"]) == ("stop_too_early", "partly", "")
    # into a fresh server: the same two answers come back, and exporting again gives the same bytes
    client.delete("/api/traces/lab", params={"force": "true"})
    assert post_json(client, make_trace("lab")).status_code == 201
    assert client.post("/api/annotations/import", content=exported,
                       headers={"Content-Type": "text/csv"}).json() == {"imported": 0, "unchanged": 2}


@pytest.mark.above_the_store
@pytest.mark.parametrize("fields, fragment", [
    ({"event_id": "e1", "counterfactual": "maybe"}, "no, partly, yes, cannot tell"),
    ({"event_id": "e1", "stop": "late"}, "stop_too_early, right, stop_too_late, cannot tell"),
    ({"event_id": "e5", "stop": "right"}, "orchestrator_decision and despawn events; this is a return"),
])
def test_bad_counterfactual_or_stop_answers_are_422(client, trace, fields, fragment):
    response = save(client, **fields)
    assert response.status_code == 422 and fragment in response.json()["error"]


def test_a_clear_empties_the_new_answers_too_and_the_label_no_longer_counts(client, trace):
    save(client, event_id="e1", stop="right")
    cleared = client.post("/api/annotations/clear", json={"trace_id": "lab", "event_id": "e1", "reviewer": "ada"})
    assert cleared.json()["stop"] is None and cleared.json()["empty"]


def test_an_export_from_before_the_new_columns_still_imports(client, trace):
    save(client, credit=0.5)
    exported = client.get("/api/annotations/export", params={"format": "csv"}).text
    old = "\r\n".join(",".join(line.split(",")[:-3]) for line in exported.strip().split("\r\n")) + "\r\n"
    assert "counterfactual" not in old
    client.delete("/api/traces/lab", params={"force": "true"})
    assert client.post("/api/annotations/import", content=old,
                       headers={"Content-Type": "text/csv"}).json() == {"imported": 0, "unchanged": 1}


@pytest.mark.above_the_store
def test_the_exported_file_imports_as_a_multipart_upload(client, trace):
    save(client, credit=0.5)
    exported = client.get("/api/annotations/export", params={"format": "csv"}).content
    response = client.post("/api/annotations/import", files={"file": ("labels.csv", exported, "text/csv")})
    assert response.status_code == 200 and response.json() == {"imported": 0, "unchanged": 1}
    created = client.get("/api/annotations").json()["items"][0]["created_at"]
    assert created.endswith("Z")


def test_counterfactual_and_stop_answers_are_graph_overlays(client, trace):
    save(client, event_id="e1", stop="stop_too_late", counterfactual="yes")
    save(client, event_id="e1", reviewer="bo", stop="right", counterfactual="cannot tell")
    save(client, event_id="e5", reviewer="bo", counterfactual="partly")
    names = [c["name"] for c in client.get("/api/traces/lab/overlays").json()["channels"]]
    counterfactual = next(n for n in names if n.startswith("human counterfactual"))
    stop = next(n for n in names if n.startswith("human stop"))
    values = client.get("/api/traces/lab/overlay", params={"channel": counterfactual}).json()["values"]
    assert values == [1.0, None, None, None, 0.5, None]  # "cannot tell" has no number
    values = client.get("/api/traces/lab/overlay", params={"channel": stop}).json()["values"]
    assert values == [0.5, None, None, None, None, None]


@pytest.mark.above_the_store
def test_agreement_is_measured_on_counterfactual_and_stop_answers(client, trace):
    for reviewer, answer, stop in (("ada", "yes", "right"), ("bo", "yes", "stop_too_late")):
        assert save(client, event_id="e1", reviewer=reviewer, counterfactual=answer, stop=stop).status_code == 201
    same = client.get("/api/agreement", params={"field": "counterfactual", "reviewers": "ada,bo"}).json()
    differ = client.get("/api/agreement", params={"field": "stop", "reviewers": "ada,bo"}).json()
    assert (same["n_items"], same["percent_agreement"], same["level"]) == (1, 1.0, "nominal")
    assert (differ["n_items"], differ["percent_agreement"]) == (1, 0.0)


def test_an_import_reads_and_writes_its_versions_at_once_and_checks_a_repeated_one_against_its_first(client, trace):
    """An import of many versions holds the write lock for a few statements, not three a version (every label save
    waits meanwhile); a version the file gives twice counts once when both say the same, and is refused whole when
    they differ, as against a stored one."""
    for event in ("e1", "e2", "e3"):
        save(client, event_id=event, credit=0.5)
    exported = client.get("/api/annotations/export", params={"format": "json", "history": "true"}).json()
    more = [dict(row, reviewer=reviewer) for row in exported for reviewer in ("bob", "cy", "di")]
    reads = []
    for rows in (more[:3], more[3:]):
        with traced_statements() as ran:
            answer = client.post("/api/annotations/import", json=rows)
        assert answer.status_code == 200, answer.text
        reads.append(len(ran))
    assert reads[1] <= reads[0] and answer.json() == {"imported": 6, "unchanged": 0}
    assert client.post("/api/annotations/import", json=[*more, more[0]]).json() == {"imported": 0, "unchanged": 10}
    fresh = [dict(exported[0], reviewer="eve"), dict(exported[0], reviewer="eve")]
    assert client.post("/api/annotations/import", json=fresh).json() == {"imported": 1, "unchanged": 1}
    differing = [dict(exported[0], reviewer="fay"), dict(exported[0], reviewer="fay", credit=-0.5)]
    refused = client.post("/api/annotations/import", json=differing)
    assert refused.status_code == 409 and "fay's label on lab/e1 differs" in refused.json()["errors"][0]["message"]
    assert "fay" not in {label["reviewer"] for label in client.get("/api/annotations").json()["items"]}


def test_labels_come_a_page_at_a_time_in_the_order_of_the_whole_list(client, trace):
    """GET /api/annotations pages with limit and offset (a lab labelling a training run's rollouts keeps hundreds of
    thousands of labels), in the whole list's order, with the total, whatever the filters."""
    for reviewer in ("ada", "bob", "cy"):
        for event in ("e1", "e2", "e3"):
            assert save(client, reviewer=reviewer, event_id=event, credit=0.5).status_code == 201
    assert save(client, reviewer="bob", event_id="e2", credit=-0.5, base_version=1).status_code == 201
    for filters in ({}, {"reviewer": "bob"}, {"event_id": "e2"}, {"history": "true"}, {"trace_id": "lab"}):
        whole = client.get("/api/annotations", params=filters).json()
        assert whole["total"] == len(whole["items"]) > 0
        pages = [client.get("/api/annotations", params=filters | {"limit": 2, "offset": k}).json()
                 for k in range(0, whole["total"], 2)]
        assert [item for page in pages for item in page["items"]] == whole["items"]
        assert {page["total"] for page in pages} == {whole["total"]}
    assert client.get("/api/annotations", params={"history": "true"}).json()["total"] == 10
    assert client.get("/api/annotations", params={"offset": 8}).json()["items"] == \
        client.get("/api/annotations").json()["items"][8:]
    refused = client.get("/api/annotations", params={"orphaned": "true", "limit": 5})
    assert refused.status_code == 422 and refused.json()["errors"][0]["path"] == "query.limit"
