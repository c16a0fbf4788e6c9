-- Stored metrics and findings record the version of the analysis that made them
-- (app/analysis.py ANALYSIS_VERSION). Changing a metric or an audit rule bumps it, and each trace is
-- analysed again the next time a page or the CLI needs it; rows from before this column are version 0.
ALTER TABLE trace_metrics ADD COLUMN analysis_version INTEGER NOT NULL DEFAULT 0;
