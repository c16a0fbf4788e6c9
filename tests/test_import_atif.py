"""ATIF (Harbor's Agent Trajectory Interchange Format): the fixtures harbor's own code wrote
(tests/fixtures/generators/atif_harbor.py) import to the team their scenario had (expected.json, written from the
scenario, not from our importer), with tokens counted once; every stored trace exports ATIF-v1.8 that harbor's
models validate; an ATIF import exported and imported again keeps its agents, steps and tokens; bad input is
refused naming where."""

import copy
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from imported import edges, one, only_trace
from test_bad_input import odd_trace
from test_validation import valid_traces

from app.domain.atif_export import to_atif
from app.domain.validation import validate_trace
from app.ingest.importers import load_session_dir
from app.ingest.importers.atif import import_atif, looks_like_atif, referenced_paths
from app.ingest.importers.claude_code import import_session
from app.ingest.importers.common import ImportFailed
from app.ingest.importers.openai_agents import import_agents
from app.ingest.importers.otlp import import_otlp
from app.ingest.importers.otlp_protobuf import decode_request

pytestmark = pytest.mark.heavy

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ATIF = FIXTURES / "atif"
EXPECTED = json.loads((ATIF / "expected.json").read_text())
SCENARIOS = ("team_v1_8", "qwen_code_v1_7")
SAMPLES = sorted((Path(__file__).resolve().parents[1] / "sample_traces").glob("*.json"))
HARBOR_VERSION = "0.25.0"  # the version that wrote the fixtures, and whose models judge our exports


def harbor_models():
    """harbor's ATIF model and validator, or a skip saying how to get them."""
    try:
        import harbor
        from harbor.models.trajectories import Trajectory
        from harbor.utils.trajectory_validator import TrajectoryValidator
    except ImportError:
        pytest.skip("harbor is not installed: `.venv/bin/pip install --no-deps --ignore-requires-python "
                    f"harbor=={HARBOR_VERSION}` (its ATIF models need only pydantic; its wheel asks for Python 3.12)")
    assert harbor.__version__ == HARBOR_VERSION, f"harbor {harbor.__version__}; the tests expect {HARBOR_VERSION}"
    return Trajectory, TrajectoryValidator


def assert_harbor_valid(document: dict) -> None:
    """harbor's own judgement of an ATIF document: its pydantic models, then its validator."""
    trajectory, validator_class = harbor_models()
    assert document["schema_version"] == "ATIF-v1.8"
    trajectory.model_validate(document)
    validator = validator_class()
    assert validator.validate(document), validator.get_errors()


def files(scenario: str) -> tuple[list[dict], list[str]]:
    names = EXPECTED[scenario]["files"]
    return [json.loads((ATIF / scenario / name).read_text()) for name in names], names


def imported(scenario: str, policy: str = "keep"):
    docs, names = files(scenario)
    return import_atif(docs, policy, names)


def lane(expected: dict) -> str:
    """The agent id the importer's docstring names for a sub-agent: `<role>#<trajectory_id>`."""
    return f"{expected['role']}#{expected['trajectory_id']}"


def event_tokens(event: dict) -> int:
    return event.get("tokens_in", 0) + event.get("tokens_out", 0) + event.get("tokens", 0)


def structure(trace: dict) -> dict:
    """What a round trip keeps: agents, their steps in time order, tokens, edges, rewards and the task."""
    return {
        "agents": sorted({e["agent"] for e in trace["events"] if e["type"] != "tool_result"}),
        "events": [(e["id"], round(e["t"], 6), e["type"], e["agent"], e.get("to"), e.get("tool"), event_tokens(e))
                   for e in trace["events"]],
        "edges": sorted((e["src"], e["dst"], e["type"]) for e in trace["edges"]),
        "costs": {key: trace["costs"][key] for key in ("tokens", "tool_calls", "messages")},
        "rewards": trace["rewards"],
        "task_id": trace["task_id"],
        "trace_id": trace["trace_id"],
    }


# Detection --------------------------------------------------------------------------------------------------

