"""Exports for RL trainers (app.domain.rl_export): rLLM episodes, TRL stepwise rows and the credit table, as
JSON Lines written one trace at a time, so an export of every trace never holds more than one in memory."""

from collections import defaultdict
from collections.abc import Iterator

from app.domain import rl_export
from app.domain.jsontext import dumps_bytes
from app.services import analysis, labels
from app.services.cache import TraceCache
from app.store import queries
from app.store.db import Database

RL_FORMATS = ("rllm", "trl_stepwise", "credit_jsonl")
DEFAULT_CHANNEL = "team"  # the reward channel computed credit spreads, when the trace has it


def reward_channel(trace: dict, channel: str | None) -> str | None:
    """The channel asked for (None when the trace lacks it), else `team`, else the trace's first."""
    if channel is not None:
        return channel if channel in trace["rewards"] else None
    if DEFAULT_CHANNEL in trace["rewards"]:
        return DEFAULT_CHANNEL
    return next(iter(trace["rewards"]), None)


def rl_lines(db: Database, cache: TraceCache, fmt: str, trace_ids: list[str], rule: str = "causal",
             channel: str | None = None, queue_id: str | None = None) -> Iterator[bytes]:
    """JSON Lines of `fmt` for these traces; computed credit by `rule` over `channel` (see reward_channel); with
    `queue_id`, only the labels and adjudications of that review queue."""
    for trace_id in trace_ids:
        trace = analysis.stored_trace(db, cache, trace_id)
        if trace is None:  # deleted while the export ran
            continue
        name = reward_channel(trace, channel)
        computed = analysis.computed_credit(db, cache, trace_id, rule, name) if name is not None else None
        final = queries.adjudicated_labels(db, trace_id, queue_id)
        if fmt == "credit_jsonl":
            by_event: dict[str, list[dict]] = defaultdict(list)
            for label in labels.list_labels(db, trace_id, queue_id=queue_id):
                if not label["empty"]:
                    by_event[label["event_id"]].append(label)
            rows = rl_export.credit_rows(trace, by_event, computed, final)
        else:
            credits: dict[int, list[float]] = defaultdict(list)
            for row in queries.human_credit(db, trace_id, queue_id):
                credits[row["seq"]].append(row["credit"])
            human = {seq: sum(values) / len(values) for seq, values in credits.items()}
            seq_of = {event["id"]: seq for seq, event in enumerate(trace["events"])}
            settled = {seq_of[event_id]: label["credit"] for event_id, label in final.items()
                       if event_id in seq_of and label.get("credit") is not None}
            rewards, sources = rl_export.step_rewards(len(trace["events"]), human, computed, settled)
            rows = ([rl_export.rllm_episode(trace, rewards, sources)] if fmt == "rllm"
                    else rl_export.trl_stepwise_rows(trace, rewards))
        for row in rows:
            yield dumps_bytes(row) + b"\n"
