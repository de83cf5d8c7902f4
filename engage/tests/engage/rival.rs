//! Two engage runs racing for one destination and day, made deterministic: both passed the
//! ledger check before either claimed, so only the compare-and-set on the destination's ledger
//! chain (`take_day`) can refuse the second. [`RivalLog`] plays the other run at exactly that
//! moment (as `castlog-replay`'s tests do for post sockets).

use std::sync::Mutex;

use castlog_core::claims::{Claim, ClaimStatus, DAY_ALREADY_CLAIMED};
use castlog_core::event::{Event, PostClaimed};
use castlog_core::id::{CastId, ClaimId, Digest, Seq};
use castlog_events::{EventLog, InMemoryLog, LogError, Pending, Recorded};
use castlog_projections::claims::ClaimsLedger;
use castlog_replay::ledger::{DEPLOYMENT, Taken, take_day_on};

/// The rival's cast and claim.
pub const RIVAL_CAST: &str = "rival";
pub const RIVAL_CLAIM: &str = "clm-rival";

/// An in-memory log on which, just before `cast` appends its `post_claimed`, a rival run
/// claims the same destination and day in its own cast and takes the day on the ledger chain:
/// the interleaving of two runs that both found the day free.
pub struct RivalLog {
    pub inner: InMemoryLog,
    cast: CastId,
    raced: Mutex<bool>,
}

impl RivalLog {
    /// A rival for the first post `cast` claims.
    pub fn against(cast: &str) -> Self {
        RivalLog {
            inner: InMemoryLog::new(),
            cast: CastId::new(cast),
            raced: Mutex::new(false),
        }
    }

    fn race(&self, theirs: &PostClaimed, at_ms: u64) {
        let mut raced = self.raced.lock().unwrap();
        if *raced {
            return;
        }
        *raced = true;
        let rival = PostClaimed {
            claim: ClaimId::new(RIVAL_CLAIM),
            step: "rival".into(),
            body: Digest::ZERO,
            ..theirs.clone()
        };
        let cast = CastId::new(RIVAL_CAST);
        let event = Event::from(rival.clone());
        self.inner
            .append(&cast, Seq::FIRST, &[Pending::new(at_ms, &event)])
            .unwrap();
        let claim = Claim::claimed(&cast, at_ms, &rival);
        // An engagement day is one for the whole deployment (its default day scope).
        assert_eq!(
            take_day_on(&self.inner, DEPLOYMENT, &claim, at_ms).unwrap(),
            Taken::Won
        );
    }
}

impl EventLog for RivalLog {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        if *cast == self.cast {
            for pending in events {
                if let Ok(Event::PostClaimed(c)) =
                    Event::decode(pending.kind, pending.v, &pending.payload)
                    && !c.dry_run
                {
                    self.race(&c, pending.at_ms);
                }
            }
        }
        self.inner.append(cast, expected, events)
    }

    pass_to_inner!();
}

/// Asserts the ledger after a lost race: the rival holds the day (pending), and `cast`'s
/// claim was refused by name, naming the rival.
pub fn assert_lost_to_the_rival(log: &RivalLog, cast: &str) {
    let ledger = ClaimsLedger::load(log).unwrap();
    let rival = ledger.get(&ClaimId::new(RIVAL_CLAIM)).unwrap();
    assert_eq!(rival.status, ClaimStatus::Pending);
    let mine: Vec<&Claim> = ledger
        .claims()
        .filter(|c| c.cast == CastId::new(cast))
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(mine[0].status, ClaimStatus::Refused);
    assert_eq!(
        (mine[0].destination.as_str(), mine[0].day.as_str()),
        (rival.destination.as_str(), rival.day.as_str())
    );
    let reason = mine[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with(DAY_ALREADY_CLAIMED) && reason.contains(RIVAL_CLAIM),
        "{reason}"
    );
}
