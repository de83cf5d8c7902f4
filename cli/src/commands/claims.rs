//! `claims` and `claims resolve`: the claim-before-send ledger for people.

use std::path::Path;

use castlog_core::claims::{self, Claim, Transition};
use castlog_core::event::{Event, PostResolved, PostResponseRecorded, Resolution, Response};
use castlog_core::id::CastId;
use castlog_core::input::Input;
use castlog_events::{Database, EventLog, LogError, Pending, StreamKind};
use castlog_projections::claims::ClaimsLedger;
use castlog_replay::clock::SystemClock;
use castlog_replay::driver::{Driver, fold};
use castlog_replay::recast::descendants;
use serde_json::json;

use crate::args::{ClaimsAction, ClaimsArgs, ResolveArgs};
use crate::error::CliError;
use crate::output;

/// `castlog claims [--pending]` and `castlog claims resolve`.
pub fn run(db: &Path, args: &ClaimsArgs) -> Result<(), CliError> {
    match &args.action {
        Some(ClaimsAction::Resolve(resolve_args)) => resolve(db, resolve_args),
        None => list(db, args.pending, args.json),
    }
}

fn row(c: &Claim) -> serde_json::Value {
    json!({
        "claim": c.claim,
        "cast": c.cast,
        "step": c.step,
        "destination": c.destination,
        "day": c.day,
        "attempt": c.attempt,
        "status": c.status,
        "dry_run": c.dry_run,
        "message_id": c.message_id,
        "reason": c.reason,
        "response": c.response,
        "claimed_at": output::timestamp(c.claimed_ms),
    })
}

fn list(db: &Path, pending: bool, json: bool) -> Result<(), CliError> {
    let log = super::open(db)?;
    let ledger = ClaimsLedger::load(&log)?;
    let shown: Vec<&Claim> = if pending {
        ledger.pending().collect()
    } else {
        ledger.claims().collect()
    };
    if json {
        return output::json(&json!({
            "claims": shown.iter().map(|c| row(c)).collect::<Vec<_>>(),
            "problems": ledger.problems,
        }));
    }
    if shown.is_empty() {
        crate::say!(
            "{}",
            if pending {
                "no pending claims"
            } else {
                "no claims"
            }
        );
    }
    for c in &shown {
        crate::say!(
            "{:<20} {:<10} {:<12} {} {:<16} cast {} step {}{}{}{}",
            c.claim,
            c.status,
            c.destination,
            c.day,
            c.message_id.as_deref().unwrap_or("-"),
            c.cast,
            c.step,
            c.response
                .map(|r| format!(" ({})", r.as_str()))
                .unwrap_or_default(),
            c.reason
                .as_ref()
                .map(|r| format!("\n    {r}"))
                .unwrap_or_default(),
            if c.status == claims::ClaimStatus::Pending {
                format!(
                    "\n    resolve: castlog claims resolve {} --staged MSG_ID | --abandoned",
                    c.claim
                )
            } else {
                String::new()
            }
        );
    }
    for problem in &ledger.problems {
        crate::say!("problem: {problem}");
    }
    Ok(())
}

/// What a person records about a claim: a step of its state machine, or how it was received.
enum Record {
    Step(Resolution),
    Response(Response),
}

fn record_of(args: &ResolveArgs) -> Record {
    if let Some(id) = &args.staged {
        Record::Step(Resolution::Staged {
            message_id: id.trim().to_owned(),
        })
    } else if args.approved {
        Record::Step(Resolution::Approved)
    } else if args.posted {
        Record::Step(Resolution::Posted)
    } else if args.declined {
        Record::Step(Resolution::Declined)
    } else if args.answered {
        Record::Response(Response::Answered)
    } else if args.ignored {
        Record::Response(Response::Ignored)
    } else {
        Record::Step(Resolution::Abandoned)
    }
}

impl Record {
    /// Whether the claim (as its cast's log says now) may take this record.
    fn check(&self, claim: &Claim) -> Result<(), CliError> {
        match self {
            Record::Step(resolution) => {
                claims::next(&claim.claim, claim.status, Transition::of(resolution))?;
                Ok(())
            }
            Record::Response(_) => Ok(claims::check_response(&claim.claim, claim.status)?),
        }
    }

    fn input(&self, claim: &Claim) -> Input {
        match self {
            Record::Step(resolution) => Input::ResolveClaimAs {
                claim: claim.claim.clone(),
                resolution: resolution.clone(),
            },
            Record::Response(response) => Input::RecordResponse {
                claim: claim.claim.clone(),
                response: *response,
            },
        }
    }

    fn event(&self, claim: &Claim) -> Event {
        match self {
            Record::Step(resolution) => Event::from(PostResolved {
                claim: claim.claim.clone(),
                resolution: resolution.clone(),
            }),
            Record::Response(response) => Event::from(PostResponseRecorded {
                claim: claim.claim.clone(),
                response: *response,
            }),
        }
    }
}

