"""Review queues: an admin picks events by a filter (in order, or a seeded random or stratified sample), the
rubric (which label fields are asked, which required), the reviewers, an overlap k and blindness. `next` hands
each reviewer their next item, each item to at most k reviewers and never twice to one; an item is done at k
labels; items the reviewers disagree on go to an admin, whose final label is kept with what it resolved. A
reviewer may skip an item: it comes back to them after everything else. What a caller sees of the labels is
what app.store.labels lets `viewer` see (blind queues hide others' labels until the viewer saved theirs).

A queue of kind `pairwise` holds pairs of rollouts sampled (seeded) within groups of traces instead of events;
its reviewers choose the better rollout (`a`, `b` or `tie`) with a reason, through the same hand-out, skips,
overlap, blindness (app.store.choices) and adjudication; its agreement is on the choice."""

import json
import random
import secrets
from collections import Counter
from typing import NamedTuple

from app.domain import preference
from app.domain.agreement import agreement
from app.domain.label_fields import (
    AGREEMENT_LEVELS,
    BY_NAME,
    NAMES,
    clean_values,
    disagree,
)
from app.domain.refusals import NotFound, Refusal
from app.domain.taxonomy import SUBDECISION_EVENT_TYPES, SUBDECISIONS
from app.services import analysis
from app.services.cache import TraceCache
from app.store import choices as choice_store
from app.store import groups as group_store
from app.store import labels as label_store
from app.store import queues as queue_store
from app.store import traces as trace_store
from app.store.db import Database, iso_utc, utc_now

FILTER_KEYS = ("trace_ids", "systems", "topologies", "tasks", "findings", "event_types", "roles", "agents", "tools",
               "subdecisions")
STRATA = ("trace_id", "system", "topology", "task_id", "type", "role", "agent", "tool")
DEFAULT_FIELDS = ("credit", "counterfactual", "stop", "note")
MAX_ITEMS = 100_000
KINDS = ("events", "pairwise")
DEFAULT_GROUP_BY = "task_id"
# What only a queue of events asks: a pairwise queue is made from groups (`pairs`) and asks the choice.
EVENT_QUEUE_KEYS = ("filter", "sample", "fields", "required")


class QueueError(Refusal, ValueError):
    """A queue that cannot be made as asked; `field` names what is wrong."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")

    def details(self) -> dict:
        return {"field": self.field}


def _strings(value, field: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise QueueError(field, "must be a list of non-empty strings")
    return value


def _whole(value, field: str, default: int, least: int) -> int:
    value = default if value is None else value
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise QueueError(field, f"must be a whole number of at least {least}")
    return value


def _people(body: dict) -> dict:
    """What every queue holds: its name, reviewers, overlap k and blindness, checked."""
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise QueueError("name", "must be non-empty text")
    reviewers = list(dict.fromkeys(_strings(body.get("reviewers"), "reviewers")))
    if not reviewers:
        raise QueueError("reviewers", "name at least one reviewer")
    overlap = body.get("overlap", 1)
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 1 <= overlap <= len(reviewers):
        raise QueueError("overlap", f"must be a whole number from 1 to the {len(reviewers)} reviewer(s)")
    blind = body.get("blind", False)
    if not isinstance(blind, bool):
        raise QueueError("blind", "must be true or false")
    return {"name": name.strip(), "reviewers": reviewers, "overlap": overlap, "blind": blind}


def clean_spec(body: dict) -> dict:
    """The queue as asked, checked; raises QueueError naming the field."""
    kind = body.get("kind", "events")
    if kind not in KINDS:
        raise QueueError("kind", f"must be one of {', '.join(KINDS)}")
    return clean_pair_spec(body) if kind == "pairwise" else clean_event_spec(body)


def clean_pair_spec(body: dict) -> dict:
    """A pairwise queue as asked: which groups (`by`, default task_id; `keys`, default every group), how many
    pairs per group (default 1), the seed (default 0), and whether reviewers see the rollouts' rewards."""
    asked = [key for key in EVENT_QUEUE_KEYS if body.get(key) is not None]
    if asked:
        raise QueueError(asked[0], "a pairwise queue is made from groups (`pairs`) and asks for a choice")
    pairs = body.get("pairs") or {}
    if not isinstance(pairs, dict):
        raise QueueError("pairs", 'must be an object: {"by", "keys", "per_group", "seed"}')
    unknown = sorted(set(pairs) - {"by", "keys", "per_group", "seed"})
    if unknown:
        raise QueueError("pairs", f"unknown key(s) {', '.join(unknown)}; allowed: by, keys, per_group, seed")
    by = pairs.get("by", DEFAULT_GROUP_BY)
    if by not in group_store.GROUP_BY:
        raise QueueError("pairs.by", f"traces are grouped by one of {', '.join(group_store.GROUP_BY)}")
    seed = pairs.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise QueueError("pairs.seed", "must be a whole number")
    show_rewards = body.get("show_rewards", False)
    if not isinstance(show_rewards, bool):
        raise QueueError("show_rewards", "must be true or false")
    return {"kind": "pairwise", **_people(body),
            "pairs": {"by": by, "keys": list(dict.fromkeys(_strings(pairs.get("keys"), "pairs.keys"))),
                      "per_group": _whole(pairs.get("per_group"), "pairs.per_group", 1, 1), "seed": seed},
            "show_rewards": show_rewards}


