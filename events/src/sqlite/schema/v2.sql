-- castlog SQLite schema, version 2 (PRAGMA user_version = 2).
--
-- checkpoints: compact snapshots of projections, one per (cast, projection name). Not part of
--   any chain and never trusted over it: a reader checks that the log still holds `hash` at
--   `seq` and that `version` is the projection's own before using `bytes`, and folds from the
--   first event otherwise. Rows are replaced freely.

CREATE TABLE checkpoints (
    cast_id TEXT    NOT NULL,
    name    TEXT    NOT NULL,
    version INTEGER NOT NULL,
    seq     INTEGER NOT NULL,
    hash    BLOB    NOT NULL,
    bytes   BLOB    NOT NULL,
    PRIMARY KEY (cast_id, name)
) WITHOUT ROWID;
