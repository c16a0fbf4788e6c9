"""Turning uploads in industrial formats into orchestration traces.

One module per source format (otlp, openai_agents, claude_code, codex, atif), each a pure function from source
data to traces plus warnings; this module recognises the format from content (never the file name),
unpacks archives, groups a Claude Code session with its sub-agent files, and dispatches. It also reads
a Claude Code session from disk (`subagent_uploads`, `load_session_dir`), naming its files as the
grouping expects, so the CLI, the web upload and the tests read sessions one way.
"""

import importlib
import io
import pkgutil
import struct
import tarfile
import zipfile
import zlib
from functools import partial
from pathlib import Path

from app.domain.jsontext import escaped, first_problem
from app.domain.refusals import Refusal
from app.domain.validation import is_text
from app.ingest.documents import (
    DEFAULT_MAX_BYTES,
    GZIP_MAGIC,
    INFLATE_CHUNK,
    MAX_FILES,
    MAX_JSON_VALUES,
    DocumentError,
    TooLarge,
    TooManyValues,
    Upload,
    capped_bytes,
    exact_lines,
    fast_documents,
    gunzip,
    json_values,
    strict_loads,
)
from app.ingest.importers import atif
from app.ingest.importers.claude_code import SUBAGENTS, is_subagent_file, read_session, session_companions
from app.ingest.importers.common import KEEP, Batch, ContentPolicy, Format, ImportFailed, ImportResult, show