def clean_event_spec(body: dict) -> dict:
    """A queue of events as asked: its filter, sample and rubric."""
    people = _people(body)
    if body.get("show_rewards") is not None:
        raise QueueError("show_rewards", "only a pairwise queue shows or hides rewards")
    given = body.get("filter") or {}
    if not isinstance(given, dict):
        raise QueueError("filter", "must be an object of lists")
    unknown = sorted(set(given) - set(FILTER_KEYS))
    if unknown:
        raise QueueError("filter", f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(FILTER_KEYS)}")
    flt = {key: _strings(given.get(key), f"filter.{key}") for key in FILTER_KEYS}
    bad = [s for s in flt["subdecisions"] if s not in SUBDECISIONS]
    if bad:
        raise QueueError("filter.subdecisions", f"{', '.join(bad)}: not one of {', '.join(SUBDECISIONS)}")
    sample = body.get("sample")
    if sample is not None:
        if not isinstance(sample, dict) or not isinstance(sample.get("n"), int) or isinstance(sample["n"], bool) \
                or sample["n"] < 1:
            raise QueueError("sample.n", "must be a whole number of at least 1")
        seed = sample.get("seed", 0)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise QueueError("sample.seed", "must be a whole number")
        stratify = sample.get("stratify_by")
        if stratify is not None and stratify not in STRATA:
            raise QueueError("sample.stratify_by", f"{stratify!r} is not one of {', '.join(STRATA)}")
        sample = {"n": sample["n"], "seed": seed, "stratify_by": stratify}
    fields = _strings(body.get("fields"), "fields") or list(DEFAULT_FIELDS)
    required = _strings(body.get("required"), "required")
    for key, values in (("fields", fields), ("required", required)):
        bad = [f for f in values if f not in NAMES]
        if bad:
            raise QueueError(key, f"{', '.join(bad)}: not a label field ({', '.join(NAMES)})")
    if not set(required) <= set(fields):
        raise QueueError("required", "names a field the queue does not ask")
    required = required or default_required(fields)
    return {"kind": "events", "name": people["name"], "filter": flt, "sample": sample, "fields": fields,
            "required": required, **{key: people[key] for key in ("reviewers", "overlap", "blind")}}


