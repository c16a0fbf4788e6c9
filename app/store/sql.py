"""The one place a statement runs: `execute` logs it with its time (at DEBUG on the `orchestrace.sql` logger, which
ORCHESTRACE_TRACE_SQL turns on) and adds it to the trace of the request that ran it, when the request asked for
one (`traced_statements`, app/web/sqltrace.py)."""

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import duckdb

log = logging.getLogger("orchestrace.sql")
# The statements of the request being served, when it asked for its trace: (sql, params, milliseconds).
_statements: ContextVar[list | None] = ContextVar("statements", default=None)


def execute(cur: duckdb.DuckDBPyConnection, sql: str, params=None):
    """Run one statement with bound parameters on `cur`; log it with its time, and trace it when asked."""
    start = time.perf_counter()
    result = cur.execute(sql, params) if params is not None else cur.execute(sql)
    elapsed_ms = (time.perf_counter() - start) * 1000
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%.1f ms  %s  %r", elapsed_ms, " ".join(sql.split()), params)
    statements = _statements.get()
    if statements is not None:
        statements.append((" ".join(sql.split()), params, elapsed_ms))
    return result


@contextmanager
def traced_statements() -> Iterator[list]:
    """Collect every statement run in this context (and the threads it hands work to) with its time."""
    statements: list = []
    token = _statements.set(statements)
    try:
        yield statements
    finally:
        _statements.reset(token)


def one_of(column: str, name: str, values: list) -> tuple[str, dict]:
    """The condition that `column` is one of `values`, bound as `$name`, and its parameter: for one value a comparison,
    which the scan filters by (skipping row groups of other values: a page of one trace reads as fast as before it
    took a list); for more a join of the list (list_contains compares each row with the whole list)."""
    if len(values) == 1:
        return f"{column} = ${name}", {name: values[0]}
    return f"{column} IN (SELECT unnest(${name}))", {name: list(values)}


def page_and_total(rows: list[dict], key: str) -> tuple[list[dict], int]:
    """The rows and the count of a page read with its count in one statement (`SELECT c.total, p.* FROM (SELECT
    count(*) AS total ...) c LEFT JOIN (the page) p ON true`): the count is on every row, and an empty page is one
    row of NULLs (`key` among them) with it."""
    total = rows[0]["total"]
    for row in rows:
        del row["total"]
    return [row for row in rows if row[key] is not None], total


def current(*partition: str) -> str:
    """The clause that keeps the current version of each `partition` (a reviewer's label on an event, their tags
    on a paper): its highest version. Written here once; versioned rows are append-only."""
    return f" QUALIFY version = max(version) OVER (PARTITION BY {', '.join(partition)})"
