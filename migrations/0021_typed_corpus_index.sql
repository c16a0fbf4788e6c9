-- Issue 30: the corpus pages filter, sort and chart on what each trace's rewards JSON and its audit findings hold;
-- read from there, every such view scanned every trace's JSON or every finding, and joined every trace to its
-- analysis. These tables keep it typed, made again by every write of a trace or its analysis (app/store/traces.py
-- index_traces), deleted with the trace: a row per trace with the trace list's sort keys, its rewards and, once
-- analysed, its findings by rule; and a row per trace and reward channel. Both are filled here for the traces
-- already stored, as index_traces fills them.

CREATE TABLE trace_measures (
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
    rules               MAP(VARCHAR, INTEGER)  -- rule -> findings, the rules with any
);

CREATE TABLE trace_rewards (
    trace_id VARCHAR NOT NULL,
    channel  VARCHAR NOT NULL,
    value    DOUBLE NOT NULL
);

INSERT INTO trace_measures
SELECT t.trace_id, t.task_id, t.system, t.topology, t.n_events, t.n_edges, t.n_agents, t.tokens, t.wall_clock_s,
       t.ingested_at, m.critical_path_steps, m.parallelism_speedup, m.max_concurrency, m.errors, m.warnings,
       m.infos, TRY_CAST(t.rewards AS MAP(VARCHAR, DOUBLE)),
       CASE WHEN m.trace_id IS NOT NULL THEN coalesce(f.rules, MAP {}::MAP(VARCHAR, INTEGER)) END
FROM traces t
LEFT JOIN trace_metrics m ON m.trace_id = t.trace_id AND m.ingested_at = t.ingested_at
LEFT JOIN (SELECT trace_id, map(list(rule ORDER BY rule), list(n ORDER BY rule)) AS rules
           FROM (SELECT trace_id, rule, count(*)::INTEGER AS n FROM audit_findings GROUP BY ALL)
           GROUP BY trace_id) f ON f.trace_id = t.trace_id;

INSERT INTO trace_rewards (trace_id, channel, value)
SELECT * FROM (SELECT trace_id, unnest(map_keys(r)) AS channel, unnest(map_values(r)) AS value
               FROM (SELECT trace_id, TRY_CAST(rewards AS MAP(VARCHAR, DOUBLE)) AS r FROM traces))
WHERE value IS NOT NULL;
