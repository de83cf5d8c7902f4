//! Two runs racing for one destination and day, made deterministic: both passed the ledger
//! check before either claimed, so only the compare-and-set on the destination's ledger chain
//! (`take_day`) can refuse the second. [`RivalLog`] plays the other run at exactly that moment.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use castlog_core::claims::{Claim, ClaimStatus, DAY_ALREADY_CLAIMED};
use castlog_core::event::{Event, PostClaimed};
use castlog_core::id::{CastId, ClaimId, Digest, Seq};
use castlog_core::input::SendOutcome;
use castlog_core::machine::Status;
use castlog_events::{EventLog, InMemoryLog, LogError, Pending, Recorded};
use castlog_projections::claims::ClaimsLedger;
use castlog_replay::ledger::{Taken, take_day};
use castlog_replay::sender::{Outbound, Sender};

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
        assert_eq!(take_day(&self.inner, &claim, at_ms).unwrap(), Taken::Won);
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

/// A sender that counts its calls and stages every post.
struct Counting(Arc<AtomicUsize>);

impl Sender for Counting {
    fn send(&mut self, _post: &Outbound<'_>) -> SendOutcome {
        self.0.fetch_add(1, Ordering::SeqCst);
        SendOutcome::Staged {
            message_id: "m-1".into(),
        }
    }
    fn spec(&self) -> String {
        "test:counting".into()
    }
}

/// Drives the post fixture as `cast` with `--post`; returns its status and how often the
/// sender ran.
fn drive_post(log: &(impl EventLog + ?Sized), cast: &str) -> (Status, usize) {
    let calls = Arc::new(AtomicUsize::new(0));
    let status = crate::drive::run_with(
        log,
        "loadouts/post.json",
        None,
        "scripts/post.jsonl",
        cast,
        Some(Box::new(Counting(calls.clone()))),
    );
    (status, calls.load(Ordering::SeqCst))
}

/// A post socket whose day is taken between its ledger check and its own claim is refused by
/// the compare-and-set, and its sender never runs.
#[test]
fn a_post_socket_that_loses_the_day_race_is_refused_without_sending() {
    let log = RivalLog::against("late");
    // A refusal routes like not_satisfied: Announce → end.
    assert_eq!(drive_post(&log, "late"), (Status::Completed, 0));
    assert_lost_to_the_rival(&log, "late");
}

/// Without a rival the same drive posts once: the refusal above is the race's doing.
#[test]
fn a_post_socket_without_a_rival_posts_once() {
    let log = InMemoryLog::new();
    assert_eq!(drive_post(&log, "alone"), (Status::Completed, 1));
    let ledger = ClaimsLedger::load(&log).unwrap();
    assert_eq!(
        ledger.claims().map(|c| c.status).collect::<Vec<_>>(),
        [ClaimStatus::Staged]
    );
}
