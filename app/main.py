"""The app factory: `create_app(settings)` opens the database, applies migrations, mounts routers."""

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.db import Database
from app.documents import DocumentError, TooLarge
from app.ingest import InvalidTraces
from app.limits import BodyLimitMiddleware, BodyTooLarge, too_large_response
from app.routes import traces
from app.settings import Settings
from app.store import TracesExist

log = logging.getLogger("orchestrace")


def create_app(settings: Settings | None = None, db: Database | None = None) -> FastAPI:
    """Build the app over `db` (or the database file named by `settings`)."""
    settings = settings or Settings.from_env()
    db = db or Database(settings.db)
    db.migrate(settings.migrations_dir)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        db.close()

    app = FastAPI(title="Orchestrace", version="0.1.0", lifespan=lifespan)
    app.state.settings = settings
    app.state.db = db
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.include_router(traces.router)
    add_error_handlers(app)

    @app.get("/api/health", tags=["meta"])
    def health():
        return {"status": "ok", "db": str(settings.db)}

    return app


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

    @app.exception_handler(BodyTooLarge)
    async def body_too_large(request: Request, exc: BodyTooLarge):
        return too_large_response(exc)

    @app.exception_handler(TooLarge)
    async def decompressed_too_large(request: Request, exc: TooLarge):
        return JSONResponse({"error": str(exc)}, status_code=413)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError):
        errors = [{"path": ".".join(str(p) for p in e["loc"]), "message": e["msg"]} for e in exc.errors()]
        return JSONResponse({"error": "invalid request", "errors": errors}, status_code=422)
