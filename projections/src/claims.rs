//! `ClaimsLedger`: every claim of every cast in a database, folded from the claim events.
//!
//! A claim lives in the log of the cast that made it (`post_claimed`, then `post_staged`,
//! `post_refused`, `post_outcome_unknown`, `post_resolved`, `post_response_recorded`); the
//! ledger gathers them across casts so that the one-claim-per-destination-per-day rule, the
//! engagement runner's history gates and `castlog claims` all read one view. A recast's own log
//! holds only its own claims (its parent's stay the parent's, and a recast's record of adopting
//! an inherited claim's resolution, `post_resolution_inherited`, is not read here), so no claim
//! is counted twice. The transition rules are [`castlog_core::claims`]'; an event that breaks
//! them (possible only in a log castlog did not write) is kept out of the claim and reported in
//! [`ClaimsLedger::problems`].

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use castlog_core::claims::{self, Claim, ClaimStatus, Transition};
use castlog_core::event::{Event, Resolution};
use castlog_core::id::{CastId, ClaimId};
use castlog_events::{EventLog, LogError, Recorded};
use serde::{Deserialize, Serialize};

use crate::projection::Projection;

/// The event kinds the ledger reads (others are skipped without decoding).
const KINDS: [&str; 6] = claims::EVENT_KINDS;

/// Every claim, in the order the ledger first saw it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClaimsLedger {
    order: Vec<ClaimId>,
    claims: BTreeMap<ClaimId, Claim>,
    /// Events that broke the transition rules, as sentences (`cast seq: ...`).
    pub problems: Vec<String>,
}

impl Projection for ClaimsLedger {
    const NAME: &'static str = "claims";
    // 2: a resolution clears the reason the claim was pending.
    const VERSION: u32 = 2;

    fn apply(&mut self, record: &Recorded, event: Option<&Event>) {
        if !KINDS.contains(&record.kind.as_str()) {
            return;
        }
        let Some(event) = event else {
            return;
        };
        let problem =
            |what: &dyn std::fmt::Display| format!("{} seq {}: {what}", record.cast, record.seq);
        match event {
            Event::PostClaimed(e) => {
                if self.claims.contains_key(&e.claim) {
                    let twice = Misstep::ClaimedTwice(e.claim.clone());
                    self.problems.push(problem(&twice));
                    return;
                }
                self.insert(Claim::claimed(&record.cast, record.at_ms, e));
            }
            Event::PostStaged(e) => {
                let step = self.step(&e.claim, Transition::Staged);
                match step {
                    Ok(c) => c.message_id = Some(e.message_id.clone()),
                    Err(m) => self.problems.push(problem(&m)),
                }
            }
            Event::PostRefused(e) => {
                if self.claims.contains_key(&e.claim) {
                    match self.step(&e.claim, Transition::Refused) {
                        Ok(c) => c.reason = Some(e.reason.clone()),
                        Err(m) => self.problems.push(problem(&m)),
                    }
                } else {
                    // Refused before it was claimed (its day was held): listed, holds nothing.
                    self.insert(Claim::refused_unclaimed(&record.cast, record.at_ms, e));
                }
            }
            Event::PostOutcomeUnknown(e) => match self.claim_mut(&e.claim) {
                Ok(c) => c.reason = Some(e.reason.clone()),
                Err(m) => self.problems.push(problem(&m)),
            },
            Event::PostResolved(e) => match self.step(&e.claim, Transition::of(&e.resolution)) {
                Ok(c) => {
                    // Why it was pending no longer describes it.
                    c.reason = None;
                    if let Resolution::Staged { message_id } = &e.resolution {
                        c.message_id = Some(message_id.clone());
                    }
                }
                Err(m) => self.problems.push(problem(&m)),
            },
            Event::PostResponseRecorded(e) => {
                let checked = self.claim_mut(&e.claim).and_then(|c| {
                    claims::check_response(&c.claim, c.status)?;
                    c.response = Some(e.response);
                    Ok(())
                });
                if let Err(m) = checked {
                    self.problems.push(problem(&m));
                }
            }
            _ => {}
        }
    }
}

/// Why a claim event does not apply to the ledger (kept as one of its problems).
#[derive(Debug, thiserror::Error)]
enum Misstep {
    /// A claim event names a claim no `post_claimed` made.
    #[error("claim {0} was never claimed")]
    NeverClaimed(ClaimId),
    /// A second `post_claimed` of one claim.
    #[error("claim {0} is claimed twice")]
    ClaimedTwice(ClaimId),
    /// A step the claim's status does not allow.
    #[error(transparent)]
    Transition(#[from] claims::TransitionError),
    /// A response to a claim that did not go out.
    #[error(transparent)]
    Response(#[from] claims::ResponseError),
}

/// Why [`ClaimsLedger::find`] names no one claim.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FindError {
    /// No claim has this id or id prefix.
    #[error("no claim {text:?} in this database (see `castlog claims`)")]
    NoClaim {
        /// What was given.
        text: String,
    },
    /// More than one claim starts with this prefix.
    #[error(
        "{text:?} names {} claims ({}); give more of the id",
        .claims.len(),
        .claims.iter().map(ClaimId::as_str).collect::<Vec<_>>().join(", ")
    )]
    Ambiguous {
        /// What was given.
        text: String,
        /// Every claim whose id starts with the text given, in ledger order.
        claims: Vec<ClaimId>,
    },
}

