"""The trace page's find box asks GET /api/traces/{id}/search: agents, roles, tools and event ids containing the
text, exact and prefix matches first, counted, each with its first event in time order."""

from conftest import make_trace, post_json

EVENTS = [
    {"id": "start", "t": 0, "type": "orchestrator_decision", "agent": "lead", "role": "planner"},
    {"id": "w-late", "t": 5, "type": "message", "agent": "writer", "role": "author", "from": "writer", "to": "lead"},
    {"id": "rw-1", "t": 1, "type": "message", "agent": "rewriter", "role": "author", "from": "rewriter", "to": "lead"},
    {"id": "w-early", "t": 2, "type": "tool_call", "agent": "writer", "role": "author", "tool": "grep"},
    {"id": "g-1", "t": 3, "type": "tool_result", "agent": "grep", "tool": "grep"},
    {"id": "p1", "t": 4, "type": "message", "agent": "100%_done", "from": "100%_done", "to": "lead"},
    {"id": "p2", "t": 6, "type": "message", "agent": "100x1done", "from": "100x1done", "to": "lead"},
    {"id": "WRITER-NOTE", "t": 7, "type": "aggregate", "agent": "lead"},
]


def stored(client, trace_id="t-find"):
    response = post_json(client, make_trace(trace_id, events=EVENTS, edges=[]))
    assert response.status_code == 201, response.text
    return trace_id


def search(client, q, **params):
    response = client.get("/api/traces/t-find/search", params={"q": q, **params})
    assert response.status_code == 200, response.text
    return [(item["kind"], item["value"], item["events"], item["first_event"]) for item in response.json()["items"]]


def test_prefix_matches_come_before_substring_matches_case_insensitively(client):
    stored(client)
    assert search(client, "WRI") == [("agent", "writer", 2, "w-early"), ("event", "WRITER-NOTE", 1, "WRITER-NOTE"),
                                     ("agent", "rewriter", 1, "rw-1")]


def test_an_exact_match_comes_first_and_every_kind_is_found(client):
    stored(client)
    # the tool answering calls has a lane but is no agent (team members only): found as a tool, from its
    # first event in time order, not in trace order
    assert search(client, "grep") == [("tool", "grep", 2, "w-early")]
    assert search(client, "author") == [("role", "author", 3, "rw-1")]
    assert search(client, "w-late") == [("event", "w-late", 1, "w-late")]


def test_the_limit_bounds_the_answer(client):
    stored(client)
    assert len(search(client, "e")) > 3
    assert len(search(client, "e", limit=3)) == 3
    assert client.get("/api/traces/t-find/search", params={"q": "e", "limit": 0}).status_code == 422
    assert client.get("/api/traces/t-find/search", params={"q": "e", "limit": 101}).status_code == 422


def test_percent_and_underscore_are_matched_literally(client):
    stored(client)
    assert search(client, "100%") == [("agent", "100%_done", 1, "p1")]
    assert search(client, "%_d") == [("agent", "100%_done", 1, "p1")]
    assert search(client, "x_") == []
    assert search(client, "nobody") == []


def test_an_unknown_trace_is_404_and_an_empty_text_is_422(client):
    stored(client)
    assert client.get("/api/traces/nope/search", params={"q": "a"}).status_code == 404
    assert client.get("/api/traces/t-find/search", params={"q": ""}).status_code == 422
    assert client.get("/api/traces/t-find/search").status_code == 422


def test_other_traces_are_not_searched(client):
    stored(client)
    stored(client, "t-other")
    assert search(client, "writer")[0] == ("agent", "writer", 2, "w-early")
