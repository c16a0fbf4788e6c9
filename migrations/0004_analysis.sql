-- Metrics and audit findings computed per trace (app/metrics.py, app/audit.py), stored so the corpus
-- can be sorted and queried. `ingested_at` records which version of the trace they describe.

CREATE TABLE trace_metrics (
    trace_id            VARCHAR NOT NULL,  -- unique
    ingested_at         TIMESTAMP NOT NULL,
    metrics             JSON NOT NULL,
    critical_path_steps INTEGER NOT NULL,
    critical_path_s     DOUBLE NOT NULL,
    parallelism_speedup DOUBLE,
    max_concurrency     INTEGER NOT NULL,
    spawn_depth         INTEGER NOT NULL,
    protocol_overhead   DOUBLE NOT NULL,
    errors              INTEGER NOT NULL,
    warnings            INTEGER NOT NULL,
    infos               INTEGER NOT NULL
);

CREATE TABLE audit_findings (
    trace_id VARCHAR NOT NULL,
    seq      INTEGER NOT NULL,
    rule     VARCHAR NOT NULL,
    severity VARCHAR NOT NULL,
    message  VARCHAR NOT NULL,
    events   JSON NOT NULL
);
