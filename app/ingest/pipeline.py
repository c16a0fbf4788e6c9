"""The one ingest path shared by the API, the CLI and `orchestrace demo`: parse, validate, store."""

from collections.abc import Iterator
from contextlib import nullcontext
from typing import NamedTuple

from app.domain.refusals import Refusal, status_of
from app.domain.validation import Capped, capped, trace_id_error, validate_traces
from app.ingest import log as ingest_log
from app.ingest.documents import DEFAULT_MAX_BYTES, DocumentError, TooLarge, Upload, fast_documents, noting_reads
from app.ingest.importers import convert
from app.ingest.importers.common import KEEP, ContentPolicy, ImportFailed, ImportResult
from app.ingest.log import Receipt
from app.store import analyst
from app.store.db import Database
from app.store.gcpause import paused_gc
from app.store.writes import TracesExist, store_traces

ALREADY_STORED = "already stored (skipped: replace was not asked for)"
MAX_LOGGED_PROBLEMS = 20  # of a refused upload, in the ingest log (the answer lists up to MAX_PROBLEMS)


class Ingested(NamedTuple):
    """What an ingest stored and skipped (trace ids stored already), what the importer could not map, and how many
    events each stored trace has (`events`): what to prepare ahead for the large ones is known without a read."""
    stored: list[str]
    skipped: list[str]
    warnings: list[str]
    events: dict[str, int]


class InvalidTraces(Refusal, ValueError):
    """Some traces in a request break the format; `errors` lists the first MAX_PROBLEMS problems, each with its
    trace and path, and then, if there are more, an entry that counts them."""

    status = 422

    def __init__(self, report: Capped):
        self.errors = listed(report)
        total = len(report.listed) + report.more
        super().__init__(f"{'at least ' if report.at_least else ''}{total:,} problem(s) in the submitted traces")

    def details(self) -> dict:
        return {"errors": self.errors}


def load_uploads(uploads: list[Upload], max_bytes: int, fmt: str | None = None,
                 content_policy: ContentPolicy = KEEP) -> ImportResult:
    """Every trace of every upload (in any supported format), validated; raises DocumentError,
    ImportFailed or InvalidTraces."""
    with paused_gc():
        result = convert(uploads, fmt, content_policy, max_bytes)
        report = capped(_problems(result.traces))
    if report.listed:
        raise InvalidTraces(report)
    result.warnings = capped_texts(result.warnings, "warnings")
    return result


def problems_of(traces: list) -> list[dict]:
    """Validation problems of a batch as a request's answer lists them (see InvalidTraces)."""
    return listed(capped(_problems(traces)))


def listed(report: Capped) -> list[dict]:
    """A report's problems, and past MAX_PROBLEMS one more entry, at the first trace not fully listed, that
    says how many more there are: every reader of the list (the API, the upload page, the CLI) shows it."""
    errors = list(report.listed)
    if report.more:
        last = errors[-1]
        errors.append({"trace": last["trace"], "index": last["index"], "path": "",
                       "message": f"{report.more_text()} (not listed), from this trace on"})
    return errors


def capped_texts(texts: list[str], what: str) -> list[str]:
    """The first MAX_PROBLEMS of a list of messages, then one that counts the rest."""
    report = capped(texts)
    return report.listed + ([report.more_text(what)] if report.more else [])


def _problems(traces: list) -> Iterator[dict]:
    """Validation problems of a batch, lazily, each naming its trace (its id when valid, else its index)."""
    first_index: dict[str, int] = {}
    for index, (trace, problems) in enumerate(zip(traces, validate_traces(traces))):
        label = _label(trace, index)
        for problem in problems:
            yield {"trace": label, "index": index, "path": problem.path, "message": problem.message}
        if label != index:
            first = first_index.setdefault(label, index)
            if first != index:
                yield {"trace": label, "index": index, "path": "trace_id",
                       "message": f"'{label}' appears twice in this request (traces {first} and {index})"}


def _label(trace, index: int):
    trace_id = trace.get("trace_id") if isinstance(trace, dict) else None
    return trace_id if trace_id_error(trace_id) is None else index


