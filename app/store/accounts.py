"""Accounts SQL: users, browser sessions, API tokens and the kept signing key. Functions taking `cur` run
inside the caller's write transaction; the rules (who may, the last admin, hashing) are the service's."""

from app.store.db import Database
from app.store.sql import execute

USER_COLUMNS = "username, role, disabled_at IS NOT NULL AS disabled, created_at"


def user_exists(cur, name: str) -> bool:
    return execute(cur, "SELECT count(*) FROM users WHERE username = ?", [name]).fetchone()[0] > 0


def insert_user(cur, name: str, role: str, password_hash: str, created_at) -> None:
    execute(cur, "INSERT INTO users (username, role, password_hash, created_at) VALUES (?, ?, ?, ?)",
            [name, role, password_hash, created_at])


def list_users(db: Database) -> list[dict]:
    return db.fetchall(f"SELECT {USER_COLUMNS} FROM users ORDER BY username")


def read_user(db: Database, name: str) -> dict | None:
    return db.fetchone(f"SELECT {USER_COLUMNS} FROM users WHERE username = ?", [name])


def role_and_disabled(cur, name: str) -> tuple | None:
    """(role, disabled_at) of an account, on the cursor of a write."""
    return execute(cur, "SELECT role, disabled_at FROM users WHERE username = ?", [name]).fetchone()


def other_enabled_admins(cur, name: str) -> int:
    return execute(cur, "SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL AND username <> ?",
                   [name]).fetchone()[0]


def set_role_and_disabled(cur, name: str, role: str, disabled_at) -> None:
    execute(cur, "UPDATE users SET role = ?, disabled_at = ? WHERE username = ?", [role, disabled_at, name])


def set_password_hash(cur, name: str, password_hash: str) -> None:
    execute(cur, "UPDATE users SET password_hash = ? WHERE username = ?", [password_hash, name])


def end_sessions_of(cur, name: str, kept_hash: str | None) -> None:
    """End every session of an account but the one whose hash is `kept_hash` (None: all of them)."""
    execute(cur, "DELETE FROM sessions WHERE username = ? AND session_hash IS DISTINCT FROM ?", [name, kept_hash])


def enabled_admins(db: Database) -> int:
    return db.scalar("SELECT count(*) FROM users WHERE role = 'admin' AND disabled_at IS NULL")


def login_row(db: Database, name: str) -> tuple | None:
    """(role, password_hash, disabled_at) of an account, for a password check."""
    return db.execute("SELECT role, password_hash, disabled_at FROM users WHERE username = ?", [name]).fetchone()


def insert_session(cur, session_hash: str, name: str, created_at, expires_at) -> None:
    execute(cur, "INSERT INTO sessions VALUES (?, ?, ?, ?)", [session_hash, name, created_at, expires_at])


def session_owner(db: Database, session_hash: str, now) -> tuple | None:
    """(username, role) of a live session of an enabled account."""
    return db.execute(
        "SELECT u.username, u.role FROM sessions s JOIN users u ON u.username = s.username "
        "WHERE s.session_hash = ? AND s.expires_at > ? AND u.disabled_at IS NULL", [session_hash, now]).fetchone()


def delete_session(cur, session_hash: str, now) -> None:
    """End a session, and every expired one with it."""
    execute(cur, "DELETE FROM sessions WHERE session_hash = ? OR expires_at <= ?", [session_hash, now])


def insert_token(cur, token_id: str, name: str, label: str, token_hash: str, created_at) -> None:
    execute(cur, "INSERT INTO api_tokens (token_id, username, name, token_hash, created_at) VALUES (?, ?, ?, ?, ?)",
            [token_id, name, label, token_hash, created_at])


def token_owner(db: Database, token_id: str) -> tuple | None:
    """(token_hash, username, role, last_used_at) of a live token of an enabled account."""
    return db.execute(
        "SELECT t.token_hash, u.username, u.role, t.last_used_at FROM api_tokens t "
        "JOIN users u ON u.username = t.username "
        "WHERE t.token_id = ? AND t.revoked_at IS NULL AND u.disabled_at IS NULL", [token_id]).fetchone()


def token_used(cur, token_id: str, at) -> None:
    execute(cur, "UPDATE api_tokens SET last_used_at = ? WHERE token_id = ?", [at, token_id])


def list_tokens(db: Database, name: str | None = None) -> list[dict]:
    return db.fetchall("SELECT token_id, username, name, created_at, last_used_at, revoked_at FROM api_tokens "
                       "WHERE ? IS NULL OR username = ? ORDER BY created_at DESC", [name, name])


def live_token_counts(db: Database) -> dict[str, int]:
    """Live (unrevoked) tokens per user name."""
    return dict(db.execute("SELECT username, count(*) FROM api_tokens WHERE revoked_at IS NULL "
                           "GROUP BY username").fetchall())


def revoke_token(cur, token_id: str, owner: str | None, at) -> bool:
    """Revoke a live token (only `owner`'s, when given); False when there is no such live token."""
    found = execute(cur, "SELECT count(*) FROM api_tokens WHERE token_id = ? AND revoked_at IS NULL "
                         "AND (? IS NULL OR username = ?)", [token_id, owner, owner]).fetchone()[0]
    if found:
        execute(cur, "UPDATE api_tokens SET revoked_at = ? WHERE token_id = ?", [at, token_id])
    return bool(found)


def signing_key(cur) -> str | None:
    # min(): should two keys ever be kept (instances made them before keys were locked), all pick the same
    return execute(cur, "SELECT min(value) FROM app_secrets WHERE name = 'signing_key'").fetchone()[0]


def keep_signing_key(cur, value: str) -> None:
    execute(cur, "INSERT INTO app_secrets VALUES ('signing_key', ?)", [value])
