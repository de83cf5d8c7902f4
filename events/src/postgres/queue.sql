-- The run queue's tables (see events/src/queue.rs and postgres/queue.rs), the same as the
-- SQLite file's (events/src/sqlite/queue.sql), created with IF NOT EXISTS under an advisory
-- lock by the first command that changes the queue; not part of the log's versioned schema.

CREATE TABLE IF NOT EXISTS castlog_queue (
    cast_id        text    PRIMARY KEY,
    agent          text    NOT NULL,
    state          text    NOT NULL CHECK (state IN ('queued', 'running', 'paused', 'done')),
    holder         text,
    epoch          bigint  NOT NULL DEFAULT 0,
    lease_until_ms bigint  NOT NULL DEFAULT 0,
    submitted_ms   bigint  NOT NULL
);
CREATE INDEX IF NOT EXISTS castlog_queue_takeable
    ON castlog_queue (state, submitted_ms, cast_id);

CREATE TABLE IF NOT EXISTS castlog_slots (
    endpoint       text    NOT NULL,
    slot           integer NOT NULL,
    holder         text    NOT NULL,
    lease_until_ms bigint  NOT NULL,
    PRIMARY KEY (endpoint, slot)
);
