-- castlog SQLite schema, version 4 (PRAGMA user_version = 4).
--
-- Large blobs are stored as content-defined chunks (see `chunk.rs`): a blob row with
-- chunked = 1 holds the row ids of its chunks, in order, as 8-byte big-endian integers, and
-- each chunk is one row of `chunks` with its blake3 hash. The writer dedupes chunks through
-- an in-memory map of the chunks it stored, so `chunks` has no hash index (each new chunk
-- would otherwise dirty a random index page in every commit). A blob's address is still the
-- hash of its whole content, checked on read by `verify`; rows written before version 4 keep
-- their bytes (chunked = 0).

CREATE TABLE chunks (
    id    INTEGER PRIMARY KEY,
    hash  BLOB NOT NULL,
    bytes BLOB NOT NULL
);
ALTER TABLE blobs ADD COLUMN chunked INTEGER NOT NULL DEFAULT 0;