def test_atif_is_recognised_from_its_schema_version_and_nothing_else_is():
    for scenario in SCENARIOS:
        for doc in files(scenario)[0]:
            assert looks_like_atif([doc])
    assert not looks_like_atif([])
    assert not looks_like_atif([{"schema_version": "1.8", "steps": []}])
    assert not looks_like_atif([{"schema_version": "ATIF-v1.8"}, {"trace_id": "x"}])
    others = [json.loads((FIXTURES / "otlp" / "pydantic_ai_delegation.json").read_text()),
              json.loads((FIXTURES / "openai_agents" / "agent_as_tool.json").read_text()),
              *(json.loads(path.read_text()) for path in SAMPLES)]
    for doc in others:
        assert not looks_like_atif(doc if isinstance(doc, list) else [doc])
    lines = [json.loads(line) for line in (FIXTURES / "claude_code" / "parallel.jsonl").read_text().splitlines()
             if line.strip()]
    assert not looks_like_atif(lines)


def test_the_files_a_trajectory_names_are_listed_to_read_alongside_it():
    docs, names = files("team_v1_8")
    assert referenced_paths(docs[0]) == [names[1]]
    assert referenced_paths(docs[1]) == []
    assert referenced_paths({"continued_trajectory_ref": "trajectory.cont-1.json", "steps": "odd"}) == [
        "trajectory.cont-1.json"]
    assert referenced_paths(["not", "a", "trajectory"]) == []


# The fixtures harbor wrote ------------------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_harbor_fixture_imports_to_its_team(scenario):
    expected = EXPECTED[scenario]
    result = imported(scenario)
    assert result.warnings == []
    trace = only_trace(result)
    root, subs = expected["root"]["agent"], expected["subagents"]
    acting = {e["agent"] for e in trace["events"] if e["type"] != "tool_result"} - {"user"}
    assert acting == {root, *(lane(sub) for sub in subs)}  # one lane per agent
    assert trace["trace_id"] == "atif-" + expected["root"]["session_id"]
    assert trace["task_id"] == expected["task_id"]
    assert trace["rewards"] == expected["rewards"]
    assert trace["topology"] == "centralized"
    by_id = {e["id"]: e for e in trace["events"]}
    order = [e["id"] for e in trace["events"]]

    # spawn and return pairs, in order: each sub-agent runs between its spawn and its return
    spawns = [e for e in trace["events"] if e["type"] == "spawn"]
    returns = [e for e in trace["events"] if e["type"] == "return"]
    assert [(e["agent"], e["to"]) for e in spawns] == [(root, lane(sub)) for sub in subs]
    assert [(e["agent"], e["to"]) for e in returns] == [(lane(sub), root) for sub in subs]
    assert [e["type"] for e in trace["events"] if e["type"] in ("spawn", "return")] == ["spawn", "return"] * len(subs)
    for sub, spawn, returned in zip(subs, spawns, returns):
        own = [e["id"] for e in trace["events"] if e["agent"] == lane(sub)]
        assert order.index(spawn["id"]) < order.index(own[0]) and own[-1] == returned["id"]
        assert (spawn["id"], own[0]) in edges(trace, "spawn")
        assert spawn["tool_call_id"] == sub["spawned_by_call"]
        decision = one(src for src, dst in edges(trace, "causal") if dst == spawn["id"])
        assert by_id[decision]["type"] == "orchestrator_decision" and by_id[decision]["agent"] == root
        after = one(dst for src, dst in edges(trace, "return") if src == returned["id"])
        assert by_id[after]["agent"] == root and order.index(after) > order.index(returned["id"])
        prompt = one(e for e in trace["events"] if e["type"] == "message" and e.get("to") == lane(sub))
        assert prompt["agent"] == root and prompt["from"] == root  # the spawner prompts its sub-agent

    # tools on the calling lane, answered by the tool
    calls = [e for e in trace["events"] if e["type"] == "tool_call"]
    assert sorted((e["agent"], e["tool"]) for e in calls) == sorted(
        (lane(sub), tool) for sub in subs for tool in sub["tools"])
    for call in calls:
        result = one(by_id[dst] for src, dst in edges(trace, "tool_dependency") if src == call["id"])
        assert result["type"] == "tool_result" and result["agent"] == result["tool"] == call["tool"]
        assert isinstance(call["content"], dict) and result["content"]

    # tokens counted once: the root reports the team's total, which is not added to the steps'
    assert trace["costs"]["tokens"] == expected["step_tokens"] == sum(map(event_tokens, trace["events"]))
    assert trace["metrics"]["reported_total_tokens"] == expected["root_reported_tokens"]
    assert trace["costs"]["messages"] == expected["llm_calls"]
    assert trace["costs"]["tool_calls"] == sum(len(sub["tools"]) for sub in subs)
    if "cached_tokens" in expected:
        assert trace["metrics"]["cache_read_input_tokens"] == expected["cached_tokens"]


