-- Issue 30: a page of the ingest log parsed each receipt's whole lists of trace ids (an upload of 1,000 traces names
-- 1,000) to show a few of them and count them. A receipt now keeps, beside each list, how many it names and its first
-- 100 ids (app/store/ingest_log.py LISTED), which the page reads instead. The table is made again with them (as 0016
-- made it), the rows copied and the six filled from their lists.

CREATE TABLE ingest_log_0026 (
    id             VARCHAR NOT NULL,   -- random, for links
    received_at    TIMESTAMP NOT NULL, -- UTC
    endpoint       VARCHAR NOT NULL,   -- e.g. 'POST /v1/traces', 'POST /api/traces', 'orchestrace import'
    format         VARCHAR NOT NULL,   -- e.g. 'otlp/protobuf', 'otlp/json', 'openai_agents', 'orchestrace'
    unit           VARCHAR NOT NULL,   -- what `received` counts: 'spans', 'records' or 'traces'
    received       INTEGER NOT NULL,
    used           INTEGER NOT NULL,
    duplicates     INTEGER NOT NULL,   -- already received before (exporter retries): nothing to add
    skipped        INTEGER NOT NULL,   -- refused or not usable, see reasons
    reasons        JSON NOT NULL,      -- [{"reason": ..., "count": n}] for skipped items, and importer warnings
    created        JSON NOT NULL,      -- trace ids stored for the first time
    extended       JSON NOT NULL,      -- trace ids that grew or were replaced
    repeated       JSON NOT NULL,      -- trace ids of items that had arrived before
    status         INTEGER NOT NULL,   -- the HTTP status answered (the CLI: 200 or the refusal's)
    error          VARCHAR,            -- the refusal, when the whole receipt was refused
    created_count  INTEGER NOT NULL,   -- this and the next two: how many ids each list names
    extended_count INTEGER NOT NULL,
    repeated_count INTEGER NOT NULL,
    created_head   JSON NOT NULL,      -- this and the next two: each list's first 100 ids
    extended_head  JSON NOT NULL,
    repeated_head  JSON NOT NULL
);
INSERT INTO ingest_log_0026
SELECT *, json_array_length(created), json_array_length(extended), json_array_length(repeated),
       to_json(list_slice(created::VARCHAR[], 1, 100)), to_json(list_slice(extended::VARCHAR[], 1, 100)),
       to_json(list_slice(repeated::VARCHAR[], 1, 100))
FROM ingest_log;
DROP TABLE ingest_log;
ALTER TABLE ingest_log_0026 RENAME TO ingest_log;
