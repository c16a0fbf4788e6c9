"""Corpus-wide facts the corpus pages show on every view (the dashboard's figures, the audit's totals by rule, the
reward channels and facets of the trace list), kept while the corpus (and its stored analyses) stay as they were:
each is a scan of every trace, which a page viewed again need not repeat. Once a page has asked for a fact, it is
built again in the background whenever this process's writes pause (`refresh`), so that the next view after an
ingest does not wait for it either."""

import threading
from collections.abc import Callable

from app.services.cache import TraceCache
from app.store import analysis as analysis_store
from app.store import traces as trace_store
from app.store.db import Database

# A fact's builder: what it makes of the store, given the facts it may build on (the dashboard reads the channels).
Build = Callable[[Database, "CorpusFacts"], object]


class CorpusFacts:
    """The corpus facts of one store, each kept for the versions it was built at: the traces' (`corpus_version`)
    and, for a fact that reads analyses, theirs too (`analyses_version`)."""

    def __init__(self, db: Database):
        self._db = db
        self._kept = TraceCache()
        self._asked: dict[str, tuple[Build, bool]] = {}  # every fact asked for in this process, by name
        self._lock = threading.Lock()

    def get(self, name: str, build: Build, analyses: bool = False):
        """The fact `name` as `build` makes it at the store's current versions (built now when not kept)."""
        with self._lock:
            self._asked[name] = (build, analyses)
        return self._get(name, build, analyses, self._versions(analyses))

    def refresh(self) -> None:
        """Build again every fact asked for so far whose versions changed (Database.when_writes_pause runs it)."""
        with self._lock:
            asked = list(self._asked.items())
        versions = {analyses: self._versions(analyses) for analyses in {analyses for _, (_, analyses) in asked}}
        for name, (build, analyses) in asked:
            self._get(name, build, analyses, versions[analyses])

    def _versions(self, analyses: bool) -> tuple:
        corpus = trace_store.corpus_version(self._db)
        return (corpus, analysis_store.analyses_version(self._db)) if analyses else (corpus,)

    def _get(self, name: str, build: Build, analyses: bool, versions: tuple):
        return self._kept.get_or_build((name, *versions), lambda: build(self._db, self))

    def reward_channels(self) -> list[str]:
        """The reward channel names across stored traces."""
        return self.get("reward channels", lambda db, _: trace_store.reward_channels(db))

    def trace_facets(self) -> dict:
        """The systems and topologies across stored traces."""
        return self.get("trace facets", lambda db, _: trace_store.trace_facets(db))
