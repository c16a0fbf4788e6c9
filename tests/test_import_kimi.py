"""Kimi CLI session folders -> orchestration traces (app/ingest/importers/kimi.py).

The fixture in tests/fixtures/kimi/<version>/session/ was written by kimi-cli itself
(tests/fixtures/generators/kimi_cli.py ran `python -m kimi_cli.cli --print` offline against a scripted Responses
API server): the main agent calls `Agent` twice in one step, each sub-agent runs `Shell` (`echo hi-<name>`) and
answers (the harness then asks it once for a longer summary), and the main agent answers. expected.json is the
generator's record of the run from the model server's side."""

import json
from pathlib import Path

import pytest

from app.domain.validation import validate_trace
from app.ingest.importers.common import ImportFailed
from app.ingest.importers.kimi import import_session, looks_like_kimi

VERSION = "1.52.0"
FIXTURE = Path(__file__).parent / "fixtures" / "kimi" / VERSION
SESSION = FIXTURE / "session"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text())
SUB_AGENTS = {"aac2a765f": "alpha", "ab4f52dd4": "beta"}


def wire() -> str:
    return (SESSION / "wire.jsonl").read_text(encoding="utf-8")


def subagents() -> dict[str, str]:
    return {path.name: (path / "wire.jsonl").read_text(encoding="utf-8")
            for path in sorted((SESSION / "subagents").iterdir())}


def imported(policy="keep", subs=None):
    result = import_session(wire(), (SESSION / "context.jsonl").read_text(encoding="utf-8"),
                            subagents() if subs is None else subs, policy, session_id=SESSION.name)
    assert len(result.traces) == 1
    return result


def test_detects_kimi_wires_and_not_others():
    assert looks_like_kimi([json.loads(line) for line in wire().splitlines()])
    for text in subagents().values():
        assert looks_like_kimi([json.loads(line) for line in text.splitlines()])
    assert not looks_like_kimi([{"type": "session_meta", "payload": {"id": "x"}}])
    assert not looks_like_kimi([])


def test_valid_trace_one_lane_per_agent():
    result = imported()
    trace = result.traces[0]
    assert result.warnings == []
    assert validate_trace(trace) == []
    lanes = {e["agent"] for e in trace["events"] if e["type"] not in ("tool_result",)} - {"user", "system"}
    assert lanes == {"main"} | {f"coder#{agent_id}" for agent_id in SUB_AGENTS}
    assert trace["task_id"] == SESSION.name and trace["topology"] == "harness"


def test_spawn_and_return_pairs_in_order():
    trace = imported().traces[0]
    events = {e["id"]: e for e in trace["events"]}
    spawns = [e for e in trace["events"] if e["type"] == "spawn"]
    returns = [e for e in trace["events"] if e["type"] == "return"]
    assert [e["to"] for e in spawns] == [f"coder#{a}" for a in SUB_AGENTS]
    assert [e["agent"] for e in returns] == [f"coder#{a}" for a in SUB_AGENTS]
    assert all(e["agent"] == "main" and e["tool"] == "Agent" for e in spawns)
    spawn_edges = [(events[x["src"]], events[x["dst"]]) for x in trace["edges"] if x["type"] == "spawn"]
    assert [(s["to"], d["agent"]) for s, d in spawn_edges] == [(s["to"], s["to"]) for s in spawns]
    for spawn, ret in zip(spawns, returns):
        assert spawn["t"] < ret["t"] and ret["to"] == "main"
        assert f"[summary]\n{SUB_AGENTS[spawn['to'].split('#')[1]]} ran echo" in ret["content"]
    aggregate = next(e for e in trace["events"] if e["type"] == "aggregate")
    assert {x["src"] for x in trace["edges"] if x["type"] == "aggregate" and x["dst"] == aggregate["id"]} \
        == {e["id"] for e in returns}
    decision = next(e for e in trace["events"] if e["type"] == "orchestrator_decision")
    assert decision["agent"] == "main"


