-- Issue 11: a receipt names the traces whose items had arrived before (an exporter's retry, an upload of traces
-- already stored and skipped), so a retry is found under its trace. Rows are copied as they were, with none named.

CREATE TABLE ingest_log_0016 (
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
    repeated    JSON NOT NULL,      -- trace ids of items that had arrived before
    status      INTEGER NOT NULL,   -- the HTTP status answered (the CLI: 200 or the refusal's)
    error       VARCHAR             -- the refusal, when the whole receipt was refused
);
INSERT INTO ingest_log_0016 SELECT id, received_at, endpoint, format, unit, received, used, duplicates, skipped,
                                   reasons, created, extended, '[]', status, error FROM ingest_log;
DROP TABLE ingest_log;
ALTER TABLE ingest_log_0016 RENAME TO ingest_log;
