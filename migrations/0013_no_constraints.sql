-- Issue 16: one schema for the DuckDB file and a DuckLake store, which takes no primary key, unique constraint,
-- sequence or index. The tables that had them are rebuilt without them, columns, defaults and rows as they were;
-- the app makes the keys (app/store/keys.py) and keeps them unique inside its write transactions. On a database
-- made by today's 0001-0012, which have none of them, this only copies empty tables; it also gives
-- trace_metrics.analysis_version the NOT NULL that 0007 could not add.

CREATE TABLE traces_0013 (
    trace_id     VARCHAR NOT NULL,
    task_id      VARCHAR NOT NULL,
    system       VARCHAR,
    topology     VARCHAR,
    rewards      JSON NOT NULL,
    costs        JSON NOT NULL,
    metrics      JSON,
    n_events     INTEGER NOT NULL,
    n_edges      INTEGER NOT NULL,
    n_agents     INTEGER NOT NULL,
    t_max        DOUBLE NOT NULL,
    tokens       DOUBLE NOT NULL,
    wall_clock_s DOUBLE NOT NULL,
    ingested_at  TIMESTAMP NOT NULL
);
INSERT INTO traces_0013 SELECT * FROM traces;
DROP TABLE traces;
ALTER TABLE traces_0013 RENAME TO traces;

CREATE TABLE annotations_0013 (
    annotation_id     BIGINT NOT NULL,
    trace_id          VARCHAR NOT NULL,
    event_id          VARCHAR NOT NULL,
    reviewer          VARCHAR NOT NULL,
    version           INTEGER NOT NULL,
    credit            DOUBLE,
    reward_family     VARCHAR,
    credit_unit       VARCHAR,
    subdecision       VARCHAR,
    safety            BOOLEAN NOT NULL DEFAULT false,
    tags              VARCHAR NOT NULL DEFAULT '[]',
    note              VARCHAR NOT NULL DEFAULT '',
    paper             VARCHAR,
    annotator_kind    VARCHAR NOT NULL DEFAULT 'human',
    event_type        VARCHAR,
    agent             VARCHAR,
    role              VARCHAR,
    client_request_id VARCHAR,
    created_at        TIMESTAMP NOT NULL,
    imported_by       VARCHAR,
    counterfactual    VARCHAR,
    stop              VARCHAR,
    queue_id          VARCHAR
);
INSERT INTO annotations_0013 SELECT * FROM annotations;
DROP TABLE annotations;
ALTER TABLE annotations_0013 RENAME TO annotations;

CREATE TABLE reviewers_0013 (
    name       VARCHAR NOT NULL,
    created_at TIMESTAMP NOT NULL
);
INSERT INTO reviewers_0013 SELECT * FROM reviewers;
DROP TABLE reviewers;
ALTER TABLE reviewers_0013 RENAME TO reviewers;

CREATE TABLE papers_0013 (
    key                VARCHAR NOT NULL,
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
INSERT INTO papers_0013 SELECT * FROM papers;
DROP TABLE papers;
ALTER TABLE papers_0013 RENAME TO papers;

CREATE TABLE excluded_0013 (
    record_id        VARCHAR NOT NULL,
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
INSERT INTO excluded_0013 SELECT * FROM excluded;
DROP TABLE excluded;
ALTER TABLE excluded_0013 RENAME TO excluded;

CREATE TABLE paper_tags_0013 (
    tag_id             BIGINT NOT NULL,
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
    created_at         TIMESTAMP NOT NULL
);
INSERT INTO paper_tags_0013 SELECT * FROM paper_tags;
DROP TABLE paper_tags;
ALTER TABLE paper_tags_0013 RENAME TO paper_tags;

CREATE TABLE trace_metrics_0013 (
    trace_id            VARCHAR NOT NULL,
    ingested_at         TIMESTAMP NOT NULL,
    metrics             JSON NOT NULL,
    critical_path_steps INTEGER NOT NULL,
    critical_path_s     DOUBLE NOT NULL,
    parallelism_speedup DOUBLE,
    max_concurrency     INTEGER NOT NULL,
    spawn_depth         INTEGER NOT NULL,
    protocol_overhead   DOUBLE NOT NULL,
    errors              INTEGER NOT NULL,
    warnings            INTEGER NOT NULL,
    infos               INTEGER NOT NULL,
    analysis_version    INTEGER NOT NULL DEFAULT 0
);
INSERT INTO trace_metrics_0013 SELECT * FROM trace_metrics;
DROP TABLE trace_metrics;
ALTER TABLE trace_metrics_0013 RENAME TO trace_metrics;

CREATE TABLE schema_migrations_0013 (
    version    INTEGER NOT NULL,
    name       VARCHAR NOT NULL,
    applied_at TIMESTAMP NOT NULL
);
INSERT INTO schema_migrations_0013 SELECT * FROM schema_migrations;
DROP TABLE schema_migrations;
ALTER TABLE schema_migrations_0013 RENAME TO schema_migrations;

DROP SEQUENCE IF EXISTS annotation_ids;
DROP SEQUENCE IF EXISTS paper_tag_ids;