def pick(db: Database, lists: dict[str, list[str]], sample: dict | None) -> list[dict]:
    """The items: every event the filter matches, in order, or a seeded random sample (proportional per stratum,
    largest remainders first, when stratified), kept in trace and event order. A sample is drawn from the strata's
    sizes (random.sample's choice depends on them alone) and only the chosen events are read: a filter over a
    training run's rollouts matches hundreds of thousands."""
    by = sample and sample["stratify_by"]
    strata = queue_store.candidate_strata(db, lists, by)
    total = sum(size for _, size in strata)
    if sample is None or sample["n"] >= total:
        if total > MAX_ITEMS:
            raise QueueError("filter", f"matches {total} events; a queue holds at most {MAX_ITEMS} (sample them)")
        return queue_store.queue_candidates(db, lists) if total else []
    if sample["n"] > MAX_ITEMS:
        raise QueueError("sample.n", f"asks {sample['n']} events; a queue holds at most {MAX_ITEMS}")
    rng = random.Random(sample["seed"])
    if by is None:
        return queue_store.candidates_at(db, lists, None, [(None, place) for place in rng.sample(range(total),
                                                                                                   sample["n"])])
    quotas = {value: sample["n"] * size / total for value, size in strata}
    counts = {value: int(q) for value, q in quotas.items()}
    for value in sorted(quotas, key=lambda v: (counts[v] - quotas[v], str(v)))[:sample["n"] - sum(counts.values())]:
        counts[value] += 1
    return queue_store.candidates_at(db, lists, by, [(value, place) for value, size in strata
                                                     for place in rng.sample(range(size), counts[value])])


def create_queue(db: Database, body: dict, created_by: str | None) -> dict:
    spec = clean_spec(body)
    queue_id = "q-" + secrets.token_hex(6)
    if spec["kind"] == "pairwise":
        pairs = sample_group_pairs(db, spec["pairs"])
        db.write(lambda cur: queue_store.insert_pair_queue(cur, queue_id, spec["name"], json.dumps(spec), created_by,
                                                           utc_now(), pairs))
        return summary(db, queue_id, None)
    lists = {key: spec["filter"][key] for key in FILTER_KEYS if key != "subdecisions"}
    if spec["filter"]["subdecisions"]:
        types = {t for s in spec["filter"]["subdecisions"] for t in SUBDECISION_EVENT_TYPES[s]}
        lists["event_types"] = sorted(types & set(lists["event_types"]) if lists["event_types"] else types)
        if not lists["event_types"]:
            raise QueueError("filter", "the event types and sub-decisions asked have no event type in common")
    items = pick(db, lists, spec["sample"])
    if not items:
        raise QueueError("filter", "matches no event")
    db.write(lambda cur: queue_store.insert_queue(cur, queue_id, spec["name"], json.dumps(spec), created_by, utc_now(),
                                              [(row["trace_id"], row["event_id"]) for row in items]))
    return summary(db, queue_id, None)


def sample_group_pairs(db: Database, asked: dict) -> list[preference.Pair]:
    """The pairs of a pairwise queue: up to `per_group` pairs drawn in each group asked (every group when no key
    is named); a named key no trace has is refused, a group of one trace gives none."""
    by = asked["by"]
    groups = {key: group_store.group_trace_ids(db, by, key) for key in asked["keys"] or group_store.group_keys(db, by)}
    missing = [key for key, trace_ids in groups.items() if not trace_ids]
    if missing:
        raise QueueError("pairs.keys", f"no trace has {by} {', '.join(map(repr, missing))}")
    pairs = preference.sample_pairs(groups, asked["per_group"], asked["seed"])
    if not pairs:
        raise QueueError("pairs", f"no group by {by} holds two traces: there is nothing to compare")
    if len(pairs) > MAX_ITEMS:
        raise QueueError("pairs.per_group", f"gives {len(pairs)} pairs; a queue holds at most {MAX_ITEMS}")
    return pairs


def default_required(fields: list[str]) -> list[str]:
    """A queue always requires one field at least, so an untouched item cannot be saved: credit when asked,
    else the first field it asks."""
    return ["credit"] if "credit" in fields else fields[:1]


def load(db: Database, queue_id: str) -> dict:
    row = queue_store.read_queue(db, queue_id)
    if row is None:
        raise NotFound(f"no queue with id '{queue_id}'", what=f"queue '{queue_id}'")
    return _queue(row)


def _queue(row: dict) -> dict:
    """A stored queue row as the services use it: its spec read, with what queues made before a rule lack."""
    spec = {"kind": "events", **json.loads(row["spec"])}  # queues made before pairwise review hold events
    if spec["kind"] == "events":
        spec["required"] = spec["required"] or default_required(spec["fields"])  # queues made before the rule
    return {"id": row["queue_id"], "created_by": row["created_by"], "created_at": iso_utc(row["created_at"]),
            **spec}


