"""Who may call each route, declared where the route is, as full-stack-fastapi-template's
`CurrentSuperuser = Annotated[User, Depends(...)]`: every route names one of `Public`, `AnyViewer`, `Reviewer`,
`Admin` or `Owner` in its decorator's `dependencies=[...]` (or as a parameter, `user: Annotated[User | None,
Admin]`, which also hands it the caller).

The guard (app.web.security) finds the route a request is for and applies the route's declaration before
anything of the request is read; the dependency applies it again where the route runs. A route that declares
nothing, or two declarations, is refused at request time, and `check_routes` makes create_app fail on one. Open
single-user mode is open: it has no accounts to check.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import Depends, HTTPException, Request
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute

from app.services import accounts
from app.services.accounts import User

VIEWER, REVIEWER, ADMIN = accounts.ROLES
LOG_IN = "log in (a session) or send Authorization: Bearer <token>"
ALIASES = "Public, AnyViewer, Reviewer, Admin or Owner"


@dataclass(frozen=True)
class Access:
    """Who may call a route: anyone with at least `role` (None: anyone, logged in or not); with `owner`, only on
    their own account, the path's `{name}` (admins: on any), as accounts.may_manage decides."""

    role: str | None
    owner: bool = False

    def refusal(self, user: User | None, open_mode: bool, params: dict) -> tuple[int, str] | None:
        """The status and message refusing this caller, or None when they may call."""
        if self.role is None or open_mode:
            return None
        if user is None:
            return 401, LOG_IN
        if not user.may(self.role):
            return 403, f"'{user.name}' is a {user.role}; this needs the {self.role} role"
        if self.owner and not accounts.may_manage(user, params.get("name")):
            return 403, f"'{user.name}' is a {user.role}: only an admin may manage another user's account"
        return None

    async def __call__(self, request: Request) -> User | None:
        """The dependency: the caller (None in open mode or when anonymous on a public route), else refused."""
        user = _caller(request)
        refused = self.refusal(user, _open_mode(request), request.path_params)
        if refused is not None:
            status, message = refused
            raise HTTPException(status, message, headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)
        return user


Public = Depends(Access(None))
AnyViewer = Depends(Access(VIEWER))
Reviewer = Depends(Access(REVIEWER))
Admin = Depends(Access(ADMIN))
Owner = Depends(Access(VIEWER, owner=True))
# A path no route serves (a 404 or a 405 to come) answers logged-in callers only: the anonymous learn nothing of
# which paths exist.
UNKNOWN_PATH = Access(VIEWER)


class PublicFiles(StaticFiles):
    """Static files anyone may fetch (the login page needs its stylesheet)."""

    access = Access(None)


class UndeclaredAccess(RuntimeError):
    """The app has a route that does not say who may call it."""


def _caller(request: Request) -> User | None:
    return getattr(request.state, "user", None)


def _open_mode(request: Request) -> bool:
    return getattr(request.state, "open_mode", False)


def routes(app) -> Iterator[BaseRoute]:
    """Every route the app serves, in the order it matches them: its own and those of the routers it includes
    (which are included without a prefix: each router's prefix is in its routes' paths)."""
    yield from _walk(app.router.routes)


def _walk(table) -> Iterator[BaseRoute]:
    for route in table:
        included = getattr(route, "original_router", None)  # FastAPI keeps an included router apart
        if included is None:
            yield route
        else:
            yield from _walk(included.routes)


def declarations(route: BaseRoute) -> list[Access]:
    """The access declarations of a route: its Access dependencies (an API route), or its app's (a mount)."""
    if isinstance(route, APIRoute):
        return [dependency.call for dependency in route.dependant.dependencies if isinstance(dependency.call, Access)]
    declared = getattr(getattr(route, "app", None), "access", None)
    return [declared] if isinstance(declared, Access) else []


def declared(route: BaseRoute) -> Access | None:
    """The one access a route declares; None when it declares none, or more than one."""
    found = declarations(route)
    return found[0] if len(found) == 1 else None


def describe(route: BaseRoute) -> str:
    methods = ",".join(sorted(getattr(route, "methods", None) or ["*"]))
    endpoint = getattr(route, "endpoint", None)
    where = f" ({endpoint.__module__}.{endpoint.__name__})" if endpoint else ""
    return f"{methods} {getattr(route, 'path', route)}{where}"


def check_routes(app) -> None:
    """Refuse to build an app with a route that does not declare who may call it, or declares it twice."""
    faulty = [f"{describe(route)}: {len(declarations(route))} declarations" for route in routes(app)
              if declared(route) is None]
    if faulty:
        raise UndeclaredAccess(f"each route declares one of {ALIASES} in its dependencies; these do not: "
                               + "; ".join(faulty))


def route_for(app, method: str, path: str) -> tuple[BaseRoute | None, dict]:
    """The route that serves `method path`, with its path parameters; (None, {}) when no route serves it."""
    for route in routes(app):
        regex = getattr(route, "path_regex", None)
        found = regex.match(path) if regex is not None else None
        methods = getattr(route, "methods", None)
        if found and (methods is None or method in methods):
            return route, {key: route.param_convertors[key].convert(value)
                           for key, value in found.groupdict().items()}
    return None, {}


def refusal_for(request: Request, method: str, path: str) -> tuple[int, str] | None:
    """Why the route serving `method path` refuses this request's caller (status and message), or None."""
    route, params = route_for(request.app, method, path)
    access = UNKNOWN_PATH if route is None else declared(route)
    if access is None:
        return 403, (f"{method} {path} is refused: its route declares who may call it nowhere (or twice); "
                     f"a route declares one of {ALIASES}")
    return access.refusal(_caller(request), _open_mode(request), params)


def may_call(request: Request, method: str, path: str) -> bool:
    """Whether this caller's `method path` would pass its route's declaration (a page offers a form only then)."""
    return refusal_for(request, method, path) is None


def replace_refusal(request: Request) -> str | None:
    """Why this caller may not replace a stored trace (admins only; anyone in open mode), or None when they may."""
    user = _caller(request)
    if Access(ADMIN).refusal(user, _open_mode(request), {}) is None:
        return None
    who = f"'{user.name}' is a {user.role}" if user else "you are not logged in"
    return (f"replacing a stored trace needs the admin role ({who}): send it under a new trace id, "
            "or ask an admin to replace it")
