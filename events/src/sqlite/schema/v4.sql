-- castlog SQLite schema, version 4 (PRAGMA user_version = 4).
--
-- Large blobs are stored as content-defined chunks (see `chunk.rs`): a blob row with
-- chunked = 1 holds the concatenated 32-byte blake3 hashes of its chunks, in order, and each
-- distinct chunk is one row of `chunks`, so a run of text repeated across blobs is stored once.
-- A blob's address is still the hash of its whole content; rows written before version 4 keep
-- their bytes (chunked = 0).

CREATE TABLE chunks (
    id    INTEGER PRIMARY KEY,
    hash  BLOB NOT NULL UNIQUE,
    bytes BLOB NOT NULL
);
ALTER TABLE blobs ADD COLUMN chunked INTEGER NOT NULL DEFAULT 0;
