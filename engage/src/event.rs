//! The engagement context's own event vocabulary: the run's start and end, candidates seen,
//! rejected and qualified, ranking, live source checks, drafts and fidelity verdicts.
//!
//! [`EngageEvent`] is owned here, not by the cast machine: in the log each event is stored as
//! its `kind` string, schema version `v` and the compact JSON of its struct, exactly as when
//! these kinds were part of core's `Event` (so a database written then verifies byte for
//! byte). An engage cast also holds the posting events of the claims ledger (`post_claimed`,
//! `post_staged`, ...), which stay core's: [`EngageRecord`] is either. [`VOCABULARY`] shows the
//! kinds to readers that do not know these types (`show`, `export`, `verify`).

use std::fmt;

use castlog_core::event::{DecodeError, Event, Vocabulary};
use castlog_events::{Pending, Recorded};
use castlog_projections::timeline::{describe as describe_machine, excerpt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A candidate considered by the engagement runner (its canonical turn id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CandidateId(String);

impl CandidateId {
    /// Wraps a turn id.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The turn id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CandidateId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

macro_rules! engage_events {
    ($( $(#[$doc:meta])* $variant:ident($body:ident) = $kind:literal, v $v:literal; )*) => {
        /// One event of the engagement vocabulary. See the module documentation.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub enum EngageEvent {
            $( $(#[$doc])* $variant($body), )*
        }

        impl EngageEvent {
            /// Every kind with its current schema version.
            pub const KINDS: &'static [(&'static str, u16)] = &[ $( ($kind, $v), )* ];

            /// The stored kind string.
            pub fn kind(&self) -> &'static str {
                match self { $( EngageEvent::$variant(_) => $kind, )* }
            }

            /// The schema version written for the event's kind.
            pub fn version(&self) -> u16 {
                match self { $( EngageEvent::$variant(_) => $v, )* }
            }

            /// The payload bytes: compact JSON of the kind's struct.
            pub fn encode(&self) -> Vec<u8> {
                let result = match self { $( EngageEvent::$variant(body) => serde_json::to_vec(body), )* };
                // Serializing plain structs of strings, numbers and `Value`s cannot fail.
                result.unwrap_or_default()
            }

            /// Decodes stored bytes, upcasting older schema versions.
            pub fn decode(kind: &str, v: u16, payload: &[u8]) -> Result<EngageEvent, DecodeError> {
                match kind {
                    $( $kind => {
                        if v > $v {
                            return Err(DecodeError::FutureVersion { kind: kind.to_owned(), v, max: $v });
                        }
                        serde_json::from_slice::<$body>(payload)
                            .map(EngageEvent::$variant)
                            .map_err(|e| DecodeError::Payload {
                                kind: kind.to_owned(),
                                source: castlog_core::event::PayloadCause::new(e),
                            })
                    } )*
                    _ => Err(DecodeError::UnknownKind { kind: kind.to_owned() }),
                }
            }
        }

        $( impl From<$body> for EngageEvent {
            fn from(body: $body) -> EngageEvent { EngageEvent::$variant(body) }
        } )*
        $( impl From<$body> for EngageRecord {
            fn from(body: $body) -> EngageRecord { EngageRecord::Engage(EngageEvent::$variant(body)) }
        } )*
    };
}

engage_events! {
    /// A candidate was considered by the engagement runner.
    CandidateSeen(EngagementCandidateSeen) = "engagement_candidate_seen", v 1;
    /// A candidate was dropped, with the reference's reason string.
    CandidateRejected(EngagementCandidateRejected) = "engagement_candidate_rejected", v 1;
    /// A draft attempt for a candidate ended.
    DraftAttempted(EngagementDraftAttempted) = "engagement_draft_attempted", v 1;
    /// A draft was selected for posting.
    DraftSelected(EngagementDraftSelected) = "engagement_draft_selected", v 1;
    /// An engagement run began (the first event of an engage cast).
    Started(EngagementStarted) = "engagement_started", v 1;
    /// A candidate passed qualification.
    CandidateQualified(EngagementCandidateQualified) = "engagement_candidate_qualified", v 1;
    /// The qualified pool was ranked.
    Ranked(EngagementRanked) = "engagement_ranked", v 1;
    /// A candidate's source message was fetched again and checked.
    SourceChecked(EngagementSourceChecked) = "engagement_source_checked", v 1;
    /// The runtime asked the judge about one draft.
    FidelityJudged(EngagementFidelityJudged) = "engagement_fidelity_judged", v 1;
    /// An engagement run ended.
    Finished(EngagementFinished) = "engagement_finished", v 1;
    /// A scheduled engagement run checked its day's slot.
    ScheduleChecked(EngagementScheduleChecked) = "engagement_schedule_checked", v 1;
}

/// The kind of an engage cast's first event.
pub const STARTED: &str = "engagement_started";

/// One event of an engage cast: the engagement vocabulary's, or a posting event of the claims
/// ledger (core's vocabulary, where posting's rules and ledger live).
#[derive(Debug, Clone, PartialEq)]
pub enum EngageRecord {
    /// An engagement event.
    Engage(EngageEvent),
    /// A posting event (`post_claimed`, `post_staged`, `post_refused`, `post_outcome_unknown`).
    Post(Event),
}

impl From<EngageEvent> for EngageRecord {
    fn from(event: EngageEvent) -> Self {
        EngageRecord::Engage(event)
    }
}

impl From<Event> for EngageRecord {
    fn from(event: Event) -> Self {
        EngageRecord::Post(event)
    }
}

impl EngageRecord {
    /// The stored kind string.
    pub fn kind(&self) -> &'static str {
        match self {
            EngageRecord::Engage(e) => e.kind(),
            EngageRecord::Post(e) => e.kind(),
        }
    }

    /// The event ready to append at `at_ms`.
    pub fn pending(&self, at_ms: u64) -> Pending {
        match self {
            EngageRecord::Engage(e) => Pending {
                at_ms,
                kind: e.kind(),
                v: e.version(),
                payload: e.encode(),
            },
            EngageRecord::Post(e) => Pending::new(at_ms, e),
        }
    }

    /// The kind and payload as text, for a divergence message.
    pub fn render(&self) -> String {
        let pending = self.pending(0);
        format!(
            "{} {}",
            pending.kind,
            String::from_utf8_lossy(&pending.payload)
        )
    }

    /// Decodes a stored event of an engage cast.
    pub fn decode(record: &Recorded) -> Result<EngageRecord, DecodeError> {
        match EngageEvent::decode(&record.kind, record.v, &record.payload) {
            Err(DecodeError::UnknownKind { .. }) => record.event().map(EngageRecord::Post),
            other => other.map(EngageRecord::Engage),
        }
    }
}

/// The engagement vocabulary as readers of any stream see it.
#[derive(Debug, Clone, Copy)]
pub struct EngageVocabulary;

/// The one [`EngageVocabulary`], for a `Contexts` list.
pub const VOCABULARY: EngageVocabulary = EngageVocabulary;

impl Vocabulary for EngageVocabulary {
    fn context(&self) -> &'static str {
        "engagement"
    }

    fn kinds(&self) -> &'static [(&'static str, u16)] {
        EngageEvent::KINDS
    }

    fn describe(&self, kind: &str, v: u16, payload: &[u8]) -> Result<String, DecodeError> {
        EngageEvent::decode(kind, v, payload).map(|e| describe(&e))
    }
}

