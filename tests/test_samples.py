"""The shipped sample traces: valid, one per topology, realistic and internally consistent."""

import json
from pathlib import Path

import pytest

from app.domain.validation import validate_trace

SAMPLES = sorted((Path(__file__).resolve().parent.parent / "sample_traces").glob("*.json"))
TOPOLOGIES = {"centralized", "planner_executor_critic", "debate", "swarm", "hierarchical", "harness"}


def test_one_sample_per_topology():
    topologies = [json.loads(p.read_text())["topology"] for p in SAMPLES]
    assert sorted(topologies) == sorted(TOPOLOGIES)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.stem)
def test_sample_is_valid_and_consistent(path):
    trace = json.loads(path.read_text())
    assert validate_trace(trace) == []
    events = trace["events"]
    assert 30 <= len(events) <= 300
    types = {e["type"] for e in events}
    assert {"spawn", "message", "tool_call", "tool_result", "return", "aggregate", "orchestrator_decision"} <= types
    assert any(e.get("trusted") is False for e in events) and any(e.get("trusted") is True for e in events)
    assert any(e.get("decision") == "stop" for e in events if e["type"] == "orchestrator_decision")
    assert len(trace["rewards"]) >= 2
    costs = trace["costs"]
    assert costs["tool_calls"] == sum(e["type"] == "tool_call" for e in events)
    assert costs["messages"] == sum(e["type"] == "message" for e in events)
    assert costs["wall_clock_s"] >= max(e["t"] for e in events)
    assert any("reward" in e for e in events) and any("credit" in e for e in events)
