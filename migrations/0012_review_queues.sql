-- Review queues (issue 14): an admin hands out events to label. Keys are made by the app (no sequences,
-- primary keys or unique constraints: a DuckLake catalog takes none of them).

CREATE TABLE queues (
    queue_id   VARCHAR NOT NULL,   -- 'q-' and 12 hex digits
    name       VARCHAR NOT NULL,
    spec       JSON NOT NULL,      -- filter, sample, fields, required, reviewers, overlap, blind, as created
    created_by VARCHAR,            -- the admin's account (NULL in open single-user mode)
    created_at TIMESTAMP NOT NULL
);

-- The events of a queue, in the order reviewers get them; item_id is the position from 1.
CREATE TABLE queue_items (
    queue_id VARCHAR NOT NULL,
    item_id  INTEGER NOT NULL,
    trace_id VARCHAR NOT NULL,
    event_id VARCHAR NOT NULL
);

-- Which reviewer `next` gave which item: an item goes to at most `overlap` reviewers, never twice to one.
CREATE TABLE queue_assignments (
    queue_id    VARCHAR NOT NULL,
    item_id     INTEGER NOT NULL,
    reviewer    VARCHAR NOT NULL,
    assigned_at TIMESTAMP NOT NULL
);

-- An admin's final label on an item the reviewers disagreed on, with what it resolved.
CREATE TABLE queue_adjudications (
    queue_id    VARCHAR NOT NULL,
    item_id     INTEGER NOT NULL,
    adjudicator VARCHAR NOT NULL,
    label       JSON NOT NULL,     -- the final values of the rubric's fields
    resolved    JSON NOT NULL,     -- the reviewers' labels it resolved: [{reviewer, version, annotation_id}]
    note        VARCHAR NOT NULL DEFAULT '',
    created_at  TIMESTAMP NOT NULL
);
