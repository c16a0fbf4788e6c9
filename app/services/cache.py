"""A small in-process cache of derived per-trace data (figure JSON, overlay channels).

Keys include the trace's ingest time as stored (app/store/traces.py trace_version), read before the data it keys, so a
replace makes the old entries unreachable, whichever app instance on a shared lake replaced it.
"""

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable

DEFAULT_ENTRIES = 16


class TraceCache:
    """Least-recently-used entries; a value is built outside the lock, so slow builds do not block reads."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES):
        self.max_entries = max_entries
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_build(self, key: Hashable, build: Callable[[], object]):
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value