def ingest(db: Database, uploads: list[Upload], existing: str = "error", max_bytes: int = DEFAULT_MAX_BYTES,
           fmt: str | None = None, content_policy: ContentPolicy = KEEP,
           endpoint: str = "POST /api/traces") -> Ingested:
    """Parse (or import), validate and store; nothing is stored unless every trace is valid. Importers keep
    the content their sources carried unless `content_policy` is `hash`. The receipt, refused or not, goes to
    the ingest log under `endpoint`."""
    with paused_gc():  # until the parsed traces are freed: no collection walks them (see gcpause)
        ahead = analyst.reading_ahead(uploads[0].data, fast_documents) if len(uploads) == 1 else nullcontext()
        with ahead as sent, noting_reads() as read:
            return _ingest(db, uploads, existing, max_bytes, fmt, content_policy, endpoint, sent, read)


def _ingest(db: Database, uploads: list[Upload], existing: str, max_bytes: int, fmt: str | None,
            content_policy: ContentPolicy, endpoint: str, sent: analyst.Ahead | None,
            read: list[tuple[bytes, list]]) -> Ingested:
    """`sent`: the lone upload's bytes as sent to the analysis worker ahead; `read`: what fast_documents read here."""
    receipt = Receipt(endpoint, fmt or "detected", "traces")
    try:
        result = load_uploads(uploads, max_bytes, fmt, content_policy)
        if sent is not None and len(read) == 1 and read[0][0] is uploads[0].data:
            sent.read_here = read[0][1]  # the worker's pieces are positions in it if these are the traces stored
        read.clear()
        return _store(db, result.traces, result.warnings, existing, receipt)
    except (DocumentError, ImportFailed, InvalidTraces, TracesExist, TooLarge) as exc:
        _log_refused(db, receipt, exc)
        raise


def load_document(db: Database, uploads: list[Upload], max_bytes: int, fmt: str | None = None,
                  content_policy: ContentPolicy = KEEP, endpoint: str = "POST /api/traces") -> ImportResult:
    """load_uploads of one document, whose refusal goes to the ingest log as `ingest` logs it; `store_documents`
    stores many documents loaded so, each loaded apart as `ingest` would (an importer may join what one call
    gives it)."""
    try:
        with paused_gc():
            return load_uploads(uploads, max_bytes, fmt, content_policy)
    except (DocumentError, ImportFailed, InvalidTraces, TooLarge) as exc:
        _log_refused(db, Receipt(endpoint, fmt or "detected", "traces"), exc)
        raise


def store_documents(db: Database, results: list[ImportResult], existing: str = "error", fmt: str | None = None,
                    endpoint: str = "POST /api/traces") -> Ingested:
    """Store the traces of documents loaded apart (load_document) in one write, with one receipt: a folder of
    rollout files stored a file at a time cost a write and the analysis worker's round trip each (50 ms a file).
    Their trace ids must differ (the caller stores a repeated one in a write of its own, after)."""
    receipt = Receipt(endpoint, fmt or "detected", "traces")
    warnings = capped_texts([warning for result in results for warning in result.warnings], "warnings")
    try:
        with paused_gc():
            return _store(db, [trace for result in results for trace in result.traces], warnings, existing, receipt)
    except TracesExist as exc:
        _log_refused(db, receipt, exc)
        raise


def _store(db: Database, traces: list[dict], warnings: list[str], existing: str, receipt: Receipt) -> Ingested:
    """Store loaded traces with their receipt (in the same write) and say what was stored."""
    receipt.received, receipt.warnings = len(traces), warnings

    def log(cur, stored: list[str], before: set[str]) -> None:
        receipt.used = len(stored)
        receipt.created = [i for i in stored if i not in before]
        receipt.extended = [i for i in stored if i in before]
        skipped = before.difference(stored)
        receipt.repeated = [t["trace_id"] for t in traces if t["trace_id"] in skipped]
        if len(stored) < receipt.received:  # set, not added to: a write that lost its commit calls this again
            receipt.skipped[ALREADY_STORED] = receipt.received - len(stored)
        ingest_log.insert(cur, receipt)

    stored, skipped = store_traces(db, traces, existing, then=log)
    counts = {trace["trace_id"]: len(trace["events"]) for trace in traces}
    return Ingested(stored, skipped, warnings, {trace_id: counts[trace_id] for trace_id in stored})


def _log_refused(db: Database, receipt: Receipt, exc: Exception) -> None:
    """The refused receipt of a request, naming its first problems."""
    for problem in getattr(exc, "errors", ())[:MAX_LOGGED_PROBLEMS]:
        where = f"{problem['path']}: " if problem["path"] else ""
        receipt.warnings.append(f"trace {problem['trace']}: {where}{problem['message']}")
    ingest_log.record(db, receipt.refused(status_of(exc), str(exc)))
