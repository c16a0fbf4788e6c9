"""Python lists handed to SQL as registered Arrow tables rather than bound list parameters.

DuckDB 1.5.5 converts a bound list value by value and tries `import pandas` twice for each one; without
pandas installed every failed import searches sys.path again. A list of 1,000 ids cost 80 ms that way (the
20,000 span ids of a live trace about a second); the same ids as an Arrow table cost under 1 ms.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb
import pyarrow as pa


@contextmanager
def registered(cur: duckdb.DuckDBPyConnection, name: str, **columns: list) -> Iterator[None]:
    """The lists as the columns of table `name` on this cursor while the block runs (strings unless typed)."""
    cur.register(name, pa.table({key: values if isinstance(values, pa.Array) else pa.array(values, pa.string())
                                 for key, values in columns.items()}))
    try:
        yield
    finally:
        cur.unregister(name)
