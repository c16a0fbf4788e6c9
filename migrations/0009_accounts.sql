-- Accounts for a shared server: users with a role, browser sessions, API tokens, and the server's secret.
-- Secrets are stored hashed: passwords with argon2, session ids and tokens (random, 256 bits) with SHA-256.

CREATE TABLE users (
    username      VARCHAR NOT NULL,   -- unique (checked by the app under the write lock)
    role          VARCHAR NOT NULL,   -- 'admin', 'reviewer' or 'viewer'
    password_hash VARCHAR NOT NULL,   -- argon2id
    created_at    TIMESTAMP NOT NULL
);

CREATE TABLE sessions (
    session_hash VARCHAR NOT NULL,    -- sha256 of the id in the session cookie
    username     VARCHAR NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    expires_at   TIMESTAMP NOT NULL
);

CREATE TABLE api_tokens (
    token_id     VARCHAR NOT NULL,    -- the public part of the token, for look-up and for listing
    username     VARCHAR NOT NULL,
    name         VARCHAR NOT NULL,
    token_hash   VARCHAR NOT NULL,    -- sha256 of the whole token
    created_at   TIMESTAMP NOT NULL,
    last_used_at TIMESTAMP,
    revoked_at   TIMESTAMP
);

-- The key that signs session cookies and form tokens, made on first start unless ORCHESTRACE_SECRET_KEY is set.
CREATE TABLE app_secrets (
    name  VARCHAR NOT NULL,
    value VARCHAR NOT NULL
);

-- Imported label versions keep their reviewer and times; this says which account imported them.
ALTER TABLE annotations ADD COLUMN imported_by VARCHAR;
