-- Stored metrics and findings record the version of the analysis that made them
-- (app/analysis.py ANALYSIS_VERSION). Changing a metric or an audit rule bumps it, and each trace is
-- analysed again the next time a page or the CLI needs it; rows from before this column are version 0.
-- DuckDB 1.5 adds no column with a constraint ("ADD COLUMN ... NOT NULL DEFAULT 0") and a DuckLake catalog
-- cannot SET NOT NULL afterwards: 0013 rebuilds the table with the column NOT NULL.
ALTER TABLE trace_metrics ADD COLUMN analysis_version INTEGER DEFAULT 0;
