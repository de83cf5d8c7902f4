-- Version 2: the run queue's tables (see events/src/queue.rs and postgres/queue.rs), the same
-- as the SQLite file's (events/src/sqlite/schema/v9.sql). Before this version the first
-- command that changed the queue created them, with the same statements; IF NOT EXISTS (and
-- the trigger looked for first) lets a schema that has them already upgrade unchanged. No
-- event, head or hash refers to them.

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

-- Appends are announced (NOTIFY on a channel named for the schema, `castlog_` and the first
-- 16 hex digits of md5(schema)), so `show --follow` on another machine wakes when an event
-- is committed instead of waiting for its next poll. One notification per appending
-- statement, delivered at commit; a follower still polls, so a lost one only delays it.
CREATE OR REPLACE FUNCTION castlog_announce_append() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('castlog_' || left(md5(TG_TABLE_SCHEMA), 16), '');
    RETURN NULL;
END;
$$;
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_trigger
                   WHERE tgname = 'events_announce' AND tgrelid = 'events'::regclass) THEN
        CREATE TRIGGER events_announce AFTER INSERT ON events
            FOR EACH STATEMENT EXECUTE FUNCTION castlog_announce_append();
    END IF;
END;
$$;

-- The claim events (castlog_core::claims::EVENT_KINDS) across casts, for scan_kinds
-- (postgres/rows.rs, which repeats this condition so the planner can use the index; a test
-- pins the two to the same list): the cost of listing them follows their number, not the
-- log's size. Only those rows are indexed, so other appends pay nothing for it.
CREATE INDEX IF NOT EXISTS events_claims ON events (cast_key, seq)
    WHERE kind IN ('post_claimed', 'post_staged', 'post_refused', 'post_outcome_unknown', 'post_resolved', 'post_response_recorded');
