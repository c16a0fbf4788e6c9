-- Event labels, append-only: every save is a new version row; the current label of
-- (trace_id, event_id, reviewer) is its highest version. Nothing is updated or deleted.
-- The event's type, agent and role are copied at save time so labels of events that later
-- vanish (a replaced or deleted trace) still export whole.

CREATE TABLE annotations (
    annotation_id     BIGINT NOT NULL,  -- unique; app/store/keys.py
    trace_id          VARCHAR NOT NULL,
    event_id          VARCHAR NOT NULL,
    reviewer          VARCHAR NOT NULL,
    version           INTEGER NOT NULL,
    credit            DOUBLE,
    reward_family     VARCHAR,
    credit_unit       VARCHAR,
    subdecision       VARCHAR,
    safety            BOOLEAN NOT NULL DEFAULT false,
    tags              VARCHAR NOT NULL DEFAULT '[]',   -- JSON array of strings
    note              VARCHAR NOT NULL DEFAULT '',
    paper             VARCHAR,
    annotator_kind    VARCHAR NOT NULL DEFAULT 'human',
    event_type        VARCHAR,
    agent             VARCHAR,
    role              VARCHAR,
    client_request_id VARCHAR,
    created_at        TIMESTAMP NOT NULL  -- (trace_id, event_id, reviewer, version) is unique
);

CREATE TABLE reviewers (
    name       VARCHAR NOT NULL,  -- unique
    created_at TIMESTAMP NOT NULL
);
