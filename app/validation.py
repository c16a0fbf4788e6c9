"""Validate a parsed trace against the published schema and the structural rules.

The API, the CLI and every importer call this one validator, so a trace is
accepted or rejected for the same reasons with the same messages everywhere.
It reports every problem, in document order, with a path to the offending value.
Valid traces are the common case, so a columnar fast path first tries to prove the
whole trace valid (a bulk load of many small traces pays for little else); failing
that, large traces are proven valid a chunk of events or edges at a time, and any doubt
about a chunk falls back to the per-item walk that words the problems.
"""

import json
import math
from collections.abc import Container
from dataclasses import dataclass
from itertools import count, repeat
from operator import itemgetter

from app.taxonomy import (
    EDGE_KEYS,
    EDGE_TYPES,
    EVENT_BOOLEAN_KEYS,
    EVENT_REQUIRED_KEYS,
    EVENT_STRING_KEYS,
    EVENT_TYPES,
    REQUIRED_COSTS,
    TOPOLOGIES,
    TRACE_KEYS,
    TRACE_REQUIRED_KEYS,
)

_EVENT_TYPE_SET = frozenset(EVENT_TYPES)
_EDGE_TYPE_SET = frozenset(EDGE_TYPES)
_TRACE_KEY_SET = frozenset(TRACE_KEYS)
_TRACE_REQUIRED_SET = frozenset(TRACE_REQUIRED_KEYS)
_REQUIRED_COST_SET = frozenset(REQUIRED_COSTS)
_STR_ONLY = {str}
_BOOL_ONLY = {bool}
_NUMBER_TYPES = {int, float}
_EVENT_REQUIRED = itemgetter(*EVENT_REQUIRED_KEYS)
_EDGE_VALUES = itemgetter(*EDGE_KEYS)
# Events and edges are proven valid a chunk at a time, so a few bad ones slow down only their chunks.
_CHUNK = 512
_SHOWN_CHARS = 60  # longer values are cut so one bad blob cannot flood a report


@dataclass(frozen=True)
class Problem:
    """One reason a trace is invalid, located by a path such as events[3].type."""

    path: str
    message: str


def format_problem(p: Problem) -> str:
    """Render a problem as 'path: message', or the bare message at the root."""
    return f"{p.path}: {p.message}" if p.path else p.message


def validate_trace(obj) -> list[Problem]:
    """Return every problem of a parsed JSON trace in document order; [] when valid."""
    return [] if _certainly_valid(obj) else _problems(obj)


def _problems(obj) -> list[Problem]:
    """The walk that finds and words every problem."""
    if not isinstance(obj, dict):
        return [Problem("", f"{_show(obj)} is not an object")]
    problems = _missing(obj, TRACE_REQUIRED_KEYS, "")
    # Edge endpoints need the event ids even when edges come first in the document.
    event_problems, ids = _check_events(obj["events"]) if "events" in obj else ([], None)
    for key, value in obj.items():
        if key not in TRACE_KEYS:
            problems.append(Problem("", f"unknown key {_show(key)}; allowed: {', '.join(TRACE_KEYS)}"))
        elif key == "events":
            problems += event_problems
        elif key == "edges":
            problems += _check_edges(value, ids)
        elif key == "costs":
            problems += _check_number_map(value, key, REQUIRED_COSTS, non_negative=True)
        elif key in ("rewards", "metrics"):
            problems += _check_number_map(value, key)
        else:
            if key == "topology":
                error = _enum_error(value, TOPOLOGIES)
            else:
                error = _string_error(value, non_empty=key != "system")
            if error:
                problems.append(Problem(key, error))
    return problems


