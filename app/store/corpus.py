"""Corpus aggregates for the dashboard and the audit page: measures of every trace (trace-list sort keys) as
extents, a few points or counts in 2-D bins, and the audit's rows and totals by rule, each computed by DuckDB from the
typed rows index_traces keeps (a row of measures per trace, a row per reward), never a row per trace brought into
Python and never a join of every trace to another table."""

from app.store.db import Database
from app.store.traces import RANGE_KEYS, REWARD_SORT_PREFIX


def _channel(key: str) -> str | None:
    """The reward channel a measure key names (reward:<channel>), None for a column's key."""
    return key.removeprefix(REWARD_SORT_PREFIX) if key.startswith(REWARD_SORT_PREFIX) else None


def _column(key: str) -> str:
    """The trace_measures column of a measure key that is no reward (the key itself): ValueError for another."""
    if key not in RANGE_KEYS:
        raise ValueError(f"'{key}' is no measure; one of {', '.join(RANGE_KEYS)} or reward:<channel>")
    return key


def _measures(keys: list[str]) -> tuple[str, dict]:
    """A SELECT of every trace's id and its measures x0, x1, ... (doubles, in the order of `keys`) from its row of
    trace_measures, and its named parameters (a reward's channel, read from the trace's map)."""
    names, params = ["trace_id"], {}
    for n, key in enumerate(keys):
        channel = _channel(key)
        names.append(f"CAST({_column(key)} AS DOUBLE) AS x{n}" if channel is None else f"rewards[$channel{n}] AS x{n}")
        params |= {} if channel is None else {f"channel{n}": channel}
    return f"SELECT {', '.join(names)} FROM trace_measures", params


EXTENT = "count({x}) AS n{n}, min({x}) AS low{n}, max({x}) AS high{n}, bool_and({x} = floor({x})) AS whole{n}"
EXTENT_FIELDS = ("n", "low", "high", "whole")
NO_EXTENT = {"n": 0, "low": None, "high": None, "whole": None}


def measure_rows(db: Database, keys: list[str], limit: int) -> list[dict]:
    """Up to `limit` traces with their measures (x0, x1, ... in the order of `keys`), in id order."""
    measures, params = _measures(keys)
    return db.fetchall(f"SELECT * FROM ({measures}) ORDER BY trace_id LIMIT $limit", params | {"limit": limit})


# Each measure's bin on its grid, whose edge k is k * num / den (app/domain/charts.py Grid and bin_of): the guess of
# one division, set right by the two edges around it, each computed as charts.edge computes it (doubles, in the same
# order); on a grid of edges 1 apart that guess is exact. A measure is binned once however many plots draw it; a
# trace missing it has bin NULL.
BIN = "(k{n} - (x{n} < k{n} * $num{n} / $den{n})::INT + (x{n} >= (k{n} + 1) * $num{n} / $den{n})::INT)::INT AS i{n}"
UNIT_BIN = "k{n}::INT AS i{n}"


def measure_bins(db: Database, grids: dict, plots: list[tuple[str, str]]) -> list[dict[tuple[int, int], int]]:
    """Per plot (x key, y key): the traces with both measures counted per bin of the keys' `grids`, {(i, j): traces};
    one scan of the measures for every plot (a reward read from each trace's map: unnesting the maps, or joining
    the reward rows to the traces, costs twice as much)."""
    if not plots:
        return []
    keys = sorted(grids)
    measures, params = _measures(keys)
    for n, key in enumerate(keys):
        params |= {f"num{n}": float(grids[key].num), f"den{n}": float(grids[key].den)}
    floors = ", ".join(f"floor(x{n} * $den{n} / $num{n}) AS k{n}" for n in range(len(keys)))
    bins = ", ".join((UNIT_BIN if (grids[key].num, grids[key].den) == (1, 1) else BIN).format(n=n)
                     for n, key in enumerate(keys))
    sql = f"WITH v AS MATERIALIZED (SELECT {bins} FROM (SELECT *, {floors} FROM ({measures}))) " + " UNION ALL ".join(
        f"SELECT {n} AS plot, i{keys.index(x)} AS i, i{keys.index(y)} AS j, count(*) AS n FROM v GROUP BY ALL"
        for n, (x, y) in enumerate(plots))
    counts: list[dict] = [{} for _ in plots]
    for plot, i, j, n in db.execute(sql, params).fetchall():
        if i is not None and j is not None:
            counts[plot][(i, j)] = n
    return counts


COUNTED = ("topology", "system")  # the columns corpus_counts counts traces by


