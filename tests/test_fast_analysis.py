"""The analysis ingest stores (app/domain/fast_analysis.py) equals the reference functions (compute_metrics and
audit) exactly, values and types alike, on traces broken in every way the rules look for."""

import json
import random

import pytest
from conftest import make_trace

from app.domain import fast_analysis
from app.domain.audit import audit
from app.domain.generate import generate_swarm
from app.domain.metrics import analyse_graph, compute_metrics

TYPES = ("orchestrator_decision", "spawn", "despawn", "message", "return", "aggregate", "tool_call", "tool_result",
         "safety_event", "human_intervention", "llm_call")
EDGE_TYPES = ("causal", "spawn", "message", "tool_dependency", "return", "aggregate", "temporal")


def reference(trace: dict) -> dict:
    g = analyse_graph(trace)
    return {"metrics": compute_metrics(trace, g), "findings": audit(trace, g)}


def assert_equal(trace: dict) -> None:
    fast, ref = fast_analysis.analyse(trace), reference(trace)
    assert json.dumps(fast["metrics"]) == json.dumps(ref["metrics"])
    assert json.dumps(fast["findings"]) == json.dumps(ref["findings"])
    assert fast["counts"] == {s: sum(f["severity"] == s for f in ref["findings"]) for s in ("error", "warning", "info")}


def broken(rng: random.Random) -> dict:
    """A random trace: random types, agents, times (ints and floats, ties), edges of every kind in any direction,
    dangling and duplicated, spawns and despawns out of order, untrusted events, odd token counts and costs."""
    n = rng.randint(0, 40)
    agents = [f"a{k}" for k in range(rng.randint(1, 6))] + ["user"]
    events = []
    for k in range(n):
        e = {"id": f"e{k}", "t": rng.choice([rng.randint(0, 10), round(rng.uniform(0, 10), 2), 5]),
             "type": rng.choice(TYPES), "agent": rng.choice(agents)}
        if e["type"] in ("spawn", "despawn", "return", "message") and rng.random() < 0.8:
            e["to"] = rng.choice(agents)
        if rng.random() < 0.4:
            e["role"] = rng.choice(["lead", "worker", "", "critic"])
        if rng.random() < 0.2:
            e["trusted"] = False
        roll = rng.random()
        if roll < 0.2:
            e["tokens"] = rng.choice([10, 2.5, "many", None])
        elif roll < 0.5:
            e |= {"tokens_in": rng.choice([3, 1.5, None]), "tokens_out": rng.choice([4, "x", 0.25])}
        events.append(e)
    ids = [e["id"] for e in events] + ["ghost"]
    edges = [{"src": rng.choice(ids), "dst": rng.choice(ids), "type": rng.choice(EDGE_TYPES)}
             for _ in range(rng.randint(0, 2 * n + 1))] if n else []
    edges += edges[: rng.randint(0, 2)]  # duplicates
    costs = {"tokens": 0, "wall_clock_s": rng.choice([3, 9.5, 100]), "tool_calls": rng.choice([0, 2, "n/a"])}
    return {"trace_id": "t", "events": events, "edges": edges, "costs": costs}


@pytest.mark.parametrize("seed", range(300))
def test_random_broken_traces_are_analysed_as_the_reference_does(seed):
    assert_equal(broken(random.Random(seed)))


@pytest.mark.parametrize("agents,events", [(3, 12), (6, 37), (20, 300), (60, 1500), (200, 5000)])
def test_generated_swarms_are_analysed_as_the_reference_does(agents, events):
    for seed in range(3):
        assert_equal(generate_swarm(agents, events, seed=seed))


def test_the_sample_shaped_trace_and_an_empty_one_are_analysed_as_the_reference_does():
    assert_equal(make_trace("small"))
    assert_equal({"trace_id": "empty", "events": [], "edges": [], "costs": {}})
