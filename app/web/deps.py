"""Dependency aliases shared by the routers. Those that only read the request are `async def`: FastAPI runs a plain
`def` dependency in its thread pool, a hop per dependency and request that waits for a free thread when the pool is
busy with the database (an exporter's batches, reviewers' saves)."""

from typing import Annotated

from fastapi import Depends, Request

from app.domain.refusals import NotFound
from app.services.cache import TraceCache
from app.services.corpus import CorpusFacts
from app.services.live import LiveTraces
from app.settings import Settings
from app.store import traces as trace_store
from app.store.db import Database
from app.web.browser import reviewer_of


async def get_db(request: Request) -> Database:
    return request.app.state.db


async def get_settings(request: Request) -> Settings:
    return request.app.state.settings


DbDep = Annotated[Database, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings)]


async def get_cache(request: Request) -> TraceCache:
    return request.app.state.cache


CacheDep = Annotated[TraceCache, Depends(get_cache)]


async def get_corpus(request: Request) -> CorpusFacts:
    return request.app.state.corpus


CorpusDep = Annotated[CorpusFacts, Depends(get_corpus)]


async def get_live(request: Request) -> LiveTraces:
    return request.app.state.live


LiveDep = Annotated[LiveTraces, Depends(get_live)]


def existing_trace(trace_id: str, db: DbDep) -> str:
    """The path's trace id, once the trace is known to exist: the one "no such trace" of every route."""
    if not trace_store.trace_exists(db, trace_id):
        raise NotFound(f"no trace with id '{trace_id}'", what=f"trace '{trace_id}'")
    return trace_id


TraceId = Annotated[str, Depends(existing_trace)]


async def label_viewer(request: Request) -> str | None:
    """Whose eyes label reads are for: the reviewer asking (blind review queues hide others' labels from them)."""
    return reviewer_of(request)


Viewer = Annotated[str | None, Depends(label_viewer)]
