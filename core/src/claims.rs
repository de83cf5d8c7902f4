//! The claims ledger's rules: claim ids, the claim day in a time zone, the transition state
//! machine, and the one-claim-per-destination-per-day rule.
//!
//! A post goes out at most once because it is *claimed* before anything is sent: a durable
//! `post_claimed` event names the claim, the destination and the calendar day it counts for.
//! Only then may a sender run; its result becomes `post_staged` (a message id) or
//! `post_refused` (a definite refusal); an unknown result (`post_outcome_unknown`) leaves the
//! claim pending, and nothing ever retries it: a person resolves it (`post_resolved`).
//!
//! The transitions, enforced wherever a claim changes (the cast machine, `castlog claims
//! resolve`, the engagement runner):
//!
//! ```text
//! pending ──▶ staged ──▶ approved ──▶ posted
//!    │           └──────────────────▶ declined   (from staged or approved)
//!    ├──▶ refused
//!    └──▶ abandoned
//! ```
//!
//! Apart from its status, a claim that went out (staged, approved or posted) may carry a
//! person's record of how it was received (`post_response_recorded`: answered or ignored). It
//! does not move the status; the engagement runner's thread rule reads it.
//!
//! A dry-run claim (`dry_run: true`) is terminal from the start: nothing was sent and nothing
//! will be. Pending, staged, approved and posted claims *hold their day*: no other claim for the
//! same destination on the same day may go out. Refused, abandoned, declined and dry-run claims
//! release it.
//!
//! Everything here is pure: the day is computed from a millisecond instant and a
//! [`crate::calendar::Zone`], the claim id from its parts and the injected digest function.

use serde::{Deserialize, Serialize};

use crate::env::DigestFn;
use crate::event::{PostClaimed, PostRefused, Resolution, Response};
use crate::id::{CastId, ClaimId};

/// The kinds of the events that make and move claims, in one place: the claims ledger reads
/// only these, and the SQLite log keeps an index of exactly these rows (schema version 7,
/// pinned to this list by a test), so reading every claim does not read every event.
/// `day_claimed` (the destination ledger chains) and `post_resolution_inherited` (a recast's
/// record of adopting a resolution) are not among them: the ledger does not read them.
pub const EVENT_KINDS: [&str; 6] = [
    "post_claimed",
    "post_staged",
    "post_refused",
    "post_outcome_unknown",
    "post_resolved",
    "post_response_recorded",
];

/// Where a claim stands (recorded in events, so it is defined with them).
pub use crate::event::ClaimStatus;

/// One step of the state machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// The sender (or a person) reported a message id.
    Staged,
    /// A definite refusal.
    Refused,
    /// A person says it was not sent.
    Abandoned,
    /// Approved for publishing.
    Approved,
    /// The approved post went out (`posted`).
    Posted,
    /// A person turned the staged or approved post down; its day is released.
    Declined,
}

impl Transition {
    /// The status this step leads to.
    pub fn target(self) -> ClaimStatus {
        match self {
            Transition::Staged => ClaimStatus::Staged,
            Transition::Refused => ClaimStatus::Refused,
            Transition::Abandoned => ClaimStatus::Abandoned,
            Transition::Approved => ClaimStatus::Approved,
            Transition::Posted => ClaimStatus::Posted,
            Transition::Declined => ClaimStatus::Declined,
        }
    }

    /// The step a person's resolution takes.
    pub fn of(resolution: &Resolution) -> Transition {
        match resolution {
            Resolution::Staged { .. } => Transition::Staged,
            Resolution::Abandoned => Transition::Abandoned,
            Resolution::Approved => Transition::Approved,
            Resolution::Posted => Transition::Posted,
            Resolution::Declined => Transition::Declined,
        }
    }
}

/// An illegal transition, naming the claim and its current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("claim {claim} is {from}: it cannot become {to} ({hint})")]
pub struct TransitionError {
    /// Claim that was asked to move.
    pub claim: ClaimId,
    /// Status the claim has in its own cast's log now.
    pub from: ClaimStatus,
    /// The status asked for.
    pub to: ClaimStatus,
    /// What the current status allows.
    pub hint: &'static str,
}

