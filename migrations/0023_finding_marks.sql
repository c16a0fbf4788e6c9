-- Issue 32: a reviewer's mark on an audit finding (reviewed, accepted_risk, false_positive) with a note. Rows are
-- versions (append-only; the current mark of a finding is its highest version), keyed by the finding's stable id
-- (app/domain/triage.py finding_id), so a mark outlives the trace's analysis being made again.

CREATE TABLE finding_marks (
    trace_id   VARCHAR NOT NULL,
    finding_id VARCHAR NOT NULL,
    version    INTEGER NOT NULL,
    mark       VARCHAR NOT NULL,
    note       VARCHAR NOT NULL,
    marked_by  VARCHAR,             -- the account or reviewer name; NULL when nobody is named (open mode)
    marked_at  TIMESTAMP NOT NULL   -- UTC
);
