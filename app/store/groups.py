"""Rollout groups: the traces sharing a value of one key (a task's rollouts, for GRPO-style comparisons), read with
their reward statistics aggregated by DuckDB from the typed reward rows, never a row per trace brought into Python
for a page of groups. A trace whose key is NULL (no system, no topology) is in no group."""

from app.domain.refusals import Refusal
from app.store.db import Database

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


def group_count(db: Database, by: str) -> int:
    column = check_group_by(by)
    return db.scalar(f"SELECT count(DISTINCT {column}) FROM traces")


# Reward statistics per group and channel, over the traces of the groups in `page` (population std: a group is
# every rollout of its prompt, not a sample of them).
REWARD_STATS = """
    SELECT page.key, r.channel, avg(r.value) AS mean, stddev_pop(r.value) AS std, min(r.value) AS min,
           max(r.value) AS max
    FROM page JOIN traces t ON t.{column} = page.key JOIN trace_rewards r ON r.trace_id = t.trace_id
    GROUP BY ALL
"""
# One page of groups: each group's key, size and the statistic it is sorted by (of one channel's rewards, NULL
# without a channel or for a group none of whose traces has it), numbered in sort order.
GROUP_PAGE = """
    WITH sizes AS (SELECT t.{column} AS key, count(*) AS n, {stat}(r.value) AS stat
                   FROM traces t LEFT JOIN (SELECT trace_id, value FROM trace_rewards WHERE channel = ?) r
                        ON r.trace_id = t.trace_id
                   WHERE t.{column} IS NOT NULL GROUP BY t.{column}),
         page AS (SELECT key, n, row_number() OVER (ORDER BY {order_by} {order} NULLS LAST, key {order}) AS place
                  FROM sizes QUALIFY place > ? AND place <= ?),
         stats AS ({stats})
    SELECT page.key, page.n, page.place, stats.channel, stats.mean, stats.std, stats.min, stats.max
    FROM page LEFT JOIN stats USING (key) ORDER BY page.place, stats.channel
"""
# SQL of the statistics a group list may be sorted by (app/domain/groups.py STATS), and of its other keys.
STAT_SQL = {"mean": "avg", "std": "stddev_pop", "min": "min", "max": "max"}
SORT_SQL = {"key": "key", "n": "n"}


def group_page(db: Database, by: str, sort: tuple[str, str | None, bool], limit: int, offset: int) -> list[dict]:
    """One page of groups, sorted by `sort` (domain.groups.parse_group_sort), each {key, n, rewards: {channel:
    {mean, std, min, max}}}: one statement, every aggregate computed by DuckDB."""
    column = check_group_by(by)
    name, channel, descending = sort
    sql = GROUP_PAGE.format(column=column, stat=STAT_SQL.get(name, "avg"), order_by=SORT_SQL.get(name, "stat"),
                            order="DESC" if descending else "ASC", stats=REWARD_STATS.format(column=column))
    groups: dict[int, dict] = {}
    for row in db.fetchall(sql, [channel, offset, offset + limit]):
        group = groups.setdefault(row["place"], {"key": row["key"], "n": row["n"], "rewards": {}})
        if row["channel"] is not None:
            group["rewards"][row["channel"]] = {stat: row[stat] for stat in STAT_SQL}
    return list(groups.values())


def group_stats(db: Database, by: str, key: str) -> dict[str, dict]:
    """One group's reward statistics per channel, as group_page computes them."""
    column = check_group_by(by)
    rows = db.fetchall("WITH page AS (SELECT ?::VARCHAR AS key) " + REWARD_STATS.format(column=column), [key])
    return {row["channel"]: {stat: row[stat] for stat in STAT_SQL} for row in rows}


# A rollout's rewards and structure: the typed measures (kept for every trace), and the spawns of its stored
# analysis (NULL until the trace is analysed).
GROUP_ROLLOUTS = """
    SELECT t.trace_id, coalesce(m.rewards, MAP {{}}::MAP(VARCHAR, DOUBLE)) AS rewards, m.agents, m.events,
           CAST(a.metrics->>'spawns' AS INTEGER) AS spawns, m.critical_path_steps AS critical_steps,
           m.parallelism_speedup AS parallel_speedup
    FROM traces t JOIN trace_measures m ON m.trace_id = t.trace_id
    LEFT JOIN trace_metrics a ON a.trace_id = t.trace_id AND a.ingested_at = t.ingested_at
    WHERE t.{column} = ? ORDER BY t.trace_id
"""


def group_rollouts(db: Database, by: str, key: str) -> list[dict]:
    """The rollouts of one group with their rewards and structure, in id order."""
    return db.fetchall(GROUP_ROLLOUTS.format(column=check_group_by(by)), [key])


def channel_extents(db: Database) -> dict[str, tuple[float, float]]:
    """Each reward channel's least and greatest value across the corpus: the scale a group's spread is drawn on."""
    return {r["channel"]: (r["low"], r["high"]) for r in db.fetchall(
        "SELECT channel, min(value) AS low, max(value) AS high FROM trace_rewards GROUP BY channel")}
