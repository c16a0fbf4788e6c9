-- Issue 30: each edge keeps the positions of its ends among its trace's events, written with it
-- (app/store/writes.py _end_positions), so that a read of a trace's edges for the analysis no longer joins them to a
-- GROUP BY of the events (1.9 s of a 1,000,000-event trace's). The table is made again with them (as 0013 made it),
-- the rows stored before filled by that join, in the order the reads take them.

CREATE TABLE edges_0027 (
    trace_id     VARCHAR NOT NULL,
    seq          INTEGER NOT NULL,
    src          VARCHAR NOT NULL,
    dst          VARCHAR NOT NULL,
    type         VARCHAR NOT NULL,
    src_position INTEGER,  -- the `seq` of the event `src` names (the last one of an id given twice, as the analysis
                           -- takes it); NULL when no event of the trace has that id
    dst_position INTEGER   -- the same for `dst`
);
INSERT INTO edges_0027
WITH ids AS (SELECT trace_id, event_id, max(seq) AS position FROM events GROUP BY trace_id, event_id)
SELECT d.trace_id, d.seq, d.src, d.dst, d.type, s.position, t.position
FROM edges d
LEFT JOIN ids s ON s.trace_id = d.trace_id AND s.event_id = d.src
LEFT JOIN ids t ON t.trace_id = d.trace_id AND t.event_id = d.dst
ORDER BY d.trace_id, d.seq;
DROP TABLE edges;
ALTER TABLE edges_0027 RENAME TO edges;