def _certainly_valid(trace) -> bool:
    """True only for a valid trace; False leaves the verdict to the walk, which also words the problems."""
    if type(trace) is not dict or not _TRACE_REQUIRED_SET <= trace.keys() <= _TRACE_KEY_SET:
        return False
    trace_id, task_id, costs = trace["trace_id"], trace["task_id"], trace["costs"]
    events, edges = trace["events"], trace["edges"]
    if not (type(trace_id) is str and trace_id and type(task_id) is str and task_id
            and type(trace.get("system", "")) is str and trace.get("topology", TOPOLOGIES[0]) in TOPOLOGIES
            and _numbers_look_valid(costs, non_negative=True) and _REQUIRED_COST_SET <= costs.keys()
            and _numbers_look_valid(trace["rewards"]) and _numbers_look_valid(trace.get("metrics", {}))
            and type(events) is list and events and type(edges) is list):
        return False
    ids = _valid_event_ids(events)
    return ids is not None and (not edges or _edges_look_valid(edges, set(ids)))


def _numbers_look_valid(value, non_negative=False) -> bool:
    """True when value is an object of finite (and, if asked, non-negative) numbers."""
    if type(value) is not dict:
        return False
    numbers = list(value.values())
    return not numbers or (set(map(type, numbers)) <= _NUMBER_TYPES and _finite(numbers, non_negative))


def _check_events(events) -> tuple[list[Problem], dict[str, int] | None]:
    """Problems of the events array, and where each valid id first appears (None if unknowable)."""
    if not isinstance(events, list):
        return [Problem("events", f"{_show(events)} is not an array")], None
    if not events:
        return [Problem("events", "must contain at least one event")], {}
    problems = []
    first_seen = {}
    for start in range(0, len(events), _CHUNK):
        chunk = events[start : start + _CHUNK]
        ids = _valid_event_ids(chunk)
        if ids is not None and first_seen.keys().isdisjoint(ids):
            first_seen.update(zip(ids, count(start)))
        else:
            for index, event in enumerate(chunk, start):
                problems += _event_problems(event, index, first_seen)
    return problems, first_seen


def _valid_event_ids(events: list) -> tuple[str, ...] | None:
    """The ids, unique among these events (at least one), when every event is certainly valid, else None."""
    # Each check is one C-level pass over a column: no Python bytecode runs per event.
    try:
        # Only an object can be indexed by a key: a TypeError means an event is not one.
        ids, ts, types, agents = zip(*map(_EVENT_REQUIRED, events))
        for key in EVENT_STRING_KEYS:  # str.join takes nothing but strings
            "".join(map(dict.get, events, repeat(key), repeat("")))
        valid = (_all_strings(ids) and _all_strings(agents) and all(agents) and _EVENT_TYPE_SET.issuperset(types)
                 and set(map(type, ts)) <= _NUMBER_TYPES and _finite(ts, non_negative=True)
                 and all(set(map(type, map(dict.get, events, repeat(key), repeat(False)))) <= _BOOL_ONLY
                         for key in EVENT_BOOLEAN_KEYS))
    except (KeyError, TypeError):  # TypeError also for an unhashable type
        return None
    if not valid:
        return None
    id_set = set(ids)
    return ids if "" not in id_set and len(id_set) == len(ids) else None


def _all_strings(values) -> bool:
    """True when every value is exactly a str."""
    return set(map(type, values)) <= _STR_ONLY


def _finite(numbers, non_negative=False) -> bool:
    """True when every number is finite (and >= 0 if asked); the sum is NaN or infinite if any term is."""
    try:
        total = sum(numbers)
    except OverflowError:  # a huge int beside a float: leave it to the exact walk
        return False
    return total - total == 0 and (not non_negative or min(numbers) >= 0)


def _event_problems(event, index: int, first_seen: dict) -> list[Problem]:
    """Problems of one event; records its id in first_seen when the id is valid and new."""
    path = f"events[{index}]"
    if not isinstance(event, dict):
        return [Problem(path, f"{_show(event)} is not an object")]
    problems = _missing(event, EVENT_REQUIRED_KEYS, path)
    for key, value in event.items():
        if key == "id":
            error = _string_error(value, non_empty=True)
            if error is None:
                if value in first_seen:
                    error = f"duplicate id {_show(value)} (first at events[{first_seen[value]}])"
                else:
                    first_seen[value] = index
        elif key == "t":
            error = _number_error(value, non_negative=True)
        elif key == "type":
            error = _enum_error(value, EVENT_TYPES)
        elif key == "agent":
            error = _string_error(value, non_empty=True)
        elif key in EVENT_STRING_KEYS:
            error = _string_error(value)
        elif key in EVENT_BOOLEAN_KEYS:
            error = None if isinstance(value, bool) else f"{_show(value)} is not a boolean"
        else:
            continue
        if error:
            problems.append(Problem(_key(path, key), error))
    return problems


