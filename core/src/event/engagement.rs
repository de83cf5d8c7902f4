//! The engagement runner's events (besides the v1 candidate and draft events): the run's start
//! and end, qualification, ranking, live source checks and fidelity verdicts. An engage cast is
//! a plain sequence of these; its report is a projection of them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::id::CandidateId;

/// The first event of an engage cast: what the run was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngagementStarted {
    /// The conversation the results came from.
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
    /// The candidate.
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
    /// The candidate.
    pub candidate: CandidateId,
    /// Its specificity score.
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
    /// The candidate.
    pub candidate: CandidateId,
    /// The draft attempt it was fetched for.
    pub attempt: u32,
    /// Whether it passed.
    pub ok: bool,
    /// The failure reason (a `live_source` reason string).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The failure detail.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// Whether the live text contains the quoted text (when the source returned text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_matched: Option<bool>,
}

/// The runtime's own fidelity check of one draft against its quote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementFidelityJudged {
    /// The candidate.
    pub candidate: CandidateId,
    /// The draft attempt.
    pub attempt: u32,
    /// The verdict.
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
    /// The slot in ms since the epoch.
    pub slot_ms: i64,
    /// Whether an engagement post already went out that day (read from the claims ledger).
    pub already_posted: bool,
    /// Whether the run went ahead.
    pub ok: bool,
    /// Why not: `already_posted_today`, `not_the_planned_day`, `outside_window`,
    /// `before_slot`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The reason as a sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// The run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementFinished {
    /// `timed`, `personal` or `skip`.
    pub outcome: String,
    /// Why nothing was posted (`dry_run`, `no_verified_candidate`, `every_draft_rejected`,
    /// `history_exhausted`, a refusal, `send_outcome_unknown`, or a schedule skip:
    /// `before_slot`, `outside_window`, `already_posted_today`), empty when a post was staged.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub refused: String,
    /// The dominant rejection stage of a skip.
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
    /// The candidate.
    pub candidate: CandidateId,
    /// Its source record as given.
    pub source: Value,
}

/// An engagement candidate was dropped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementCandidateRejected {
    /// The candidate.
    pub candidate: CandidateId,
    /// The stage that dropped it.
    pub stage: String,
    /// The reason string.
    pub reason: String,
    /// The detail (ids, timestamps, counts) shown next to the reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

/// A draft attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngagementDraftAttempted {
    /// The candidate.
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
    /// The candidate.
    pub candidate: CandidateId,
    /// The attempt whose draft won.
    pub attempt: u32,
    /// The draft.
    pub draft: String,
}
