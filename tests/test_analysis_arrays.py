"""The shortcuts the analysis of large traces takes (issue 30 part 4: forward edges left unsorted when already in the
order of their dst, disconnected settled by the edges forward in time, the critical path's end found by index) give
what the analysis gave before them (tests/test_analysis_reference_large.py keeps it), on random small graphs made to
take each way: events in time order or not, ties in time, ids given twice, edges back in time, cycles among
simultaneous events, self loops, repeated edges, edges to no event. A trace's columns (as a stored trace is
analysed) give what its dicts give, and a large trace's way (numpy arrays, from metrics.ARRAYS_FROM events, lowered
here to every graph) gives what the small one's lists give."""

import json
from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_analysis_reference_large import analyse_as_it_was, graph_as_read_by_credit
from test_analysis_reference_large import analyse_graph as analyse_graph_as_it_was

from app.domain import metrics
from app.domain.analysis import analyse
from app.domain.metrics import EVENT_FIELDS, event_tokens, graph_from_columns

EVENT_TYPES = ("tool_call", "tool_result", "spawn", "despawn", "return", "message", "aggregate", "safety_event",
               "orchestrator_decision")
EDGE_TYPES = ("causal", "temporal", "message", "spawn", "return", "aggregate")
AGENTS = ("lead", "a", "b", "user")
TIMES = (0.0, 1.0, 1.0, 2.5, 3.0, 2**60, float("inf"), -0.0)


@st.composite
def traces(draw) -> dict:
    n = draw(st.integers(0, 14))
    ids = draw(st.lists(st.sampled_from([f"e{k}" for k in range(n + 2)]), min_size=n, max_size=n))  # repeats
    times = draw(st.lists(st.sampled_from(TIMES), min_size=n, max_size=n))
    if draw(st.booleans()):
        times.sort()  # in time order, ties kept: the graph's in-order ways
    events = []
    for id_, t in zip(ids, times):
        event = {"id": id_, "t": t, "type": draw(st.sampled_from(EVENT_TYPES)), "agent": draw(st.sampled_from(AGENTS))}
        for key, values in (("to", AGENTS), ("trusted", (False, True)), ("tokens_in", (3, 2.5)), ("role", ("r",))):
            if draw(st.booleans()):
                event[key] = draw(st.sampled_from(values))
        events.append(event)
    ends = st.sampled_from(ids + ["missing"]) if ids else st.just("missing")
    edges = [{"src": draw(ends), "dst": draw(ends), "type": draw(st.sampled_from(EDGE_TYPES))}
             for _ in range(draw(st.integers(0, 2 * n + 2)))]
    edges += [dict(edge) for edge in draw(st.lists(st.sampled_from(edges), max_size=2))] if edges else []
    if draw(st.booleans()):  # edges in the order of their dst, as traces record them: nothing to sort
        at = dict(zip(ids, range(n)))
        edges.sort(key=lambda edge: at.get(edge["dst"], -1))
    costs = {"wall_clock_s": draw(st.sampled_from(TIMES))} if draw(st.booleans()) else {}
    return {"trace_id": "random", "events": events, "edges": edges, "costs": costs}


def outcome(analysis, *args) -> str:
    try:
        return json.dumps(analysis(*args))
    except Exception as error:  # a trace may fail: it must fail the same way
        return type(error).__name__


def from_columns(trace: dict, as_arrays: bool = False) -> metrics.TraceGraph:
    """The graph of the trace's columns, each edge's ends given by position as the store gives them (the last of
    an id given twice, None for no event); `as_arrays`: when every end is an event, as a large stored trace's are
    given, ends as int64 arrays and edge types as codes."""
    events, edges = trace["events"], trace["edges"]
    at = {e["id"]: k for k, e in enumerate(events)}
    columns = {key: [e.get(key) for e in events] for key in EVENT_FIELDS}
    columns["tokens"] = [event_tokens(e) for e in events]
    edge_ids = [e["src"] for e in edges], [e["dst"] for e in edges]
    ends = [at.get(e["src"]) for e in edges], [at.get(e["dst"]) for e in edges]
    kinds = [e["type"] for e in edges]
    if as_arrays and None not in ends[0] + ends[1]:
        names = list(dict.fromkeys(kinds))
        ends = tuple(np.array(end, np.int64) for end in ends)
        kinds = metrics.Coded(np.array([names.index(kind) for kind in kinds], np.int32), names)
    return graph_from_columns([e["id"] for e in events], [e["t"] for e in events], [e["type"] for e in events],
                              [e["agent"] for e in events], lambda: edge_ids, kinds, columns, ends)


@settings(max_examples=400, deadline=None)
@given(traces())
def test_random_graphs_are_analysed_as_before(trace):
    before = outcome(analyse_as_it_was, trace)
    head = {key: value for key, value in trace.items() if key not in ("events", "edges")}
    for arrays_from in (metrics.ARRAYS_FROM, 0):  # lists, then arrays
        with patch.object(metrics, "ARRAYS_FROM", arrays_from):
            assert outcome(analyse, trace) == before
            assert graph_as_read_by_credit(metrics.analyse_graph, trace) == graph_as_read_by_credit(
                analyse_graph_as_it_was, trace)
            assert outcome(lambda: analyse(head, from_columns(trace))) == before
            assert outcome(lambda: analyse(head, from_columns(trace, as_arrays=True))) == before
