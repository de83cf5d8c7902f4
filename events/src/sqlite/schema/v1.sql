-- castlog SQLite schema, version 1 (PRAGMA user_version = 1).
--
-- casts: one row per cast; the only mutable table (its head moves on every append).
--   head_seq/head_hash anchor the tail of the chain, so a truncated tail is detectable.
--   parent_* name the fork point of a recast (all NULL otherwise).
-- events: the chains. Append-only: the triggers below abort every UPDATE and DELETE.
--   UNIQUE(cast_id, seq) is the optimistic-concurrency guard: a stale writer cannot take a seq
--   twice. payload holds the exact bytes that were hashed. prev and hash are 32-byte digests.
-- blobs: content-addressed texts (prompts, context entry bodies), keyed by their blake3 digest.

CREATE TABLE casts (
    id          INTEGER PRIMARY KEY,
    cast_id     TEXT    NOT NULL UNIQUE,
    head_seq    INTEGER NOT NULL,
    head_hash   BLOB    NOT NULL,
    parent_cast TEXT,
    parent_seq  INTEGER,
    parent_hash BLOB,
    created_ms  INTEGER NOT NULL
);

CREATE TABLE events (
    cast_id INTEGER NOT NULL REFERENCES casts(id),
    seq     INTEGER NOT NULL,
    at_ms   INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    v       INTEGER NOT NULL,
    payload BLOB    NOT NULL,
    prev    BLOB    NOT NULL,
    hash    BLOB    NOT NULL,
    UNIQUE (cast_id, seq)
);

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'castlog events are append-only: UPDATE refused');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'castlog events are append-only: DELETE refused');
END;

CREATE TABLE blobs (
    hash  BLOB PRIMARY KEY,
    bytes BLOB NOT NULL
) WITHOUT ROWID;
