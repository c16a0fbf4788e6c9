"""SQLModel row classes, for rows written and read by column name. Events and edges have none on purpose: they
load in bulk through Arrow.

`primary_key` is what SQLModel asks of a table class; the tables themselves have no constraints (migrations/0013):
the app keeps these keys unique and makes the ids (app/store/keys.py).
"""

from pydantic import NaiveDatetime
from sqlmodel import Field, SQLModel


class PaperTag(SQLModel, table=True):
    """One version of a reviewer's tags on a paper; None means the reviewer keeps the pool's value."""

    __tablename__ = "paper_tags"

    tag_id: int | None = Field(default=None, primary_key=True)
    key: str
    reviewer: str
    version: int
    category: str | None = None
    is_rl: str | None = None
    reward_type: str | None = None
    credit_granularity: str | None = None
    orchestration_form: str | None = None
    scenario: str | None = None
    is_core: str | None = None
    verified: str | None = None
    note: str = ""
    created_at: NaiveDatetime  # UTC
