"""Runtime settings: one class, every field defaulted and described, read from ORCHESTRACE_* variables."""

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from app.ingest.importers.common import CONTENT_CAP_BYTES, KEEP, ContentPolicy
from app.store.lake import is_lake_url

PACKAGE = Path(__file__).resolve().parent
ENV_PREFIX = "ORCHESTRACE_"


def data_dir(name: str) -> Path:
    """A folder the app ships: inside the installed package (a wheel), else beside it (the repo)."""
    packaged = PACKAGE / name
    return packaged if packaged.is_dir() else PACKAGE.parent / name


class Settings(BaseModel):
    db: Path | str = Field(Path("data/orchestrace.duckdb"),
                           description="Path of the embedded DuckDB file, or a DuckLake store: "
                                       "`ducklake:postgres:<libpq connection string>` (needs the `lake` extra).")
    lake_data: str | None = Field(None, description="Folder (or object-storage URL) of a DuckLake store's "
                                                    "Parquet files; needed when `db` is a DuckLake URL.")
    host: str = Field("127.0.0.1", description="Interface `orchestrace serve` listens on.")
    port: int = Field(8000, description="Port `orchestrace serve` listens on.")
    max_body_bytes: int = Field(200 * 1024 * 1024, description="Largest request body accepted; larger ones get 413.")
    migrations_dir: Path = Field(data_dir("migrations"), description="Folder of numbered plain-SQL migrations.")
    templates_dir: Path = Field(data_dir("templates"), description="Folder of Jinja2 templates.")
    static_dir: Path = Field(data_dir("static"), description="Folder of stylesheets, scripts and vendored libraries.")
    sample_dir: Path = Field(data_dir("sample_traces"),
                             description="Folder of sample traces loaded by `orchestrace demo`.")
    auth: Literal["auto", "required"] = Field(
        "auto", description="`required`: every page and API call needs a login or an API token. `auto`: open "
                            "single-user mode while bound to a loopback address, `required` otherwise.")
    allowed_hosts: str = Field(
        "", description="Comma-separated Host names the server answers to (against DNS rebinding); by default "
                        "the bind address, localhost, 127.0.0.1 and ::1.")
    content: ContentPolicy = Field(
        KEEP, description="What importers keep of the messages, tool arguments and results a source carried "
                          "(uploads, `POST /api/traces`, `/v1/traces`, `/v1/traces/ingest`): `keep` keeps them as "
                          f"the event property `content` (at most {CONTENT_CAP_BYTES // 1024} KiB an event, cut "
                          "beyond), `hash` only their `content_ref` hashes, whatever a request asks.")
    backup_dir: Path | None = Field(
        None, description="Folder backups are written to (`POST /api/backup`, `orchestrace backup`): a relative "
                          "name goes there, and the server writes nowhere else. By default `backups` beside the "
                          "database file (`data/backups`).")
    secret_key: str | None = Field(
        None, description="Key that signs session cookies and form tokens; by default one is made on first start "
                          "and kept in the database.")

    trace_sql: bool = Field(
        False, description="Log every SQL statement with its time (logger `orchestrace.sql`), and let any request "
                           "show its statements: add `_trace=1` to its URL (a page lists them at its foot; every "
                           "answer gets a `Server-Timing` header).")

    @field_validator("db", mode="before")
    @classmethod
    def _store(cls, value):
        """A file's path as a Path; a lake URL as the text given (a Path would make `//` `/` and drop a trailing
        `/`, as a libpq URI or socket folder may hold)."""
        if isinstance(value, str) and is_lake_url(value):
            return value
        return Path(value)

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        """Settings from ORCHESTRACE_<FIELD> variables, then explicit overrides (CLI flags)."""
        values = {}
        for name in cls.model_fields:
            env = os.environ.get(ENV_PREFIX + name.upper())
            if env is not None:
                values[name] = env
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
