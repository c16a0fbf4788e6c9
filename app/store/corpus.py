"""Corpus aggregates for the dashboard and the audit page: measures of every trace (trace-list sort keys) as
extents, a few points or counts in 2-D bins, and the audit's rows and totals by rule, each computed by DuckDB from
typed columns (rewards and findings as index_traces keeps them), never a row per trace brought into Python."""

from app.store.db import Database
from app.store.traces import METRICS_JOIN, REWARD_SORT_PREFIX, TRACE_SORTS


def _channel(key: str) -> str | None:
    """The reward channel a measure key names (reward:<channel>), None for a column's key."""
    return key.removeprefix(REWARD_SORT_PREFIX) if key.startswith(REWARD_SORT_PREFIX) else None


def _measures(keys: list[str]) -> str:
    """A SELECT of every trace's id and its measures x0, x1, ... that are columns (doubles, numbered by their place in
    `keys`); the stored analysis is joined only when a measure reads it. Reward measures are rows of trace_rewards."""
    columns = {n: TRACE_SORTS[key] for n, key in enumerate(keys) if _channel(key) is None}
    join = METRICS_JOIN if any(expression.startswith("m.") for expression in columns.values()) else " "
    return ("SELECT " + ", ".join(["t.trace_id"] + [f"CAST({expression} AS DOUBLE) AS x{n}"
                                                    for n, expression in columns.items()]) + " FROM traces t" + join)


def trace_count(db: Database) -> int:
    return db.scalar("SELECT count(*) FROM traces")


EXTENT = "count({x}) AS n{n}, min({x}) AS low{n}, max({x}) AS high{n}, bool_and({x} = floor({x})) AS whole{n}"
EXTENT_FIELDS = ("n", "low", "high", "whole")
NO_EXTENT = {"n": 0, "low": None, "high": None, "whole": None}


def measure_extents(db: Database, keys: list[str]) -> dict[str, dict]:
    """Per measure: how many traces have it (`n`), its least and greatest value and whether every value is
    `whole`; the columns in one scan of the traces, the reward channels in one of their rows."""
    out = {}
    columns = [n for n, key in enumerate(keys) if _channel(key) is None]
    if columns:
        row = db.fetchone("SELECT " + ", ".join(EXTENT.format(x=f"x{n}", n=n) for n in columns)
                          + f" FROM ({_measures(keys)})")
        out = {keys[n]: {field: row[f"{field}{n}"] for field in EXTENT_FIELDS} for n in columns}
    channels = [_channel(key) for key in keys if _channel(key) is not None]
    if channels:
        found = {row["channel"]: row for row in db.fetchall(
            "SELECT channel, " + EXTENT.format(x="value", n="") + " FROM trace_rewards "
            "WHERE channel IN (SELECT unnest(?::VARCHAR[])) GROUP BY channel", [channels])}
        for channel in channels:
            out[REWARD_SORT_PREFIX + channel] = {field: found.get(channel, NO_EXTENT)[field] for field in EXTENT_FIELDS}
    return {key: out[key] for key in keys}


def measure_rows(db: Database, keys: list[str], limit: int) -> list[dict]:
    """Up to `limit` traces with their measures (x0, x1, ... in the order of `keys`), in id order; a join per reward
    channel, for the few traces drawn as points."""
    rewards = [(n, _channel(key)) for n, key in enumerate(keys) if _channel(key) is not None]
    joins = "".join(f" LEFT JOIN trace_rewards r{n} ON r{n}.trace_id = v.trace_id AND r{n}.channel = ?"
                    for n, _ in rewards)
    names = ", ".join(f"r{n}.value AS x{n}" if _channel(key) is not None else f"v.x{n}" for n, key in enumerate(keys))
    return db.fetchall(f"SELECT v.trace_id, {names} FROM ({_measures(keys)}) v{joins} ORDER BY v.trace_id LIMIT ?",
                       [channel for _, channel in rewards] + [limit])


# The traces of one plot counted per bin: its measures x and y (from `source`), each on a grid whose edge k is
# k * num / den (app/domain/charts.py Grid and bin_of). A value's bin is the guess of one division, set right by the
# two edges around it, each computed as charts.edge computes it (doubles, in the same order). A trace missing either
# measure counts in a bin numbered None, left out after counting.
PLOT_BINS = """
    SELECT {plot} AS plot, kx - (x < kx * xn / xd)::INT + (x >= (kx + 1) * xn / xd)::INT AS i,
           ky - (y < ky * yn / yd)::INT + (y >= (ky + 1) * yn / yd)::INT AS j, count(*) AS n
    FROM (SELECT x, y, xn, xd, yn, yd, floor(x * xd / xn) AS kx, floor(y * yd / yn) AS ky
          FROM {source}, (SELECT ?::DOUBLE AS xn, ?::DOUBLE AS xd, ?::DOUBLE AS yn, ?::DOUBLE AS yd))
    GROUP BY ALL
"""
# A plot's measures by what its axes are: two columns of every trace (`v`), a column and a reward of each trace with
# the channel (`vr`: every trace's columns joined to its rewards once for all plots), or two rewards.
COLUMNS_SOURCE = "(SELECT x{a} AS x, x{b} AS y FROM v)"
COLUMN_REWARD_SOURCE = "(SELECT x{a} AS {column}, value AS {reward} FROM vr WHERE channel = ?)"
REWARDS_SOURCE = """(SELECT a.value AS x, b.value AS y FROM trace_rewards a JOIN trace_rewards b
                     ON b.trace_id = a.trace_id AND a.channel = ? AND b.channel = ?)"""


