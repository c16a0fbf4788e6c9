"""A migrated DuckDB file that already holds accounts, made once per set of accounts and copied for each test: each
argon2id hash takes 0.3-0.7 s, three accounts a test two seconds, in tests that are about roles, tokens and
sessions rather than hashing (the tests that change or check a password still hash it)."""

import shutil
from pathlib import Path

from app.services import accounts
from app.store.db import Database

_made: dict[tuple, Path] = {}


def copy_with_users(target: Path, migrated: Path, folder: Path, users: dict[str, str], password: str) -> Path:
    """`target`, a copy of the migrated file `migrated` with a user of each name and role in `users`, all with
    `password`; the first copy of each set of accounts is kept in `folder` for the next."""
    key = (str(migrated), tuple(users.items()), password)
    if key not in _made:
        template = folder / f"users-{len(_made)}.duckdb"
        shutil.copyfile(migrated, template)
        db = Database(template)
        try:
            for name, role in users.items():
                accounts.add_user(db, name, role, password)
        finally:
            db.close()
        _made[key] = template
    shutil.copyfile(_made[key], target)
    return target
