-- Traces that exporters send in batches (OTLP on /v1/traces, the OpenAI Agents SDK on /v1/traces/ingest)
-- are kept as the parts that brought new spans, so a trace is built from them when it completes, and a
-- retried batch (same span ids) adds nothing. Every receipt, from any endpoint, goes to the ingest log.

CREATE TABLE live_parts (
    source          VARCHAR NOT NULL,   -- 'otlp' or 'openai_agents'
    source_trace_id VARCHAR NOT NULL,   -- the exporter's trace id (OTLP: 32 hex digits)
    received_at     TIMESTAMP NOT NULL,
    body            JSON NOT NULL       -- OTLP: {"resourceSpans": [...]} of new spans; SDK: [records]
);

CREATE TABLE live_items (
    source          VARCHAR NOT NULL,
    source_trace_id VARCHAR NOT NULL,
    item_id         VARCHAR NOT NULL    -- span id (or SDK record id) already received
);

CREATE TABLE live_traces (
    source            VARCHAR NOT NULL,
    source_trace_id   VARCHAR NOT NULL,
    trace_id          VARCHAR NOT NULL, -- the stored trace it builds
    items             INTEGER NOT NULL, -- spans or records received, without repeats
    root_seen         BOOLEAN NOT NULL, -- the root span arrived: the run has ended
    first_received_at TIMESTAMP NOT NULL,
    last_received_at  TIMESTAMP NOT NULL,
    built_at          TIMESTAMP,        -- when the stored trace was last built from the parts
    build_error       VARCHAR           -- why the last build failed, if it did
);

-- Batches that arrived before this migration: each kept whole for every trace it touches (a build reads
-- only the spans of its own trace).
INSERT INTO live_parts SELECT 'otlp', otlp_trace_id, received_at, body FROM otlp_batches;
INSERT INTO live_traces
SELECT 'otlp', otlp_trace_id, 'otlp-' || otlp_trace_id, 0, true, min(received_at), max(received_at), max(received_at), NULL
FROM otlp_batches GROUP BY otlp_trace_id;
DROP TABLE otlp_batches;

CREATE TABLE ingest_log (
    id          VARCHAR NOT NULL,   -- random, for links
    received_at TIMESTAMP NOT NULL, -- UTC
    endpoint    VARCHAR NOT NULL,   -- e.g. 'POST /v1/traces', 'POST /api/traces', 'orchestrace import'
    format      VARCHAR NOT NULL,   -- e.g. 'otlp/protobuf', 'otlp/json', 'openai_agents', 'orchestrace'
    unit        VARCHAR NOT NULL,   -- what `received` counts: 'spans', 'records' or 'traces'
    received    INTEGER NOT NULL,
    used        INTEGER NOT NULL,
    duplicates  INTEGER NOT NULL,   -- already received before (exporter retries): nothing to add
    skipped     INTEGER NOT NULL,   -- refused or not usable, see reasons
    reasons     JSON NOT NULL,      -- [{"reason": ..., "count": n}] for skipped items, and importer warnings
    created     JSON NOT NULL,      -- trace ids stored for the first time
    extended    JSON NOT NULL,      -- trace ids that grew or were replaced
    status      INTEGER NOT NULL,   -- the HTTP status answered (the CLI: 200 or the refusal's)
    error       VARCHAR             -- the refusal, when the whole receipt was refused
);
