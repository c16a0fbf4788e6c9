"""JSON text: reading (msgspec) and compact writing (orjson), each with the standard library for what it refuses,
and the mark of a parsed object whose text gave a key twice. Pure: every layer reads and writes JSON."""

import json
import math

import msgspec
import orjson

# msgspec reads JSON text several times faster than the standard library, and, unlike orjson, keeps integers of
# any size exact (orjson reads those past 64 bits as floats, so each text had to be searched for long digit runs).
# Stored JSON was written by the app: it needs none of the checks of documents.fast_loads.
_DECODER = msgspec.json.Decoder()


class KeyedTwice(dict):
    """A JSON object whose text gives a key more than once. It holds the last value, as every JSON parser
    keeps; `twice` names the repeated keys, so a validator can refuse it and say where it is."""

    __slots__ = ("twice",)


def _orjson_depth() -> int:
    """How many arrays deep orjson writes before it refuses (254 in every release so far)."""
    value = []
    for depth in range(1, 10_000):
        try:
            orjson.dumps(value)
        except orjson.JSONEncodeError:
            return depth - 1
        value = [value]
    raise RuntimeError("orjson writes arrays nested 10,000 deep: the depth checks need another way")


ORJSON_DEPTH = _orjson_depth()  # the deepest JSON orjson writes
# JSON kept as sent (an exporter's batch) nests at most this deep: past ORJSON_DEPTH the standard library writes
# it, one recursion per level, within Python's limit of 1,000.
KEPT_DEPTH = 512
SHOWN_RUN = 4  # a path shows a list index repeated more often in a row once, with its count: `x[0]×300`
REPEATED_KEY = "is given more than once in its object (keys must be unique)"
LONE_SURROGATE = "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text"


def first_problem(value, *, kept: bool = False) -> str | None:
    """'path: why' (see key_path) for the first part of parsed JSON, walking it in document order (an object
    before what it holds), that cannot be taken as sent: an object giving a key twice; with `kept`, also what no
    store keeps as sent: a key or string holding a lone surrogate, a number beyond a double (read as infinity),
    nesting deeper than KEPT_DEPTH. None when there is none. Only the exact reading marks repeated keys
    (KeyedTwice) or lets the others through, so only a document read that way needs this walk, which holds one
    iterator per level and makes a path only for what it reports."""
    levels: list[tuple[bool, object]] = []  # per container walked into: is it a list, and the key or index reached
    iterators = []
    while True:
        problem = _own_problem(value, kept, len(levels))
        if problem is not None:
            where, why = problem
            path = ""
            for (is_list, step), run in _runs(levels):
                index = f"[{step}]"
                path = (f"{path}{index}" * run if run <= SHOWN_RUN else f"{path}{index}×{run}") if is_list \
                    else key_path(path, step)
            path = key_path(path, where) if where is not None else path
            return f"{path}: {why}" if path else why
        if isinstance(value, (dict, list)):
            is_list = isinstance(value, list)
            iterators.append(enumerate(value) if is_list else iter(value.items()))
            levels.append((is_list, None))
        while iterators:
            step = next(iterators[-1], None)
            if step is not None:
                levels[-1] = (levels[-1][0], step[0])
                value = step[1]
                break
            iterators.pop()
            levels.pop()
        else:
            return None


def _runs(levels: list) -> list[tuple[tuple[bool, object], int]]:
    """Each step of a path with how many times it repeats in a row (a deep array is `[0]` hundreds of times)."""
    runs: list[list] = []
    for step in levels:
        if runs and runs[-1][0] == step and step[0]:
            runs[-1][1] += 1
        else:
            runs.append([step, 1])
    return [(step, run) for step, run in runs]


def _own_problem(value, kept: bool, depth: int) -> tuple[object, str] | None:
    """(the key inside `value` it concerns, or None for `value` itself; why) when `value` itself, `depth`
    containers down, cannot be taken as sent (see first_problem)."""
    kind = type(value)
    if kind is KeyedTwice:
        return value.twice[0], REPEATED_KEY
    if not kept:
        return None
    if kind is dict or kind is list:
        if depth >= KEPT_DEPTH:
            return None, f"nested more than {KEPT_DEPTH} levels of objects and arrays deep"
        if kind is dict:
            unreadable = next((key for key in value if not _is_text(key)), None)
            if unreadable is not None:
                return unreadable, "the key " + LONE_SURROGATE
    elif kind is str and not _is_text(value):
        return None, LONE_SURROGATE
    elif kind is float and not math.isfinite(value):
        return None, f"{value} is beyond a double: not a JSON number that can be kept"
    return None


def _is_text(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def key_path(path: str, key) -> str:
    """Path of a key inside an object: .name for identifiers, ["quoted"] otherwise."""
    if isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{escaped(json.dumps(str(key), ensure_ascii=False))}]"  # a path any response can carry


def escaped(text: str) -> str:
    """`text` with each lone surrogate written as its escape, so a message can quote any string."""
    return text.encode(errors="backslashreplace").decode()


def loads(text: str | bytes):
    """The value of JSON text: msgspec for speed, the standard library for what msgspec refuses (e.g. a lone
    surrogate escape), which raises as json.loads does when the text is not JSON."""
    try:
        return _DECODER.decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def dumps(obj) -> str:
    """Compact JSON text; orjson for speed, the standard library for integers beyond 64 bits."""
    try:
        return orjson.dumps(obj).decode()
    except TypeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def dumps_bytes(obj) -> bytes:
    """`dumps` as UTF-8 bytes, without the decode and encode when orjson can write it."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        # orjson writes datetimes as ISO 8601; so does this path
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                          default=lambda value: value.isoformat()).encode()