def test_the_harbor_converters_total_matches_what_it_told_its_agent_context():
    """Harbor's Qwen Code converter folds the sub-agents into the root's totals and reports that total to the
    trial: the trace counts the same tokens, once."""
    trace = only_trace(imported("qwen_code_v1_7"))
    expected = EXPECTED["qwen_code_v1_7"]
    reported_input = sum(e.get("tokens_in", 0) for e in trace["events"])
    assert reported_input == expected["context_input_tokens"]
    assert trace["costs"]["tokens"] == expected["root_reported_tokens"]


def test_the_fixture_keeps_what_each_step_said_and_hash_keeps_none():
    trace = only_trace(imported("team_v1_8"))
    decision = next(e for e in trace["events"] if e["type"] == "orchestrator_decision")
    parts = decision["content"]["output"]["parts"]
    assert [part["type"] for part in parts] == ["reasoning", "text", "tool_call"]
    spawn = next(e for e in trace["events"] if e["type"] == "spawn")
    assert spawn["content"] == {"agent": "researcher", "task": files("team_v1_8")[0][0]["subagent_trajectories"][0][
        "steps"][0]["message"]}
    returned = next(e for e in trace["events"] if e["type"] == "return")
    assert returned["content"].startswith("Regulation (EU) 2023/1542")
    hashed = only_trace(imported("team_v1_8", "hash"))
    assert not any("content" in e for e in hashed["events"])
    assert [e.get("content_ref") for e in hashed["events"]] == [e.get("content_ref") for e in trace["events"]]


def test_a_missing_referenced_file_is_a_warning_naming_it_and_the_spawn_stays():
    docs, names = files("team_v1_8")
    result = import_atif(docs[:1], names=names[:1])
    trace = only_trace(result)
    assert one(result.warnings).startswith("trajectory.json: steps[2].observation.results[0]"
                                           ".subagent_trajectory_ref[0]: sub-agent trajectory trajectory_path "
                                           "'trajectory.writer-1.json'")
    spawn = [e for e in trace["events"] if e["type"] == "spawn"][-1]
    assert spawn["missing_trajectory"] == "trajectory.writer-1.json"
    assert "writer-1" not in {e["agent"] for e in trace["events"]}


def test_a_continuation_file_goes_on_in_the_same_lane():
    docs, names = team()
    writer = docs[1]
    continued = {**copy.deepcopy(writer), "steps": [{**writer["steps"][2], "step_id": 1}]}
    del continued["final_metrics"]
    writer["steps"] = writer["steps"][:2]
    writer["continued_trajectory_ref"] = "trajectory.writer-1.cont-1.json"
    del writer["final_metrics"]
    split = only_trace(import_atif([*docs, continued], names=[*names, "trajectory.writer-1.cont-1.json"]))
    whole = only_trace(imported("team_v1_8"))
    assert [(e["type"], e["agent"], e["t"]) for e in split["events"]] == [
        (e["type"], e["agent"], e["t"]) for e in whole["events"]]
    assert split["costs"] == whole["costs"]
    del writer["continued_trajectory_ref"]
    result = import_atif([*docs, continued], names=[*names, "trajectory.writer-1.cont-1.json"])
    assert len(result.traces) == 2  # no longer named by anyone: a root of its own


# Tokens, counted once ------------------------------------------------------------------------------------------

def drop_step_metrics(doc: dict) -> None:
    for step in doc["steps"]:
        step.pop("metrics", None)


def test_a_root_whose_steps_have_no_metrics_counts_its_total_less_the_sub_agents_it_includes():
    docs, names = files("team_v1_8")
    docs = copy.deepcopy(docs)
    drop_step_metrics(docs[0])
    trace = only_trace(import_atif(docs, names=names))
    assert trace["costs"]["tokens"] == EXPECTED["team_v1_8"]["step_tokens"]
    last = [e for e in trace["events"] if e["agent"] == "coordinator" and e["type"] == "message"][-1]
    assert last["tokens_from"] == "final_metrics"


