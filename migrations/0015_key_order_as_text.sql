-- Issue 11: an event's key order is kept as JSON text (an array of key names), as it is read. As a VARCHAR[] every
-- key name of every event went through the insert and the write-ahead log one by one: a third of the SQL time of
-- a bulk upload of many small traces. Rows are copied as they were, the order rewritten by DuckDB's to_json.

CREATE TABLE events_0015 (
    trace_id    VARCHAR NOT NULL,
    seq         INTEGER NOT NULL,
    event_id    VARCHAR NOT NULL,
    t           DOUBLE NOT NULL,
    t_is_int    BOOLEAN NOT NULL,
    type        VARCHAR NOT NULL,
    agent       VARCHAR NOT NULL,
    role        VARCHAR,
    from_agent  VARCHAR,
    to_agent    VARCHAR,
    tool        VARCHAR,
    content_ref VARCHAR,
    trusted     BOOLEAN,
    extra       JSON,
    key_order   VARCHAR             -- JSON array of the event's keys when they differ from columns-then-extra
);
INSERT INTO events_0015 SELECT trace_id, seq, event_id, t, t_is_int, type, agent, role, from_agent, to_agent, tool,
                               content_ref, trusted, extra, to_json(key_order)::VARCHAR FROM events;
DROP TABLE events;
ALTER TABLE events_0015 RENAME TO events;
