-- Issue 27: a reviewer may skip a queue item (POST /api/queues/{queue_id}/items/{item_id}/skip). The item stays
-- theirs and `next` gives it to them again after every item they have not skipped. NULL: not skipped.

ALTER TABLE queue_assignments ADD COLUMN skipped_at TIMESTAMP; -- UTC, the reviewer's latest skip of the item
