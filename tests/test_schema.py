"""Our JSON Schema of the trace format (app.domain.schema): a draft 2020-12 schema built from the taxonomy that
accepts every trace we ship or generate, refuses what the validator refuses for a reason it can state, and is
served at GET /api/schema."""

import copy
import json
from pathlib import Path

import pytest
from anchors import anchor
from conftest import make_trace
from jsonschema import Draft202012Validator

from app.domain.generate import generate_swarm
from app.domain.schema import BEYOND_SCHEMA, SCHEMA_ID, trace_schema
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
from app.domain.validation import format_problem, validate_trace

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "sample_traces").glob("*.json"))
SWARM_SIZES = [(3, 9), (50, 600), (300, 4000)]


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = trace_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_errors(validator, trace) -> list[str]:
    """What jsonschema says is wrong with a trace, one message per error."""
    return [f"{error.json_path}: {error.message}" for error in validator.iter_errors(trace)]


def described(schema: dict, path: str = "#"):
    """(path, subschema) of every property, $defs entry and the root, to check each has a description."""
    yield path, schema
    for group in ("properties", "$defs"):
        for name, child in schema.get(group, {}).items():
            yield from described(child, f"{path}/{group}/{name}")


def test_the_schema_is_draft_2020_12_with_an_id_a_title_and_descriptions():
    schema = trace_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == SCHEMA_ID and schema["title"]
    assert [path for path, sub in described(schema) if not sub.get("description")] == []
    assert json.loads(json.dumps(schema)) == schema == trace_schema()


def test_the_schema_states_the_taxonomy():
    schema = trace_schema()
    event, edge = schema["$defs"]["event"], schema["$defs"]["edge"]
    assert tuple(schema["properties"]) == TRACE_KEYS and tuple(schema["required"]) == TRACE_REQUIRED_KEYS
    assert schema["additionalProperties"] is False
    assert tuple(schema["properties"]["topology"]["enum"]) == TOPOLOGIES
    assert tuple(schema["properties"]["costs"]["required"]) == REQUIRED_COSTS
    assert tuple(event["required"]) == EVENT_REQUIRED_KEYS and event["additionalProperties"] is True
    assert tuple(event["properties"]) == (*EVENT_REQUIRED_KEYS, *EVENT_STRING_KEYS, *EVENT_BOOLEAN_KEYS)
    assert tuple(event["properties"]["type"]["enum"]) == EVENT_TYPES
    assert tuple(edge["required"]) == EDGE_KEYS and edge["additionalProperties"] is False
    assert tuple(edge["properties"]["type"]["enum"]) == EDGE_TYPES
    assert all(rule in schema["description"] for rule in BEYOND_SCHEMA)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_every_sample_trace_satisfies_the_schema(validator, path):
    trace = json.loads(path.read_text())
    assert schema_errors(validator, trace) == []
    assert validate_trace(trace) == []


def test_the_samples_are_there():
    assert len(SAMPLES) >= 6


@pytest.mark.parametrize(("agents", "events"), SWARM_SIZES)
def test_generated_swarms_satisfy_the_schema(validator, agents, events):
    assert schema_errors(validator, generate_swarm(agents, events)) == []


def test_the_test_trace_satisfies_the_schema(validator):
    assert schema_errors(validator, make_trace()) == []


def setting(where: str, value):
    """A mutation that sets the value at a dotted path such as 'events.0.type'."""

    def mutate(trace):
        *parents, last = (int(step) if step.isdigit() else step for step in where.split("."))
        for step in parents:
            trace = trace[step]
        trace[last] = value

    return mutate


def deleting(where: str):
    """A mutation that removes the key at a dotted path."""

    def mutate(trace):
        *parents, last = (int(step) if step.isdigit() else step for step in where.split("."))
        for step in parents:
            trace = trace[step]
        del trace[last]

    return mutate


