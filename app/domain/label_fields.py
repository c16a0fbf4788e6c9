"""The label a reviewer sets on an event, declared once.

Each field names its kind, the question the form asks, its allowed values, which events take it and the
level its agreement is measured at. The form, validation, the CSV and JSON exports and their import, the
agreement figures, disputes and the queue rubric all read this declaration: adding a field is one entry
here plus a migration adding its column to `annotations`.
"""

import math
from dataclasses import dataclass, field

from app.domain.jsontext import escaped
from app.domain.refusals import Refusal
from app.domain.taxonomy import (
    COUNTERFACTUAL_ANSWERS,
    CREDIT_RANGE,
    CREDIT_UNITS,
    REWARD_FAMILIES,
    STOP_ANSWERS,
    STOP_EVENT_TYPES,
    SUBDECISIONS,
)

NUMBER, CHOICE, FLAG, TAGS, TEXT, REF = "number", "choice", "flag", "tags", "text", "ref"
TAG_SEPARATOR = ";"  # joins tags in a CSV cell
MAX_TEXT = 10_000
# Reviewers disagree on an item when their numbers differ by more than this.
NUMBER_SPREAD = 0.5


class LabelError(Refusal, ValueError):
    """A value a label cannot hold; `field` names it and the message says what is allowed (lone surrogates
    written as escapes, so the refusal itself can always be sent)."""

    status = 422

    def __init__(self, field: str, message: str):
        self.field = escaped(str(field))
        super().__init__(f"{self.field}: {escaped(message)}")

    def details(self) -> dict:
        return {"field": self.field}


@dataclass(frozen=True)
class LabelField:
    """One thing a label can say. `titles` gives each allowed value its option text; `applies_to` the event
    types that take the field (None: every event); `agreement` the level of measurement agreement and
    disputes use (None: never a disagreement, as for notes); `in_form` whether the label form asks it."""

    name: str
    kind: str
    question: str
    choices: tuple = ()
    titles: dict = field(default_factory=dict)
    applies_to: tuple | None = None
    agreement: str | None = None
    in_form: bool = True
    help: str = ""

    @property
    def empty(self):
        """What the field holds when the label says nothing of it (what clearing sets)."""
        return {FLAG: False, TAGS: [], TEXT: ""}.get(self.kind)

    def is_empty(self, value) -> bool:
        """Whether `value` says nothing: null, an unset flag, no tags, empty text (a credit of 0 says something)."""
        if self.kind == FLAG:
            return value is not True
        return value is None or (not isinstance(value, (int, float)) and len(value) == 0)

    def applies(self, event_type: str | None) -> bool:
        return self.applies_to is None or event_type in self.applies_to

    def title(self, value) -> str:
        return self.titles.get(value, str(value).replace("_", " "))

    def clean(self, value):
        """The value checked and normalised; raises LabelError naming the field."""
        if self.kind == NUMBER:
            return _number(self.name, value)
        if self.kind in (CHOICE, REF):
            if value == "":
                value = None
            if self.kind == CHOICE and value is not None and value not in self.choices:
                raise LabelError(self.name, f"{value!r} is not one of {', '.join(self.choices)} (or null)")
            if self.kind == REF and value is not None and not isinstance(value, str):
                raise LabelError(self.name, "must be a paper key (text) or null")
            return value
        if self.kind == FLAG:
            if not isinstance(value, bool):
                raise LabelError(self.name, f"{value!r} is not true or false")
            return value
        if self.kind == TAGS:
            return _tags(self.name, value)
        value = "" if value is None else value
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise LabelError(self.name, f"must be text of at most {MAX_TEXT} characters")
        return value

    def from_text(self, text: str | None, separator: str = TAG_SEPARATOR):
        """The value a CSV cell (or, with separator ",", a form field) holds, before clean: a number that is not
        one is kept as text, so clean names the field."""
        text = text or ""
        if self.kind == NUMBER:
            try:
                return float(text) if text.strip() else None
            except ValueError:
                return text
        if self.kind == FLAG:
            return {"true": True, "on": True, "1": True, "false": False, "": False}.get(text.strip().lower(), text)
        if self.kind == TAGS:
            return [tag for tag in text.split(separator) if tag.strip()]
        return text if self.kind == TEXT else (text or None)

    def to_text(self, value) -> str:
        """The value as a CSV cell: empty for null, tags joined by ';', flags as true/false."""
        if value is None:
            return ""
        if self.kind == TAGS:
            return TAG_SEPARATOR.join(value)
        if self.kind == FLAG:
            return "true" if value else "false"
        return repr(value) if isinstance(value, float) else str(value)


