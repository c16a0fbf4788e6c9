-- Issue 30: a live trace's parts are stored zlib-compressed. A 512-span batch's part is some 300 KB of JSON text,
-- and writing it (its insert and the commit's flush) was a third of the batch's receipt; compressed, it is a sixth
-- of that. The body column becomes a BLOB: zlib data (first byte 'x'), or, for rows stored before, the JSON text as
-- it was (first byte '{' or '[').

CREATE TABLE live_parts_0025 (
    source          VARCHAR NOT NULL,   -- 'otlp', 'openai_agents', 'otlp_created', or a coding CLI's
    source_trace_id VARCHAR NOT NULL,   -- the exporter's trace id (OTLP: 32 hex digits)
    received_at     TIMESTAMP NOT NULL,
    body            BLOB NOT NULL       -- the part's JSON text (see 0008), zlib-compressed
);
INSERT INTO live_parts_0025 SELECT source, source_trace_id, received_at, encode(body::VARCHAR) FROM live_parts;
DROP TABLE live_parts;
ALTER TABLE live_parts_0025 RENAME TO live_parts;
