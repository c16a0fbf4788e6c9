"""The synthetic swarm generator: deterministic, exact in size, and valid by construction."""

import json
from collections import Counter

import pytest
from anchors import anchor
from jsonschema import validate

from app.domain.generate import TOOLS, generate_swarm
from app.domain.validation import validate_trace

SIZES = [(3, 9), (5, 60), (50, 400), (300, 4000), (1000, 20000)]
REQUIRED_EVENT_TYPES = (
    "orchestrator_decision",
    "spawn",
    "despawn",
    "message",
    "tool_call",
    "tool_result",
    "return",
    "aggregate",
)


@pytest.fixture(scope="module")
def default_trace():
    """The industrial-size trace (1,000 agents, 20,000 events), built once for the module."""
    return generate_swarm()


def acting_agents(trace):
    """Agents that act, not counting tools answering calls."""
    return {event["agent"] for event in trace["events"] if event["type"] != "tool_result"}


def structural_problems(trace):
    """The published structural rules plus this generator's promises, as a list of messages."""
    problems = []
    events = trace["events"]
    by_id = {event["id"]: event for event in events}
    if len(by_id) != len(events):
        problems.append("duplicate event ids")
    times = [event["t"] for event in events]
    if min(times) < 0 or times != sorted(times):
        problems.append("times negative or decreasing")
    for edge in trace["edges"]:
        if edge["src"] not in by_id or edge["dst"] not in by_id:
            problems.append(f"dangling edge {edge}")
        elif by_id[edge["src"]]["t"] > by_id[edge["dst"]]["t"]:
            problems.append(f"edge against time {edge}")
    edge_keys = [(edge["src"], edge["dst"], edge["type"]) for edge in trace["edges"]]
    if len(set(edge_keys)) != len(edge_keys):
        problems.append("duplicate edges")
    counts = Counter(event["type"] for event in events)
    costs = trace["costs"]
    if any(value < 0 for value in costs.values()):
        problems.append("negative cost")
    if any(event.get(key, 0) < 0 for event in events for key in ("tokens_in", "tokens_out")):
        problems.append("negative tokens")
    if costs["tool_calls"] != counts["tool_call"]:
        problems.append("tool_calls disagrees with tool_call events")
    if costs["messages"] != counts["message"]:
        problems.append("messages disagrees with message events")
    if costs["tokens"] != sum(event.get("tokens_in", 0) + event.get("tokens_out", 0) for event in events):
        problems.append("tokens disagree with the events")
    if costs["wall_clock_s"] < times[-1]:
        problems.append("wall clock ends before the last event")
    numbers = list(trace["rewards"].values()) + list(trace["metrics"].values())
    numbers += [event["reward"] for event in events if "reward" in event]
    if not all(isinstance(value, int | float) and not isinstance(value, bool) for value in numbers):
        problems.append("a reward or metric is not a number")
    return problems


def test_same_arguments_give_the_same_trace():
    assert json.dumps(generate_swarm(200, 3000, seed=7)) == json.dumps(generate_swarm(200, 3000, seed=7))


def test_another_seed_gives_another_trace():
    assert generate_swarm(200, 3000, seed=1)["events"] != generate_swarm(200, 3000, seed=2)["events"]


@pytest.mark.parametrize(("agents", "events"), SIZES)
def test_counts_are_exact(agents, events):
    trace = generate_swarm(agents, events)
    assert len(trace["events"]) == events
    assert len(acting_agents(trace)) == agents


@pytest.mark.parametrize(("agents", "events"), SIZES)
def test_structure_holds(agents, events):
    trace = generate_swarm(agents, events)
    assert structural_problems(trace) == []
    assert validate_trace(trace) == []


@pytest.mark.parametrize(("agents", "events"), [(3, 9), (5, 60), (300, 4000)])
def test_valid_under_published_schema(agents, events):
    validate(generate_swarm(agents, events), json.loads(anchor("trace_schema.json").read_text()))