def _source(keys: list[str], x: str, y: str) -> tuple[str, list]:
    """The relation of a plot's measures (`x`, `y`) and its parameters (see COLUMNS_SOURCE)."""
    channels = [_channel(key) for key in (x, y)]
    if None not in channels:
        return REWARDS_SOURCE, channels
    if channels == [None, None]:
        return COLUMNS_SOURCE.format(a=keys.index(x), b=keys.index(y)), []
    column, reward = ("x", "y") if channels[0] is None else ("y", "x")
    return (COLUMN_REWARD_SOURCE.format(a=keys.index(x if column == "x" else y), column=column, reward=reward),
            [channels[1] if column == "x" else channels[0]])


def measure_bins(db: Database, keys: list[str], plots: list[tuple]) -> list[dict[tuple[int, int], int]]:
    """Per plot (x key, x grid, y key, y grid): the traces with both measures counted per bin, {(i, j): traces};
    one statement for every plot, reading the traces (and their rewards) once."""
    if not plots:
        return []
    sql = f"WITH v AS MATERIALIZED ({_measures(keys)})"
    if any((_channel(x) is None) != (_channel(y) is None) for x, _, y, _ in plots):
        sql += ", vr AS MATERIALIZED (SELECT v.*, r.channel, r.value FROM v JOIN trace_rewards r USING (trace_id))"
    params: list = []
    selects = []
    for n, (x, x_grid, y, y_grid) in enumerate(plots):
        source, source_params = _source(keys, x, y)
        selects.append(PLOT_BINS.format(plot=n, source=source))
        params += source_params + [float(x_grid.num), float(x_grid.den), float(y_grid.num), float(y_grid.den)]
    counts: list[dict] = [{} for _ in plots]
    for plot, i, j, n in db.execute(sql + " " + " UNION ALL ".join(selects), params).fetchall():
        if i is not None and j is not None:
            counts[plot][(int(i), int(j))] = n
    return counts


def counts_by(db: Database, column: str) -> list[dict]:
    """Traces per value of `column` (system or topology: a constant, never user text), most first."""
    return db.fetchall(f"SELECT {column} AS value, count(*) AS n FROM traces GROUP BY ALL ORDER BY n DESC, value")


# Sort keys of the audit table besides a rule's name (its findings in the trace).
AUDIT_SORTS = {"trace_id": "trace_id", "error": "errors", "warning": "warnings", "info": "infos"}
AUDIT_PAGE = "SELECT trace_id, errors, warnings, infos, rules FROM trace_audits " \
             "ORDER BY {key} {order}, trace_id {order} LIMIT ? OFFSET ?"


def audit_page(db: Database, sort: str, limit: int, offset: int) -> tuple[list[dict], int]:
    """One page of the audited traces with their finding counts by rule and severity totals, sorted by `sort` (a
    key of AUDIT_SORTS or a rule, - first for descending), and how many traces were audited."""
    key = sort.lstrip("-")
    order = "DESC" if sort.startswith("-") else "ASC"
    rule = [] if key in AUDIT_SORTS else [key]
    rows = db.fetchall(AUDIT_PAGE.format(key=AUDIT_SORTS.get(key, "coalesce(rules[?], 0)"), order=order),
                       rule + [limit, offset])
    return ([{"trace_id": r["trace_id"], "error": r["errors"], "warning": r["warnings"], "info": r["infos"],
              "rules": r["rules"]} for r in rows], db.scalar("SELECT count(*) FROM trace_audits"))


RULE_COUNTS = "(SELECT unnest(map_keys(rules)) AS rule, unnest(map_values(rules)) AS n FROM trace_audits)"


def rule_totals(db: Database) -> dict[str, dict]:
    """Per rule with findings: its findings and the traces they are in, across the corpus."""
    return {r["rule"]: r for r in db.fetchall(
        f"SELECT rule, sum(n)::BIGINT AS findings, count(*) AS traces FROM {RULE_COUNTS} GROUP BY rule")}


def findings_by_rule(db: Database) -> dict[str, int]:
    return {r["rule"]: r["n"] for r in db.fetchall(
        f"SELECT rule, sum(n)::BIGINT AS n FROM {RULE_COUNTS} GROUP BY rule ORDER BY n DESC, rule")}
