"""Exporters' endpoints: `POST /v1/traces` and `POST /v1/logs` (OTLP/HTTP, protobuf or JSON) and `POST /v1/traces/ingest` (the
OpenAI Agents SDK's own `BackendSpanExporter`). Batches of one trace are merged by app.live, under the server's
content policy; every receipt, refused ones too, goes to the ingest log."""

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.domain.jsontext import first_problem
from app.domain.refusals import status_of
from app.ingest import log as ingest_log
from app.ingest.documents import (
    MAX_JSON_VALUES,
    DocumentError,
    TooLarge,
    TooManyValues,
    fast_loads,
    json_values,
    strict_loads,
)
from app.ingest.importers.common import ImportFailed
from app.ingest.importers.otlp_logs import (
    decode_logs_request,
    encode_logs_response,
    looks_like_otlp_logs,
)
from app.ingest.importers.otlp_protobuf import (
    NotProtobuf,
    decode_request,
    encode_response,
)
from app.ingest.log import Receipt
from app.services.live import StoredTrace
from app.store.gcpause import paused_gc
from app.web.access import Reviewer, replace_refusal
from app.web.apidoc import (
    BINARY,
    COUNT,
    DOCUMENT_ERROR,
    OBJECT,
    READ_REFUSALS,
    TEXT,
    TEXTS,
    object_schema,
    reply,
)
from app.web.deps import DbDep, LiveDep, SettingsDep
from app.web.limits import UnsupportedEncoding, decode_content

router = APIRouter(tags=["otlp"])

PROTOBUF = "application/x-protobuf"
OTLP_MEDIA_TYPES = {PROTOBUF: "otlp/protobuf", "application/protobuf": "otlp/protobuf",
                    "application/json": "otlp/json"}
MAX_MESSAGE_CHARS = 2000
# What an exporter's request may meet besides READ_REFUSALS.
REFUSALS = READ_REFUSALS | {
    400: reply("the body cannot be decoded (or the Host is not served here)", DOCUMENT_ERROR),
    403: reply("a cross-site request, a role that may not write, or a batch that would replace a stored, complete "
               "trace from a caller who is not an admin"),
    413: reply("the body, or what it decompresses to, is larger than the server's limit"),
    415: reply("a Content-Type or Content-Encoding this endpoint does not take"),
}
ENCODED = "optionally gzip- or deflate-compressed (Content-Encoding)"


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


def decoded(body: bytes, request: Request, settings) -> bytes:
    """The request body after its Content-Encoding (gzip, deflate), within the body limit."""
    try:
        return decode_content(body, request.headers.get("content-encoding"), settings.max_body_bytes)
    except UnsupportedEncoding as exc:
        raise HTTPException(415, str(exc)) from None


def _paused(work, receipt: Receipt) -> None:
    """`work(receipt)` with collection paused: a batch decodes into some ten thousand objects without cycles,
    freed when it returns, which would otherwise set off a full collection every few batches (see gcpause)."""
    with paused_gc():
        work(receipt)


def parse_json(body: bytes):
    """An exporter's JSON body, read as uploads are (integers of any size exact; see documents.fast_loads). Its
    batches are kept as sent, so a body that could not be is refused naming where (see jsontext.first_problem): an
    object giving a key twice (the importers would keep the last value without a word), text holding a lone
    surrogate (no column holds it), a number beyond a double, nesting deeper than the store writes."""
    if json_values(body) > MAX_JSON_VALUES:  # counted before anything is built: memory stays bounded
        raise TooManyValues("body")
    doc = fast_loads(body)
    if doc is not None:  # the fast reading steps aside for all of these
        return doc
    try:
        doc = strict_loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise DocumentError(f"body is not JSON ({exc})") from None
    problem = first_problem(doc, kept=True)
    if problem is not None:
        raise DocumentError(f"body: {problem}")
    return doc


