"""Logging in and out, and the account page where a user makes and revokes API tokens."""

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.services import accounts
from app.web import security
from app.web.browser import local_url, require_csrf
from app.web.deps import DbDep
from app.web.render import render

router = APIRouter(include_in_schema=False)

SESSION_MAX_AGE_S = accounts.SESSION_DAYS * 24 * 3600


@router.get("/login")
def read_login_page(request: Request, next: str = "/"):
    return render(request, "login.html", {"next": local_url(next), "error": None})


@router.post("/login", dependencies=[Depends(require_csrf)])
async def log_in(request: Request, db: DbDep):
    """Form fields `username` and `password`; sets the session cookie and goes to `next`."""
    form = await request.form()
    name, password = str(form.get("username", "")).strip(), str(form.get("password", ""))
    next_url = local_url(str(form.get("next", "/")))
    user = await run_in_threadpool(accounts.check_password, db, name, password)
    if user is None:
        return render(request, "login.html", {"next": next_url, "error": "wrong user name or password",
                                              "username": name}, status_code=401)
    session_id = accounts.start_session(db, user)
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(security.SESSION_COOKIE, security.session_cookie_value(request.app.state.secret_key, session_id),
                        max_age=SESSION_MAX_AGE_S, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https")
    return response


@router.post("/logout", dependencies=[Depends(require_csrf)])
def log_out(request: Request, db: DbDep):
    session_id = security.session_id_of(request, request.app.state.secret_key)
    if session_id:
        accounts.end_session(db, session_id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(security.SESSION_COOKIE)
    return response


def account_context(request: Request, db, **extra) -> dict:
    user = security.current_user(request)
    return {"user": user, "tokens": accounts.list_tokens(db, user.name) if user else [], "new_token": None,
            "error": None} | extra


@router.get("/account")
def read_account_page(request: Request, db: DbDep):
    return render(request, "account.html", account_context(request, db))


@router.post("/account/tokens", dependencies=[Depends(require_csrf)])
async def create_token(request: Request, db: DbDep):
    """A new API token, shown once on the page that answers."""
    user = security.current_user(request)
    if user is None:
        return render(request, "account.html", account_context(
            request, db, error="open single-user mode has no accounts: add one with `orchestrace users add`"),
            status_code=409)
    name = str((await request.form()).get("name", "")).strip()[:100]
    token = accounts.create_token(db, user.name, name)
    return render(request, "account.html", account_context(request, db, new_token=token), status_code=201)


@router.post("/account/tokens/{token_id}/revoke", dependencies=[Depends(require_csrf)])
def revoke_token(request: Request, token_id: str, db: DbDep):
    user = security.current_user(request)
    if user is not None:
        accounts.revoke_token(db, token_id, None if user.may("admin") else user.name)
    return RedirectResponse("/account", status_code=303)
