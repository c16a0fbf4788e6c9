"""Paged tables: which page a link asks for, and that page's rows."""

from collections.abc import Callable

MAX_OFFSET = 2**53 - 1  # beyond any table here; a larger offset would overflow DuckDB's OFFSET


def fetch_page(page: int, per_page: int, fetch: Callable[[int, int], tuple[list, int]]) -> tuple[list, int, int, int]:
    """(rows, total, page, pages) from fetch(limit, offset) -> (rows, total). A page number below 1 is the
    first page; one past the end (a stale or hand-edited link) is the last page."""
    page = min(max(page, 1), MAX_OFFSET // per_page)
    rows, total = fetch(per_page, (page - 1) * per_page)
    pages = max(1, -(-total // per_page))
    if page > pages:
        page = pages
        rows, total = fetch(per_page, (page - 1) * per_page)
    return rows, total, page, pages
