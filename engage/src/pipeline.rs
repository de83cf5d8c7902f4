//! The engagement pipeline's pure stages: turn retrieval results into at most one checked
//! follow-up question.
//!
//! The pipeline, one module per stage (reason strings are the reference's, see
//! `engagement-spec.md`):
//! - [`input`]: INPUT.json (results, attested sources, senders, allowlist, settings).
//! - [`collect`]: results → candidates (provenance, role, channel, snowflake time).
//! - [`verify`]: the contradiction sweep over every raw row, de-duplication, then each
//!   candidate against its attested source record.
//! - [`qualify`]: timed window, continuation hook, later-thread assessment.
//! - [`history`]: the repetition gates over the claims ledger (thread, cooldown, similarity,
//!   channel cap) and the post destination.
//! - [`rank`]: specificity ranking.
//! - [`live`]: the verdict on a re-fetched source message.
//! - [`draft`]: agent prompts, the drafter's and judge's replies, the repaste filter.
//! - [`select`]: acceptance of a draft and the skip summary.
//! - [`fingerprint`]: the question simhash.
//! - [`scorecard`]: the fidelity judge's scorecard over fixtures (injection cases included).
//! - [`schedule`]: the daily slot inside 08:00–18:00 New York time (opt-in).
//!
//! Where castlog does better than the reference (each pinned by a test): a negative fidelity
//! verdict vetoes every question type, not only `personal` ([`select::accept`]); the
//! contradiction sweep runs over all raw rows before de-duplication ([`verify`]); the live
//! check compares the message text when the source returns it ([`live::check`]); and the
//! runner ([`crate::runner`]) keeps the report through any error after a claim and
//! never reports "nothing was sent" after a send.

pub mod collect;
pub mod draft;
pub mod fingerprint;
pub mod history;
pub mod input;
pub mod live;
pub mod qualify;
pub mod rank;
pub mod schedule;
pub mod scorecard;
pub mod select;
pub mod verify;

use serde::{Deserialize, Serialize};

pub use input::{Allowlist, DayScope, EngageInput, InputError, Settings, SourceRecord};

/// The kind of a follow-up question. There is no default: an unlabelled candidate cannot be
/// selected (the reference defaulted to `timed`, which slipped past the fidelity veto).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionType {
    /// A follow-up inside the timed window (2 to 7 days).
    Timed,
    /// A continuation of something specific the member said.
    Personal,
}

impl QuestionType {
    /// The wire name (`timed`, `personal`).
    pub fn as_str(self) -> &'static str {
        match self {
            QuestionType::Timed => "timed",
            QuestionType::Personal => "personal",
        }
    }
}

/// One member's own message that may be followed up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The canonical turn id (or `result-N` for a row without provenance).
    pub turn_id: String,
    /// The platform message id (a snowflake).
    pub source_message_id: String,
    /// `actor:discord:<user id>`.
    pub actor_id: String,
    /// Channel the message was posted in (must be on the source allowlist).
    pub channel_id: String,
    /// The member's words, the speaker prefix removed.
    pub text: String,
    /// When it was sent, decoded from the snowflake (ms since the epoch).
    pub sent_ms: i64,
    /// The member's display handle from the input's `senders`; empty when unknown.
    #[serde(default)]
    pub sender: String,
    /// Set by qualification.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question_type: Option<QuestionType>,
    /// The continuation hook's kind (personal).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_kind: String,
    /// The hook's verbatim evidence (personal).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hook_evidence: String,
    /// `anticipatory` or `outcome`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stance: String,
}

/// A discarded item: every one produces exactly one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// The candidate (turn id).
    pub candidate: String,
    /// `collect`, `verify`, `continuation`, `resolution`, `history`, `live_source`, `draft`.
    pub stage: String,
    /// Reason code of that stage (a stable word, grouped by in the report).
    pub reason: String,
    /// Ids, timestamps, counts.
    pub detail: String,
}

impl Rejection {
    /// A rejection.
    pub fn new(
        candidate: impl Into<String>,
        stage: &str,
        reason: &str,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            candidate: candidate.into(),
            stage: stage.to_owned(),
            reason: reason.to_owned(),
            detail: detail.into(),
        }
    }
}

/// Days to milliseconds.
pub const fn days(n: i64) -> i64 {
    n * 86_400_000
}

/// Hours to milliseconds.
pub const fn hours(n: i64) -> i64 {
    n * 3_600_000
}