async def accept(db, receipt: Receipt, work) -> Receipt:
    """Run `work(receipt)` in a thread; a receipt it takes is logged by app.services.live with what it stores,
    one it refuses is logged here."""
    try:
        try:
            await run_in_threadpool(_paused, work, receipt)
        except ImportFailed as exc:  # the body is not a request of the kind this endpoint decodes
            raise DocumentError(str(exc)) from None
    except (HTTPException, DocumentError, NotProtobuf, TooLarge, StoredTrace) as exc:
        await run_in_threadpool(ingest_log.record, db, receipt.refused(status_of(exc), str(getattr(exc, "detail", exc))))
        raise
    return receipt


def skipped_message(receipt: Receipt) -> str:
    """Why spans were not used, each reason with its count (the OTLP partial_success error_message)."""
    text = "; ".join(f"{n} {receipt.unit}: {reason}" for reason, n in receipt.skipped.items())
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "..."


@router.post("/v1/traces", dependencies=[Reviewer], openapi_extra={"requestBody": {"required": True, "description": (
    f"An OTLP ExportTraceServiceRequest, {ENCODED}"), "content": {
    PROTOBUF: {"schema": BINARY}, "application/protobuf": {"schema": BINARY},
    "application/json": {"schema": object_schema({"resourceSpans": {"type": "array", "items": OBJECT}},
                                                  "resourceSpans")},
}}}, responses=REFUSALS | {200: {
    "description": "ExportTraceServiceResponse, in the request's encoding: unusable spans are counted in "
                   "partial_success, with why",
    "content": {PROTOBUF: {"schema": BINARY}, "application/json": {"schema": object_schema({
        "partialSuccess": object_schema({"rejectedSpans": TEXT, "errorMessage": TEXT}), "ingested": TEXTS,
        "warnings": TEXTS}, "partialSuccess")}}}})
async def export_traces(request: Request, db: DbDep, settings: SettingsDep, live: LiveDep):
    """OTLP/HTTP traces as every OpenTelemetry SDK's exporter sends them: protobuf (the default) or JSON,
    optionally gzip- or deflate-compressed. Unusable spans are counted in `partial_success`. A batch that would
    replace a stored, complete trace is an admin's (403 for others)."""
    kind = OTLP_MEDIA_TYPES.get(media_type(request))
    may_replace = replace_refusal(request) is None
    receipt = Receipt("POST /v1/traces", kind or media_type(request) or "none", "spans")

    def work(receipt: Receipt) -> None:
        if kind is None:
            raise HTTPException(415, f"Content-Type {request.headers.get('content-type')!r} is not OTLP/HTTP; "
                                     f"send {PROTOBUF} or application/json")
        data = decoded(body, request, settings)
        doc = decode_request(data) if kind == "otlp/protobuf" else parse_json(data)
        if not isinstance(doc, dict):
            raise DocumentError("body must be a JSON object (an ExportTraceServiceRequest)")
        live.receive_otlp(doc, receipt, settings.content, may_replace)

    body = await request.body()
    await accept(db, receipt, work)
    message = skipped_message(receipt)
    if kind == "otlp/protobuf":
        return Response(encode_response(receipt.skipped_count, message), media_type=PROTOBUF)
    partial = {"rejectedSpans": str(receipt.skipped_count), "errorMessage": message} if receipt.skipped else {}
    return {"partialSuccess": partial, "ingested": receipt.created + receipt.extended, "warnings": receipt.warnings}


@router.post("/v1/logs", dependencies=[Reviewer], openapi_extra={"requestBody": {"required": True, "description": (
    f"An OTLP ExportLogsServiceRequest, {ENCODED}"), "content": {
    PROTOBUF: {"schema": BINARY}, "application/protobuf": {"schema": BINARY},
    "application/json": {"schema": object_schema({"resourceLogs": {"type": "array", "items": OBJECT}},
                                                  "resourceLogs")},
}}}, responses=REFUSALS | {200: {
    "description": "ExportLogsServiceResponse, in the request's encoding: records not used are counted in "
                   "partial_success, with why",
    "content": {PROTOBUF: {"schema": BINARY}, "application/json": {"schema": object_schema({
        "partialSuccess": object_schema({"rejectedLogRecords": TEXT, "errorMessage": TEXT}), "ingested": TEXTS,
        "warnings": TEXTS}, "partialSuccess")}}}})