/// What each status allows, for error messages.
fn allowed(from: ClaimStatus) -> &'static str {
    match from {
        ClaimStatus::Pending => "a pending claim can become staged, refused or abandoned",
        ClaimStatus::Staged => "a staged claim can be approved or declined",
        ClaimStatus::Approved => "an approved claim can become posted or declined",
        ClaimStatus::Refused
        | ClaimStatus::Abandoned
        | ClaimStatus::Posted
        | ClaimStatus::Declined => "it is final",
        ClaimStatus::DryRun => "a dry run sent nothing and is final; run again with --post",
    }
}

/// Applies one transition to a claim in `from`, or says why it is illegal.
pub fn next(
    claim: &ClaimId,
    from: ClaimStatus,
    step: Transition,
) -> Result<ClaimStatus, TransitionError> {
    use ClaimStatus as S;
    use Transition as T;
    let ok = matches!(
        (from, step),
        (S::Pending, T::Staged | T::Refused | T::Abandoned)
            | (S::Staged, T::Approved | T::Declined)
            | (S::Approved, T::Posted | T::Declined)
    );
    if ok {
        Ok(step.target())
    } else {
        Err(TransitionError {
            claim: claim.clone(),
            from,
            to: step.target(),
            hint: allowed(from),
        })
    }
}

/// A response recorded on a claim that did not go out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "claim {claim} is {status}: only a claim that went out (staged, approved or posted) can be answered or ignored"
)]
pub struct ResponseError {
    /// Claim the response was recorded against.
    pub claim: ClaimId,
    /// Status the claim has now, one that did not go out (pending, refused, a dry run, ...).
    pub status: ClaimStatus,
}

/// Whether a person may record how `claim`'s post was received: only when it went out.
pub fn check_response(claim: &ClaimId, status: ClaimStatus) -> Result<(), ResponseError> {
    if status.went_out() {
        Ok(())
    } else {
        Err(ResponseError {
            claim: claim.clone(),
            status,
        })
    }
}

/// The id of a claim: a digest of its cast, step, destination and attempt, so that the same
/// claim decided again (replay, re-decide) gets the same id and two claims never share one.
pub fn claim_id(
    digest: DigestFn,
    cast: &CastId,
    step: &str,
    destination: &str,
    attempt: u32,
) -> ClaimId {
    let text = format!("castlog-claim-v1\n{cast}\n{step}\n{destination}\n{attempt}");
    // All 32 digest bytes folded into 8 (16 hex digits: short enough to type).
    let mut folded = [0u8; 8];
    for (i, byte) in digest(text.as_bytes()).0.iter().enumerate() {
        folded[i % 8] ^= byte;
    }
    let hex: String = folded.iter().map(|b| format!("{b:02x}")).collect();
    ClaimId::new(format!("clm-{hex}"))
}

/// One claim as the ledger knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Id derived from cast, step, destination and attempt (`clm-<hex>`).
    pub claim: ClaimId,
    /// The cast whose log holds its `post_claimed`.
    pub cast: CastId,
    /// The step that claimed (socket, `socket@item`, or an engagement stage).
    pub step: String,
    /// Where the post goes.
    pub destination: String,
    /// Local calendar day (`YYYY-MM-DD`) in the configured zone that the claim takes.
    pub day: String,
    /// The attempt for this step and destination.
    pub attempt: u32,
    /// Where it stands.
    pub status: ClaimStatus,
    /// Whether it was a dry run.
    pub dry_run: bool,
    /// The sender's (or the person's) message id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Why it was refused, or why its outcome is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was claimed (ms since the epoch).
    pub claimed_ms: u64,
    /// The blob of the body (absent for a claim refused before it was made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<crate::id::Digest>,
    /// The member tagged by the post (engagement), for the cooldown rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagged_actor: Option<String>,
    /// Source message ids the post follows up (engagement), for the thread rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_message_ids: Vec<String>,
    /// The question's topic fingerprint (engagement), for the similarity rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<u64>,
    /// How the post was received, when a person recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
}

