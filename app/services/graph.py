"""The interaction graph of a stored trace: figure JSON and overlay channels, built once and cached."""

import orjson

from app.domain.figure import build_figure
from app.domain.overlays import event_channels
from app.domain.taxonomy import COUNTERFACTUAL_SCORES, STOP_SCORES
from app.services.analysis import computed_credit, parse_computed
from app.services.cache import TraceCache
from app.store import queries
from app.store.db import Database


def figure_json(db: Database, cache: TraceCache, trace_id: str, group: bool | None,
                expand: frozenset[str]) -> bytes | None:
    """Serialized figure payload (see figure.build_figure), or None for an unknown trace."""
    version = queries.trace_version(db, trace_id)
    if version is None:
        return None

    def build() -> bytes:
        trace = {"trace_id": trace_id, "events": queries.read_event_cores(db, trace_id),
                 "edges": queries.read_edges(db, trace_id)}
        return orjson.dumps(build_figure(trace, group, expand))

    return cache.get_or_build(("figure", trace_id, version, group, expand), build)


def channels(db: Database, cache: TraceCache, trace_id: str) -> dict[str, list] | None:
    """Every numeric per-event channel of a trace, aligned with event order; None for an unknown trace."""
    version = queries.trace_version(db, trace_id)
    if version is None:
        return None

    def build() -> dict[str, list]:
        n_events = db.scalar("SELECT n_events FROM traces WHERE trace_id = ?", [trace_id])
        return event_channels(queries.read_event_extras(db, trace_id), n_events)

    return cache.get_or_build(("channels", trace_id, version), build)


HUMAN_MEAN = "human credit (mean)"
HUMAN_PREFIX = "human credit: "
HUMAN_COUNTERFACTUAL = "human counterfactual (mean: no 0, partly 0.5, yes 1)"
HUMAN_STOP = "human stop (mean: too early -1, right 0, too late 1)"


def overlay_channel(db: Database, cache: TraceCache, trace_id: str, name: str) -> list | None:
    """One overlay channel's values: stored or human channels, or computed credit built on request."""
    computed = parse_computed(name)
    if computed:
        return computed_credit(db, cache, trace_id, *computed)
    return (overlay_channels(db, cache, trace_id) or {}).get(name)


def overlay_channels(db: Database, cache: TraceCache, trace_id: str) -> dict[str, list] | None:
    """The trace's own numeric channels plus reviewers' current labels: credit (mean and per reviewer), and the
    mean counterfactual and stop answers as numbers."""
    stored = channels(db, cache, trace_id)
    if stored is None:
        return None
    n_events = queries.event_count(db, trace_id)
    per_reviewer: dict[str, list] = {}
    credits: dict[int, list[float]] = {}
    for row in queries.human_credit(db, trace_id):
        column = per_reviewer.setdefault(HUMAN_PREFIX + row["reviewer"], [None] * n_events)
        column[row["seq"]] = row["credit"]
        credits.setdefault(row["seq"], []).append(row["credit"])
    answers = queries.human_answers(db, trace_id)
    human = {HUMAN_MEAN: credits,
             HUMAN_COUNTERFACTUAL: _scores(answers, "counterfactual", COUNTERFACTUAL_SCORES),
             HUMAN_STOP: _scores(answers, "stop", STOP_SCORES)}
    means = {name: _means(values, n_events) for name, values in human.items() if values}
    return {**means, **dict(sorted(per_reviewer.items())), **stored}


def _scores(rows: list[dict], field: str, scores: dict[str, float]) -> dict[int, list[float]]:
    """Per event position, the numbers of its answers to one question (answers without a number left out)."""
    out: dict[int, list[float]] = {}
    for row in rows:
        if row[field] in scores:
            out.setdefault(row["seq"], []).append(scores[row[field]])
    return out


def _means(values: dict[int, list[float]], n_events: int) -> list:
    column = [None] * n_events
    for seq, numbers in values.items():
        column[seq] = sum(numbers) / len(numbers)
    return column
