"""The structural diff of two runs (GET /api/diff, /diff): agents matched by name or by their place in the spawn
tree, lanes aligned step by step, the first divergence; on generated pairs with a known change, and on two real
Claude Code runs whose sub-agents have generated ids."""

import copy
import json

import pytest
from conftest import post_json

from app.domain.diff import align, diff_traces
from app.domain.generate import generate_swarm
from app.domain.validation import validate_trace


def base(trace_id: str = "run-a", seed: int = 3) -> dict:
    trace = generate_swarm(6, 37, seed=seed)
    trace["trace_id"] = trace_id
    return trace


def ops_of(diff: dict, agent: str) -> list[str]:
    return [op["op"] for op in next(lane for lane in diff["lanes"] if lane["agent"] == agent)["ops"]]


def every_op(diff: dict) -> list[str]:
    return [op["op"] for lane in diff["lanes"] for op in lane["ops"]]


def event(trace: dict, id_: str) -> dict:
    return next(e for e in trace["events"] if e["id"] == id_)


def test_a_run_against_itself_is_the_same_everywhere():
    a = base()
    diff = diff_traces(a, copy.deepcopy(a) | {"trace_id": "run-b"})
    assert diff["a"] == "run-a" and diff["b"] == "run-b"
    assert diff["summary"]["identical"] and diff["summary"]["similarity"] == 1.0
    assert set(every_op(diff)) == {"same"}
    assert diff["first_divergence"] == {"a": None, "b": None}
    assert diff["agents"]["only_a"] == diff["agents"]["only_b"] == []
    assert all(pair["by"] == "name" for pair in diff["agents"]["both"])


def test_an_extra_agent_is_only_in_b_and_its_spawn_is_the_first_divergence():
    a = base()
    b = copy.deepcopy(a) | {"trace_id": "run-b"}
    spawner = next(e for e in a["events"] if e["type"] == "spawn")
    t = spawner["t"] + 0.001
    b["events"] += [
        {"id": "x-spawn", "t": t, "type": "spawn", "agent": spawner["agent"], "to": "auditor-9", "role": "auditor"},
        {"id": "x-call", "t": t + 1, "type": "tool_call", "agent": "auditor-9", "role": "auditor", "tool": "web.search"},
        {"id": "x-back", "t": t + 2, "type": "return", "agent": "auditor-9", "role": "auditor",
         "to": spawner["agent"]},
    ]
    b["edges"] += [{"src": spawner["id"], "dst": "x-spawn", "type": "causal"},
                   {"src": "x-spawn", "dst": "x-call", "type": "spawn"},
                   {"src": "x-call", "dst": "x-back", "type": "causal"}]
    assert validate_trace(b) == []
    diff = diff_traces(a, b)
    assert diff["agents"]["only_b"] == ["auditor-9"] and diff["agents"]["only_a"] == []
    assert ops_of(diff, "auditor-9") == ["only_b", "only_b"]  # the call and the return
    assert ops_of(diff, spawner["agent"]).count("only_b") == 1
    assert diff["first_divergence"] == {"a": None, "b": "x-spawn"}
    assert diff["summary"]["steps"]["only_b"] == 3 and diff["summary"]["steps"]["changed"] == 0
    lanes = [lane["agent"] for lane in diff["lanes"]]
    assert lanes.index(spawner["agent"]) < lanes.index("auditor-9")  # in b's spawn-tree order, under its spawner


def test_a_changed_tool_is_changed_and_nothing_else_differs():
    a = base()
    b = copy.deepcopy(a) | {"trace_id": "run-b"}
    call = next(e for e in b["events"] if e["type"] == "tool_call")
    call["tool"] = "shell.rm"
    diff = diff_traces(a, b)
    changed = [(lane["agent"], op) for lane in diff["lanes"] for op in lane["ops"] if op["op"] != "same"]
    assert changed == [(call["agent"], {"op": "changed", "a": call["id"], "b": call["id"]})]
    assert diff["first_divergence"] == {"a": call["id"], "b": call["id"]}
    assert not diff["summary"]["identical"]


def test_a_reordered_handoff_diverges_at_the_earlier_of_the_two():
    a = base()
    lead = a["events"][0]["agent"]
    t = max(e["t"] for e in a["events"]) + 1
    handoffs = [{"id": "h1", "t": t, "type": "message", "agent": lead, "to": "manager-1"},
                {"id": "h2", "t": t + 1, "type": "message", "agent": lead, "to": "user"}]
    a["events"] += handoffs
    b = copy.deepcopy(a) | {"trace_id": "run-b"}
    event(b, "h1")["t"], event(b, "h2")["t"] = t + 1, t  # the same two handoffs, the other way round
    diff = diff_traces(a, b)
    lead_ops = next(lane for lane in diff["lanes"] if lane["agent"] == lead)["ops"]
    moved = [op for op in lead_ops if op["a"] in ("h1", "h2") or op["b"] in ("h1", "h2")]
    assert [op["op"] for op in moved].count("same") == 1 and len(moved) == 3  # one kept, the other on either side
    assert diff["first_divergence"] == next({"a": op["a"], "b": op["b"]} for op in moved if op["op"] != "same")
    assert set(every_op(diff)) - {"same"} == {"only_a", "only_b"}


