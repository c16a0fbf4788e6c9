"""Accounts of a shared server: users and roles, password checks, browser sessions and API tokens.

Roles are ordered: a `viewer` reads, a `reviewer` also labels, tags and sends traces, an `admin` may do
everything (delete, replace, import labels and papers, manage users). Passwords are hashed with argon2id;
session ids and tokens are 256-bit random values, so SHA-256 of them is enough to store.

Accounts are managed while the server runs: who may change what is `may_manage`, the one rule (an admin any
account; anyone their own password and tokens). A disabled account's sessions end and its tokens are refused
until it is enabled again; there is always an enabled admin left.

Wrong passwords are throttled (`LoginThrottle`) per account and per client address, in the memory of the process
that checks them; password checks and hashes, which argon2id makes memory-hard (64 MiB each), run at most
`PASSWORD_CHECKS_AT_ONCE` at a time.
"""

import hashlib
import hmac
import math
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from app.domain.refusals import Refusal
from app.store import accounts as store
from app.store.db import CommitConflict, Database, iso_utc
from app.store.db import utc_now as _now

ROLES = ("viewer", "reviewer", "admin")
USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MIN_PASSWORD = 8
SESSION_DAYS = 14
TOKEN_PREFIX = "orc"
TOKEN_NAME_MAX = 100
TOKEN_USE_RECORDED_EVERY = timedelta(minutes=1)  # a token's last use is kept to the minute
NEW_USER = ("name", "role", "password")  # the fields of a new account
CHANGES = ("role", "disabled", "password")  # what a change of an account may hold
SELF_SERVICE = frozenset({"password"})  # what anyone may change of their own account (their tokens too)
ACCOUNTS_LOCK = ("accounts",)  # held by role and state changes, so two instances cannot demote the last two admins
_hasher = PasswordHasher()
# Each argon2id check or hash holds its memory_cost (64 MiB by default) for its run: 40 logins at once took a
# server from 180 MB to 2.6 GB. More wait their turn.
PASSWORD_CHECKS_AT_ONCE = 2
_password_work = threading.BoundedSemaphore(PASSWORD_CHECKS_AT_ONCE)
# Wrong passwords allowed in LOGIN_WINDOW_S, per account name and per client address, before logins to that
# account (or from that address) are refused for LOGIN_LOCK_S, even with the right password.
LOGIN_FAILURES_PER_ACCOUNT = 5
LOGIN_FAILURES_PER_ADDRESS = 20
LOGIN_WINDOW_S = 10 * 60
LOGIN_LOCK_S = 5 * 60
LOGIN_TRACKED_MAX = 10_000  # accounts and addresses with recent failures kept in memory at most


class AccountError(Refusal, ValueError):
    """A refused account operation; the message says why and `field` names the request's field at fault."""

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(message)

    def details(self) -> dict:
        return {"field": self.field} if self.field else {}


class AccountConflict(AccountError):
    """What the accounts hold refuses it: the name is taken, or no enabled admin would be left."""

    status = 409


class NotAllowed(AccountError):
    """The caller may not manage this account, or not this part of it (see may_manage)."""

    status = 403


class Unknown(AccountError):
    """No such user, or no such live token of the user."""

    status = 404


@dataclass(frozen=True)
class User:
    name: str
    role: str

    def may(self, role: str) -> bool:
        """True when this user's role is `role` or above it."""
        return ROLES.index(self.role) >= ROLES.index(role)


def may_manage(actor: User | None, target: str | None, fields=()) -> bool:
    """Whether `actor` may change `fields` of account `target` (no fields: its tokens; `target` None: add an
    account). An admin may do anything, anyone else their own password and tokens; no actor is open mode's one
    user or the command line holding the database file, who may do anything."""
    if actor is None or actor.may("admin"):
        return True
    return actor.name == target and set(fields) <= SELF_SERVICE