def test_default_trace_valid_under_published_schema(default_trace):
    validate(default_trace, json.loads(anchor("trace_schema.json").read_text()))


def test_every_event_type_that_matters_is_present(default_trace):
    present = {event["type"] for event in default_trace["events"]}
    assert set(REQUIRED_EVENT_TYPES) <= present


def test_small_swarm_still_shows_the_whole_protocol():
    present = {event["type"] for event in generate_swarm(5, 60)["events"]}
    assert set(REQUIRED_EVENT_TYPES) <= present


def test_web_results_are_untrusted_and_others_trusted(default_trace):
    results = [event for event in default_trace["events"] if event["type"] == "tool_result"]
    assert any(event["trusted"] is False for event in results)
    for event in results:
        assert event["agent"] == event["tool"]
        assert event["trusted"] is TOOLS[event["tool"]].trusted


def test_hierarchy_lead_managers_workers(default_trace):
    roles = {event["agent"]: event["role"] for event in default_trace["events"] if "role" in event}
    role_counts = Counter(roles.values())
    assert role_counts["lead"] == 1
    assert role_counts["manager"] == 20
    assert {"executor", "researcher", "coder"} <= set(role_counts)
    last = default_trace["events"][-1]
    assert (last["agent"], last["type"], last["decision"]) == ("lead", "orchestrator_decision", "stop")


def test_spawn_edges_reach_the_childs_first_event(default_trace):
    first_event = {}
    for event in default_trace["events"]:
        if event["type"] != "tool_result":
            first_event.setdefault(event["agent"], event["id"])
    spawns = {event["id"]: event["to"] for event in default_trace["events"] if event["type"] == "spawn"}
    spawn_edges = {edge["src"]: edge["dst"] for edge in default_trace["edges"] if edge["type"] == "spawn"}
    assert spawn_edges == {spawn: first_event[child] for spawn, child in spawns.items()}


def test_every_return_feeds_an_aggregate(default_trace):
    by_id = {event["id"]: event for event in default_trace["events"]}
    returns = {event["id"] for event in default_trace["events"] if event["type"] == "return"}
    return_edges = [edge for edge in default_trace["edges"] if edge["type"] == "return"]
    assert {edge["src"] for edge in return_edges} == returns
    assert all(by_id[edge["dst"]]["type"] == "aggregate" for edge in return_edges)


def test_messages_reach_their_addressee(default_trace):
    by_id = {event["id"]: event for event in default_trace["events"]}
    message_edges = [edge for edge in default_trace["edges"] if edge["type"] == "message"]
    assert len(message_edges) == default_trace["costs"]["messages"]
    for edge in message_edges:
        assert by_id[edge["dst"]]["agent"] == by_id[edge["src"]]["to"]


def test_overlays_have_rewards_and_credit(default_trace):
    assert {"team", "orchestration", "tool", "process"} <= set(default_trace["rewards"])
    assert "task_success" in default_trace["metrics"]
    credited = [event for event in default_trace["events"] if "credit" in event]
    assert {unit for event in credited for unit in event["credit"]} >= {"agent", "tool", "message", "orchestrator"}


def test_industrial_size_is_generated_whole_and_valid():
    """Its time is benchmarks/generate.py's figure, not a test's."""
    trace = generate_swarm(1000, 20000)
    assert len(trace["events"]) == 20000 and validate_trace(trace) == []
    assert len({e["agent"] for e in trace["events"] if e["type"] != "tool_result"}) >= 1000


@pytest.mark.parametrize("agents", [0, 1, 2])
def test_too_few_agents_are_refused(agents):
    with pytest.raises(ValueError, match="at least 3 agents"):
        generate_swarm(agents, 100)


def test_too_few_events_are_refused_with_the_minimum():
    with pytest.raises(ValueError, match="at least 2041 events"):
        generate_swarm(1000, 2040)
    assert len(generate_swarm(1000, 2041)["events"]) == 2041
