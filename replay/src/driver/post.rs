//! The driver's side of post sockets: check the ledger, claim, take the day, send once.
//!
//! The order is the whole point: the `post_claimed` event is appended (committed) before the
//! day is taken and before any sender runs, and the sender runs only in the same process step
//! that made the claim. A driver that finds a claim already pending (after a crash, on
//! `resume`, in a recast that inherited it) never sends: it stops and names the claim for a
//! person to resolve. A person resolves a claim in the log of the cast that made it; a recast
//! that inherited the claim while it was pending adopts that resolution from the claims ledger
//! the next time it is driven (`post_resolution_inherited`), again without sending.

use castlog_core::claims::{self, ClaimStatus};
use castlog_core::env::Env;
use castlog_core::input::{HeldDay, Input, SendOutcome};
use castlog_core::loadout::PostSpec;
use castlog_core::machine::{Phase, Status};
use castlog_events::EventLog;
use castlog_events::chain::blob_hash;
use castlog_projections::claims::ClaimsLedger;
use serde_json::Value;

use super::{DriveError, Driver, Stop};
use crate::ledger::{Taken, take_day};
use crate::sender::{Outbound, Sender};

impl<'a, L: EventLog + ?Sized> Driver<'a, L> {
    /// Sends claimed posts through `sender` (`--post`). Without it every post is a dry run.
    pub fn post_with(&mut self, sender: Box<dyn Sender + 'a>) {
        self.sender = Some(sender);
    }

    /// Whether posts of this drive are sent.
    pub fn posting(&self) -> bool {
        self.sender.is_some()
    }

    /// A post socket waits (`Next::StartPost`): check the ledger, claim (or be refused), and
    /// send once.
    pub(super) fn start_post(&mut self, step: &str, spec: &PostSpec) -> Result<(), DriveError> {
        let ledger = ClaimsLedger::load(self.log)?;
        let held: Vec<HeldDay> = ledger
            .holders(&spec.destination)
            .map(|c| HeldDay {
                claim: c.claim.clone(),
                day: c.day.clone(),
            })
            .collect();
        let sent_before = self.sent_before(&ledger, step, &spec.destination)?;
        let dry_run = self.sender.is_none();
        self.apply(&Input::StartPost {
            dry_run,
            held,
            sent_before,
        })?;
        let claim = self
            .state
            .current
            .as_ref()
            .filter(|c| c.phase == Phase::AwaitingPostOutcome)
            .and_then(|c| c.claim.clone());
        // The claim is durable now; this step is the only one that may send it.
        if let Some(claim) = claim {
            let outcome = self.deliver(&claim);
            self.apply(&Input::PostOutcome { claim, outcome })?;
        }
        Ok(())
    }

    /// A claim of `step` to `destination` that went out (or may have) in a cast this one was
    /// recast from, after the fork point (claims from before it are inherited and handled by
    /// the machine): a recast that runs the step anew does not send it again.
    fn sent_before(
        &self,
        ledger: &ClaimsLedger,
        step: &str,
        destination: &str,
    ) -> Result<Option<castlog_core::id::ClaimId>, DriveError> {
        let ancestors = castlog_events::log::ancestors(self.log, &self.state.cast)?;
        Ok(ledger
            .claims()
            .find(|c| {
                ancestors.contains(&c.cast)
                    && c.step == step
                    && c.destination == destination
                    && !c.dry_run
                    && c.holds_day()
                    && !self.state.claims.contains_key(&c.claim)
            })
            .map(|c| c.claim.clone()))
    }

