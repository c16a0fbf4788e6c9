"""Turn uploaded bytes (JSON object, JSON array, JSON Lines, optionally gzipped) into trace objects.

Parse errors name the line and column so a user can find the fault in a large file.
"""

import json
import zlib
from dataclasses import dataclass

import orjson

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 2 * 1024**3
# orjson parses about twice as fast but reads integers outside [-2**63, 2**64) as floats. Such an integer
# has a run of 20 digits, or a minus sign and 19; a document with either takes the exact json path instead.
# (19-digit runs alone are common and safe: OTLP's nanosecond timestamps have them.)
DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
LONG_DIGIT_RUNS = (b"0" * 20, b"-" + b"0" * 19)


@dataclass
class Upload:
    """One uploaded document: its name (file name, archive member or "body") and bytes."""

    source: str
    data: bytes


class DocumentError(ValueError):
    """The bytes are not a readable JSON document; `line`/`column` locate the fault when known."""

    def __init__(self, message: str, source: str = "", line: int | None = None, column: int | None = None):
        self.source, self.line, self.column = source, line, column
        where = f"{source}: " if source else ""
        super().__init__(where + message)

    def to_json(self) -> dict:
        return {"error": str(self), "source": self.source or None, "line": self.line, "column": self.column}


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def strict_loads(text: str):
    """json.loads that refuses NaN and Infinity, which are not JSON."""
    return json.loads(text, parse_constant=_reject_constant)


class TooLarge(ValueError):
    """A body, or what it decompresses to, exceeds the configured limit."""


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


def dumps(obj) -> str:
    """Compact JSON text; orjson for speed, the standard library for integers beyond 64 bits."""
    try:
        return orjson.dumps(obj).decode()
    except TypeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def fast_loads(data: bytes):
    """The JSON value of `data` by orjson, or None when it must go the exact (and explaining) json path."""
    if data[:2] == GZIP_MAGIC:
        return None
    zeroed = data.translate(DIGITS_AS_ZERO)
    if any(run in zeroed for run in LONG_DIGIT_RUNS):
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def parse_documents(data: bytes, source: str = "", max_bytes: int = DEFAULT_MAX_BYTES) -> list:
    """The trace objects in one upload: a single object, an array of them, or one per line."""
    doc = fast_loads(data)
    if doc is not None:
        return doc if isinstance(doc, list) else [doc]
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
    """JSON Lines: one trace per non-blank line."""
    docs = []
    for lineno, line in enumerate(text.splitlines(), start=1):
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
