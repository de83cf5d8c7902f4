use castlog_core::event::{Event, SteeringNoted};
use castlog_core::id::{CastId, Seq};
use castlog_events::{CastHead, EventLog, InMemoryLog, Pending};
use castlog_replay::redecide::redecide;

use crate::drive::run;

/// Copies a cast into a new log, letting `edit` change events; the chain is re-sealed, so only
/// re-decide (not the chain check) can tell.
fn rewritten(log: &InMemoryLog, cast: &CastId, edit: impl Fn(u64, Event) -> Event) -> InMemoryLog {
    let records = log.read(cast, Seq::FIRST, None).unwrap();
    let out = InMemoryLog::new();
    let events = castlog_events::Decoder::all(&records).unwrap();
    let pending: Vec<Pending> = records
        .iter()
        .zip(events)
        .map(|(r, event)| Pending::new(r.at_ms, &edit(r.seq.get(), event)))
        .collect();
    out.append(cast, Seq::FIRST, &pending).unwrap();
    out
}

#[test]
fn an_edited_decision_is_a_divergence_at_its_seq() {
    let log = InMemoryLog::new();
    run(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "c",
    );
    let cast = CastId::new("c");
    // Flip the outcome recorded by the first satisfied completion.
    let records = log.read(&cast, Seq::FIRST, None).unwrap();
    let target = records
        .iter()
        .find(|r| {
            r.kind == "socket_completed"
                && r.payload.windows(16).any(|w| w == b"\"satisfied\":true")
        })
        .unwrap()
        .seq
        .get();
    let edited = rewritten(&log, &cast, |seq, event| match event {
        Event::SocketCompleted(mut e) if seq == target => {
            e.satisfied = Some(false);
            Event::SocketCompleted(e)
        }
        other => other,
    });
    let divergence = redecide(&edited, &cast).unwrap().unwrap();
    assert_eq!(divergence.seq, Seq(target));
    assert!(
        divergence.found.contains("\"satisfied\":false"),
        "{divergence:?}"
    );
}

#[test]
fn an_input_after_completion_is_a_divergence() {
    let log = InMemoryLog::new();
    run(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "c",
    );
    let cast = CastId::new("c");
    let head: CastHead = log.head(&cast).unwrap().unwrap();
    let note = Event::from(SteeringNoted {
        text: "too late".into(),
        locked: false,
        origin: None,
    });
    log.append(&cast, head.seq.next(), &[Pending::new(0, &note)])
        .unwrap();
    let divergence = redecide(&log, &cast).unwrap().unwrap();
    assert_eq!(divergence.seq, head.seq.next());
    assert!(divergence.expected.contains("refuses"), "{divergence:?}");
}

#[test]
fn a_changed_time_inside_a_decision_is_a_divergence() {
    let log = InMemoryLog::new();
    run(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "c",
    );
    let cast = CastId::new("c");
    let records = log.read(&cast, Seq::FIRST, None).unwrap();
    // seq 3 (utility_finished) and seq 4 (socket_completed) come from one decision; give seq 4
    // another time while keeping the chain valid.
    let out = InMemoryLog::new();
    let events = castlog_events::Decoder::all(&records).unwrap();
    let pending: Vec<Pending> = records
        .iter()
        .zip(&events)
        .map(|(r, event)| {
            let at = if r.seq == Seq(4) {
                r.at_ms + 1
            } else {
                r.at_ms
            };
            Pending::new(at, event)
        })
        .collect();
    out.append(&cast, Seq::FIRST, &pending).unwrap();
    assert_eq!(records[2].kind, "utility_finished");
    let divergence = redecide(&out, &cast).unwrap().unwrap();
    assert_eq!(divergence.seq, Seq(4));
}

#[test]
fn a_changed_template_is_prompt_drift_at_the_exact_seq() {
    let log = InMemoryLog::new();
    run(
        &log,
        "loadouts/build-loop.json",
        None,
        "scripts/build-loop.jsonl",
        "c",
    );
    let cast = CastId::new("c");
    // The Build materia's template is edited in the frozen loadout (as a renderer or template
    // change would); every recorded prompt stays as it was, and the chain is re-sealed.
    let edited = rewritten(&log, &cast, |_, event| match event {
        Event::CastStarted(mut e) => {
            e.loadout["sockets"]["Socket-3"]["prompt"] =
                "You implement {{item.title}}, tersely.".into();
            Event::CastStarted(e)
        }
        other => other,
    });
    let first_build = log
        .read(&cast, Seq::FIRST, None)
        .unwrap()
        .into_iter()
        .find(|r| {
            r.kind == "prompt_dispatched" && r.payload.windows(10).any(|w| w == b"\"Socket-3\"")
        })
        .unwrap();
    let divergence = redecide(&edited, &cast).unwrap().unwrap();
    assert_eq!(divergence.seq, first_build.seq, "{divergence:?}");
    assert!(
        divergence
            .expected
            .contains("prompt drift at Socket-3 visit 1"),
        "{divergence:?}"
    );
    assert!(
        divergence.found.contains("materiaInstructions"),
        "{divergence:?}"
    );
}
