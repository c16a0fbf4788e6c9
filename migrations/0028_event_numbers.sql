-- Issue 30: each event keeps the numbers the analysis reads of it as columns, written with it (app/store/writes.py
-- _extras), so that a read of a trace for the analysis no longer scans and decodes every `extra` (0.4 s of a
-- 1,000,000-event trace's read, as much again to decode). The table is made again with them (as 0015 made it), the
-- rows stored before filled from their `extra`, in the order the reads take them.
--
-- `tokens` is the event's token count as app/domain/metrics.py tokens_of gives it (`tokens` when it is a number,
-- else the sum of `tokens_in` and `tokens_out` that are), when that is an integer a BIGINT holds: json_type names an
-- integer UBIGINT or BIGINT (one beyond 64 bits reads as a DOUBLE); a boolean, string, array or object is no number.
-- Any other count (a float, an integer beyond 64 bits) and an integer `t` beyond a double's exact integers (which
-- `extra` holds) are read from `numbers`, a copy of `extra` kept for those rare events only.

CREATE TABLE events_0028 (
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
    key_order   VARCHAR,
    tokens      BIGINT,  -- the token count when it is an integer of 64 bits; NULL when none, or read from `numbers`
    numbers     JSON     -- `extra` when the columns do not hold the token count or `t` exactly; else NULL
);
INSERT INTO events_0028
SELECT trace_id, seq, event_id, t, t_is_int, type, agent, role, from_agent, to_agent, tool, content_ref, trusted,
       extra, key_order, count,
       CASE WHEN (count IS NULL AND (n OR n_in OR n_out)) OR json_exists(extra, '$.t') THEN extra END
FROM (SELECT *,
             TRY_CAST(CASE WHEN n THEN whole WHEN n_out THEN CASE WHEN n_in THEN whole_in + whole_out ELSE whole_out END
                           WHEN n_in THEN whole_in END AS BIGINT) AS count
      FROM (SELECT *,
                   kinds[1] IN ('UBIGINT', 'BIGINT', 'DOUBLE') AS n,
                   kinds[2] IN ('UBIGINT', 'BIGINT', 'DOUBLE') AS n_in,
                   kinds[3] IN ('UBIGINT', 'BIGINT', 'DOUBLE') AS n_out,
                   CASE WHEN kinds[1] IN ('UBIGINT', 'BIGINT') THEN parts[1]::HUGEINT END AS whole,
                   CASE WHEN kinds[2] IN ('UBIGINT', 'BIGINT') THEN parts[2]::HUGEINT END AS whole_in,
                   CASE WHEN kinds[3] IN ('UBIGINT', 'BIGINT') THEN parts[3]::HUGEINT END AS whole_out
            FROM (SELECT *, json_type(extra, ['$.tokens', '$.tokens_in', '$.tokens_out']) AS kinds,
                         json_extract(extra, ['$.tokens', '$.tokens_in', '$.tokens_out']) AS parts
                  FROM events)))
ORDER BY trace_id, seq;
DROP TABLE events;
ALTER TABLE events_0028 RENAME TO events;
