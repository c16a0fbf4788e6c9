-- Issue 15: a large trace is drawn as bins per lane and time bucket, a window at a time. Which lane shows each
-- event (a tool's answer sits on its caller's lane) takes a join over all events and edges; these tables keep
-- it per trace, filled the first time a large trace is viewed (app/services/graph.py), deleted with the trace.

CREATE TABLE lod_events (
    trace_id VARCHAR NOT NULL,
    seq      INTEGER NOT NULL,
    t        DOUBLE NOT NULL,
    type     VARCHAR NOT NULL,
    owner    VARCHAR NOT NULL
);

CREATE TABLE lod_edges (
    trace_id  VARCHAR NOT NULL,
    type      VARCHAR NOT NULL,
    src_t     DOUBLE NOT NULL,
    src_owner VARCHAR NOT NULL,
    dst_t     DOUBLE NOT NULL,
    dst_owner VARCHAR NOT NULL
);
