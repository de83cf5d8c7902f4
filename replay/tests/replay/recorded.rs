use std::cell::Cell;
use std::rc::Rc;

use castlog_core::env::FixedClock;
use castlog_core::event::{AgentReplied, Event, PromptDispatched};
use castlog_core::id::{CastId, Seq, SocketId, Turn, Visit};
use castlog_core::input::Input;
use castlog_core::machine::Status;
use castlog_core::prompt::{Message, Role, messages_json};
use castlog_events::chain::blob_hash;
use castlog_events::{EventLog, InMemoryLog, Pending};
use castlog_replay::agent::{Agent, AgentTurn, ScriptedAgent, TurnRequest};
use castlog_replay::driver::Driver;
use castlog_replay::recorded::RecordedAgent;
use rstest::rstest;

use crate::drive::{fixture, run};
use crate::openai::{drive_with, events};

/// Asserts two casts recorded the same events, apart from the cast id.
fn assert_same_events(log: &InMemoryLog, a: &str, b: &str) {
    let left = log.read(&CastId::new(a), Seq::FIRST, None).unwrap();
    let right = log.read(&CastId::new(b), Seq::FIRST, None).unwrap();
    assert_eq!(left.len(), right.len(), "{a} and {b} differ in length");
    for (l, r) in left.iter().zip(&right) {
        assert_eq!(
            (l.seq, &l.kind, l.v, l.at_ms),
            (r.seq, &r.kind, r.v, r.at_ms)
        );
        let lp = String::from_utf8_lossy(&l.payload).replace(a, b);
        let rp = String::from_utf8_lossy(&r.payload);
        assert_eq!(lp, rp, "seq {} ({}) differs", l.seq, l.kind);
    }
}

/// A script made of `lines` (JSONL text) in a temporary file.
fn script(dir: &tempfile::TempDir, name: &str, lines: &[String]) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path
}

fn script_lines(path: &str) -> Vec<String> {
    std::fs::read_to_string(fixture(path))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// Counts the calls that reach a live agent.
#[derive(Debug)]
struct Counting<A> {
    inner: A,
    calls: Rc<Cell<usize>>,
}

impl<A: Agent> Agent for Counting<A> {
    fn turn(&mut self, request: &TurnRequest<'_>) -> AgentTurn {
        self.calls.set(self.calls.get() + 1);
        self.inner.turn(request)
    }

    fn origin(&self) -> Option<String> {
        self.inner.origin()
    }
}

#[rstest]
#[case::build_loop("loadouts/build-loop.json", None, "scripts/build-loop.jsonl")]
#[case::consult("loadouts/consult.json", None, "scripts/consult.jsonl")]
#[case::full_auto(
    "pi-materia-default.json",
    Some("Full-Auto"),
    "scripts/full-auto.jsonl"
)]
#[case::planning_consult(
    "pi-materia-default.json",
    Some("Planning-Consult"),
    "scripts/planning-consult.jsonl"
)]
#[case::hojo_consult(
    "pi-materia-default.json",
    Some("Hojo-Consult"),
    "scripts/hojo-consult.jsonl"
)]
fn a_recorded_rerun_reproduces_the_cast(
    #[case] config: &str,
    #[case] loadout: Option<&str>,
    #[case] script: &str,
) {
    let log = InMemoryLog::new();
    assert_eq!(
        run(&log, config, loadout, script, "first-cast"),
        Status::Completed
    );
    // The agent hashes a request as the machine hashes the prompt it records.
    let mut dispatches = 0;
    for event in events(&log, "first-cast") {
        if let Event::PromptDispatched(d) = event {
            // The rendered prompt is not stored: it is rebuilt from the entry blobs.
            assert_eq!(log.get_blob(&d.prompt_hash).unwrap(), None);
            let messages = castlog_projections::prompt::messages(
                &log,
                &castlog_core::prompt::policy::RECOMMENDED,
                &d.prompt_hash,
                &d.placements,
            )
            .unwrap();
            assert_eq!(blob_hash(&messages_json(&messages)), d.prompt_hash);
            dispatches += 1;
        }
    }
    assert!(dispatches > 0);

    let mut agent = RecordedAgent::from_log(&log, &CastId::new("first-cast")).unwrap();
    let stop = drive_with(&log, config, loadout, "second-cast", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    assert_same_events(&log, "first-cast", "second-cast");
    assert_eq!(
        castlog_replay::redecide::redecide(&log, &CastId::new("second-cast")).unwrap(),
        None
    );
}

#[test]
fn recorded_failures_play_back_and_each_attempt_gets_its_own_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = script_lines("scripts/build-loop.jsonl");
    lines.insert(
        2,
        r#"{"error": "transient", "message": "flaky once"}"#.into(),
    );
    lines.insert(
        3,
        r#"{"error": "transient", "message": "flaky twice"}"#.into(),
    );
    let path = script(&dir, "flaky.jsonl", &lines);
    let log = InMemoryLog::new();
    let mut scripted = ScriptedAgent::open(&path, 0).unwrap();
    let stop = drive_with(&log, "loadouts/build-loop.json", None, "src", &mut scripted);
    assert_eq!(stop.status, Status::Completed);

    // One prompt was asked three times: two failures, then a reply; the re-run gets them in
    // that order, not the last answer three times.
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("src")).unwrap();
    let stop = drive_with(&log, "loadouts/build-loop.json", None, "again", &mut agent);
    assert_eq!(stop.status, Status::Completed);
    assert_same_events(&log, "src", "again");
    let failed: Vec<String> = events(&log, "again")
        .into_iter()
        .filter_map(|e| match e {
            Event::AgentFailed(f) => Some(f.message),
            _ => None,
        })
        .collect();
    assert_eq!(failed, ["flaky once", "flaky twice"]);
}

