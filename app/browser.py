"""Per-browser state kept in cookies: the reviewer's name and the CSRF token of HTML form posts.

Pages send the token in `hx-headers` on <body> (and as a hidden field for plain form posts); a post
whose token does not match the cookie is refused with 403. The JSON API takes no cookies.
"""

import secrets

from fastapi import HTTPException, Request

REVIEWER_COOKIE = "orchestrace_reviewer"
CSRF_COOKIE = "orchestrace_csrf"
CSRF_HEADER = "X-CSRF-Token"
CSRF_FIELD = "csrf_token"
COOKIE_MAX_AGE_S = 365 * 24 * 3600


def reviewer_of(request: Request) -> str | None:
    name = request.cookies.get(REVIEWER_COOKIE, "").strip()
    return name or None


async def csrf_cookie(request: Request, call_next):
    """Give every browser a CSRF token cookie; pages read it from request.state."""
    token = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(24)
    request.state.csrf_token = token
    response = await call_next(request)
    if request.cookies.get(CSRF_COOKIE) != token:
        response.set_cookie(CSRF_COOKIE, token, max_age=COOKIE_MAX_AGE_S, httponly=True, samesite="strict")
    return response


async def require_csrf(request: Request) -> None:
    """A form post must carry the cookie's token, in the header (htmx) or a hidden field."""
    expected = request.cookies.get(CSRF_COOKIE)
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
            ("application/x-www-form-urlencoded", "multipart/form-data")):
        sent = (await request.form()).get(CSRF_FIELD)
    if not expected or not sent or not secrets.compare_digest(str(sent), expected):
        raise HTTPException(403, "missing or wrong CSRF token: reload the page and try again")
