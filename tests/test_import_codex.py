"""OpenAI Codex CLI session rollouts -> orchestration traces (app/ingest/importers/codex.py).

The fixtures in tests/fixtures/codex/<version>/ were written by Codex itself (tests/fixtures/generators/codex_cli.py
ran `codex exec` offline against a scripted Responses API server): a main agent spawning two sub-agents with the v1
and with the v2 multi-agent tools, and a single agent using exec_command, apply_patch, an MCP tool and a failing
command, whose context is compacted. Each folder's expected.json is the generator's record of the run, taken
from the model server's side, not from the rollouts."""

import copy
import json
import random
from pathlib import Path

import pytest

from app.domain.metrics import compute_metrics
from app.domain.validation import validate_trace
from app.ingest.importers.codex import import_rollouts, is_state_db, looks_like_codex
from app.ingest.importers.common import ImportFailed

VERSION = "0.171.0"
FIXTURES = Path(__file__).parent / "fixtures" / "codex" / VERSION
SCENARIOS = ("multi_agent_v1", "multi_agent_v2", "single_agent")
TEAMS = ("multi_agent_v1", "multi_agent_v2")
SUB_AGENTS = ("alpha", "beta")
STATE_DB = "state_5.sqlite"


def rollout_files(scenario: str) -> dict[str, str]:
    paths = sorted((FIXTURES / scenario).glob("rollout-*.jsonl"))
    return {path.name: path.read_text(encoding="utf-8") for path in paths}


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def meta(text: str) -> dict:
    return next(r["payload"] for r in records(text) if r["type"] == "session_meta")


def expected(scenario: str) -> dict:
    return json.loads((FIXTURES / scenario / "expected.json").read_text(encoding="utf-8"))


def load(scenario: str, **kwargs):
    return import_rollouts(rollout_files(scenario), FIXTURES / scenario / STATE_DB, **kwargs)


def by_agent(trace: dict) -> dict[str, list[dict]]:
    agents: dict[str, list[dict]] = {}
    for event in trace["events"]:
        agents.setdefault(event["agent"], []).append(event)
    return agents


def edges_of(trace: dict, type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in trace["edges"] if e["type"] == type_}


def model_calls(trace: dict, agent: str) -> list[dict]:
    return [e for e in trace["events"] if e["agent"] == agent and e.get("to") == "scripted-model"]


def children(scenario: str) -> dict[str, dict]:
    """Sub-agent name (alpha/beta, from its task) -> its session_meta, from the rollouts themselves."""
    found = {}
    for text in rollout_files(scenario).values():
        payload = meta(text)
        if payload.get("parent_thread_id"):
            task = next(r["payload"] for r in records(text) if r["type"] == "response_item"
                        and r["payload"].get("type") in ("message", "agent_message")
                        and "SUBTASK" in json.dumps(r["payload"].get("content")))
            name = next(n for n in SUB_AGENTS if f"SUBTASK {n}:" in json.dumps(task["content"]))
            found[name] = payload
    return found


def child_key(scenario: str, name: str) -> str:
    payload = children(scenario)[name]
    return f"subagent#{payload['agent_path'].removeprefix('/root/')}" if payload.get("agent_path") \
        else f"subagent#{payload['agent_nickname']}"


@pytest.fixture(scope="module")
def imported():
    return {scenario: load(scenario) for scenario in SCENARIOS}


