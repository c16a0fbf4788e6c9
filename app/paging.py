"""Page numbers and offsets from query strings, kept inside the integers DuckDB's OFFSET takes."""

MAX_OFFSET = 2**53 - 1  # beyond any table here; a larger offset would overflow in the query
MAX_PAGE = 10**9


def page_number(page: int) -> int:
    """A page number from a link: below 1 is the first page; an absurd one stays small enough to query."""
    return min(max(page, 1), MAX_PAGE)
