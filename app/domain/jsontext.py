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


REPEATED_KEY = "is given more than once in its object (keys must be unique)"


def repeated_key(value) -> str | None:
    """The path (see key_path) of the first key, in document order, that an object of this parsed JSON gives
    twice; None when none does. Only the exact reading marks such objects (KeyedTwice), so only a document read
    that way needs this walk."""
    stack = [(value, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            if type(value) is KeyedTwice:
                return key_path(path, value.twice[0])
            stack += [(item, key_path(path, key)) for key, item in reversed(value.items())]
        elif isinstance(value, list):
            stack += [(item, f"{path}[{i}]") for i, item in reversed(list(enumerate(value)))]
    return None


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
