"""Bad input never answers 500, never changes data without a word, and never breaks a page for others:
deep nesting, lone surrogates, numbers the store cannot keep, keys given twice, a bad form field, and
gzip parts that together expand past the limit."""

import functools
import gzip
import io
import json
import shutil
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import BASE_URL, form_headers, make_trace, post_json
from fastapi.testclient import TestClient

from app.domain.validation import MAX_DEPTH
from app.main import create_app
from app.settings import Settings

JSON = {"Content-Type": "application/json"}
DEEP_ARRAY = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a":' * 100_000 + b"1" + b"}" * 100_000


def nested(depth: int, leaf=0):
    """`leaf` inside `depth` arrays."""
    return functools.reduce(lambda inner, _: [inner], range(depth), leaf)


def with_extra(trace_id: str, value, key: str = "x", event: int = 0) -> dict:
    trace = make_trace(trace_id)
    trace["events"][event][key] = value
    return trace


def errors_of(response) -> list[tuple[str, str]]:
    return [(e["path"], e["message"]) for e in response.json()["errors"]]


def stored_ids(client) -> list[str]:
    return [item["trace_id"] for item in client.get("/api/traces").json()["items"]]


# JSON nested too deeply to read ---------------------------------------------------------------

@pytest.fixture(scope="module")
def refusing_client(migrated_file, tmp_path_factory):
    """One app for the module's 22 requests nested too deeply to read: each is refused whatever is stored, and its
    test checks only its answer (an app of its own each took a third of a second to start and stop)."""
    db = tmp_path_factory.mktemp("deep") / "deep.duckdb"
    shutil.copyfile(migrated_file, db)
    app = create_app(Settings(db=db))
    with TestClient(app, base_url=BASE_URL) as client:
        yield client
    app.state.db.close()


@pytest.mark.parametrize("body", [DEEP_ARRAY, DEEP_OBJECT], ids=["array", "object"])
@pytest.mark.parametrize("path, params", [
    ("/api/traces", {}),
    ("/api/traces", {"format": "otlp"}),
    ("/api/traces", {"format": "openai_agents"}),
    ("/api/traces", {"format": "claude_code"}),
    ("/v1/traces", {}),
    ("/v1/traces/ingest", {}),
    ("/api/annotations/import", {}),
    ("/api/annotations", {}),
    ("/api/annotations/clear", {}),
    ("/api/annotations/undo", {}),
    ("/api/papers/p1/tags", {}),
])
def test_json_nested_100000_deep_is_a_4xx_with_a_message(refusing_client, path, params, body):
    response = refusing_client.post(path, content=body, params=params, headers=JSON)
    assert 400 <= response.status_code < 500
    assert response.json()["error"]


def test_deep_json_in_a_multipart_file_or_json_lines_is_a_4xx(client):
    part = client.post("/api/traces", files={"file": ("deep.json", DEEP_ARRAY, "application/json")})
    lines = client.post("/api/traces", content=json.dumps(make_trace("ok")).encode() + b"\n" + DEEP_OBJECT,
                        headers={"Content-Type": "application/x-ndjson"})
    assert part.status_code == lines.status_code == 400
    assert "nested too deeply" in part.json()["error"]
    assert stored_ids(client) == []


def test_an_otlp_attribute_nested_near_the_parsers_limit_is_no_500(client):
    value = '{"intValue": "1"}'
    for _ in range(330):  # three JSON levels each: just under orjson's 1024
        value = '{"kvlistValue": {"values": [{"key": "k", "value": %s}]}}' % value
    span = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "invoke_agent a", "startTimeUnixNano": "1",
            "endTimeUnixNano": "2", "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
                {"key": "deep", "value": "@@"}]}
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).replace('"@@"', value)
    for path in ("/v1/traces", "/api/traces"):
        response = client.post(path, content=body, headers=JSON)
        assert response.status_code < 500, response.text


def test_an_exporters_batch_nested_past_what_orjson_writes_is_kept_and_built(client, app):
    value = '{"intValue": "1"}'
    for _ in range(100):  # 300 levels: past orjson's 254, within what is kept
        value = '{"arrayValue": {"values": [%s]}}' % value
    doc = json.loads((FIXTURES / "otlp" / "pydantic_ai_delegation.json").read_text())
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append({"key": "deep", "value": "@@"})
    answer = client.post("/v1/traces", content=json.dumps(doc).replace('"@@"', value), headers=JSON)
    assert answer.status_code == 200 and answer.json()["partialSuccess"] == {}
    app.state.live.flush()
    trace_id = answer.json()["ingested"][0]
    assert client.get(f"/api/traces/{trace_id}/live").json()["status"] == "complete"


