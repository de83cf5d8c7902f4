//! Destination ledgers: taking a claim's day with a compare-and-set on the log.
//!
//! Claims live in the casts that make them, so two casts racing for the same destination and
//! day cannot see each other's claim in time. Each destination therefore has a chain of its own,
//! cast id `claims:<destination>`, holding only `day_claimed` events. Taking a day appends to
//! that chain at the seq read just before; the log's expected-seq check lets exactly one of two
//! racing writers through, and the loser reads the chain again and finds the day taken. A day
//! taken by a claim that has since been refused, abandoned or declined (in its own cast's log)
//! is free again. Taking the day a claim already holds is a no-op, so a claim that crashed
//! between taking its day and sending can be looked at again without losing it.

use castlog_core::claims::{Claim, ClaimStatus};
use castlog_core::event::{DayClaimed, Event};
use castlog_core::id::{CastId, ClaimId, Seq};
use castlog_events::{EventLog, LogError, Pending, StreamKind};
use castlog_projections::claims::ClaimsLedger;

/// How often a writer reads again after losing an append race before giving up.
const ATTEMPTS: u32 = 16;

/// The cast id of a destination's ledger chain.
pub fn chain_of(destination: &str) -> CastId {
    CastId::new(format!("claims:{destination}"))
}

/// Whether an id is in the ledgers' namespace (`claims:…`), which a person may not choose
/// for a cast: a cast there would stand where a destination's ledger chain is looked for. What
/// a stream is, the log records as its kind (`StreamKind`); this says only what ids are taken.
pub fn is_ledger_id(cast: &CastId) -> bool {
    cast.as_str().starts_with("claims:")
}

/// The result of trying to take a day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// The claim holds the day now (or already did).
    Won,
    /// Another claim holds it.
    Held {
        /// Claim that holds the day (from the destination's ledger chain).
        holder: ClaimId,
    },
}

