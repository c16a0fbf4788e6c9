"""JSON text: compact writing (orjson, with the standard library for what orjson refuses), and the mark of a
parsed object whose text gave a key twice. Pure: every layer reads and writes JSON."""

import json
import re

import orjson

_LONG_DIGITS = re.compile(r"\d{19}")  # an integer that may be beyond 64 bits, which orjson reads as a float


class KeyedTwice(dict):
    """A JSON object whose text gives a key more than once. It holds the last value, as every JSON parser
    keeps; `twice` names the repeated keys, so a validator can refuse it and say where it is."""

    __slots__ = ("twice",)


def loads(text: str):
    """The value of JSON text: orjson for speed, the standard library where orjson would not be exact (an
    integer beyond 64 bits) or refuses the text."""
    if _LONG_DIGITS.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
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
