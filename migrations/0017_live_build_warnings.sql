-- Issue 11: what the importer could not map when it built a live trace (unknown operations, spans whose parent
-- never arrived, ...), kept with the build as a file import's answer carries it, so no span is left out without
-- a word. NULL until a build; rows before this migration were built without keeping them.

ALTER TABLE live_traces ADD COLUMN build_warnings JSON; -- the last build's importer warnings, a JSON array of text
