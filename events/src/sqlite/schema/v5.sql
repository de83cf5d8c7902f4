-- castlog SQLite schema, version 5 (PRAGMA user_version = 5).
--
-- A blob's address is found through `blob_index` (hash -> blob row id) instead of a UNIQUE
-- index on `blobs.hash`. Content addresses are random, so every new blob used to dirty a
-- random page of that index in every commit; `blob_index` is filled in batches instead: the
-- writer inserts a blob row with no index entry, and once enough rows have piled up above
-- `blob_index_upto.upto` it indexes all of them in one sorted insert and moves `upto` to the
-- last. A reader looks a hash up in `blob_index`, then among the few rows above `upto`.
-- The writer dedupes through the index and an in-memory map of the rows above `upto`
-- (re-read whenever another connection has committed), so a hash is still stored once.
-- Blob rows keep their ids (chunk lists and `blob_index` refer to them); content and
-- addresses are unchanged.

CREATE TABLE blobs_v5 (
    id      INTEGER PRIMARY KEY,
    hash    BLOB NOT NULL,
    bytes   BLOB NOT NULL,
    chunked INTEGER NOT NULL DEFAULT 0
);
INSERT INTO blobs_v5 (id, hash, bytes, chunked) SELECT id, hash, bytes, chunked FROM blobs;
DROP TABLE blobs;
ALTER TABLE blobs_v5 RENAME TO blobs;

CREATE TABLE blob_index (
    hash BLOB PRIMARY KEY,
    id   INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO blob_index (hash, id) SELECT hash, id FROM blobs ORDER BY hash;

CREATE TABLE blob_index_upto (upto INTEGER NOT NULL);
INSERT INTO blob_index_upto (upto) SELECT coalesce(max(id), 0) FROM blobs;
