"""Every export of labels, one function for the API and the command line: labels as CSV or JSON, a queue's
final labels, and for RL trainers (app.domain.rl_export) rLLM episodes, TRL stepwise rows and the credit table,
as JSON Lines written a chunk of traces at a time (read together, a bounded number of events), so an export of every
trace never holds more than a chunk in memory; and a pairwise queue's decided pairs as preference pairs
(app.domain.preference), a chunk of pairs at a time."""

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from app.domain import preference, rl_export
from app.domain.credit import assign
from app.domain.jsontext import dumps_bytes
from app.domain.label_fields import disagree
from app.domain.refusals import NotFound, Refusal
from app.services import labels, queues
from app.store import labels as label_store
from app.store import queues as queue_store
from app.store import traces as trace_store
from app.store.db import Database

RL_FORMATS = ("rllm", "trl_stepwise", "credit_jsonl")
PREFERENCE_FORMAT = "preference_pairs"  # of a pairwise queue; every other format exports event labels
FORMATS = ("csv", "json", *RL_FORMATS, PREFERENCE_FORMAT)
MEDIA_TYPES = {"csv": "text/csv; charset=utf-8", "json": "application/json",
               **dict.fromkeys((*RL_FORMATS, PREFERENCE_FORMAT), "application/jsonl")}


@dataclass(frozen=True)
class Export:
    """An export ready to send or write: its media type, a file name, and its bytes in chunks."""

    media_type: str
    filename: str
    chunks: Iterator[bytes]


class ExportRefused(Refusal):
    """An export asked in a way that cannot be answered (the message says what to give)."""

    status = 422


def label_export(db: Database, viewer: str | None, fmt: str, trace_id: str | None = None,
                 queue_id: str | None = None, final: bool = False, history: bool = False, rule: str = "causal",
                 channel: str | None = None) -> Export:
    """The labels `viewer` may see as `fmt` (FORMATS): of one trace, of a review queue, or of everything; with
    `final`, a queue's items with their final labels. Raises NotFound for an unknown trace or queue."""
    kind = queues.load(db, queue_id)["kind"] if queue_id is not None else None
    if (fmt == PREFERENCE_FORMAT) != (kind == "pairwise"):
        raise ExportRefused(f"format={PREFERENCE_FORMAT} exports a pairwise queue (give its queue_id), and a "
                            f"pairwise queue exports as format={PREFERENCE_FORMAT} only")
    if fmt == PREFERENCE_FORMAT:
        return Export(MEDIA_TYPES[fmt], f"{fmt}-{queue_id}.jsonl", preference_lines(db, viewer, queue_id))
    if final:
        if queue_id is None or fmt not in ("csv", "json"):
            raise ExportRefused("final=true exports one review queue: give queue_id, with format csv or json")
        queue, rows = queues.final_rows(db, queue_id, viewer)
        if fmt == "json":
            body = dumps_bytes(rows)
        else:
            columns, flat = queues.final_table(queue, rows)
            body = labels.to_csv(flat, columns).encode()
        return Export(MEDIA_TYPES[fmt], f"final-{queue_id}.{fmt}", iter([body]))
    if fmt in RL_FORMATS:  # (labels, unlike these, stay exportable after their trace is deleted)
        if trace_id is not None and not trace_store.trace_exists(db, trace_id):
            raise NotFound(f"no trace with id '{trace_id}'")
        if queue_id is not None:
            ids = [t for t in queue_store.queue_trace_ids(db, queue_id) if trace_id in (None, t)]
        else:
            ids = [trace_id] if trace_id else (label_store.labelled_trace_ids(db, viewer) if fmt == "credit_jsonl"
                                               else trace_store.trace_ids(db))
        name = f"{fmt}{'-' + trace_id if trace_id else ''}{'-' + queue_id if queue_id else ''}.jsonl"
        return Export(MEDIA_TYPES[fmt], name, rl_lines(db, viewer, fmt, ids, rule, channel, queue_id))
    rows = labels.list_labels(db, viewer, trace_id, None, None, history, queue_id)
    name = f"annotations{'-' + trace_id if trace_id else ''}{'-history' if history else ''}.{fmt}"
    body = dumps_bytes(labels.export_rows(rows)) if fmt == "json" else labels.to_csv(labels.export_rows(rows)).encode()
    return Export(MEDIA_TYPES[fmt], name, iter([body]))
def preference_lines(db: Database, viewer: str | None, queue_id: str) -> Iterator[bytes]:
    """JSON Lines of preference pairs: one per pair of the queue whose decision `viewer` may see is `a` or `b`
    (ties and undecided pairs are left out, and pairs whose trace was deleted since)."""
    decided = [item for item in queues.items(db, queue_id, viewer) if item["decision"] in preference.SIDES]
    ids = list(dict.fromkeys(trace_id for item in decided for trace_id in (item["trace_a"], item["trace_b"])))
    for pairs in _chunks(decided, _pair, trace_store.event_counts(db, ids)):
        traces = trace_store.read_traces(db, list(dict.fromkeys(t for item in pairs for t in _pair(item))))
        for item in pairs:
            trace_a, trace_b = traces.get(item["trace_a"]), traces.get(item["trace_b"])
            if trace_a is None or trace_b is None:  # deleted while the export ran
                continue
            adjudicated = item["adjudicated"]
            yield dumps_bytes(preference.preference_row(queue_id, item["group"], item["decision"], trace_a, trace_b,
                                                        sorted(item["choices"]),
                                                        adjudicated["by"] if adjudicated else None)) + b"\n"


