"""The typed rows the corpus pages read (trace_rewards, trace_measures: app/store/traces.py index_traces) stay what
the stored traces and analyses say after every write: ingest, replace, delete, re-analysis, and migration 0021 fills
them for a store that already holds traces."""

from collections import Counter
from pathlib import Path

from conftest import make_trace, post_json

from app.domain.audit import audit
from app.services import analysis
from app.store import traces as trace_store
from app.store.db import Database

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def late(trace_id: str, **changes) -> dict:
    """A trace with an edge back in time: a time_order finding."""
    trace = make_trace(trace_id, **changes)
    trace["edges"].append({"src": "e6", "dst": "e1", "type": "causal"})
    return trace


def stored_index(db: Database) -> tuple[dict, dict]:
    """{trace id: {channel: value}} from the reward rows, and {trace id: (events, agents, tokens, errors, warnings,
    infos, {channel: value}, {rule: findings})} from the measures, as stored."""
    rewards: dict = {}
    for row in db.fetchall("SELECT trace_id, channel, value FROM trace_rewards"):
        rewards.setdefault(row["trace_id"], {})[row["channel"]] = row["value"]
    measures = {row["trace_id"]: (row["events"], row["agents"], row["tokens"], row["errors"], row["warnings"],
                                  row["infos"], row["rewards"], row["rules"])
                for row in db.fetchall("SELECT * FROM trace_measures")}
    return rewards, measures


def expected_index(traces: list[dict]) -> tuple[dict, dict]:
    """The same, counted from the traces (every one a team of two agents) by the audit rules themselves."""
    rewards = {t["trace_id"]: {channel: float(value) for channel, value in t["rewards"].items()} for t in traces}
    measures = {}
    for trace in traces:
        findings = audit(trace)
        severities = Counter(f["severity"] for f in findings)
        measures[trace["trace_id"]] = (len(trace["events"]), 2, trace["costs"]["tokens"], severities["error"],
                                       severities["warning"], severities["info"], rewards[trace["trace_id"]],
                                       dict(Counter(f["rule"] for f in findings)))
    return {trace_id: values for trace_id, values in rewards.items() if values}, measures


def test_ingest_indexes_each_channel_and_each_rule(client, db):
    traces = [make_trace("plain"), late("late", rewards={"team": 0.5, "novel": -2}), make_trace("none", rewards={})]
    assert post_json(client, traces).status_code == 201
    rewards, measures = stored_index(db)
    assert (rewards, measures) == expected_index(traces)
    assert measures["late"][-1]["time_order"] == 1 and "time_order" not in measures["plain"][-1]


def test_a_replaced_trace_keeps_only_its_new_rows(client, db):
    post_json(client, [late("a"), make_trace("b")])
    again = make_trace("a", rewards={"other": 3})
    assert post_json(client, again, replace="true").status_code == 201
    assert stored_index(db) == expected_index([again, make_trace("b")])


def test_a_deleted_trace_leaves_no_rows(client, db):
    post_json(client, [late("a"), make_trace("b")])
    assert client.delete("/api/traces/a").status_code == 200
    assert stored_index(db) == expected_index([make_trace("b")])


def test_a_new_analysis_makes_the_rows_again(client, db):
    post_json(client, [late("a"), make_trace("b")])
    # as if an older version of the rules had found something else, and indexed it
    db.execute("UPDATE trace_metrics SET analysis_version = 0")
    db.execute("INSERT INTO audit_findings VALUES ('b', 99, 'orphan_return', 'warning', 'stale', '[]')")
    db.execute("UPDATE trace_measures SET warnings = 9, rules = MAP {'orphan_return': 1}")
    assert analysis.ensure_all(db) == 2
    assert stored_index(db) == expected_index([late("a"), make_trace("b")])


def test_the_migration_fills_the_rows_of_the_traces_already_stored(client, db):
    traces = [late("a"), make_trace("b", rewards={"team": 1, "x": 0.125})]
    post_json(client, traces)
    db.execute("DROP TABLE trace_rewards")
    db.execute("DROP TABLE trace_measures")
    db.execute("DELETE FROM schema_migrations WHERE version = 21")
    assert db.migrate(MIGRATIONS) == ["0021_typed_corpus_index.sql"]
    assert stored_index(db) == expected_index(traces)


def test_the_list_columns_migration_copies_each_traces_json(client, db):
    traces = [late("a", metrics={"task_success": 0.5}), make_trace("b", rewards={"team": 1, "x": 0.125})]
    post_json(client, traces)
    db.execute("CREATE TABLE measures_0023 AS SELECT * EXCLUDE (rewards_json, costs_json, metrics_json) "
               "FROM trace_measures")  # the table as 0021 made it
    db.execute("DROP TABLE trace_measures")
    db.execute("ALTER TABLE measures_0023 RENAME TO trace_measures")
    db.execute("DELETE FROM schema_migrations WHERE version = 24")
    assert db.migrate(MIGRATIONS) == ["0024_trace_list_columns.sql"]
    assert stored_index(db) == expected_index(traces)
    assert db.execute("SELECT trace_id, rewards_json, costs_json, metrics_json FROM trace_measures ORDER BY 1")\
        .fetchall() == db.execute("SELECT trace_id, rewards, costs, metrics FROM traces ORDER BY 1").fetchall()


def test_a_page_of_the_list_says_what_each_traces_summary_says(client, db):
    post_json(client, [late("a", rewards={"team": 0.5}), make_trace("b", rewards={"team": 2, "x": 0.125}),
                       make_trace("c", costs={"tokens": 2**60, "wall_clock_s": 1.5}, metrics={"steps": 3})])
    items, total = trace_store.list_traces(db, sort="-reward:team")
    assert (total, [item["trace_id"] for item in items]) == (3, ["b", "c", "a"])
    assert items == [trace_store.read_trace_summary(db, item["trace_id"]) for item in items]