def states_of(db: Database, queues: list[dict], viewer: str | None) -> dict[str, dict[int, dict]]:
    """Per queue, by id, per item with any answer in it that `viewer` may see, its state: an event's labels by
    reviewer (`_item_states`), a pair's choices (`_pair_states`); whether it is done and disputed, and its
    adjudication. One read of each kind's answers and one of its adjudications, side by side on a lake, however
    many queues (the queue list shows them all)."""
    by_kind = {kind: [queue for queue in queues if (queue["kind"] == "pairwise") == (kind == "pairwise")]
               for kind in ("pairwise", "events")}
    pairs, events = ([queue["id"] for queue in by_kind[kind]] for kind in ("pairwise", "events"))
    choices, pair_adjudications, labels, adjudications = db.together(
        lambda: choice_store.queue_choices(db, viewer, pairs) if pairs else [],
        lambda: choice_store.pair_adjudications(db, viewer, pairs) if pairs else [],
        lambda: label_store.queue_labels(db, viewer, events) if events else [],
        lambda: label_store.queue_adjudications(db, viewer, events) if events else [])
    return _pair_states(by_kind["pairwise"], choices, pair_adjudications) | \
        _item_states(by_kind["events"], labels, adjudications)


def _item_states(queues: list[dict], labels: list[dict], adjudications: list[dict]) -> dict[str, dict[int, dict]]:
    """Per event queue: each item's labels by reviewer, whether it is done and disputed, and its adjudication."""
    states: dict[str, dict[int, dict]] = {queue["id"]: {} for queue in queues}
    for row in labels:
        state = states[row["queue_id"]].setdefault(row["item_id"], {"trace_id": row["trace_id"],
                                                                    "event_id": row["event_id"], "labels": {}})
        state["labels"][row["reviewer"]] = {key: row[key] for key in ("version", "annotation_id", *NAMES)} | {
            name: json.loads(row[name]) for name in NAMES if BY_NAME[name].kind == "tags"}
    for row in adjudications:
        state = states[row["queue_id"]].setdefault(row["item_id"], {"trace_id": row["trace_id"],
                                                                    "event_id": row["event_id"], "labels": {}})
        state["adjudicated"] = _adjudication(row)
    for queue in queues:
        for state in states[queue["id"]].values():
            state.setdefault("adjudicated", None)
            state["done"] = len(state["labels"]) >= queue["overlap"]
            state["disputed"] = len(state["labels"]) >= 2 and disagree(list(state["labels"].values()),
                                                                       queue["fields"])
    return states


def _adjudication(row: dict) -> dict:
    """A stored adjudication as the API answers it."""
    return {"by": row["adjudicator"], "label": json.loads(row["label"]), "note": row["note"],
            "resolved": json.loads(row["resolved"]), "at": iso_utc(row["created_at"])}


def _choice(row: dict) -> dict:
    """A stored choice version as the API answers it."""
    deciding = ({"side": row["deciding_side"], "event_id": row["deciding_event"]} if row["deciding_event"] is not None
                else None)
    return {"version": row["version"], "choice": row["choice"], "reason": row["reason"], "deciding_event": deciding,
            "created_at": iso_utc(row["created_at"])}


def _pair_states(queues: list[dict], choices: list[dict], adjudications: list[dict]) -> dict[str, dict[int, dict]]:
    """Per pairwise queue: each pair's current choices by reviewer, its adjudication, whether it is done and
    disputed, and the choice it ends with (preference.decision)."""
    states: dict[str, dict[int, dict]] = {queue["id"]: {} for queue in queues}
    for row in choices:
        states[row["queue_id"]].setdefault(row["item_id"], {"choices": {}})["choices"][row["reviewer"]] = \
            _choice(row)
    for row in adjudications:
        states[row["queue_id"]].setdefault(row["item_id"], {"choices": {}})["adjudicated"] = _adjudication(row)
    for queue in queues:
        for state in states[queue["id"]].values():
            state.setdefault("adjudicated", None)
            chosen = [choice["choice"] for choice in state["choices"].values()]
            state["done"] = len(chosen) >= queue["overlap"]
            state["disputed"] = len(chosen) >= 2 and preference.disputed(chosen)
            settled = state["adjudicated"]["label"]["choice"] if state["adjudicated"] else None
            state["decision"] = preference.decision(chosen, settled, state["done"])
    return states