# ---- every fixture -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_recording_is_one_valid_trace_without_warnings(imported, scenario):
    result = imported[scenario]
    assert result.warnings == []
    [trace] = result.traces
    assert validate_trace(trace) == []
    events = trace["events"]
    assert len({e["id"] for e in events}) == len(events)
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    agent = {e["id"]: e["agent"] for e in events}
    assert all(agent[src] == agent[dst] for src, dst in edges_of(trace, "temporal"))
    metrics = compute_metrics(trace)
    assert (metrics["tokens"], metrics["tool_calls"]) == (trace["costs"]["tokens"], trace["costs"]["tool_calls"])
    assert all("line" in e for e in events if e["type"] != "aggregate")
    [root] = [meta(text) for text in rollout_files(scenario).values() if not meta(text).get("parent_thread_id")]
    assert (trace["trace_id"], trace["task_id"]) == (f"codex-{root['id']}", root["id"])
    assert (trace["system"], trace["topology"], trace["rewards"]) == (f"codex {VERSION}", "harness", {})
    assert trace["metrics"]["threads"] == len(rollout_files(scenario))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tokens_are_what_codex_reported(imported, scenario):
    """costs.tokens = the sum over threads of Codex's last running total; each agent's calls add up to its thread's
    total; and both equal the usage the scripted server reported, call by call."""
    [trace] = imported[scenario].traces
    totals, cached = {}, {}
    for text in rollout_files(scenario).values():
        counts = [r["payload"]["info"] for r in records(text)
                  if r["type"] == "event_msg" and r["payload"].get("type") == "token_count" and r["payload"]["info"]]
        totals[meta(text)["id"]] = counts[-1]["total_token_usage"]["total_tokens"]
        cached[meta(text)["id"]] = counts[-1]["total_token_usage"]["cached_input_tokens"]
    assert trace["costs"]["tokens"] == sum(totals.values())
    run = expected(scenario)
    assert trace["costs"]["tokens"] == sum(r["usage"]["total_tokens"] for r in run["model_requests"])
    assert trace["costs"]["messages"] == len(run["model_requests"])
    assert trace["metrics"]["cached_input_tokens"] == sum(cached.values())
    for thread_id, total in totals.items():
        thread_calls = [e for e in trace["events"] if e.get("thread_id") == thread_id and "tokens_in" in e]
        assert sum(e["tokens_in"] + e["tokens_out"] for e in thread_calls) == total
    root = trace["task_id"]
    printed = sum(r["usage"]["total_tokens"] - r["usage"]["input_tokens_details"]["cached_tokens"]
                  for r in run["model_requests"] if r["thread_id"] == root)
    assert run["tokens_used_printed"] == printed  # what `codex exec` printed: the root thread, cached input left out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_model_calls_keep_what_the_model_said(imported, scenario):
    [trace] = imported[scenario].traces
    answered = [r["items"] for r in expected(scenario)["model_requests"]]
    calls = [e for e in trace["events"] if e.get("to") == "scripted-model"]
    said = [[i.get("name") or i["type"] for i in e["content"]["output"]] for e in calls]
    assert sorted(map(tuple, said)) == sorted(map(tuple, answered))
    for call in calls:
        reasons = any(i["type"] == "reasoning" for i in call["content"]["output"])
        asks = any(i["type"] not in ("reasoning", "message") for i in call["content"]["output"])
        spawner = any(e["type"] == "spawn" and e["agent"] == call["agent"] for e in trace["events"])
        assert (call["type"] == "orchestrator_decision") == (reasons or (asks and spawner))


# ---- the team: one lane per agent, spawns and returns -------------------------------------------------------


@pytest.mark.parametrize("scenario", TEAMS)
def test_each_sub_agent_is_a_lane_spawned_by_main(imported, scenario):
    [trace] = imported[scenario].traces
    agents = by_agent(trace)
    keys = {name: child_key(scenario, name) for name in SUB_AGENTS}
    assert {a for a, own in agents.items() if any(e.get("to") == "scripted-model" for e in own)} == {"main",
                                                                                                      *keys.values()}
    assert set(agents) - {"main", "user", *keys.values()} <= {"exec_command", "wait_agent", "close_agent"}
    spawns = [e for e in agents["main"] if e["type"] == "spawn"]
    assert [s["to"] for s in spawns] == [keys[name] for name in SUB_AGENTS]  # in the order main asked
    for name, spawn in zip(SUB_AGENTS, spawns):
        key, payload = keys[name], children(scenario)[name]
        own = agents[key]
        assert (spawn["child_thread_id"], spawn["depth"], spawn["role"]) == (payload["id"], 1, "subagent")
        assert spawn.get("nickname") == payload["agent_nickname"]
        assert spawn.get("agent_path") == payload.get("agent_path")
        assert f"SUBTASK {name}:" in spawn["content"]["message"]
        assert (spawn["id"], own[0]["id"]) in edges_of(trace, "spawn")
        assert own[0]["type"] == "orchestrator_decision" and own[0]["t"] > spawn["t"]
        [back] = [e for e in own if e["type"] == "return"]
        assert (back["from"], back["to"]) == (key, "main")
        assert back["content"] == f"{name}: the command printed hi-{name}."
        assert back["t"] == max(e["t"] for e in own)