async def export_logs(request: Request, db: DbDep, settings: SettingsDep, live: LiveDep):
    """OTLP/HTTP logs as Claude Code and Codex export them: protobuf or JSON, optionally gzip- or
    deflate-compressed. Their events build one trace per session (Claude Code) or root thread (Codex), growing
    with each batch; retries add nothing. Records no trace uses are counted in `partial_success`, each with why."""
    kind = OTLP_MEDIA_TYPES.get(media_type(request))
    may_replace = replace_refusal(request) is None
    receipt = Receipt("POST /v1/logs", kind or media_type(request) or "none", "records")

    def work(receipt: Receipt) -> None:
        if kind is None:
            raise HTTPException(415, f"Content-Type {request.headers.get('content-type')!r} is not OTLP/HTTP; "
                                     f"send {PROTOBUF} or application/json")
        data = decoded(body, request, settings)
        doc = decode_logs_request(data) if kind == "otlp/protobuf" else parse_json(data)
        if not looks_like_otlp_logs(doc):
            raise DocumentError("body is not an OTLP ExportLogsServiceRequest (no resourceLogs array)")
        live.receive_logs(doc, receipt, settings.content, may_replace)

    body = await request.body()
    await accept(db, receipt, work)
    message = skipped_message(receipt)
    if kind == "otlp/protobuf":
        return Response(encode_logs_response(receipt.skipped_count, message), media_type=PROTOBUF)
    partial = {"rejectedLogRecords": str(receipt.skipped_count), "errorMessage": message} if receipt.skipped else {}
    return {"partialSuccess": partial, "ingested": receipt.created + receipt.extended, "warnings": receipt.warnings}


@router.post("/v1/traces/ingest", dependencies=[Reviewer], openapi_extra={"requestBody": {
    "required": True, "description": f"The Agents SDK's export, {ENCODED}", "content": {
    "application/json": {"schema": object_schema({"data": {"type": "array", "description": (
        "trace and span records; one that is not is skipped and counted")}}, "data")},
}}}, responses=REFUSALS | {
    200: reply("what was received, used, already had, skipped and why", object_schema({
        "received": COUNT, "used": COUNT, "duplicates": COUNT, "skipped": {"type": "array", "items": object_schema(
            {"reason": TEXT, "count": COUNT}, "reason", "count")}, "ingested": TEXTS, "warnings": TEXTS},
        "received", "used", "duplicates", "skipped", "ingested", "warnings")),
    400: reply("the body is not JSON or not an Agents SDK export (or the Host is not served here)",
               DOCUMENT_ERROR)})
async def ingest_agents_export(request: Request, db: DbDep, settings: SettingsDep, live: LiveDep):
    """The OpenAI Agents SDK's `BackendSpanExporter` body, `{"data": [trace and span records]}`: point the
    exporter's endpoint here. Batches of one run merge into one trace; retries add nothing. A batch that would
    replace a stored, complete trace is an admin's (403 for others)."""
    receipt = Receipt("POST /v1/traces/ingest", "openai_agents", "records")
    may_replace = replace_refusal(request) is None
    body = await request.body()

    def work(receipt: Receipt) -> None:
        if media_type(request) != "application/json":
            raise HTTPException(415, "send the Agents SDK export as application/json")
        live.receive_agents(parse_json(decoded(body, request, settings)), receipt, settings.content, may_replace)

    await accept(db, receipt, work)
    return {"received": receipt.received, "used": receipt.used, "duplicates": receipt.duplicates,
            "skipped": [{"reason": reason, "count": n} for reason, n in receipt.skipped.items()],
            "ingested": receipt.created + receipt.extended, "warnings": receipt.warnings}