def test_agents_with_generated_ids_match_by_their_place_in_the_spawn_tree():
    a = base()
    b = copy.deepcopy(a) | {"trace_id": "run-b"}
    lead = a["events"][0]["agent"]
    renamed = {agent: f"agent-{k:04x}" for k, agent in enumerate(sorted({e["agent"] for e in a["events"]} - {lead}))}
    for e in b["events"]:
        e["agent"] = renamed.get(e["agent"], e["agent"])
        if isinstance(e.get("to"), str):
            e["to"] = renamed.get(e["to"], e["to"])
    diff = diff_traces(a, b)
    by_tree = {pair["a"]: pair["b"] for pair in diff["agents"]["both"] if pair["by"] == "tree"}
    assert len(by_tree) == 5 and all(renamed[agent] == other for agent, other in by_tree.items())
    assert diff["agents"]["only_a"] == diff["agents"]["only_b"] == []
    assert set(every_op(diff)) == {"same"}  # targets compare through the matching, not by name


def test_siblings_of_one_role_match_in_their_order():
    a = base()
    b = copy.deepcopy(a) | {"trace_id": "run-b"}
    for e in b["events"]:  # every agent but the root gets a new id, keeping its role
        if e["agent"] != a["events"][0]["agent"]:
            e["agent"] = "x-" + e["agent"]
        if isinstance(e.get("to"), str) and e["to"] != a["events"][0]["agent"] and e["to"] != "user":
            e["to"] = "x-" + e["to"]
    diff = diff_traces(a, b)
    pairs = [(p["a"], p["b"]) for p in diff["agents"]["both"] if p["by"] == "tree"]
    assert pairs and all(pb == "x-" + pa for pa, pb in pairs)


def test_alignment_keeps_the_longest_common_steps_and_pairs_same_kinds_as_changed():
    left = [("spawn", None, "w"), ("tool_call", "search", None), ("tool_call", "read", None), ("return", None, "u")]
    right = [("spawn", None, "w"), ("tool_call", "write", None), ("message", None, "v"), ("return", None, "u")]
    assert align(left, right) == [("same", 0, 0), ("changed", 1, 1), ("only_a", 2, None), ("only_b", None, 2),
                                  ("same", 3, 3)]
    assert align([], right) == [("only_b", None, j) for j in range(4)]


@pytest.fixture(scope="module")
def claude_code_runs():
    from test_import_claude_code import convert, recorded_uploads

    return [convert(recorded_uploads(scenario)).traces[0] for scenario in ("agent_bash", "parallel_agents")]


def test_two_real_claude_code_runs_match_their_generated_sub_agents(claude_code_runs):
    """Recorded from the real CLI: one sub-agent in the first run, two in the second, each with an id the CLI
    generated. The first sub-agents match by place; the second one and its spawn are only in B."""
    a, b = claude_code_runs
    diff = diff_traces(a, b)
    [tree_pair] = [p for p in diff["agents"]["both"] if p["by"] == "tree"]
    assert tree_pair["a"] != tree_pair["b"] and tree_pair["a"].startswith("general-purpose#")
    [extra] = diff["agents"]["only_b"]
    assert extra.startswith("general-purpose#") and extra != tree_pair["b"]
    spawn_of_extra = next(e["id"] for e in b["events"] if e["type"] == "spawn" and e.get("to") == extra)
    assert diff["first_divergence"] == {"a": None, "b": spawn_of_extra}
    assert ops_of(diff, tree_pair["a"]) and set(ops_of(diff, tree_pair["a"])) == {"same"}


def test_the_api_answers_the_diff_and_names_a_missing_trace(client):
    a, b = base(), base("run-b", seed=4)
    assert post_json(client, [a, b]).status_code == 201
    response = client.get("/api/diff", params={"a": "run-a", "b": "run-b"})
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"a", "b", "agents", "lanes", "first_divergence", "summary"}
    assert body == json.loads(json.dumps(diff_traces(a, b)))
    for lane in body["lanes"]:
        assert lane["agent"] and all(set(op) == {"op", "a", "b"} for op in lane["ops"])
    missing = client.get("/api/diff", params={"a": "run-a", "b": "nope"})
    assert missing.status_code == 404 and "b: no trace with id 'nope'" in missing.json()["error"]
    assert client.get("/api/diff", params={"a": "run-a"}).status_code == 422


def test_the_page_escapes_names_and_sends_htmx_its_body_alone(client):
    a = base()
    a["events"][1]["agent"] = a["events"][1]["agent"]
    b = copy.deepcopy(a) | {"trace_id": "run-b"}
    evil = "<img src=x onerror=alert(1)>"
    call = next(e for e in b["events"] if e["type"] == "tool_call")
    call["tool"] = evil
    assert post_json(client, [a, b]).status_code == 201
    page = client.get("/diff", params={"a": "run-a", "b": "run-b"})
    assert page.status_code == 200 and "<html" in page.text
    assert evil not in page.text and "&lt;img src=x" in page.text
    assert "First divergence" in page.text and 'id="divergence-row"' in page.text
    fragment = client.get("/diff", params={"a": "run-a", "b": "run-b"}, headers={"HX-Request": "true"})
    assert fragment.status_code == 200 and "<html" not in fragment.text and 'id="diff-view"' in fragment.text
    assert "rewards A · B" in fragment.text
    blind = client.get("/diff", params={"a": "run-a", "b": "run-b", "rewards": "hidden"}, headers={"HX-Request": "true"})
    assert "rewards A · B" not in blind.text and 'id="diff-view"' in blind.text
    assert client.get("/diff", params={"a": "run-a", "b": "gone"}).status_code == 404


def test_the_trace_page_offers_other_runs_of_its_task_to_compare_with(client):
    runs = [base(f"run-{k}", seed=k) | {"task_id": "task-1"} for k in range(3)] + [base("other") | {"task_id": "t2"}]
    assert post_json(client, runs).status_code == 201
    page = client.get("/traces/run-0").text
    assert 'action="/diff"' in page and 'name="b"' in page
    assert '<option value="run-1">' in page and '<option value="run-2">' in page and 'value="other"' not in page