def _pair(item: dict) -> tuple[str, str]:
    return item["trace_a"], item["trace_b"]


DEFAULT_CHANNEL = "team"  # the reward channel computed credit spreads, when the trace has it


def reward_channel(trace: dict, channel: str | None) -> str | None:
    """The channel asked for (None when the trace lacks it), else `team`, else the trace's first."""
    if channel is not None:
        return channel if channel in trace["rewards"] else None
    if DEFAULT_CHANNEL in trace["rewards"]:
        return DEFAULT_CHANNEL
    return next(iter(trace["rewards"]), None)


def rl_lines(db: Database, viewer: str | None, fmt: str, trace_ids: list[str],
             rule: str = "causal", channel: str | None = None, queue_id: str | None = None) -> Iterator[bytes]:
    """JSON Lines of `fmt` for these traces, with the labels `viewer` may see; computed credit by `rule` over
    `channel` (see reward_channel); with `queue_id`, only the labels and adjudications of that review queue.
    Events whose reviewers' credits disagree, unsettled by an admin, are marked `disputed`. The traces are read
    a chunk at a time (`_chunks`), each chunk's traces and labels in a few reads."""
    for chunk in _chunks(trace_ids, lambda trace_id: (trace_id,), trace_store.event_counts(db, trace_ids)):
        traces, labelled, credited, adjudicated = db.together(  # side by side on a lake
            lambda: trace_store.read_traces(db, chunk),
            lambda: labels.list_labels(db, viewer, queue_id=queue_id, trace_ids=chunk),
            lambda: label_store.human_credit_in(db, viewer, chunk, queue_id) if fmt != "credit_jsonl" else [],
            lambda: label_store.adjudicated_labels_in(db, viewer, chunk, queue_id))
        labels_of: dict[str, list[dict]] = defaultdict(list)
        for label in labelled:
            labels_of[label["trace_id"]].append(label)
        credits_of: dict[str, list[dict]] = defaultdict(list)
        for row in credited:
            credits_of[row["trace_id"]].append(row)
        for trace_id in chunk:
            trace = traces.get(trace_id)
            if trace is None:  # deleted while the export ran
                continue
            rows = _rl_rows(trace, fmt, rule, channel, labels_of[trace_id], credits_of[trace_id],
                            adjudicated.get(trace_id, {}))
            for row in rows:
                yield dumps_bytes(row) + b"\n"


# An export reads this many traces at once, or fewer whose events add up to EXPORT_CHUNK_EVENTS: a trace at a time
# cost three reads of its own and three of its labels (10,000 rollouts took 228 s); a chunk holds a bounded number
# of events in memory, whatever the traces' sizes.
EXPORT_CHUNK_TRACES = 1000
EXPORT_CHUNK_EVENTS = 200_000


def _chunks(items: list, traces_of: Callable[[object], tuple[str, ...]], events: dict[str, int]) -> Iterator[list]:
    """The items (each needing the traces `traces_of` it) whose traces are all stored (`events`: their sizes), in
    order, in chunks whose traces number at most EXPORT_CHUNK_TRACES and hold at most EXPORT_CHUNK_EVENTS events; an
    item larger than that is a chunk of its own."""
    chunk: list = []
    traces: set[str] = set()
    size = 0
    for item in items:
        needed = [trace_id for trace_id in dict.fromkeys(traces_of(item)) if trace_id not in traces]
        if any(trace_id not in events for trace_id in needed):
            continue
        more = sum(events[trace_id] for trace_id in needed)
        if chunk and (len(traces) + len(needed) > EXPORT_CHUNK_TRACES or size + more > EXPORT_CHUNK_EVENTS):
            yield chunk
            chunk, traces, size = [], set(), 0
            needed = list(dict.fromkeys(traces_of(item)))
            more = sum(events[trace_id] for trace_id in needed)
        chunk.append(item)
        traces.update(needed)
        size += more
    if chunk:
        yield chunk


def _rl_rows(trace: dict, fmt: str, rule: str, channel: str | None, given: list[dict], credits: list[dict],
             adjudications: dict) -> list[dict]:
    """The rows of `fmt` of one trace, from its labels (`given`), its human credit rows and its adjudications."""
    name = reward_channel(trace, channel)
    computed = assign(trace, rule, trace["rewards"][name]) if name is not None else None
    final = {event_id: json.loads(label) for event_id, (label, _note, _by) in adjudications.items()}
    by_event: dict[str, list[dict]] = defaultdict(list)
    for label in given:
        if not label["empty"]:
            by_event[label["event_id"]].append(label)
    disputed = frozenset(event_id for event_id, labelled in by_event.items()  # two credits or more, apart
                         if disagree([label for label in labelled if label["credit"] is not None], ["credit"]))
    if fmt == "credit_jsonl":
        return rl_export.credit_rows(trace, by_event, computed, final, disputed)
    by_seq: dict[int, list[float]] = defaultdict(list)
    for row in credits:
        by_seq[row["seq"]].append(row["credit"])
    human = {seq: sum(values) / len(values) for seq, values in by_seq.items()}
    seq_of = {event["id"]: seq for seq, event in enumerate(trace["events"])}
    settled = {seq_of[event_id]: label["credit"] for event_id, label in final.items()
               if event_id in seq_of and label.get("credit") is not None}
    rewards, sources = rl_export.step_rewards(len(trace["events"]), human, computed, settled,
                                              frozenset(seq_of[e] for e in disputed if e in seq_of))
    return [rl_export.rllm_episode(trace, rewards, sources)] if fmt == "rllm" else \
        rl_export.trl_stepwise_rows(trace, rewards)