impl ClaimsLedger {
    /// Folds the claim events of every cast in `log`, read without the other events
    /// ([`EventLog::scan_kinds`]): the cost follows the number of claim events, not of casts.
    pub fn load(log: &(impl EventLog + ?Sized)) -> Result<ClaimsLedger, LogError> {
        Self::load_from(log, None)
    }

    /// Folds the claim events of `cast` alone: the claims it made, as its own log says
    /// ([`LogError::UnknownCast`] if the log does not hold it).
    pub fn load_cast(
        log: &(impl EventLog + ?Sized),
        cast: &CastId,
    ) -> Result<ClaimsLedger, LogError> {
        Self::load_from(log, Some(cast))
    }

    fn load_from(
        log: &(impl EventLog + ?Sized),
        cast: Option<&CastId>,
    ) -> Result<ClaimsLedger, LogError> {
        let mut ledger = ClaimsLedger::default();
        // Claim kinds never name an earlier event: each decodes alone.
        log.scan_kinds(&KINDS, cast, &mut |record| {
            ledger.apply(&record, record.event().ok().as_ref());
            ControlFlow::Continue(())
        })?;
        Ok(ledger)
    }

    fn insert(&mut self, claim: Claim) {
        self.order.push(claim.claim.clone());
        self.claims.insert(claim.claim.clone(), claim);
    }

    /// The claim `claim`, or why an event naming it does not apply.
    fn claim_mut(&mut self, claim: &ClaimId) -> Result<&mut Claim, Misstep> {
        self.claims
            .get_mut(claim)
            .ok_or_else(|| Misstep::NeverClaimed(claim.clone()))
    }

    fn step(&mut self, claim: &ClaimId, step: Transition) -> Result<&mut Claim, Misstep> {
        let c = self.claim_mut(claim)?;
        c.advance(step)?;
        Ok(c)
    }

    /// Every claim, in the order first seen.
    pub fn claims(&self) -> impl Iterator<Item = &Claim> {
        self.order.iter().filter_map(|id| self.claims.get(id))
    }

    /// Claims a person has to look at: pending (outcome unknown) first, in the order seen.
    pub fn pending(&self) -> impl Iterator<Item = &Claim> {
        self.claims().filter(|c| c.status == ClaimStatus::Pending)
    }

    /// One claim by id.
    pub fn get(&self, claim: &ClaimId) -> Option<&Claim> {
        self.claims.get(claim)
    }

