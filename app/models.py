"""SQLModel row classes. Events and edges have none on purpose: they load in bulk through Arrow."""

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


class Annotation(SQLModel, table=True):
    """One version of a reviewer's label on an event; the highest version is the current label."""

    __tablename__ = "annotations"

    annotation_id: int | None = Field(default=None, primary_key=True)
    trace_id: str
    event_id: str
    reviewer: str
    version: int
    credit: float | None = None
    reward_family: str | None = None
    credit_unit: str | None = None
    subdecision: str | None = None
    safety: bool = False
    tags: str = "[]"  # JSON array of strings
    note: str = ""
    paper: str | None = None
    annotator_kind: str = "human"
    event_type: str | None = None
    agent: str | None = None
    role: str | None = None
    client_request_id: str | None = None
    created_at: NaiveDatetime  # UTC


class Reviewer(SQLModel, table=True):
    """A reviewer name, created once and then picked from a list."""

    __tablename__ = "reviewers"

    name: str = Field(primary_key=True)
    created_at: NaiveDatetime  # UTC