def corpus_counts(db: Database, keys: list[str] = ()) -> dict:
    """The number of traces, the traces per topology and per system, the findings per rule (each most first), and
    per measure of `keys` its extent (`extents`: how many traces have it, `n`, its least and greatest value and
    whether every value is `whole`). The counts and the columns' extents come from one read of the measures, the
    reward channels' from one of their rows beside it: on a lake every read of a table costs its catalog round
    trips, and the dashboard's bins wait for these extents."""
    columns = [key for key in keys if _channel(key) is None]
    channels = [_channel(key) for key in keys if _channel(key) is not None]

    def of_measures() -> list[dict]:
        kept = "".join(f", {_column(key)}" for key in columns)
        extents = "".join(f", {EXTENT.format(x=f'CAST({key} AS DOUBLE)', n=n)}" for n, key in enumerate(columns))
        return db.fetchall(
            f"WITH m AS MATERIALIZED (SELECT topology, system, rules{kept} FROM trace_measures) "
            f"SELECT 'traces' AS what, NULL::VARCHAR AS value, count(*) AS n{extents} FROM m "
            + "".join(f"UNION ALL BY NAME SELECT '{column}' AS what, {column} AS value, count(*) AS n FROM m "
                      f"GROUP BY {column} " for column in COUNTED)
            + "UNION ALL BY NAME SELECT 'findings' AS what, rule AS value, sum(n)::BIGINT AS n "
            f"FROM {rule_counts('m')} GROUP BY rule ORDER BY what, n DESC, value")

    def of_channels() -> dict:
        if not channels:
            return {}
        found = {row["channel"]: row for row in db.fetchall(
            "SELECT channel, " + EXTENT.format(x="value", n="") + " FROM trace_rewards "
            "WHERE channel IN (SELECT unnest(?::VARCHAR[])) GROUP BY channel", [channels])}
        return {REWARD_SORT_PREFIX + channel: {field: found.get(channel, NO_EXTENT)[field] for field in EXTENT_FIELDS}
                for channel in channels}

    rows, extents = db.together(of_measures, of_channels)
    counts = {"traces": 0, "findings": {}} | {column: [] for column in COUNTED}
    for row in rows:
        what = row["what"]
        if what == "traces":
            counts["traces"] = row["n"]
            extents |= {key: {field: row[f"{field}{n}"] for field in EXTENT_FIELDS} for n, key in enumerate(columns)}
        elif what == "findings":
            counts["findings"][row["value"]] = row["n"]
        else:
            counts[what].append({"value": row["value"], "n": row["n"]})
    counts["extents"] = {key: extents[key] for key in keys}
    return counts


# Sort keys of the audit table besides a rule's name (its findings in the trace).
AUDIT_SORTS = {"trace_id": "trace_id", "error": "errors", "warning": "warnings", "info": "infos"}
# The audited traces: those with a stored analysis, whose severity totals (and `rules`) are never NULL; told by a
# total, a column of integers, rather than by the maps (testing every trace's map read them all).
AUDIT_PAGE = "SELECT trace_id, errors, warnings, infos, rules FROM trace_measures WHERE errors IS NOT NULL " \
             "ORDER BY {key} {order}, trace_id {order} LIMIT ? OFFSET ?"


def audit_page(db: Database, sort: str, limit: int, offset: int) -> tuple[list[dict], int]:
    """One page of the audited traces with their finding counts by rule and severity totals, sorted by `sort` (a
    key of AUDIT_SORTS or a rule, - first for descending), and how many traces were audited."""
    key = sort.lstrip("-")
    order = "DESC" if sort.startswith("-") else "ASC"
    rule = [] if key in AUDIT_SORTS else [key]
    rows, total = db.together(
        lambda: db.fetchall(AUDIT_PAGE.format(key=AUDIT_SORTS.get(key, "coalesce(rules[?], 0)"), order=order),
                            rule + [limit, offset]),
        lambda: db.scalar("SELECT count(errors) FROM trace_measures"))
    return [{"trace_id": r["trace_id"], "error": r["errors"], "warning": r["warnings"], "info": r["infos"],
             "rules": r["rules"]} for r in rows], total


def rule_counts(measures: str) -> str:
    """A trace's findings per rule as rows (rule, n), from `measures` (trace_measures, or a selection of its rows
    that keeps `rules`)."""
    return f"(SELECT unnest(map_keys(rules)) AS rule, unnest(map_values(rules)) AS n FROM {measures})"


RULE_COUNTS = rule_counts("trace_measures")


def rule_totals(db: Database) -> dict[str, dict]:
    """Per rule with findings: its findings and the traces they are in, across the corpus."""
    return {r["rule"]: r for r in db.fetchall(
        f"SELECT rule, sum(n)::BIGINT AS findings, count(*) AS traces FROM {RULE_COUNTS} GROUP BY rule")}