@pytest.mark.parametrize("scenario", TEAMS)
def test_tools_run_on_the_calling_lane(imported, scenario):
    [trace] = imported[scenario].traces
    for name in SUB_AGENTS:
        key = child_key(scenario, name)
        [call] = [e for e in trace["events"] if e["type"] == "tool_call" and e["tool"] == "exec_command"
                  and e["content"] == {"cmd": f"echo hi-{name}"}]
        assert call["agent"] == key
        [result] = [e for e in trace["events"] if e["type"] == "tool_result" and e["call_id"] == call["call_id"]]
        assert result["agent"] == "exec_command" and f"hi-{name}\n" in result["content"]
        assert "error" not in result
        assert (call["id"], result["id"]) in edges_of(trace, "tool_dependency")
        [decision] = [e for e in model_calls(trace, key) if (e["id"], call["id"]) in edges_of(trace, "causal")]
        assert decision["type"] == "orchestrator_decision"
        later = [e for e in model_calls(trace, key) if e["t"] > result["t"]]
        assert (result["id"], later[0]["id"]) in edges_of(trace, "causal")
    waits = [e for e in trace["events"] if e["type"] == "tool_call" and e["tool"] == "wait_agent"]
    assert waits and {e["agent"] for e in waits} == {"main"}


def first_reading(scenario: str) -> dict[str, tuple[str, int]]:
    """For each sub-agent thread, where main's model could first read its result, from main's rollout: the line of a
    wait_agent output naming it completed ("wait"), or of a <subagent_notification> or FINAL_ANSWER agent_message
    about it ("message")."""
    kids = {payload["id"]: payload for payload in children(scenario).values()}
    name, text = next((n, t) for n, t in rollout_files(scenario).items() if not meta(t).get("parent_thread_id"))
    waits, found = set(), {}
    for number, line in enumerate(text.splitlines(), 1):
        item = json.loads(line)["payload"]
        kind = item.get("type")
        if kind == "function_call" and item["name"] == "wait_agent":
            waits.add(item["call_id"])
        named = []
        if kind == "function_call_output" and item["call_id"] in waits:
            status = json.loads(item["output"]).get("status", {})
            named = [(kid, "wait") for kid in status if "completed" in status[kid]]
        elif kind == "message" and item["role"] == "user" and "<subagent_notification>" in json.dumps(item):
            note = json.loads(item["content"][0]["text"].split("\n", 1)[1].rsplit("\n", 1)[0])
            named = [(note["agent_path"], "message")] if "completed" in note["status"] else []
        elif kind == "agent_message" and "FINAL_ANSWER" in item["content"][0]["text"]:
            named = [(kid, "message") for kid, payload in kids.items() if payload.get("agent_path") == item["author"]]
        for kid, how in named:
            found.setdefault(kid, (how, number, name))
    return found


