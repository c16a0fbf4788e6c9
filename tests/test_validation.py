"""The trace validator: a table of broken traces, and properties cross-checked with our JSON Schema (and the
published one when ../shared/anchors is present)."""

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from anchors import anchor
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.schema import trace_schema
from app.domain.taxonomy import (
    EDGE_KEYS,
    EDGE_TYPES,
    EVENT_BOOLEAN_KEYS,
    EVENT_REQUIRED_KEYS,
    EVENT_STRING_KEYS,
    EVENT_TYPES,
    REQUIRED_COSTS,
    TOPOLOGIES,
    TRACE_KEYS,
    TRACE_REQUIRED_KEYS,
)
from app.domain.validation import (
    _CHUNK,
    MAX_DEPTH,
    Problem,
    _certainly_valid,
    _problems,
    format_problem,
    validate_trace,
    validate_traces,
)

pytestmark = pytest.mark.heavy

PROPERTY_SETTINGS = settings(max_examples=100, deadline=None)
SAMPLES = sorted((Path(__file__).resolve().parent.parent / "sample_traces").glob("*.json"))
# Rules JSON Schema cannot express (or neither schema states: a trace id usable in URLs and file names); only
# these may reject what jsonschema accepts.
BEYOND_SCHEMA = ("duplicate id", "is not an event id", "is not a valid JSON number", "must be below 2**63",
                 "lone surrogate", "given more than once", "levels of objects and arrays deep", "a trace id")


def small_trace() -> dict:
    """A valid trace touching every kind of value; events[3] is not referenced by any edge."""
    return {
        "trace_id": "t1",
        "task_id": "task-1",
        "system": "demo",
        "topology": "centralized",
        "events": [
            {"id": "e1", "t": 0, "type": "orchestrator_decision", "agent": "lead", "note": {"n": [1, None]}},
            {"id": "e2", "t": 1.5, "type": "spawn", "agent": "lead", "to": "worker", "trusted": True},
            {"id": "e3", "t": 2, "type": "message", "agent": "worker", "from": "worker", "to": "lead"},
            {"id": "e4", "t": 3, "type": "despawn", "agent": "lead", "role": "lead"},
        ],
        "edges": [
            {"src": "e1", "dst": "e2", "type": "spawn"},
            {"src": "e2", "dst": "e3", "type": "causal"},
        ],
        "rewards": {"team": 1.0},
        "costs": {"tokens": 100, "wall_clock_s": 2.5, "tool_calls": 0},
        "metrics": {"task_success": 1},
    }


def locate(trace, where: str):
    """The container and the key or index named by a dotted path such as 'events.3.id'."""
    *parents, last = (int(step) if step.isdigit() else step for step in where.split("."))
    for step in parents:
        trace = trace[step]
    return trace, last


def setting(where: str, value):
    """A mutation that sets the value at a dotted path."""

    def mutate(trace):
        container, last = locate(trace, where)
        container[last] = value

    return mutate


def deleting(where: str):
    """A mutation that removes the key or item at a dotted path."""

    def mutate(trace):
        container, last = locate(trace, where)
        del container[last]

    return mutate


def appending_event(value):
    """A mutation that appends value to the events."""

    def mutate(trace):
        trace["events"].append(value)

    return mutate


def emptying_events(trace):
    """Leave no events, and so no edges either."""
    trace["events"] = []
    trace["edges"] = []


def case(id, mutate, path, fragment):
    """One row of the table: a mutation, the path it breaks and a fragment of the message."""
    return pytest.param(mutate, path, fragment, id=id)


