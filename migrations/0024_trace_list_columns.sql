-- Issue 30: a page of the trace list read its rewards, costs and reported metrics back from `traces` and its analysis
-- from `trace_metrics`, a scan of each per view at any page size. trace_measures keeps those three as the trace's row
-- holds them (JSON text), so that a page is read from its rows alone (DuckDB then fetches only the page's rows).
-- The table is made again with them (as 0013 made its tables), its rows copied and the three filled from the traces.

CREATE TABLE trace_measures_0024 (
    trace_id            VARCHAR NOT NULL,
    task_id             VARCHAR NOT NULL,
    system              VARCHAR,
    topology            VARCHAR,
    events              INTEGER NOT NULL,
    edges               INTEGER NOT NULL,
    agents              INTEGER NOT NULL,
    tokens              DOUBLE NOT NULL,
    wall_clock_s        DOUBLE NOT NULL,
    ingested_at         TIMESTAMP NOT NULL,
    critical_path_steps INTEGER,  -- this and the rest of the analysis: NULL until the trace is analysed
    parallelism_speedup DOUBLE,
    max_concurrency     INTEGER,
    errors              INTEGER,
    warnings            INTEGER,
    infos               INTEGER,
    rewards             MAP(VARCHAR, DOUBLE),  -- NULL when the JSON does not read as a map of doubles
    rules               MAP(VARCHAR, INTEGER), -- rule -> findings, the rules with any
    rewards_json        JSON NOT NULL,         -- this and the next two: the trace's row's rewards, costs and metrics
    costs_json          JSON NOT NULL,
    metrics_json        JSON
);

INSERT INTO trace_measures_0024
SELECT x.*, t.rewards, t.costs, t.metrics FROM trace_measures x JOIN traces t ON t.trace_id = x.trace_id;
DROP TABLE trace_measures;
ALTER TABLE trace_measures_0024 RENAME TO trace_measures;
