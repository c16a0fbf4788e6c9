-- Traces, their events and edges. Events and edges keep `seq`, their position in the
-- ingested document, so a trace exports back in its original order.
-- No primary keys, unique constraints or sequences anywhere (a DuckLake catalog takes none): keys are
-- made and kept unique by the app inside its write transactions (0013 rebuilt the tables of older files).

CREATE TABLE traces (
    trace_id     VARCHAR NOT NULL,  -- unique
    task_id      VARCHAR NOT NULL,
    system       VARCHAR,
    topology     VARCHAR,
    rewards      JSON NOT NULL,
    costs        JSON NOT NULL,
    metrics      JSON,              -- NULL when the trace has no metrics object
    n_events     INTEGER NOT NULL,
    n_edges      INTEGER NOT NULL,
    n_agents     INTEGER NOT NULL,  -- distinct agents, tool_result events not counted
    t_max        DOUBLE NOT NULL,
    tokens       DOUBLE NOT NULL,
    wall_clock_s DOUBLE NOT NULL,
    ingested_at  TIMESTAMP NOT NULL
);

CREATE TABLE events (
    trace_id    VARCHAR NOT NULL,
    seq         INTEGER NOT NULL,
    event_id    VARCHAR NOT NULL,
    t           DOUBLE NOT NULL,
    t_is_int    BOOLEAN NOT NULL,   -- `t` was written as an integer; export writes it back so
    type        VARCHAR NOT NULL,
    agent       VARCHAR NOT NULL,
    role        VARCHAR,
    from_agent  VARCHAR,
    to_agent    VARCHAR,
    tool        VARCHAR,
    content_ref VARCHAR,
    trusted     BOOLEAN,
    extra       JSON,               -- every other property, in document order; NULL when none
    key_order   VARCHAR[]           -- the event's key order when it differs from columns-then-extra
);

CREATE TABLE edges (
    trace_id VARCHAR NOT NULL,
    seq      INTEGER NOT NULL,
    src      VARCHAR NOT NULL,
    dst      VARCHAR NOT NULL,
    type     VARCHAR NOT NULL
);
