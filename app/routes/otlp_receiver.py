"""`POST /v1/traces`: the app as the target of an OpenTelemetry OTLP/HTTP JSON exporter.

Exporters send a trace's spans in batches; every batch is kept and the trace is rebuilt whole from
all batches received so far, replacing the previous version.
"""

import json
from datetime import datetime, timezone

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from app.db import Database
from app.deps import DbDep
from app.importers import otlp
from app.importers.common import ImportFailed
from app.ingest import InvalidTraces, problems_of
from app.store import store_traces

router = APIRouter(tags=["otlp"])


def otlp_trace_ids(doc: dict) -> list[str]:
    ids = []
    for resource in doc.get("resourceSpans") or []:
        for scope in resource.get("scopeSpans") or []:
            for span in scope.get("spans") or []:
                if isinstance(span, dict) and span.get("traceId") and span["traceId"] not in ids:
                    ids.append(span["traceId"])
    return ids


def receive(db: Database, doc: dict) -> dict:
    """Keep the batch, rebuild each trace it touches from all its batches, store them (replacing)."""
    if not otlp.looks_like_otlp(doc):
        raise ImportFailed("body is not an OTLP/JSON ExportTraceServiceRequest (no resourceSpans)")
    otlp.import_otlp(doc)  # refuse a malformed batch before keeping it
    ids = otlp_trace_ids(doc)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    with db.transaction() as cur:
        cur.executemany("INSERT INTO otlp_batches VALUES (?, ?, ?)", [[i, now, json.dumps(doc)] for i in ids])
    merged_docs = []
    for trace_hex in ids:
        bodies = db.fetchall("SELECT body FROM otlp_batches WHERE otlp_trace_id = ? ORDER BY received_at", [trace_hex])
        resource_spans = [rs for b in bodies for rs in json.loads(b["body"])["resourceSpans"]]
        merged_docs.append(_only_trace({"resourceSpans": resource_spans}, trace_hex))
    result = otlp.import_otlp({"resourceSpans": [rs for d in merged_docs for rs in d["resourceSpans"]]})
    errors = problems_of(result.traces)
    if errors:
        raise InvalidTraces(errors)
    store_traces(db, result.traces, "replace")
    return {"partialSuccess": {}, "ingested": [t["trace_id"] for t in result.traces], "warnings": result.warnings}


def _only_trace(doc: dict, trace_hex: str) -> dict:
    """The resourceSpans of `doc` keeping only the spans of one trace."""
    out = []
    for resource in doc["resourceSpans"]:
        scopes = []
        for scope in resource.get("scopeSpans") or []:
            spans = [s for s in scope.get("spans") or [] if s.get("traceId") == trace_hex]
            if spans:
                scopes.append({**scope, "spans": spans})
        if scopes:
            out.append({**resource, "scopeSpans": scopes})
    return {"resourceSpans": out}


@router.post("/v1/traces")
async def export_traces(request: Request, db: DbDep):
    """OTLP/HTTP JSON (Content-Type: application/json), as an OpenTelemetry exporter sends it."""
    if "json" not in request.headers.get("content-type", ""):
        raise HTTPException(415, "send OTLP/HTTP with Content-Type: application/json (protobuf is not accepted)")
    try:
        doc = json.loads(await request.body())
    except ValueError as exc:
        raise HTTPException(400, f"body is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise HTTPException(400, "body must be a JSON object (an ExportTraceServiceRequest)")
    return await run_in_threadpool(receive, db, doc)