# Nesting in a stored trace, and pages that show whatever a trace holds ---------------------------

def test_an_event_property_nested_past_64_levels_is_422_naming_the_path(client):
    assert post_json(client, with_extra("ok", nested(MAX_DEPTH))).status_code == 201
    response = post_json(client, with_extra("deep", {"a": nested(MAX_DEPTH)}))
    assert response.status_code == 422
    path, message = errors_of(response)[0]
    assert path == "events[0].x.a" + "[0]" * (MAX_DEPTH - 1)
    assert f"more than {MAX_DEPTH} levels" in message
    deeper = json.dumps(with_extra("deeper", "@@")).replace('"@@"', "[" * 980 + "0" + "]" * 980)
    assert client.post("/api/traces", content=deeper, headers=JSON).status_code == 422
    assert stored_ids(client) == ["ok"]
    for page in ("/", "/audit", "/dashboard", "/traces/ok?event=e1", "/api/traces/ok", "/ingest-log"):
        assert client.get(page).status_code == 200, page


def odd_trace() -> dict:
    """A valid trace holding the oddest things the validator lets through."""
    return {
        "trace_id": "odd <b>&\"' é %?#", "task_id": "{{ 7*7 }}", "system": "<script>alert(1)</script>",
        "topology": "centralized",
        "events": [
            {"id": "e/1?#", "t": 0, "type": "orchestrator_decision", "agent": "<img src=x onerror=alert(1)>",
             "role": "", "deep": nested(MAX_DEPTH), "deep_object": functools.reduce(
                lambda inner, _: {"a": inner}, range(MAX_DEPTH), 0), "big": 2**70, "negative": -2**70,
             "nul": "\u0000", "rtl": "\u202egnp.exe", "zero_width": "\u200b", "emoji": "😀", "long": "x" * 100_000,
             "": "empty key", "__proto__": {"a": 1}, "a.b": 1, "credit": {"agent": 2**70, "": -1e308},
             "reward": 1e308},
            {"id": "..", "t": 2**63 - 1, "type": "spawn", "agent": "lead", "to": "</script>"},
            {"id": "%2F", "t": 1e300, "type": "tool_call", "agent": "w", "tool": "'; DROP TABLE events; --"},
            {"id": "e 4", "t": 0.5, "type": "tool_result", "agent": "w", "tool": "'; DROP TABLE events; --",
             "trusted": False, "content_ref": "javascript:alert(1)"},
            {"id": "ü", "t": 2, "type": "message", "agent": "a", "from": "a", "to": "b", "reward": -1e308},
        ],
        "edges": [{"src": "e/1?#", "dst": "..", "type": "spawn"}, {"src": "..", "dst": "%2F", "type": "causal"},
                  {"src": "%2F", "dst": "e 4", "type": "tool_dependency"},
                  {"src": "ü", "dst": "ü", "type": "message"}],
        "rewards": {"": 1, "<x>": 2**70, "team": 1e308, "neg": -1e308},
        "costs": {"tokens": 2**63 - 1, "wall_clock_s": 1e308, "tool_calls": 0, "messages": 0, "extra cost": 0.0},
        "metrics": {"task_success": 1, "": -0.0},
    }


def test_every_page_and_read_shows_the_oddest_valid_trace(client):
    trace = odd_trace()
    assert post_json(client, trace).status_code == 201
    assert json.dumps(client.get(f"/api/traces/{quote(trace['trace_id'], safe='')}").json()) == json.dumps(trace)
    page = f"/traces/{quote(trace['trace_id'], safe='')}"
    api = f"/api/traces/{quote(trace['trace_id'], safe='')}"
    urls = ["/", "/audit", "/dashboard", page, f"{page}/agreement", "/annotations", "/ingest-log", "/api/traces",
            f"{api}/figure", f"{api}/overlays", f"{api}/metrics", f"{api}/audit", f"{api}/annotated",
            "/api/annotations/export", "/api/ingest-log"]
    urls += [f"{page}?event={quote(event['id'], safe='')}" for event in trace["events"]]
    urls += [f"{page}/events/{quote(event['id'])}/history" for event in trace["events"] if event["id"] == "ü"]
    channels = client.get(f"{api}/overlays").json()["channels"]
    urls += [f"{api}/overlay?channel={quote(channel['name'], safe='')}" for channel in channels]
    for channel in trace["rewards"]:
        for rule in ("uniform", "causal", "critical_path"):
            urls.append(f"{api}/credit?channel={quote(channel, safe='')}&rule={rule}")
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert "<script>alert(1)</script>" not in response.text or "html" not in response.headers["content-type"]
    for panel in ("analysis", "credit?channel=team", "credit?channel=%3Cx%3E&rule=critical_path"):
        assert client.get(f"{page}/{panel}", headers={"HX-Request": "true"}).status_code == 200, panel