def status_of(state: dict) -> str:
    """What an item's final label is: `adjudicated` (an admin settled it), `disputed` (waiting for an admin),
    `agreed` (its k reviewers labelled it without dispute) or `open` (fewer than k labels)."""
    if state["adjudicated"] is not None:
        return "adjudicated"
    if state["disputed"]:
        return "disputed"
    return "agreed" if state["done"] else "open"


def summary(db: Database, queue_id: str, viewer: str | None) -> dict:
    """The queue with its progress as `viewer` may see it: items, done, answered per reviewer, disputed,
    adjudicated, agreement (per asked field; on the choice in a pairwise queue)."""
    return summaries(db, [load(db, queue_id)], viewer)[0]


def summaries(db: Database, queues: list[dict], viewer: str | None) -> list[dict]:
    """`summary` of each of these queues, in the same few reads however many there are (not a few per queue: on a
    lake each read pays its catalog round trips, and a lab's queues accumulate)."""
    states, counts = db.together(
        lambda: states_of(db, queues, viewer),
        lambda: queue_store.queue_item_counts(db, [queue["id"] for queue in queues]) if queues else {})
    return [_summary(queue, states[queue["id"]], counts.get(queue["id"], 0)) for queue in queues]


def _summary(queue: dict, states: dict[int, dict], items: int) -> dict:
    if queue["kind"] == "pairwise":
        answers = {item: state["choices"] for item, state in states.items()}
        ratings = {"choice": {item: {r: c["choice"] for r, c in given.items()} for item, given in answers.items()}}
        levels = {"choice": "nominal"}
    else:
        answers = {item: state["labels"] for item, state in states.items()}
        ratings = {field: {item: {r: label[field] for r, label in given.items()} for item, given in answers.items()}
                   for field in queue["fields"] if field in AGREEMENT_LEVELS}
        levels = AGREEMENT_LEVELS
    by_reviewer = Counter(reviewer for given in answers.values() for reviewer in given)
    return queue | {
        "items": items,
        "done": sum(state["done"] for state in states.values()),
        "by_reviewer": {reviewer: by_reviewer.get(reviewer, 0) for reviewer in queue["reviewers"]},
        "disputed": sum(state["disputed"] and state["adjudicated"] is None for state in states.values()),
        "adjudicated": sum(state["adjudicated"] is not None for state in states.values()),
        "agreement": {field: agreement(values, queue["reviewers"], levels[field])
                      for field, values in ratings.items()} if len(queue["reviewers"]) >= 2 else {},
    }


def _reviewer_of(queue: dict, reviewer: str) -> None:
    if reviewer not in queue["reviewers"]:
        raise QueueError("reviewer", f"'{reviewer}' is not a reviewer of queue '{queue['id']}'")


def next_item(db: Database, queue_id: str, reviewer: str) -> dict | None:
    """The reviewer's next item: the one `next` gave them that they have neither answered nor skipped, else a
    new one (the first given to fewer than `overlap` reviewers and never to them), else the item they skipped
    longest ago; None when nothing is left."""
    queue = load(db, queue_id)
    _reviewer_of(queue, reviewer)
    kind = queue["kind"]

    def hand_out(cur) -> dict | None:
        item = queue_store.open_assignment(cur, queue_id, reviewer, kind)
        if item is None:
            item = queue_store.next_unassigned(cur, queue_id, reviewer, queue["overlap"], kind)
            if item is not None:
                queue_store.assign(cur, queue_id, item["item_id"], reviewer, utc_now())
        return item or queue_store.skipped_assignment(cur, queue_id, reviewer, kind)

    # One hand-out per queue at a time, across instances too: an item goes to at most `overlap` reviewers.
    return db.write(hand_out, [("queue", queue_id)])