def test_tools_on_the_calling_lane():
    trace = imported().traces[0]
    events = {e["id"]: e for e in trace["events"]}
    calls = [e for e in trace["events"] if e["type"] == "tool_call"]
    assert sorted((e["agent"], e["content"]["command"]) for e in calls) == sorted(
        (f"coder#{a}", f"echo hi-{name}") for a, name in SUB_AGENTS.items())
    for x in trace["edges"]:
        if x["type"] == "tool_dependency":
            call, result = events[x["src"]], events[x["dst"]]
            assert result["type"] == "tool_result" and result["tool"] == "Shell" == call["tool"]
            assert result["content"]["output"] == f"hi-{SUB_AGENTS[call['agent'].split('#')[1]]}\n"
    assert trace["costs"]["tool_calls"] == 2


def test_tokens_as_the_wire_reported_counted_once():
    trace = imported().traces[0]
    per_agent = {}
    for e in trace["events"]:
        if "tokens_in" in e:
            name = "main" if e["agent"] == "main" else SUB_AGENTS[e["agent"].split("#")[1]]
            tin, tout = per_agent.get(name, (0, 0))
            per_agent[name] = (tin + e["tokens_in"], tout + e["tokens_out"])
    assert per_agent == {name: (v["input"], v["output"]) for name, v in EXPECTED["tokens_per_agent"].items()}
    assert trace["costs"]["tokens"] == sum(v["input"] + v["output"] for v in EXPECTED["tokens_per_agent"].values())
    assert trace["costs"]["messages"] == sum(EXPECTED["requests_per_agent"].values())


def test_missing_subagent_folder_reads_the_copies_with_a_warning():
    full = imported().traces[0]
    result = imported(subs={})
    assert any("aac2a765f" in w and "no folder" in w for w in result.warnings)
    trace = result.traces[0]
    assert validate_trace(trace) == []
    assert trace["costs"]["tokens"] == full["costs"]["tokens"]
    assert [e["type"] for e in trace["events"]] == [e["type"] for e in full["events"]]


def test_content_kept_and_none_under_hash():
    kept = imported().traces[0]
    hashed = imported("hash").traces[0]
    assert any(e.get("content") == {"command": "echo hi-alpha"} for e in kept["events"])
    assert next(e for e in kept["events"] if e["agent"] == "user")["content"] == EXPECTED["prompt"]
    assert all("content" not in e for e in hashed["events"])
    assert [e.get("content_ref") for e in hashed["events"]] == [e.get("content_ref") for e in kept["events"]]


@pytest.mark.parametrize("line, mangle", [(3, lambda s: "{not json"),
                                          (5, lambda s: json.dumps({"timestamp": 1.0, "message": 7}))])
def test_bad_input_refused_naming_file_and_line(line, mangle):
    lines = wire().splitlines()
    lines[line - 1] = mangle(lines[line - 1])
    with pytest.raises(ImportFailed, match=rf"wire\.jsonl:{line}:"):
        import_session("\n".join(lines), None, subagents(), "keep")
    subs = subagents()
    sub_lines = subs["aac2a765f"].splitlines()
    sub_lines[line - 1] = mangle(sub_lines[line - 1])
    subs["aac2a765f"] = "\n".join(sub_lines)
    with pytest.raises(ImportFailed, match=rf"subagents/aac2a765f/wire\.jsonl:{line}:"):
        import_session(wire(), None, subs, "keep")


def test_empty_wire_refused():
    with pytest.raises(ImportFailed, match="wire.jsonl"):
        import_session("", None, {}, "keep")


def test_record_of_unforeseen_shape_refused_naming_line():
    lines = wire().splitlines()
    record = json.loads(lines[3])
    del record["message"]["payload"]["function"]
    lines[3] = json.dumps(record)
    with pytest.raises(ImportFailed, match=r"wire\.jsonl:4: record not as Kimi writes it"):
        import_session("\n".join(lines), None, subagents(), "keep")