# Lone surrogates -------------------------------------------------------------------------------

def raw_json(trace: dict, marker: str, replacement: str) -> bytes:
    """The trace as JSON text with a placeholder string replaced by raw JSON (a lone surrogate escape)."""
    return json.dumps(trace).replace(json.dumps(marker), replacement).encode()


@pytest.mark.parametrize("where, body, path", [
    ("extra value", lambda: raw_json(with_extra("s", "@@"), "@@", '"a\\ud800"'), "events[0].x"),
    ("nested value", lambda: raw_json(with_extra("s", {"k": ["@@"]}), "@@", '"\\udfff"'), "events[0].x.k[0]"),
    ("extra key", lambda: raw_json(with_extra("s", 1, key="@@"), "@@", '"\\udc00"'), 'events[0]["\\udc00"]'),
    ("agent", lambda: raw_json(with_extra("s", "@@", key="agent"), "@@", '"\\ud800"'), "events[0].agent"),
    ("reward key", lambda: raw_json(make_trace("s", rewards={"@@": 1}), "@@", '"\\ud800"'), 'rewards["\\ud800"]'),
    ("task id", lambda: raw_json(make_trace("s", task_id="@@"), "@@", '"\\ud800"'), "task_id"),
])
def test_a_lone_surrogate_in_a_trace_is_422_naming_the_path(client, where, body, path):
    response = client.post("/api/traces", content=body(), headers=JSON)
    assert response.status_code == 422
    assert errors_of(response)[0][0] == path
    assert "lone surrogate" in errors_of(response)[0][1]
    assert client.get("/ingest-log").status_code == 200 and client.get("/").status_code == 200


def test_a_lone_surrogate_in_a_trace_id_is_422_and_a_pair_is_text(client):
    refused = client.post("/api/traces", content=raw_json(make_trace("@@"), "@@", '"a\\ud800"'), headers=JSON)
    assert refused.status_code == 422 and "trace_id" in refused.json()["error"]
    paired = client.post("/api/traces", content=raw_json(with_extra("pair", "@@"), "@@", '"\\ud83d\\ude00"'),
                         headers=JSON)
    assert paired.status_code == 201
    assert client.get("/api/traces/pair").json()["events"][0]["x"] == "😀"
    assert client.get("/api/ingest-log").json()["items"][1]["status"] == 422


@pytest.fixture
def labelled_trace(client):
    post_json(client, make_trace("lab"))
    return "lab"


@pytest.mark.parametrize("field, raw", [
    ("note", '"a\\ud800b"'),
    ("tags", '["ok", "\\udfff"]'),
    ("paper", '"\\ud800"'),
    ("reviewer", '"ada\\udc00"'),
    ("client_request_id", '"\\ud800"'),
    ("event_id", '"\\ud800"'),
])
def test_a_lone_surrogate_in_a_label_field_is_422_naming_the_field(client, labelled_trace, field, raw):
    body = {"trace_id": "lab", "event_id": "e1", "reviewer": "ada", field: "@@"}
    for path in ("/api/annotations", "/api/annotations/undo"):
        response = client.post(path, content=json.dumps(body).replace('"@@"', raw), headers=JSON)
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field and "lone surrogate" in response.json()["error"]
    assert client.get("/api/annotations").json()["items"] == []


def test_a_lone_surrogate_in_an_imported_label_is_422(client, labelled_trace):
    row = {"trace_id": "lab", "event_id": "e1", "reviewer": "ada", "version": 1, "created_at": "2026-01-01T00:00:00",
           "safety": False, "note": "@@"}
    response = client.post("/api/annotations/import", content=json.dumps([row]).replace('"@@"', '"\\ud800"'),
                           headers=JSON)
    assert response.status_code == 422 and "note" in response.json()["errors"][0]["message"]


