"""Cyclic garbage collection paused while a bulk load builds many objects.

Parsing, importing, validating and storing a large upload allocates millions of containers and makes no
reference cycles, yet those allocations trigger full collections that walk everything alive: up to half
of the ingest time of a 20,000-event trace. Reference counting still frees everything as usual.

A pause is best ended once those objects are freed: the collector counts what was allocated and not freed
meanwhile, and the first allocation after the pause would collect, walking every object still alive. So
callers pause around a function whose frame holds them, and what they build must make no cycles (a walk
that links spans both ways unlinks them when done).
"""

import gc
import threading
from contextlib import contextmanager


class _GcPause:
    """Collection off from the first pause until the last one ends, then back to its former setting.

    Pauses are counted under a lock, so loads overlapping in server threads cannot leave it switched off.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._was_enabled = False

    @contextmanager
    def __call__(self):
        with self._lock:
            if self._depth == 0:
                self._was_enabled = gc.isenabled()
                gc.disable()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._was_enabled:
                    gc.enable()


paused_gc = _GcPause()
