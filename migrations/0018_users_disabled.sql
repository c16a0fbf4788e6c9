-- Issue 27: accounts are managed while the server runs. An admin may disable an account: its sessions end and its
-- tokens are refused until it is enabled again. NULL: enabled (every account before this migration).

ALTER TABLE users ADD COLUMN disabled_at TIMESTAMP; -- when an admin disabled the account, or NULL
