"""JSON API of accounts, managed while the server runs: users and roles (admins), and API tokens (admins for
anyone, a user for their own). Whose account the caller may change is decided by accounts.may_manage."""

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.services import accounts
from app.web import security
from app.web.access import Admin, Owner
from app.web.apidoc import (
    FIELD_ERROR,
    MAYBE_TEXT,
    NOT_JSON,
    READ_REFUSALS,
    TEXT,
    WRITE_REFUSALS,
    json_body,
    object_schema,
    reply,
)
from app.web.deps import DbDep
from app.web.requests import json_object

router = APIRouter(prefix="/api/users", tags=["users"])

USER = object_schema({"name": TEXT, "role": {"enum": list(accounts.ROLES)}, "disabled": {"type": "boolean"},
                      "created_at": TEXT}, "name", "role", "disabled", "created_at")
TOKEN = object_schema({"token_id": TEXT, "user": TEXT, "name": TEXT, "created_at": TEXT, "last_used_at": MAYBE_TEXT,
                       "revoked_at": MAYBE_TEXT}, "token_id", "user", "name", "created_at")
NEW_TOKEN = object_schema({**TOKEN["properties"], "token": TEXT}, "token", *TOKEN["required"])
INVALID_FIELD = {422: reply("a field is not valid, or unknown (named in `field`)", FIELD_ERROR)}
NOT_YOURS = {403: reply("a cross-site request, or an account that is not the caller's to manage", FIELD_ERROR)}
NO_USER = {404: reply("no such user")}


@router.get("", dependencies=[Admin], responses=READ_REFUSALS | {200: reply("every account", object_schema(
    {"users": {"type": "array", "items": USER}}, "users")), 403: reply("the caller is not an admin")})
def read_users(db: DbDep):
    return {"users": accounts.users(db)}


@router.post("", dependencies=[Admin], status_code=201, openapi_extra=json_body('`{"name", "role", "password"}`'),
             responses=WRITE_REFUSALS | NOT_JSON | INVALID_FIELD | {
                 201: reply("the new account", USER), 409: reply("the name is taken", FIELD_ERROR)})
async def create_user(request: Request, db: DbDep):
    """Add an account (admins): a name of 1-64 letters, digits or `. _ @ -`, a role, a password of 8 or more."""
    body = await json_object(request)
    return await run_in_threadpool(accounts.create_user, db, body, security.current_user(request))


@router.patch("/{name}", dependencies=[Owner], openapi_extra=json_body('any of `{"role", "disabled", "password"}`'),
              responses=WRITE_REFUSALS | NOT_JSON | INVALID_FIELD | NOT_YOURS | NO_USER | {
                  200: reply("the account as changed", USER),
                  409: reply("the change would leave no enabled admin", FIELD_ERROR)})
async def update_user(name: str, request: Request, db: DbDep):
    """Change an account's role, disabled state or password (admins); anyone may change their own password.
    Disabling ends the account's sessions and refuses its tokens; a new password ends its other sessions."""
    body = await json_object(request)
    session = security.session_id_of(request, request.app.state.secret_key)
    return await run_in_threadpool(accounts.update_user, db, name, body, security.current_user(request), session)


@router.get("/{name}/tokens", dependencies=[Owner], responses=READ_REFUSALS | NOT_YOURS | NO_USER | {200: reply(
    "the user's tokens, newest first, revoked ones too", object_schema(
        {"tokens": {"type": "array", "items": TOKEN}}, "tokens"))})
def read_tokens(name: str, request: Request, db: DbDep):
    return {"tokens": accounts.tokens_of(db, name, security.current_user(request))}


@router.post("/{name}/tokens", dependencies=[Owner], status_code=201,
             openapi_extra=json_body('`{"name": "what it is for"}` (optional)'),
             responses=WRITE_REFUSALS | NOT_JSON | INVALID_FIELD | NOT_YOURS | NO_USER | {
                 201: reply("the new token, with `token` shown this once", NEW_TOKEN)})
async def create_token(name: str, request: Request, db: DbDep):
    """Make an API token for the user; only its hash is kept, so the answer is the one time it is shown."""
    body = await json_object(request)
    accounts.check_fields(body, ("name",))
    return await run_in_threadpool(accounts.issue_token, db, name, body.get("name", ""),
                                   security.current_user(request))


@router.delete("/{name}/tokens/{token_id}", dependencies=[Owner], status_code=204,
               responses=WRITE_REFUSALS | NOT_YOURS | {
                   204: {"description": "revoked"},
                   404: reply("no such user, or no live token of theirs with this id")})
def revoke_token(name: str, token_id: str, request: Request, db: DbDep):
    accounts.revoke_token_of(db, name, token_id, security.current_user(request))
    return Response(status_code=204)