/// The timeline's line for an engagement event.
pub fn describe(event: &EngageEvent) -> String {
    match event {
        EngageEvent::CandidateSeen(e) => format!("candidate {}", e.candidate),
        EngageEvent::CandidateRejected(e) => {
            format!(
                "candidate {} dropped at {}: {}",
                e.candidate, e.stage, e.reason
            )
        }
        EngageEvent::DraftAttempted(e) => format!(
            "candidate {} draft {}: {}",
            e.candidate, e.attempt, e.outcome
        ),
        EngageEvent::DraftSelected(e) => {
            format!("candidate {} draft {} selected", e.candidate, e.attempt)
        }
        EngageEvent::Started(e) => format!(
            "engagement over {} result(s){}",
            e.results,
            if e.post { ", posting" } else { ", dry run" }
        ),
        EngageEvent::CandidateQualified(e) => {
            format!(
                "candidate {} qualified {} ({})",
                e.candidate, e.question_type, e.stance
            )
        }
        EngageEvent::Ranked(e) => format!("{} candidate(s) ranked", e.order.len()),
        EngageEvent::SourceChecked(e) => format!(
            "candidate {} source {}",
            e.candidate,
            if e.ok {
                "confirmed live"
            } else {
                e.reason.as_str()
            }
        ),
        EngageEvent::FidelityJudged(e) => format!(
            "candidate {} draft {} {}",
            e.candidate,
            e.attempt,
            if e.faithful { "faithful" } else { "unfaithful" }
        ),
        EngageEvent::ScheduleChecked(e) => format!(
            "schedule {} ({}): {}",
            e.slot,
            e.key,
            if e.ok {
                "on schedule"
            } else {
                e.reason.as_str()
            }
        ),
        EngageEvent::Finished(e) => format!(
            "finished: {}{}",
            e.outcome,
            if e.refused.is_empty() {
                String::new()
            } else {
                format!(" ({})", excerpt(&e.refused, 60))
            }
        ),
    }
}

