"""read_trace_tables reads events and edges with no ORDER BY and puts their rows in (trace_id, seq) order itself
(traces._in_order): whatever order the rows come in, the tables equal those the SQL's ORDER BY gives."""

import numpy as np
import pyarrow as pa
import pytest

from app.domain.generate import generate_swarm
from app.store import traces as trace_store
from app.store.writes import store_traces


def ordered(db, sql: str, ids: list[str]) -> pa.Table:
    return db.arrow(sql + " ORDER BY trace, seq", [sorted(ids)]).drop_columns(["seq"])


def stored(db) -> list[str]:
    """Three traces written in two requests, the later one first by id: stored out of trace_id order."""
    first, second, third = (generate_swarm(4, 300, seed=seed) for seed in range(3))
    first["trace_id"], second["trace_id"], third["trace_id"] = "c", "a", "b"
    store_traces(db, [first])
    store_traces(db, [second, third])
    return ["c", "a", "b"]


def test_tables_come_in_trace_and_position_order(db):
    ids = stored(db)
    heads, events, edges = trace_store.read_trace_tables(db, ids)
    assert [head["trace_id"] for head in heads] == ["a", "b", "c"]
    assert events.equals(ordered(db, trace_store.EVENT_NUMBERS, ids))
    assert edges.equals(ordered(db, trace_store.EDGE_ENDS, ids))


@pytest.mark.parametrize("shuffle", ["runs", "rows", "none"])
def test_rows_in_any_order_are_put_in_order(db, shuffle):
    """Runs out of order (as DuckDB's threads hand them back), or rows in any order, are put back as slices."""
    ids = stored(db)
    for sql in (trace_store.EVENT_NUMBERS, trace_store.EDGE_ENDS):
        want = ordered(db, sql, ids)
        rows = db.arrow(sql + " ORDER BY trace, seq", [sorted(ids)])
        n, rng = rows.num_rows, np.random.default_rng(7)
        if shuffle == "runs":
            cuts = np.sort(rng.choice(np.arange(1, n), 40, replace=False))
            runs = list(zip(np.append(0, cuts).tolist(), np.append(cuts, n).tolist()))
            rng.shuffle(runs)
            rows = pa.concat_tables([rows.slice(lo, hi - lo) for lo, hi in runs])
        elif shuffle == "rows":
            rows = rows.take(rng.permutation(n))
        got = trace_store._in_order(rows)
        assert got.equals(want)
        if shuffle == "runs":
            assert got.column("trace").num_chunks > 1  # the runs as slices, not copied


def test_an_empty_read_has_the_columns(db):
    _, events, edges = trace_store.read_trace_tables(db, ["none"])
    assert events.num_rows == edges.num_rows == 0
    assert "seq" not in events.column_names and "t" in events.column_names
