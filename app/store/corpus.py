"""Corpus aggregates for the dashboard: measures of every trace (trace-list sort keys) as extents, a few points or
counts in 2-D bins, each computed by DuckDB in one scan, never a row per trace brought into Python."""

from app.store.db import Database
from app.store.traces import REWARD_SORT_PREFIX, REWARDS_MAP, TRACE_FROM, TRACE_SORTS


def _measures(keys: list[str]) -> tuple[str, list]:
    """A SELECT of every trace's id and its measures x0, x1, ... (doubles, in the order of `keys`: trace-list sort
    keys read as the trace list reads them), the rewards of each trace parsed once for all its channels."""
    rewards = [key.startswith(REWARD_SORT_PREFIX) for key in keys]
    inner = ["t.trace_id", REWARDS_MAP.format("t.rewards") + " AS r"] + [
        f"CAST({TRACE_SORTS[key]} AS DOUBLE) AS x{n}" for n, key in enumerate(keys) if not rewards[n]]
    outer = ["trace_id"] + [f"r[?] AS x{n}" if rewards[n] else f"x{n}" for n in range(len(keys))]
    return (f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)}{TRACE_FROM})",
            [key.removeprefix(REWARD_SORT_PREFIX) for n, key in enumerate(keys) if rewards[n]])


def trace_count(db: Database) -> int:
    return db.scalar("SELECT count(*) FROM traces")


def measure_extents(db: Database, keys: list[str]) -> dict[str, dict]:
    """Per measure: how many traces have it (`n`), its least and greatest value and whether every value is
    `whole`."""
    measures, params = _measures(keys)
    row = db.fetchone("SELECT " + ", ".join(
        f"count(x{n}) AS n{n}, min(x{n}) AS low{n}, max(x{n}) AS high{n}, bool_and(x{n} = floor(x{n})) AS whole{n}"
        for n in range(len(keys))) + f" FROM ({measures})", params)
    return {key: {field: row[f"{field}{n}"] for field in ("n", "low", "high", "whole")} for n, key in enumerate(keys)}


def measure_rows(db: Database, keys: list[str], limit: int) -> list[dict]:
    """Up to `limit` traces with their measures (x0, x1, ... in the order of `keys`), in id order."""
    measures, params = _measures(keys)
    return db.fetchall(f"SELECT * FROM ({measures}) ORDER BY trace_id LIMIT ?", params + [limit])


# The traces of one plot counted per bin: measures x{a} and x{b} of `v`, each on a grid whose edge k is k * num / den
# (app/domain/charts.py Grid and bin_of). A value's bin is the guess of one division, set right by the two edges
# around it, each computed as charts.edge computes it (doubles, in the same order). A trace missing either measure
# counts in a bin numbered None, left out after counting (a filter before it would be pushed down to the scan and
# read every trace's rewards once more).
PLOT_BINS = """
    SELECT {plot} AS plot, kx - (x < kx * xn / xd)::INT + (x >= (kx + 1) * xn / xd)::INT AS i,
           ky - (y < ky * yn / yd)::INT + (y >= (ky + 1) * yn / yd)::INT AS j, count(*) AS n
    FROM (SELECT x{a} AS x, x{b} AS y, xn, xd, yn, yd, floor(x{a} * xd / xn) AS kx, floor(x{b} * yd / yn) AS ky
          FROM v, (SELECT ?::DOUBLE AS xn, ?::DOUBLE AS xd, ?::DOUBLE AS yn, ?::DOUBLE AS yd))
    GROUP BY ALL
"""


def measure_bins(db: Database, keys: list[str], plots: list[tuple]) -> list[dict[tuple[int, int], int]]:
    """Per plot (x key, x grid, y key, y grid): the traces with both measures counted per bin, {(i, j): traces};
    one scan of the traces for every plot."""
    if not plots:
        return []
    measures, params = _measures(keys)
    sql = f"WITH v AS MATERIALIZED ({measures}) " + " UNION ALL ".join(
        PLOT_BINS.format(plot=n, a=keys.index(x), b=keys.index(y)) for n, (x, _, y, _) in enumerate(plots))
    for _, x_grid, _, y_grid in plots:
        params += [float(x_grid.num), float(x_grid.den), float(y_grid.num), float(y_grid.den)]
    counts: list[dict] = [{} for _ in plots]
    for plot, i, j, n in db.execute(sql, params).fetchall():
        if i is not None and j is not None:
            counts[plot][(int(i), int(j))] = n
    return counts


def counts_by(db: Database, column: str) -> list[dict]:
    """Traces per value of `column` (system or topology: a constant, never user text), most first."""
    return db.fetchall(f"SELECT {column} AS value, count(*) AS n FROM traces GROUP BY ALL ORDER BY n DESC, value")