/// The timeline's line for any event of an engage cast.
pub fn describe_record(record: &EngageRecord) -> String {
    match record {
        EngageRecord::Engage(e) => describe(e),
        EngageRecord::Post(e) => describe_machine(e),
    }
}

/// The first event of an engage cast: what the run was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngagementStarted {
    /// Conversation id the input's retrieval results came from (empty if it named none).
    #[serde(default)]
    pub conversation: String,
    /// The effective settings (constants, allowlist, zone), defaults filled in.
    pub settings: Value,
    /// How many raw results the input held.
    pub results: u32,
    /// Whether the run was allowed to post (`--post`); without it nothing reaches a sender.
    #[serde(default)]
    pub post: bool,
    /// The agent, fetcher and sender SPECs, for the record.
    #[serde(default)]
    pub specs: Value,
}

/// A candidate passed qualification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementCandidateQualified {
    /// Candidate (turn id) that qualified.
    pub candidate: CandidateId,
    /// `timed` or `personal`.
    pub question_type: String,
    /// The continuation hook's kind (personal only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_kind: String,
    /// The hook's verbatim evidence (personal only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_evidence: String,
    /// `anticipatory` or `outcome`.
    pub stance: String,
}

/// One ranked candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankedCandidate {
    /// Candidate (turn id) at this rank.
    pub candidate: CandidateId,
    /// Specificity score (higher is more specific); ties keep the recorded order.
    pub score: f64,
}

/// The pool after the history gates, in rank order (ties broken as recorded here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngagementRanked {
    /// Best first.
    pub order: Vec<RankedCandidate>,
}

/// A candidate's source message was fetched again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementSourceChecked {
    /// Candidate (turn id) whose source was fetched.
    pub candidate: CandidateId,
    /// Draft attempt (1-based) the fetch was made before.
    pub attempt: u32,
    /// Whether it passed.
    pub ok: bool,
    /// The failure reason (a `live_source` reason string).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Ids, statuses or timestamps that show why, for the report.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Whether the live text contains the quoted text (when the source returned text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_matched: Option<bool>,
}

/// The runtime's own fidelity check of one draft against its quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementFidelityJudged {
    /// Candidate (turn id) whose draft was judged.
    pub candidate: CandidateId,
    /// Draft attempt (1-based) that was judged.
    pub attempt: u32,
    /// True when the judge found the draft faithful to the quote.
    pub faithful: bool,
    /// The judge's reason, or `judge_error` / `unreadable_verdict`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// A scheduled run (`engage --schedule SEED`) checked its day's slot before doing anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementScheduleChecked {
    /// The day's idempotency key (`engagement:YYYY-MM-DD`).
    pub key: String,
    /// The slot, `YYYY-MM-DD HH:MM EDT|EST`.
    pub slot: String,
    /// The slot's instant, in ms since the Unix epoch.
    pub slot_ms: i64,
    /// Whether an engagement post already went out that day (read from the claims ledger).
    pub already_posted: bool,
    /// Whether the run went ahead.
    pub ok: bool,
    /// Why not: `already_posted_today`, `not_the_planned_day`, `outside_window`,
    /// `before_slot`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// `reason` as a sentence a person reads.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The run ended: its outcome, and why nothing was posted when nothing was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementFinished {
    /// `timed`, `personal` or `skip`.
    pub outcome: String,
    /// Why nothing was posted (`dry_run`, `no_verified_candidate`, `every_draft_rejected`,
    /// `history_exhausted`, a refusal, `send_outcome_unknown`, or a schedule skip:
    /// `before_slot`, `outside_window`, `already_posted_today`), empty when a post was staged.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub refused: String,
    /// Stage that rejected the most candidates, when the run skipped.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skip_stage: String,
    /// The skip's reason sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub skip_reason: String,
    /// An error that ended the run early, as a sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

