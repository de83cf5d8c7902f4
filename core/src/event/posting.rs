//! Outward-effect events: claims, send outcomes, resolutions, how a sent post was received,
//! the destination ledgers' day claims, and a recast's adoption of an inherited claim's
//! resolution.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::id::{CastId, ClaimId, Digest};

/// The sender's result is unknown: no message id came back, it failed, or it timed out. The
/// post may have gone out, so the claim stays pending and nothing retries it; a person resolves
/// it with `castlog claims resolve`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostOutcomeUnknown {
    /// Claim whose outcome is unknown; it stays pending.
    pub claim: ClaimId,
    /// What the sender said (or did not say).
    pub reason: String,
}

/// A claim took its destination's day.
///
/// These events form one chain per destination (cast id `claims:<destination>`), appended with
/// the log's expected-seq check: two writers racing for the same day cannot both append the
/// same next seq, so exactly one wins. A day is taken again only when the claim holding it has
/// released it (refused, abandoned, declined) in its own cast's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayClaimed {
    /// The claim taking the day.
    pub claim: ClaimId,
    /// The cast whose log holds the claim.
    pub cast: CastId,
    /// Destination whose ledger chain this is (`claims:<destination>`).
    pub destination: String,
    /// Local calendar day taken (`YYYY-MM-DD`).
    pub day: String,
}

/// A durable claim, appended before the sender is called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostClaimed {
    /// Id derived from cast, step, destination and attempt (`clm-<hex>`).
    pub claim: ClaimId,
    /// Where the post goes.
    pub destination: String,
    /// The calendar day (in the configured time zone) the claim counts for.
    pub day: String,
    /// The attempt number for this destination.
    pub attempt: u32,
    /// The blob of the body to send.
    pub body: Digest,
    /// The step (socket or engagement stage) that claimed.
    pub step: String,
    /// True when no sender is called (the default).
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub dry_run: bool,
    /// The member the post tags (engagement posts), for the ledger's cooldown rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagged_actor: Option<String>,
    /// Source message ids the post follows up (engagement posts), for the thread rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_message_ids: Vec<String>,
    /// The topic fingerprint of the question (engagement posts), for the similarity rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<u64>,
}

/// The sender accepted the post.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostStaged {
    /// Claim that moves to staged.
    pub claim: ClaimId,
    /// The sender's message id.
    pub message_id: String,
}

/// The post was refused.
///
/// Either a pending claim was refused (a lost race for the day, a definite no from the sender),
/// or a claim was refused before it was made (its day is held by another claim); then the
/// optional fields say what the refused claim would have been, so the ledger can show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostRefused {
    /// Claim that was refused (or would have been made).
    pub claim: ClaimId,
    /// Why, as a sentence or a reason code such as `day_already_claimed`.
    pub reason: String,
    /// The claim holding the day, when that is why (refused before claiming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<ClaimId>,
    /// Where the refused post would have gone (refused before claiming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<String>,
    /// The day it would have counted for (refused before claiming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// The step that asked (refused before claiming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The attempt it would have been (refused before claiming).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// Whether it was a dry run (refused before claiming).
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub dry_run: bool,
}

impl PostRefused {
    /// The refusal of an existing claim (the before-claiming fields empty).
    pub fn of_claim(claim: ClaimId, reason: String) -> Self {
        Self {
            claim,
            reason,
            held_by: None,
            destination: None,
            day: None,
            step: None,
            attempt: None,
            dry_run: false,
        }
    }
}

/// How a person resolved a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "resolution", rename_all = "snake_case")]
pub enum Resolution {
    /// It was sent after all; here is the id.
    Staged {
        /// Message id the sender gave, as the person read it from the destination.
        message_id: String,
    },
    /// It was not sent and will not be.
    Abandoned,
    /// A staged post was approved.
    Approved,
    /// An approved post went out.
    Posted,
    /// A staged post was declined.
    Declined,
}

/// A person resolved a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostResolved {
    /// Claim the person resolved.
    pub claim: ClaimId,
    /// Where the person moved it (flattened into the event's fields).
    #[serde(flatten)]
    pub resolution: Resolution,
}

/// How the member a sent post addressed received it, as a person saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// The member replied to the post.
    Answered,
    /// The member let the post go unanswered.
    Ignored,
}

impl Response {
    /// The wire name (`answered`, `ignored`).
    pub fn as_str(self) -> &'static str {
        match self {
            Response::Answered => "answered",
            Response::Ignored => "ignored",
        }
    }
}

/// A person recorded how a sent post (staged, approved or posted) was received. The claim's
/// status does not change; a later record replaces an earlier one (a correction).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostResponseRecorded {
    /// Claim whose post the response is about.
    pub claim: ClaimId,
    /// Answered or ignored.
    pub response: Response,
}

/// A recast adopted the resolution of a pending claim it inherited.
///
/// The claim lives in the log of the cast that made it (its owner), and a person's resolution
/// is recorded there. A recast that inherited the claim while it was pending waits on it; when
/// it is driven again and the ledger shows the claim resolved, it records what it adopted here
/// (its own log, not the ledger's) and its post socket goes on without calling a sender.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PostResolutionInherited {
    /// Claim inherited from the parent cast.
    pub claim: ClaimId,
    /// The cast whose log holds the claim and its resolution.
    pub owner: CastId,
    /// The claim's status there (anything but pending).
    pub status: ClaimStatus,
    /// Its message id there, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

/// Where a claim stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    /// Claimed; the send outcome is unknown (or the send has not happened yet).
    Pending,
    /// The sender accepted it (a review/staging message is up).
    Staged,
    /// It was refused (a gate, a lost race for the day, or the sender said no).
    Refused,
    /// A person said it was not sent and will not be.
    Abandoned,
    /// A staged post was approved for publishing.
    Approved,
    /// The approved post went out.
    Posted,
    /// A staged or approved post was declined; the day is released.
    Declined,
    /// A dry run: nothing was sent and nothing will be.
    DryRun,
}

impl ClaimStatus {
    /// The wire name (`pending`, `dry_run`, ...), as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Pending => "pending",
            ClaimStatus::Staged => "staged",
            ClaimStatus::Refused => "refused",
            ClaimStatus::Abandoned => "abandoned",
            ClaimStatus::Approved => "approved",
            ClaimStatus::Posted => "posted",
            ClaimStatus::Declined => "declined",
            ClaimStatus::DryRun => "dry_run",
        }
    }

    /// Whether a claim in this status holds its destination's day.
    pub fn holds_day(self) -> bool {
        matches!(
            self,
            ClaimStatus::Pending
                | ClaimStatus::Staged
                | ClaimStatus::Approved
                | ClaimStatus::Posted
        )
    }

    /// Whether a person has something left to do (the send outcome is unknown, or a staged or
    /// approved post waits for its next step).
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ClaimStatus::Pending | ClaimStatus::Staged | ClaimStatus::Approved
        )
    }

    /// Whether something went out (or may have, for a pending claim).
    pub fn may_have_been_sent(self) -> bool {
        self.holds_day()
    }

    /// Whether the post certainly went out: staged, approved or posted.
    pub fn went_out(self) -> bool {
        matches!(
            self,
            ClaimStatus::Staged | ClaimStatus::Approved | ClaimStatus::Posted
        )
    }
}

impl fmt::Display for ClaimStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}