/// Whether `cast` is run by the cast machine (a stream of kind cast, not an engage run).
fn is_machine_cast(log: &Database, cast: &CastId) -> Result<bool, CliError> {
    Ok(log
        .head(cast)?
        .is_some_and(|head| head.kind == StreamKind::Cast))
}

fn resolve(db: &Path, args: &ResolveArgs) -> Result<(), CliError> {
    let log = super::open(db)?;
    let ledger = ClaimsLedger::load(&log)?;
    let claim = ledger.find(args.claim.trim())?.clone();
    let record = record_of(args);
    if let Record::Step(Resolution::Staged { message_id }) = &record
        && message_id.is_empty()
    {
        return Err(CliError::user(
            "--staged needs the message id the destination shows; or resolve with --abandoned",
        ));
    }
    // Refuse an illegal record before anything is recorded, naming the current state.
    record.check(&claim)?;
    let clock = SystemClock;
    let cast = claim.cast.clone();
    let mut continues = false;
    if is_machine_cast(&log, &cast)? {
        let mut driver = Driver::open(&log, &clock, &cast, &super::cast::cast_cwd(&log, &cast))?;
        let waiting = driver.state.current.as_ref().is_some_and(|c| {
            c.claim.as_ref() == Some(&claim.claim)
                && c.phase == castlog_core::machine::Phase::AwaitingPostOutcome
        });
        driver.apply(&record.input(&claim))?;
        // The resolution may have moved the cast on to its next prompt, which nobody sends now.
        driver.hold_unsent()?;
        continues = waiting && !driver.state.status.is_stopped();
    } else {
        append_record(&log, &cast, &claim, &record)?;
    }
    let inheritors = match &record {
        Record::Step(_) if claim.status == claims::ClaimStatus::Pending => {
            waiting_inheritors(&log, &claim)?
        }
        _ => Vec::new(),
    };
    let (status, response) = match &record {
        Record::Step(resolution) => (Transition::of(resolution).target(), claim.response),
        Record::Response(response) => (claim.status, Some(*response)),
    };
    if args.json {
        return output::json(&json!({
            "claim": claim.claim,
            "cast": cast,
            "from": claim.status,
            "status": status,
            "response": response,
            "inheritors": inheritors,
            "message_id": match &record {
                Record::Step(Resolution::Staged { message_id }) => Some(message_id.clone()),
                _ => claim.message_id,
            },
        }));
    }
    match &record {
        Record::Step(_) => crate::say!(
            "claim {} ({} on {}): {} -> {}",
            claim.claim,
            claim.destination,
            claim.day,
            claim.status,
            status
        ),
        Record::Response(response) => crate::say!(
            "claim {} ({} on {}): {}, {}",
            claim.claim,
            claim.destination,
            claim.day,
            claim.status,
            response.as_str()
        ),
    }
    if continues {
        crate::say!("cast {cast} can go on: `castlog resume {cast} --agent SPEC`");
    }
    for child in &inheritors {
        crate::say!(
            "cast {child} inherited the claim: `castlog resume {child} --agent SPEC` takes the resolution on"
        );
    }
    Ok(())
}

/// Recasts of `claim`'s cast that inherited it while it was pending and have not adopted a
/// resolution yet (they do when next driven).
fn waiting_inheritors(log: &Database, claim: &Claim) -> Result<Vec<CastId>, CliError> {
    let mut waiting = Vec::new();
    for child in descendants(log, &claim.cast)? {
        let (state, _) = fold(log, &child)?;
        let inherited = state
            .claims
            .get(&claim.claim)
            .is_some_and(|c| c.status == claims::ClaimStatus::Pending);
        if inherited {
            waiting.push(child);
        }
    }
    Ok(waiting)
}

/// Records on a cast that is not run by the machine (an engage cast): a compare-and-set append
/// after re-checking the claim against the cast's own log.
fn append_record(
    log: &Database,
    cast: &CastId,
    claim: &Claim,
    record: &Record,
) -> Result<(), CliError> {
    let event = record.event(claim);
    for _ in 0..8 {
        let head = log.head(cast)?.ok_or_else(|| {
            CliError::user(format!("cast {cast} of claim {} is gone", claim.claim))
        })?;
        let ledger = ClaimsLedger::load_cast(log, cast)?;
        let current = ledger.get(&claim.claim).ok_or_else(|| {
            CliError::internal(format!("claim {} is not in cast {cast}", claim.claim))
        })?;
        record.check(current)?;
        let now = castlog_core::env::Clock::now_ms(&SystemClock);
        match log.append(cast, head.seq.next(), &[Pending::new(now, &event)]) {
            Ok(_) => return Ok(()),
            Err(LogError::Conflict { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(CliError::internal(format!(
        "cast {cast} kept changing while claim {} was being resolved; try again",
        claim.claim
    )))
}
