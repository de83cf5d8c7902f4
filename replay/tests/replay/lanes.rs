//! Parallel lanes driven on a log: the lanes overlap (their recorded start and end times),
//! every lane and the parent re-decide byte for byte, and the heads of the parent and of each
//! lane are the same whatever order the lanes finished in.

use std::time::Duration;

use castlog_core::env::FixedClock;
use castlog_core::event::Event;
use castlog_core::id::{CastId, Digest, Seq};
use castlog_core::machine::Status;
use castlog_events::{EventLog, InMemoryLog, SqliteLog};
use castlog_replay::agent::{Agent, AgentTurn, ScriptedAgent, TurnRequest};
use castlog_replay::driver::{DriveError, Driver, LaneAgents};
use castlog_replay::redecide::redecide;

use crate::drive::{fixture, started};

/// A scripted agent that waits `delay` before each answer (lane timings).
struct Slow {
    inner: ScriptedAgent,
    delay: Duration,
}

impl Agent for Slow {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        std::thread::sleep(self.delay);
        self.inner.turn(request)
    }
    fn local(&self) -> bool {
        true
    }
}

/// Lane agents from the lanes script, lane `slow` waiting `delay` per answer.
fn lane_agents(slow: &'static str, delay: Duration) -> LaneAgents<'static> {
    Box::new(move |lane, used| {
        let inner = ScriptedAgent::open_lane(&fixture("scripts/lanes.jsonl"), &lane.name, used)
            .map_err(|e| DriveError::LaneAgent {
                lane: lane.cast.clone(),
                message: e.to_string(),
            })?;
        let delay = if lane.name == slow {
            delay
        } else {
            Duration::ZERO
        };
        Ok(Box::new(Slow { inner, delay }) as Box<dyn Agent>)
    })
}

/// Runs the lanes fixture as cast `cast` on `log` under a clock stuck at one instant (so the
/// only thing that could differ between runs is the order lanes finish in).
fn run(log: &dyn EventLog, cast: &str, slow: &'static str) -> Status {
    let clock = FixedClock::at(1_800_000_000_000);
    let dir = tempfile::tempdir().unwrap();
    let started = started(fixture("loadouts/lanes.json"), None, cast);
    let mut driver = Driver::start(log, &clock, started, dir.path()).unwrap();
    driver.lanes_with(lane_agents(slow, Duration::from_millis(40)));
    let mut agent = ScriptedAgent::open(&fixture("scripts/lanes.jsonl"), 0).unwrap();
    driver.drive(&mut agent).unwrap().status
}

fn head(log: &dyn EventLog, cast: &str) -> (Seq, Digest) {
    let h = log.head(&CastId::new(cast)).unwrap().unwrap();
    (h.seq, h.hash)
}

#[test]
fn a_parallel_cast_runs_its_lanes_to_the_fan_in_and_every_stream_re_decides() {
    let log = InMemoryLog::new();
    assert_eq!(run(&log, "par", "a"), Status::Completed);
    for cast in ["par", "par.lane-a", "par.lane-b"] {
        assert_eq!(redecide(&log, &CastId::new(cast)).unwrap(), None, "{cast}");
    }
    // Each lane committed to the parent's plan; the parent's join names each lane's head.
    let parent = log.read(&CastId::new("par"), Seq::FIRST, None).unwrap();
    let joined = parent
        .iter()
        .find_map(|r| match r.event() {
            Ok(Event::LanesJoined(j)) => Some(j),
            _ => None,
        })
        .unwrap();
    for lane in &joined.lanes {
        assert_eq!((lane.head, lane.hash), head(&log, lane.cast.as_str()));
    }
    let lane_a = log
        .read(&CastId::new("par.lane-a"), Seq::FIRST, None)
        .unwrap();
    let Ok(Event::LaneStarted(first)) = lane_a[0].event() else {
        panic!("lane a starts with {}", lane_a[0].kind);
    };
    let plan = &parent[usize::try_from(first.parent_seq.get() - 1).unwrap()];
    assert_eq!(plan.kind, "lanes_planned");
    assert_eq!(lane_a[0].prev, plan.hash);
    // The rework in lane a went by the normal rules, for the parent's item WI-3.
    let reworked: Vec<_> = castlog_events::Decoder::all(&lane_a)
        .unwrap()
        .into_iter()
        .filter_map(|event| match event {
            Event::ReworkRouted(e) => e.item.map(|i| i.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(reworked, ["WI-3"]);
}

#[test]
fn heads_of_the_parent_and_each_lane_are_the_same_whatever_order_the_lanes_finished_in() {
    let first = InMemoryLog::new();
    let second = InMemoryLog::new();
    // Lane a slow in one run, lane b in the other.
    assert_eq!(run(&first, "par", "a"), Status::Completed);
    assert_eq!(run(&second, "par", "b"), Status::Completed);
    for cast in ["par", "par.lane-a", "par.lane-b"] {
        assert_eq!(head(&first, cast), head(&second, cast), "{cast}");
    }
}

#[test]
fn lanes_overlap_by_their_recorded_times() {
    // A real clock and a durable log: the lanes' recorded spans overlap.
    let dir = tempfile::tempdir().unwrap();
    let log = SqliteLog::open(dir.path().join("castlog.db")).unwrap();
    let clock = castlog_replay::clock::SystemClock;
    let started = started(fixture("loadouts/lanes.json"), None, "par");
    let mut driver = Driver::start(&log, &clock, started, dir.path()).unwrap();
    driver.lanes_with(lane_agents("a", Duration::from_millis(60)));
    let mut agent = ScriptedAgent::open(&fixture("scripts/lanes.jsonl"), 0).unwrap();
    assert_eq!(driver.drive(&mut agent).unwrap().status, Status::Completed);
    let span = |cast: &str| {
        let records = log.read(&CastId::new(cast), Seq::FIRST, None).unwrap();
        (records[0].at_ms, records[records.len() - 1].at_ms)
    };
    let (a_start, a_end) = span("par.lane-a");
    let (b_start, b_end) = span("par.lane-b");
    assert!(
        a_start < b_end && b_start < a_end,
        "lane a ran {a_start}..{a_end}, lane b {b_start}..{b_end}"
    );
}

/// A lane agent that sets the interrupt flag (Ctrl-C) after its first answer.
struct Interrupting {
    inner: ScriptedAgent,
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Agent for Interrupting {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        let answer = self.inner.turn(request);
        self.flag.store(true, std::sync::atomic::Ordering::SeqCst);
        answer
    }
    fn local(&self) -> bool {
        true
    }
}

#[test]
fn ctrl_c_aborts_the_parent_and_its_running_lanes_and_resume_finishes_them() {
    let log = InMemoryLog::new();
    let clock = FixedClock::at(1_800_000_000_000);
    let dir = tempfile::tempdir().unwrap();
    let script = fixture("scripts/lanes.jsonl");
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = started(fixture("loadouts/lanes.json"), None, "par");
    let mut driver = Driver::start(&log, &clock, started, dir.path()).unwrap();
    driver.interrupt_on(std::sync::Arc::clone(&flag));
    let lane_flag = std::sync::Arc::clone(&flag);
    let lane_script = script.clone();
    driver.lanes_with(Box::new(move |lane, used| {
        let inner = ScriptedAgent::open_lane(&lane_script, &lane.name, used).unwrap();
        Ok(Box::new(Interrupting {
            inner,
            flag: std::sync::Arc::clone(&lane_flag),
        }) as Box<dyn Agent>)
    }));
    let mut agent = ScriptedAgent::open(&script, 0).unwrap();
    assert_eq!(driver.drive(&mut agent).unwrap().status, Status::Aborted);
    drop(driver);
    for cast in ["par", "par.lane-a", "par.lane-b"] {
        let (state, _) = castlog_replay::driver::fold(&log, &CastId::new(cast)).unwrap();
        assert_eq!(state.status, Status::Aborted, "{cast}");
    }

    // `castlog resume` of the parent: the aborted lanes go on where they stopped.
    flag.store(false, std::sync::atomic::Ordering::SeqCst);
    let mut driver = Driver::open(&log, &clock, &CastId::new("par"), dir.path()).unwrap();
    driver.apply(&castlog_core::input::Input::Resume).unwrap();
    driver.lanes_with(lane_agents("a", Duration::ZERO));
    let used = driver.answers_used;
    let mut agent = ScriptedAgent::open(&script, used).unwrap();
    assert_eq!(driver.drive(&mut agent).unwrap().status, Status::Completed);
    for cast in ["par", "par.lane-a", "par.lane-b"] {
        assert_eq!(redecide(&log, &CastId::new(cast)).unwrap(), None, "{cast}");
    }
}