    /// One claim by id or unique id prefix (`clm-3f2a`).
    pub fn find(&self, text: &str) -> Result<&Claim, FindError> {
        if let Some(c) = self.claims.get(&ClaimId::new(text)) {
            return Ok(c);
        }
        let matches: Vec<&Claim> = self
            .claims()
            .filter(|c| !text.is_empty() && c.claim.as_str().starts_with(text))
            .collect();
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(FindError::NoClaim {
                text: text.to_owned(),
            }),
            many => Err(FindError::Ambiguous {
                text: text.to_owned(),
                claims: many.iter().map(|c| c.claim.clone()).collect(),
            }),
        }
    }

    /// The claim holding `destination` on `day`, if any.
    pub fn day_holder(
        &self,
        destination: &str,
        day: &str,
        except: Option<&ClaimId>,
    ) -> Option<&Claim> {
        claims::day_holder(self.claims(), destination, day, except)
    }

    /// Claims of `destination` that hold a day.
    pub fn holders(&self, destination: &str) -> impl Iterator<Item = &Claim> {
        self.claims()
            .filter(move |c| c.destination == destination && c.holds_day())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use castlog_core::event::{PostClaimed, PostRefused, PostResolved, PostStaged};
    use castlog_core::id::{Digest, Seq};
    use castlog_events::{InMemoryLog, Pending};

    fn claimed(claim: &str, destination: &str, day: &str, dry_run: bool) -> Event {
        Event::from(PostClaimed {
            claim: ClaimId::new(claim),
            destination: destination.into(),
            day: day.into(),
            attempt: 1,
            body: Digest::ZERO,
            step: "Socket-2".into(),
            dry_run,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
        })
    }

    #[test]
    fn folds_claims_across_casts_and_names_illegal_steps() {
        let log = InMemoryLog::new();
        let a = CastId::new("a");
        let b = CastId::new("b");
        let events_a = [
            claimed("c1", "staging", "2026-01-01", false),
            Event::from(PostStaged {
                claim: ClaimId::new("c1"),
                message_id: "m1".into(),
            }),
            claimed("c2", "staging", "2026-01-02", false),
        ];
        let pending: Vec<Pending> = events_a.iter().map(|e| Pending::new(5, e)).collect();
        log.append(&a, Seq(1), &pending).unwrap();
        let events_b = [
            claimed("c3", "staging", "2026-01-02", true),
            Event::from(PostRefused {
                claim: ClaimId::new("c4"),
                reason: "day_already_claimed: ...".into(),
                held_by: Some(ClaimId::new("c2")),
                destination: Some("staging".into()),
                day: Some("2026-01-02".into()),
                step: Some("Socket-2".into()),
                attempt: Some(1),
                dry_run: false,
            }),
            // Illegal: a staged claim cannot be abandoned.
            Event::from(PostResolved {
                claim: ClaimId::new("c1"),
                resolution: Resolution::Abandoned,
            }),
        ];
        let pending: Vec<Pending> = events_b.iter().map(|e| Pending::new(6, e)).collect();
        log.append(&b, Seq(1), &pending).unwrap();

        let ledger = ClaimsLedger::load(&log).unwrap();
        let ids: Vec<&str> = ledger.claims().map(|c| c.claim.as_str()).collect();
        assert_eq!(ids, ["c1", "c2", "c3", "c4"]);
        assert_eq!(
            ledger.get(&ClaimId::new("c1")).unwrap().status,
            ClaimStatus::Staged
        );
        assert_eq!(
            ledger.get(&ClaimId::new("c3")).unwrap().status,
            ClaimStatus::DryRun
        );
        assert_eq!(ledger.get(&ClaimId::new("c4")).unwrap().cast, b);
        let pending: Vec<&str> = ledger.pending().map(|c| c.claim.as_str()).collect();
        assert_eq!(pending, ["c2"]);
        assert_eq!(
            ledger
                .day_holder("staging", "2026-01-02", None)
                .map(|c| c.claim.as_str()),
            Some("c2")
        );
        assert_eq!(ledger.holders("staging").count(), 2);
        assert_eq!(ledger.problems.len(), 1);
        assert!(
            ledger.problems[0].contains("is staged"),
            "{:?}",
            ledger.problems
        );
        let many = ledger.find("c").unwrap_err();
        assert!(matches!(&many, FindError::Ambiguous { claims, .. } if claims.len() == 4));
        assert!(many.to_string().contains("names 4 claims"), "{many}");
        assert_eq!(ledger.find("c3").unwrap().claim.as_str(), "c3");

        // One cast's claims, as its own log says: c1 was never claimed in b.
        let of_b = ClaimsLedger::load_cast(&log, &b).unwrap();
        let ids: Vec<&str> = of_b.claims().map(|c| c.claim.as_str()).collect();
        assert_eq!(ids, ["c3", "c4"]);
        assert!(
            of_b.problems[0].contains("c1 was never claimed"),
            "{:?}",
            of_b.problems
        );
    }

    /// A resolved claim no longer carries the reason it was pending.
    #[test]
    fn a_resolution_clears_the_pending_reason() {
        let log = InMemoryLog::new();
        let events = [
            claimed("c1", "staging", "2026-01-01", false),
            Event::from(castlog_core::event::PostOutcomeUnknown {
                claim: ClaimId::new("c1"),
                reason: "send_outcome_unknown: the sender exited with code 1".into(),
            }),
        ];
        let pending: Vec<Pending> = events.iter().map(|e| Pending::new(5, e)).collect();
        let cast = CastId::new("a");
        log.append(&cast, Seq(1), &pending).unwrap();
        let ledger = ClaimsLedger::load(&log).unwrap();
        let c1 = ledger.get(&ClaimId::new("c1")).unwrap();
        assert!(
            c1.reason
                .as_deref()
                .unwrap()
                .starts_with("send_outcome_unknown")
        );
        let resolved = Event::from(PostResolved {
            claim: ClaimId::new("c1"),
            resolution: Resolution::Staged {
                message_id: "m1".into(),
            },
        });
        log.append(&cast, Seq(3), &[Pending::new(6, &resolved)])
            .unwrap();
        let ledger = ClaimsLedger::load(&log).unwrap();
        let c1 = ledger.get(&ClaimId::new("c1")).unwrap();
        assert_eq!(
            (c1.status, c1.reason.as_deref(), c1.message_id.as_deref()),
            (ClaimStatus::Staged, None, Some("m1"))
        );
    }
}
