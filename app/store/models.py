"""SQLModel row classes. Events and edges have none on purpose: they load in bulk through Arrow.

`primary_key` marks the ORM's identity of a row (what `session.get` and `merge` look up); the tables themselves
have no constraints (migrations/0013): the app keeps these keys unique and makes the ids (app/store/keys.py).
"""

from pydantic import NaiveDatetime
from sqlmodel import Field, SQLModel


class Trace(SQLModel, table=True):
    """One stored trace: identity, JSON-encoded reward/cost/metric objects, and counts for listing."""

    __tablename__ = "traces"

    trace_id: str = Field(primary_key=True)
    task_id: str
    system: str | None = None
    topology: str | None = None
    rewards: str
    costs: str
    metrics: str | None = None
    n_events: int
    n_edges: int
    n_agents: int
    t_max: float
    tokens: float
    wall_clock_s: float
    ingested_at: NaiveDatetime  # UTC


class Paper(SQLModel, table=True):
    """A row of the paper pool, every cell kept as its CSV text; `position` is the import order."""

    __tablename__ = "papers"

    key: str = Field(primary_key=True)
    position: int
    title: str
    first_author: str
    affiliation: str
    year: str
    arxiv_id: str
    venue: str
    url: str
    category: str
    is_rl: str
    reward_type: str
    credit_granularity: str
    orchestration_form: str
    scenario: str
    is_core: str
    one_liner: str
    verified: str
    notes: str
    imported_at: NaiveDatetime  # UTC


class ExcludedRecord(SQLModel, table=True):
    """A row of the exclusion log, cells as CSV text."""

    __tablename__ = "excluded"

    record_id: str = Field(primary_key=True)
    position: int
    source: str
    query_family: str
    screening_label: str
    identifier: str
    url: str
    date_screened: str
    stage: str
    exclusion_reason: str
    imported_at: NaiveDatetime  # UTC


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
