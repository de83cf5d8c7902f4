use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use castlog_core::env::FixedClock;
use castlog_core::id::{CastId, Seq};
use castlog_core::machine::Status;
use castlog_events::log::Appending;
use castlog_events::{EventLog, InMemoryLog, LogError, Pending, Recorded};
use castlog_replay::agent::{Agent, AgentTurn, ScriptedAgent, TurnRequest};
use castlog_replay::driver::{Driver, Notice, STEPS_IN_FLIGHT};

use crate::drive::{fixture, started};

/// The in-memory log, with begun appends counted until they are waited for.
struct Watched {
    inner: InMemoryLog,
    undurable: Arc<AtomicUsize>,
}

impl EventLog for Watched {
    fn append(
        &self,
        cast: &CastId,
        expected: Seq,
        events: &[Pending],
    ) -> Result<Vec<Recorded>, LogError> {
        self.inner.append(cast, expected, events)
    }
    pass_to_inner!();
    fn begin_append_with_blobs(
        &self,
        cast: &CastId,
        expected: Seq,
        blobs: &[Vec<u8>],
        events: &[Pending],
    ) -> Result<Appending<'_>, LogError> {
        let records = self
            .inner
            .append_with_blobs(cast, expected, blobs, events)?;
        self.undurable.fetch_add(1, Ordering::SeqCst);
        let undurable = Arc::clone(&self.undurable);
        Ok(Appending::waiting(records, move || {
            undurable.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }))
    }
}

/// A script, local or not, that notes how many begun steps were not yet durable at each turn.
struct Probe {
    script: ScriptedAgent,
    local: bool,
    undurable: Arc<AtomicUsize>,
    seen: Vec<usize>,
}

impl Agent for Probe {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        self.seen.push(self.undurable.load(Ordering::SeqCst));
        self.script.turn(request)
    }
    fn origin(&self) -> Option<String> {
        self.script.origin()
    }
    fn local(&self) -> bool {
        self.local
    }
}

/// Drives the build-loop fixture with a probe, with at most `limit` steps in flight if given;
/// returns its observations, the events the observer was told about (with the undurable count
/// at each), and the log.
fn drive(local: bool, limit: Option<usize>) -> (Vec<usize>, Vec<(String, usize)>, Watched) {
    let started = started(fixture("loadouts/build-loop.json"), None, "c");
    let undurable = Arc::new(AtomicUsize::new(0));
    let log = Watched {
        inner: InMemoryLog::new(),
        undurable: Arc::clone(&undurable),
    };
    let clock = FixedClock::stepping(1_800_000_000_000, 7);
    let dir = tempfile::tempdir().unwrap();
    let told = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let mut probe = Probe {
        script: ScriptedAgent::open(&fixture("scripts/build-loop.jsonl"), 0).unwrap(),
        local,
        undurable: Arc::clone(&undurable),
        seen: Vec::new(),
    };
    {
        let mut driver = Driver::start(&log, &clock, started, dir.path()).unwrap();
        if let Some(limit) = limit {
            driver.limit_steps_in_flight(limit);
        }
        let counter = Arc::clone(&undurable);
        let heard = std::rc::Rc::clone(&told);
        driver.observe(Box::new(move |notice| {
            if let Notice::Recorded { event, .. } = notice {
                heard
                    .borrow_mut()
                    .push((event.kind().to_owned(), counter.load(Ordering::SeqCst)));
            }
        }));
        let stop = driver.drive(&mut probe).unwrap();
        assert_eq!(stop.status, Status::Completed);
        assert_eq!(
            undurable.load(Ordering::SeqCst),
            0,
            "drive returned with steps not durable"
        );
    }
    let told = told.borrow().clone();
    (probe.seen, told, log)
}

#[test]
fn an_agent_that_is_not_local_is_asked_only_when_every_step_is_durable() {
    let (seen, told, _) = drive(false, None);
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|&n| n == 0),
        "turns saw undurable steps: {seen:?}"
    );
    assert!(!told.is_empty());
}

#[rstest::rstest]
fn a_local_agent_is_asked_while_at_most_the_last_steps_wait_to_be_durable(
    #[values(1, 2, 3)] limit: usize,
) {
    let (seen, told, _) = drive(true, Some(limit));
    assert!(
        seen.contains(&limit),
        "no turn had {limit} steps in flight: {seen:?}"
    );
    assert!(
        seen.iter().all(|&n| n <= limit),
        "too many steps in flight: {seen:?}"
    );
    // The observer hears of a begun step's events only once it is durable: never more in
    // flight than the steps after it.
    assert!(told.iter().all(|(_, n)| *n < limit), "{told:?}");
}

#[test]
fn by_default_a_local_agent_has_every_step_of_a_short_cast_in_flight() {
    let (seen, _, _) = drive(true, None);
    assert!(seen.len() < STEPS_IN_FLIGHT, "not a short cast: {seen:?}");
    // Each turn sees every step begun before it, none waited for.
    assert!(seen.windows(2).all(|w| w[1] > w[0]), "{seen:?}");
}

#[test]
fn the_log_is_the_same_whether_steps_are_pipelined_or_not() {
    let (_, told_strict, strict) = drive(false, None);
    let (_, told_piped, piped) = drive(true, None);
    let cast = CastId::new("c");
    assert_eq!(strict.head(&cast).unwrap(), piped.head(&cast).unwrap());
    let kinds = |t: &[(String, usize)]| t.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    assert_eq!(kinds(&told_strict), kinds(&told_piped));
}
