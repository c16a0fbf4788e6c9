-- Issue 29: one run's spans can arrive under several OTLP trace ids (one trace per runtime message joined by
-- span links, one per agent turn, sub-agents' runs sharing a conversation id). Each live trace's run keys
-- (`trace:<hex>` for a trace its spans link to, `gen_ai.conversation.id:<id>`, `session.id:<id>`) let a build
-- take in every live trace of its run and store them as one trace.

CREATE TABLE live_run_keys (
    source          VARCHAR NOT NULL,
    source_trace_id VARCHAR NOT NULL,
    run_key         VARCHAR NOT NULL
);