/// Appends `events` to a new cast (the recorded agent reads only dispatches and answers).
fn hand_made(log: &InMemoryLog, cast: &str, events: &[Event]) {
    let pending: Vec<Pending> = events.iter().map(|e| Pending::new(0, e)).collect();
    log.append(&CastId::new(cast), Seq::FIRST, &pending)
        .unwrap();
}

fn dispatched(visit: u32, messages: &[Message]) -> Event {
    Event::from(PromptDispatched {
        socket: SocketId::new("Socket-1"),
        visit: Visit(visit),
        turn: Turn(1),
        prompt_hash: blob_hash(&messages_json(messages)),
        system_hash: None,
        placements: Vec::new(),
        redispatch: false,
    })
}

fn replied(visit: u32, text: &str) -> Event {
    Event::from(AgentReplied {
        socket: SocketId::new("Socket-1"),
        visit: Visit(visit),
        turn: Turn(1),
        text: text.into(),
        usage: None,
        tool_calls: Vec::new(),
        cost: None,
    })
}

fn ask(agent: &mut dyn Agent, messages: &[Message]) -> AgentTurn {
    agent.turn(&TurnRequest {
        messages,
        refinement: false,
        model: None,
        thinking: None,
        tools: &[],
        cwd: None,
        schema: None,
    })
}

#[test]
fn a_repeated_identical_prompt_gets_its_own_answer_and_a_miss_names_the_hash() {
    let same = vec![Message {
        role: Role::User,
        content: "say something".into(),
        tool_call: None,
    }];
    let other = vec![Message {
        role: Role::User,
        content: "something else".into(),
        tool_call: None,
    }];
    let log = InMemoryLog::new();
    hand_made(
        &log,
        "tape",
        &[
            dispatched(1, &same),
            replied(1, "first"),
            dispatched(2, &other),
            replied(2, "other"),
            dispatched(3, &same),
            replied(3, "second"),
        ],
    );
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("tape")).unwrap();
    assert_eq!(agent.recorded(), 3);
    let text = |turn: AgentTurn| match turn {
        AgentTurn::Reply { text, .. } => text,
        other => panic!("expected a reply, got {other:?}"),
    };
    assert_eq!(text(ask(&mut agent, &same)), "first");
    assert_eq!(text(ask(&mut agent, &same)), "second");
    assert_eq!(text(ask(&mut agent, &other)), "other");
    let short = blob_hash(&messages_json(&same)).short();
    let AgentTurn::Exhausted(message) = ask(&mut agent, &same) else {
        panic!("a third ask of the same prompt is a miss");
    };
    assert!(message.contains(&short), "{message}");
    assert!(message.contains("occurrence 3"), "{message}");

    // With a fallback the miss goes to it.
    let calls = Rc::new(Cell::new(0));
    let dir = tempfile::tempdir().unwrap();
    let live = script(&dir, "live.jsonl", &[r#"{"reply": "live"}"#.to_owned()]);
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("tape"))
        .unwrap()
        .with_fallback(Box::new(Counting {
            inner: ScriptedAgent::open(&live, 0).unwrap(),
            calls: Rc::clone(&calls),
        }));
    assert_eq!(text(ask(&mut agent, &same)), "first");
    assert_eq!(text(ask(&mut agent, &same)), "second");
    assert_eq!(text(ask(&mut agent, &same)), "live");
    assert_eq!(calls.get(), 1);
}

#[test]
fn a_cast_the_recording_does_not_cover_stops_naming_the_prompt_hash() {
    let log = InMemoryLog::new();
    run(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "tape",
    );
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("tape")).unwrap();
    let stop = drive_with(&log, "loadouts/consult.json", None, "other", &mut agent);
    assert_eq!(stop.status, Status::AwaitingAgent);
    let asked = events(&log, "other")
        .into_iter()
        .filter_map(|e| match e {
            Event::PromptDispatched(d) => Some(d.prompt_hash),
            _ => None,
        })
        .next_back()
        .unwrap();
    let message = stop.message.unwrap();
    assert!(message.contains(&asked.short()), "{message}");
    assert!(message.contains("tape"), "{message}");
    // Nothing was recorded as an answer.
    assert!(
        !events(&log, "other")
            .iter()
            .any(|e| matches!(e, Event::AgentReplied(_) | Event::AgentFailed(_)))
    );
}

