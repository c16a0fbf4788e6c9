"""Review queues: an admin picks events by a filter (in order, or a seeded random or stratified sample), the
rubric (which label fields are asked, which required), the reviewers, an overlap k and blindness. `next` hands
each reviewer their next item, each item to at most k reviewers and never twice to one; an item is done at k
labels; items the reviewers disagree on go to an admin, whose final label is kept with what it resolved. A
reviewer may skip an item: it comes back to them after everything else. What a caller sees of the labels is
what app.store.labels lets `viewer` see (blind queues hide others' labels until the viewer saved theirs)."""

import json
import random
import secrets
from collections import Counter, defaultdict

from app.domain.agreement import agreement
from app.domain.label_fields import AGREEMENT_LEVELS, BY_NAME, NAMES, disagree
from app.domain.refusals import NotFound, Refusal
from app.domain.taxonomy import SUBDECISION_EVENT_TYPES, SUBDECISIONS
from app.store import labels as label_store
from app.store import queues as queue_store
from app.store.db import Database, iso_utc, utc_now

FILTER_KEYS = ("trace_ids", "systems", "topologies", "tasks", "findings", "event_types", "roles", "agents", "tools",
               "subdecisions")
STRATA = ("trace_id", "system", "topology", "task_id", "type", "role", "agent", "tool")
DEFAULT_FIELDS = ("credit", "counterfactual", "stop", "note")
MAX_ITEMS = 100_000


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


def clean_spec(body: dict) -> dict:
    """The queue as asked, checked; raises QueueError naming the field."""
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise QueueError("name", "must be non-empty text")
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
    reviewers = list(dict.fromkeys(_strings(body.get("reviewers"), "reviewers")))
    if not reviewers:
        raise QueueError("reviewers", "name at least one reviewer")
    overlap = body.get("overlap", 1)
    if not isinstance(overlap, int) or isinstance(overlap, bool) or not 1 <= overlap <= len(reviewers):
        raise QueueError("overlap", f"must be a whole number from 1 to the {len(reviewers)} reviewer(s)")
    blind = body.get("blind", False)
    if not isinstance(blind, bool):
        raise QueueError("blind", "must be true or false")
    return {"name": name.strip(), "filter": flt, "sample": sample, "fields": fields, "required": required,
            "reviewers": reviewers, "overlap": overlap, "blind": blind}


def pick(candidates: list[dict], sample: dict | None) -> list[dict]:
    """The items: every candidate in order, or a seeded random sample (proportional per stratum, largest
    remainders first, when stratified), kept in trace and event order."""
    if sample is None or sample["n"] >= len(candidates):
        return candidates
    rng = random.Random(sample["seed"])
    if sample["stratify_by"] is None:
        chosen = rng.sample(range(len(candidates)), sample["n"])
    else:
        strata: dict = defaultdict(list)
        for index, row in enumerate(candidates):
            strata[row[sample["stratify_by"]]].append(index)
        quotas = {key: sample["n"] * len(members) / len(candidates) for key, members in strata.items()}
        counts = {key: int(q) for key, q in quotas.items()}
        for key in sorted(quotas, key=lambda k: (counts[k] - quotas[k], str(k)))[:sample["n"] - sum(counts.values())]:
            counts[key] += 1
        chosen = [i for key, members in strata.items() for i in rng.sample(members, counts[key])]
    return [candidates[i] for i in sorted(chosen)]


def create_queue(db: Database, body: dict, created_by: str | None) -> dict:
    spec = clean_spec(body)
    lists = {key: spec["filter"][key] for key in FILTER_KEYS if key != "subdecisions"}
    if spec["filter"]["subdecisions"]:
        types = {t for s in spec["filter"]["subdecisions"] for t in SUBDECISION_EVENT_TYPES[s]}
        lists["event_types"] = sorted(types & set(lists["event_types"]) if lists["event_types"] else types)
        if not lists["event_types"]:
            raise QueueError("filter", "the event types and sub-decisions asked have no event type in common")
    items = pick(queue_store.queue_candidates(db, lists), spec["sample"])
    if not items:
        raise QueueError("filter", "matches no event")
    if len(items) > MAX_ITEMS:
        raise QueueError("filter", f"matches {len(items)} events; a queue holds at most {MAX_ITEMS} (sample them)")
    queue_id = "q-" + secrets.token_hex(6)
    db.write(lambda cur: queue_store.insert_queue(cur, queue_id, spec["name"], json.dumps(spec), created_by, utc_now(),
                                              [(row["trace_id"], row["event_id"]) for row in items]))
    return summary(db, queue_id, None)


