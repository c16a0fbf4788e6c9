-- orphan_return and cost_mismatch no longer flag the normal ends of imported runs (the root answering
-- `user`, an agent taking over after a handoff) nor LLM-call counts in costs.messages. Stored findings
-- made by the old rules are dropped; every trace is analysed again the next time a page needs it.
DELETE FROM audit_findings;
DELETE FROM trace_metrics;
