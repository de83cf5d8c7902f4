-- castlog SQLite schema, version 3 (PRAGMA user_version = 3).
--
-- blobs becomes a rowid table with a UNIQUE index on the 32-byte hash. In version 1 it was
-- WITHOUT ROWID, so the primary-key B-tree held the blob bytes in its cells and every insert's
-- search read the overflow pages of the cells it compared against; now the index holds only the
-- hashes and the bytes live in the table. Content and addresses are unchanged.

CREATE TABLE blobs_v3 (
    id    INTEGER PRIMARY KEY,
    hash  BLOB NOT NULL UNIQUE,
    bytes BLOB NOT NULL
);
INSERT INTO blobs_v3 (hash, bytes) SELECT hash, bytes FROM blobs;
DROP TABLE blobs;
ALTER TABLE blobs_v3 RENAME TO blobs;
