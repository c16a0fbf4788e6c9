"""Pairwise review of rollouts, as pure functions: which pairs a group gives, what a reviewer's choice holds, which
choice a pair ends with, and what a preference trainer reads of each side (TRL's `{"prompt", "chosen", "rejected"}`).

A trace keeps no task text (the format's top level has `task_id` only), so the prompt is the task id. A rollout's
answer is the text of its last aggregate in time, else the last assistant text any event said; a trace that kept
neither (content withheld, `content_ref` only) is named by its trace id instead."""

import random
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

from app.domain.conversation import conversation
from app.domain.metrics import team_members
from app.domain.refusals import Refusal

CHOICES = ("a", "b", "tie")
SIDES = ("a", "b")
MAX_REASON = 10_000  # characters: a reason is a few sentences, never a pasted trace


class ChoiceError(Refusal, ValueError):
    """A choice that cannot be saved as sent; `field` names what is wrong."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")

    def details(self) -> dict:
        return {"field": self.field}


@dataclass(frozen=True)
class Pair:
    """Two rollouts of one group; which is `a` was drawn, so neither side is favoured by its place."""

    group: str
    trace_a: str
    trace_b: str


def sample_pairs(groups: dict[str, list[str]], per_group: int, seed: int) -> list[Pair]:
    """Up to `per_group` distinct pairs of each group's traces, drawn with a generator seeded by `seed` and the
    group's key (a group's pairs do not change when other groups come or go), each pair's order drawn too; in
    group order, then the order drawn."""
    pairs = []
    for key, trace_ids in groups.items():
        rng = random.Random(f"{seed}/{key}")
        candidates = list(combinations(sorted(set(trace_ids)), 2))
        for first, second in rng.sample(candidates, min(per_group, len(candidates))):
            pairs.append(Pair(key, *((first, second) if rng.random() < 0.5 else (second, first))))
    return pairs


def clean_choice(body: dict, require_reason: bool = True) -> dict:
    """The choice fields of `body`, checked: `choice` a, b or tie; `reason` text (required unless told otherwise);
    `deciding_event` null or {"side": "a" | "b", "event_id"}. Whether the event exists is the caller's to check."""
    choice = body.get("choice")
    if choice not in CHOICES:
        raise ChoiceError("choice", f"must be one of {', '.join(CHOICES)}")
    reason = body.get("reason") or ""
    if not isinstance(reason, str) or len(reason) > MAX_REASON:
        raise ChoiceError("reason", f"must be text of at most {MAX_REASON} characters")
    if require_reason and not reason.strip():
        raise ChoiceError("reason", "say why: a choice is kept with its reason")
    deciding = body.get("deciding_event")
    if deciding is not None:
        if not isinstance(deciding, dict) or deciding.get("side") not in SIDES \
                or not isinstance(deciding.get("event_id"), str) or not deciding["event_id"]:
            raise ChoiceError("deciding_event", 'must be null or {"side": "a" or "b", "event_id": an event id}')
        deciding = {"side": deciding["side"], "event_id": deciding["event_id"]}
    return {"choice": choice, "reason": reason.strip(), "deciding_event": deciding}


def disputed(choices: list[str]) -> bool:
    """Whether reviewers' choices on a pair differ (a tie against a side is a difference)."""
    return len(set(choices)) > 1


def decision(choices: list[str], adjudicated: str | None, done: bool) -> str | None:
    """The choice a pair ends with: the admin's when adjudicated, else, once the pair has its reviewers' choices,
    the choice of more than half of them; None otherwise (no majority, or still open)."""
    if adjudicated is not None:
        return adjudicated
    if not done or not choices:
        return None
    choice, count = Counter(choices).most_common(1)[0]
    return choice if 2 * count > len(choices) else None


def _text(content) -> tuple[str | None, str | None]:
    """What an event's content says as text: (the assistant's text, all of its text), each None when empty."""
    messages = conversation(content) or []

    def joined(roles) -> str | None:
        return "\n".join(part["text"] for message in messages if roles is None or message["role"] in roles
                         for part in message["parts"] if part["kind"] == "text").strip() or None

    return joined(("assistant",)), joined(None)


def final_answer(trace: dict) -> str | None:
    """The text of the rollout's answer: its last aggregate's (content, else summary), else the last assistant
    text of any event; None when the trace keeps neither."""
    order = sorted(range(len(trace["events"])), key=lambda i: (trace["events"][i]["t"], i), reverse=True)
    events = [trace["events"][i] for i in order]
    for event in events:
        if event["type"] == "aggregate":
            _, text = _text(event.get("content"))
            summary = event.get("summary")
            if text or (isinstance(summary, str) and summary.strip()):
                return text or summary.strip()
    return next((said for said, _ in (_text(event.get("content")) for event in events) if said), None)


def rollout_summary(trace: dict, show_rewards: bool) -> dict:
    """What a reviewer reads of one side of a pair before the diff: its task, system, agents, events, costs and
    answer; its rewards and metrics only when the queue shows them (a preference is often judged blind to them)."""
    return {"trace_id": trace["trace_id"], "task_id": trace["task_id"], "system": trace.get("system"),
            "topology": trace.get("topology"), "agents": team_members(trace["events"]),
            "events": len(trace["events"]), "tokens": trace["costs"].get("tokens"),
            "wall_clock_s": trace["costs"].get("wall_clock_s"), "answer": final_answer(trace),
            "rewards": trace["rewards"] if show_rewards else None,
            "metrics": trace.get("metrics") if show_rewards else None}


def preference_row(queue_id: str, group: str, choice: str, trace_a: dict, trace_b: dict, reviewers: list[str],
                   adjudicated_by: str | None) -> dict:
    """One preference line for a pair decided `a` or `b`: TRL's `prompt`, `chosen`, `rejected`, then where it
    came from."""
    chosen, rejected = (trace_a, trace_b) if choice == "a" else (trace_b, trace_a)
    return {"prompt": chosen["task_id"], "chosen": final_answer(chosen) or chosen["trace_id"],
            "rejected": final_answer(rejected) or rejected["trace_id"], "chosen_trace_id": chosen["trace_id"],
            "rejected_trace_id": rejected["trace_id"], "reviewers": reviewers, "adjudicated_by": adjudicated_by,
            "queue_id": queue_id, "group": group}
