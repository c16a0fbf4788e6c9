-- Issue 30: the corpus pages filter, sort and chart on what each trace's rewards JSON and its audit findings hold;
-- read from there, every such view scanned every trace's JSON or every finding. These tables keep it typed, made
-- again by every write of a trace or its analysis (app/store/traces.py index_traces), deleted with the trace:
-- a row per trace and reward channel (as the JSON reads as a map of doubles), and a row per analysed trace with its
-- severity totals and its findings by rule. Here they are filled for the traces already stored.

CREATE TABLE trace_rewards (
    trace_id VARCHAR NOT NULL,
    channel  VARCHAR NOT NULL,
    value    DOUBLE NOT NULL
);

CREATE TABLE trace_audits (
    trace_id VARCHAR NOT NULL,
    errors   INTEGER NOT NULL,
    warnings INTEGER NOT NULL,
    infos    INTEGER NOT NULL,
    rules    MAP(VARCHAR, INTEGER) NOT NULL  -- rule -> findings, the rules with any
);

INSERT INTO trace_rewards (trace_id, channel, value)
SELECT * FROM (SELECT trace_id, unnest(map_keys(r)) AS channel, unnest(map_values(r)) AS value
               FROM (SELECT trace_id, TRY_CAST(rewards AS MAP(VARCHAR, DOUBLE)) AS r FROM traces))
WHERE value IS NOT NULL;

INSERT INTO trace_audits (trace_id, errors, warnings, infos, rules)
SELECT m.trace_id, m.errors, m.warnings, m.infos, coalesce(f.rules, MAP {}::MAP(VARCHAR, INTEGER))
FROM trace_metrics m LEFT JOIN (
    SELECT trace_id, map(list(rule ORDER BY rule), list(n ORDER BY rule)) AS rules
    FROM (SELECT trace_id, rule, count(*)::INTEGER AS n FROM audit_findings GROUP BY ALL)
    GROUP BY trace_id) f ON f.trace_id = m.trace_id;
