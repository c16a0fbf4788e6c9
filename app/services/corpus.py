"""Corpus-wide facts the corpus pages show on every view, kept while the corpus stays as it was."""

from app.services.cache import TraceCache
from app.store import traces as trace_store
from app.store.db import Database


def reward_channels(db: Database, cache: TraceCache) -> list[str]:
    """The reward channel names across stored traces (every trace's rewards read once per corpus version)."""
    return cache.get_or_build(("reward channels", trace_store.corpus_version(db)),
                              lambda: trace_store.reward_channels(db))
