"""Rollout groups: the traces sharing a value of one key (a task's rollouts, for GRPO-style comparisons), read with
their reward statistics aggregated by DuckDB from the typed reward rows, never a row per trace brought into Python
for a page of groups. A trace whose key is NULL (no system, no topology) is in no group."""

from app.domain.refusals import Refusal
from app.store.db import Database
from app.store.traces import METRICS_JOIN

# The trace fields a group may be keyed by: the trace format's metadata. Its other top-level fields (events, edges,
# rewards, costs, metrics) are no group key, and it admits no further ones.
GROUP_BY = ("task_id", "system", "topology")


class GroupByRefused(Refusal, ValueError):
    """`by` names no field traces are grouped by (a reward channel, an unknown field)."""

    status = 400

    def details(self) -> dict:
        return {"parameter": "by"}


def check_group_by(by: str) -> str:
    """`by` when traces may be grouped by it, else GroupByRefused: a constant of GROUP_BY is all that reaches SQL."""
    if by not in GROUP_BY:
        raise GroupByRefused(f"by: traces are grouped by one of {', '.join(GROUP_BY)}, not '{by}' (rewards are "
                             f"what a group compares, never its key)")
    return by


def group_keys(db: Database, by: str) -> list[str]:
    """Every group's key, in key order."""
    column = check_group_by(by)
    return [r["key"] for r in db.fetchall(
        f"SELECT DISTINCT {column} AS key FROM traces WHERE {column} IS NOT NULL ORDER BY key")]


def group_trace_ids(db: Database, by: str, key: str) -> list[str]:
    """The trace ids of one group, in id order (none for a key no trace has)."""
    column = check_group_by(by)
    return [r["trace_id"] for r in db.fetchall(
        f"SELECT trace_id FROM traces WHERE {column} = ? ORDER BY trace_id", [key])]