def _require(actor: User | None, target: str | None, fields=()) -> None:
    if may_manage(actor, target, fields):
        return
    if target is None:
        raise NotAllowed(f"'{actor.name}' is a {actor.role}: only an admin may add users")
    if actor.name != target:
        raise NotAllowed(f"'{actor.name}' is a {actor.role}: only an admin may manage another user's account")
    field = sorted(set(fields) - SELF_SERVICE)[0]
    raise NotAllowed(f"'{actor.name}' is a {actor.role}: you may change your own password, not your {field}", field)


def check_fields(body: dict, allowed: tuple[str, ...]) -> None:
    """Refuse a field that is not one of `allowed`, naming it."""
    unknown = [key for key in body if key not in allowed]
    if unknown:
        raise AccountError(f"unknown field '{unknown[0]}' (the fields are {', '.join(allowed)})", unknown[0])


def _check_name(name) -> str:
    if not isinstance(name, str) or not USERNAME.fullmatch(name):  # match() would take a trailing newline
        raise AccountError("a user name is 1-64 letters, digits or . _ @ - (starting with a letter or digit)", "name")
    return name


def _check_role(role) -> str:
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}", "role")
    return role


def _password_hash(password) -> str:
    if not isinstance(password, str) or len(password) < MIN_PASSWORD:
        raise AccountError(f"a password has at least {MIN_PASSWORD} characters", "password")
    with _password_work:
        return _hasher.hash(password)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def add_user(db: Database, name: str, role: str, password: str, actor: User | None = None) -> User:
    _require(actor, None)
    name, role, password_hash = _check_name(name), _check_role(role), _password_hash(password)

    def add(cur) -> None:
        if store.user_exists(cur, name):
            raise AccountConflict(f"user '{name}' exists already", "name")
        store.insert_user(cur, name, role, password_hash, _now())

    db.write(add, [("user", name)])  # names are unique by the check above, across instances too
    return User(name, role)


def create_user(db: Database, body: dict, actor: User | None = None) -> dict:
    """A new account from `{"name", "role", "password"}`, as `users` shows it."""
    check_fields(body, NEW_USER)
    user = add_user(db, body.get("name"), body.get("role"), body.get("password"), actor)
    return user_of(db, user.name)


def list_users(db: Database) -> list[dict]:
    return store.list_users(db)


def _shown_user(row: dict) -> dict:
    return {"name": row["username"], "role": row["role"], "disabled": row["disabled"],
            "created_at": iso_utc(row["created_at"])}


def users(db: Database) -> list[dict]:
    """Every account as the API and the pages show it: name, role, disabled, created_at."""
    return [_shown_user(row) for row in list_users(db)]


def user_of(db: Database, name: str) -> dict:
    row = store.read_user(db, name)
    if row is None:
        raise Unknown(f"no user '{name}'")
    return _shown_user(row)


def update_user(db: Database, name: str, changes: dict, actor: User | None = None,
                keep_session: str | None = None) -> dict:
    """Change any of `role`, `disabled` and `password` of an account; returns it as `users` shows it.

    Disabling ends the account's sessions (its tokens are refused while it stays disabled); a new password ends
    its other sessions, all but `keep_session` when the account is the actor's own. The last enabled admin is
    neither demoted nor disabled."""
    check_fields(changes, CHANGES)
    if not changes:
        raise AccountError(f"nothing to change: give any of {', '.join(CHANGES)}")
    _require(actor, name, changes)
    if "role" in changes:
        _check_role(changes["role"])
    if not isinstance(changes.get("disabled", False), bool):
        raise AccountError("disabled must be true or false", "disabled")
    password_hash = _password_hash(changes["password"]) if "password" in changes else None
    kept = _sha256(keep_session) if keep_session and actor is not None and actor.name == name else None
    now = _now()

    def update(cur) -> None:
        row = store.role_and_disabled(cur, name)
        if row is None:
            raise Unknown(f"no user '{name}'")
        role, disabled = changes.get("role", row[0]), changes.get("disabled", row[1] is not None)
        if row[0] == "admin" and row[1] is None and (role != "admin" or disabled):
            if not store.other_enabled_admins(cur, name):
                raise AccountConflict(f"'{name}' is the last enabled admin: make another user an admin first, or "
                                      "nobody could manage accounts", "disabled" if disabled else "role")
        store.set_role_and_disabled(cur, name, role, (row[1] or now) if disabled else None)
        if password_hash is not None:
            store.set_password_hash(cur, name, password_hash)
        if disabled or password_hash is not None:
            store.end_sessions_of(cur, name, None if disabled else kept)

    db.write(update, [ACCOUNTS_LOCK])
    return user_of(db, name)


