-- Two questions a label can answer (issue 14): `counterfactual` (had this event not happened, or said something
-- else, would the outcome differ: no / partly / yes / cannot tell) and `stop` (on orchestrator decisions and
-- despawns: was stopping here, or not stopping, right: stop_too_early / right / stop_too_late / cannot tell);
-- and the review queue a label was saved in, if any.

ALTER TABLE annotations ADD COLUMN counterfactual VARCHAR;
ALTER TABLE annotations ADD COLUMN stop VARCHAR;
ALTER TABLE annotations ADD COLUMN queue_id VARCHAR;