def peek_item(db: Database, queue_id: str, reviewer: str) -> dict | None:
    """The item next_item would give the reviewer now, keeping nothing."""
    queue = load(db, queue_id)
    _reviewer_of(queue, reviewer)
    kind = queue["kind"]
    cur = db.cursor()
    try:
        return (queue_store.open_assignment(cur, queue_id, reviewer, kind)
                or queue_store.next_unassigned(cur, queue_id, reviewer, queue["overlap"], kind)
                or queue_store.skipped_assignment(cur, queue_id, reviewer, kind))
    finally:
        cur.close()


def save_choice(db: Database, queue_id: str, item_id: int, reviewer: str, body: dict) -> tuple[dict, bool]:
    """Save a reviewer's choice on a pair as their next version; whether it was new (a retried
    `client_request_id` answers the version it made before). Raises QueueError, ChoiceError or NotFound."""
    queue = load(db, queue_id)
    if queue["kind"] != "pairwise":
        raise QueueError("queue_id", f"queue '{queue_id}' holds events: label them (POST /api/annotations)")
    _reviewer_of(queue, reviewer)
    item = queue_store.queue_item(db, queue_id, item_id, "pairwise")
    if item is None:
        raise NotFound(f"queue '{queue_id}' has no item {item_id}")
    values = checked_choice(db, item, body, require_reason=True)
    request_id = body.get("client_request_id")
    if request_id is not None and not isinstance(request_id, str):
        raise preference.ChoiceError("client_request_id", "must be text")

    def save(cur) -> tuple[dict, bool]:
        last, retried = choice_store.save_basis(cur, queue_id, item_id, reviewer, request_id)
        if retried is not None:
            return retried, False
        deciding = values["deciding_event"] or {}
        row = {"queue_id": queue_id, "item_id": item_id, "reviewer": reviewer, "version": last + 1,
               "choice": values["choice"], "reason": values["reason"], "deciding_side": deciding.get("side"),
               "deciding_event": deciding.get("event_id"), "client_request_id": request_id, "created_at": utc_now()}
        choice_store.insert_choice(cur, row)
        return row, True

    row, created = db.write(save, [("choice", queue_id, item_id, reviewer)])
    return {"queue_id": queue_id, "item_id": item_id, "reviewer": reviewer, **_choice(row)}, created


def pair_rollouts(db: Database, cache: TraceCache, queue: dict, item: dict) -> dict[str, dict | None]:
    """What the reviewer reads of each side of a pair (preference.rollout_summary, rewards as the queue says);
    None for a side whose trace was deleted since."""
    traces = {side: analysis.stored_trace(db, cache, item["trace_" + side]) for side in preference.SIDES}
    return {side: None if trace is None else preference.rollout_summary(trace, queue["show_rewards"])
            for side, trace in traces.items()}


def checked_choice(db: Database, item: dict, body: dict, require_reason: bool) -> dict:
    """preference.clean_choice of `body`, with its deciding event found in the trace of its side."""
    values = preference.clean_choice(body, require_reason)
    deciding = values["deciding_event"]
    if deciding is not None:
        trace_id = item["trace_" + deciding["side"]]
        if trace_store.event_identity(db, trace_id, deciding["event_id"]) is None:
            raise preference.ChoiceError("deciding_event", f"rollout {deciding['side']} ('{trace_id}') has no event "
                                                           f"'{deciding['event_id']}'")
    return values


def check_label(db: Database, queue_id: str, trace_id: str, event_id: str, reviewer: str, values: dict) -> None:
    """A label saved in a queue: the event is one of its items, the reviewer one of its reviewers, and every
    required field says something. Raises QueueError or NotFound."""
    queue = load(db, queue_id)
    if queue["kind"] == "pairwise":
        raise QueueError("queue_id", f"queue '{queue_id}' compares rollouts: answer its pairs with a choice")
    if not any(row["queue_id"] == queue_id for row in queue_store.queue_items_of_event(db, trace_id, event_id)):
        raise QueueError("queue_id", f"event '{event_id}' of trace '{trace_id}' is not in queue '{queue_id}'")
    _reviewer_of(queue, reviewer)
    missing = [f for f in queue["required"] if BY_NAME[f].is_empty(values.get(f))]
    if missing:
        raise QueueError(missing[0], f"is required in queue '{queue['name']}'")


