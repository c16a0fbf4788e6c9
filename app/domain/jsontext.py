"""JSON text: reading (msgspec) and compact writing (orjson), each with the standard library for what it refuses,
and the mark of a parsed object whose text gave a key twice. Pure: every layer reads and writes JSON."""

import json

import msgspec
import orjson

# msgspec reads JSON text several times faster than the standard library, and, unlike orjson, keeps integers of
# any size exact (orjson reads those past 64 bits as floats, so each text had to be searched for long digit runs).
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


# The deepest JSON orjson writes: what is kept as sent (an exporter's batch) may nest no deeper.
ORJSON_DEPTH = _orjson_depth()
REPEATED_KEY = "is given more than once in its object (keys must be unique)"
LONE_SURROGATE = "holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is not text"


def first_problem(value, *, text: bool = False, max_depth: int | None = None) -> str | None:
    """'path: why' (see key_path) for the first part of parsed JSON, in document order, that cannot be kept as
    sent: an object giving a key twice; with `text`, a key or string holding a lone surrogate; with `max_depth`,
    arrays and objects nested deeper. None when there is none. Only the exact reading marks repeated keys
    (KeyedTwice) or lets a lone surrogate through, so only a document read that way needs this walk."""
    stack = [(value, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        problem = None
        if isinstance(value, (dict, list)) and max_depth is not None and depth > max_depth:
            problem = f"nested more than {max_depth} levels of objects and arrays deep"
        elif type(value) is KeyedTwice:
            path, problem = key_path(path, value.twice[0]), REPEATED_KEY
        elif isinstance(value, dict):
            unreadable = [key for key in value if text and not _is_text(key)]
            if unreadable:
                path, problem = key_path(path, unreadable[0]), "the key " + LONE_SURROGATE
            else:
                stack += [(item, key_path(path, key), depth + 1) for key, item in reversed(value.items())]
        elif isinstance(value, list):
            stack += [(item, f"{path}[{i}]", depth + 1) for i, item in reversed(list(enumerate(value)))]
        elif text and isinstance(value, str) and not _is_text(value):
            problem = LONE_SURROGATE
        if problem is not None:
            return f"{path}: {problem}" if path else problem
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
