-- castlog SQLite schema, version 6 (PRAGMA user_version = 6).
--
-- An event row's id is its address: id = cast_id * 2^32 + seq (the cast's key in `casts` and
-- the 1-based seq, below 2^32). The row id is the primary key, so (cast_id, seq) is unique
-- without the separate UNIQUE index of versions 1-5: a stale writer still cannot take a seq
-- twice (its insert hits the same id), a cast's events are one contiguous range of ids read in
-- order by a range scan, and a cast being appended to grows at the end of its range. Each
-- commit used to write a page of that index besides the table's own pages (about one WAL page
-- in twelve for a step of a driven cast). The cast_id and seq columns stay, as stored facts:
-- reads take the seq from its column, so a row whose seq was changed is named by `verify`. A
-- CHECK keeps the id and the two columns in agreement, so a writer that does not set the id (a
-- castlog older than this version, still running while another process upgrades the file)
-- is refused instead of writing at an unrelated address.
--
-- Every row is kept. A row that cannot have an address (a cast key outside 1..2^31, a seq
-- outside 1..2^32 or not a whole number) or that repeats a (cast, seq) already placed (the
-- earliest stored copy is placed) is kept apart, under the negative of its old row id, where
-- no cast's range reaches: no read of a cast sees it, and `verify` names it. Rows under a cast
-- key `casts` does not list are kept too (`verify` names them as orphaned): the foreign key to
-- `casts` goes, and a trigger refuses to delete a cast's row instead (castlog never does; the
-- key only guarded against that, and only on connections that enforce foreign keys). The
-- append-only triggers are created again.

CREATE TABLE events_v6 (
    id      INTEGER PRIMARY KEY,
    cast_id INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    at_ms   INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    v       INTEGER NOT NULL,
    payload BLOB    NOT NULL,
    prev    BLOB    NOT NULL,
    hash    BLOB    NOT NULL,
    CHECK (id < 0 OR id = cast_id * 4294967296 + seq)
);
CREATE TEMP TABLE castlog_v6_placed AS
    SELECT min(rowid) AS r FROM events
    WHERE typeof(cast_id) = 'integer' AND cast_id BETWEEN 1 AND 2147483647
      AND typeof(seq) = 'integer' AND seq BETWEEN 1 AND 4294967295
    GROUP BY cast_id, seq;
INSERT INTO events_v6 (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
    SELECT cast_id * 4294967296 + seq, cast_id, seq, at_ms, kind, v, payload, prev, hash
    FROM events WHERE rowid IN (SELECT r FROM castlog_v6_placed) ORDER BY cast_id, seq;
INSERT INTO events_v6 (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
    SELECT -rowid, cast_id, seq, at_ms, kind, v, payload, prev, hash
    FROM events WHERE rowid NOT IN (SELECT r FROM castlog_v6_placed) ORDER BY rowid;
DROP TABLE castlog_v6_placed;
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

CREATE TRIGGER casts_no_delete BEFORE DELETE ON casts
BEGIN
    SELECT RAISE(ABORT, 'castlog casts are never deleted: DELETE refused');
END;