def skip_item(db: Database, queue_id: str, item_id: int, reviewer: str) -> None:
    """The reviewer puts an item given to them aside: `next` gives it again after everything else."""
    _reviewer_of(load(db, queue_id), reviewer)
    if not db.write(lambda cur: queue_store.skip(cur, queue_id, item_id, reviewer, utc_now()), [("queue", queue_id)]):
        raise NotFound(f"item {item_id} of queue '{queue_id}' was not given to '{reviewer}'")


def adjudicate(db: Database, queue_id: str, item_id: int, adjudicator: str, label: dict, note: str) -> dict:
    """Record an admin's final label on an item (a final choice on a pair: `{"choice", "reason",
    "deciding_event"}`), with the reviewers' answers it resolves."""
    queue = load(db, queue_id)
    item = queue_store.queue_item(db, queue_id, item_id, queue["kind"])
    if item is None:
        raise NotFound(f"queue '{queue_id}' has no item {item_id}")
    if queue["kind"] == "pairwise":
        label = checked_choice(db, item, label, require_reason=False)
        answers = "choices"
    else:
        unknown = sorted(set(label) - set(queue["fields"]))
        if unknown:
            raise QueueError("label", f"{', '.join(unknown)}: not asked by this queue ({', '.join(queue['fields'])})")
        label = clean_values(label)
        answers = "labels"
    state = states_of(db, [queue], None)[queue["id"]].get(item_id)
    if state is None or not state[answers]:
        raise QueueError("item", "no reviewer has answered this item yet: there is nothing to adjudicate")
    resolved = [{"reviewer": r, "version": v["version"]} | ({"annotation_id": v["annotation_id"]} if
                                                            "annotation_id" in v else {})
                for r, v in state[answers].items()]
    db.write(lambda cur: label_store.insert_adjudication(cur, queue_id, item_id, adjudicator, json.dumps(label),
                                                         json.dumps(resolved), note, utc_now()))
    return states_of(db, [queue], None)[queue["id"]][item_id] | {"item_id": item_id}


def items(db: Database, queue_id: str, viewer: str | None) -> list[dict]:
    """Every item in queue order with its state as `viewer` may see it (an item nobody answered yet: no
    labels or choices, not done), and its status; a pair also with the choice it ends with (`decision`)."""
    return item_page(db, queue_id, viewer, None, 0)[0]


def item_page(db: Database, queue_id: str, viewer: str | None, limit: int | None,
              offset: int) -> tuple[list[dict], int]:
    """A page of `items` (`limit` None: every item from `offset` on), and how many items the queue holds: the page's
    items read, and the queue's answers (as many as its answered items, not as its items)."""
    queue = load(db, queue_id)
    states, listed, total = _states_and_page(db, queue, viewer, limit, offset)
    return _item_rows(queue, states, listed), total


def _states_and_page(db: Database, queue: dict, viewer: str | None, limit: int | None,
                     offset: int) -> tuple[dict[int, dict], list[dict], int]:
    """The queue's answers folded by item (`states_of`), a page of its items and how many it holds, side by side on
    a lake."""
    states, (listed, total) = db.together(
        lambda: states_of(db, [queue], viewer)[queue["id"]],
        lambda: queue_store.queue_item_page(db, queue["id"], queue["kind"], limit, offset))
    return states, listed, total


class QueueView(NamedTuple):
    """What a queue's page shows: its summary, its first items, how many it holds, and its disputed items."""
    summary: dict
    items: list[dict]
    total: int
    disputed: list[dict]


def with_items(db: Database, queue_id: str, viewer: str | None, shown: int) -> QueueView:
    """The queue's summary, its first `shown` items and its disputed ones, from one read of its answers (a queue of a
    training run's tool calls holds some 90,000 items: its page reads those it shows)."""
    queue = load(db, queue_id)
    states, listed, total = _states_and_page(db, queue, viewer, shown, 0)
    rows = _item_rows(queue, states, listed)
    on_page = {row["item_id"]: row for row in rows}
    disputed = sorted(item_id for item_id, state in states.items() if state["disputed"])
    beyond = [item_id for item_id in disputed if item_id not in on_page]
    if beyond:
        on_page |= {row["item_id"]: row for row in _item_rows(
            queue, states, queue_store.queue_items_in(db, queue_id, queue["kind"], beyond))}
    return QueueView(_summary(queue, states, total), rows, total,
                     [on_page[item_id] for item_id in disputed if item_id in on_page])


