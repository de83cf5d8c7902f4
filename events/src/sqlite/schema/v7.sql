-- castlog SQLite schema, version 7 (PRAGMA user_version = 7).
--
-- events_claims: a partial index of the rows of the claim kinds (`castlog_core::claims::
-- EVENT_KINDS`; a test pins this list to it), keyed by the row's address, so the claims
-- ledger reads every claim of every cast, in (cast, seq) order, without reading any other
-- event; a cast's claims are one range of it. Only claim events enter it: an append of any
-- other kind writes no page of it. A query can use it only if its WHERE clause repeats this
-- IN list exactly (`sqlite/kinds.rs` builds both from the one list); without the index (a
-- file it was dropped from) the same query reads the table and gives the same rows. Rows and
-- addresses are unchanged.

CREATE INDEX events_claims ON events(id) WHERE kind IN ('post_claimed', 'post_staged', 'post_refused', 'post_outcome_unknown', 'post_resolved', 'post_response_recorded');
