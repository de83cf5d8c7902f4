-- castlog SQLite schema, version 10 (PRAGMA user_version = 10).
--
-- Packed values (see events/src/sqlite/pack.rs): from this version on the writer stores large
-- values compressed with zstd. An event payload says it is packed by its first bytes (a zstd
-- frame's; JSON never starts so), so the events table is unchanged. A chunk's and a cache's
-- bytes are arbitrary, so their rows say it in a new column: packed = 1 when the bytes are a
-- zstd frame of the value, 0 when they are the value. Rows written before this version are
-- unpacked and read as they are; no hash changes, since every hash is of the unpacked bytes.
-- The version also keeps builds that cannot unpack from opening a file that packs.

ALTER TABLE chunks ADD COLUMN packed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN packed INTEGER NOT NULL DEFAULT 0;
