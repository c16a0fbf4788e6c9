"""Every error answer of the app, in one place: a refusal is JSON with its own status and fields (see
app.domain.refusals), a page that does not exist is the not-found page, and anything else keeps FastAPI's
status with an `error` message."""

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.domain.refusals import NotFound, Refusal, status_of
from app.store.db import CommitConflict
from app.web.render import render

# Paths whose answers are JSON (or files) even when refused: the rest are pages.
NOT_PAGES = ("/api/", "/static/", "/v1/")
CONFLICT_RETRY_AFTER_S = 1


def refusal_response(exc: Refusal) -> JSONResponse:
    return JSONResponse({"error": str(exc), **exc.details()}, status_code=status_of(exc))


def add_error_handlers(app: FastAPI) -> None:
    """Every error is JSON with a message (a missing page is a page); the status code says whose fault it is."""

    @app.exception_handler(Refusal)
    async def refused(request: Request, exc: Refusal):
        if isinstance(exc, NotFound) and exc.what and not request.url.path.startswith(NOT_PAGES):
            return render(request, "not_found.html", {"what": exc.what}, status_code=404)
        return refusal_response(exc)

    @app.exception_handler(CommitConflict)
    async def commit_conflict(request: Request, exc: CommitConflict):
        # Other instances of the app kept winning the commit: nothing was written, the same request may succeed.
        return JSONResponse({"error": f"the store is busy, try again: {exc}"}, status_code=503,
                            headers={"Retry-After": str(CONFLICT_RETRY_AFTER_S)})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        if exc.status_code == 404 and not request.url.path.startswith(NOT_PAGES):
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
