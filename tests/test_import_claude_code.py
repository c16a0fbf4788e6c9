"""Claude Code session transcripts -> orchestration traces (IMPORTERS.md §2)."""

import json
from collections import Counter
from pathlib import Path

import pytest
from anchors import anchor

from app.domain.metrics import compute_metrics
from app.domain.validation import validate_trace
from app.ingest.documents import Upload
from app.ingest.importers import cli_telemetry, convert, load_session_dir, subagent_uploads
from app.ingest.importers.claude_code import import_session, looks_like_claude_code
from app.ingest.importers.common import ImportFailed
from app.ingest.importers.otlp_logs import decode_logs_request

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"
PARALLEL = FIXTURES / "parallel.jsonl"
INLINE = FIXTURES / "inline_sidechains.jsonl"
REAL_SESSION = "fa812bfe-b295-4cca-9c2f-fdf01028cb46"
USAGE_FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


def load(path: Path, **kwargs):
    main, subagents, metas = load_session_dir(path)
    return import_session(main, subagents, metas, **kwargs)


def by_agent(trace: dict) -> dict[str, list[dict]]:
    agents: dict[str, list[dict]] = {}
    for event in trace["events"]:
        agents.setdefault(event["agent"], []).append(event)
    return agents


def edges_of(trace: dict, type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in trace["edges"] if e["type"] == type_}


