-- The paper pool and the exclusion log, stored as the text of their CSV cells so an export
-- reproduces the published files; `position` keeps the import order. Reviewers' tags are a
-- separate append-only table: an import never touches them.

CREATE TABLE papers (
    key                VARCHAR NOT NULL,  -- unique
    position           INTEGER NOT NULL,
    title              VARCHAR NOT NULL,
    first_author       VARCHAR NOT NULL,
    affiliation        VARCHAR NOT NULL,
    year               VARCHAR NOT NULL,
    arxiv_id           VARCHAR NOT NULL,
    venue              VARCHAR NOT NULL,
    url                VARCHAR NOT NULL,
    category           VARCHAR NOT NULL,
    is_rl              VARCHAR NOT NULL,
    reward_type        VARCHAR NOT NULL,
    credit_granularity VARCHAR NOT NULL,
    orchestration_form VARCHAR NOT NULL,
    scenario           VARCHAR NOT NULL,
    is_core            VARCHAR NOT NULL,
    one_liner          VARCHAR NOT NULL,
    verified           VARCHAR NOT NULL,
    notes              VARCHAR NOT NULL,
    imported_at        TIMESTAMP NOT NULL
);

CREATE TABLE excluded (
    record_id        VARCHAR NOT NULL,  -- unique
    position         INTEGER NOT NULL,
    source           VARCHAR NOT NULL,
    query_family     VARCHAR NOT NULL,
    screening_label  VARCHAR NOT NULL,
    identifier       VARCHAR NOT NULL,
    url              VARCHAR NOT NULL,
    date_screened    VARCHAR NOT NULL,
    stage            VARCHAR NOT NULL,
    exclusion_reason VARCHAR NOT NULL,
    imported_at      TIMESTAMP NOT NULL
);

-- One version of a reviewer's tags on a paper; NULL means "as the pool says".
CREATE TABLE paper_tags (
    tag_id             BIGINT NOT NULL,  -- unique; app/store/keys.py
    key                VARCHAR NOT NULL,
    reviewer           VARCHAR NOT NULL,
    version            INTEGER NOT NULL,
    category           VARCHAR,
    is_rl              VARCHAR,
    reward_type        VARCHAR,
    credit_granularity VARCHAR,
    orchestration_form VARCHAR,
    scenario           VARCHAR,
    is_core            VARCHAR,
    verified           VARCHAR,
    note               VARCHAR NOT NULL DEFAULT '',
    created_at         TIMESTAMP NOT NULL  -- (key, reviewer, version) is unique
);