def _number(name: str, value):
    low, high = CREDIT_RANGE
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise LabelError(name, f"{value!r} is not a number in [{low:g}, {high:g}] or null")
    if not low <= value <= high:
        raise LabelError(name, f"{value} is outside [{low:g}, {high:g}]")
    return float(value)


def _tags(name: str, value) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise LabelError(name, "must be a list of strings")
    tags = [t.strip() for t in value if t.strip()]
    for tag in tags:
        if TAG_SEPARATOR in tag:
            raise LabelError(name, f"{tag!r} contains '{TAG_SEPARATOR}', which separates tags in CSV exports")
    return list(dict.fromkeys(tags))


FIELDS = (
    LabelField("credit", NUMBER, "Credit", agreement="interval",
               help=f"how much credit the event deserves, {CREDIT_RANGE[0]:g} to {CREDIT_RANGE[1]:g}"),
    LabelField("reward_family", CHOICE, "Reward family", tuple(REWARD_FAMILIES),
               {key: f"{key} · {name}" for key, (name, _unit) in REWARD_FAMILIES.items()}, agreement="nominal"),
    LabelField("credit_unit", CHOICE, "Credit unit", CREDIT_UNITS, agreement="nominal"),
    LabelField("subdecision", CHOICE, "Sub-decision", tuple(SUBDECISIONS),
               {key: f"{key} · {name}" for key, (name, _evidence) in SUBDECISIONS.items()}, agreement="nominal"),
    LabelField("safety", FLAG, "safety issue"),
    LabelField("tags", TAGS, "Tags"),
    LabelField("note", TEXT, "Note"),
    LabelField("paper", REF, "Paper", in_form=False, help="the key of a paper of the pool the label cites"),
    LabelField("counterfactual", CHOICE, "Without it, would the outcome differ?", COUNTERFACTUAL_ANSWERS,
               agreement="nominal",
               help="Had this event not happened, or said something else, would the outcome differ?"),
    LabelField("stop", CHOICE, "Stopping here (or not) was", STOP_ANSWERS, applies_to=STOP_EVENT_TYPES,
               agreement="nominal", help="Was stopping here, or not stopping, right?"),
)
BY_NAME = {f.name: f for f in FIELDS}
NAMES = tuple(BY_NAME)
EMPTY = {f.name: f.empty for f in FIELDS}
AGREEMENT_LEVELS = {f.name: f.agreement for f in FIELDS if f.agreement}


def clean_values(data: dict) -> dict:
    """The label fields present in `data`, checked and normalised; raises LabelError naming the field."""
    return {f.name: f.clean(data[f.name]) for f in FIELDS if f.name in data}


def disagree(labels: list[dict], fields) -> bool:
    """Whether reviewers' labels on one item differ on an asked field that agreement is measured on: numbers
    more than NUMBER_SPREAD apart, different answers, or an answer against none (tags, notes and flags are
    never a disagreement)."""
    for name in fields:
        declared = BY_NAME.get(name)
        if declared is None or declared.agreement is None:
            continue
        values = [label.get(name) for label in labels]
        given = [v for v in values if v is not None]
        if given and len(given) < len(values):
            return True
        if declared.agreement == "interval" and len(given) >= 2 and max(given) - min(given) > NUMBER_SPREAD:
            return True
        if declared.agreement == "nominal" and len(set(given)) > 1:
            return True
    return False