def assert_well_formed(trace: dict) -> None:
    """Valid, ids unique, time-ordered, temporal edges within one agent, costs agreeing with the events."""
    assert validate_trace(trace) == []
    events = trace["events"]
    assert len({e["id"] for e in events}) == len(events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    agent = {e["id"]: e["agent"] for e in events}
    assert all(agent[src] == agent[dst] for src, dst in edges_of(trace, "temporal"))
    metrics = compute_metrics(trace)
    assert metrics["tokens"] == trace["costs"]["tokens"]
    assert metrics["tool_calls"] == trace["costs"]["tool_calls"]
    made_here = ("aggregate", "pre_tool_use_denied")  # no source line of their own
    assert all("line" in e for e in events if e["type"] not in made_here and e.get("kind") not in made_here)


def spec_tokens(lines) -> int:
    """IMPORTERS.md §2: each message.id once (its last line's usage), no <synthetic>, four usage fields."""
    usage = {}
    for message in lines:
        if message.get("model") != "<synthetic>" and isinstance(message.get("usage"), dict):
            usage[message["id"]] = message["usage"]
    return sum(u.get(field, 0) for u in usage.values() for field in USAGE_FIELDS)


def assistant_messages(path: Path, mirrors: bool = False):
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "assistant":
            yield record["message"]
        elif mirrors and record["type"] == "progress" and record["data"].get("type") == "agent_progress":
            inner = record["data"]["message"]
            if inner.get("type") == "assistant":
                yield inner["message"]


# ---- hand-made fixture: two parallel sub-agents, current layout ------------------------------------

@pytest.fixture(scope="module")
def parallel():
    return load(PARALLEL)


def test_parallel_session_is_one_valid_trace(parallel):
    assert parallel.warnings == []
    [trace] = parallel.traces
    assert_well_formed(trace)
    assert trace["trace_id"] == "claude-code-5e55a7e1-0000-4000-8000-00000000cafe"
    assert trace["task_id"] == "quiet-parallel-otter"
    assert (trace["system"], trace["topology"], trace["rewards"]) == ("claude-code 2.1.39", "harness", {})


def test_each_sub_agent_is_its_own_agent_spawned_by_main(parallel):
    [trace] = parallel.traces
    agents = by_agent(trace)
    children = {"Explore#aaa1111": "Explore", "general-purpose#bbb2222": "general-purpose"}
    assert set(agents) == {"main", "user", "Read", "Bash", *children}
    for key, role in children.items():
        own = agents[key]
        assert {e["role"] for e in own} == {role}
        assert {e["agent_id"] for e in own} == {key.split("#")[1]}
        [spawn] = [e for e in trace["events"] if e["type"] == "spawn" and e.get("to") == key]
        assert (spawn["agent"], spawn["role"]) == ("main", role)
        assert (spawn["id"], own[0]["id"]) in edges_of(trace, "spawn")
        [back] = [e for e in own if e["type"] == "return"]
        assert (back["from"], back["to"]) == (key, "main")
        assert (spawn["id"], back["id"]) in edges_of(trace, "tool_dependency")
    decisions = [e for e in agents["main"] if e["type"] == "orchestrator_decision"]
    spawns = [e for e in agents["main"] if e["type"] == "spawn"]
    assert {(decisions[0]["id"], s["id"]) for s in spawns} <= edges_of(trace, "causal")


def test_parallel_returns_meet_in_an_aggregate_into_mains_next_response(parallel):
    [trace] = parallel.traces
    returns = [e for e in trace["events"] if e["type"] == "return"]
    [aggregate] = [e for e in trace["events"] if e["type"] == "aggregate"]
    assert aggregate["agent"] == "main" and aggregate["inputs"] == 2
    assert aggregate["t"] == max(e["t"] for e in returns) == 25.0
    assert {(e["id"], aggregate["id"]) for e in returns} <= edges_of(trace, "aggregate")
    [next_response] = [e for e in trace["events"] if e.get("message_id") == "msg_B"]
    assert next_response["type"] == "orchestrator_decision"
    assert (aggregate["id"], next_response["id"]) in edges_of(trace, "causal")
    assert not edges_of(trace, "return")  # both returns go through the aggregate


def test_parallel_tokens_and_costs_by_hand(parallel):
    [trace] = parallel.traces
    # msg_A 10+100+1000+60 (output grows while streaming: the largest counts), msg_B 20+0+1200+80,
    # msg_C 5+50+1300+12; Explore msg_a1 3+200+0+20 (also mirrored in main: once), msg_a2 2+50+200+30;
    # general-purpose msg_b1 4+300+0+25.
    assert trace["costs"] == {"tokens": 4671, "wall_clock_s": 35.1, "tool_calls": 2, "messages": 6}
    assert compute_metrics(trace)["tokens_by_agent"] == {"main": 3837, "Explore#aaa1111": 505,
                                                          "general-purpose#bbb2222": 329}
    [first] = [e for e in trace["events"] if e.get("message_id") == "msg_A"]
    assert (first["tokens_in"], first["tokens_out"]) == (1110, 60)
    assert Counter(e.get("message_id") for e in trace["events"])["msg_a1"] == 1
    assert trace["metrics"]["turn_duration_s"] == 34.0


def test_tool_calls_results_and_edges(parallel):
    [trace] = parallel.traces
    [call] = [e for e in trace["events"] if e["type"] == "tool_call" and e["tool"] == "Bash"]
    [result] = [e for e in trace["events"] if e["type"] == "tool_result" and e["tool"] == "Bash"]
    assert (call["agent"], call["content_ref"], result["agent"]) == ("main", "toolu_B1", "Bash")
    assert (call["id"], result["id"]) in edges_of(trace, "tool_dependency")
    [last] = [e for e in trace["events"] if e.get("message_id") == "msg_C"]
    assert last["type"] == "message" and (result["id"], last["id"]) in edges_of(trace, "causal")
    [human] = by_agent(trace)["user"]
    assert (human["type"], human["to"]) == ("message", "main")
    assert {(e["uuid"], e["line"]) for e in trace["events"] if e.get("message_id") == "msg_a2"} == \
        {("sa-004", "agent-aaa1111.jsonl:4")}


def test_content_is_kept_unless_the_policy_is_hash():
    hashed = load(PARALLEL, content_policy="hash").traces[0]
    private = json.dumps(hashed)
    for secret in ("Compare the parser", "Summarise parser.py", "Explore parser", "pytest -q", "All tests pass"):
        assert secret not in private
    assert '"content":' not in private
    kept = load(PARALLEL).traces[0]
    assert_well_formed(kept)
    events = {e["id"]: e for e in kept["events"]}
    assert [e["content"] for e in events.values() if e["agent"] == "user"] == \
        ["Compare the parser and the lexer modules."]
    spawn = next(e for e in events.values() if e["type"] == "spawn")
    assert spawn["content"] == {"description": "Explore parser", "prompt": "Summarise parser.py",
                                "subagent_type": "Explore"}  # the Task call's input
    assert next(e for e in events.values() if e["type"] == "tool_call" and e["tool"] == "Bash")["content"] == \
        {"command": "pytest -q", "description": "Run tests"}
    decision = next(e for e in events.values() if e.get("message_id") == "msg_A")
    assert decision["type"] == "orchestrator_decision"
    assert decision["content"]["output"]["role"] == "assistant"  # the response's blocks, over all its lines
    assert [(b["type"], b.get("text") or b.get("input", {}).get("prompt")) for b in
            decision["content"]["output"]["content"]] == [("text", "I'll look at both modules in parallel."),
                                                          ("tool_use", "Summarise parser.py"),
                                                          ("tool_use", "Summarise lexer.py")]
    assert [e.get("content_ref") for e in hashed["events"]] == [e.get("content_ref") for e in kept["events"]]
    assert [{k: v for k, v in e.items() if k != "content"} for e in kept["events"]] == hashed["events"]


def test_a_response_keeps_its_thinking_with_its_text():
    main, subagents, metas = load_session_dir(PARALLEL)
    records = [json.loads(line) for line in main.splitlines() if line.strip()]
    first = next(r for r in records if r.get("uuid") == "a-001")
    thinking = {"type": "thinking", "thinking": "Two modules: read both at once.", "signature": "c2ln"}
    first["message"]["content"].insert(0, thinking)
    kept = import_session("\n".join(json.dumps(r) for r in records), subagents, metas).traces[0]
    decision = next(e for e in kept["events"] if e.get("message_id") == "msg_A")
    assert decision["content"]["output"]["content"][:2] == [
        thinking, {"type": "text", "text": "I'll look at both modules in parallel."}]
    assert "thinking" not in decision  # with the text it belongs to, not beside it


def test_unknown_record_types_warn_and_are_skipped():
    main, subagents, metas = load_session_dir(PARALLEL)
    extra = [{"type": "mystery-record", "uuid": "x-1", "sessionId": "s"},
             {"type": "mystery-record", "uuid": "x-2", "sessionId": "s"},
             {"type": "system", "subtype": "brand_new", "uuid": "x-3", "timestamp": "2026-02-12T10:00:36Z"},
             [1, 2]]
    result = import_session(main + "".join(json.dumps(r) + "\n" for r in extra), subagents, metas)
    assert result.warnings == ["main line 17: unknown record type 'mystery-record', skipped (2 records)",
                               "main line 19: system subtype 'brand_new' not mapped",
                               "main line 20: not a JSON object, skipped"]
    assert_well_formed(result.traces[0])
    assert result.traces[0]["costs"]["wall_clock_s"] == 36.0


def test_a_broken_line_names_its_file_and_line():
    main, subagents, metas = load_session_dir(PARALLEL)
    lines = main.split("\n")
    lines[4] = '{"type": "assistant", "uuid": '
    with pytest.raises(ImportFailed, match=r"^main line 5: not JSON \("):
        import_session("\n".join(lines), subagents, metas)
    broken = dict(subagents)
    broken["agent-aaa1111.jsonl"] = broken["agent-aaa1111.jsonl"].replace('"uuid":"sa-003"', '"uuid":sa-003')
    with pytest.raises(ImportFailed, match=r"^agent-aaa1111\.jsonl line 3: not JSON"):
        import_session(main, broken, metas)


@pytest.mark.parametrize("field", ["parentUuid", "uuid"])
def test_a_sidechain_id_that_is_not_text_names_no_line(field):
    records = [json.loads(line) for line in INLINE.read_text().splitlines() if line.strip()]
    child = next(r for r in records if r.get("isSidechain") is True and r.get("parentUuid"))
    for value in ({}, [], 5):
        child[field] = value
        trace = import_session("\n".join(json.dumps(r) for r in records)).traces[0]
        assert validate_trace(trace) == []


@pytest.mark.parametrize("empty", ["", "\n  \n"])
def test_an_empty_file_is_refused(empty):
    with pytest.raises(ImportFailed, match="^main: empty file"):
        import_session(empty)
    main, subagents, metas = load_session_dir(PARALLEL)
    with pytest.raises(ImportFailed, match=r"^agent-bbb2222\.jsonl: empty file"):
        import_session(main, {**subagents, "agent-bbb2222.jsonl": empty}, metas)


def test_session_id_argument_names_the_trace():
    trace = load(PARALLEL, session_id="given").traces[0]
    assert trace["trace_id"] == "claude-code-given"


def test_stop_hook_and_api_error_are_safety_events():
    main, subagents, metas = load_session_dir(PARALLEL)
    extra = [
        {"type": "system", "subtype": "stop_hook_summary", "uuid": "s-2", "parentUuid": "a-006", "sessionId": "s",
         "timestamp": "2026-02-12T10:00:36Z", "hookErrors": ["boom"], "preventedContinuation": True},
        {"type": "assistant", "uuid": "a-9", "parentUuid": "s-2", "sessionId": "s", "isApiErrorMessage": True,
         "timestamp": "2026-02-12T10:00:37Z", "message": {"model": "<synthetic>", "id": "x", "role": "assistant",
         "content": [{"type": "text", "text": "API Error: 529 overloaded"}], "usage": {"output_tokens": 9}}},
    ]
    trace = import_session(main + "".join(json.dumps(r) + "\n" for r in extra), subagents, metas).traces[0]
    assert_well_formed(trace)
    safety = [e for e in trace["events"] if e["type"] == "safety_event"]
    assert [(e["agent"], e["kind"]) for e in safety] == [("system", "stop_hook"), ("system", "api_error")]
    [guarded] = [e for e in trace["events"] if e.get("message_id") == "msg_C"]
    assert (guarded["id"], safety[0]["id"]) in edges_of(trace, "causal")
    assert trace["costs"]["tokens"] == 4671 and trace["costs"]["messages"] == 6  # synthetic: no tokens


def test_detector():
    records = [json.loads(line) for line in PARALLEL.read_text().splitlines()[:20]]
    assert looks_like_claude_code(records)
    assert not looks_like_claude_code([])
    assert not looks_like_claude_code([{"resourceSpans": []}])
    assert not looks_like_claude_code([{"trace_id": "t", "task_id": "x", "events": [], "edges": []}])
    assert not looks_like_claude_code([{"type": "user", "uuid": "u"}])  # no sessionId


def test_load_session_dir_reads_subagents_metas_and_workflows(tmp_path):
    main, subagents, metas = load_session_dir(PARALLEL)
    assert set(subagents) == {"agent-aaa1111.jsonl", "agent-bbb2222.jsonl"}
    assert metas["agent-aaa1111.meta.json"]["toolUseId"] == "toolu_T1"
    session = tmp_path / "s1.jsonl"
    session.write_text(main)
    workflow = tmp_path / "s1" / "subagents" / "workflows" / "wf_1"
    workflow.mkdir(parents=True)
    (workflow / "agent-ccc3333.jsonl").write_text(subagents["agent-bbb2222.jsonl"])
    assert load_session_dir(session) == (main, {"workflows/wf_1/agent-ccc3333.jsonl":
                                                subagents["agent-bbb2222.jsonl"]}, {})
    (workflow / "agent-ccc3333.meta.json").write_text("{nope")
    with pytest.raises(ImportFailed, match="agent-ccc3333.meta.json: not JSON"):
        load_session_dir(session)


# ---- hand-made fixture: older layout, sub-agent lines inline as sidechain records ------------------

def test_inline_sidechains_become_sub_agents_spawned_by_main():
    result = load(INLINE)
    assert result.warnings == []
    [trace] = result.traces
    assert_well_formed(trace)
    assert trace["task_id"] == "01d1a7e1-0000-4000-8000-00000000beef"  # no slug: the sessionId
    agents = by_agent(trace)
    # The second sidechain carries no agentId: it is named after the Task call it answers.
    for key in ("general-purpose#c0ffee1", "Plan#toolu_S2"):
        [spawn] = [e for e in agents["main"] if e["type"] == "spawn" and e["to"] == key]
        assert (spawn["id"], agents[key][0]["id"]) in edges_of(trace, "spawn")
        [back] = [e for e in agents[key] if e["type"] == "return"]
        assert [(s, d) for s, d in edges_of(trace, "return") if s == back["id"]]
    assert not any(e["type"] == "aggregate" for e in trace["events"])  # one return at a time
    # msg_S3 is inline and mirrored as agent_progress: counted once.
    assert Counter(e.get("message_id") for e in trace["events"])["msg_S3"] == 1
    assert trace["costs"] == {"tokens": 2125, "wall_clock_s": 13.0, "tool_calls": 1, "messages": 6}
    assert [e["kind"] for e in agents["user"] if e["type"] == "human_intervention"] == \
        ["interrupt", "queue_enqueue"]


# ---- the published real transcripts (skipped without ../shared/anchors) ---------------------------

@pytest.fixture(scope="module")
def real():
    folder = anchor("claude_code")
    return folder, load(folder / f"{REAL_SESSION}.jsonl")


def test_real_session_with_subagents(real):
    folder, result = real
    [trace] = result.traces
    assert_well_formed(trace)
    assert trace["trace_id"] == f"claude-code-{REAL_SESSION}"
    assert result.warnings == ["agent-acompact-70d8e7.jsonl: context-compaction helper mapped to agent 'system'"]
    agents = by_agent(trace)
    children = [a for a in agents if "#" in a]
    assert sorted(children) == ["Explore#a93ccab", "Explore#aa84377"]
    first_events = {a: events[0]["id"] for a, events in agents.items()}
    for child in children:
        [spawn] = [e for e in agents["main"] if e["type"] == "spawn" and e["to"] == child]
        assert (spawn["id"], first_events[child]) in edges_of(trace, "spawn")
        assert [e["to"] for e in agents[child] if e["type"] == "return"] == ["main"]
    assert not any("acompact" in a for a in agents)
    assert any(e.get("role") == "compaction" for e in agents["system"])
    assert [e["kind"] for e in trace["events"] if e["type"] == "safety_event"] == ["pre_tool_use_denied"]


def test_real_session_tokens_follow_the_spec(real):
    folder, result = real
    files = [folder / f"{REAL_SESSION}.jsonl", *sorted((folder / REAL_SESSION / "subagents").glob("*.jsonl"))]
    expected = spec_tokens(m for path in files for m in assistant_messages(path))
    assert result.traces[0]["costs"]["tokens"] == expected == 16574416


def test_inline_mirrors_of_a_real_older_session_count_once():
    path = anchor("claude_code") / "subagent.jsonl"
    result = load(path)
    [trace] = result.traces
    assert_well_formed(trace)
    agents = by_agent(trace)
    [spawn] = [e for e in agents["main"] if e["type"] == "spawn"]
    assert spawn["to"] == "Plan#afb92ff"
    assert (spawn["id"], agents["Plan#afb92ff"][0]["id"]) in edges_of(trace, "spawn")
    ids = [e["message_id"] for e in trace["events"] if "message_id" in e]
    assert len(ids) == len(set(ids)) == trace["costs"]["messages"]
    assert trace["costs"]["tokens"] == spec_tokens(assistant_messages(path, mirrors=True))


def test_short_real_session():
    result = load(anchor("claude_code") / "short.jsonl")
    [trace] = result.traces
    assert_well_formed(trace)
    kinds = [e["kind"] for e in trace["events"] if e["type"] == "human_intervention"]
    assert kinds == ["tool_rejected", "tool_rejected", "interrupt"]


# ---- recorded from the real CLI (generators/claude_code_cli.py, offline, scripted model) --------------------

RECORDED = FIXTURES / "2.1.332"
SCENARIOS = {  # scenario -> {Agent tool_use id: (Bash command, the sub-agent's answer)}
    "agent_bash": {"toolu_agent_01": ("echo hi", "hi")},
    "parallel_agents": {"toolu_agent_one": ("echo one", "one"), "toolu_agent_two": ("echo two", "two")},
}


def recorded_session(scenario: str) -> Path:
    [session] = (RECORDED / scenario / "project").glob("*.jsonl")
    return session


def recorded_uploads(scenario: str) -> list[Upload]:
    """The session and its subagents/ files as `orchestrace import` of the session file uploads them."""
    session = recorded_session(scenario)
    return [Upload(str(session), session.read_bytes()), *subagent_uploads(session)]


def scripted_usage(scenario: str) -> dict[str, dict]:
    """message id -> the usage the scripted server reported for it (its model_requests.json)."""
    log = json.loads((RECORDED / scenario / "model_requests.txt").read_text())
    return {f"msg_scripted_{entry['n']:03d}": entry for entry in log}


def otel_trace(scenario: str) -> dict:
    """The same run's OTLP logs, imported as the live /v1/logs route does."""
    docs = [decode_logs_request(p.read_bytes()) for p in sorted((RECORDED / scenario / "telemetry").glob("logs-*.pb"))]
    result, _ = cli_telemetry.import_logs(docs)
    [trace] = result.traces
    return trace


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def recorded(request):
    result = convert(recorded_uploads(request.param))
    return request.param, result


def test_recorded_sessions_import_cleanly(recorded):
    scenario, result = recorded
    assert result.warnings == []
    [trace] = result.traces
    assert_well_formed(trace)
    session = recorded_session(scenario).stem
    assert trace["trace_id"] == f"claude-code-{session}" and trace["system"] == "claude-code 2.1.332"
    assert convert(recorded_uploads(scenario), fmt="claude_code").traces == result.traces
    assert load(recorded_session(scenario)).traces == result.traces
    times = {e["id"]: e["t"] for e in trace["events"]}
    assert [e for e in trace["edges"] if times[e["src"]] > times[e["dst"]]] == []  # none backwards in time


def test_recorded_lanes_spawns_tools_and_returns(recorded):
    scenario, result = recorded
    [trace] = result.traces
    agents = by_agent(trace)
    calls = SCENARIOS[scenario]
    spawns = {e["tool_use_id"]: e for e in agents["main"] if e["type"] == "spawn"}
    assert set(spawns) == set(calls)
    children = {call: spawn["to"] for call, spawn in spawns.items()}
    assert all(child.startswith("general-purpose#a") for child in children.values())
    assert set(agents) == {"main", "user", "Bash", *children.values()}  # main plus one lane per sub-agent
    [prompt] = agents["user"]
    assert (prompt["type"], prompt["to"]) == ("message", "main")  # the queued -p prompt is not an intervention
    decision = next(e for e in agents["main"] if "tokens_in" in e)
    assert decision["type"] == "orchestrator_decision"
    for call, (command, answer) in calls.items():
        spawn, child = spawns[call], children[call]
        assert (spawn["agent"], spawn["tool"], spawn["role"], spawn["background"]) == ("main", "Agent",
                                                                                      "general-purpose", True)
        assert (decision["id"], spawn["id"]) in edges_of(trace, "causal")
        own = agents[child]
        assert (spawn["id"], own[0]["id"]) in edges_of(trace, "spawn")
        [bash] = [e for e in trace["events"] if e["type"] == "tool_call"
                  and e.get("content", {}).get("command") == command]
        assert (bash["agent"], bash["tool"]) == (child, "Bash")
        [output] = [e for e in agents["Bash"] if e["tool_use_id"] == bash["tool_use_id"]]
        assert output["content"] == answer and (bash["id"], output["id"]) in edges_of(trace, "tool_dependency")
        # the Agent call's own result only says the agent was launched in the background: the agent returns
        # with its task notification, after its last response
        [back] = [e for e in own if e["type"] == "return"]
        assert (back["from"], back["to"], back["tool_use_id"], back["status"]) == (child, "main", call, "completed")
        assert back["content"] == answer and back["kind"] == "task_notification"
        assert back is own[-1] and back["t"] > max(e["t"] for e in own[:-1])
        assert (spawn["id"], back["id"]) in edges_of(trace, "tool_dependency")
    assert trace["costs"]["tool_calls"] == len(calls)
    # Each return goes into main's next response: alone by a return edge; notifications that arrive together
    # (as they may, or not, in a parallel run) meet in an aggregate first.
    responses = [e for e in agents["main"] if "tokens_in" in e]
    by_next: dict[str, list[dict]] = {}
    for back in (e for e in trace["events"] if e["type"] == "return"):
        nxt = next(e for e in responses if e["t"] >= back["t"])
        by_next.setdefault(nxt["id"], []).append(back)
    aggregates = {e["id"]: e for e in agents["main"] if e["type"] == "aggregate"}
    assert len(aggregates) == sum(len(group) > 1 for group in by_next.values())
    for nxt, group in by_next.items():
        if len(group) == 1:
            assert {(s, d) for s, d in edges_of(trace, "return") if s == group[0]["id"]} == {(group[0]["id"], nxt)}
            continue
        [aggregate] = [a for a in aggregates.values() if (a["id"], nxt) in edges_of(trace, "causal")]
        assert aggregate["inputs"] == len(group)
        assert {(r["id"], aggregate["id"]) for r in group} <= edges_of(trace, "aggregate")


def test_recorded_tokens_are_what_the_scripted_server_reported(recorded):
    """Each response once, tokens_in = input + cache creation + cache read, tokens_out = output, its blocks the
    scripted answer; the trace's total is the server's."""
    scenario, result = recorded
    [trace] = result.traces
    usage = scripted_usage(scenario)
    responses = {e["message_id"]: e for e in trace["events"] if "message_id" in e}
    assert set(responses) == set(usage) and trace["costs"]["messages"] == len(usage)
    for message_id, entry in usage.items():
        event, given = responses[message_id], entry["usage"]
        assert (event["tokens_in"], event["tokens_out"]) == (
            given["input_tokens"] + given["cache_creation_input_tokens"] + given["cache_read_input_tokens"],
            given["output_tokens"])
        assert event["content"]["output"]["content"] == entry["answer"]
    assert trace["costs"]["tokens"] == sum(sum(entry["usage"].values()) for entry in usage.values())
    assert trace["metrics"]["cache_read_input_tokens"] == sum(e["usage"]["cache_read_input_tokens"]
                                                              for e in usage.values())


def test_recorded_transcript_and_the_same_runs_otel_logs_agree(recorded):
    """The CLI's transcript and its OpenTelemetry logs of the same run: same agents, spawns, tools per lane,
    returns and tokens."""
    scenario, result = recorded
    [trace] = result.traces
    otel = otel_trace(scenario)
    assert otel["trace_id"] == trace["trace_id"].replace("claude-code-", "claude-code-otel-")
    assert {e["agent"] for e in otel["events"]} == {e["agent"] for e in trace["events"]}

    assert otel_gist(otel) == otel_gist(trace)
    if len(SCENARIOS[scenario]) == 1:  # one sub-agent: the spawn is the same Agent call in both
        assert spawn_calls(otel) == spawn_calls(trace)


def otel_gist(trace: dict) -> dict:
    """What a transcript's trace and an OTel-logs trace of one run both say."""
    events = trace["events"]
    return {
        "spawns": sorted((e["agent"], e["to"], e["role"]) for e in events if e["type"] == "spawn"),
        "tools": sorted((e["agent"], e["tool"], e["tool_use_id"]) for e in events if e["type"] == "tool_call"),
        "results": sorted((e["agent"], e["tool_use_id"]) for e in events if e["type"] == "tool_result"),
        "returns": sorted((e["agent"], e["to"]) for e in events if e["type"] == "return"),
        "calls": sorted((e["agent"], e["tokens_in"], e["tokens_out"]) for e in events if "tokens_in" in e),
        "tokens": trace["costs"]["tokens"], "tool_calls": trace["costs"]["tool_calls"],
        "messages": trace["costs"]["messages"],
    }


def spawn_calls(trace: dict) -> list[tuple[str, str, str]]:
    return sorted((e["agent"], e["to"], e["tool_use_id"]) for e in trace["events"] if e["type"] == "spawn")


@pytest.mark.xfail(strict=True, reason="cli_telemetry.import_logs pairs each Agent call with the next agent_id "
                   "first seen after it; in this run the second sub-agent started first, so the OTel trace swaps "
                   "their tool_use ids (Claude Code 2.1.332's logs name no sub-agent on the Agent call's records; "
                   "the transcript's meta toolUseId does)")
def test_recorded_parallel_otel_logs_pair_each_sub_agent_with_its_own_agent_call():
    trace = convert(recorded_uploads("parallel_agents")).traces[0]
    assert spawn_calls(otel_trace("parallel_agents")) == spawn_calls(trace)
