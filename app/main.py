"""The app factory: `create_app(settings)` opens the database, applies migrations, mounts routers."""

import logging
from contextlib import asynccontextmanager
from pathlib import Path

import plotly
from plotly.offline import get_plotlyjs_version

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import accounts, security
from app.annotations import LabelError, LabelImportError, NotFound, StaleVersion
from app.browser import csrf_cookie
from app.cache import TraceCache
from app.db import Database
from app.documents import DocumentError, TooLarge
from app.ingest import InvalidTraces
from app.limits import BodyLimitMiddleware, BodyTooLarge, too_large_response
from app.render import make_templates, render
from app.importers.common import ImportFailed
from app.importers.otlp_protobuf import NotProtobuf
from app.live import LiveTraces
from app.papers import CsvProblems
from app.routes import (accounts as account_pages, annotations, backup, corpus_pages, ingest_log, labelling,
                        otlp_receiver, pages, paper_pages, papers, traces)
from app.settings import Settings
from app.store import TracesExist

log = logging.getLogger("orchestrace")

PLOTLY_JS_PATH = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PLOTLY_JS_URL = f"/static/vendor/plotly-{get_plotlyjs_version()}.min.js"

# Plotly's WebGL traces compile shaders with Function(), hence 'unsafe-eval'; no inline script runs.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    "script-src 'self' 'unsafe-eval'",
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


async def security_headers(request: Request, call_next):
    response = await call_next(request)
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def create_app(settings: Settings | None = None, db: Database | None = None) -> FastAPI:
    """Build the app over `db` (or the database file named by `settings`)."""
    settings = settings or Settings.from_env()
    db = db or Database(settings.db)
    db.migrate(settings.migrations_dir)

    live = LiveTraces(db)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await run_in_threadpool(live.recover)
        yield
        live.close()
        db.close()

    # No /docs or /redoc: their pages load Swagger UI from a CDN, and the app works offline.
    app = FastAPI(title="Orchestrace", version="0.1.0", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.settings = settings
    app.state.db = db
    app.state.secret_key = accounts.secret_key(db, settings.secret_key)
    app.state.open_mode = security.open_mode(settings)
    app.state.allowed_hosts = security.allowed_hosts(settings)
    app.state.live = live
    app.state.cache = TraceCache()
    app.state.templates = make_templates(settings.templates_dir, PLOTLY_JS_URL)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.middleware("http")(csrf_cookie)
    app.middleware("http")(security.guard)  # outside the form token: a refused request gets no cookie
    app.middleware("http")(security_headers)
    routers = [module.router for module in (traces, otlp_receiver, ingest_log, annotations, papers, pages, labelling,
                                            paper_pages, corpus_pages, account_pages, backup)]
    for router in routers:
        app.include_router(router)
    app.state.route_methods = [(route.path_regex, route.methods) for router in routers for route in router.routes]

    @app.get(PLOTLY_JS_URL, include_in_schema=False)
    def plotly_js():
        """plotly.js from the installed plotly package: no CDN, and its version is in the URL."""
        return FileResponse(PLOTLY_JS_PATH, media_type="text/javascript",
                            headers={"Cache-Control": "public, max-age=31536000, immutable"})

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon():
        """Browsers ask for /favicon.ico whatever the page links; answer with our icon."""
        return FileResponse(settings.static_dir / "favicon.svg", media_type="image/svg+xml")

    app.mount("/static", StaticFiles(directory=settings.static_dir), name="static")
    add_error_handlers(app)
    describe_invalid_requests(app)

    @app.get("/api/health", tags=["meta"])
    def health():
        return {"status": "ok", "db": str(settings.db)}

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


def add_error_handlers(app: FastAPI) -> None:
    """Every error is JSON with a message; the status code says whose fault it is."""

    @app.exception_handler(DocumentError)
    async def document_error(request: Request, exc: DocumentError):
        return JSONResponse(exc.to_json(), status_code=400)

    @app.exception_handler(InvalidTraces)
    async def invalid_traces(request: Request, exc: InvalidTraces):
        return JSONResponse({"error": str(exc), "errors": exc.errors}, status_code=422)

    @app.exception_handler(TracesExist)
    async def traces_exist(request: Request, exc: TracesExist):
        return JSONResponse({"error": str(exc), "trace_ids": exc.trace_ids}, status_code=409)

    @app.exception_handler(LabelError)
    async def label_error(request: Request, exc: LabelError):
        return JSONResponse({"error": str(exc), "field": exc.field}, status_code=422)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        return JSONResponse({"error": str(exc)}, status_code=404)

    @app.exception_handler(StaleVersion)
    async def stale_version(request: Request, exc: StaleVersion):
        return JSONResponse({"error": str(exc), "current": exc.current}, status_code=409)

    @app.exception_handler(LabelImportError)
    async def import_error(request: Request, exc: LabelImportError):
        return JSONResponse({"error": str(exc), "errors": exc.errors}, status_code=exc.status)

    @app.exception_handler(PermissionError)
    async def not_permitted(request: Request, exc: PermissionError):
        return JSONResponse({"error": str(exc)}, status_code=403)

    @app.exception_handler(NotProtobuf)
    async def not_protobuf(request: Request, exc: NotProtobuf):
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(ImportFailed)
    async def import_failed(request: Request, exc: ImportFailed):
        return JSONResponse({"error": str(exc)}, status_code=422)

    @app.exception_handler(CsvProblems)
    async def csv_problems(request: Request, exc: CsvProblems):
        return JSONResponse({"error": str(exc), "errors": exc.errors}, status_code=422)

    @app.exception_handler(BodyTooLarge)
    async def body_too_large(request: Request, exc: BodyTooLarge):
        return too_large_response(exc)

    @app.exception_handler(TooLarge)
    async def decompressed_too_large(request: Request, exc: TooLarge):
        return JSONResponse({"error": str(exc)}, status_code=413)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404 and not request.url.path.startswith(("/api/", "/static/", "/v1/")):
            return render(request, "not_found.html", {"what": "page"}, status_code=404)
        headers = exc.headers
        if exc.status_code == 405:  # Starlette names the methods of the first route matching the path only
            headers = {**(headers or {}), "Allow": allowed_methods(request)}
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError):
        errors = [{"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]
        return JSONResponse({"error": "invalid request", "errors": errors}, status_code=422)


def allowed_methods(request: Request) -> str:
    """The Allow header of a 405: the methods of every route whose path matches, as RFC 9110 asks."""
    path = request.url.path
    methods = {method for regex, route_methods in request.app.state.route_methods if regex.match(path)
               for method in route_methods}
    return ", ".join(sorted(methods))

