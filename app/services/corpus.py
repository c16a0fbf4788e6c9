"""Corpus-wide facts the corpus pages show on every view (the dashboard's figures, the audit's totals by rule, the
reward channels and facets of the trace list), kept while the corpus (and its stored analyses) stay as they were:
each is a scan of every trace, which a page viewed again need not repeat. Every fact declared (`corpus_fact`) is
built once the server has started (`warm`), and built again in the background whenever this process's writes pause
(`refresh`), so that neither the first view after a start nor the next view after an ingest waits for it."""

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

from app.services.cache import TraceCache
from app.store import analysis as analysis_store
from app.store import traces as trace_store
from app.store.db import Database

log = logging.getLogger(__name__)

# A fact's builder: what it makes of the store, given the facts it may build on (the dashboard reads the channels).
Build = Callable[[Database, "CorpusFacts"], object]


@dataclass(frozen=True)
class Fact:
    """A corpus fact: its name, its builder, and whether it reads the stored analyses (kept per their version)."""
    name: str
    build: Build
    analyses: bool = False


DECLARED: list[Fact] = []  # every fact the app's modules declare, each built ahead


def corpus_fact(name: str, analyses: bool = False) -> Callable[[Build], Fact]:
    """Declare a builder as the corpus fact `name`, so that it is built ahead rather than on a page's view."""
    def declare(build: Build) -> Fact:
        fact = Fact(name, build, analyses)
        DECLARED.append(fact)
        return fact
    return declare


@corpus_fact("trace facets")
def trace_facets(db: Database, _) -> dict:
    """The systems, topologies and reward channels across stored traces."""
    return trace_store.trace_facets(db)


class CorpusFacts:
    """The corpus facts of one store, each kept for the versions it was built at: the traces' (`corpus_version`)
    and, for a fact that reads analyses, theirs too (`analyses_version`)."""

    def __init__(self, db: Database):
        self._db = db
        self._kept = TraceCache()
        self._asked: dict[str, Fact] = {}  # every fact asked for or built ahead in this process, by name
        self._building: dict[tuple, Future] = {}  # a fact being built, which another asker waits for
        self._lock = threading.Lock()

    def get(self, fact: Fact):
        """`fact` at the store's current versions (built now when not kept)."""
        with self._lock:
            self._asked[fact.name] = fact
        return self._get(fact, self._versions(fact.analyses))

    def warm(self, stop: threading.Event) -> None:
        """Build every declared fact, unless `stop` is set meanwhile (the server's start runs it, once the stored
        traces are analysed). A failure is logged: the page's view builds the fact then."""
        for fact in DECLARED:
            if stop.is_set():
                return
            try:
                self.get(fact)
            except Exception:
                log.exception("building the corpus fact %r ahead failed", fact.name)

    def refresh(self) -> None:
        """Build again every fact asked for so far whose versions changed (Database.when_writes_pause runs it)."""
        with self._lock:
            asked = list(self._asked.values())
        versions = {analyses: self._versions(analyses) for analyses in {fact.analyses for fact in asked}}
        for fact in asked:
            self._get(fact, versions[fact.analyses])

    def _versions(self, analyses: bool) -> tuple:
        reads = [lambda: trace_store.corpus_version(self._db)]
        if analyses:
            reads.append(lambda: analysis_store.analyses_version(self._db))
        return tuple(self._db.together(*reads))

    def _get(self, fact: Fact, versions: tuple):
        """The fact as kept, or as built now: by this thread, or by the one already building it (a page viewed
        while the fact is built ahead waits for that build rather than making a second)."""
        key = (fact.name, *versions)
        with self._lock:
            pending = self._building.get(key)
            mine = pending is None
            if mine:
                pending = self._building[key] = Future()
        if not mine:
            return pending.result()
        try:
            pending.set_result(self._kept.get_or_build(key, lambda: fact.build(self._db, self)))
        except BaseException as exc:
            pending.set_exception(exc)
        finally:
            with self._lock:
                del self._building[key]
        return pending.result()

    def reward_channels(self) -> list[str]:
        """The reward channel names across stored traces (read with the facets)."""
        return self.trace_facets()["reward_channels"]

    def trace_facets(self) -> dict:
        """The systems, topologies and reward channels across stored traces."""
        return self.get(trace_facets)
