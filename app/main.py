"""The app factory: `create_app(settings)` opens the database, applies migrations, mounts routers."""

import gc
import importlib
import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse
from fastapi.routing import APIRoute
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.services import accounts, analysis
from app.services.cache import TraceCache
from app.services.corpus import CorpusFacts
from app.services.live import LiveTraces
from app.settings import Settings
from app.store import analyst, lake
from app.store.db import Database, one_look
from app.web import security
from app.web.access import AnyViewer, Public, PublicFiles, check_routes, routes
from app.web.asgi import HTTPMiddleware
from app.web.browser import csrf_cookie
from app.web.errors import add_error_handlers
from app.web.limits import BodyLimitMiddleware
from app.web.render import compile_templates, make_templates
from app.web.routes import accounts as account_pages
from app.web.routes import (
    annotations,
    backup,
    corpus_pages,
    diff,
    events,
    findings,
    groups,
    ingest_log,
    labelling,
    otlp_receiver,
    pages,
    paper_pages,
    papers,
    queue_pages,
    queues,
    schema,
    traces,
    users,
)
from app.web.sqltrace import SQLTrace

log = logging.getLogger("orchestrace")

# plotly.js cut down to the trace types the app draws (tools/plotly-bundle): a quarter of the full bundle's
# size, which is parsed before a trace page can paint. Its version is in its name.
PLOTLY_JS = "plotly-partial-4.1.1.min.js"
PLOTLY_JS_URL = f"/static/vendor/{PLOTLY_JS}"

# No inline script runs, and nothing is evaluated from strings (the plotly.js bundle holds no WebGL).
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "object-src 'none'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
    "form-action 'self'",
])