CASES = [
    *(case(f"missing-{key}", deleting(key), "", f"missing required key '{key}'") for key in TRACE_REQUIRED_KEYS),
    case("unknown-top-level-key", setting("extra", 1), "", "unknown key 'extra'; allowed: trace_id"),
    case("empty-trace-id", setting("trace_id", ""), "trace_id", "non-empty string"),
    case("int-task-id", setting("task_id", 5), "task_id", "5 is not a string"),
    case("null-system", setting("system", None), "system", "null is not a string"),
    case("wrong-topology", setting("topology", "star"), "topology", "'star' is not one of centralized, planner_"),
    case("events-not-list", setting("events", {}), "events", "an object is not an array"),
    case("events-empty", emptying_events, "events", "at least one event"),
    case("event-not-object", appending_event(7), "events[4]", "7 is not an object"),
    *(
        case(f"event-missing-{key}", deleting(f"events.3.{key}"), "events[3]", f"missing required key '{key}'")
        for key in EVENT_REQUIRED_KEYS
    ),
    case("empty-event-id", setting("events.3.id", ""), "events[3].id", "non-empty string"),
    case("int-event-id", setting("events.3.id", 4), "events[3].id", "4 is not a string"),
    case("duplicate-id", setting("events.3.id", "e1"), "events[3].id", "duplicate id 'e1' (first at events[0])"),
    case("empty-agent", setting("events.0.agent", ""), "events[0].agent", "non-empty string"),
    case("negative-t", setting("events.0.t", -1), "events[0].t", "-1 is below 0"),
    case("negative-float-t", setting("events.0.t", -0.5), "events[0].t", "-0.5 is below 0"),
    case("string-t", setting("events.0.t", "0"), "events[0].t", "'0' is not a number"),
    case("bool-t", setting("events.0.t", True), "events[0].t", "true is not a number"),
    case("null-t", setting("events.0.t", None), "events[0].t", "null is not a number"),
    case("nan-t", setting("events.0.t", math.nan), "events[0].t", "nan is not a valid JSON number"),
    case("inf-t", setting("events.0.t", math.inf), "events[0].t", "inf is not a valid JSON number"),
    case(
        "wrong-event-type",
        setting("events.1.type", "spawnn"),
        "events[1].type",
        "'spawnn' is not one of orchestrator_decision, spawn, despawn",
    ),
    case("list-event-type", setting("events.1.type", ["spawn"]), "events[1].type", "an array is not a string"),
    *(
        case(f"int-{key}", setting(f"events.0.{key}", 5), f"events[0].{key}", "5 is not a string")
        for key in EVENT_STRING_KEYS
    ),
    case("string-trusted", setting("events.1.trusted", "yes"), "events[1].trusted", "'yes' is not a boolean"),
    case("int-trusted", setting("events.1.trusted", 1), "events[1].trusted", "1 is not a boolean"),
    case("edges-not-list", setting("edges", {}), "edges", "an object is not an array"),
    case("edge-not-object", setting("edges.0", "e1->e2"), "edges[0]", "'e1->e2' is not an object"),
    *(
        case(f"edge-missing-{key}", deleting(f"edges.0.{key}"), "edges[0]", f"missing required key '{key}'")
        for key in EDGE_KEYS
    ),
    case("edge-extra-key", setting("edges.1.weight", 2), "edges[1]", "unknown key 'weight'; allowed: src, dst"),
    case("empty-src", setting("edges.0.src", ""), "edges[0].src", "non-empty string"),
    case("int-src", setting("edges.0.src", 1), "edges[0].src", "1 is not a string"),
    case("dangling-src", setting("edges.0.src", "e0"), "edges[0].src", "'e0' is not an event id"),
    case("dangling-dst", setting("edges.1.dst", "e99"), "edges[1].dst", "'e99' is not an event id"),
    case("wrong-edge-type", setting("edges.0.type", "calls"), "edges[0].type", "'calls' is not one of temporal, causal"),
    case("rewards-not-object", setting("rewards", []), "rewards", "an array is not an object"),
    case("string-reward", setting("rewards.team", "high"), "rewards.team", "'high' is not a number"),
    case("bool-reward", setting("rewards.team", True), "rewards.team", "true is not a number"),
    case("nan-reward", setting("rewards.team", math.nan), "rewards.team", "nan is not a valid JSON number"),
    case("quoted-key", setting("rewards.my channel", "x"), 'rewards["my channel"]', "'x' is not a number"),
    case("costs-not-object", setting("costs", None), "costs", "null is not an object"),
    *(
        case(f"costs-missing-{key}", deleting(f"costs.{key}"), "costs", f"missing required key '{key}'")
        for key in REQUIRED_COSTS
    ),
    case("negative-tokens", setting("costs.tokens", -5), "costs.tokens", "-5 is below 0"),
    case("negative-optional-cost", setting("costs.tool_calls", -1), "costs.tool_calls", "-1 is below 0"),
    case("negative-extra-cost", setting("costs.usd", -0.01), "costs.usd", "-0.01 is below 0"),
    case("bool-cost", setting("costs.wall_clock_s", True), "costs.wall_clock_s", "true is not a number"),
    case("inf-cost", setting("costs.tokens", math.inf), "costs.tokens", "inf is not a valid JSON number"),
    case("string-extra-cost", setting("costs.usd", "1"), "costs.usd", "'1' is not a number"),
    case("metrics-not-object", setting("metrics", "x"), "metrics", "'x' is not an object"),
    case("null-metric", setting("metrics.task_success", None), "metrics.task_success", "null is not a number"),
]


