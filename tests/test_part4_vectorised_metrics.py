"""A large graph's lifetimes, token sums and span by numpy (metrics.graph_lifetimes, token_sums: issue 30 part 4)
give what the per-trace reference gives (tests/test_analysis_reference_large.py), on random run-shaped traces:
agents' timelines with spawns, returns and despawns, tool results, people, times in order or not (ties, out of
order, ints beside floats, an int too large for a float to hold), token counts as ints, floats, parts or none, roles
per event, shared, empty or none; the graph built from dicts and from columns as a large stored trace's are (types,
agents and roles as codes), with metrics.ARRAYS_FROM lowered so every graph takes the arrays' way. And
untrusted_flow decides for its loops before making chains when most flow edges cannot link (two agents messaging at
every event), with the same findings."""

import json
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_arrays import from_columns
from test_analysis_reference_large import analyse_as_it_was

from app.domain import audit, metrics
from app.domain.analysis import analyse
from app.domain.generate import generate_messaging
from app.domain.metrics import Coded, analyse_graph, compute_metrics

AGENTS = ("lead", "a", "b", "c", "user")
TOOLS = ("web.search", "code.run")
TYPES = ("tool_call", "message", "spawn", "despawn", "return", "orchestrator_decision", "human_intervention",
         "aggregate")
ROLES = (None, "", "planner", "worker", "critic")
TOKENS = ({}, {"tokens": 7}, {"tokens": 2.5}, {"tokens_in": 3}, {"tokens_in": 1, "tokens_out": 0.25},
          {"tokens_out": 10**6}, {"tokens": None, "tokens_in": 4})


@st.composite
def runs(draw) -> dict:
    n = draw(st.integers(1, 40))
    shape = draw(st.sampled_from(("in order", "ties", "out of order", "ints", "huge int")))
    events, edges, last_of = [], [], {}
    for k in range(n):
        agent, kind = draw(st.sampled_from(AGENTS)), draw(st.sampled_from(TYPES))
        t = {"in order": float(k), "ties": float(k // 3), "ints": k // 2 if k % 2 else float(k // 2),
             "huge int": 2**53 + 1 if k == n // 2 else float(k),
             "out of order": draw(st.sampled_from((0.0, 1.0, -0.0, float(k), float(n - k), 0.5)))}[shape]
        event = {"id": f"e{len(events)}", "t": t, "type": kind, "agent": agent} | draw(st.sampled_from(TOKENS))
        if kind in ("spawn", "despawn"):
            event["to"] = draw(st.sampled_from(AGENTS))
        role = draw(st.sampled_from(ROLES))
        if role is not None:
            event["role"] = role
        events.append(event)
        if agent in last_of:
            edges.append({"src": last_of[agent], "dst": event["id"], "type": "temporal"})
        last_of[agent] = event["id"]
        if kind == "tool_call" and draw(st.booleans()):
            result = {"id": f"e{len(events)}", "t": t, "type": "tool_result", "agent": draw(st.sampled_from(TOOLS))}
            events.append(result | draw(st.sampled_from(TOKENS)))
            edges.append({"src": event["id"], "dst": result["id"], "type": "tool_dependency"})
    for _ in range(draw(st.integers(0, n))):
        src, dst = draw(st.sampled_from(events))["id"], draw(st.sampled_from(events))["id"]
        edges.append({"src": src, "dst": dst, "type": draw(st.sampled_from(("message", "return", "causal")))})
    return {"trace_id": "run", "events": events, "edges": edges}


def coded(values: list) -> Coded:
    names = list(dict.fromkeys(values))
    return Coded(np.array([names.index(value) for value in values], np.int64), names)


def stored_graph(trace: dict) -> metrics.TraceGraph:
    """The graph as a large stored trace's is made: ends as arrays, types, agents and roles as codes (the store gives
    roles as a list; a graph is given them as codes)."""
    g = from_columns(trace, as_arrays=True)
    events = trace["events"]
    g.columns["role"] = coded([e.get("role") for e in events])
    g.codes = {"type": coded(g.types), "agent": coded(g.agents)}
    return g


@settings(max_examples=300, deadline=None)
@given(runs())
def test_lifetimes_and_token_sums_by_numpy_are_the_reference(trace):
    before = json.dumps(analyse_as_it_was(trace))
    head = {"trace_id": "run"}
    with patch.object(metrics, "ARRAYS_FROM", 0):
        g = analyse_graph(trace)
        assert g.ends is not None
        assert (g.times is None) == any(e["t"] == 2**53 + 1 for e in trace["events"])  # the loops' way then
        assert json.dumps(analyse(trace, g)) == before
        assert json.dumps(analyse(head, stored_graph(trace))) == before


def test_token_sums_keep_the_order_of_addition():
    """Sums whose value depends on the order of addition, and a role shared by an event's own and an agent's."""
    big, small = 1e16, 1.0
    events = [{"id": f"e{k}", "t": float(k), "type": "message", "agent": "a" if k % 3 else "b", "tokens": value}
              | ({"role": "worker"} if k == 0 else {"role": "worker"} if k % 4 == 0 else {})
              for k, value in enumerate([big, small, small, -big, small, 3, small, big])]
    trace = {"trace_id": "sums", "events": events, "edges": []}
    with patch.object(metrics, "ARRAYS_FROM", 0):
        g = analyse_graph(trace)
        assert g.times is not None and g.agent_codes is not None  # the numpy way
        found = compute_metrics(trace, g)
    expected = analyse_as_it_was(trace)["metrics"]
    assert [found[key] for key in ("tokens", "tokens_by_agent", "tokens_by_role")] == [
        expected[key] for key in ("tokens", "tokens_by_agent", "tokens_by_role")]


def test_messaging_at_every_event_takes_the_loops_before_any_chain():
    trace = generate_messaging(200)
    with patch.object(metrics, "ARRAYS_FROM", 0):
        g = analyse_graph(trace)
    loops = json.dumps(audit.untrusted_flow(trace, analyse_graph(trace)))
    with patch.object(audit, "_chains", side_effect=AssertionError("chains made")):
        assert json.dumps(audit.untrusted_flow(trace, g)) == loops
    with patch.object(audit, "ACROSS_SHARE", 1.0):  # by chains all the same
        assert json.dumps(audit.untrusted_flow(trace, g)) == loops
    assert json.loads(loops)
