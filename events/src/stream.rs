//! Stream kinds: what a chain in the log is, kept as data beside its head.
//!
//! The log holds three kinds of stream, each a hash chain of its own:
//! - [`StreamKind::Cast`]: a run of a loadout, started by `cast_started` or forked from
//!   another cast by `cast_forked` (what `castlog casts` lists);
//! - [`StreamKind::ClaimsLedger`]: a destination's ledger of taken days, only `day_claimed`
//!   events (see `castlog_replay::ledger`);
//! - [`StreamKind::Engagement`]: an engage run, started by `engagement_started`.
//!
//! # How a stream gets its kind
//! A log records the kind once, when the stream is created, and keeps it with the head
//! ([`crate::CastHead::kind`]); nothing reads the stream's id or its events to tell its kind
//! again. The kind is given by the stream's first event ([`StreamKind::opened_by`]): the
//! event vocabulary opens each kind of stream with its own event, so the writer of the first
//! event is the one that says what the stream is. A fork is always a cast. An import takes
//! the kind of the head it is handed (the export formats do not carry it; the codec gives it
//! by the same rule).
//!
//! The kind is not part of the hash chain: the chain recipe (`chain.rs`) covers the events
//! alone, so chains written before kinds were kept verify unchanged.
//!
//! # Storage
//! A log stores [`StreamKind::as_str`] (`cast`, `claims_ledger`, `engagement`, the names
//! `castlog casts --json` prints). The SQLite log keeps it in `casts.kind` (schema v8, which
//! fills it for older rows from what they were then: an id starting with `claims:` is a
//! ledger, a first event `engagement_started` an engagement, anything else a cast). Another
//! backend stores the same text in its stream row and applies [`StreamKind::opened_by`] when
//! it creates a stream.

use std::fmt;

use serde::{Deserialize, Serialize};

/// What kind of stream a chain in the log is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamKind {
    /// A run of a loadout (first event `cast_started`, or a fork).
    #[default]
    Cast,
    /// A destination's ledger of taken days (`day_claimed` events only).
    ClaimsLedger,
    /// An engage run (first event `engagement_started`).
    Engagement,
}

/// The first event kind that opens a claims ledger.
const OPENS_CLAIMS_LEDGER: &str = "day_claimed";
/// The first event kind that opens an engagement.
const OPENS_ENGAGEMENT: &str = "engagement_started";

impl StreamKind {
    /// Every kind, in the order `castlog casts --all` explains them.
    pub const ALL: [StreamKind; 3] = [
        StreamKind::Cast,
        StreamKind::ClaimsLedger,
        StreamKind::Engagement,
    ];

    /// The kind a stream gets when its first event, of kind `first_kind`, is appended.
    pub fn opened_by(first_kind: &str) -> StreamKind {
        match first_kind {
            OPENS_CLAIMS_LEDGER => StreamKind::ClaimsLedger,
            OPENS_ENGAGEMENT => StreamKind::Engagement,
            _ => StreamKind::Cast,
        }
    }

    /// The kind of a stream whose events are `records` (in seq order): what its first event
    /// opens, as [`opened_by`](Self::opened_by) says; a cast for no events.
    pub fn of_records(records: &[crate::Recorded]) -> StreamKind {
        records
            .first()
            .map_or(StreamKind::Cast, |r| StreamKind::opened_by(&r.kind))
    }

    /// The stored name (also the `kind` of a `castlog casts --json` row).
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::Cast => "cast",
            StreamKind::ClaimsLedger => "claims_ledger",
            StreamKind::Engagement => "engagement",
        }
    }

    /// The kind a stored name names, if any.
    pub fn parse(name: &str) -> Option<StreamKind> {
        StreamKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for StreamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for kind in StreamKind::ALL {
            assert_eq!(StreamKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_string(&kind).unwrap(),
                format!("\"{}\"", kind.as_str())
            );
        }
        assert_eq!(StreamKind::parse("claims"), None);
    }

    #[test]
    fn the_first_event_opens_the_kind() {
        assert_eq!(StreamKind::opened_by("cast_started"), StreamKind::Cast);
        assert_eq!(StreamKind::opened_by("cast_forked"), StreamKind::Cast);
        assert_eq!(
            StreamKind::opened_by("day_claimed"),
            StreamKind::ClaimsLedger
        );
        assert_eq!(
            StreamKind::opened_by("engagement_started"),
            StreamKind::Engagement
        );
    }
}