def default_required(fields: list[str]) -> list[str]:
    """A queue always requires one field at least, so an untouched item cannot be saved: credit when asked,
    else the first field it asks."""
    return ["credit"] if "credit" in fields else fields[:1]


def load(db: Database, queue_id: str) -> dict:
    row = queue_store.read_queue(db, queue_id)
    if row is None:
        raise NotFound(f"no queue with id '{queue_id}'", what=f"queue '{queue_id}'")
    spec = json.loads(row["spec"])
    spec["required"] = spec["required"] or default_required(spec["fields"])  # queues made before the rule
    return {"id": row["queue_id"], "created_by": row["created_by"], "created_at": iso_utc(row["created_at"]),
            **spec}


def item_states(db: Database, queue: dict, viewer: str | None) -> dict[int, dict]:
    """Per item with any label in the queue that `viewer` may see: the labels by reviewer, whether it is done
    and disputed, and its adjudication."""
    states: dict[int, dict] = {}
    for row in label_store.queue_labels(db, viewer, queue["id"]):
        state = states.setdefault(row["item_id"], {"trace_id": row["trace_id"], "event_id": row["event_id"],
                                                   "labels": {}})
        state["labels"][row["reviewer"]] = {key: row[key] for key in ("version", "annotation_id", *NAMES)} | {
            name: json.loads(row[name]) for name in NAMES if BY_NAME[name].kind == "tags"}
    for row in label_store.queue_adjudications(db, viewer, queue["id"]):
        state = states.setdefault(row["item_id"], {"trace_id": row["trace_id"], "event_id": row["event_id"],
                                                   "labels": {}})
        state["adjudicated"] = {"by": row["adjudicator"], "label": json.loads(row["label"]), "note": row["note"],
                                "resolved": json.loads(row["resolved"]), "at": iso_utc(row["created_at"])}
    for state in states.values():
        state.setdefault("adjudicated", None)
        state["done"] = len(state["labels"]) >= queue["overlap"]
        state["disputed"] = len(state["labels"]) >= 2 and disagree(list(state["labels"].values()), queue["fields"])
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
    """The queue with its progress as `viewer` may see it: items, done, labelled per reviewer, disputed,
    adjudicated, agreement."""
    queue = load(db, queue_id)
    states = item_states(db, queue, viewer)
    by_reviewer = Counter(reviewer for state in states.values() for reviewer in state["labels"])
    ratings = {field: {item: {r: label[field] for r, label in state["labels"].items()}
                       for item, state in states.items()}
               for field in queue["fields"] if field in AGREEMENT_LEVELS}
    return queue | {
        "items": queue_store.queue_item_count(db, queue_id),
        "done": sum(state["done"] for state in states.values()),
        "by_reviewer": {reviewer: by_reviewer.get(reviewer, 0) for reviewer in queue["reviewers"]},
        "disputed": sum(state["disputed"] and state["adjudicated"] is None for state in states.values()),
        "adjudicated": sum(state["adjudicated"] is not None for state in states.values()),
        "agreement": {field: agreement(values, queue["reviewers"], AGREEMENT_LEVELS[field])
                      for field, values in ratings.items()} if len(queue["reviewers"]) >= 2 else {},
    }


def next_item(db: Database, queue_id: str, reviewer: str) -> dict | None:
    """The reviewer's next item: the one `next` gave them that they have neither labelled nor skipped, else a
    new one (the first given to fewer than `overlap` reviewers and never to them), else the item they skipped
    longest ago; None when nothing is left."""
    queue = load(db, queue_id)
    if reviewer not in queue["reviewers"]:
        raise QueueError("reviewer", f"'{reviewer}' is not a reviewer of this queue")

    def hand_out(cur) -> dict | None:
        item = queue_store.open_assignment(cur, queue_id, reviewer)
        if item is None:
            item = queue_store.next_unassigned(cur, queue_id, reviewer, queue["overlap"])
            if item is not None:
                queue_store.assign(cur, queue_id, item["item_id"], reviewer, utc_now())
        return item or queue_store.skipped_assignment(cur, queue_id, reviewer)

    # One hand-out per queue at a time, across instances too: an item goes to at most `overlap` reviewers.
    return db.write(hand_out, [("queue", queue_id)])