impl Claim {
    /// The claim a `post_claimed` event creates.
    pub fn claimed(cast: &CastId, at_ms: u64, event: &PostClaimed) -> Claim {
        Claim {
            claim: event.claim.clone(),
            cast: cast.clone(),
            step: event.step.clone(),
            destination: event.destination.clone(),
            day: event.day.clone(),
            attempt: event.attempt,
            status: if event.dry_run {
                ClaimStatus::DryRun
            } else {
                ClaimStatus::Pending
            },
            dry_run: event.dry_run,
            message_id: None,
            reason: None,
            claimed_ms: at_ms,
            body: Some(event.body),
            tagged_actor: event.tagged_actor.clone(),
            source_message_ids: event.source_message_ids.clone(),
            fingerprint: event.fingerprint,
            response: None,
        }
    }

    /// The ledger entry of a claim refused before it was made (its day was held): listed,
    /// holding nothing, kept so the step's next attempt gets a new id.
    pub fn refused_unclaimed(cast: &CastId, at_ms: u64, event: &PostRefused) -> Claim {
        Claim {
            claim: event.claim.clone(),
            cast: cast.clone(),
            step: event.step.clone().unwrap_or_default(),
            destination: event.destination.clone().unwrap_or_default(),
            day: event.day.clone().unwrap_or_default(),
            attempt: event.attempt.unwrap_or(0),
            status: ClaimStatus::Refused,
            dry_run: event.dry_run,
            message_id: None,
            reason: Some(event.reason.clone()),
            claimed_ms: at_ms,
            body: None,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
            response: None,
        }
    }

    /// Checks and applies a transition.
    pub fn advance(&mut self, step: Transition) -> Result<(), TransitionError> {
        self.status = next(&self.claim, self.status, step)?;
        Ok(())
    }

    /// Whether this claim holds its destination's day.
    pub fn holds_day(&self) -> bool {
        !self.dry_run && self.status.holds_day()
    }
}

/// The claim that holds `destination` on `day`, if any (ignoring `except`, the claim asking).
pub fn day_holder<'a>(
    claims: impl IntoIterator<Item = &'a Claim>,
    destination: &str,
    day: &str,
    except: Option<&ClaimId>,
) -> Option<&'a Claim> {
    claims.into_iter().find(|c| {
        c.destination == destination
            && c.day == day
            && c.holds_day()
            && except.is_none_or(|e| *e != c.claim)
    })
}

/// The claim of `step` holding `day` on any destination, if any (ignoring `except`): the day
/// rule of a step whose day is one for the whole deployment.
pub fn step_day_holder<'a>(
    claims: impl IntoIterator<Item = &'a Claim>,
    step: &str,
    day: &str,
    except: Option<&ClaimId>,
) -> Option<&'a Claim> {
    claims.into_iter().find(|c| {
        c.step == step && c.day == day && c.holds_day() && except.is_none_or(|e| *e != c.claim)
    })
}

/// The named refusal for a claim whose day, one for the whole deployment, is held by `holder`.
pub fn deployment_day_taken_reason(holder: &ClaimId, day: &str) -> String {
    format!(
        "{DAY_ALREADY_CLAIMED}: the deployment already has claim {holder} for {day}, on one of its destinations (a post has already gone out or may have)"
    )
}

/// The reason code of a claim refused because its day is taken.
pub const DAY_ALREADY_CLAIMED: &str = "day_already_claimed";