@pytest.mark.parametrize("scenario", TEAMS)
def test_returns_land_where_main_first_reads_them_and_meet_in_an_aggregate(imported, scenario):
    """The generator holds main's first wait until both sub-agents are done, so both results reach main together:
    v1 in one wait_agent result, v2 as two FINAL_ANSWER messages before main's next model call."""
    [trace] = imported[scenario].traces
    readings = first_reading(scenario)
    assert set(readings) == {payload["id"] for payload in children(scenario).values()}
    targets = set()
    for how, number, name in readings.values():
        if how == "wait":
            [target] = [e for e in trace["events"] if e.get("line") == f"{name}:{number}"]
            assert (target["type"], target["tool"]) == ("tool_result", "wait_agent")
        else:
            target = next(e for e in model_calls(trace, "main") if int(e["line"].rsplit(":", 1)[1]) > number)
        targets.add(target["id"])
    [target] = targets
    assert {how for how, _, _ in readings.values()} == {"wait" if scenario == "multi_agent_v1" else "message"}
    returns = [e for e in trace["events"] if e["type"] == "return"]
    [aggregate] = [e for e in trace["events"] if e["type"] == "aggregate"]
    assert (aggregate["agent"], aggregate["role"], aggregate["inputs"]) == ("main", "lead", 2)
    assert aggregate["t"] == max(e["t"] for e in returns)
    assert {(e["id"], aggregate["id"]) for e in returns} <= edges_of(trace, "aggregate")
    assert (aggregate["id"], target) in edges_of(trace, "causal")
    assert not edges_of(trace, "return") and not [e for e in trace["events"] if e["type"] == "despawn"]


def test_v1_main_closes_both_sub_agents_after_they_returned(imported):
    [trace] = imported["multi_agent_v1"].traces
    returns = [e for e in trace["events"] if e["type"] == "return"]
    closes = [e for e in trace["events"] if e["type"] == "tool_call" and e["tool"] == "close_agent"]
    assert sorted(c["content"]["target"] for c in closes) == sorted(r["thread_id"] for r in returns)
    assert {c["agent"] for c in closes} == {"main"} and min(c["t"] for c in closes) > max(r["t"] for r in returns)


def test_v2_final_answer_follows_both_results(imported):
    [trace] = imported["multi_agent_v2"].traces
    answer = model_calls(trace, "main")[-1]
    assert answer["content"]["output"][0]["content"][0]["text"].startswith("Both sub-agents ran their command")
    assert answer["t"] > max(e["t"] for e in trace["events"] if e["type"] == "return")


def test_v2_spawn_edges_come_from_the_state_database_when_the_rollouts_do_not_name_parents():
    """Children whose session_meta names no parent, nickname or path: the state database's thread_spawn_edges and
    threads rows put them back under their parent, by path or bytes."""
    stripped = {}
    for name, text in rollout_files("multi_agent_v2").items():
        lines = []
        for record in records(text):
            if record["type"] == "session_meta" and record["payload"].get("parent_thread_id"):
                payload = record["payload"]
                for key in ("parent_thread_id", "agent_nickname", "agent_path"):
                    payload.pop(key)
                payload["source"] = "exec"
            lines.append(json.dumps(record))
        stripped[name] = "\n".join(lines) + "\n"
    alone = import_rollouts(stripped)
    assert len(alone.traces) == 3
    spawns = [e for t in alone.traces for e in t["events"] if e["type"] == "spawn"]
    assert len(spawns) == 2 and not [e for e in spawns if "to" in e]
    main = next(n for n, text in rollout_files("multi_agent_v2").items() if not meta(text).get("parent_thread_id"))
    assert alone.warnings == [(f"{main}: 2 spawn_agent call(s) whose sub-agent's rollout is not in the upload (first "
                               "call_spawn_alpha); their spawns name no agent")]
    [whole] = load("multi_agent_v2").traces
    database = FIXTURES / "multi_agent_v2" / STATE_DB
    for db in (database, str(database), database.read_bytes()):
        [trace] = import_rollouts(stripped, db, state_db_name=STATE_DB).traces
        assert [(e["type"], e["agent"], e.get("to")) for e in trace["events"]] == \
               [(e["type"], e["agent"], e.get("to")) for e in whole["events"]]
        assert trace["edges"] == whole["edges"]


