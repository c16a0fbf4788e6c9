"""Per-browser state: the reviewer name of open single-user mode, and the token of HTML form posts.

A form token is the server's signature of the browser's session (or, in open mode, of a random browser
cookie): pages send it in `hx-headers` on <body> (and as a hidden field for plain form posts), and a post
whose token is not that signature is refused with 403. A page on another port of the same host can set
our cookies (cookies are not per port), but cannot sign: a planted cookie gets a token that fails. The
JSON API takes no form tokens: it refuses cross-site requests by their Origin (app.security).
"""

import hmac
import secrets

from fastapi import HTTPException, Request

from app.web.security import current_user, session_id_of, sign

REVIEWER_COOKIE = "orchestrace_reviewer"
BROWSER_COOKIE = "orchestrace_browser"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
COOKIE_MAX_AGE_S = 365 * 24 * 3600


def reviewer_of(request: Request) -> str | None:
    """The logged-in user; in open single-user mode, the name picked on the reviewer page."""
    user = current_user(request)
    if user is not None:
        return user.name
    if not getattr(request.state, "open_mode", True):
        return None
    name = request.cookies.get(REVIEWER_COOKIE, "").strip()
    return name or None


def local_url(url: str) -> str:
    """A redirect target on this server only: a path, never another site (`//host`, or `/\\host`, which
    browsers read as `//host`)."""
    return url if url.startswith("/") and not url.startswith(("//", "/\\")) else "/"


def _binding(request: Request) -> str | None:
    key = request.app.state.secret_key
    session_id = session_id_of(request, key)
    return f"session:{session_id}" if session_id else (
        f"browser:{request.cookies[BROWSER_COOKIE]}" if request.cookies.get(BROWSER_COOKIE) else None)


async def csrf_cookie(request: Request, call_next):
    """Give every browser an id cookie; pages read the form token, signed for it, from request.state."""
    browser = request.cookies.get(BROWSER_COOKIE)
    new_browser = None if browser else secrets.token_urlsafe(24)
    binding = _binding(request) or f"browser:{new_browser}"
    request.state.csrf_token = sign(request.app.state.secret_key, "csrf:" + binding)
    response = await call_next(request)
    if new_browser:
        response.set_cookie(BROWSER_COOKIE, new_browser, max_age=COOKIE_MAX_AGE_S, httponly=True, samesite="lax")
    return response


async def require_csrf(request: Request) -> None:
    """A form post must carry the token signed for this browser's session, in the header (htmx) or a field."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")):
        sent = (await request.form()).get(CSRF_FIELD)
    binding = _binding(request)
    expected = sign(request.app.state.secret_key, "csrf:" + binding) if binding else ""
    if not expected or not sent or not hmac.compare_digest(str(sent), expected):
        raise HTTPException(403, "missing or wrong form token: reload the page and try again")
