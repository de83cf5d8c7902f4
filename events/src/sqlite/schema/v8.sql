-- castlog SQLite schema, version 8 (PRAGMA user_version = 8).
--
-- casts.kind: what the stream is (`castlog_events::stream::StreamKind`: 'cast',
-- 'claims_ledger' or 'engagement'), written once when the stream is created, so no reader
-- tells a stream's kind by its id or its first event again. Rows written before this version
-- get the kind they had then: an id starting with `claims:` names a destination's ledger
-- chain, a stream whose first event is `engagement_started` is an engage run, and anything
-- else is a cast (the same expression reads a read-only older file, `sqlite/open.rs`
-- `LEGACY_KIND`). A row an older castlog inserts while another process runs this one gets the
-- default, 'cast'. Events, hashes and addresses are unchanged: the kind is not in the chain.

ALTER TABLE casts ADD COLUMN kind TEXT NOT NULL DEFAULT 'cast';
UPDATE casts SET kind = CASE
    WHEN substr(cast_id, 1, 7) = 'claims:' THEN 'claims_ledger'
    WHEN (SELECT e.kind FROM events e WHERE e.id = casts.id * 4294967296 + 1)
         = 'engagement_started' THEN 'engagement'
    ELSE 'cast'
END;