# ---- the single agent: tools, errors, compaction ------------------------------------------------------------


def test_single_agent_tools_keep_their_arguments_and_outputs(imported):
    [trace] = imported["single_agent"].traces
    calls = [e for e in trace["events"] if e["type"] == "tool_call"]
    assert [(c["agent"], c["tool"]) for c in calls] == [("main", "exec_command"), ("main", "apply_patch"),
                                                       ("main", "mcp__fixture__lookup"), ("main", "exec_command")]
    results = {e["call_id"]: e for e in trace["events"] if e["type"] == "tool_result"}
    echo, patch, lookup, missing = calls
    assert echo["content"] == {"cmd": "echo hi"} and results[echo["call_id"]]["content"].endswith("Output:\nhi\n")
    assert patch["content"].startswith("*** Begin Patch\n*** Add File: notes.txt")
    assert "A notes.txt" in results[patch["call_id"]]["content"]
    assert (lookup["namespace"], lookup["content"]) == ("mcp__fixture", {"key": "colour"})
    assert {"type": "input_text", "text": "colour = blue"} in results[lookup["call_id"]]["content"]
    assert results[missing["call_id"]]["error"] is True
    assert "No such file or directory" in results[missing["call_id"]]["content"]
    assert [r for r in results.values() if r.get("error")] == [results[missing["call_id"]]]
    assert trace["costs"]["tool_calls"] == 4


def test_compaction_is_an_event_after_the_call_that_summarised(imported):
    [trace] = imported["single_agent"].traces
    [compacted] = [r["payload"] for r in records(next(iter(rollout_files("single_agent").values())))
                   if r["type"] == "compacted"]
    [event] = [e for e in trace["events"] if e.get("kind") == "compaction" and e["type"] == "message"
               and e["agent"] == "system"]
    assert (event["from"], event["to"], event["role"]) == ("system", "main", "compaction")
    assert event["content"] == compacted["message"]
    assert event["replacement_items"] == len(compacted["replacement_history"])
    [summary] = [e for e in model_calls(trace, "main") if e.get("kind") == "compaction"]
    assert compacted["message"].endswith(summary["content"]["output"][0]["content"][0]["text"])
    assert summary["tokens_in"] == 5200 and (summary["id"], event["id"]) in edges_of(trace, "causal")
    answer = model_calls(trace, "main")[-1]
    assert answer["t"] > event["t"] and (event["id"], answer["id"]) in edges_of(trace, "message")


def test_the_users_prompt_is_the_one_user_message(imported):
    for scenario in SCENARIOS:
        [trace] = imported[scenario].traces
        [prompt] = [e for e in trace["events"] if e["agent"] == "user"]
        assert prompt["content"] == expected(scenario)["command"][-1]
        assert (prompt["id"], model_calls(trace, "main")[0]["id"]) in edges_of(trace, "message")


def test_the_hash_policy_keeps_only_references(imported):
    for scenario in SCENARIOS:
        [kept] = imported[scenario].traces
        [hashed] = load(scenario, content_policy="hash").traces
        assert not [e for e in hashed["events"] if "content" in e]
        assert [e.get("content_ref") for e in hashed["events"]] == [e.get("content_ref") for e in kept["events"]]


# ---- detection -------------------------------------------------------------------------------------------------


def test_codex_rollouts_are_recognised_from_their_content():
    for scenario in SCENARIOS:
        for text in rollout_files(scenario).values():
            assert looks_like_codex(records(text)[:20])
        assert is_state_db((FIXTURES / scenario / STATE_DB).read_bytes())
    claude = Path(__file__).parent / "fixtures" / "claude_code" / "parallel.jsonl"
    assert not looks_like_codex(records(claude.read_text())[:20])
    assert not looks_like_codex([{"trace_id": "t", "events": []}])
    assert not looks_like_codex([{"resourceSpans": []}])
    assert not looks_like_codex([])
    assert not is_state_db(b'{"timestamp": 1}')


