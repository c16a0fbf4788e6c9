"""OTLP/HTTP logs bodies (`POST /v1/logs`): protobuf decoded with the official `opentelemetry-proto` classes into
the OTLP/JSON shape, so one reading serves both encodings (as otlp_protobuf does for traces), and the answer.

An ExportLogsServiceRequest as OTLP/JSON: `resourceLogs[].scopeLogs[].logRecords[]`, each record with
`timeUnixNano`, `observedTimeUnixNano`, `severityNumber`, `severityText`, `body` (an AnyValue), `attributes`,
`eventName`, and hex `traceId` / `spanId` when set.
"""

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from app.ingest.importers.common import ImportFailed, show
from app.ingest.importers.otlp_protobuf import NotProtobuf, _any_value, _attributes


def decode_logs_request(body: bytes) -> dict:
    """An ExportLogsServiceRequest as an OTLP/JSON document."""
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise NotProtobuf(f"body is not a protobuf ExportLogsServiceRequest ({exc})") from None
    return {"resourceLogs": [{
        "resource": {"attributes": _attributes(rl.resource.attributes)},
        "scopeLogs": [{"scope": {"name": sl.scope.name, "version": sl.scope.version},
                       "logRecords": [_record(r) for r in sl.log_records]} for sl in rl.scope_logs],
    } for rl in request.resource_logs]}


def encode_logs_response(rejected_records: int, error_message: str) -> bytes:
    """An ExportLogsServiceResponse; partial_success stays unset when nothing was rejected (the spec)."""
    response = ExportLogsServiceResponse()
    if rejected_records or error_message:
        response.partial_success.rejected_log_records = rejected_records
        response.partial_success.error_message = error_message
    return response.SerializeToString()


def _record(record) -> dict:
    out = {"timeUnixNano": record.time_unix_nano, "observedTimeUnixNano": record.observed_time_unix_nano,
           "severityNumber": record.severity_number, "severityText": record.severity_text,
           "attributes": _attributes(record.attributes)}
    if record.HasField("body"):
        out["body"] = _any_value(record.body)
    if record.event_name:
        out["eventName"] = record.event_name
    if record.trace_id:
        out["traceId"] = record.trace_id.hex()
    if record.span_id:
        out["spanId"] = record.span_id.hex()
    return out


def looks_like_otlp_logs(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("resourceLogs"), list)


def iter_records(doc: dict):
    """(where, resource, scope, record) for every log record of an OTLP/JSON logs document; ImportFailed naming
    where when its structure is not that of an ExportLogsServiceRequest (as iter_spans for traces)."""
    for i, rl in enumerate(doc.get("resourceLogs") or []):
        if not isinstance(rl, dict) or not isinstance(rl.get("scopeLogs", []), list):
            raise ImportFailed(f"resourceLogs[{i}]: {show(rl)} is not an object with a scopeLogs array")
        resource = rl.get("resource") if isinstance(rl.get("resource"), dict) else {}
        for j, sl in enumerate(rl.get("scopeLogs") or []):
            where = f"resourceLogs[{i}].scopeLogs[{j}]"
            if not isinstance(sl, dict) or not isinstance(sl.get("logRecords", []), list):
                raise ImportFailed(f"{where}: {show(sl)} is not an object with a logRecords array")
            scope = sl.get("scope") if isinstance(sl.get("scope"), dict) else {}
            for k, record in enumerate(sl.get("logRecords") or []):
                if not isinstance(record, dict):
                    raise ImportFailed(f"{where}.logRecords[{k}]: {show(record)} is not an object")
                yield f"{where}.logRecords[{k}]", resource, scope, record