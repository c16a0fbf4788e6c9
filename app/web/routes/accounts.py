"""Logging in and out, the account page (a user's own password and API tokens) and the admins' users page,
over the same account services as the JSON API. A change redirects to the page it was made on (303), but for
a new token, which is on the page that answers and nowhere after."""

from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse

from app.services import accounts
from app.web import security
from app.web.access import Admin, AnyViewer, Public
from app.web.browser import local_url, require_csrf
from app.web.deps import DbDep
from app.web.render import render

router = APIRouter(include_in_schema=False)

SESSION_MAX_AGE_S = accounts.SESSION_DAYS * 24 * 3600
# What the users page says after a change (`?done=`); the key is the form's field.
DONE = {"added": "Added {name}, a {role}.", "role": "{name}'s role is now {role}.",
        "disabled": "{name} is disabled: their sessions ended and their tokens are refused.",
        "enabled": "{name} is enabled again.", "password": "New password set for {name}.",
        "revoked": "A token of {name} is revoked."}
OPEN_MODE_HAS_NO_ACCOUNT = "open single-user mode has no accounts: add one with `orchestrace users add`"


@router.get("/login", dependencies=[Public])
def read_login_page(request: Request, next: str = "/"):
    return render(request, "login.html", {"next": local_url(next), "error": None})