def has_admin(db: Database) -> bool:
    return bool(store.enabled_admins(db))


def check_password(db: Database, name: str, password: str) -> User | None:
    """The user when the password is theirs; None otherwise (the same time is spent for unknown names). A
    disabled account with its right password is refused, saying so."""
    row = store.login_row(db, name)
    stored = row[1] if row else _UNKNOWN_USER_HASH
    try:
        with _password_work:
            _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return None
    if row and row[2] is not None:
        raise NotAllowed(f"the account '{name}' is disabled: an admin may enable it again")
    return User(name, row[0]) if row else None


_UNKNOWN_USER_HASH = _hasher.hash(secrets.token_urlsafe(16))


@dataclass(frozen=True)
class LoginLock:
    """Logging in refused for a while: why, and the seconds until the lock lifts (the Retry-After)."""

    message: str
    retry_after_s: int


@dataclass
class _Failures:
    times: list[float] = field(default_factory=list)  # of the wrong passwords in the window, until a lock
    locked_until: float = 0.0
    last: float = 0.0  # the latest wrong password


class LoginThrottle:
    """Wrong passwords counted per account name and per client address over a sliding window; past the limit,
    logins to the account (or from the address) are refused until a lock lifts by itself, the right password
    too, without checking it. Kept in this process's memory: each server process (each instance of a lake)
    counts its own, and a restart forgets them."""

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._tracked: OrderedDict[tuple[str, str], _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def lock_of(self, name: str, address: str) -> LoginLock | None:
        """The lock that refuses this login now, if any."""
        now = self._clock()
        with self._lock:
            for key, what in ((("account", name), f"for '{name}'"), (("address", address), "from your address")):
                failures = self._tracked.get(key)
                if failures is not None and failures.locked_until > now:
                    left = math.ceil(failures.locked_until - now)
                    return LoginLock(f"too many wrong passwords {what}: logging in is refused for the next "
                                     f"{_minutes(left)}, even with the right password; try again then", left)
        return None

    def failed(self, name: str, address: str) -> None:
        """Count a wrong password for the account and the address; one past its limit locks it."""
        now = self._clock()
        with self._lock:
            for key, limit in ((("account", name), LOGIN_FAILURES_PER_ACCOUNT),
                               (("address", address), LOGIN_FAILURES_PER_ADDRESS)):
                failures = self._tracked.pop(key, None) or _Failures()
                failures.times = [t for t in failures.times if t > now - LOGIN_WINDOW_S] + [now]
                if len(failures.times) >= limit:
                    failures.times, failures.locked_until = [], now + LOGIN_LOCK_S
                failures.last = now
                self._tracked[key] = failures  # kept in the order of their latest failure
            self._forget_old(now)

    def succeeded(self, name: str) -> None:
        """A right password: the account's count starts again (its address's does not, or an attacker with an
        account of their own could clear theirs between guesses)."""
        with self._lock:
            self._tracked.pop(("account", name), None)

    def _forget_old(self, now: float) -> None:
        """Drop what can no longer refuse anything (no failure in the window or the lock's time), then the
        least recent beyond LOGIN_TRACKED_MAX."""
        while self._tracked:
            oldest = next(iter(self._tracked.values()))
            if oldest.last > now - max(LOGIN_WINDOW_S, LOGIN_LOCK_S) and len(self._tracked) <= LOGIN_TRACKED_MAX:
                break
            self._tracked.popitem(last=False)


def _minutes(seconds: int) -> str:
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute" + ("" if minutes == 1 else "s")


def start_session(db: Database, user: User) -> str:
    """A new session id for the cookie."""
    session_id = secrets.token_urlsafe(32)
    now = _now()
    db.write(lambda cur: store.insert_session(cur, _sha256(session_id), user.name, now,
                                              now + timedelta(days=SESSION_DAYS)))
    return session_id


def session_user(db: Database, session_id: str) -> User | None:
    row = store.session_owner(db, _sha256(session_id), _now())
    return User(*row) if row else None


def end_session(db: Database, session_id: str) -> None:
    db.write(lambda cur: store.delete_session(cur, _sha256(session_id), _now()))


def issue_token(db: Database, name: str, label="", actor: User | None = None) -> dict:
    """A new API token for user `name`: its listing, with the token itself this once (only its hash is kept)."""
    _require(actor, name)
    if not isinstance(label, str) or len(label) > TOKEN_NAME_MAX:
        raise AccountError(f"a token's name is text of at most {TOKEN_NAME_MAX} characters", "name")
    label = label.strip() or "token"
    token_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
    now = _now()

    def insert(cur) -> None:
        if not store.user_exists(cur, name):
            raise Unknown(f"no user '{name}' (add one with `orchestrace users add`)")
        store.insert_token(cur, token_id, name, label, _sha256(token), now)

    db.write(insert)
    return {"token": token, "token_id": token_id, "user": name, "name": label, "created_at": iso_utc(now),
            "last_used_at": None, "revoked_at": None}


def create_token(db: Database, name: str, label: str = "") -> str:
    """A new API token for user `name`, returned once: only its hash is stored."""
    return issue_token(db, name, label)["token"]


def token_user(db: Database, token: str) -> User | None:
    """The owner of a live token of an enabled account; records its use."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    row = store.token_owner(db, parts[1])
    if row is None or not hmac.compare_digest(row[0], _sha256(token)):
        return None
    now = _now()
    if row[3] is None or now - row[3] >= TOKEN_USE_RECORDED_EVERY:
        # Best effort: an exporter's every request need not write, and a use recorded by another instance of a
        # lake at the same moment (a commit conflict) is as good as this one.
        try:
            db.write(lambda cur: store.token_used(cur, parts[1], now))
        except CommitConflict:
            pass
    return User(row[1], row[2])


def list_tokens(db: Database, name: str | None = None) -> list[dict]:
    return store.list_tokens(db, name)


def live_token_counts(db: Database) -> dict[str, int]:
    """Live (unrevoked) tokens per user name."""
    return store.live_token_counts(db)


def tokens_of(db: Database, name: str, actor: User | None = None) -> list[dict]:
    """A user's tokens, newest first, as the API and the pages show them (revoked ones too)."""
    _require(actor, name)
    user_of(db, name)  # an unknown user is a 404, not an empty list
    return [{"token_id": t["token_id"], "user": t["username"], "name": t["name"], "created_at": _when(t["created_at"]),
             "last_used_at": _when(t["last_used_at"]), "revoked_at": _when(t["revoked_at"])}
            for t in list_tokens(db, name)]


def _when(stamp) -> str | None:
    return iso_utc(stamp) if stamp else None


def revoke_token(db: Database, token_id: str, owner: str | None = None) -> bool:
    """Revoke a token (only the owner's, when `owner` is given); False when there is no such live token."""
    return db.write(lambda cur: store.revoke_token(cur, token_id, owner, _now()))


def revoke_token_of(db: Database, name: str, token_id: str, actor: User | None = None) -> None:
    """Revoke one of user `name`'s live tokens, as `actor` (see may_manage)."""
    _require(actor, name)
    if not revoke_token(db, token_id, name):
        raise Unknown(f"no live token '{token_id}' of '{name}'")


def secret_key(db: Database, configured: str | None) -> bytes:
    """The key that signs cookies and form tokens: the configured one, else one made once and kept."""
    if configured:
        return configured.encode()
    def read_or_make(cur) -> str:
        key = store.signing_key(cur)
        if key is None:
            key = secrets.token_hex(32)
            store.keep_signing_key(cur, key)
        return key

    # Instances starting together on one lake make one key between them, so each accepts the others' cookies.
    return db.write(read_or_make, [("secret", "signing_key")]).encode()