def _item_rows(queue: dict, states: dict[int, dict], listed: list[dict]) -> list[dict]:
    """Each listed item with its state (`states_of`) and status."""
    empty = {"labels": {}, "done": False, "disputed": False, "adjudicated": None}
    if queue["kind"] == "pairwise":
        empty = {"choices": {}, "done": False, "disputed": False, "adjudicated": None, "decision": None}
    rows = []
    for item in listed:
        state = states.get(item["item_id"], empty)
        rows.append(item | {key: value for key, value in state.items() if key not in ("trace_id", "event_id")}
                    | {"status": status_of(state)})
    return rows


def final_rows(db: Database, queue_id: str, viewer: str | None) -> tuple[dict, list[dict]]:
    """The queue and one row per item with its final label: the adjudication where an admin settled it, the
    reviewers' consensus where they agreed (numbers averaged, flags any, tags joined, notes kept by name),
    none while disputed or open; with who adjudicated, why, and each reviewer's label."""
    queue = load(db, queue_id)
    rows = []
    for item in items(db, queue_id, viewer):
        adjudicated = item["adjudicated"]
        final = (adjudicated["label"] if adjudicated else
                 consensus(item["labels"], queue["fields"]) if item["status"] == "agreed" else {})
        rows.append({"item_id": item["item_id"], "trace_id": item["trace_id"], "event_id": item["event_id"],
                     "status": item["status"], "final": {f: final.get(f) for f in queue["fields"]},
                     "adjudicated_by": adjudicated["by"] if adjudicated else None,
                     "adjudication_note": adjudicated["note"] if adjudicated else None,
                     "labels": {reviewer: {f: label[f] for f in queue["fields"]}
                                for reviewer, label in item["labels"].items()}})
    return queue, rows


def consensus(labels: dict[str, dict], fields: list[str]) -> dict:
    """The agreed value of each field among reviewers who agree: the mean of numbers, the common answer,
    any flag, the union of tags, the notes each under its reviewer's name."""
    out = {}
    for name in fields:
        declared = BY_NAME[name]
        given = {reviewer: label[name] for reviewer, label in labels.items() if not declared.is_empty(label[name])}
        values = list(given.values())
        if declared.kind == "number":
            out[name] = sum(values) / len(values) if values else None
        elif declared.kind == "flag":
            out[name] = any(values)
        elif declared.kind == "tags":
            out[name] = list(dict.fromkeys(tag for tags in values for tag in tags))
        elif declared.kind == "text":
            out[name] = values[0] if len(given) == 1 else " | ".join(f"{r}: {v}" for r, v in given.items())
        else:
            out[name] = values[0] if values else None
    return out


def list_all(db: Database, viewer: str | None) -> list[dict]:
    """Every queue, newest first, with its progress as `viewer` may see it."""
    return summaries(db, [_queue(row) for row in queue_store.list_queues(db)], viewer)


def final_table(queue: dict, rows: list[dict]) -> tuple[list[str], list[dict]]:
    """final_rows flattened for a CSV: `final.<field>` columns, then `<reviewer>.<field>` for each of the
    queue's reviewers, every cell as the field writes it."""
    fields = queue["fields"]
    columns = ["item_id", "trace_id", "event_id", "status", *(f"final.{f}" for f in fields), "adjudicated_by",
               "adjudication_note", *(f"{r}.{f}" for r in queue["reviewers"] for f in fields)]
    flat = []
    for row in rows:
        cells = {key: row[key] for key in ("item_id", "trace_id", "event_id", "status", "adjudicated_by",
                                           "adjudication_note")}
        cells |= {f"final.{f}": BY_NAME[f].to_text(row["final"][f]) for f in fields}
        for reviewer, label in row["labels"].items():
            cells |= {f"{reviewer}.{f}": BY_NAME[f].to_text(label[f]) for f in fields}
        flat.append(cells)
    return columns, flat