def test_a_root_total_of_its_own_steps_is_counted_as_its_own():
    docs, names = files("team_v1_8")
    docs = copy.deepcopy(docs)
    own = [step["metrics"] for step in docs[0]["steps"] if "metrics" in step]
    prompt, completion = sum(m["prompt_tokens"] for m in own), sum(m["completion_tokens"] for m in own)
    drop_step_metrics(docs[0])
    docs[0]["final_metrics"].update({"total_prompt_tokens": prompt // 10, "total_completion_tokens": completion // 10})
    trace = only_trace(import_atif(docs, names=names))
    subs = EXPECTED["team_v1_8"]["step_tokens"] - prompt - completion
    assert trace["costs"]["tokens"] == subs + prompt // 10 + completion // 10


def test_a_total_that_matches_neither_the_steps_nor_the_team_is_a_warning_and_the_steps_count():
    docs, names = files("team_v1_8")
    docs = copy.deepcopy(docs)
    docs[0]["final_metrics"]["total_prompt_tokens"] += 1
    result = import_atif(docs, names=names)
    assert "trajectory.json: final_metrics: its total" in one(result.warnings)
    assert only_trace(result)["costs"]["tokens"] == EXPECTED["team_v1_8"]["step_tokens"]


def test_a_sub_agent_named_twice_is_read_once_and_copied_context_counts_nothing():
    docs, names = files("team_v1_8")
    docs = copy.deepcopy(docs)
    refs = docs[0]["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"]
    refs.append({"trajectory_id": "researcher-1"})
    docs[0]["steps"][3]["is_copied_context"] = True
    result = import_atif(docs, names=names)
    trace = only_trace(result)
    assert any("'researcher-1' was spawned already" in w for w in result.warnings)
    assert any("1 step(s) copied from earlier context" in w for w in result.warnings)
    expected = EXPECTED["team_v1_8"]["step_tokens"] - 1840  # the copied step's 1800 + 40
    assert trace["costs"]["tokens"] == expected
    assert Counter(e["agent"] for e in trace["events"] if e["type"] == "return")["researcher#researcher-1"] == 1
    aggregate = one(e for e in trace["events"] if e["type"] == "aggregate")
    assert aggregate["agent"] == "coordinator" and aggregate["inputs"] == 1


# Export: harbor's models judge it -----------------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_atif_import_exports_imports_to_the_same_agents_steps_and_tokens(scenario):
    first = only_trace(imported(scenario))
    document = to_atif(first)
    assert_harbor_valid(document)
    again = import_atif([json.loads(json.dumps(document))])
    assert again.warnings == []
    second = only_trace(again)
    assert structure(second) == structure(first)
    assert [e.get("content") for e in second["events"]] == [e.get("content") for e in first["events"]]
    assert structure(only_trace(import_atif([to_atif(second)]))) == structure(first)


def test_the_export_embeds_each_sub_agent_under_its_spawner_and_counts_each_trajectory_once():
    document = to_atif(only_trace(imported("team_v1_8")))
    subs = document["subagent_trajectories"]
    assert [sub["trajectory_id"] for sub in subs] == ["researcher#researcher-1", "writer#writer-1"]
    assert [sub["agent"]["name"] for sub in subs] == ["researcher", "writer"]
    results = [result for step in document["steps"] for result in step.get("observation", {}).get("results", [])]
    refs = [r["trajectory_id"] for result in results for r in result.get("subagent_trajectory_ref", [])]
    assert refs == ["researcher#researcher-1", "writer#writer-1"]
    own = sum(step["metrics"]["prompt_tokens"] + step["metrics"]["completion_tokens"]
              for step in document["steps"] if "metrics" in step)
    final = document["final_metrics"]
    assert final["total_prompt_tokens"] + final["total_completion_tokens"] == own
    assert document["extra"]["task_id"] == EXPECTED["team_v1_8"]["task_id"]
    assert document["extra"]["rewards"] == EXPECTED["team_v1_8"]["rewards"]


def recorded_imports() -> dict[str, dict]:
    """A trace from each recorded fixture of the other importers."""
    traces = {f"sample {path.stem}": json.loads(path.read_text()) for path in SAMPLES}
    traces["odd trace"] = odd_trace()
    traces["otlp pydantic_ai_delegation"] = import_otlp(
        json.loads((FIXTURES / "otlp" / "pydantic_ai_delegation.json").read_text())).traces[0]
    for path in sorted((FIXTURES / "openai_agents").glob("*.json")):
        traces[f"openai_agents {path.stem}"] = import_agents(json.loads(path.read_text())).traces[0]
    main, subagents, metas = load_session_dir(FIXTURES / "claude_code" / "parallel.jsonl")
    traces["claude_code parallel"] = import_session(main, subagents, metas).traces[0]
    traces["claude_code inline"] = import_session(
        (FIXTURES / "claude_code" / "inline_sidechains.jsonl").read_text()).traces[0]
    for folder in sorted((FIXTURES / "frameworks").iterdir()):
        batches = sorted(folder.glob("batch-*.pb"))
        if batches:
            docs = [decode_request(path.read_bytes()) for path in batches]
            trace = import_otlp({"resourceSpans": [rs for d in docs for rs in d["resourceSpans"]]}).traces[0]
        else:
            records = [r for path in sorted(folder.glob("batch-*.json")) for r in json.loads(path.read_text())["data"]]
            trace = import_agents(records).traces[0]
        traces[f"framework {folder.name}"] = trace
    return traces


RECORDED = recorded_imports()


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_every_stored_trace_exports_atif_harbor_validates_and_imports_back(name):
    trace = RECORDED[name]
    assert validate_trace(trace) == []
    document = to_atif(trace)
    assert_harbor_valid(document)
    back = only_trace(import_atif([json.loads(json.dumps(document))]))
    acting = {e["agent"] for e in trace["events"] if e["type"] not in ("tool_result", "human_intervention")
              and e["agent"] not in ("user", "system")}
    acting |= {e["to"] for e in trace["events"] if e["type"] == "spawn" and e["agent"] in acting
               and isinstance(e.get("to"), str) and e["to"] and e["to"] not in ("user", "system")}
    trajectories, stack = 0, [document]
    while stack:
        trajectories += 1
        stack += stack.pop().get("subagent_trajectories", [])
    assert trajectories == max(len(acting), 1)
    assert back["costs"]["tokens"] == sum(event_tokens(e) for e in trace["events"]
                                          if e["type"] != "tool_result" and e["agent"] in acting)
    assert back["costs"]["tool_calls"] == sum(e["type"] == "tool_call" for e in trace["events"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_traces())
def test_any_valid_trace_exports_atif_harbor_validates_and_imports_back(trace):
    document = json.loads(json.dumps(to_atif(trace)))
    assert_harbor_valid(document)
    for back in import_atif([document]).traces:
        assert validate_trace(back) == []


# Bad input -----------------------------------------------------------------------------------------------------

def team() -> tuple[list[dict], list[str]]:
    docs, names = files("team_v1_8")
    return copy.deepcopy(docs), names


def _set(path: tuple, value):
    def change(docs):
        node = docs
        for key in path[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return change


_DELETE = object()
STEP1 = (0, "steps", 1)
DELEGATION = (0, "steps", 1, "observation", "results", 0)


@pytest.mark.parametrize("change, where", [
    (_set((0,), ["not", "an", "object"]), "trajectory.json: ['not', 'an', 'object'] is not an object"),
    (_set((0, "schema_version"), "v1.8"), "trajectory.json: schema_version: 'v1.8' is not an ATIF version"),
    (_set((0, "steps"), []), "trajectory.json: steps: [] is missing, empty or not an array"),
    (_set((0, "agent"), _DELETE), "trajectory.json: agent: None is missing or not an object"),
    (_set((0, "agent", "name"), 7), "trajectory.json: agent.name: 7 is missing or not a string"),
    (_set((*STEP1, "source"), "robot"), "trajectory.json: steps[1].source: 'robot' is not one of"),
    (_set((*STEP1, "timestamp"), "yesterday"), "trajectory.json: steps[1].timestamp: 'yesterday' is not an ISO-8601"),
    (_set((*STEP1, "tool_calls", 0, "function_name"), None),
     "trajectory.json: steps[1].tool_calls[0].function_name: None is missing or not a string"),
    (_set((*STEP1, "tool_calls"), {"a": 1}), "trajectory.json: steps[1].tool_calls: {'a': 1} is not an array"),
    (_set((*STEP1, "metrics", "prompt_tokens"), -1), "trajectory.json: steps[1].metrics.prompt_tokens: -1 is not a"),
    (_set((*STEP1, "metrics", "completion_tokens"), 1.5), "steps[1].metrics.completion_tokens: 1.5 is not a token"),
    (_set((*STEP1, "metrics", "prompt_tokens"), 2**63), "steps[1].metrics.prompt_tokens: 9223372036854775808 is not"),
    (_set((*STEP1, "observation", "results"), None), "trajectory.json: steps[1].observation.results: None is"),
    (_set((*DELEGATION, "subagent_trajectory_ref", 0), {"session_id": "s"}),
     "trajectory.json: steps[1].observation.results[0].subagent_trajectory_ref[0]: names neither trajectory_id nor "
     "trajectory_path"),
    (_set((0, "subagent_trajectories", 0, "steps", 0), "step"),
     "trajectory.json: subagent_trajectories[0].steps[0]: 'step' is not an object (an ATIF step)"),
    (_set((0, "subagent_trajectories"), {}), "trajectory.json: subagent_trajectories: {} is not an array"),
    (_set((0, "subagent_trajectories", 0, "steps", 1, "observation", "results", 0, "subagent_trajectory_ref"),
          [{"trajectory_id": "researcher-1"}]),
     "trajectory.json: subagent_trajectories[0].steps[1].observation.results[0].subagent_trajectory_ref[0]: "
     "trajectory_id 'researcher-1' is a trajectory that contains this step (a cycle"),
    (_set((0, "final_metrics", "total_prompt_tokens"), "many"),
     "trajectory.json: final_metrics.total_prompt_tokens: 'many' is not a token count"),
], ids=lambda value: value if isinstance(value, str) else None)
def test_bad_atif_is_refused_naming_where(change, where):
    docs, names = team()
    change(docs)
    with pytest.raises(ImportFailed) as refused:
        import_atif(docs, names=names)
    assert where in str(refused.value)


def test_a_cycle_of_files_with_no_root_is_refused():
    docs, names = team()
    docs[1]["steps"][1]["observation"]["results"].append(
        {"subagent_trajectory_ref": [{"trajectory_path": "trajectory.json"}]})
    with pytest.raises(ImportFailed, match="trajectory.json: every document is named by a sub-agent ref"):
        import_atif(docs, names=names)


def paths(value, prefix=()):
    """Every place in a JSON value, as key paths."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*prefix, index))


TEAM_PATHS = [path for path in paths(files("team_v1_8")[0]) if path]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**64, max_value=2**64)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
    | st.sampled_from(["ATIF-v1.8", "agent", "user", "call_delegate_1", "researcher-1", "trajectory.writer-1.json",
                       "2026-03-02T09:00:01Z"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=st.lists(st.tuples(st.sampled_from(TEAM_PATHS), st.one_of(JSON_VALUES, st.just(_DELETE))),
                        min_size=1, max_size=3))
@example(changes=[((1, "steps", 1, "tool_calls", 0, "function_name"), "")])  # found by a CI run: a lane named ""
def test_any_mutation_of_the_fixture_imports_to_valid_traces_that_export_or_is_refused_naming_where(changes):
    docs, names = team()
    for path, value in changes:
        if value is _DELETE and len(path) == 1:
            continue  # the upload keeps its files; what is in them changes
        try:
            _set(path, value)(docs)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier change removed or replaced this place
    try:
        result = import_atif(docs, names=names)
    except ImportFailed as refused:
        assert str(refused).startswith(("trajectory.json", "trajectory.writer-1.json")), str(refused)
        return
    for trace in result.traces:
        assert validate_trace(trace) == []
        assert_harbor_valid(to_atif(trace))


def test_documents_that_are_not_a_list_of_trajectories_are_refused():
    with pytest.raises(ImportFailed, match="expected a list of documents"):
        import_atif({"schema_version": "ATIF-v1.8"})
    with pytest.raises(ImportFailed, match=r"docs\[0\]: 'x' is not an object"):
        import_atif(["x"])
    with pytest.raises(ImportFailed, match="2 file names for 1 ATIF documents"):
        import_atif([{}], names=["a", "b"])


def test_a_tool_call_with_an_empty_function_name_is_read_as_an_unknown_tool_and_said():
    """ATIF allows an empty function_name; the tool's result lane is named after the tool, and an agent needs a
    name: the call is read as `unknown_tool`, and the warning names the place."""
    docs, names = team()
    _set((1, "steps", 1, "tool_calls", 0, "function_name"), "")(docs)
    result = import_atif(docs, names=names)
    assert [validate_trace(trace) for trace in result.traces] == [[]]
    assert "trajectory.writer-1.json: steps[1].tool_calls[0].function_name: empty, read as 'unknown_tool'" \
        in result.warnings
    tools = {event.get("tool") for trace in result.traces for event in trace["events"]}
    assert "unknown_tool" in tools and "" not in tools
