"""Reading the traces an importer made, shared by the importer tests."""

from app.domain.validation import validate_trace


def only_trace(result) -> dict:
    """The single trace of an import, checked against the published format."""
    assert len(result.traces) == 1
    trace = result.traces[0]
    assert validate_trace(trace) == []
    return trace


def edges(trace: dict, type_: str) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in trace["edges"] if e["type"] == type_}


def one(items):
    items = list(items)
    assert len(items) == 1, items
    return items[0]


def first_event(trace: dict, agent: str) -> dict:
    return next(e for e in trace["events"] if e["agent"] == agent)


def timeline_pairs(trace: dict) -> set[tuple[str, str]]:
    """The temporal edges IMPORTERS.md asks for: each acting agent's consecutive events (tool results
    belong to no timeline)."""
    timelines: dict[str, list[str]] = {}
    for e in trace["events"]:
        if e["type"] != "tool_result":
            timelines.setdefault(e["agent"], []).append(e["id"])
    return {pair for ids in timelines.values() for pair in zip(ids, ids[1:])}


def otlp_json_of(spans, hex_ids: bool = True) -> dict:
    """Finished SDK spans as the official OTLP encoder writes them, as a JSON document: OTLP/JSON proper
    (hex ids, integer enums), or with hex_ids=False plain protobuf JSON as MessageToDict writes it (base64
    ids, enum names), which the importer accepts too."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc = MessageToDict(encode_spans(spans), use_integers_for_enums=hex_ids)
    if hex_ids:
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = base64.b64decode(span[key]).hex()
    return doc
