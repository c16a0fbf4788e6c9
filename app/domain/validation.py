"""Validate a parsed trace against the published schema and the structural rules.

The API, the CLI and every importer call this one validator, so a trace is
accepted or rejected for the same reasons with the same messages everywhere.
It finds problems in document order, each with a path to the offending value, lazily: a request lists
the first MAX_PROBLEMS and counts the rest up to MAX_COUNTED_PROBLEMS (see `capped`), so a body of a million
broken traces costs a few thousand problems, not millions of strings. A trace id must also be usable in a URL
path and a file name (see `trace_id_error`).
Beyond the schema, it refuses what the store could not keep exactly as sent, or what could break a page
that shows it later: text with a lone surrogate, numbers beyond a double, integers of 2**63 or more in `t`
or `costs` (a double or a 64-bit column; other properties keep integers of any size, as text), keys given
twice (app.documents marks them), and event properties nested more than MAX_DEPTH levels deep.
Valid traces are the common case, so a columnar fast path first tries to prove the
whole trace valid (a bulk load of many small traces pays for little else); failing
that, large traces are proven valid a chunk of events or edges at a time, and any doubt
about a chunk falls back to the per-item walk that words the problems.
"""

import math
import re
import threading
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, compress, count, islice, repeat
from operator import is_, itemgetter

import orjson