# ---- what is refused and what is only a warning ----------------------------------------------------------------


def one_rollout() -> tuple[str, list[str]]:
    name, text = next(iter(rollout_files("single_agent").items()))
    return name, text.splitlines()


def test_a_line_that_is_not_json_is_refused_naming_file_and_line():
    name, lines = one_rollout()
    lines[5] = '{"timestamp": "2026-11-27T05:33:34Z", "type": '
    with pytest.raises(ImportFailed, match=rf"^{name} line 6: not JSON"):
        import_rollouts({name: "\n".join(lines)})


def test_a_key_given_twice_is_refused_naming_its_line():
    name, lines = one_rollout()
    lines[2] = lines[2][:-1] + ', "type": "event_msg"}'
    with pytest.raises(ImportFailed, match=rf"^{name} line 3: "):
        import_rollouts({name: "\n".join(lines)})


@pytest.mark.parametrize("text, where", [
    ("", r"x\.jsonl: empty file"),
    ("\n\n", r"x\.jsonl: empty file"),
    ('{"timestamp": "2026-01-01T00:00:00Z", "type": "event_msg", "payload": {}}\n',
     r"x\.jsonl: no session_meta record"),
    ('{"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"cwd": "/"}}\n',
     r"x\.jsonl line 1: session_meta without a thread id"),
    ('{"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta", "payload": {"id": "t1"}}\n',
     r"x\.jsonl: no model call, tool call or message to import"),
    (b"\xff\xfe not text", r"x\.jsonl: not UTF-8 text"),
])
def test_files_that_are_not_rollouts_are_refused_naming_the_file(text, where):
    with pytest.raises(ImportFailed, match=rf"^{where}"):
        import_rollouts({"sessions/2026/01/01/x.jsonl": text})


def test_a_state_database_that_is_not_one_is_refused_naming_it(tmp_path):
    files = rollout_files("multi_agent_v2")
    with pytest.raises(ImportFailed, match=r"^state_5\.sqlite: not a SQLite database"):
        import_rollouts(files, b"not sqlite", state_db_name="state_5.sqlite")
    (tmp_path / "state_9.sqlite").write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(ImportFailed, match=r"^state_9\.sqlite: "):
        import_rollouts(files, tmp_path / "state_9.sqlite")
    with pytest.raises(ImportFailed, match=r"^missing\.sqlite: cannot read"):
        import_rollouts(files, tmp_path / "missing.sqlite")


def test_parents_in_a_cycle_are_refused(tmp_path):
    texts = {}
    for own, parent in (("a", "b"), ("b", "a")):
        session = {"timestamp": "2026-01-01T00:00:00Z", "type": "session_meta",
                   "payload": {"id": own, "source": {"subagent": {"thread_spawn": {"parent_thread_id": parent}}}}}
        texts[f"rollout-{own}.jsonl"] = json.dumps(session) + "\n"
    with pytest.raises(ImportFailed, match=r"^rollout-a\.jsonl line 1: parent thread b is part of a cycle"):
        import_rollouts(texts)


def test_a_record_type_the_importer_does_not_know_is_a_warning():
    name, lines = one_rollout()
    [before] = import_rollouts({name: "\n".join(lines)}).traces
    stamp = json.loads(lines[19])["timestamp"]  # between records 20 and 21: changes no time span
    future = [json.dumps({"timestamp": stamp, "type": "hologram", "payload": {"x": 1}}),
              json.dumps({"timestamp": stamp, "type": "hologram", "payload": {"x": 2}}),
              json.dumps({"timestamp": stamp, "type": "response_item", "payload": {"type": "teleport_call"}}),
              json.dumps({"timestamp": "yesterday", "type": "event_msg", "payload": {"type": "token_count"}})]
    result = import_rollouts({name: "\n".join(lines[:20] + future + lines[20:])})
    [after] = result.traces
    assert result.warnings == [f"{name} line 21: unknown record type 'hologram', skipped (2 records)",
                               f"{name} line 23: response item type 'teleport_call' not mapped, skipped",
                               f"{name} line 24: record without a valid timestamp, skipped"]
    assert [(e["type"], e["agent"]) for e in after["events"]] == [(e["type"], e["agent"]) for e in before["events"]]
    assert after["costs"] == before["costs"]