@dataclass(frozen=True)
class Schema:
    """A trace schema's validator, and which of the validator's problems that schema does not state."""

    is_valid: Callable[[object], bool]
    beyond: Callable[[Problem], bool]


@pytest.fixture(scope="module", params=["ours", "published"])
def schema_validator(request) -> Schema:
    """Our trace schema (app.domain.schema), then the published one (skipped without ../shared/anchors)."""
    from jsonschema import Draft202012Validator

    if request.param == "ours":
        schema = trace_schema()
    else:
        schema = json.loads(anchor("trace_schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    published = request.param == "published"
    return Schema(Draft202012Validator(schema).is_valid, lambda problem: beyond_schema(problem, published))


def test_small_trace_is_valid():
    assert validate_trace(small_trace()) == []


def test_published_example_is_valid():
    example = json.loads(anchor("example_trace.json").read_text())
    assert validate_trace(example) == []
    assert _certainly_valid(example)


@pytest.mark.parametrize("value", [[], None, "{}", 3, True], ids=repr)
def test_non_object_trace(value):
    (problem,) = validate_trace(value)
    assert problem.path == ""
    assert problem.message.endswith("is not an object")


@pytest.mark.parametrize(("mutate", "path", "fragment"), CASES)
def test_each_broken_rule_is_reported_once(mutate, path, fragment):
    trace = small_trace()
    mutate(trace)
    problems = validate_trace(trace)
    assert [p.path for p in problems] == [path], problems
    assert fragment in problems[0].message


@pytest.mark.parametrize(("mutate", "path", "fragment"), CASES)
def test_table_rejections_agree_with_the_schema(schema_validator, mutate, path, fragment):
    trace = small_trace()
    mutate(trace)
    if schema_validator.is_valid(trace):
        assert all(schema_validator.beyond(p) for p in validate_trace(trace))


def test_every_problem_is_reported_in_document_order():
    trace = small_trace()
    del trace["task_id"]
    trace["events"][1]["type"] = "spawnn"
    trace["events"][2]["t"] = -3
    trace["events"][3]["id"] = "e2"
    trace["edges"][1]["dst"] = "e99"
    trace["costs"]["tokens"] = -5
    trace["colour"] = "blue"
    assert [format_problem(p) for p in validate_trace(trace)] == [
        "missing required key 'task_id'",
        f"events[1].type: 'spawnn' is not one of {', '.join(EVENT_TYPES)}",
        "events[2].t: -3 is below 0",
        "events[3].id: duplicate id 'e2' (first at events[1])",
        "edges[1].dst: 'e99' is not an event id",
        "costs.tokens: -5 is below 0",
        f"unknown key 'colour'; allowed: {', '.join(TRACE_KEYS)}",
    ]


def test_edges_listed_before_events_are_still_checked_against_event_ids():
    trace = small_trace()
    trace = {"edges": trace.pop("edges"), **trace}
    trace["edges"][0]["src"] = "e0"
    trace["events"][0]["t"] = -1
    assert [p.path for p in validate_trace(trace)] == ["edges[0].src", "events[0].t"]


def test_every_top_level_key_is_checked():
    for key in TRACE_KEYS:
        trace = small_trace()
        trace[key] = None
        assert [p.path for p in validate_trace(trace)] == [key], key


def test_validation_leaves_the_trace_untouched():
    trace = small_trace()
    validate_trace(trace)
    assert trace == small_trace()


def test_long_values_are_shortened_in_messages():
    trace = small_trace()
    trace["events"][1]["type"] = "x" * 10_000
    (problem,) = validate_trace(trace)
    assert len(problem.message) < 400


def large_trace(size: int) -> dict:
    """A valid trace of size events chained by temporal edges."""
    trace = small_trace()
    trace["events"] = [
        {"id": f"e{i}", "t": i, "type": "message", "agent": f"a{i % 7}", "role": "executor"} for i in range(size)
    ]
    trace["edges"] = [{"src": f"e{i}", "dst": f"e{i + 1}", "type": "temporal"} for i in range(size - 1)]
    return trace


def test_large_trace_problems_are_found_across_chunks():
    size = 3 * _CHUNK + 5  # the fast path proves events and edges valid a chunk at a time
    trace = large_trace(size)
    assert validate_trace(trace) == []
    trace["events"][_CHUNK + 1]["trusted"] = "no"
    trace["events"][2 * _CHUNK + 3]["id"] = "e4"
    trace["edges"][size - 2]["dst"] = "e4x"
    assert [format_problem(p) for p in validate_trace(trace)] == [
        f"events[{_CHUNK + 1}].trusted: 'no' is not a boolean",
        f"events[{2 * _CHUNK + 3}].id: duplicate id 'e4' (first at events[4])",
        f"edges[{2 * _CHUNK + 2}].dst: 'e{2 * _CHUNK + 3}' is not an event id",
        f"edges[{2 * _CHUNK + 3}].src: 'e{2 * _CHUNK + 3}' is not an event id",
        f"edges[{size - 2}].dst: 'e4x' is not an event id",
    ]


def test_valid_traces_take_the_fast_path():
    samples = [json.loads(path.read_text()) for path in SAMPLES]
    assert samples
    for trace in (small_trace(), large_trace(3 * _CHUNK), *samples):
        assert _certainly_valid(trace)


def test_a_batch_is_checked_trace_by_trace():
    """Traces of a batch are proven valid together; ids are still unique per trace, not across the batch, and an
    edge may not name another trace's event."""
    first, second, third = small_trace(), small_trace(), small_trace()  # the same event ids in each: allowed
    second["events"][3]["id"] = "e9"
    second["edges"][0]["dst"] = "e4"  # only the other traces have an e4
    third["events"][1]["id"] = "e1"
    batch = [first, second, third, large_trace(_CHUNK), small_trace()]
    assert [list(problems) for problems in validate_traces(batch)] == [validate_trace(trace) for trace in batch]
    assert [[format_problem(p) for p in problems] for problems in validate_traces(batch)] == [
        [], ["edges[0].dst: 'e4' is not an event id"],
        ["events[1].id: duplicate id 'e1' (first at events[0])", "edges[0].dst: 'e2' is not an event id",
         "edges[1].src: 'e2' is not an event id"],
        [], []]


def test_format_problem():
    assert format_problem(Problem("costs.tokens", "-5 is below 0")) == "costs.tokens: -5 is below 0"
    assert format_problem(Problem("", "missing required key 'costs'")) == "missing required key 'costs'"


def beyond_schema(problem: Problem, published: bool = False) -> bool:
    """True for a problem raised by a structural rule JSON Schema cannot state; for the published schema, also
    a negative cost other than the four it names (ours says every cost is >= 0)."""
    negative_cost = published and problem.path.startswith("costs") and problem.message.endswith("is below 0")
    return negative_cost or any(rule in problem.message for rule in BEYOND_SCHEMA)


finite_numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
# `t` and `costs` hold integers below 2**63 (a double or a 64-bit column); other numbers any integer.
non_negative_numbers = st.integers(0, 2**63 - 1) | st.floats(0, allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | finite_numbers | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
KNOWN_EVENT_KEYS = (*EVENT_REQUIRED_KEYS, *EVENT_STRING_KEYS, *EVENT_BOOLEAN_KEYS)
extra_keys = st.text(max_size=10).filter(lambda key: key not in KNOWN_EVENT_KEYS)
event_extras = st.dictionaries(extra_keys, json_values, max_size=3)


def events_with_id(event_id: str):
    """A valid event: required keys, any published optional keys, and arbitrary extra properties."""
    published = st.fixed_dictionaries(
        {
            "id": st.just(event_id),
            "t": non_negative_numbers,
            "type": st.sampled_from(EVENT_TYPES),
            "agent": st.text(min_size=1, max_size=10),
        },
        optional={
            **{key: st.text(max_size=10) for key in EVENT_STRING_KEYS},
            **{key: st.booleans() for key in EVENT_BOOLEAN_KEYS},
        },
    )
    return st.tuples(event_extras, published).map(lambda pair: {**pair[0], **pair[1]})


# A trace id names a URL path segment and files: no / or \\, no control character, not . or ..
trace_ids = st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\"), min_size=1,
                    max_size=10).filter(lambda text: text not in (".", ".."))


@st.composite
def valid_traces(draw) -> dict:
    """Traces valid under the trace schemas and the structural rules."""
    ids = draw(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=8, unique=True))
    events = [draw(events_with_id(event_id)) for event_id in ids]
    endpoint = st.sampled_from(ids)
    edge = st.fixed_dictionaries({"src": endpoint, "dst": endpoint, "type": st.sampled_from(EDGE_TYPES)})
    costs = st.tuples(
        st.dictionaries(st.text(max_size=8), non_negative_numbers, max_size=2),
        st.fixed_dictionaries(
            {key: non_negative_numbers for key in REQUIRED_COSTS},
            optional={"tool_calls": non_negative_numbers, "messages": non_negative_numbers},
        ),
    ).map(lambda pair: {**pair[0], **pair[1]})
    return draw(
        st.fixed_dictionaries(
            {
                "trace_id": trace_ids,
                "task_id": st.text(min_size=1, max_size=10),
                "events": st.just(events),
                "edges": st.lists(edge, max_size=10),
                "rewards": st.dictionaries(st.text(max_size=8), finite_numbers, max_size=4),
                "costs": costs,
            },
            optional={
                "system": st.text(max_size=10),
                "topology": st.sampled_from(TOPOLOGIES),
                "metrics": st.dictionaries(st.text(max_size=8), finite_numbers, max_size=4),
            },
        )
    )


def containers(value):
    """Every object and array inside value, value included."""
    if isinstance(value, (dict, list)):
        yield value
        for child in value.values() if isinstance(value, dict) else value:
            yield from containers(child)


KNOWN_KEYS = (*TRACE_KEYS, *KNOWN_EVENT_KEYS, *EDGE_KEYS, *REQUIRED_COSTS, "tool_calls", "messages")
# Immutable on purpose: later edits may reach into an inserted value, and json_values supplies fresh containers.
PLAUSIBLE_VALUES = ("", -1, -0.5, 0, 1.5, True, False, None, math.nan, math.inf, "x")
PLAUSIBLE_VALUES += (*EVENT_TYPES[:2], *EDGE_TYPES[:2], *TOPOLOGIES[:2])
# What JSON can say but the store cannot keep as sent: a lone surrogate, arrays nested one level too deep,
# and (in `t` or `costs` only) integers a double or a 64-bit column would change.
ODD_VALUES = st.sampled_from(("\ud800", "a\udfff", 2**63, 10**30)) | st.builds(
    lambda: functools.reduce(lambda inner, _: [inner], range(MAX_DEPTH + 1), 0))


@st.composite
def mutated_traces(draw) -> dict:
    """A valid trace after one to three random edits: set, delete or add a key or an item anywhere."""
    trace = draw(valid_traces())
    ids = [event["id"] for event in trace["events"]]
    values = st.sampled_from(PLAUSIBLE_VALUES) | st.sampled_from(ids) | json_values | st.floats() | ODD_VALUES
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(list(containers(trace))))
        action = draw(st.sampled_from(("set", "delete", "add")))
        if isinstance(target, dict):
            if action == "add" or not target:
                target[draw(st.sampled_from(KNOWN_KEYS) | st.text(max_size=6))] = draw(values)
            else:
                key = draw(st.sampled_from(list(target)))
                if action == "delete":
                    del target[key]
                else:
                    target[key] = draw(values)
        elif action == "add" or not target:
            target.append(draw(values))
        else:
            index = draw(st.integers(0, len(target) - 1))
            if action == "delete":
                del target[index]
            else:
                target[index] = draw(values)
    return trace


@PROPERTY_SETTINGS
@given(valid_traces())
def test_generated_valid_traces_have_no_problems(trace):
    assert validate_trace(trace) == []


@PROPERTY_SETTINGS
@given(valid_traces())
def test_generated_valid_traces_satisfy_the_schema(schema_validator, trace):
    assert schema_validator.is_valid(trace)


@PROPERTY_SETTINGS
@given(mutated_traces())
def test_mutated_traces_agree_with_the_schema(schema_validator, trace):
    problems = validate_trace(trace)
    if schema_validator.is_valid(trace):
        assert all(schema_validator.beyond(p) for p in problems), problems
    else:
        assert problems


@settings(max_examples=30, deadline=None)  # batches of 2-6: as many traces as the single-trace properties
@given(st.lists(st.one_of(valid_traces(), mutated_traces()), min_size=2, max_size=6))
def test_a_batch_gets_the_problems_of_each_of_its_traces(traces):
    assert [list(problems) for problems in validate_traces(traces)] == [validate_trace(trace) for trace in traces]


@PROPERTY_SETTINGS
@given(mutated_traces())
def test_fast_path_passes_only_traces_the_walk_finds_valid(trace):
    if _certainly_valid(trace):
        assert _problems(trace) == []
