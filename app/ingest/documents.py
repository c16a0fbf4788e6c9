"""Turn uploaded bytes (JSON object, JSON array, JSON Lines, optionally gzipped) into trace objects.

Parse errors name the line and column so a user can find the fault in a large file. An object that
gives a key twice is read as a KeyedTwice, so validation refuses it and names its path rather than
keeping the last value without a word; JSON nested too deeply to read is a parse error, never a 500.
"""

import json
import re
import zlib
from dataclasses import dataclass

import msgspec
import orjson

from app.domain.jsontext import KeyedTwice, first_problem
from app.domain.refusals import Refusal

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 2 * 1024**3
ESCAPED_COLON_PREFIX = b"\\u003"  # found at C speed; the pattern then rules out \u003c (<) and the like
ESCAPED_COLON = re.compile(rb"\\u003[aA]")
# msgspec reads a document about a fifth faster than orjson.
_DECODER = msgspec.json.Decoder()


@dataclass
class Upload:
    """One uploaded document: its name (file name, archive member or "body") and bytes."""

    source: str
    data: bytes


class DocumentError(Refusal, ValueError):
    """The bytes are not a readable JSON document; `line`/`column` locate the fault when known."""

    def __init__(self, message: str, source: str = "", line: int | None = None, column: int | None = None):
        self.source, self.line, self.column = source, line, column
        where = f"{source}: " if source else ""
        super().__init__(where + message)

    status = 400

    def details(self) -> dict:
        return {"source": self.source or None, "line": self.line, "column": self.column}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _object(pairs: list[tuple]) -> dict:
    """The json module's object hook: a dict, or a KeyedTwice when a key repeats."""
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    seen, twice = set(), []
    for key, _ in pairs:
        if key in seen:
            twice.append(key)
        seen.add(key)
    repeated = KeyedTwice(obj)
    repeated.twice = list(dict.fromkeys(twice))
    return repeated


def strict_loads(text: str | bytes):
    """json.loads that refuses NaN and Infinity, which are not JSON, and nesting too deep for it to read (a
    ValueError, not the RecursionError the parser raises); objects with a repeated key are KeyedTwice."""
    try:
        return json.loads(text, parse_constant=_reject_constant, object_pairs_hook=_object)
    except RecursionError:
        raise ValueError("arrays and objects nested too deeply to read") from None


class TooLarge(Refusal, ValueError):
    """A body, or what it decompresses to, exceeds the configured limit."""

    status = 413


def gunzip(data: bytes, max_bytes: int, source: str = "") -> bytes:
    """Decompress gzip data, refusing to expand past `max_bytes` (a gzip bomb stops early)."""
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise DocumentError(f"not a readable gzip file ({exc})", source) from exc
    if len(out) > max_bytes:
        raise TooLarge(f"{source or 'body'} decompresses to more than {max_bytes} bytes")
    if not inflater.eof:
        raise DocumentError("truncated gzip file", source)
    return out


def decode(data: bytes, source: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> str:
    """Bytes to text, gunzipping when the gzip magic number leads."""
    if data[:2] == GZIP_MAGIC:
        data = gunzip(data, max_bytes, source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"not UTF-8 text (byte {exc.start})", source) from exc


def fast_loads(data: bytes):
    """The JSON value of `data` by msgspec, or None when it must go the exact (and explaining) json path:
    gzip, a repeated key, anything msgspec refuses (a byte order mark, lone surrogates, numbers beyond a
    double, nesting too deep for it), or what orjson cannot write back for the repeated-key check (integers
    past 64 bits, nesting past ORJSON_DEPTH). So a value read here can be stored as it is."""
    if data[:2] == GZIP_MAGIC:
        return None
    try:
        doc = _DECODER.decode(data)
    except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
        return None
    return doc if _keys_unique(data, doc) else None


def _keys_unique(data: bytes, doc) -> bool:
    """True when no object in `data` repeats a key, which msgspec would drop without a word. Outside strings
    a colon follows each key, and writing `doc` back gives every key it kept and every colon of its strings:
    the colon counts differ exactly when a key was dropped. A colon spelt as an escape would hide from the
    count, so such a document takes the exact path. About 9 ms for the 6.5 MB of 1,000 small traces;
    reading every document by the exact path would cost several times that."""
    if ESCAPED_COLON_PREFIX in data and ESCAPED_COLON.search(data):
        return False
    try:
        written = orjson.dumps(doc)
    except orjson.JSONEncodeError:  # an integer past 64 bits, or nesting past what orjson writes: rare
        return False
    return data.count(b":") == written.count(b":")


def fast_documents(data: bytes) -> list | None:
    """The values in `data` by msgspec (an array's items, a single value, or one per non-blank line of JSON
    Lines), or None when it, or one of its lines, must go the exact path (which names the fault)."""
    doc = fast_loads(data)
    if doc is not None:
        return doc if isinstance(doc, list) else [doc]
    lines = fast_lines(data) if b"\n" in data else None
    return None if lines is None else [value for _, value in lines]


def fast_lines(data: bytes) -> list[tuple[int, object]] | None:
    """(line number, value) of each non-blank line of JSON Lines by msgspec, or None when some line must go the
    exact path (see fast_loads); repeated keys are checked once for the whole text."""
    numbered = []
    for number, line in enumerate(data.split(b"\n"), 1):
        if line.strip():
            try:
                numbered.append((number, _DECODER.decode(line)))
            except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
                return None
    return numbered if numbered and _keys_unique(data, [value for _, value in numbered]) else None


def exact_lines(text: str) -> tuple[list[tuple[int, object]], str | None]:
    """(line number, value) of each non-blank line of JSON Lines by the exact reading, and where the first object
    giving a key twice is ('line N: path: why'), if one does; DocumentError names a line that is not JSON. Lines end
    at a line feed only: a JSON string may hold U+2028, where str.splitlines would break."""
    numbered, problem = [], None
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            try:
                value = strict_loads(line)
            except ValueError as exc:
                raise DocumentError(f"line {number}: not JSON ({exc})", line=number) from None
            where = first_problem(value) if problem is None else None
            if where is not None:
                problem = f"line {number}: {where}"
            numbered.append((number, value))
    return numbered, problem


def parse_documents(data: bytes, source: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> list:
    """The trace objects in one upload: a single object, an array of them, or one per line."""
    docs = fast_documents(data)
    if docs is not None:
        return docs
    text = decode(data, source, max_bytes)
    if not text.strip():
        raise DocumentError("empty document: expected a trace object, an array of traces or JSON Lines", source)
    try:
        doc = strict_loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg != "Extra data":
            raise DocumentError(f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                                source, exc.lineno, exc.colno) from exc
        return _parse_lines(text, source)
    except ValueError as exc:
        raise DocumentError(f"malformed JSON: {exc}", source) from exc
    return doc if isinstance(doc, list) else [doc]


def _parse_lines(text: str, source: str) -> list:
    """JSON Lines: one trace per non-blank line (lines end at a line feed, as in `fast_documents`)."""
    docs = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            docs.append(strict_loads(line))
        except json.JSONDecodeError as exc:
            raise DocumentError(f"malformed JSON Lines at line {lineno}, column {exc.colno}: {exc.msg}",
                                source, lineno, exc.colno) from exc
        except ValueError as exc:
            raise DocumentError(f"malformed JSON Lines at line {lineno}: {exc}", source, lineno) from exc
    return docs