/// An engagement candidate entered the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngagementCandidateSeen {
    /// Candidate (turn id), as the collect stage names it.
    pub candidate: CandidateId,
    /// The input's record for it (retrieval hit and provenance), as given.
    pub source: Value,
}

/// An engagement candidate was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementCandidateRejected {
    /// Candidate (turn id) that was dropped.
    pub candidate: CandidateId,
    /// Stage that dropped it (`collect`, `verify`, `history`, `live_source`, ...).
    pub stage: String,
    /// Reason code of that stage (a stable word, grouped by in the report).
    pub reason: String,
    /// The detail (ids, timestamps, counts) shown next to the reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A draft attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementDraftAttempted {
    /// Candidate (turn id) drafted for.
    pub candidate: CandidateId,
    /// The attempt (1-based).
    pub attempt: u32,
    /// The draft text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<String>,
    /// `accepted` or the reason it was not.
    pub outcome: String,
}

/// A draft was selected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementDraftSelected {
    /// Candidate (turn id) whose draft is posted.
    pub candidate: CandidateId,
    /// The attempt whose draft won.
    pub attempt: u32,
    /// Text of that draft, as the poster claims it.
    pub draft: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds and versions an older castlog wrote as core's `Event` variants: renaming one
    /// would leave every engage cast in a database undecodable.
    #[test]
    fn the_kinds_are_the_ones_old_databases_hold() {
        let mut kinds: Vec<&str> = EngageEvent::KINDS.iter().map(|(k, _)| *k).collect();
        kinds.sort_unstable();
        assert_eq!(
            kinds,
            [
                "engagement_candidate_qualified",
                "engagement_candidate_rejected",
                "engagement_candidate_seen",
                "engagement_draft_attempted",
                "engagement_draft_selected",
                "engagement_fidelity_judged",
                "engagement_finished",
                "engagement_ranked",
                "engagement_schedule_checked",
                "engagement_source_checked",
                "engagement_started",
            ]
        );
        assert!(EngageEvent::KINDS.iter().all(|(_, v)| *v == 1));
        assert!(
            EngageEvent::KINDS
                .iter()
                .all(|(k, _)| !Event::KINDS.iter().any(|(m, _)| m == k))
        );
    }

    #[test]
    fn stored_bytes_decode_and_are_described() {
        let bytes = br#"{"candidate":"t1","attempt":1,"faithful":false}"#;
        let event = EngageEvent::decode("engagement_fidelity_judged", 1, bytes).unwrap();
        assert_eq!(event.encode(), bytes);
        assert_eq!(describe(&event), "candidate t1 draft 1 unfaithful");
        assert!(matches!(
            EngageEvent::decode("engagement_finished", 2, b"{}"),
            Err(DecodeError::FutureVersion { max: 1, .. })
        ));
        assert!(VOCABULARY.describe("engagement_ranked", 1, b"[]").is_err());
        let record = Recorded {
            cast: castlog_core::id::CastId::new("e"),
            seq: castlog_core::id::Seq::FIRST,
            at_ms: 0,
            kind: "post_staged".into(),
            v: 1,
            payload: br#"{"claim":"c","message_id":"m"}"#.to_vec(),
            prev: castlog_core::id::Digest::ZERO,
            hash: castlog_core::id::Digest::ZERO,
        };
        let decoded = EngageRecord::decode(&record).unwrap();
        assert_eq!(decoded.kind(), "post_staged");
        assert_eq!(describe_record(&decoded), "claim c staged as m");
    }
}