SCHEMA_INVALID = [
    pytest.param(setting("events.1.type", "spawnn"), "events[1].type", id="wrong-event-type"),
    pytest.param(setting("edges.0.type", "calls"), "edges[0].type", id="wrong-edge-type"),
    pytest.param(setting("topology", "star"), "topology", id="wrong-topology"),
    pytest.param(setting("colour", "blue"), "", id="unknown-top-level-key"),
    pytest.param(setting("edges.0.weight", 2), "edges[0]", id="unknown-edge-key"),
    *(pytest.param(deleting(key), "", id=f"missing-{key}") for key in TRACE_REQUIRED_KEYS),
    *(pytest.param(deleting(f"events.0.{key}"), "events[0]", id=f"missing-event-{key}")
      for key in EVENT_REQUIRED_KEYS),
    *(pytest.param(deleting(f"edges.0.{key}"), "edges[0]", id=f"missing-edge-{key}") for key in EDGE_KEYS),
    *(pytest.param(deleting(f"costs.{key}"), "costs", id=f"missing-cost-{key}") for key in REQUIRED_COSTS),
    pytest.param(setting("events", []), "events", id="no-events"),
    pytest.param(setting("trace_id", ""), "trace_id", id="empty-trace-id"),
    pytest.param(setting("events.0.agent", ""), "events[0].agent", id="empty-agent"),
    pytest.param(setting("events.0.t", -1), "events[0].t", id="negative-t"),
    pytest.param(setting("events.0.t", "0"), "events[0].t", id="string-t"),
    pytest.param(setting("events.0.role", 5), "events[0].role", id="int-role"),
    pytest.param(setting("events.3.trusted", "no"), "events[3].trusted", id="string-trusted"),
    pytest.param(setting("costs.usd", -0.5), "costs.usd", id="negative-extra-cost"),
    pytest.param(setting("rewards.team", True), "rewards.team", id="bool-reward"),
    pytest.param(setting("metrics", [1]), "metrics", id="metrics-not-object"),
]


@pytest.mark.parametrize(("mutate", "path"), SCHEMA_INVALID)
def test_schema_invalid_traces_are_refused_by_both(validator, mutate, path):
    trace = make_trace()
    mutate(trace)
    assert schema_errors(validator, trace)
    assert path in [p.path for p in validate_trace(trace)]  # a missing event id also leaves edges dangling


@pytest.mark.parametrize(("mutate", "message"), [
    pytest.param(setting("events.1.id", "e1"), "events[1].id: duplicate id 'e1'", id="duplicate-id"),
    pytest.param(setting("edges.0.dst", "e99"), "edges[0].dst: 'e99' is not an event id", id="dangling-edge"),
    pytest.param(setting("costs.tokens", 2**63), "costs.tokens: 9223372036854775808 is too large", id="huge-cost"),
    pytest.param(setting("events.0.note", "\ud800"), "events[0].note: '\\ud800' holds a lone surrogate",
                 id="lone-surrogate"),
])
def test_rules_beyond_the_schema_are_the_validators(validator, mutate, message):
    trace = make_trace()
    mutate(trace)
    assert schema_errors(validator, trace) == []
    first, *_ = validate_trace(trace)
    assert format_problem(first).startswith(message)


def test_the_published_example_satisfies_our_schema(validator):
    example = json.loads(anchor("example_trace.json").read_text())
    assert schema_errors(validator, example) == []


def test_our_schema_states_what_the_published_one_does():
    published = json.loads(anchor("trace_schema.json").read_text())
    ours = trace_schema()

    def facts(schema: dict) -> dict:
        event, edge = schema["$defs"]["event"], schema["$defs"]["edge"]
        return {
            "required": schema["required"], "keys": list(schema["properties"]),
            "topologies": schema["properties"]["topology"]["enum"],
            "costs": schema["properties"]["costs"]["required"],
            "event required": event["required"], "event keys": list(event["properties"]),
            "event types": event["properties"]["type"]["enum"],
            "event key types": {key: value["type"] for key, value in event["properties"].items()},
            "edge required": edge["required"], "edge keys": list(edge["properties"]),
            "edge types": edge["properties"]["type"]["enum"],
            "closed": (schema["additionalProperties"], event["additionalProperties"], edge["additionalProperties"]),
        }

    assert facts(ours) == facts(published)


def test_read_schema(client):
    answer = client.get("/api/schema")
    assert answer.status_code == 200
    assert answer.headers["content-type"].split(";")[0] in ("application/schema+json", "application/json")
    served = answer.json()
    assert served == trace_schema()
    assert Draft202012Validator(served).is_valid(make_trace())
    broken = copy.deepcopy(make_trace())
    broken["events"][0]["type"] = "spawnn"
    assert not Draft202012Validator(served).is_valid(broken)


def test_the_schema_route_is_described(client):
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/api/schema"]["get"]
    assert operation["tags"] == ["format"]
    assert {"200", "400", "401"} <= set(operation["responses"])