def _check_edges(edges, ids: Container[str] | None) -> list[Problem]:
    """Problems of the edges array; endpoints are checked only when ids is known."""
    if not isinstance(edges, list):
        return [Problem("edges", f"{_show(edges)} is not an array")]
    problems = []
    known = None if ids is None else set(ids)
    for start in range(0, len(edges), _CHUNK):
        chunk = edges[start : start + _CHUNK]
        if known is None or not _edges_look_valid(chunk, known):
            for index, edge in enumerate(chunk, start):
                problems += _edge_problems(edge, f"edges[{index}]", known)
    return problems


def _edges_look_valid(edges: list, ids: set[str]) -> bool:
    """True when every edge (at least one) is certainly valid; exactly three keys, all present, rules out extras."""
    try:
        src, dst, types = zip(*map(_EDGE_VALUES, edges))  # a TypeError: an edge is not an object
        return (set(map(len, edges)) == {len(EDGE_KEYS)} and ids.issuperset(src) and ids.issuperset(dst)
                and _EDGE_TYPE_SET.issuperset(types))
    except (KeyError, TypeError):  # TypeError also for an unhashable value
        return False


def _edge_problems(edge, path: str, ids: Container[str] | None) -> list[Problem]:
    """Problems of one edge."""
    if not isinstance(edge, dict):
        return [Problem(path, f"{_show(edge)} is not an object")]
    problems = _missing(edge, EDGE_KEYS, path)
    for key, value in edge.items():
        if key == "type":
            error = _enum_error(value, EDGE_TYPES)
        elif key in EDGE_KEYS:  # src or dst
            error = _string_error(value, non_empty=True)
            if error is None and ids is not None and value not in ids:
                error = f"{_show(value)} is not an event id"
        else:
            problems.append(Problem(path, f"unknown key {_show(key)}; allowed: {', '.join(EDGE_KEYS)}"))
            continue
        if error:
            problems.append(Problem(_key(path, key), error))
    return problems


def _check_number_map(value, path: str, required=(), non_negative=False) -> list[Problem]:
    """Problems of an object whose values must all be numbers."""
    if not isinstance(value, dict):
        return [Problem(path, f"{_show(value)} is not an object")]
    problems = _missing(value, required, path)
    for key, number in value.items():
        error = _number_error(number, non_negative)
        if error:
            problems.append(Problem(_key(path, key), error))
    return problems


def _missing(obj: dict, required, path: str) -> list[Problem]:
    """One problem per required key absent from obj."""
    return [Problem(path, f"missing required key '{key}'") for key in required if key not in obj]


def _number_error(value, non_negative=False) -> str | None:
    """Why value is not a (non-negative) JSON number, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{_show(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_show(value)} is not a valid JSON number"
    if non_negative and value < 0:
        return f"{_show(value)} is below 0"
    return None


def _string_error(value, non_empty=False) -> str | None:
    """Why value is not a (non-empty) string, or None."""
    if not isinstance(value, str):
        return f"{_show(value)} is not a string"
    if non_empty and not value:
        return "must be a non-empty string"
    return None


def _enum_error(value, allowed: tuple) -> str | None:
    """Why value is not one of the allowed strings, or None."""
    if not isinstance(value, str):
        return f"{_show(value)} is not a string"
    if value not in allowed:
        return f"{_show(value)} is not one of {', '.join(allowed)}"
    return None


def _key(path: str, key) -> str:
    """Path of a key inside an object: .name for identifiers, ["quoted"] otherwise."""
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(str(key), ensure_ascii=False)}]"


def _show(value) -> str:
    """A short rendering of a value as a JSON reader would name it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