def test_the_same_thread_twice_and_a_sub_agent_without_its_parent_are_warnings():
    files = rollout_files("multi_agent_v1")
    names = list(files)
    main = next(n for n in names if not meta(files[n]).get("parent_thread_id"))
    twice = import_rollouts({**files, "copy/" + main: files[main]})
    assert len(twice.traces) == 1 and twice.warnings == [
        f"{main}: thread {meta(files[main])['id']} is also in {main}; this file is skipped"]
    orphan = next(n for n in names if n != main)
    alone = import_rollouts({orphan: files[orphan]})
    [trace] = alone.traces
    assert alone.warnings == [(f"{orphan}: parent thread {meta(files[main])['id']} is not in the upload; the "
                               "thread is imported as a trace of its own")]
    assert validate_trace(trace) == []


def mutations(value):
    """Values of other shapes than a record field holds."""
    return [None, 7, "text", [], {}, [value], {"type": value}, True, -1]


def test_records_of_unexpected_shape_never_raise_anything_but_import_failed():
    """Every field of every record of the team recordings, replaced by values of other shapes: the import succeeds
    or refuses the upload naming a file, never raises anything else."""
    rng = random.Random(29)
    files = rollout_files("multi_agent_v1")
    targets = []
    for name, text in files.items():
        for number, record in enumerate(records(text)):
            payload = record.get("payload")
            targets += [(name, number, None)] + [(name, number, key) for key in payload]
    for name, number, key in rng.sample(targets, 400):
        lines = files[name].splitlines()
        record = json.loads(lines[number])
        replacement = rng.choice(mutations(record["payload"] if key is None else record["payload"][key]))
        broken = copy.deepcopy(record)
        if key is None:
            broken["payload"] = replacement
        else:
            broken["payload"][key] = replacement
        lines[number] = json.dumps(broken)
        try:
            import_rollouts({**files, name: "\n".join(lines)}, FIXTURES / "multi_agent_v1" / STATE_DB)
        except ImportFailed as exc:
            assert str(exc).startswith(tuple(files)), str(exc)


def test_two_sessions_in_one_upload_are_two_traces(imported):
    result = import_rollouts({**rollout_files("single_agent"), **rollout_files("multi_agent_v2")})
    assert result.warnings == []
    assert [t["trace_id"] for t in result.traces] == sorted(
        (imported[s].traces[0]["trace_id"] for s in ("single_agent", "multi_agent_v2")),
        key=lambda trace_id: next(meta(text)["timestamp"] for s in SCENARIOS for text in rollout_files(s).values()
                                  if f"codex-{meta(text)['id']}" == trace_id))
    for trace in result.traces:
        scenario = next(s for s in SCENARIOS if imported[s].traces[0]["trace_id"] == trace["trace_id"])
        assert trace == imported[scenario].traces[0] or scenario == "multi_agent_v2"  # v2 read here without its db
        assert trace["costs"] == imported[scenario].traces[0]["costs"]