@router.post("/login", dependencies=[Public, Depends(require_csrf)])
async def log_in(request: Request, db: DbDep):
    """Form fields `username` and `password`; sets the session cookie and goes to `next`. Too many wrong
    passwords for an account or from an address lock it for a while (429 with Retry-After; see LoginThrottle)."""
    form = await request.form()
    name, password = str(form.get("username", "")).strip(), str(form.get("password", ""))
    next_url = local_url(str(form.get("next", "/")))
    throttle, address = request.app.state.login_throttle, request.client.host if request.client else ""
    locked = throttle.lock_of(name, address)
    if locked is not None:  # refused unchecked: a lock also spares the server the password's work
        page = render(request, "login.html", {"next": next_url, "error": locked.message, "username": name},
                      status_code=429)
        page.headers["Retry-After"] = str(locked.retry_after_s)
        return page
    try:
        user = await run_in_threadpool(accounts.check_password, db, name, password)
    except accounts.AccountError as exc:  # a disabled account
        return render(request, "login.html", {"next": next_url, "error": str(exc), "username": name},
                      status_code=exc.status)
    if user is None:
        throttle.failed(name, address)
        return render(request, "login.html", {"next": next_url, "error": "wrong user name or password",
                                              "username": name}, status_code=401)
    throttle.succeeded(name)
    session_id = accounts.start_session(db, user)
    response = RedirectResponse(next_url, status_code=303)
    response.set_cookie(security.SESSION_COOKIE, security.session_cookie_value(request.app.state.secret_key, session_id),
                        max_age=SESSION_MAX_AGE_S, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https")
    return response


@router.post("/logout", dependencies=[AnyViewer, Depends(require_csrf)])
def log_out(request: Request, db: DbDep):
    session_id = security.session_id_of(request, request.app.state.secret_key)
    if session_id:
        accounts.end_session(db, session_id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(security.SESSION_COOKIE)
    return response


def account_context(request: Request, db, **extra) -> dict:
    user = security.current_user(request)
    return {"user": user, "tokens": accounts.tokens_of(db, user.name, user) if user else [], "new_token": None,
            "error": None, "password_error": None,
            "password_changed": request.query_params.get("done") == "password"} | extra


@router.get("/account", dependencies=[AnyViewer])
def read_account_page(request: Request, db: DbDep):
    return render(request, "account.html", account_context(request, db))


@router.post("/account/password", dependencies=[AnyViewer, Depends(require_csrf)])
async def change_my_password(request: Request, db: DbDep):
    """Form fields `password` and `again`; ends the user's other sessions, keeps this one."""
    user = security.current_user(request)
    form = await request.form()
    password = str(form.get("password", ""))
    try:
        if user is None:
            raise accounts.AccountConflict(OPEN_MODE_HAS_NO_ACCOUNT)
        if password != str(form.get("again", "")):
            raise accounts.AccountError("the two passwords differ", "again")
        session = security.session_id_of(request, request.app.state.secret_key)
        await run_in_threadpool(accounts.update_user, db, user.name, {"password": password}, user, session)
    except accounts.AccountError as exc:
        return render(request, "account.html", account_context(request, db, password_error=str(exc)),
                      status_code=exc.status)
    return RedirectResponse("/account?done=password", status_code=303)


@router.post("/account/tokens", dependencies=[AnyViewer, Depends(require_csrf)])
async def create_token(request: Request, db: DbDep):
    """A new API token, shown once on the page that answers."""
    user = security.current_user(request)
    try:
        if user is None:
            raise accounts.AccountConflict(OPEN_MODE_HAS_NO_ACCOUNT)
        token = accounts.issue_token(db, user.name, str((await request.form()).get("name", "")), user)
    except accounts.AccountError as exc:
        return render(request, "account.html", account_context(request, db, error=str(exc)), status_code=exc.status)
    return render(request, "account.html", account_context(request, db, new_token=token["token"]), status_code=201)


@router.post("/account/tokens/{token_id}/revoke", dependencies=[AnyViewer, Depends(require_csrf)])
def revoke_token(request: Request, token_id: str, db: DbDep):
    user = security.current_user(request)
    if user is not None:
        try:
            accounts.revoke_token_of(db, user.name, token_id, user)
        except accounts.Unknown:
            pass  # revoked already (a second click, another tab): the page shows it so
    return RedirectResponse("/account", status_code=303)


def users_context(request: Request, db, selected: str | None = None, **extra) -> dict:
    """The users page: every account with its live tokens counted, and the selected one's tokens."""
    listed = accounts.users(db)
    chosen = next((u for u in listed if u["name"] == selected), None)
    user = security.current_user(request)
    done = DONE.get(request.query_params.get("done", ""), "")
    return {"users": listed, "roles": accounts.ROLES, "live": accounts.live_token_counts(db), "selected": chosen,
            "tokens": accounts.tokens_of(db, chosen["name"], user) if chosen else [],
            "me": user.name if user else None, "done": done.format(**chosen) if done and chosen else "",
            "new_token": None, "error": None, "asked": {}} | extra


@router.get("/users", dependencies=[Admin])
def read_users_page(request: Request, db: DbDep, user: str | None = None):
    return render(request, "users.html", users_context(request, db, user))


def _back_to(name: str, done: str) -> RedirectResponse:
    return RedirectResponse(f"/users?{urlencode({'user': name, 'done': done})}#manage", status_code=303)


@router.post("/users", dependencies=[Admin, Depends(require_csrf)])
async def add_user(request: Request, db: DbDep):
    """Form fields `name`, `role`, `password`: a new account, then the page with it selected."""
    form = await request.form()
    body = {key: str(form.get(key, "")) for key in accounts.NEW_USER}
    try:
        user = await run_in_threadpool(accounts.create_user, db, body, security.current_user(request))
    except accounts.AccountError as exc:
        asked = {"name": body["name"], "role": body["role"]}
        return render(request, "users.html", users_context(request, db, error=str(exc), asked=asked),
                      status_code=exc.status)
    return _back_to(user["name"], "added")


@router.post("/users/{name}", dependencies=[Admin, Depends(require_csrf)])
async def change_user(request: Request, name: str, db: DbDep):
    """One of the form fields `role`, `disabled` ("true" or "false") or `password`: the change of
    PATCH /api/users/{name}."""
    form = await request.form()
    changes = {key: str(form[key]) for key in accounts.CHANGES if key in form}
    if "disabled" in changes:
        changes["disabled"] = changes["disabled"] == "true"
    session = security.session_id_of(request, request.app.state.secret_key)
    try:
        await run_in_threadpool(accounts.update_user, db, name, changes, security.current_user(request), session)
    except accounts.AccountError as exc:
        return render(request, "users.html", users_context(request, db, name, error=str(exc)), status_code=exc.status)
    done = ("disabled" if changes["disabled"] else "enabled") if "disabled" in changes else next(iter(changes))
    return _back_to(name, done)


@router.post("/users/{name}/tokens", dependencies=[Admin, Depends(require_csrf)])
async def create_user_token(request: Request, name: str, db: DbDep):
    """A new API token for the user, shown once on the page that answers."""
    label = str((await request.form()).get("name", ""))
    try:
        token = accounts.issue_token(db, name, label, security.current_user(request))
    except accounts.AccountError as exc:
        return render(request, "users.html", users_context(request, db, name, error=str(exc)), status_code=exc.status)
    return render(request, "users.html", users_context(request, db, name, new_token=token["token"]), status_code=201)


@router.post("/users/{name}/tokens/{token_id}/revoke", dependencies=[Admin, Depends(require_csrf)])
def revoke_user_token(request: Request, name: str, token_id: str, db: DbDep):
    try:
        accounts.revoke_token_of(db, name, token_id, security.current_user(request))
    except accounts.AccountError as exc:
        return render(request, "users.html", users_context(request, db, name, error=str(exc)), status_code=exc.status)
    return _back_to(name, "revoked")