/// The named refusal for a claim whose day is held by `holder`.
pub fn day_taken_reason(holder: &ClaimId, destination: &str, day: &str) -> String {
    format!(
        "{DAY_ALREADY_CLAIMED}: {destination} already has claim {holder} for {day} (a post has already gone out or may have)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::Digest;

    const EVERY_STATUS: [ClaimStatus; 8] = [
        ClaimStatus::Pending,
        ClaimStatus::Staged,
        ClaimStatus::Refused,
        ClaimStatus::Abandoned,
        ClaimStatus::Approved,
        ClaimStatus::Posted,
        ClaimStatus::Declined,
        ClaimStatus::DryRun,
    ];

    #[test]
    fn transitions_follow_the_table() {
        use ClaimStatus as S;
        use Transition as T;
        let c = ClaimId::new("clm-1");
        let legal = [
            (S::Pending, T::Staged, S::Staged),
            (S::Pending, T::Refused, S::Refused),
            (S::Pending, T::Abandoned, S::Abandoned),
            (S::Staged, T::Approved, S::Approved),
            (S::Staged, T::Declined, S::Declined),
            (S::Approved, T::Posted, S::Posted),
            (S::Approved, T::Declined, S::Declined),
        ];
        for (from, step, to) in legal {
            assert_eq!(next(&c, from, step), Ok(to));
        }
        let statuses = EVERY_STATUS;
        let steps = [
            T::Staged,
            T::Refused,
            T::Abandoned,
            T::Approved,
            T::Posted,
            T::Declined,
        ];
        let mut refused = 0;
        for from in statuses {
            for step in steps {
                if legal.iter().any(|(f, s, _)| *f == from && *s == step) {
                    continue;
                }
                let err = next(&c, from, step).unwrap_err();
                assert_eq!(err.from, from);
                assert!(err.to_string().contains(from.as_str()), "{err}");
                refused += 1;
            }
        }
        assert_eq!(refused, statuses.len() * steps.len() - legal.len());
    }

    #[test]
    fn pending_and_sent_claims_hold_their_day_and_nothing_else_does() {
        use ClaimStatus as S;
        let holding = [S::Pending, S::Staged, S::Approved, S::Posted];
        for status in EVERY_STATUS {
            assert_eq!(status.holds_day(), holding.contains(&status), "{status}");
        }
    }

    #[test]
    fn only_a_claim_that_went_out_takes_a_response() {
        use ClaimStatus as S;
        let c = ClaimId::new("clm-1");
        for ok in [S::Staged, S::Approved, S::Posted] {
            assert_eq!(check_response(&c, ok), Ok(()));
        }
        for refused in [S::Pending, S::Refused, S::Abandoned, S::Declined, S::DryRun] {
            let err = check_response(&c, refused).unwrap_err();
            assert!(err.to_string().contains(refused.as_str()), "{err}");
        }
    }

    #[test]
    fn claim_ids_are_deterministic_and_distinct() {
        fn fold(bytes: &[u8]) -> Digest {
            // A weak positional fold: the id must still tell the inputs apart.
            let mut out = [0u8; 32];
            for (i, b) in bytes.iter().enumerate() {
                out[i % 32] = out[i % 32].wrapping_mul(31).wrapping_add(*b);
            }
            Digest(out)
        }
        let cast = CastId::new("c");
        let a = claim_id(fold, &cast, "Socket-2", "dest", 1);
        assert_eq!(a, claim_id(fold, &cast, "Socket-2", "dest", 1));
        assert_ne!(a, claim_id(fold, &cast, "Socket-2", "dest", 2));
        assert_ne!(a, claim_id(fold, &cast, "Socket-3", "dest", 1));
        assert!(a.as_str().starts_with("clm-"));
    }

    #[test]
    fn one_claim_per_destination_per_day() {
        let base = Claim {
            claim: ClaimId::new("a"),
            cast: CastId::new("c"),
            step: "s".into(),
            destination: "d".into(),
            day: "2026-01-01".into(),
            attempt: 1,
            status: ClaimStatus::Pending,
            dry_run: false,
            message_id: None,
            reason: None,
            claimed_ms: 0,
            body: None,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
            response: None,
        };
        let mut dry = base.clone();
        dry.claim = ClaimId::new("dry");
        dry.dry_run = true;
        dry.status = ClaimStatus::DryRun;
        let mut refused = base.clone();
        refused.claim = ClaimId::new("r");
        refused.status = ClaimStatus::Refused;
        let claims = [dry, refused, base.clone()];
        assert_eq!(
            day_holder(&claims, "d", "2026-01-01", None).map(|c| c.claim.as_str()),
            Some("a")
        );
        assert!(day_holder(&claims, "d", "2026-01-02", None).is_none());
        assert!(day_holder(&claims, "other", "2026-01-01", None).is_none());
        assert!(day_holder(&claims, "d", "2026-01-01", Some(&base.claim)).is_none());
        let reason = day_taken_reason(&base.claim, "d", "2026-01-01");
        assert!(reason.starts_with(DAY_ALREADY_CLAIMED));
    }
}