    /// Takes the claim's day and calls the sender, once.
    fn deliver(&mut self, id: &castlog_core::id::ClaimId) -> SendOutcome {
        let Some(claim) = self.state.claims.get(id).cloned() else {
            return SendOutcome::Refused {
                reason: format!("claim {id} is not in the cast's state"),
            };
        };
        let now = Env::from_clock(self.clock, blob_hash).now_ms;
        match take_day(self.log, &claim, now) {
            Ok(Taken::Won) => {}
            Ok(Taken::Held { holder }) => {
                return SendOutcome::Refused {
                    reason: claims::day_taken_reason(&holder, &claim.destination, &claim.day),
                };
            }
            Err(e) => {
                return SendOutcome::Refused {
                    reason: format!(
                        "day_not_taken: cannot take {} on {}: {e}",
                        claim.day, claim.destination
                    ),
                };
            }
        }
        let body = match claim.body.map(|b| self.log.get_blob(&b)) {
            Some(Ok(Some(bytes))) => String::from_utf8_lossy(&bytes).into_owned(),
            _ => {
                return SendOutcome::Refused {
                    reason: format!("body_missing: the body blob of claim {id} is not stored"),
                };
            }
        };
        let Some(sender) = self.sender.as_mut() else {
            return SendOutcome::Refused {
                reason: "dry_run: no sender".into(),
            };
        };
        tracing::info!(claim = %id, destination = %claim.destination, sender = %sender.spec(), "sending");
        sender.send(&Outbound {
            claim: id,
            cast: &self.state.cast,
            destination: &claim.destination,
            body: &body,
            extra: &Value::Null,
        })
    }

    /// When the post socket waits on a claim this cast inherited and the ledger shows it
    /// resolved in its owner's log, adopts the resolution (the socket goes on). Returns whether
    /// it did; nothing is sent either way.
    pub fn adopt_inherited_resolution(&mut self) -> Result<bool, DriveError> {
        let waiting = self
            .state
            .current
            .as_ref()
            .filter(|c| c.phase == Phase::AwaitingPostOutcome)
            .and_then(|c| c.claim.as_ref())
            .and_then(|id| self.state.claims.get(id))
            .filter(|c| c.cast != self.state.cast && c.status == ClaimStatus::Pending)
            .map(|c| (c.claim.clone(), c.cast.clone()));
        let Some((claim, owner)) = waiting else {
            return Ok(false);
        };
        // The claim is resolved in its owner's log: that cast's claim events are all it takes.
        let ledger = match ClaimsLedger::load_cast(self.log, &owner) {
            Ok(ledger) => ledger,
            Err(castlog_events::LogError::UnknownCast { .. }) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let Some(owned) = ledger
            .get(&claim)
            .filter(|c| c.status != ClaimStatus::Pending)
        else {
            return Ok(false);
        };
        let input = Input::InheritedClaimResolved {
            claim,
            status: owned.status,
            message_id: owned.message_id.clone(),
        };
        self.apply(&input)?;
        Ok(true)
    }

    /// The stop of a cast whose post waits on a pending claim: nothing is sent again.
    pub(super) fn pending_stop(&self) -> Stop {
        let current = self.state.current.as_ref();
        let claim = current
            .and_then(|c| c.claim.as_ref())
            .and_then(|id| self.state.claims.get(id));
        let message = match claim {
            Some(c) if c.status == ClaimStatus::Pending && c.cast != self.state.cast => format!(
                "claim {} for {} ({}) was inherited from cast {} and is pending there: the send outcome is unknown; castlog never sends it again. Check {}, then `castlog claims resolve {} --staged MSG_ID` or `--abandoned` (recorded on {}), and `castlog resume {} --agent SPEC` takes the resolution on",
                c.claim,
                c.destination,
                c.day,
                c.cast,
                c.destination,
                c.claim,
                c.cast,
                self.state.cast
            ),
            Some(c) if c.status == ClaimStatus::Pending => format!(
                "claim {} for {} ({}) is pending: the send outcome is unknown{}; castlog never sends it again. Check {}, then `castlog claims resolve {} --staged MSG_ID` or `--abandoned`, and `castlog resume {} --agent SPEC`",
                c.claim,
                c.destination,
                c.day,
                c.reason
                    .as_ref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                c.destination,
                c.claim,
                self.state.cast
            ),
            _ => format!(
                "cast {} waits on a post claim; see `castlog claims --pending`",
                self.state.cast
            ),
        };
        Stop {
            status: Status::AwaitingAgent,
            message: Some(message),
        }
    }
}
