"""Corpus-wide facts the corpus pages show on every view, kept while the corpus (and its stored analyses) stay as
they were: each is a scan of every trace, which a page viewed again need not repeat."""

from collections.abc import Callable

from app.services.cache import TraceCache
from app.store import analysis as analysis_store
from app.store import traces as trace_store
from app.store.db import Database


def reward_channels(db: Database, cache: TraceCache) -> list[str]:
    """The reward channel names across stored traces (their reward rows read once per corpus version)."""
    return cache.get_or_build(("reward channels", trace_store.corpus_version(db)),
                              lambda: trace_store.reward_channels(db))


def trace_facets(db: Database, cache: TraceCache) -> dict:
    """The systems and topologies across stored traces (read once per corpus version)."""
    return cache.get_or_build(("trace facets", trace_store.corpus_version(db)), lambda: trace_store.trace_facets(db))


def with_analyses(db: Database, cache: TraceCache, name: str, build: Callable[[], object]):
    """What `build` makes of the traces and their stored analyses (the dashboard's figures, the audit's totals by
    rule), kept per version of both."""
    return cache.get_or_build((name, trace_store.corpus_version(db), analysis_store.analyses_version(db)), build)