class SecurityHeaders(HTTPMiddleware):
    """Every answer's security headers, set on its head as it is sent."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "same-origin"
            await send(message)

        await self.app(scope, receive, send_with_headers)


class OneLook(HTTPMiddleware):
    """Each request's reads see a lake as of one look at its latest snapshot (app.store.db.one_look), not one a
    read: outermost, so that the session and token checks share it."""

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        with one_look():
            await self.app(scope, receive, send)


class Answering(HTTPMiddleware):
    """Each request counts as being answered until its answer is sent (LiveTraces.answering): outermost, so that
    the live builder's reading ahead waits for the whole of it."""

    def __init__(self, app: ASGIApp, live: LiveTraces):
        super().__init__(app)
        self.live = live

    async def http(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self.live.answering():
            await self.app(scope, receive, send)


def trace_sql_log() -> None:
    """ORCHESTRACE_TRACE_SQL: every statement with its time on standard error (logger `orchestrace.sql`)."""
    sql_log = logging.getLogger("orchestrace.sql")
    sql_log.setLevel(logging.DEBUG)
    if not sql_log.handlers:
        sql_log.addHandler(logging.StreamHandler())


# Matches no route (a path segment is never empty), so that every route table is built and none is entered.
UNMATCHED_SCOPE = {"type": "http", "method": "GET", "path": "//", "root_path": "", "headers": [], "query_string": b""}


def build_route_tables(app: FastAPI) -> None:
    """Every included router's route table, which FastAPI builds on its first match (0.15 s for all of them)."""
    for route in app.router.routes:
        route.matches(dict(UNMATCHED_SCOPE))


def warm_up(app: FastAPI) -> None:
    """Before the server answers, what its first requests would each pay for on first use: the route table of each
    included router (FastAPI builds it on its first match), every template compiled, pyarrow.dataset (DuckDB imports
    it on the first Arrow table a statement reads: every label save's keys) and the analysis worker's start. Then,
    once per process, what it made to start is kept out of the collector's walks (gc.freeze): it lives as long as
    the process, and each full collection walked all of it (about 136,000 objects: 115-130 ms, the GIL held)."""
    build_route_tables(app)
    compile_templates(app.state.templates)
    importlib.import_module("pyarrow.dataset")
    analyst.start_worker()
    if not gc.get_freeze_count():
        gc.freeze()


def create_app(settings: Settings | None = None, db: Database | None = None) -> FastAPI:
    """Build the app over `db` (or the database file named by `settings`)."""
    settings = settings or Settings.from_env()
    if settings.trace_sql:
        trace_sql_log()
    db = db or Database(settings.db, settings.lake_data)
    db.migrate(settings.migrations_dir)
    # Traces analysed by another analysis version (or none) are analysed again, in the background
    # (and then the corpus pages' facts are built ahead)
    corpus = CorpusFacts(db)
    reanalysis = analysis.Reanalysis(db, then=corpus.warm).start()

    live = LiveTraces(db, settings.content)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await run_in_threadpool(live.recover)
        await run_in_threadpool(warm_up, app)
        yield
        reanalysis.stop()
        live.close()
        db.close()

    # No /docs or /redoc: their pages load Swagger UI from a CDN, and the app works offline. /openapi.json is
    # served below, by a route that declares its access as every route does.
    app = FastAPI(title="Orchestrace", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.settings = settings
    app.state.db = db
    app.state.secret_key = accounts.secret_key(db, settings.secret_key)
    app.state.open_mode = security.open_mode(settings)
    app.state.allowed_hosts = security.allowed_hosts(settings)
    app.state.live = live
    app.state.reanalysis = reanalysis
    app.state.login_throttle = accounts.LoginThrottle()
    app.state.cache = TraceCache()
    app.state.corpus = corpus
    db.when_writes_pause(corpus.refresh, "building the corpus pages' facts again")
    app.state.templates = make_templates(settings.templates_dir, PLOTLY_JS_URL)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(SQLTrace, enabled=settings.trace_sql)  # innermost: the statements of the app's own work
    app.middleware("http")(csrf_cookie)
    app.middleware("http")(security.guard)  # outside the form token: a refused request gets no cookie
    app.add_middleware(SecurityHeaders)
    app.add_middleware(OneLook)
    app.add_middleware(Answering, live=live)
    routers = [module.router for module in (traces, otlp_receiver, ingest_log, annotations, papers, pages, labelling,
                                            paper_pages, corpus_pages, account_pages, backup, schema, queues, queue_pages,
                                            events, users, diff, groups, findings)]
    for router in routers:
        app.include_router(router)

    @app.get("/openapi.json", include_in_schema=False, dependencies=[AnyViewer])
    def read_openapi():
        """The OpenAPI description of the JSON API."""
        return JSONResponse(app.openapi())

    @app.get(PLOTLY_JS_URL, include_in_schema=False, dependencies=[Public])
    def plotly_js():
        """plotly.js, vendored (no CDN) and cached for good: its version is in the URL."""
        return FileResponse(settings.static_dir / "vendor" / PLOTLY_JS, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=31536000, immutable"})

    @app.get("/favicon.ico", include_in_schema=False, dependencies=[Public])
    def favicon():
        """Browsers ask for /favicon.ico whatever the page links; answer with our icon."""
        return FileResponse(settings.static_dir / "favicon.svg", media_type="image/svg+xml")

    app.mount("/static", PublicFiles(directory=settings.static_dir), name="static")
    add_error_handlers(app)
    describe_invalid_requests(app)

    @app.get("/api/health", tags=["meta"], dependencies=[Public], responses={200: {
        "description": "the server answers; `db`, the database it serves, only to a logged-in caller or in open "
                       "single-user mode", "content": {"application/json": {"schema": {
                           "type": "object", "required": ["status"], "properties": {
                               "status": {"const": "ok"}, "db": {"type": "string"}}}}}}})
    def health(request: Request):
        """`{"status": "ok"}` to anyone; with `db`, the database it serves (by which the CLI knows its server),
        to a logged-in caller or in open single-user mode: the anonymous learn no paths."""
        if request.state.open_mode or security.current_user(request) is not None:
            return {"status": "ok", "db": lake.shown(settings.db)}
        return {"status": "ok"}

    check_routes(app)  # every route declares who may call it, or the app is not built
    # The app's route table, whole (FastAPI keeps included routers apart): what a 405 lists, what tests walk.
    app.state.route_table = [route for route in routes(app) if isinstance(route, APIRoute)]
    app.state.route_methods = [(route.path_regex, route.methods) for route in app.state.route_table]

    return app


# What `request_invalid` answers, in place of FastAPI's own `{detail: [...]}` in the OpenAPI description.
INVALID_REQUEST_SCHEMA = {
    "title": "HTTPValidationError", "type": "object", "required": ["error", "errors"],
    "properties": {"error": {"type": "string"}, "errors": {"type": "array", "items": {
        "type": "object", "required": ["path", "message"],
        "properties": {"path": {"type": "string"}, "message": {"type": "string"}}}}},
}


def describe_invalid_requests(app: FastAPI) -> None:
    """Make the OpenAPI description of a 422 for an invalid parameter say what the app really answers."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            schema = build()
            schemas = schema.get("components", {}).get("schemas", {})
            if "HTTPValidationError" in schemas:
                schemas["HTTPValidationError"] = INVALID_REQUEST_SCHEMA
                schemas.pop("ValidationError", None)
        return app.openapi_schema

    app.openapi = openapi