def _registry() -> tuple[Format, ...]:
    """Every format a module of this package declares (`FORMAT`), in detection order: adding a format is adding
    a module."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        declared = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FORMAT", None)
        if isinstance(declared, Format):
            found.append(declared)
    return tuple(sorted(found, key=lambda f: f.order))


REGISTRY = _registry()
BY_NAME = {f.name: f for f in REGISTRY}
FORMATS = tuple(BY_NAME)  # the one list of --format / ?format=
ZIP_MAGIC = b"PK\x03\x04"
ZIP_ENTRY_MAGIC = b"PK\x01\x02"  # begins each entry of a zip's central directory
ZIP_ENCRYPTED = 0x1  # the general purpose flag of an encrypted member
ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)  # bzip2 and LZMA inflate whole reads, uncapped
TAR_MAGIC_OFFSET = 257
TOO_MANY_FILES = f"the request holds more than {MAX_FILES:,} files (archive members included)"


def unpack(uploads: list[Upload], max_bytes: int) -> list[Upload]:
    """Uploads gunzipped, with every .zip or .tar(.gz) replaced by its files (paths kept in the names, and
    gzipped members gunzipped too). The limits are the request's, not each file's: all the files together
    expand to at most `max_bytes`, so ten gzip parts cannot take ten times the memory, and hold at most
    MAX_FILES files and MAX_JSON_VALUES values (see documents.json_values), counted before any is parsed."""
    left, values = max_bytes, MAX_JSON_VALUES
    too_large = f"the request's files expand to more than {max_bytes} bytes together"

    def gunzipped(data: bytes, source: str) -> bytes:
        """One gzip layer undone within what is left of the limit; gzip inside gzip is refused."""
        if data[:2] != GZIP_MAGIC:
            return data
        try:
            data = gunzip(data, left, source)
        except TooLarge:
            raise TooLarge(f"{source}: {too_large}") from None
        if data[:2] == GZIP_MAGIC:
            raise DocumentError("gzip inside gzip: send it compressed once", source)
        return data

    def counted(upload: Upload) -> Upload:
        nonlocal left, values
        if len(out) == MAX_FILES:
            raise TooLarge(f"{upload.source}: {TOO_MANY_FILES}")
        if len(upload.data) > left:
            raise TooLarge(f"{upload.source}: {too_large}")
        left -= len(upload.data)
        values -= json_values(upload.data)
        if values < 0:
            raise TooManyValues(upload.source)
        return upload

    out: list[Upload] = []
    for upload in uploads:
        if upload.data[:4] == ZIP_MAGIC:
            members = _unzip(upload, left, too_large)
        else:
            raw = gunzipped(upload.data, upload.source)
            if len(raw) > TAR_MAGIC_OFFSET + 5 and raw[TAR_MAGIC_OFFSET:TAR_MAGIC_OFFSET + 5] == b"ustar":
                members = _untar(upload, raw, left, too_large)
            else:
                out.append(counted(Upload(upload.source, raw)))
                continue
        out += [counted(Upload(member.source, gunzipped(member.data, member.source))) for member in members]
    return out


def _unzip(upload: Upload, max_bytes: int, too_large: str) -> list[Upload]:
    """The files of a zip, each inflated a chunk at a time within what is left of the limit, whatever size it
    declares (a member declaring 100 bytes may inflate to gigabytes: zipfile's read() inflates it whole before
    it cuts it to its declared size); only stored and deflated members, which inflate a bounded chunk at a time,
    are read. The entries are counted before the archive is opened, since opening it reads them all."""
    if upload.data.count(ZIP_ENTRY_MAGIC) > MAX_FILES:
        raise TooLarge(f"{upload.source}: {TOO_MANY_FILES}")
    source = upload.source
    try:
        archive = zipfile.ZipFile(io.BytesIO(upload.data))
        files, left = [], max_bytes
        for member in archive.infolist():
            if member.is_dir():
                continue
            source = f"{upload.source}:{escaped(member.filename)}"
            if member.file_size > left:  # as declared: refused before inflating
                raise TooLarge(f"{source}: {too_large}")
            if member.flag_bits & ZIP_ENCRYPTED:
                raise DocumentError("an encrypted zip member: send it unencrypted", source)
            if member.compress_type not in ZIP_METHODS:
                raise DocumentError(f"zip compression method {member.compress_type} is not read: store or deflate "
                                    "the members", source)
            with archive.open(member) as data:
                try:
                    files.append(Upload(source, capped_bytes(iter(partial(data.read, INFLATE_CHUNK), b""), left)))
                except TooLarge:
                    raise TooLarge(f"{source}: {too_large}") from None
            left -= len(files[-1].data)
        return files
    except Refusal:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, OSError, struct.error, NotImplementedError) as exc:
        # What zipfile raises for a forged header or entry: the sender's fault, a 400.
        raise DocumentError(f"not a readable zip file ({exc})", source) from exc


def _untar(upload: Upload, raw: bytes, max_bytes: int, too_large: str) -> list[Upload]:
    """The files of a tar, its entries read one by one, so a tar of too many entries stops at MAX_FILES."""
    try:
        with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
            members = []
            for entries, member in enumerate(archive, 1):
                if entries > MAX_FILES:
                    raise TooLarge(f"{upload.source}: {TOO_MANY_FILES}")
                if member.isfile():
                    members.append(member)
            if sum(m.size for m in members) > max_bytes:
                raise TooLarge(f"{upload.source}: {too_large}")
            return [Upload(f"{upload.source}:{escaped(m.name)}", archive.extractfile(m).read()) for m in members]
    except tarfile.TarError as exc:
        raise DocumentError(f"not a readable tar file ({exc})", upload.source) from exc


def _records(data: bytes) -> tuple[list | None, str | None]:
    """The document as JSON: the whole JSON value as a list, or its JSON Lines records; None if neither. Second,
    where and how the exact reading met an object giving a key twice, if it did: an importer would keep the last
    value without a word, so it refuses the document (our own format's validation names it per trace instead)."""
    docs = fast_documents(data)
    if docs is not None:
        return docs, None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, None  # the document readers word this fault
    if not text.strip():
        return None, None
    try:
        doc = strict_loads(text)
        return (doc if isinstance(doc, list) else [doc]), first_problem(doc)
    except ValueError:
        pass
    try:
        lines, problem = exact_lines(text)
    except DocumentError:
        return None, None
    return [value for _, value in lines], problem


def own_traces(upload: Upload) -> list[dict] | None:
    """The traces of a file plainly in our own format (not compressed, archived, any importer's or a companion),
    each an object with a text trace_id, as the ingest reads them; None for any other file. The ingest reads each
    such file of a request on its own, as if it came alone: `orchestrace ingest` posts many in one request."""
    if upload.data[:2] == GZIP_MAGIC or upload.data[:4] == ZIP_MAGIC or any(f.companion(upload) for f in REGISTRY):
        return None
    records, _ = _records(upload.data)
    if not records or detect(records) != "orchestrace" or \
            not all(isinstance(r, dict) and isinstance(r.get("trace_id"), str) for r in records):
        return None
    return records


def detect(records: list | None) -> str:
    """The format of a parsed document (see _records), from its content: the first in the registry's order that
    recognises it, our own format when none does."""
    if not records:
        return "orchestrace"
    return next(f.name for f in REGISTRY if f.detect(records))


def atif_companions(source: Path, data: bytes) -> list[Upload]:
    """The files an ATIF trajectory on disk names (its sub-agents' `trajectory_path`, its continuation), read
    from its folder, and the files those name in turn; none for a file that is not ATIF. A named file that is
    not there is left to the import, which warns naming it."""
    records, _ = _records(data)
    if not records or not atif.looks_like_atif(records):
        return []
    found, seen = [], {source.resolve()}
    queue = [name for record in records for name in atif.referenced_paths(record)]
    while queue:
        path = source.parent / queue.pop(0)
        if path.resolve() in seen or not path.is_file():
            continue
        seen.add(path.resolve())
        upload = Upload(str(path), path.read_bytes())
        found.append(upload)
        more, _ = _records(upload.data)
        queue += [name for record in more or () for name in atif.referenced_paths(record)]
    return found


def subagent_uploads(session: Path) -> list[Upload]:
    """The sub-agent files of a Claude Code session on disk: every transcript and meta file under
    `<session>/subagents/`, workflow agents (`workflows/wf_<id>/`) included, named
    `<session>/subagents/<path>` as `convert` groups them with their session."""
    folder = session.with_suffix("") / SUBAGENTS
    if not folder.is_dir():
        return []
    return [Upload(f"{session.stem}/{SUBAGENTS}/{file.relative_to(folder).as_posix()}", file.read_bytes())
            for file in sorted(folder.rglob("agent-*")) if file.is_file() and is_subagent_file(file.name)]


def load_session_dir(path: Path) -> tuple[str, dict[str, str], dict[str, dict]]:
    """A Claude Code session on disk, read as `convert` reads it: the main transcript's text, and its
    sub-agent transcripts and metas keyed by their path under subagents/."""
    path = Path(path)
    session = Upload(str(path), path.read_bytes())
    return read_session(session, session_companions(session, subagent_uploads(path), 1), DEFAULT_MAX_BYTES)


def convert(uploads: list[Upload], fmt: str | None = None, content_policy: ContentPolicy = KEEP,
            max_bytes: int = DEFAULT_MAX_BYTES) -> ImportResult:
    """Traces and warnings from every upload; `fmt` forces a format, otherwise each file is detected. The
    importers keep what the source said, or only its hashes under the `hash` content policy (our own format
    is stored as sent).

    A trace id that is not text (a lone surrogate) is refused here: every later report names a trace by
    its id, and no response or log could carry that one."""
    if fmt is not None and fmt not in FORMATS:
        raise ImportFailed(f"unknown format '{fmt}'; formats: {', '.join(FORMATS)}")
    try:
        result = _convert(unpack(uploads, max_bytes), fmt, content_policy, max_bytes)
    except RecursionError:  # an importer's walk of a value nested deeper than Python's stack
        raise ImportFailed("arrays and objects nested too deeply to read") from None
    for index, trace in enumerate(result.traces):
        trace_id = trace.get("trace_id") if isinstance(trace, dict) else None
        if isinstance(trace_id, str) and not is_text((trace_id,)):
            raise ImportFailed(f"trace {index}: trace_id {show(trace_id)} holds a lone surrogate (an unpaired "
                               "\\ud800-\\udfff escape), which is not text")
    return result


def _convert(files: list[Upload], fmt: str | None, content_policy: ContentPolicy, max_bytes: int) -> ImportResult:
    """Each file to the format that claims it as a companion, or that it is (forced, else detected); then every
    format converts what the upload holds of it, in the registry's order."""
    forced = BY_NAME[fmt] if fmt else None
    batches = {f.name: Batch(max_bytes=max_bytes) for f in REGISTRY}
    for upload in files:
        owner = next((f for f in REGISTRY if f.companion(upload)), None)
        if owner is not None:
            batches[owner.name].companions.append(upload)
            continue
        records, problem = (None, None) if forced is not None and not forced.parsed else _records(upload.data)
        kind = forced or BY_NAME[detect(records)]
        if kind.parsed and problem is not None:
            raise ImportFailed(f"{upload.source}: {problem}")
        if kind.parsed and records is None:
            raise ImportFailed(f"{upload.source}: not JSON or JSON Lines")
        batches[kind.name].documents.append((upload, records))
    result = ImportResult()
    for format_ in REGISTRY:
        batch = batches[format_.name]
        if batch.documents or batch.companions:
            batch.merge(result, format_.convert(batch, content_policy))
    return result
