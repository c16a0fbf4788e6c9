"""Accounts of a shared server: users and roles, password checks, browser sessions and API tokens.

Roles are ordered: a `viewer` reads, a `reviewer` also labels, tags and sends traces, an `admin` may do
everything (delete, replace, import labels and papers, manage users). Passwords are hashed with argon2id;
session ids and tokens are 256-bit random values, so SHA-256 of them is enough to store.
"""

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from app.store.db import CommitConflict, Database
from app.store.db import utc_now as _now

ROLES = ("viewer", "reviewer", "admin")
USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
MIN_PASSWORD = 8
SESSION_DAYS = 14
TOKEN_PREFIX = "orc"
TOKEN_USE_RECORDED_EVERY = timedelta(minutes=1)  # a token's last use is kept to the minute
_hasher = PasswordHasher()


class AccountError(ValueError):
    """A refused account operation; the message says why."""


@dataclass(frozen=True)
class User:
    name: str
    role: str

    def may(self, role: str) -> bool:
        """True when this user's role is `role` or above it."""
        return ROLES.index(self.role) >= ROLES.index(role)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def add_user(db: Database, name: str, role: str, password: str) -> User:
    if not USERNAME.match(name or ""):
        raise AccountError("a user name is 1-64 letters, digits or . _ @ - (starting with a letter or digit)")
    if role not in ROLES:
        raise AccountError(f"role must be one of {', '.join(ROLES)}")
    if len(password) < MIN_PASSWORD:
        raise AccountError(f"a password has at least {MIN_PASSWORD} characters")
    password_hash = _hasher.hash(password)

    def add(cur) -> None:
        if cur.execute("SELECT count(*) FROM users WHERE username = ?", [name]).fetchone()[0]:
            raise AccountError(f"user '{name}' exists already")
        cur.execute("INSERT INTO users VALUES (?, ?, ?, ?)", [name, role, password_hash, _now()])

    db.write(add, [("user", name)])  # names are unique by the check above, across instances too
    return User(name, role)


def list_users(db: Database) -> list[dict]:
    return db.fetchall("SELECT username, role, created_at FROM users ORDER BY username")


def has_admin(db: Database) -> bool:
    return bool(db.scalar("SELECT count(*) FROM users WHERE role = 'admin'"))


def check_password(db: Database, name: str, password: str) -> User | None:
    """The user when the password is theirs; None otherwise (the same time is spent for unknown names)."""
    row = db.execute("SELECT role, password_hash FROM users WHERE username = ?", [name]).fetchone()
    stored = row[1] if row else _UNKNOWN_USER_HASH
    try:
        _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return None
    return User(name, row[0]) if row else None


_UNKNOWN_USER_HASH = _hasher.hash(secrets.token_urlsafe(16))


def start_session(db: Database, user: User) -> str:
    """A new session id for the cookie."""
    session_id = secrets.token_urlsafe(32)
    now = _now()
    db.write(lambda cur: cur.execute("INSERT INTO sessions VALUES (?, ?, ?, ?)",
                                     [_sha256(session_id), user.name, now, now + timedelta(days=SESSION_DAYS)]))
    return session_id


def session_user(db: Database, session_id: str) -> User | None:
    row = db.execute(
        "SELECT u.username, u.role FROM sessions s JOIN users u ON u.username = s.username "
        "WHERE s.session_hash = ? AND s.expires_at > ?", [_sha256(session_id), _now()]).fetchone()
    return User(*row) if row else None


def end_session(db: Database, session_id: str) -> None:
    db.write(lambda cur: cur.execute("DELETE FROM sessions WHERE session_hash = ? OR expires_at <= ?",
                                     [_sha256(session_id), _now()]))


def create_token(db: Database, name: str, label: str = "") -> str:
    """A new API token for user `name`, returned once: only its hash is stored."""
    if not db.scalar("SELECT count(*) FROM users WHERE username = ?", [name]):
        raise AccountError(f"no user '{name}' (add one with `orchestrace users add`)")
    token_id = secrets.token_hex(6)
    token = f"{TOKEN_PREFIX}_{token_id}_{secrets.token_urlsafe(32)}"
    db.write(lambda cur: cur.execute("INSERT INTO api_tokens VALUES (?, ?, ?, ?, ?, NULL, NULL)",
                                     [token_id, name, label or "token", _sha256(token), _now()]))
    return token


def token_user(db: Database, token: str) -> User | None:
    """The owner of a live token; records its use."""
    parts = token.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    row = db.execute(
        "SELECT t.token_hash, u.username, u.role, t.last_used_at FROM api_tokens t "
        "JOIN users u ON u.username = t.username WHERE t.token_id = ? AND t.revoked_at IS NULL", [parts[1]]).fetchone()
    if row is None or not hmac.compare_digest(row[0], _sha256(token)):
        return None
    now = _now()
    if row[3] is None or now - row[3] >= TOKEN_USE_RECORDED_EVERY:
        # Best effort: an exporter's every request need not write, and a use recorded by another instance of a
        # lake at the same moment (a commit conflict) is as good as this one.
        try:
            db.write(lambda cur: cur.execute("UPDATE api_tokens SET last_used_at = ? WHERE token_id = ?",
                                             [now, parts[1]]))
        except CommitConflict:
            pass
    return User(row[1], row[2])


def list_tokens(db: Database, name: str | None = None) -> list[dict]:
    return db.fetchall("SELECT token_id, username, name, created_at, last_used_at, revoked_at FROM api_tokens "
                       "WHERE ? IS NULL OR username = ? ORDER BY created_at DESC", [name, name])


def revoke_token(db: Database, token_id: str, owner: str | None = None) -> bool:
    """Revoke a token (only the owner's, when `owner` is given); False when there is no such live token."""
    def revoke(cur) -> bool:
        found = cur.execute("SELECT count(*) FROM api_tokens WHERE token_id = ? AND revoked_at IS NULL "
                            "AND (? IS NULL OR username = ?)", [token_id, owner, owner]).fetchone()[0]
        if found:
            cur.execute("UPDATE api_tokens SET revoked_at = ? WHERE token_id = ?", [_now(), token_id])
        return bool(found)

    return db.write(revoke)


def secret_key(db: Database, configured: str | None) -> bytes:
    """The key that signs cookies and form tokens: the configured one, else one made once and kept."""
    if configured:
        return configured.encode()
    def read_or_make(cur) -> str:
        # min(): should two keys ever be kept (instances made them before keys were locked), all pick the same
        row = cur.execute("SELECT min(value) FROM app_secrets WHERE name = 'signing_key'").fetchone()
        if row[0] is None:
            row = (secrets.token_hex(32),)
            cur.execute("INSERT INTO app_secrets VALUES ('signing_key', ?)", [row[0]])
        return row[0]

    # Instances starting together on one lake make one key between them, so each accepts the others' cookies.
    return db.write(read_or_make, [("secret", "signing_key")]).encode()