#[test]
fn the_fallback_answers_only_what_the_recording_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let lines = script_lines("scripts/build-loop.jsonl");
    let partial = script(&dir, "partial.jsonl", &lines[..5]);
    let log = InMemoryLog::new();
    let mut scripted = ScriptedAgent::open(&partial, 0).unwrap();
    let stop = drive_with(
        &log,
        "loadouts/build-loop.json",
        None,
        "part",
        &mut scripted,
    );
    assert_eq!(stop.status, Status::AwaitingAgent);

    let calls = Rc::new(Cell::new(0));
    let live = Counting {
        inner: ScriptedAgent::open(&fixture("scripts/build-loop.jsonl"), 5).unwrap(),
        calls: Rc::clone(&calls),
    };
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("part"))
        .unwrap()
        .with_fallback(Box::new(live));
    let stop = drive_with(&log, "loadouts/build-loop.json", None, "whole", &mut agent);
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    assert_eq!(calls.get(), lines.len() - 5);

    let full = "full";
    run(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        full,
    );
    assert_same_events(&log, full, "whole");
}

#[test]
fn a_recorded_interruption_stops_and_resume_goes_on_from_the_next_answer() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = script_lines("scripts/build-loop.jsonl");
    lines.insert(
        3,
        r#"{"error": "interruption", "message": "the model went away"}"#.into(),
    );
    let path = script(&dir, "interrupted.jsonl", &lines);
    let config = "loadouts/build-loop.json";
    // Each resume runs in a "new process": a fresh clock with the same readings.
    let clock = || FixedClock::stepping(1_900_000_000_000, 3);
    let cwd = tempfile::tempdir().unwrap();

    let log = InMemoryLog::new();
    let mut scripted = ScriptedAgent::open(&path, 0).unwrap();
    let stop = drive_with(&log, config, None, "src", &mut scripted);
    assert_eq!(stop.status, Status::AwaitingAgent);
    let first_clock = clock();
    let mut driver = Driver::open(&log, &first_clock, &CastId::new("src"), cwd.path()).unwrap();
    driver.apply(&Input::Resume).unwrap();
    let mut scripted = ScriptedAgent::open(&path, driver.answers_used).unwrap();
    assert_eq!(
        driver.drive(&mut scripted).unwrap().status,
        Status::Completed
    );

    let mut agent = RecordedAgent::from_log(&log, &CastId::new("src")).unwrap();
    let stop = drive_with(&log, config, None, "copy", &mut agent);
    assert_eq!(stop.status, Status::AwaitingAgent);
    // A new process: a new agent that skips what the cast already holds.
    let copy = CastId::new("copy");
    let second_clock = clock();
    let mut driver = Driver::open(&log, &second_clock, &copy, cwd.path()).unwrap();
    driver.apply(&Input::Resume).unwrap();
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("src")).unwrap();
    agent.skip_answered(&log, &copy).unwrap();
    assert_eq!(driver.drive(&mut agent).unwrap().status, Status::Completed);
    assert_same_events(&log, "src", "copy");
}

#[test]
fn a_cast_paused_for_a_person_goes_on_with_the_recorded_refinement() {
    let log = InMemoryLog::new();
    run(
        &log,
        "loadouts/consult.json",
        None,
        "scripts/consult.jsonl",
        "src",
    );
    // The copy gets the first reply from a script of one line and pauses for a person.
    let dir = tempfile::tempdir().unwrap();
    let lines = script_lines("scripts/consult.jsonl");
    let one = script(&dir, "one.jsonl", &lines[..1]);
    let mut scripted = ScriptedAgent::open(&one, 0).unwrap();
    let stop = drive_with(&log, "loadouts/consult.json", None, "copy", &mut scripted);
    assert_eq!(stop.status, Status::AwaitingRefinement);

    // A new process with the recording: the person's recorded answer to that reply comes
    // first, then the rest.
    let clock = FixedClock::stepping(1_800_000_000_000, 7);
    let cwd = tempfile::tempdir().unwrap();
    let copy = CastId::new("copy");
    let mut driver = Driver::open(&log, &clock, &copy, cwd.path()).unwrap();
    let mut agent = RecordedAgent::from_log(&log, &CastId::new("src")).unwrap();
    agent.skip_answered(&log, &copy).unwrap();
    let stop = driver.drive(&mut agent).unwrap();
    assert_eq!(stop.status, Status::Completed, "{stop:?}");
    let inputs: Vec<(&str, Option<String>)> = events(&log, "copy")
        .into_iter()
        .filter_map(|e| match e {
            Event::UserRefined(r) => Some(("refine", r.origin)),
            Event::FinalizeRequested(f) => Some(("continue", f.origin)),
            _ => None,
        })
        .collect();
    assert_eq!(
        inputs,
        [
            ("refine", Some("script".to_owned())),
            ("continue", Some("script".to_owned()))
        ]
    );
    // Same events as the source, apart from the clock of the second process.
    let kinds = |cast: &str| -> Vec<String> {
        log.read(&CastId::new(cast), Seq::FIRST, None)
            .unwrap()
            .into_iter()
            .map(|r| r.kind)
            .collect()
    };
    assert_eq!(kinds("src"), kinds("copy"));
}