# Numbers the store cannot keep ---------------------------------------------------------------------

@pytest.mark.parametrize("trace, path", [
    (lambda: with_extra("n", 2**63, key="t"), "events[0].t"),
    (lambda: with_extra("n", 10**30, key="t"), "events[0].t"),
    (lambda: make_trace("n", costs={"tokens": 2**63, "wall_clock_s": 1}), "costs.tokens"),
    (lambda: make_trace("n", costs={"tokens": 1, "wall_clock_s": 2**64}), "costs.wall_clock_s"),
    (lambda: make_trace("n", costs={"tokens": 1, "wall_clock_s": 1, "messages": 2**70}), "costs.messages"),
])
def test_integers_of_2_63_or_more_in_t_or_costs_are_422_naming_the_path(client, trace, path):
    response = post_json(client, trace())
    assert response.status_code == 422
    assert errors_of(response) == [(path, errors_of(response)[0][1])] and "2**63" in errors_of(response)[0][1]


def test_the_largest_integers_in_t_and_costs_and_any_in_extras_are_kept_exactly(client):
    trace = make_trace("edge", costs={"tokens": 2**63 - 1, "wall_clock_s": 2**63 - 1})
    trace["events"][0]["t"] = 2**63 - 1
    trace["events"][0]["huge"] = [2**200, -2**200]
    assert post_json(client, trace).status_code == 201
    assert json.dumps(client.get("/api/traces/edge").json()) == json.dumps(trace)


@pytest.mark.parametrize("value, path", [
    ("1e400", "events[0].x"), ("-1e400", "events[0].x"), ('{"a": [1, 1e999]}', "events[0].x.a[1]"),
])
def test_a_number_beyond_a_double_anywhere_is_422_not_a_silent_null(client, value, path):
    response = client.post("/api/traces", content=raw_json(with_extra("inf", "@@"), "@@", value), headers=JSON)
    assert response.status_code == 422
    assert errors_of(response)[0][0] == path and "not a valid JSON number" in errors_of(response)[0][1]
    assert stored_ids(client) == []


# Keys given twice ------------------------------------------------------------------------------------

def twice(trace: dict, marker: str, key: str, first) -> bytes:
    """The trace's JSON with `"key": first` written before the key `marker` stands for."""
    return json.dumps(trace).replace(f'"{marker}"', f'"{key}": {json.dumps(first)}, "{key}"', 1).encode()


@pytest.mark.parametrize("body, path", [
    (lambda: twice(make_trace("d", task_id="t"), "task_id", "task_id", "other"), "task_id"),
    (lambda: twice(with_extra("d", "spawn", key="@@"), "@@", "type", "message"), "events[0].type"),
    (lambda: twice(with_extra("d", {"@@": 1}), "@@", "k", 0), "events[0].x.k"),
    (lambda: twice(make_trace("d", costs={"@@": 1, "wall_clock_s": 1}), "@@", "tokens", 5), "costs.tokens"),
    (lambda: twice(make_trace("d", rewards={"@@": 1}), "@@", "team", 2), "rewards.team"),
    (lambda: twice(make_trace("d"), "dst", "dst", "e3"), "edges[0].dst"),
])
def test_a_key_given_twice_in_a_trace_is_422_naming_the_path(client, body, path):
    lines = json.dumps(make_trace("fine")).encode() + b"\n" + body()
    for content_type, data in (("application/json", body()), ("application/x-ndjson", lines)):
        response = client.post("/api/traces", content=data, headers={"Content-Type": content_type})
        assert response.status_code == 422, response.text
        assert (path, "is given more than once in its object (keys must be unique)") in errors_of(response)
    assert stored_ids(client) == []


def test_colons_and_escapes_in_strings_are_not_taken_for_keys(client):
    trace = with_extra("colons", {"k": 'a: "b": {c}:', "url": "http://x:1", "html": "<>"})
    body = json.dumps(trace).replace("http://x:1", "http\\u003a//x\\u003A1").replace("<>", "\\u003c>").encode()
    assert client.post("/api/traces", content=body, headers=JSON).status_code == 201
    assert client.get("/api/traces/colons").json()["events"][0]["x"] == trace["events"][0]["x"]
    hidden = body.replace(b'"trace_id": "colons"', b'"trace_id": "c2", "trace_id": "c3"')
    assert client.post("/api/traces", content=hidden, headers=JSON).status_code == 422


