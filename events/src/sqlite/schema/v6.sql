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
-- CHECK keeps the id and the two columns in agreement (and in range), so a writer that does not
-- set the id (a castlog older than this version, still running while another process upgrades
-- the file) is refused instead of writing at an unrelated address.
--
-- Every row is kept, with its values as stored. A row is placed when its cast key and seq are
-- whole numbers in range and every column holds the type the table declares (so no value is
-- converted on the way), the copy with the lowest row id first when a (cast, seq) has several. Any other row (a
-- second copy of a seq, a key or seq no event can have, a value of another type or NULL) is
-- copied verbatim, with its old row id, into `events_apart`, a table without types or
-- constraints that no read of a cast looks at; `verify` names its rows. Rows under a cast key
-- `casts` does not list are placed too (`verify` names them as orphaned): the foreign key to
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
    CHECK (cast_id BETWEEN 1 AND 2147483647 AND seq BETWEEN 1 AND 4294967295
           AND id = cast_id * 4294967296 + seq)
);
CREATE TABLE events_apart (old_rowid, cast_id, seq, at_ms, kind, v, payload, prev, hash);
CREATE TEMP TABLE castlog_v6_placed AS
    SELECT min(rowid) AS r FROM events
    WHERE typeof(cast_id) = 'integer' AND cast_id BETWEEN 1 AND 2147483647
      AND typeof(seq) = 'integer' AND seq BETWEEN 1 AND 4294967295
      AND typeof(at_ms) = 'integer' AND typeof(kind) = 'text' AND typeof(v) = 'integer'
      AND typeof(payload) = 'blob' AND typeof(prev) = 'blob' AND typeof(hash) = 'blob'
    GROUP BY cast_id, seq;
INSERT INTO events_v6 (id, cast_id, seq, at_ms, kind, v, payload, prev, hash)
    SELECT cast_id * 4294967296 + seq, cast_id, seq, at_ms, kind, v, payload, prev, hash
    FROM events WHERE rowid IN (SELECT r FROM castlog_v6_placed) ORDER BY cast_id, seq;
INSERT INTO events_apart (old_rowid, cast_id, seq, at_ms, kind, v, payload, prev, hash)
    SELECT rowid, cast_id, seq, at_ms, kind, v, payload, prev, hash
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