def test_a_codex_home_on_disk_gives_its_rollouts_and_state_database(tmp_path):
    """session_files finds what `orchestrace import <CODEX_HOME or a folder below it>` reads; state_db_bytes reads
    the database with its write-ahead log, as Codex leaves it while it runs."""
    import sqlite3

    from app.ingest.importers.codex import session_files, session_groups, state_db_bytes

    home = tmp_path / ".codex"
    day = home / "sessions" / "2026" / "11" / "27"
    day.mkdir(parents=True)
    for name, text in rollout_files("multi_agent_v2").items():
        (day / name).write_text(text, encoding="utf-8")
    live = home / "state_5.sqlite"
    live.write_bytes((FIXTURES / "multi_agent_v2" / STATE_DB).read_bytes())
    (home / "state_4.sqlite").write_bytes(b"not a database, but older")
    writer = sqlite3.connect(live)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("INSERT INTO thread_spawn_edges VALUES ('parent-x', 'child-x', 'open')")
    writer.commit()  # the edge is in state_5.sqlite-wal while the writer is open
    try:
        for folder in (home, home / "sessions", day):
            rollouts, database = session_files(folder)
            assert [p.name for p in rollouts] == sorted(rollout_files("multi_agent_v2")) and database == live
        data = state_db_bytes(live)
        assert is_state_db(data) and b"child-x" in data
        [trace] = import_rollouts({p.name: p.read_bytes() for p in rollouts}, data, state_db_name=live.name).traces
        assert trace == load("multi_agent_v2").traces[0]
    finally:
        writer.close()
    assert session_files(tmp_path / "elsewhere")[1] is None
    (day / "rollout-broken.jsonl").write_text("not json\n", encoding="utf-8")
    for scenario in ("single_agent", "multi_agent_v1"):
        for name, text in rollout_files(scenario).items():
            (day / name).write_text(text, encoding="utf-8")
    groups = session_groups(sorted(day.glob("rollout-*.jsonl")))
    expected_groups = {frozenset(rollout_files(s)) for s in SCENARIOS} | {frozenset({"rollout-broken.jsonl"})}
    assert {frozenset(p.name for p in group) for group in groups} == expected_groups
    with pytest.raises(ImportFailed, match=r"^state_4\.sqlite: "):
        state_db_bytes(home / "state_4.sqlite")


def test_an_aborted_sub_agent_despawns_and_an_api_error_is_a_safety_event():
    """Derived from the v1 recording: one sub-agent's turn ends in turn_aborted instead of task_complete, and main's
    rollout carries an error event before its last model call."""
    files = rollout_files("multi_agent_v1")
    main = next(n for n, text in files.items() if not meta(text).get("parent_thread_id"))
    child = next(n for n in files if n != main)
    lines = files[child].splitlines()
    [end] = [k for k, line in enumerate(lines) if '"type":"task_complete"' in line]
    aborted = json.loads(lines[end])
    aborted["payload"] = {"type": "turn_aborted", "reason": "interrupted", "turn_id": aborted["payload"]["turn_id"]}
    lines[end] = json.dumps(aborted)
    main_lines = files[main].splitlines()
    last_call = max(k for k, line in enumerate(main_lines) if '"role":"assistant"' in line)
    stamp = json.loads(main_lines[last_call - 1])["timestamp"]
    error = {"timestamp": stamp, "type": "event_msg", "payload": {"type": "error", "message": "stream disconnected"}}
    main_lines.insert(last_call - 1, json.dumps(error))
    result = import_rollouts({**files, child: "\n".join(lines), main: "\n".join(main_lines)})
    [trace] = result.traces
    assert validate_trace(trace) == []
    key = next(e["agent"] for e in trace["events"] if e.get("line", "").startswith(child + ":"))
    [despawn] = [e for e in trace["events"] if e["type"] == "despawn"]
    assert (despawn["agent"], despawn["to"], despawn["kind"], despawn["reason"]) == (key, "main", "aborted",
                                                                                     "interrupted")
    assert not [e for e in trace["events"] if e["type"] == "return" and e["agent"] == key]
    [safety] = [e for e in trace["events"] if e["type"] == "safety_event"]
    assert (safety["agent"], safety["kind"], safety["content"]) == ("system", "api_error", "stream disconnected")
    [(_, guarded)] = [(s, d) for s, d in edges_of(trace, "safety_flow") if s == safety["id"]]
    assert guarded == model_calls(trace, "main")[-1]["id"]