from app.domain.jsontext import ORJSON_DEPTH, REPEATED_KEY, KeyedTwice, key_path
from app.domain.taxonomy import (
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
MAX_DEPTH = 64  # levels of objects and arrays in one event property
INT_LIMIT = 2**63  # integers in `t` and `costs` stay below it
_JSON_TYPES = frozenset({str, int, float, bool, type(None), dict, list})
_DICT_ONLY = {dict}
MAX_PROBLEMS = 100  # listed in one report; the rest are only counted
MAX_COUNTED_PROBLEMS = 10_000  # counted in one report at most: past it the report says "at least"
MAX_TRACE_ID_CHARS = 256
# A trace id is a URL path segment and part of file names: no separator, no control character, no dot folder.
_UNSAFE_IN_TRACE_ID = re.compile(r"[/\\\x00-\x1f\x7f-\x9f]")
_DOT_FOLDERS = frozenset({".", ".."})


@dataclass(frozen=True)
class Problem:
    """One reason a trace is invalid, located by a path such as events[3].type."""

    path: str
    message: str


@dataclass(frozen=True)
class Capped:
    """The first MAX_PROBLEMS items of a report, and how many more it holds (see `capped`)."""

    listed: list
    more: int
    at_least: bool  # counting stopped at MAX_COUNTED_PROBLEMS: there are more still

    def more_text(self, what: str = "problems") -> str:
        """'and 9,900 more problems', or 'and at least 9,900 more problems'."""
        return f"and {'at least ' if self.at_least else ''}{self.more:,} more {what}"


def capped(items: Iterable) -> Capped:
    """The first MAX_PROBLEMS of `items`, the rest counted up to MAX_COUNTED_PROBLEMS in all: a report of
    millions of problems is neither worded nor held whole, and a lazy walk stops where counting does."""
    rest = iter(items)
    listed = list(islice(rest, MAX_PROBLEMS))
    more = sum(1 for _ in islice(rest, MAX_COUNTED_PROBLEMS - len(listed)))
    return Capped(listed, more, next(rest, None) is not None)


def format_problem(p: Problem) -> str:
    """Render a problem as 'path: message', or the bare message at the root."""
    return f"{p.path}: {p.message}" if p.path else p.message


def trace_id_error(value) -> str | None:
    """Why a value cannot be a trace id, or None. Ids are URL path segments and parts of file names, so one holds
    at most MAX_TRACE_ID_CHARS characters, no / or \\, no control character (NUL included), and is not . or ..:
    such an id could be stored but never read or deleted by its URL."""
    error = _string_error(value, non_empty=True)
    if error:
        return error
    if len(value) > MAX_TRACE_ID_CHARS:
        return f"{_show(value)} is {len(value):,} characters long; a trace id has at most {MAX_TRACE_ID_CHARS}"
    unsafe = _UNSAFE_IN_TRACE_ID.search(value)
    if unsafe:
        return (f"{_show(value)} holds {_show(unsafe.group())}: a trace id is part of URLs and file names, so it "
                "holds no / or \\ and no control character")
    if value in _DOT_FOLDERS:
        return f"{_show(value)} is not a trace id: . and .. name folders in URLs and file paths"
    return None


def _trace_id_valid(value) -> bool:
    """trace_id_error(value) is None, but for a lone surrogate (the fast path checks all its strings at once)."""
    return (type(value) is str and 0 < len(value) <= MAX_TRACE_ID_CHARS and value not in _DOT_FOLDERS
            and not _UNSAFE_IN_TRACE_ID.search(value))


def validate_trace(obj) -> list[Problem]:
    """Return every problem of a parsed JSON trace in document order; [] when valid."""
    return [] if _certainly_valid(obj) else _problems(obj)


def _problems(obj) -> list[Problem]:
    """Every problem the walk finds."""
    return list(_walk(obj))


def _walk(obj) -> Iterator[Problem]:
    """The walk that finds and words problems, one at a time."""
    if not isinstance(obj, dict):
        yield Problem("", f"{_show(obj)} is not an object")
        return
    yield from _missing(obj, TRACE_REQUIRED_KEYS, "")
    yield from _repeated(obj, "")
    # Edge endpoints need the event ids even when edges come first in the document.
    ids, doubtful = _event_ids(obj["events"]) if "events" in obj else (None, ())
    for key, value in obj.items():
        if key not in TRACE_KEYS:
            yield Problem("", f"unknown key {_show(key)}; allowed: {', '.join(TRACE_KEYS)}")
        elif key == "events":
            yield from _check_events(value, ids, doubtful)
        elif key == "edges":
            yield from _check_edges(value, ids)
        elif key == "costs":
            yield from _check_number_map(value, key, REQUIRED_COSTS, non_negative=True, exact=True)
        elif key in ("rewards", "metrics"):
            yield from _check_number_map(value, key)
        else:
            if key == "topology":
                error = _enum_error(value, TOPOLOGIES)
            elif key == "trace_id":
                error = trace_id_error(value)
            else:
                error = _string_error(value, non_empty=key != "system")
            if error:
                yield Problem(key, error)


def validate_traces(traces: list) -> Iterator[Iterable[Problem]]:
    """validate_trace of each trace of a batch, lazily: each trace's problems are found as they are read (see
    `capped`). The columnar checks cost as much per call as per event on small traces, so the traces of a batch
    are proven valid in groups of about _CHUNK events (larger groups lose more to cache misses than they save);
    any doubt about a group sends each of its traces its own way."""
    group: list = []
    events = 0
    for trace in traces:
        if not _head_valid(trace):
            yield from _group_problems(group)
            yield _walk(trace)
            group, events = [], 0
            continue
        group.append(trace)
        events += len(trace["events"])
        if events >= _CHUNK:
            yield from _group_problems(group)
            group, events = [], 0
    yield from _group_problems(group)


def _group_problems(traces: list) -> Iterator[Iterable[Problem]]:
    """The problems of each of these traces, whose heads are valid."""
    if len(traces) > 1 and _all_certainly_valid(traces):
        return repeat((), len(traces))
    return (() if _certainly_valid(trace) else _walk(trace) for trace in traces)


def _all_certainly_valid(traces: list) -> bool:
    """True only when every one of these traces, whose heads are valid, is valid: the events and edges of all
    at once, then each trace's ids (unique, and the only ends of its edges)."""
    ids = _checked_event_ids(list(chain.from_iterable(trace["events"] for trace in traces)))
    edges = list(chain.from_iterable(trace["edges"] for trace in traces))
    ends = _edge_ends(edges) if edges else ((), ())
    if ids is None or ends is None:
        return False
    src, dst = ends
    event_at = edge_at = 0
    for trace in traces:
        n_events, n_edges = len(trace["events"]), len(trace["edges"])
        own = set(ids[event_at : event_at + n_events])
        if len(own) != n_events or "" in own or not (own.issuperset(src[edge_at : edge_at + n_edges])
                                                     and own.issuperset(dst[edge_at : edge_at + n_edges])):
            return False
        event_at += n_events
        edge_at += n_edges
    return True


def _certainly_valid(trace) -> bool:
    """True only for a valid trace; False leaves the verdict to the walk, which also words the problems."""
    if not _head_valid(trace):
        return False
    ids = _valid_event_ids(trace["events"])
    edges = trace["edges"]
    return ids is not None and (not edges or _edges_look_valid(edges, set(ids)))


def _head_valid(trace) -> bool:
    """True only when a trace's properties but its events and edges are valid, and those are non-empty arrays."""
    if type(trace) is not dict or not _TRACE_REQUIRED_SET <= trace.keys() <= _TRACE_KEY_SET:
        return False
    trace_id, task_id, costs = trace["trace_id"], trace["task_id"], trace["costs"]
    events, edges = trace["events"], trace["edges"]
    return bool(_trace_id_valid(trace_id) and type(task_id) is str and task_id
                and type(trace.get("system", "")) is str and trace.get("topology", TOPOLOGIES[0]) in TOPOLOGIES
                and _numbers_look_valid(costs, non_negative=True, exact=True) and _REQUIRED_COST_SET <= costs.keys()
                and _numbers_look_valid(trace["rewards"]) and _numbers_look_valid(trace.get("metrics", {}))
                and type(events) is list and events and type(edges) is list
                and is_text(chain((trace_id, task_id, trace.get("system", "")), costs, trace["rewards"],
                                  trace.get("metrics", {}))))


def _numbers_look_valid(value, non_negative=False, exact=False) -> bool:
    """True when value is an object of finite (and, if asked, non-negative, and below INT_LIMIT) numbers."""
    if type(value) is not dict:
        return False
    numbers = list(value.values())
    return not numbers or (set(map(type, numbers)) <= _NUMBER_TYPES and _finite(numbers, non_negative)
                           and (not exact or max(numbers) < INT_LIMIT))


def _event_ids(events) -> tuple[dict[str, int] | None, list[int]]:
    """Where each valid event id first appears (None if unknowable), and the starts of the chunks of events
    not proven valid, which the walk words event by event."""
    if not isinstance(events, list):
        return None, []
    first_seen: dict[str, int] = {}
    doubtful = []
    for start in range(0, len(events), _CHUNK):
        chunk = events[start : start + _CHUNK]
        ids = _valid_event_ids(chunk)
        if ids is not None and first_seen.keys().isdisjoint(ids):
            first_seen.update(zip(ids, count(start)))
            continue
        doubtful.append(start)
        for index, event in enumerate(chunk, start):
            event_id = event.get("id") if isinstance(event, dict) else None
            if _string_error(event_id, non_empty=True) is None:
                first_seen.setdefault(event_id, index)
    return first_seen, doubtful


def _check_events(events, first_seen: dict[str, int] | None, doubtful: list[int]) -> Iterator[Problem]:
    """Problems of the events array, given what _event_ids found in it."""
    if not isinstance(events, list):
        yield Problem("events", f"{_show(events)} is not an array")
    elif not events:
        yield Problem("events", "must contain at least one event")
    for start in doubtful:
        for index, event in enumerate(events[start : start + _CHUNK], start):
            yield from _event_problems(event, index, first_seen)


def _valid_event_ids(events: list) -> tuple[str, ...] | None:
    """The ids, unique among these events (at least one), when every event is certainly valid, else None."""
    ids = _checked_event_ids(events)
    if ids is None:
        return None
    id_set = set(ids)
    return ids if "" not in id_set and len(id_set) == len(ids) else None


def _checked_event_ids(events: list) -> tuple[str, ...] | None:
    """The ids of these events (at least one) when every event is certainly valid, uniqueness aside, else None."""
    # Each check is one C-level pass over a column: no Python bytecode runs per event.
    try:
        # Only an object can be indexed by a key: a TypeError means an event is not one.
        ids, ts, types, agents = zip(*map(_EVENT_REQUIRED, events))
        for key in EVENT_STRING_KEYS:  # str.join takes nothing but strings
            "".join(map(dict.get, events, repeat(key), repeat("")))
        valid = (_all_strings(ids) and _all_strings(agents) and all(agents) and _EVENT_TYPE_SET.issuperset(types)
                 and set(map(type, ts)) <= _NUMBER_TYPES and _finite(ts, non_negative=True) and max(ts) < INT_LIMIT
                 and all(set(map(type, map(dict.get, events, repeat(key), repeat(False)))) <= _BOOL_ONLY
                         for key in EVENT_BOOLEAN_KEYS)
                 and _plain(events))
    except (KeyError, TypeError):  # TypeError also for an unhashable type
        return None
    return ids if valid else None


def _plain(events: list[dict]) -> bool:
    """True when every property of these events is JSON the store keeps as sent (see _value_problem), in a
    few C-level passes: about 10 ms for the 20,000 events of the benchmark trace.

    orjson, writing them, refuses lone surrogates, keys given twice (a KeyedTwice is a subclass), integers
    beyond 64 bits (allowed, but left to the walk) and, wrapped as they are here, nesting past MAX_DEPTH.
    It writes a float that is not finite as null, so only a document with a null needs its floats read."""
    outer, inner = _wrapping()
    inner[0] = events
    try:
        written = orjson.dumps(outer, option=orjson.OPT_PASSTHROUGH_SUBCLASS)
    except orjson.JSONEncodeError:
        return False
    finally:
        inner[0] = None
    return b"null" not in written or finite_throughout(list(chain.from_iterable(map(dict.values, events))))


def _wrapping() -> tuple[list, list]:
    """This thread's arrays nested _WRAPPING deep, and the innermost one (built once: half the time of
    a small trace's check went to building them)."""
    try:
        return _wrappings.outer, _wrappings.inner
    except AttributeError:
        inner = outer = [None]
        for _ in range(_WRAPPING - 1):
            outer = [outer]
        _wrappings.outer, _wrappings.inner = outer, inner
        return outer, inner


def finite_throughout(values: list) -> bool:
    """True when every float in these values, and in all they hold, is finite: a level at a time."""
    while values:
        types = list(map(type, values))
        if not _finite(list(compress(values, map(is_, types, repeat(float))))):
            return False
        values = list(chain(chain.from_iterable(map(dict.values, compress(values, map(is_, types, repeat(dict))))),
                            chain.from_iterable(compress(values, map(is_, types, repeat(list))))))
    return True


# Events wrapped in this many arrays are as deep as orjson writes once a property nests MAX_DEPTH levels
# (the events array and each event are two more): one level more and it refuses them.
_WRAPPING = ORJSON_DEPTH - MAX_DEPTH - 2
_wrappings = threading.local()


def is_text(strings: Iterable[str]) -> bool:
    """True when these are strings UTF-8 can carry: JSON's "\\ud800" escape reads as a lone surrogate,
    which no column, response or page can hold."""
    try:
        "".join(strings).encode()
    except (TypeError, UnicodeEncodeError):
        return False
    return True


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


def _event_problems(event, index: int, first_seen: dict) -> Iterator[Problem]:
    """Problems of one event; an id that first_seen places earlier is a duplicate."""
    path = f"events[{index}]"
    if not isinstance(event, dict):
        yield Problem(path, f"{_show(event)} is not an object")
        return
    yield from _missing(event, EVENT_REQUIRED_KEYS, path)
    yield from _repeated(event, path)
    for key, value in event.items():
        if key == "id":
            error = _string_error(value, non_empty=True)
            if error is None and first_seen[value] != index:
                error = f"duplicate id {_show(value)} (first at events[{first_seen[value]}])"
        elif key == "t":
            error = _number_error(value, non_negative=True, exact=True)
        elif key == "type":
            error = _enum_error(value, EVENT_TYPES)
        elif key == "agent":
            error = _string_error(value, non_empty=True)
        elif key in EVENT_STRING_KEYS:
            error = _string_error(value)
        elif key in EVENT_BOOLEAN_KEYS:
            error = None if isinstance(value, bool) else f"{_show(value)} is not a boolean"
        else:
            problem = _key_problem(key, path) or _value_problem(value, key_path(path, key))
            if problem:
                yield problem
            continue
        if error:
            yield Problem(key_path(path, key), error)


def _check_edges(edges, ids: Container[str] | None) -> Iterator[Problem]:
    """Problems of the edges array; endpoints are checked only when ids is known."""
    if not isinstance(edges, list):
        yield Problem("edges", f"{_show(edges)} is not an array")
        return
    known = None if ids is None else set(ids)
    for start in range(0, len(edges), _CHUNK):
        chunk = edges[start : start + _CHUNK]
        if known is None or not _edges_look_valid(chunk, known):
            for index, edge in enumerate(chunk, start):
                yield from _edge_problems(edge, f"edges[{index}]", known)


def _edges_look_valid(edges: list, ids: set[str]) -> bool:
    """True when every edge (at least one) is certainly valid."""
    ends = _edge_ends(edges)
    return ends is not None and ids.issuperset(ends[0]) and ids.issuperset(ends[1])


def _edge_ends(edges: list) -> tuple[tuple, tuple] | None:
    """The sources and destinations of these edges (at least one) when every edge is certainly valid but for
    the events its ends name, else None; exactly three keys, all present, rules out extras."""
    if set(map(type, edges)) != _DICT_ONLY:
        return None
    try:
        src, dst, types = zip(*map(_EDGE_VALUES, edges))  # a TypeError: an edge is not an object
        valid = (set(map(len, edges)) == {len(EDGE_KEYS)} and _all_strings(src) and _all_strings(dst)
                 and _EDGE_TYPE_SET.issuperset(types))
    except (KeyError, TypeError):  # TypeError also for an unhashable value
        return None
    return (src, dst) if valid else None


def _edge_problems(edge, path: str, ids: Container[str] | None) -> Iterator[Problem]:
    """Problems of one edge."""
    if not isinstance(edge, dict):
        yield Problem(path, f"{_show(edge)} is not an object")
        return
    yield from _missing(edge, EDGE_KEYS, path)
    yield from _repeated(edge, path)
    for key, value in edge.items():
        if key == "type":
            error = _enum_error(value, EDGE_TYPES)
        elif key in EDGE_KEYS:  # src or dst
            error = _string_error(value, non_empty=True)
            if error is None and ids is not None and value not in ids:
                error = f"{_show(value)} is not an event id"
        else:
            yield Problem(path, f"unknown key {_show(key)}; allowed: {', '.join(EDGE_KEYS)}")
            continue
        if error:
            yield Problem(key_path(path, key), error)


def _check_number_map(value, path: str, required=(), non_negative=False, exact=False) -> Iterator[Problem]:
    """Problems of an object whose values must all be numbers."""
    if not isinstance(value, dict):
        yield Problem(path, f"{_show(value)} is not an object")
        return
    yield from _missing(value, required, path)
    yield from _repeated(value, path)
    for key, number in value.items():
        problem = _key_problem(key, path)
        error = _number_error(number, non_negative, exact)
        if problem:
            yield problem
        elif error:
            yield Problem(key_path(path, key), error)


def _repeated(obj: dict, path: str) -> Iterator[Problem]:
    """One problem per key the object's JSON text gave more than once."""
    if isinstance(obj, KeyedTwice):
        yield from (Problem(key_path(path, key), REPEATED_KEY) for key in obj.twice)


def _key_problem(key, path: str) -> Problem | None:
    """A key that is not text UTF-8 can carry."""
    if not isinstance(key, str):
        return Problem(key_path(path, key), f"the key {_show(key)} is not a string")
    if not is_text((key,)):
        return Problem(key_path(path, key), f"the key {_show(key)} holds a lone surrogate, which is not text")
    return None


def _value_problem(value, path: str) -> Problem | None:
    """The first part of an event property (in document order) that the store would not keep as sent or
    that could break a page: see _plain. Walked with one iterator per level, so no depth can exhaust Python's
    stack, and a path is made only for the containers walked into and what is reported, so no width of an
    array fills memory with paths."""
    levels: list[tuple[Iterator, str, bool]] = []  # per container walked into: its items, its path, is it a list
    while True:
        kind = type(value)
        if kind in (dict, list, KeyedTwice):
            if len(levels) == MAX_DEPTH:
                return Problem(path, f"nested more than {MAX_DEPTH} levels of objects and arrays deep")
            if kind is list:
                levels.append((enumerate(value), path, True))
            else:
                problem = next(_repeated(value, path), None) or next(
                    filter(None, (_key_problem(key, path) for key in value)), None)
                if problem:
                    return problem
                levels.append((iter(value.items()), path, False))
        else:
            if kind is str:
                error = _string_error(value)
            elif kind is float:
                error = _number_error(value)
            else:
                error = None if kind in _JSON_TYPES else f"{_show(value)} is not a JSON value"
            if error:
                return Problem(path, error)
        while levels:
            step = next(levels[-1][0], None)
            if step is not None:
                break
            levels.pop()
        else:
            return None
        (key, value), (_, parent, is_list) = step, levels[-1]
        path = f"{parent}[{key}]" if is_list else key_path(parent, key)


def _missing(obj: dict, required, path: str) -> Iterator[Problem]:
    """One problem per required key absent from obj."""
    return (Problem(path, f"missing required key '{key}'") for key in required if key not in obj)


def _number_error(value, non_negative=False, exact=False) -> str | None:
    """Why value is not a (non-negative) JSON number, or with `exact` an integer of INT_LIMIT or more; or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{_show(value)} is not a number"
    if isinstance(value, float) and not math.isfinite(value):
        return f"{_show(value)} is not a valid JSON number"
    if non_negative and value < 0:
        return f"{_show(value)} is below 0"
    if exact and isinstance(value, int) and abs(value) >= INT_LIMIT:
        return f"{_show(value)} is too large: integers here must be below 2**63 to be stored exactly"
    return None


def _string_error(value, non_empty=False) -> str | None:
    """Why value is not a (non-empty) string, or None."""
    if not isinstance(value, str):
        return f"{_show(value)} is not a string"
    if non_empty and not value:
        return "must be a non-empty string"
    if not is_text((value,)):
        return f"{_show(value)} holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text"
    return None


def _enum_error(value, allowed: tuple) -> str | None:
    """Why value is not one of the allowed strings, or None."""
    if not isinstance(value, str):
        return f"{_show(value)} is not a string"
    if value not in allowed:
        return f"{_show(value)} is not one of {', '.join(allowed)}"
    return None


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
