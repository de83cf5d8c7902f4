-- castlog PostgreSQL schema, version 1 (castlog_meta.schema_version = 1).
--
-- The same tables and rules as the SQLite schema (see `events/src/sqlite/schema/`), in
-- PostgreSQL's types; a cast copied between the two keeps every byte and hash.
--
-- castlog_meta: one row, the schema version applied (PostgreSQL has no `user_version`).
-- casts: one row per cast; the only mutable table (its head moves on every append).
--   head_seq/head_hash anchor the tail of the chain, so a truncated tail is detectable.
--   parent_* name the fork point of a recast (all NULL otherwise). A new column (a stream's
--   kind, say) is added here by the next version's script with ALTER TABLE.
-- events: the chains. The primary key (cast_key, seq) is the optimistic-concurrency guard:
--   a stale writer cannot take a seq twice. payload holds the exact bytes that were hashed;
--   prev and hash are 32-byte digests. Append-only: the triggers below refuse UPDATE,
--   DELETE and TRUNCATE of events, and DELETE of a cast's row.
-- blobs: content-addressed texts (prompts, context entry bodies), keyed by their blake3
--   digest. PostgreSQL compresses and moves large values out of line itself (TOAST), so
--   blobs are stored whole, not as the SQLite log's content-defined chunks.
-- checkpoints: caches (projection checkpoints and state snapshots `state@<seq>`, names in
--   bytewise order so they sort as seqs, whatever the database's collation), never
--   trusted over the chain; rows are replaced freely.

CREATE TABLE castlog_meta (
    schema_version integer NOT NULL
);
INSERT INTO castlog_meta (schema_version) VALUES (0);

CREATE TABLE casts (
    id          bigserial PRIMARY KEY,
    cast_id     text      NOT NULL UNIQUE,
    head_seq    bigint    NOT NULL,
    head_hash   bytea     NOT NULL,
    parent_cast text,
    parent_seq  bigint,
    parent_hash bytea,
    created_ms  bigint    NOT NULL,
    -- The stream's kind (events::stream): cast, claims_ledger or engagement, set when the
    -- stream is created and never changed.
    kind        text      NOT NULL DEFAULT 'cast'
);

CREATE TABLE events (
    cast_key bigint  NOT NULL,
    seq      bigint  NOT NULL CHECK (seq >= 1),
    at_ms    bigint  NOT NULL,
    kind     text    NOT NULL,
    v        integer NOT NULL,
    payload  bytea   NOT NULL,
    prev     bytea   NOT NULL,
    hash     bytea   NOT NULL,
    PRIMARY KEY (cast_key, seq)
);

CREATE FUNCTION castlog_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'castlog % are append-only: % refused', TG_TABLE_NAME, TG_OP;
END;
$$;

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION castlog_refuse_change();
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION castlog_refuse_change();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION castlog_refuse_change();
CREATE TRIGGER casts_no_delete BEFORE DELETE ON casts
    FOR EACH ROW EXECUTE FUNCTION castlog_refuse_change();

CREATE TABLE blobs (
    hash  bytea PRIMARY KEY,
    bytes bytea NOT NULL
);

CREATE TABLE checkpoints (
    cast_id text    NOT NULL,
    name    text    COLLATE "C" NOT NULL,
    version integer NOT NULL,
    seq     bigint  NOT NULL,
    hash    bytea   NOT NULL,
    bytes   bytea   NOT NULL,
    PRIMARY KEY (cast_id, name)
);