FIXTURES = Path(__file__).resolve().parent / "fixtures"


def first_key_twice(text: str, key: str) -> str:
    """`text` with `"key": "other"` written before the first `"key"` in it."""
    return text.replace(f'"{key}"', f'"{key}": "other", "{key}"', 1)


def test_a_key_given_twice_in_an_exporters_or_importers_document_refuses_it_naming_where(client):
    """An importer would keep the last value without a word: OTLP, Agents SDK and Claude Code documents with a
    key given twice are refused, saying where, on every route in."""
    otlp = first_key_twice(json.dumps(json.loads((FIXTURES / "otlp" / "pydantic_ai_delegation.json").read_text())),
                           "name")
    where = "resourceSpans[0].scopeSpans[0].scope.name: is given more than once in its object (keys must be unique)"
    answer = client.post("/v1/traces", content=otlp, headers=JSON)
    assert answer.status_code == 400 and where in answer.json()["error"]
    assert where in client.get("/api/ingest-log").json()["items"][0]["error"]
    answer = client.post("/api/traces", content=otlp, headers=JSON)
    assert answer.status_code == 422 and where in answer.json()["error"]

    records = json.loads((FIXTURES / "openai_agents" / "agent_as_tool.json").read_text())["data"]
    body = first_key_twice(json.dumps({"data": records}), "trace_id")
    answer = client.post("/v1/traces/ingest", content=body, headers=JSON)
    assert answer.status_code == 400 and "data[0].trace_id: is given more than once" in answer.json()["error"]
    lines = "\n".join(["", json.dumps(records[0]), "", first_key_twice(json.dumps(records[1]), "id")])
    answer = client.post("/api/traces", params={"format": "openai_agents"}, content=lines, headers=JSON)
    assert answer.status_code == 422 and "body: line 4: id: is given more than once" in answer.json()["error"]

    transcript = (FIXTURES / "claude_code" / "inline_sidechains.jsonl").read_text().split("\n")
    transcript[2] = first_key_twice(transcript[2], "uuid")
    files = {"file": ("session.jsonl", "\n".join(transcript).encode(), "application/x-ndjson")}
    answer = client.post("/api/traces", files=files, headers=form_headers(client))
    assert answer.status_code == 422 and "line 3: uuid: is given more than once" in answer.json()["error"]

    session = FIXTURES / "claude_code" / "parallel"
    meta = next((session / "subagents").glob("*.meta.json"))
    files = [("file", ("parallel.jsonl", (FIXTURES / "claude_code" / "parallel.jsonl").read_bytes(), "text/plain")),
             *[("file", (f"parallel/subagents/{part.name}", part.read_bytes(), "text/plain"))
               for part in sorted((session / "subagents").glob("agent-*")) if part != meta],
             ("file", (f"parallel/subagents/{meta.name}", first_key_twice(meta.read_text(), "agentType"), "text/plain"))]
    answer = client.post("/api/traces", files=files, headers=form_headers(client))
    assert answer.status_code == 422 and f"{meta.name}: agentType: is given more than once" in answer.json()["error"]
    assert stored_ids(client) == []


@pytest.mark.parametrize("value, where", [
    ('"\\ud800"', "value.stringValue: holds a lone surrogate"),
    ('{"stringValue": "a", "x": ' + "[" * 600 + "]" * 600 + "}", "value.x[0]×502: nested more than 512"),  # x is 11 down
    ('{"doubleValue": 1e400}', "value.doubleValue: inf is beyond a double"),
], ids=["lone-surrogate", "too-deep", "beyond-a-double"])
def test_an_exporters_batch_that_could_not_be_kept_as_sent_is_400_naming_where(client, value, where):
    """A batch is kept as it came until its trace is built: text no column holds, or nesting deeper than the
    store writes, refuses it (both were 500s)."""
    doc = json.loads((FIXTURES / "otlp" / "pydantic_ai_delegation.json").read_text())
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append({"key": "odd", "value": "@@"})
    body = json.dumps(doc).replace('"@@"', value if value.startswith("{") else '{"stringValue": %s}' % value)
    answer = client.post("/v1/traces", content=body, headers=JSON)
    prefix = "body: resourceSpans[0].scopeSpans[0].spans[0].attributes["
    assert answer.status_code == 400 and answer.json()["error"].startswith(prefix), answer.text
    assert where in answer.json()["error"]
    assert client.get("/api/ingest-log").json()["items"][0]["status"] == 400
    assert stored_ids(client) == []


