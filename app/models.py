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
