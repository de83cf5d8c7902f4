-- castlog SQLite schema, version 6 (PRAGMA user_version = 6).
--
-- An event row's id is its address: id = cast_id * 2^32 + seq (the cast's key in `casts` and
-- the 1-based seq, below 2^32). The row id is the primary key, so (cast_id, seq) is unique
-- without the separate UNIQUE index of versions 1-5: a stale writer still cannot take a seq
-- twice (its insert hits the same id), a cast's events are one contiguous range of ids read in
-- order by a range scan, and a cast being appended to grows at the end of its range. Each
-- commit used to write a page of that index besides the table's own pages (about one WAL page
-- in twelve for a step of a driven cast). The cast_id and seq columns stay, as stored facts:
-- reads take the seq from its column, so a row whose seq was changed is named by `verify`.
-- Nothing else changes: every row keeps its bytes, and the triggers are created again.

CREATE TABLE events_v6 (
    id      INTEGER PRIMARY KEY,
    cast_id INTEGER NOT NULL REFERENCES casts(id),
    seq     INTEGER NOT NULL,
    at_ms   INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    v       INTEGER NOT NULL,
    payload BLOB    NOT NULL,
    prev    BLOB    NOT NULL,
    hash    BLOB    NOT NULL
);
INSERT INTO events_v6 (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
    SELECT cast_id * 4294967296 + seq, cast_id, seq, at_ms, kind, v, payload, prev, hash
    FROM events ORDER BY cast_id, seq;
DROP TABLE events;
ALTER TABLE events_v6 RENAME TO events;

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'castlog events are append-only: UPDATE refused');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'castlog events are append-only: DELETE refused');
END;