def test_a_key_given_twice_in_an_imported_label_is_422(client, labelled_trace):
    row = '{"trace_id": "lab", "event_id": "e1", "reviewer": "ada", "version": 1, "note": "a", "note": "b", ' \
          '"created_at": "2026-01-01T00:00:00"}'
    response = client.post("/api/annotations/import", content=f"[{row}]", headers=JSON)
    assert response.status_code == 422 and "note" in response.json()["errors"][0]["message"]


def test_a_key_given_twice_in_a_label_is_422(client, labelled_trace):
    body = '{"trace_id": "lab", "event_id": "e1", "reviewer": "ada", "credit": 1, "credit": -1}'
    response = client.post("/api/annotations", content=body, headers=JSON)
    assert response.status_code == 422 and response.json()["field"] == "credit"


def test_imported_versions_must_be_whole_numbers_a_column_holds(client, labelled_trace):
    for version in (1e400, 2.5, 2**31, "1e3", True):
        row = {"trace_id": "lab", "event_id": "e1", "reviewer": "ada", "version": "@@", "safety": False,
               "created_at": "2026-01-01T00:00:00"}
        body = json.dumps([row]).replace('"@@"', "1e400" if version == 1e400 else json.dumps(version))
        response = client.post("/api/annotations/import", content=body, headers=JSON)
        assert response.status_code == 422 and "version" in response.json()["errors"][0]["message"], version


def test_a_csv_label_import_with_a_short_row_is_refused_not_a_500(client, labelled_trace):
    header = client.get("/api/annotations/export").text.splitlines()[0]
    response = client.post("/api/annotations/import", content=f"{header}\r\nlab,e1\r\n",
                           headers={"Content-Type": "text/csv"})
    assert response.status_code == 422 and "has 2 fields" in response.json()["errors"][0]["message"]
    nul = client.post("/api/annotations/import", content=f"{header}\r\nlab\0,e1\r\n",
                      headers={"Content-Type": "text/csv"})
    assert nul.status_code < 500


# The label form ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("base_version", ["abc", "1.5", "9" * 5000])
def test_a_base_version_that_is_not_a_number_is_422_in_the_form(client, base_version):
    post_json(client, make_trace("lab"))
    headers = form_headers(client)
    client.post("/reviewer", data={"new_name": "ada", "next": "/"}, headers=headers)
    response = client.post("/traces/lab/events/e1/label", data={"base_version": base_version, "credit": "0.5"},
                           headers=headers | {"HX-Target": "label-form"})
    assert response.status_code == 422
    assert "base_version" in response.text and 'id="label-form"' in response.text
    assert client.get("/api/annotations").json()["items"] == []


# The decompressed-size limit holds for the whole request ---------------------------------------------------

LIMIT = 1_000_000


@pytest.fixture
def small_client(tmp_path):
    with TestClient(create_app(Settings(db=tmp_path / "small.duckdb", max_body_bytes=LIMIT)),
                    base_url=BASE_URL) as client:
        yield client


def test_ten_gzip_parts_share_the_decompressed_limit(small_client):
    part = gzip.compress(b" " * (LIMIT // 5))  # each within the limit, ten together twice past it
    files = [("file", (f"p{i}.json.gz", part, "application/gzip")) for i in range(10)]
    response = small_client.post("/api/traces", files=files)
    assert response.status_code == 413 and "together" in response.json()["error"]
    one = small_client.post("/api/traces", files=[("file", ("t.json.gz", gzip.compress(
        json.dumps(make_trace("gz")).encode()), "application/gzip"))])
    assert one.status_code == 201


def test_gzipped_archive_members_share_the_limit_and_gzip_twice_is_refused(small_client):
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for i in range(10):
            zipped.writestr(f"p{i}.json.gz", gzip.compress(b" " * (LIMIT // 5)))
    response = small_client.post("/api/traces", files=[("file", ("all.zip", archive.getvalue(), "application/zip"))])
    assert response.status_code == 413
    twice_gzipped = gzip.compress(gzip.compress(json.dumps(make_trace("gz")).encode()))
    refused = small_client.post("/api/traces", content=twice_gzipped)
    assert refused.status_code == 400 and "gzip inside gzip" in refused.json()["error"]