/// The current status of `claim` as its own cast's log says, read from that cast's claim
/// events only ([`ClaimsLedger::load_cast`]), not its whole history.
fn status_in_cast(
    log: &(impl EventLog + ?Sized),
    cast: &CastId,
    claim: &ClaimId,
) -> Result<Option<ClaimStatus>, LogError> {
    match ClaimsLedger::load_cast(log, cast) {
        Ok(ledger) => Ok(ledger.get(claim).map(|c| c.status)),
        Err(LogError::UnknownCast { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The ledger whose chain (`claims:*`) holds the days of claims whose day is one for the
/// whole deployment rather than per destination (an engagement's, by default); no
/// destination is named `*`.
pub const DEPLOYMENT: &str = "*";

/// Takes `claim`'s day on its destination's chain, or reports the claim holding it.
pub fn take_day(
    log: &(impl EventLog + ?Sized),
    claim: &Claim,
    now_ms: u64,
) -> Result<Taken, LogError> {
    take_day_on(log, &claim.destination, claim, now_ms)
}

/// Takes `claim`'s day on `ledger`'s chain (a destination, or [`DEPLOYMENT`]), or reports the
/// claim holding it there. The `day_claimed` event names the claim's own destination.
pub fn take_day_on(
    log: &(impl EventLog + ?Sized),
    ledger: &str,
    claim: &Claim,
    now_ms: u64,
) -> Result<Taken, LogError> {
    let chain = chain_of(ledger);
    if let Some(head) = log.head(&chain)?
        && head.kind != StreamKind::ClaimsLedger
    {
        return Err(LogError::Corrupt {
            context: format!("taking {} on {}", claim.day, claim.destination),
            message: format!(
                "{chain} is recorded as a stream of kind {}, not a claims ledger",
                head.kind
            ),
            source: None,
        });
    }
    for _ in 0..ATTEMPTS {
        let records = match log.read(&chain, Seq::FIRST, None) {
            Ok(records) => records,
            Err(LogError::UnknownCast { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut holder: Option<DayClaimed> = None;
        for record in &records {
            if let Ok(Event::DayClaimed(d)) = record.event()
                && d.day == claim.day
            {
                holder = Some(d);
            }
        }
        if let Some(h) = &holder {
            if h.claim == claim.claim {
                return Ok(Taken::Won);
            }
            let still_holds =
                status_in_cast(log, &h.cast, &h.claim)?.is_none_or(ClaimStatus::holds_day);
            if still_holds {
                return Ok(Taken::Held {
                    holder: h.claim.clone(),
                });
            }
        }
        let event = Event::from(DayClaimed {
            claim: claim.claim.clone(),
            cast: claim.cast.clone(),
            destination: claim.destination.clone(),
            day: claim.day.clone(),
        });
        let next = Seq(records.len() as u64 + 1);
        match log.append(&chain, next, &[Pending::new(now_ms, &event)]) {
            Ok(_) => return Ok(Taken::Won),
            // Another writer appended first: read the chain again.
            Err(LogError::Conflict { .. } | LogError::CastExists { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(LogError::storage(
        format!("taking {} on {}", claim.day, claim.destination),
        format!("lost the append race {ATTEMPTS} times in a row"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use castlog_core::event::{PostClaimed, PostRefused};
    use castlog_core::id::Digest;
    use castlog_events::InMemoryLog;

    fn claim(id: &str, cast: &str) -> Claim {
        let event = PostClaimed {
            claim: ClaimId::new(id),
            destination: "staging".into(),
            day: "2026-01-01".into(),
            attempt: 1,
            body: Digest::ZERO,
            step: "poster".into(),
            dry_run: false,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
        };
        Claim::claimed(&CastId::new(cast), 0, &event)
    }

    fn record_claim(log: &InMemoryLog, c: &Claim) {
        let event = Event::from(PostClaimed {
            claim: c.claim.clone(),
            destination: c.destination.clone(),
            day: c.day.clone(),
            attempt: 1,
            body: Digest::ZERO,
            step: c.step.clone(),
            dry_run: false,
            tagged_actor: None,
            source_message_ids: Vec::new(),
            fingerprint: None,
        });
        log.append(&c.cast, Seq(1), &[Pending::new(0, &event)])
            .unwrap();
    }

    #[test]
    fn one_claim_takes_a_day_and_a_released_day_is_free_again() {
        let log = InMemoryLog::new();
        let a = claim("a", "cast-a");
        let b = claim("b", "cast-b");
        record_claim(&log, &a);
        record_claim(&log, &b);
        assert_eq!(take_day(&log, &a, 1).unwrap(), Taken::Won);
        assert_eq!(take_day(&log, &a, 2).unwrap(), Taken::Won, "idempotent");
        assert_eq!(
            take_day(&log, &b, 3).unwrap(),
            Taken::Held {
                holder: ClaimId::new("a")
            }
        );
        // a is refused in its own cast: the day is free for b.
        let refused = Event::from(PostRefused::of_claim(ClaimId::new("a"), "no".into()));
        log.append(&a.cast, Seq(2), &[Pending::new(4, &refused)])
            .unwrap();
        assert_eq!(take_day(&log, &b, 5).unwrap(), Taken::Won);
        assert!(is_ledger_id(&chain_of("staging")));
        assert_eq!(
            log.read(&chain_of("staging"), Seq::FIRST, None)
                .unwrap()
                .len(),
            2
        );
        let head = log.head(&chain_of("staging")).unwrap().unwrap();
        assert_eq!(head.kind, StreamKind::ClaimsLedger);
    }

    /// A stream of another kind at a ledger's id (a cast imported there) is not taken for
    /// the ledger: nothing is appended to it.
    #[test]
    fn a_stream_of_another_kind_at_the_ledger_id_is_refused() {
        let log = InMemoryLog::new();
        let a = claim("a", "cast-a");
        record_claim(&log, &a);
        let other = Event::from(PostRefused::of_claim(ClaimId::new("x"), "no".into()));
        log.append(&chain_of("staging"), Seq::FIRST, &[Pending::new(0, &other)])
            .unwrap();
        let err = take_day(&log, &a, 1).unwrap_err();
        assert!(err.to_string().contains("not a claims ledger"), "{err}");
        assert_eq!(
            log.read(&chain_of("staging"), Seq::FIRST, None)
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn racing_writers_get_one_winner() {
        let log = std::sync::Arc::new(InMemoryLog::new());
        let claims: Vec<Claim> = (0..8)
            .map(|i| claim(&format!("c{i}"), &format!("cast-{i}")))
            .collect();
        for c in &claims {
            record_claim(&log, c);
        }
        let handles: Vec<_> = claims
            .into_iter()
            .map(|c| {
                let log = log.clone();
                std::thread::spawn(move || take_day(&*log, &c, 1).unwrap())
            })
            .collect();
        let results: Vec<Taken> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(results.iter().filter(|t| **t == Taken::Won).count(), 1);
    }
}
