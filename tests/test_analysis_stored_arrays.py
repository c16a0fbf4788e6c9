"""A stored large trace's graph is built on numpy arrays (from metrics.ARRAYS_FROM events: its edges' ends read from
Arrow without a copy, its edge types and its events' types, agents, roles, `to` and `tool` as codes); lowered here
to every trace, the awkward stored traces of test_analyst give, through that way, what read_trace's dicts give."""

import json
from unittest.mock import patch

from test_analyst import awkward_traces, odd_trace

from app.domain import metrics
from app.domain.analysis import analyse
from app.store import traces as trace_store
from app.store.writes import store_traces

GRAPH_FIELDS = ("ids", "t", "types", "agents", "order", "rank", "path_src", "path_dst", "kinds", "src", "dst",
                "ignored", "spawner", "spawn_t", "despawn_t", "edge_src", "edge_dst", "edge_types", "in_order",
                "forward_src", "forward_dst", "tokens", "roles")


def test_stored_traces_analysed_on_arrays_give_what_their_rebuilt_events_give(db):
    sent = awkward_traces() + [odd_trace()]
    store_traces(db, sent)
    read = {trace["trace_id"]: trace_store.read_trace(db, trace["trace_id"]) for trace in sent}
    tables = trace_store.read_trace_tables(db, list(read))
    with patch.object(metrics, "ARRAYS_FROM", 0):
        pairs = trace_store.graphs_from_tables(*tables)
    assert sum(g.ends is not None for _, g in pairs) >= len(pairs) - 1  # all but the empty trace took the arrays
    assert any(g.kind_codes is not None for _, g in pairs)  # edge types as codes: no edge to no event
    assert all(g.codes is not None and isinstance(g.columns["tool"], metrics.Coded)
               and isinstance(g.columns["role"], metrics.Coded) for _, g in pairs)
    for trace, g in pairs:
        whole = read[trace["trace_id"]]
        reference = metrics.analyse_graph(whole)
        for name in GRAPH_FIELDS:
            assert repr(getattr(g, name)) == repr(getattr(reference, name)), (trace["trace_id"], name)
        assert json.dumps(analyse(trace, g)) == json.dumps(analyse(whole)), trace["trace_id"]
