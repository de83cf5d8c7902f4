-- castlog SQLite schema, version 9 (PRAGMA user_version = 9).
--
-- The run queue's tables (see events/src/queue.rs and sqlite/queue.rs). Before this version
-- the first command that changed the queue created them, with these same statements; IF NOT
-- EXISTS lets a file whose queue a command made already upgrade unchanged. No event, head or
-- hash refers to them, and a read-only older file without them reads as an empty queue.
--
-- castlog_queue: one row per submitted cast. state: queued | running | paused | done.
--   holder and lease_until_ms name the worker holding a running cast and when its lease
--   ends; epoch is bumped by every take, and a leased append checks it in its own
--   transaction (a worker whose cast was taken over cannot append).
-- castlog_slots: an endpoint's concurrency slots (worker --max-inflight SPEC=N): a row per
--   slot held, with its holder and lease; a slot whose lease ended is free.

CREATE TABLE IF NOT EXISTS castlog_queue (
    cast_id        TEXT    PRIMARY KEY,
    agent          TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('queued', 'running', 'paused', 'done')),
    holder         TEXT,
    epoch          INTEGER NOT NULL DEFAULT 0,
    lease_until_ms INTEGER NOT NULL DEFAULT 0,
    submitted_ms   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS castlog_queue_takeable
    ON castlog_queue (state, submitted_ms, cast_id);

CREATE TABLE IF NOT EXISTS castlog_slots (
    endpoint       TEXT    NOT NULL,
    slot           INTEGER NOT NULL,
    holder         TEXT    NOT NULL,
    lease_until_ms INTEGER NOT NULL,
    PRIMARY KEY (endpoint, slot)
);
