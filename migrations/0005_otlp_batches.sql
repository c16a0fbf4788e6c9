-- OTLP/HTTP export requests received on /v1/traces. An exporter sends a trace's spans in several
-- batches; each batch is kept so the trace can be rebuilt whole whenever more of its spans arrive.

CREATE TABLE otlp_batches (
    otlp_trace_id VARCHAR NOT NULL,   -- the traceId as sent (hex or base64)
    received_at   TIMESTAMP NOT NULL,
    body          JSON NOT NULL       -- the ExportTraceServiceRequest as received
);
