-- Issue 31: pairwise review. A queue of kind `pairwise` (its spec's "kind"; queues made before are of kind `events`)
-- holds pairs of rollouts of one group instead of events, and its reviewers answer which rollout is better. Items
-- are handed out through queue_assignments and settled through queue_adjudications as events are (an adjudication's
-- `label` holds the final choice). Keys are made by the app (a DuckLake catalog takes no constraint).

-- The pairs of a pairwise queue, in the order reviewers get them; item_id is the position from 1. Which trace is `a`
-- was drawn (seeded), so neither rollout is favoured by its side.
CREATE TABLE queue_pairs (
    queue_id  VARCHAR NOT NULL,
    item_id   INTEGER NOT NULL,
    group_key VARCHAR NOT NULL,   -- the value of the queue's `by` (task_id, system or topology) both traces share
    trace_a   VARCHAR NOT NULL,
    trace_b   VARCHAR NOT NULL
);

-- A reviewer's choice on a pair: append-only versions, the current one the highest (as labels are kept).
CREATE TABLE pair_choices (
    queue_id          VARCHAR NOT NULL,
    item_id           INTEGER NOT NULL,
    reviewer          VARCHAR NOT NULL,
    version           INTEGER NOT NULL,
    choice            VARCHAR NOT NULL,  -- 'a', 'b' or 'tie'
    reason            VARCHAR NOT NULL,
    deciding_side     VARCHAR,           -- 'a' or 'b': the trace holding the deciding event; NULL when none is named
    deciding_event    VARCHAR,           -- an event id of that trace, checked to exist when saved
    client_request_id VARCHAR,           -- a retried save with the same id makes no new version
    created_at        TIMESTAMP NOT NULL
);
