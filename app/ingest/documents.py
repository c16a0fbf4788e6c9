"""Turn uploaded bytes (JSON object, JSON array, JSON Lines, optionally gzipped) into trace objects.

Parse errors name the line and column so a user can find the fault in a large file. An object that
gives a key twice is read as a KeyedTwice, so validation refuses it and names its path rather than
keeping the last value without a word; JSON nested too deeply to read is a parse error, never a 500.

Memory is bounded before anything is read: compressed data is inflated with a running cap (`inflate`), and a
request holds at most MAX_FILES documents and MAX_JSON_VALUES values, counted from the bytes (`json_values`),
since tiny values cost far more parsed than sent (`{}` is 3 bytes, and 72 as a Python dict in a list).
"""

import io
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import msgspec
import orjson

from app.domain.jsontext import KeyedTwice, first_problem
from app.domain.refusals import Refusal

GZIP_MAGIC = b"\x1f\x8b"
GZIP_WBITS = 31  # zlib's window bits for gzip framing
DEFAULT_MAX_BYTES = 2 * 1024**3
# Values in one request, as json_values counts them: a 100,000-event trace has about 1.9 million. Read and
# validated, a value takes at most about 210 bytes however small its text (measured: `{}` 40, `[[]]` 60, `{"a":0}`
# 105, an object's unique key holding a unique short string 210), so a request's parse stays under about 525 MB.
MAX_JSON_VALUES = 2_500_000
MAX_FILES = 10_000  # documents in one request: multipart files and archive members together
INFLATE_CHUNK = 1024 * 1024  # bytes of compressed data inflated at a time
_VALUE_MARKS = (b",", b"[", b"{", b"\n")
ESCAPED_COLON_PREFIX = b"\\u003"  # found at C speed; the pattern then rules out \u003c (<) and the like
ESCAPED_COLON = re.compile(rb"\\u003[aA]")
# msgspec reads a document about a fifth faster than orjson.
_DECODER = msgspec.json.Decoder()
_noted: ContextVar[list | None] = ContextVar("documents_read", default=None)  # see noting_reads


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


class TooManyValues(TooLarge):
    """A request holds more than MAX_JSON_VALUES JSON values."""

    def __init__(self, source: str):
        super().__init__(f"{source or 'body'}: the request holds more than {MAX_JSON_VALUES:,} JSON values (counted "
                         "from its commas, brackets and lines before reading it): split it into smaller requests")


def json_values(data: bytes) -> int:
    """An upper bound of the values in a JSON document or JSON Lines, from its bytes at C speed, before any is
    built: each value but the first follows a comma or an opening bracket, or begins a line. Those count inside
    strings too, so the bound errs high (a pretty-printed document's line feeds count as well)."""
    return 1 + sum(map(data.count, _VALUE_MARKS))


def inflate(data: bytes, wbits: int, max_bytes: int) -> bytes:
    """Decompress zlib, gzip or raw deflate data (by zlib's `wbits`) with a running cap (see capped_bytes).
    zlib.error for data that is not readable, EOFError for data that ends early."""
    return capped_bytes(_inflated(data, wbits), max_bytes)


def _inflated(data: bytes, wbits: int) -> Iterator[bytes]:
    """What `data` inflates to, INFLATE_CHUNK bytes at a time."""
    inflater = zlib.decompressobj(wbits=wbits)
    while not inflater.eof:
        chunk = inflater.decompress(data, INFLATE_CHUNK)
        data = inflater.unconsumed_tail
        if not chunk and not data:
            raise EOFError("truncated")
        yield chunk


def capped_bytes(chunks: Iterable[bytes], max_bytes: int) -> bytes:
    """Chunks of inflated data joined, TooLarge as soon as they pass `max_bytes`, whatever size the data declared:
    a bomb costs one chunk past the limit, and the whole is built once (BytesIO hands over its buffer), not
    copied again from its chunks."""
    out = io.BytesIO()
    for chunk in chunks:
        if out.tell() + len(chunk) > max_bytes:
            raise TooLarge(f"decompresses to more than {max_bytes} bytes")
        out.write(chunk)
    return out.getvalue()


def gunzip(data: bytes, max_bytes: int, source: str = "") -> bytes:
    """Decompress gzip data, refusing to expand past `max_bytes` (a gzip bomb stops early)."""
    try:
        return inflate(data, GZIP_WBITS, max_bytes)
    except zlib.error as exc:
        raise DocumentError(f"not a readable gzip file ({exc})", source) from exc
    except EOFError:
        raise DocumentError("truncated gzip file", source) from None
    except TooLarge as exc:
        raise TooLarge(f"{source or 'body'} {exc}") from None


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


@contextmanager
def noting_reads() -> Iterator[list[tuple[bytes, list]]]:
    """Within, (bytes, values) of each document fast_documents reads in this context: the caller learns which
    parsed values came from which bytes (and the analysis worker, given the same bytes, needs only positions)."""
    noted: list[tuple[bytes, list]] = []
    token = _noted.set(noted)
    try:
        yield noted
    finally:
        _noted.reset(token)


def fast_documents(data: bytes) -> list | None:
    """The values in `data` by msgspec (an array's items, a single value, or one per non-blank line of JSON
    Lines), or None when it, or one of its lines, must go the exact path (which names the fault)."""
    doc = fast_loads(data)
    if doc is not None:
        values = doc if isinstance(doc, list) else [doc]
    else:
        values = _fast_lines(data, numbered=False) if b"\n" in data else None
        if not values or not _keys_unique(data, values):
            return None
    noted = _noted.get()
    if noted is not None:
        noted.append((data, values))
    return values


def fast_lines(data: bytes) -> list[tuple[int, object]] | None:
    """(line number, value) of each non-blank line of JSON Lines by msgspec, or None when some line must go the
    exact path (see fast_loads); repeated keys are checked once for the whole text."""
    numbered = _fast_lines(data, numbered=True)
    return numbered if numbered and _keys_unique(data, [value for _, value in numbered]) else None


def _fast_lines(data: bytes, numbered: bool) -> list | None:
    """The value of each non-blank line, with its number if asked, or None (see fast_lines). The lines are read
    one at a time (a line feed ends each, as in `exact_lines`), so none but the values are held."""
    values = []
    for number, line in enumerate(io.BytesIO(data), 1):
        if not line.isspace():
            try:
                value = _DECODER.decode(line)
            except (msgspec.MsgspecError, RecursionError, UnicodeDecodeError):
                return None
            values.append((number, value) if numbered else value)
    return values


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
