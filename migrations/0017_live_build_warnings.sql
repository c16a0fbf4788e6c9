-- Issue 11: what the importer could not map when it built a live trace (unknown operations, spans whose parent
-- never arrived, ...), kept with the build as a file import's answer carries it, so no span is left out without
-- a word. NULL until a build; rows before this migration were built without keeping them.

CREATE TABLE live_traces_0017 (
    source            VARCHAR NOT NULL,
    source_trace_id   VARCHAR NOT NULL,
    trace_id          VARCHAR NOT NULL, -- the stored trace it builds
    items             INTEGER NOT NULL, -- spans or records received, without repeats
    root_seen         BOOLEAN NOT NULL, -- the root span arrived: the run has ended
    first_received_at TIMESTAMP NOT NULL,
    last_received_at  TIMESTAMP NOT NULL,
    built_at          TIMESTAMP,        -- when the stored trace was last built from the parts
    build_error       VARCHAR,          -- why the last build failed, if it did
    build_warnings    JSON              -- the last build's importer warnings, a JSON array of text
);
INSERT INTO live_traces_0017 SELECT source, source_trace_id, trace_id, items, root_seen, first_received_at,
                                    last_received_at, built_at, build_error, NULL FROM live_traces;
DROP TABLE live_traces;
ALTER TABLE live_traces_0017 RENAME TO live_traces;
