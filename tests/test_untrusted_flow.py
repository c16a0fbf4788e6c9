"""untrusted_flow on a large graph's arrays (audit._reach_by_chains: agents' timelines as chains, loops only over the
edges between them) gives what the small graph's loops over every edge give, and those what the rule gave before
(test_analysis_reference_large), on random traces shaped like runs: agents' timelines of temporal edges (some
missing), tool calls with their results woven in, messages between agents, safety_events that stop the flow,
untrusted events, times in order or not (ties, back in time), and more listed sources than a finding list keeps."""

import json
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_reference_large import analyse_graph as analyse_graph_as_it_was
from test_analysis_reference_large import untrusted_flow as untrusted_flow_as_it_was

from app.domain import audit, metrics
from app.domain.metrics import analyse_graph

AGENTS = ("lead", "a", "b", "c")
TOOLS = ("web.search", "code.run")  # their results form no timeline of their own, as generate_swarm makes them
TYPES = ("tool_call", "message", "safety_event", "spawn", "orchestrator_decision", "aggregate")
EDGE_TYPES = ("causal", "message", "return", "temporal")


@st.composite
def runs(draw) -> dict:
    n = draw(st.integers(1, 60))
    in_order = draw(st.booleans())
    events, edges, last_of = [], [], {}
    for k in range(n):
        agent, kind = draw(st.sampled_from(AGENTS)), draw(st.sampled_from(TYPES))
        t = float(k) if in_order else draw(st.sampled_from((0.0, 1.0, 2.0, float(k), float(n - k))))
        event = {"id": f"e{len(events)}", "t": t, "type": kind, "agent": agent}
        if draw(st.integers(0, 3)) == 0:
            event["trusted"] = False
        events.append(event)
        if agent in last_of and draw(st.integers(0, 9)):  # a timeline, now and then broken
            edges.append({"src": last_of[agent], "dst": event["id"], "type": "temporal"})
        last_of[agent] = event["id"]
        if kind == "tool_call" and draw(st.booleans()):  # its result, read by the caller's next step
            result = {"id": f"e{len(events)}", "t": t if in_order else draw(st.sampled_from((0.0, t, t + 1))),
                      "type": "tool_result", "agent": draw(st.sampled_from(TOOLS)), "tool": "web.search"}
            if draw(st.booleans()):
                result["trusted"] = False
            events.append(result)
            edges.append({"src": event["id"], "dst": result["id"], "type": "tool_dependency"})
            last_of[agent] = result["id"]  # the caller's next event follows the result
    for _ in range(draw(st.integers(0, n))):  # messages and other edges between any two events
        src, dst = draw(st.sampled_from(events))["id"], draw(st.sampled_from(events))["id"]
        edges.append({"src": src, "dst": dst, "type": draw(st.sampled_from(EDGE_TYPES))})
    return {"trace_id": "run", "events": events, "edges": edges}


def found(trace: dict, arrays_from: int) -> str:
    with patch.object(metrics, "ARRAYS_FROM", arrays_from):
        g = analyse_graph(trace)
    assert (g.ends is not None) == (arrays_from == 0 and g.forward_src is not None)  # the arrays way when it can
    return json.dumps(audit.untrusted_flow(trace, g))


@settings(max_examples=300, deadline=None)
@given(runs(), st.sampled_from((1, 3, audit.MAX_FINDINGS_PER_RULE)), st.sampled_from((1, 2, audit.REACH_EVENTS)),
       st.sampled_from((0, 1, audit.BACK_STEPS)))
def test_untrusted_flow_by_chains_is_the_flow_by_edges(trace, listed, marked, steps):
    before = json.dumps(untrusted_flow_as_it_was(trace, analyse_graph_as_it_was(trace)))
    assert found(trace, metrics.ARRAYS_FROM) == before
    # the rest counted, not described; a source's first actions from more groups than it marks; the pass back by
    # its loop alone, after a numpy step, or by numpy steps alone
    with patch.object(audit, "MAX_FINDINGS_PER_RULE", listed), patch.object(audit, "REACH_EVENTS", marked), \
            patch.object(audit, "BACK_STEPS", steps), patch.object(audit, "ACROSS_SHARE", 1.0):  # always by chains
        assert found(trace, 0) == found(trace, metrics.ARRAYS_FROM)
