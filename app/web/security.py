"""Who is asking and what they may do: one middleware for the Host allow-list, the caller's identity
(API token or session cookie), cross-site refusals and the access the route declares (app.web.access).

Modes (ORCHESTRACE_AUTH): `required` makes every route but those declared `Public` (the login page, static
files, the health check) need a session or a token; `auto` is open single-user mode while the server binds to
loopback (anyone who can reach it is its one user, as before accounts existed) and `required` otherwise.
Cross-site and Host checks apply in both modes: a page on another origin must never write here.
"""

import hashlib
import hmac
import ipaddress
from urllib.parse import quote, urlsplit

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse

from app.domain.refusals import Refusal
from app.services import accounts
from app.services.accounts import User
from app.web import access

SESSION_COOKIE = "orchestrace_session"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# Content types a browser may send cross-site without asking first (CORS "simple" requests): an API or
# exporter route that takes JSON or protobuf refuses them, so such a request cannot write.
SIMPLE_TYPES = ("text/plain", "application/x-www-form-urlencoded")
FILE_ROUTES = ("/api/traces", "/api/papers/import", "/api/annotations/import")  # also take multipart files


class Forbidden(Refusal, PermissionError):
    """The caller may not act as it asks (e.g. save a label under another reviewer's name)."""

    status = 403


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def open_mode(settings) -> bool:
    """Open single-user mode: ORCHESTRACE_AUTH=auto and a loopback bind address."""
    return settings.auth == "auto" and is_loopback(settings.host)


def allowed_hosts(settings) -> set[str]:
    configured = {h.strip().lower().strip("[]") for h in settings.allowed_hosts.split(",") if h.strip()}
    return configured or {settings.host.lower(), *LOOPBACK_NAMES}


def sign(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:32]


def session_cookie_value(key: bytes, session_id: str) -> str:
    """The session cookie: the id and its signature, so a forged or altered cookie is refused unread."""
    return f"{session_id}.{sign(key, 'session:' + session_id)}"


def session_id_of(request: Request, key: bytes) -> str | None:
    raw = request.cookies.get(SESSION_COOKIE, "")
    session_id, _, signature = raw.rpartition(".")
    if session_id and hmac.compare_digest(signature, sign(key, "session:" + session_id)):
        return session_id
    return None


def _host(request: Request) -> str:
    """The Host header's name without its port; an IPv6 address without its brackets (`[::1]:8000` is `::1`)."""
    host = request.headers.get("host", "").lower()
    if host.startswith("["):
        return host[1:host.index("]")] if "]" in host else host
    return host.rpartition(":")[0] if ":" in host else host


def _same_origin(request: Request) -> bool:
    """A state-changing request from a browser carries Origin (or at least Referer): it must be ours."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        return True  # not sent by a browser page (an exporter, the CLI, curl)
    if source == "null":
        return False
    parts = urlsplit(source)
    return parts.netloc.lower() == request.headers.get("host", "").lower() and parts.scheme in ("http", "https")


def identify(request: Request, db, key: bytes) -> User | None:
    """The caller: the owner of a Bearer token, else of the session cookie."""
    authorization = request.headers.get("authorization", "")
    if authorization[:7].lower() == "bearer ":
        return accounts.token_user(db, authorization[7:].strip())
    session_id = session_id_of(request, key)
    return accounts.session_user(db, session_id) if session_id else None


def _refuse(request: Request, status: int, message: str):
    if status == 401 and not request.url.path.startswith(("/api/", "/v1/")):
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def guard(request: Request, call_next):
    """The Host allow-list, cross-site refusals, the caller's identity and the access the route declares, all
    before the request's body is read."""
    app = request.app
    db = app.state.db
    host = _host(request)
    if host not in app.state.allowed_hosts:
        return JSONResponse({"error": f"Host '{host}' is not served here; add it to ORCHESTRACE_ALLOWED_HOSTS"},
                            status_code=400)
    method, path = request.method, request.url.path
    if method in UNSAFE:
        if not _same_origin(request):
            return JSONResponse({"error": "cross-site request refused: this server takes writes only from its "
                                          "own pages and from clients that are not browsers"}, status_code=403)
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if path.startswith("/api/") and (media in SIMPLE_TYPES or (  # /v1/ checks its own (OTLP) types
                media == "multipart/form-data" and path not in FILE_ROUTES)):
            return JSONResponse({"error": f"Content-Type {media!r} is not taken by {path}: send JSON "
                                          "(or the media type its documentation names)"}, status_code=415)
    user = identify(request, db, app.state.secret_key)
    request.state.user = user
    request.state.open_mode = app.state.open_mode
    refused = access.refusal_for(request, method, path)  # in open mode, only a route that declares nothing
    if refused is not None:
        return _refuse(request, *refused)
    return await call_next(request)


def current_user(request: Request) -> User | None:
    return getattr(request.state, "user", None)


def acting_reviewer(request: Request, body: dict) -> dict:
    """A label or tag body with its reviewer: the logged-in user's name, never one the client chooses
    (in open single-user mode, the name the client gives, as before accounts)."""
    user = current_user(request)
    if user is None:
        return body
    given = body.get("reviewer")
    if given not in (None, "", user.name):
        raise Forbidden(f"you are logged in as '{user.name}'; labels are saved under your own name")
    return {**body, "reviewer": user.name}