def peek_item(db: Database, queue_id: str, reviewer: str) -> dict | None:
    """The item next_item would give the reviewer now, keeping nothing."""
    queue = load(db, queue_id)
    if reviewer not in queue["reviewers"]:
        raise QueueError("reviewer", f"'{reviewer}' is not a reviewer of this queue")
    cur = db.cursor()
    try:
        return (queue_store.open_assignment(cur, queue_id, reviewer)
                or queue_store.next_unassigned(cur, queue_id, reviewer, queue["overlap"])
                or queue_store.skipped_assignment(cur, queue_id, reviewer))
    finally:
        cur.close()


def check_label(db: Database, queue_id: str, trace_id: str, event_id: str, reviewer: str, values: dict) -> None:
    """A label saved in a queue: the event is one of its items, the reviewer one of its reviewers, and every
    required field says something. Raises QueueError or NotFound."""
    queue = load(db, queue_id)
    if not any(row["queue_id"] == queue_id for row in queue_store.queue_items_of_event(db, trace_id, event_id)):
        raise QueueError("queue_id", f"event '{event_id}' of trace '{trace_id}' is not in queue '{queue_id}'")
    if reviewer not in queue["reviewers"]:
        raise QueueError("reviewer", f"'{reviewer}' is not a reviewer of queue '{queue_id}'")
    missing = [f for f in queue["required"] if BY_NAME[f].is_empty(values.get(f))]
    if missing:
        raise QueueError(missing[0], f"is required in queue '{queue['name']}'")


def skip_item(db: Database, queue_id: str, item_id: int, reviewer: str) -> None:
    """The reviewer puts an item given to them aside: `next` gives it again after everything else."""
    queue = load(db, queue_id)
    if reviewer not in queue["reviewers"]:
        raise QueueError("reviewer", f"'{reviewer}' is not a reviewer of this queue")
    if not db.write(lambda cur: queue_store.skip(cur, queue_id, item_id, reviewer, utc_now()), [("queue", queue_id)]):
        raise NotFound(f"item {item_id} of queue '{queue_id}' was not given to '{reviewer}'")


def adjudicate(db: Database, queue_id: str, item_id: int, adjudicator: str, label: dict, note: str) -> dict:
    """Record an admin's final label on an item, with the reviewers' labels it resolves."""
    queue = load(db, queue_id)
    item = queue_store.queue_item(db, queue_id, item_id)
    if item is None:
        raise NotFound(f"queue '{queue_id}' has no item {item_id}")
    unknown = sorted(set(label) - set(queue["fields"]))
    if unknown:
        raise QueueError("label", f"{', '.join(unknown)}: not asked by this queue ({', '.join(queue['fields'])})")
    state = item_states(db, queue, None).get(item_id)
    if state is None or not state["labels"]:
        raise QueueError("item", "no reviewer has labelled this item yet: there is nothing to adjudicate")
    resolved = [{"reviewer": r, "version": v["version"], "annotation_id": v["annotation_id"]}
                for r, v in state["labels"].items()]
    db.write(lambda cur: label_store.insert_adjudication(cur, queue_id, item_id, adjudicator, json.dumps(label),
                                                         json.dumps(resolved), note, utc_now()))
    return item_states(db, queue, None)[item_id] | {"item_id": item_id}


def items(db: Database, queue_id: str, viewer: str | None) -> list[dict]:
    """Every item in queue order with its state as `viewer` may see it (an item nobody labelled yet: no
    labels, not done), and its status."""
    queue = load(db, queue_id)
    states = item_states(db, queue, viewer)
    empty = {"labels": {}, "done": False, "disputed": False, "adjudicated": None}
    rows = []
    for item in queue_store.list_queue_items(db, queue_id):
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
    return [summary(db, row["queue_id"], viewer) for row in queue_store.list_queues(db)]


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
